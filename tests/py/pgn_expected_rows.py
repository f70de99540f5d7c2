"""Independent check of `lakefish ingest pgn`: python-chess reads the PGN, pyarrow reads the lake.

Usage: pgn_expected_rows.py PGN POSITIONS_DIR GAMES_DIR
Prints one JSON object: counts on both sides and the first mismatches (empty when all agree).
The score conversion follows Stockfish 17's win-rate model (the lake's documented unit).

Games the ingest must skip, as python-chess sees them: variants other than standard chess and
Chess960, games python-chess reports errors in (an illegal move), and games with a null move
played while in check (python-chess plays it into an impossible position; the lake skips them).
Moves are written as python-chess's `board.uci(move)`: king takes rook castling on a Chess960
board, `0000` for a null move. Lake parts are read in path order, so games are compared in the
order of their month partition (`UTCDate`, else `Date`), file order within a month.
"""
import glob
import json
import math
import re
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


def month(headers):
    date = headers.get("UTCDate") or headers.get("Date") or ""
    m = re.match(r"(\d{4})\.(\d{2})", date)
    return f"month={m.group(1)}-{m.group(2)}" if m else "month=unknown"


def skip_reason(game):
    """Why the ingest must skip `game`, or None."""
    headers = game.headers
    if "Variant" in headers and not headers.is_chess960():
        try:
            if headers.variant() is not chess.Board:
                return "variant " + headers["Variant"]
        except ValueError:
            return "variant " + headers["Variant"]
    if game.errors:
        return "error: " + str(game.errors[0])
    board = game.board()
    for node in game.mainline():
        if not node.move and board.is_check():
            return "null move in check"
        board.push(node.move)
    return None


def expected(pgn_path):
    games, skipped, read = [], [], 0
    with open(pgn_path, encoding="utf-8-sig") as f:
        while True:
            game = chess.pgn.read_game(f)
            if game is None:
                break
            read += 1
            why = skip_reason(game)
            if why is not None:
                skipped.append([read, why])
                continue
            res = {"1-0": 1, "0-1": -1, "1/2-1/2": 0}.get(game.headers.get("Result"))
            board = game.board()
            chess960 = board.chess960
            rows, evals = [], 0
            pending = None
            for node in game.mainline():
                ply = board.ply()
                score = to_internal(board, pending) if pending is not None else None
                r = None if res is None else (res if board.turn == chess.WHITE else -res)
                rows.append((board.fen(), board.uci(node.move), score, r, ply))
                board.push(node.move)
                pov = node.eval()
                pending = pov.white() if pov is not None else None
                evals += pov is not None
            games.append((month(game.headers), rows, chess960, evals))
    games.sort(key=lambda g: g[0])  # stable: file order within a month
    return games, skipped, read


def lake_rows(directory):
    out = []
    for path in sorted(glob.glob(f"{directory}/**/*.parquet", recursive=True)):
        t = pq.read_table(path, partitioning=None).to_pydict()
        out.extend(zip(t["fen"], t["move"], t["score"], t["result"], t["ply"]))
    return out


def lake_games(directory):
    """The games table's chess960 flags, in part order (false in parts written before it)."""
    out = []
    for path in sorted(glob.glob(f"{directory}/**/*.parquet", recursive=True)):
        t = pq.read_table(path, partitioning=None)
        flags = t.column("chess960").to_pylist() if "chess960" in t.column_names else [False] * t.num_rows
        out.extend(flags)
    return out


def main():
    pgn, positions, games_dir = sys.argv[1:4]
    games, skipped, read = expected(pgn)
    want = [row for g in games for row in g[1]]
    got = lake_rows(positions)
    want_960 = [g[2] for g in games]
    got_960 = lake_games(games_dir)
    mismatches = [
        {"row": i, "expected": list(w), "lake": list(g)}
        for i, (w, g) in enumerate(zip(want, got)) if tuple(w) != tuple(g)
    ][:5]
    print(json.dumps({
        "games": len(games),
        "games_read": read,
        "skipped": skipped,
        "lake_games": len(got_960),
        "expected_rows": len(want),
        "lake_rows": len(got),
        "expected_scored": sum(w[2] is not None for w in want),
        "lake_scored": sum(g[2] is not None for g in got),
        "evals_in_file": sum(g[3] for g in games),
        "mismatches": mismatches,
        "expected_chess960": sum(want_960),
        "lake_chess960": sum(got_960),
        "chess960_mismatches": [i for i, (w, g) in enumerate(zip(want_960, got_960)) if w != g][:5],
        "null_moves": sum(w[1] == "0000" for w in want),
    }))


main()
