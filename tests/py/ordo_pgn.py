"""Games with the counts of a pairings CSV (a,b,wins_a,draws,losses_a) as a PGN for Ordo:
colours alternate within each pairing, results in the order wins, draws, losses.

Usage: ordo_pgn.py PAIRINGS.csv > games.pgn
"""

import csv
import sys

n = 0
with open(sys.argv[1]) as f:
    for row in csv.DictReader(f):
        a, b = row["a"], row["b"]
        results = ["1-0"] * int(row["wins_a"]) + ["1/2-1/2"] * int(row["draws"]) + ["0-1"] * int(row["losses_a"])
        for i, r in enumerate(results):
            white, black = (a, b) if i % 2 == 0 else (b, a)
            if i % 2 == 1:
                r = {"1-0": "0-1", "0-1": "1-0"}.get(r, r)
            n += 1
            print(f'[Event "golden"]\n[Round "{n}"]\n[White "{white}"]\n[Black "{black}"]\n[Result "{r}"]\n\n{r}\n')
