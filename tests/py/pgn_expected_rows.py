"""Independent check of `lakefish ingest pgn`: python-chess reads the PGN, pyarrow reads the lake.

Usage: pgn_expected_rows.py PGN POSITIONS_DIR GAMES_DIR
Prints one JSON object: counts on both sides and the first mismatches (empty when all agree).
The score conversion follows Stockfish 17's win-rate model (the lake's documented unit).
"""
import glob
import json
import math
import sys

import chess
import chess.pgn
import pyarrow.parquet as pq

AS = [-37.45051876, 121.19101539, -132.78783573, 420.70576692]


def to_internal(board, white_score):
    stm_white = board.turn == chess.WHITE
    mate = white_score.mate()
    if mate is not None:
        n = mate if stm_white else -mate
        plies = 2 * n - 1 if n > 0 else -2 * n
        v = 32000 - min(plies, 246)
        return v if n > 0 else -v
    cp = white_score.score() if stm_white else -white_score.score()
    m = sum(len(board.pieces(p, c)) * w for p, w in
            [(chess.PAWN, 1), (chess.KNIGHT, 3), (chess.BISHOP, 3), (chess.ROOK, 5), (chess.QUEEN, 9)]
            for c in (chess.WHITE, chess.BLACK))
    m = min(max(m, 17), 78) / 58.0
    a = ((AS[0] * m + AS[1]) * m + AS[2]) * m + AS[3]
    x = cp * a / 100.0
    v = math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)
    return max(-31506, min(31506, v))


def expected(pgn_path):
    rows, games, evals = [], 0, 0
    with open(pgn_path, encoding="utf-8-sig") as f:
        while True:
            game = chess.pgn.read_game(f)
            if game is None:
                break
            games += 1
            res = {"1-0": 1, "0-1": -1, "1/2-1/2": 0}.get(game.headers.get("Result"))
            board = game.board()
            pending = None
            for node in game.mainline():
                ply = board.ply()
                score = to_internal(board, pending) if pending is not None else None
                r = None if res is None else (res if board.turn == chess.WHITE else -res)
                rows.append((board.fen(), node.move.uci(), score, r, ply))
                board.push(node.move)
                pov = node.eval()
                pending = pov.white() if pov is not None else None
                evals += pov is not None
    return rows, games, evals


def lake_rows(directory):
    out = []
    for path in sorted(glob.glob(f"{directory}/**/*.parquet", recursive=True)):
        t = pq.read_table(path, partitioning=None).to_pydict()
        out.extend(zip(t["fen"], t["move"], t["score"], t["result"], t["ply"]))
    return out


def main():
    pgn, positions, games_dir = sys.argv[1:4]
    want, games, evals = expected(pgn)
    got = lake_rows(positions)
    lake_games = sum(pq.read_table(p, partitioning=None).num_rows
                     for p in glob.glob(f"{games_dir}/**/*.parquet", recursive=True))
    mismatches = [
        {"row": i, "expected": list(w), "lake": list(g)}
        for i, (w, g) in enumerate(zip(want, got)) if tuple(w) != tuple(g)
    ][:5]
    print(json.dumps({
        "games": games,
        "lake_games": lake_games,
        "expected_rows": len(want),
        "lake_rows": len(got),
        "expected_scored": sum(w[2] is not None for w in want),
        "lake_scored": sum(g[2] is not None for g in got),
        "evals_in_file": evals,
        "mismatches": mismatches,
    }))


main()
