"""Checks a qsearch-leaf transform's output against its input with python-chess.

Usage: qleaf_check.py LAKE INPUT_DATASET OUTPUT_DATASET [SAMPLE]

Reads both datasets' rows in order with DuckDB. For every changed row and a sample of the
others, the leaf must be a valid position reached from the input row's by captures and
promotions (or evasions in check), not in check unless mated, and quiet on material: a full
captures-and-promotions search (no pruning) gains nothing over its static material. The
score and result are the input's, negated when the side to move changed; the ply advances by
the plies between. Prints counts as JSON.
"""

import json
import sys

import chess
import duckdb

VALUES = {chess.PAWN: 208, chess.KNIGHT: 781, chess.BISHOP: 825, chess.ROOK: 1276, chess.QUEEN: 2538}


def material(b):
    return sum(v * (len(b.pieces(p, b.turn)) - len(b.pieces(p, not b.turn))) for p, v in VALUES.items())


def qsearch(b, alpha, beta, depth=0):
    """Negamax over captures and promotions (all evasions in check), material at the leaves."""
    in_check = b.is_check()
    moves = list(b.legal_moves)
    if not moves:
        return -32000 + depth if in_check else 0
    best = -10**9
    if not in_check:
        stand = material(b)
        if stand >= beta or depth >= 40:
            return stand
        alpha = max(alpha, stand)
        best = stand
        moves = [m for m in moves if b.is_capture(m) or m.promotion]

    def gain(m):  # most valuable victim first: more cut-offs, the same value
        victim = b.piece_type_at(m.to_square) or (chess.PAWN if b.is_en_passant(m) else 0)
        return -(VALUES.get(victim, 0) + VALUES.get(m.promotion, 0))

    moves.sort(key=gain)
    for m in moves:
        b.push(m)
        v = -qsearch(b, -beta, -alpha, depth + 1)
        b.pop()
        if v > best:
            best = v
            alpha = max(alpha, v)
            if alpha >= beta:
                break
    return best


def reachable(start, leaf_fen, plies):
    """The leaf is `plies` captures/promotions (evasions in check) from `start`."""
    target = chess.Board(leaf_fen).board_fen(), chess.Board(leaf_fen).turn
    def walk(b, left):
        if left == 0:
            return (b.board_fen(), b.turn) == target
        for m in b.legal_moves:
            if b.is_check() or b.is_capture(m) or m.promotion:
                b.push(m)
                ok = walk(b, left - 1)
                b.pop()
                if ok:
                    return True
        return False
    return walk(start, plies)


def rows(con, lake, dataset):
    return con.execute(
        f"select fen, move, score, ply, result from read_parquet("
        f"'{lake}/positions/source=binpack/dataset={dataset}/*.parquet', filename=true, "
        f"file_row_number=true) order by filename, file_row_number"
    ).fetchall()


def main():
    lake, src, out = sys.argv[1], sys.argv[2], sys.argv[3]
    sample = int(sys.argv[4]) if len(sys.argv) > 4 else 300
    con = duckdb.connect()
    a, b = rows(con, lake, src), rows(con, lake, out)
    assert len(a) == len(b), (len(a), len(b))
    report = {"rows": len(a), "changed": 0, "checked": 0, "checked_changed": 0, "bad": []}
    changed_rows = [i for i, (x, y) in enumerate(zip(a, b)) if x[0] != y[0]]
    report["changed"] = len(changed_rows)
    # A sample of each kind, spread over the data.
    picked = set(changed_rows[:: max(1, len(changed_rows) // sample)])
    picked |= set(range(0, len(a), max(1, len(a) // sample)))
    for i in sorted(picked):
        (fen, mv, score, ply, result), (lfen, lmv, lscore, lply, lresult) = a[i], b[i]
        changed = lfen != fen
        report["checked_changed"] += changed
        if score is None:
            if (lfen, lscore) != (fen, None):
                report["bad"].append([i, "an unscored row changed"])
            continue
        report["checked"] += 1
        leaf = chess.Board(lfen)
        plies = lply - ply
        if not leaf.is_valid():
            report["bad"].append([i, "not a valid position"])
        elif leaf.is_check() and any(leaf.legal_moves):
            report["bad"].append([i, "in check"])
        elif not leaf.is_check() and qsearch(leaf, -10**9, 10**9) != material(leaf):
            report["bad"].append([i, "a capture sequence gains material"])
        elif changed and (lmv != "0000" or not reachable(chess.Board(fen), lfen, plies)):
            report["bad"].append([i, f"not {plies} captures from the row ({lmv})"])
        elif not changed and (plies, lmv) != (0, mv):
            report["bad"].append([i, "an unchanged row's ply or move changed"])
        elif (lscore, lresult) != ((-score, -result) if plies % 2 else (score, result)):
            report["bad"].append([i, f"score/result {lscore}/{lresult} from {score}/{result}"])
    report["bad"] = report["bad"][:10]
    print(json.dumps(report))


main()
