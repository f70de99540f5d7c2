"""Independent counts of lakefish's mask rules over a dataset's Parquet parts.

Usage: mask_counts.py LAKE DATASET DEFINITIONS_JSON

Reads the positions with DuckDB (file name and row number per row), decides every row with
python-chess and the formulas written out below from the rules' descriptions
(schemas/src/mask.rs), and prints, per definition, the kept count and how many rows differ
from the mask lakefish wrote (read back with DuckDB too).
"""

import json
import math
import os
import sys

import chess
import duckdb

MASK64 = (1 << 64) - 1


def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def fnv1a64(s):
    h = 0xCBF29CE484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001B3) & MASK64
    return h


SALTS = {"random-skip": 0x52414E44, "wld": 0x574C4400, "piece-count": 0x50434E54}


def draw(seed, rule, part, row):
    key = seed ^ SALTS[rule] ^ fnv1a64(part) ^ ((row * 0x9E3779B97F4A7C15) & MASK64)
    return (splitmix64(key) >> 11) / float(1 << 53)


def score_result_prob(score, ply, result):
    m = min(ply, 240) / 64.0
    a = ((-3.68389304 * m + 30.07065921) * m - 60.52878723) * m + 149.53378557
    b = 1.5 * (((-2.0181857 * m + 15.85685038) * m - 29.83452023) * m + 47.59078827)
    x = max(-2000.0, min(2000.0, 100.0 * score / 208.0))
    win = 1.0 / (1.0 + math.exp((a - x) / b))
    loss = 1.0 / (1.0 + math.exp((a + x) / b))
    return win if result > 0 else loss if result < 0 else 1.0 - win - loss


VALUES = {chess.PAWN: 208, chess.KNIGHT: 781, chess.BISHOP: 825, chess.ROOK: 1276, chess.QUEEN: 2538}


LETTERS = {"p": 208, "n": 781, "b": 825, "r": 1276, "q": 2538, "k": 0}


def material(fen):
    """Men on the board and the balance from the side to move, read off the FEN's fields."""
    placement, turn = fen.split()[:2]
    men, balance = 0, 0
    for c in placement:
        v = LETTERS.get(c.lower())
        if v is not None:
            men += 1
            balance += v if c.isupper() else -v
    return men, balance if turn == "w" else -balance


def spline(y, pc):
    if pc <= 0:
        return y[0]
    if pc >= 32:
        return y[4]
    i = min(int(pc / 8), 3)
    t = (pc - 8 * i) / 8.0

    def slope(k):
        if k == 0:
            return y[1] - y[0]
        if k == 4:
            return y[4] - y[3]
        return (y[k + 1] - y[k - 1]) / 2.0

    h00, h10 = 2 * t**3 - 3 * t**2 + 1, t**3 - 2 * t**2 + t
    h01, h11 = -2 * t**3 + 3 * t**2, t**3 - t**2
    return max(0.0, h00 * y[i] + h10 * slope(i) + h01 * y[i + 1] + h11 * slope(i + 1))


def decide(d, row, cache):
    """Every rule but piece-count: None (dropped) or the row's piece count."""
    part, n, fen, mv, score, ply, result = row
    rules = d.get("rules", [{"rule": "quiet"}])
    if rules == [{"rule": "all"}]:
        return 0
    if score is None:
        return None
    if d.get("min_ply") is not None and ply < d["min_ply"]:
        return None
    if d.get("max_abs_score") is not None and abs(score) > d["max_abs_score"]:
        return None
    seed = d.get("seed", 0)
    for r in rules:
        kind = r["rule"]
        if kind == "quiet":
            if fen not in cache:  # python-chess only where the quiet rule asks
                cache[fen] = chess.Board(fen)
            board, m = cache[fen], chess.Move.from_uci(mv)
            if board.is_check() or board.is_capture(m) or m.promotion:
                return None
        elif kind == "early-skip" and ply <= r["plies"]:
            return None
        elif kind == "simple-eval-skip" and abs(material(fen)[1]) < r["below"]:
            return None
        elif kind == "random-skip" and draw(seed, kind, part, n) < r["skip"] / (r["skip"] + 1.0):
            return None
        elif kind == "wld" and (result is None or draw(seed, kind, part, n) >= score_result_prob(score, ply, result)):
            return None
    return material(fen)[0]


def main():
    lake, dataset, definitions = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    prefix = f"{lake}/positions/source=binpack/dataset={dataset}"
    con = duckdb.connect()
    rows = con.execute(
        f"select filename, file_row_number, fen, move, score, ply, result "
        f"from read_parquet('{prefix}/*.parquet', filename=true, file_row_number=true) "
        f"order by filename, file_row_number"
    ).fetchall()
    rows = [(os.path.basename(f), n, fen, mv, s, p, r) for f, n, fen, mv, s, p, r in rows]
    cache, out = {}, {}
    for d in definitions:
        decided = [decide(d, row, cache) for row in rows]
        pc = next((r for r in d.get("rules", []) if r["rule"] == "piece-count"), None)
        if pc is None:
            keep = [k is not None for k in decided]
        else:
            hist = [0] * 33
            for k in decided:
                if k is not None:
                    hist[min(k, 32)] += 1
            w = [spline(pc["weights"], c) for c in range(33)]
            total_w, total_n = sum(w), sum(hist)
            ratio = [total_n * w[c] / (total_w * hist[c]) if w[c] > 0 and hist[c] > 0 else None for c in range(33)]
            alpha = (1.0 - pc["max_skip"]) / min(r for r in ratio if r is not None)
            accept = [min(1.0, alpha * r) if r is not None else 0.0 for r in ratio]
            keep = [
                k is not None and draw(d.get("seed", 0), "piece-count", row[0], row[1]) < accept[min(k, 32)]
                for k, row in zip(decided, rows)
            ]
        mask = con.execute(
            f"select filename, file_row_number, keep from read_parquet("
            f"'{lake}/masks/{d['name']}/source=binpack/dataset={dataset}/*.parquet', "
            f"filename=true, file_row_number=true) order by filename, file_row_number"
        ).fetchall()
        differ = sum(1 for k, (_, _, m) in zip(keep, mask) if k != m) + abs(len(mask) - len(keep))
        out[d["name"]] = {"rows": len(rows), "kept": sum(keep), "differ": differ}
    print(json.dumps(out))


main()
