"""Stockfish's own scores for a dataset's positions, as lakefish stores scores.

Usage: rescore_check.py LAKE DATASET STOCKFISH DEPTH

Reads the rows with DuckDB, asks Stockfish (python-chess's engine module; Threads=1,
Hash=16, ucinewgame before each position) for `go depth DEPTH`, converts its UCI score to
Stockfish's internal units as lakefish documents it (engine/src/scores.rs: cp · a(material)
/ 100 with Stockfish 17's win-rate model, mates as VALUE_MATE − plies), and prints the
rows' stored scores beside the engine's as JSON.
"""

import json
import sys

import chess
import chess.engine
import duckdb

AS = [-37.45051876, 121.19101539, -132.78783573, 420.70576692]
MAX_EVAL = 32000 - 246 - 1 - 246 - 1


def internal(score, board):
    if score.is_mate():
        moves = score.mate()
        plies = 2 * moves - 1 if moves > 0 else -2 * moves
        v = 32000 - min(plies, 246)
        return v if moves > 0 else -v
    mat = sum(
        w * len(board.pieces(p, c))
        for p, w in [(chess.PAWN, 1), (chess.KNIGHT, 3), (chess.BISHOP, 3), (chess.ROOK, 5), (chess.QUEEN, 9)]
        for c in chess.COLORS
    )
    m = min(max(mat, 17), 78) / 58.0
    a = ((AS[0] * m + AS[1]) * m + AS[2]) * m + AS[3]
    # Rust's f64::round: halves away from zero.
    x = score.score() * a / 100.0
    v = int(x + 0.5) if x >= 0 else -int(-x + 0.5)
    return max(-MAX_EVAL, min(MAX_EVAL, v))


def main():
    lake, dataset, program, depth = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    rows = duckdb.connect().execute(
        f"select fen, score from read_parquet("
        f"'{lake}/positions/source=binpack/dataset={dataset}/*.parquet', filename=true, "
        f"file_row_number=true) order by filename, file_row_number"
    ).fetchall()
    engine = chess.engine.SimpleEngine.popen_uci(program)
    engine.configure({"Threads": 1, "Hash": 16})
    out = []
    for fen, stored in rows:
        board = chess.Board(fen)
        # A new game object per position: python-chess sends ucinewgame before it.
        info = engine.analyse(board, chess.engine.Limit(depth=depth), game=object())
        out.append([stored, internal(info["score"].relative, board)])
    engine.quit()
    print(json.dumps(out))


main()
