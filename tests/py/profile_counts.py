"""Independent counts of a lakefish dataset profile over the dataset's Parquet parts.

Usage: profile_counts.py LAKE SOURCE DATASET

Reads the positions with DuckDB and counts, from the profile's description
(jobs/src/profile.rs) written out here: rows; rows with a score, with a result, with both;
histograms of score (by 100 internal units, below -3000 in -3100, 3000 and above in 3000),
ply (by 10, 400 and above in 400), men on the board and result; rows whose position (the
FEN's first four fields) an earlier row had (= rows - distinct positions); and rows whose
score and result disagree: the expected points of Stockfish's win-rate model for the side
to move (win + half a draw, at the position's material) more than half a point from the
result's (1, 1/2, 0). Prints the counts as JSON, keyed as lakefish's profile.json.
"""

import json
import math
import os
import sys

import duckdb

AS = [-37.45051876, 121.19101539, -132.78783573, 420.70576692]
BS = [90.26261072, -137.26549898, 71.10130540, 51.35259597]
VALUES = {"p": 1, "n": 3, "b": 3, "r": 5, "q": 9}


def poly(c, m):
    return ((c[0] * m + c[1]) * m + c[2]) * m + c[3]


def win_rate(v, material):
    m = min(max(material, 17), 78) / 58.0
    a, b = poly(AS, m), poly(BS, m)
    return 1.0 / (1.0 + math.exp((a - v) / b))


def material(board):
    return sum(VALUES.get(ch.lower(), 0) for ch in board)


def main():
    lake, source, dataset = sys.argv[1:4]
    parts = os.path.join(lake, "positions", f"source={source}", f"dataset={dataset}", "**", "*.parquet")
    con = duckdb.connect()
    con.execute(
        f"CREATE VIEW p AS SELECT fen, score, result, ply FROM read_parquet('{parts}', hive_partitioning = false)"
    )
    one = lambda q: con.execute(q).fetchone()[0]
    hist = lambda expr, where="TRUE": {
        str(k): n for k, n in con.execute(f"SELECT {expr} AS k, count(*) FROM p WHERE {where} GROUP BY k").fetchall()
    }
    out = {
        "rows": one("SELECT count(*) FROM p"),
        "scored": one("SELECT count(score) FROM p"),
        "with_result": one("SELECT count(result) FROM p"),
        "scored_with_result": one("SELECT count(*) FROM p WHERE score IS NOT NULL AND result IS NOT NULL"),
        "score": hist("least(greatest(floor(score / 100.0) * 100, -3100), 3000)::INTEGER", "score IS NOT NULL"),
        "ply": hist("least(ply // 10 * 10, 400)"),
        "men": hist("length(regexp_replace(split_part(fen, ' ', 1), '[^A-Za-z]', '', 'g'))"),
        "result": hist("result", "result IS NOT NULL"),
        "repeated": one(
            "SELECT count(*) - count(DISTINCT array_to_string(list_slice(string_split(fen, ' '), 1, 4), ' ')) FROM p"
        ),
    }
    disagreeing = 0
    for fen, score, result in con.execute(
        "SELECT fen, score, result FROM p WHERE score IS NOT NULL AND result IS NOT NULL"
    ).fetchall():
        m = material(fen.split(" ")[0])
        win, loss = win_rate(score, m), win_rate(-score, m)
        expected = win + 0.5 * max(1.0 - win - loss, 0.0)
        if abs(expected - (result + 1) / 2.0) > 0.5:
            disagreeing += 1
    out["disagreeing"] = disagreeing
    print(json.dumps(out))


if __name__ == "__main__":
    main()
