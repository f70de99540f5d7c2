"""Input families enumerated with python-chess, independently of lakefish's code: threats
(nnue-pytorch's Full_Threats, docs/THREATS.md), and the thesis's axes and mobility as
docs/NETSPEC.md defines them, and King-All (64 × 768).

Usage: families_reference.py PGN N SEED
Prints JSON lines {"fen", FAMILY: {"white": [...], "black": [...]}, ...} (each list sorted)
for N positions: every few plies of the PGN's games (when the file is there), and random
legal games (captures, promotions, castling and en passant come up in both).
"""

import json
import os
import random
import sys

import chess
import chess.pgn

TYPES = [chess.PAWN, chess.KNIGHT, chess.BISHOP, chess.ROOK, chess.QUEEN]
SLOT = {
    chess.PAWN: {chess.KNIGHT: 0, chess.ROOK: 1},
    chess.KNIGHT: {chess.PAWN: 0, chess.KNIGHT: 1, chess.BISHOP: 2, chess.ROOK: 3, chess.QUEEN: 4},
    chess.BISHOP: {chess.PAWN: 0, chess.KNIGHT: 1, chess.BISHOP: 2, chess.ROOK: 3},
    chess.ROOK: {chess.PAWN: 0, chess.KNIGHT: 1, chess.BISHOP: 2, chess.ROOK: 3},
    chess.QUEEN: {chess.PAWN: 0, chess.KNIGHT: 1, chess.BISHOP: 2, chess.ROOK: 3, chess.QUEEN: 4},
}
TARGETS = {t: 2 * len(SLOT[t]) for t in TYPES}


def empty_attacks(colour, ptype, sq):
    """Attacks on an empty board; `colour` 0 pawns capture upwards, from ranks 2-7 only."""
    if ptype == chess.PAWN:
        if not 8 <= sq < 56:
            return 0
        return chess.BB_PAWN_ATTACKS[chess.WHITE if colour == 0 else chess.BLACK][sq]
    if ptype == chess.KNIGHT:
        return chess.BB_KNIGHT_ATTACKS[sq]
    diag = chess.BB_DIAG_ATTACKS[sq][0]
    line = chess.BB_FILE_ATTACKS[sq][0] | chess.BB_RANK_ATTACKS[sq][0]
    return {chess.BISHOP: diag, chess.ROOK: line, chess.QUEEN: diag | line}[ptype]


BASE, PAIRS, BEFORE = {}, {}, {}
total = 0
for colour in (0, 1):
    for ptype in TYPES:
        BASE[colour, ptype] = total
        run = 0
        for sq in chess.SQUARES:
            BEFORE[colour, ptype, sq] = run
            run += chess.popcount(empty_attacks(colour, ptype, sq))
        PAIRS[colour, ptype] = run
        total += TARGETS[ptype] * run
assert total == 59808, total


def features(board, perspective):
    ksq = board.king(perspective)
    o = (7 if chess.square_file(ksq) >= 4 else 0) ^ (56 if perspective == chess.BLACK else 0)
    kings = board.kings
    targets = board.occupied & ~kings
    out = []
    for sq in chess.scan_forward(board.occupied & ~kings):
        piece = board.piece_at(sq)
        if piece.piece_type == chess.PAWN:
            seen = chess.BB_PAWN_ATTACKS[piece.color][sq]
        else:
            seen = board.attacks_mask(sq)
        colour = 0 if piece.color == perspective else 1
        for to in chess.scan_forward(seen & targets):
            target = board.piece_at(to)
            slot = SLOT[piece.piece_type].get(target.piece_type)
            if slot is None:
                continue
            f, t = sq ^ o, to ^ o
            if piece.piece_type == target.piece_type and f < t:
                continue
            tcol = 0 if target.color == perspective else 1
            rank = chess.popcount(empty_attacks(colour, piece.piece_type, f) & ((1 << t) - 1))
            out.append(
                BASE[colour, piece.piece_type]
                + (tcol * TARGETS[piece.piece_type] // 2 + slot) * PAIRS[colour, piece.piece_type]
                + BEFORE[colour, piece.piece_type, f]
                + rank
            )
    return sorted(out)


def kind_and_square(piece, sq, perspective):
    """Kind 6·colour + type (colour 0 the perspective's own, pawn 0 … king 5) and the square
    rank-flipped for Black."""
    colour = 0 if piece.color == perspective else 1
    return 6 * colour + piece.piece_type - 1, sq ^ (56 if perspective == chess.BLACK else 0)


def axes(board, perspective):
    out = []
    for sq, piece in board.piece_map().items():
        k, s = kind_and_square(piece, sq, perspective)
        f, r = chess.square_file(s), chess.square_rank(s)
        out += [46 * k + f, 46 * k + 8 + r, 46 * k + 16 + (r - f + 7), 46 * k + 31 + (r + f)]
    return sorted(out)


def mobility(board, perspective):
    out = []
    for sq, piece in board.piece_map().items():
        if piece.piece_type == chess.PAWN:
            seen = chess.BB_PAWN_ATTACKS[piece.color][sq]
        else:
            seen = board.attacks_mask(sq)
        n = min(chess.popcount(seen & ~board.occupied_co[piece.color]), 27)
        k, _ = kind_and_square(piece, sq, perspective)
        out.append(28 * k + n)
    return sorted(out)


def pairwise_axes(board, perspective):
    """Every two men on one line with no man between them, once per pair."""
    out = []
    men = sorted(board.piece_map().items())
    for i, (a, pa) in enumerate(men):
        for b, pb in men[i + 1:]:
            if not (chess.BB_RAYS[a][b] and chess.between(a, b) & board.occupied == 0):
                continue
            ka, oa = kind_and_square(pa, a, perspective)
            kb, ob = kind_and_square(pb, b, perspective)
            if ob < oa:
                (ka, oa), (kb, ob) = (kb, ob), (ka, oa)
            fa, ra, fb, rb = oa % 8, oa // 8, ob % 8, ob // 8
            if fa == fb:
                d, dist = 0, rb - ra
            elif ra == rb:
                d, dist = 1, fb - fa
            elif rb - fb == ra - fa:
                d, dist = 2, rb - ra
            else:
                d, dist = 3, rb - ra
            out.append(((12 * ka + kb) * 4 + d) * 7 + abs(dist) - 1)
    return sorted(out)


def king_all(board, perspective):
    """The thesis's King-All: the 768 piece-square inputs once per own king square."""
    flip = 56 if perspective == chess.BLACK else 0
    king = board.king(perspective) ^ flip
    out = []
    for sq, piece in board.piece_map().items():
        colour = 0 if piece.color == perspective else 1
        out.append(768 * king + 384 * colour + 64 * (piece.piece_type - 1) + (sq ^ flip))
    return sorted(out)


FAMILIES = {"king_all": king_all, "threats": features, "axes": axes, "mobility": mobility, "pairwise_axes": pairwise_axes}


def positions(pgn_path, n, seed):
    boards = []
    with open(pgn_path if os.path.exists(pgn_path) else os.devnull) as f:
        while len(boards) < n // 2:
            game = chess.pgn.read_game(f)
            if game is None:
                break
            board = game.board()
            for i, move in enumerate(game.mainline_moves()):
                board.push(move)
                if i % 7 == 3:
                    boards.append(board.copy())
    rng = random.Random(seed)
    while len(boards) < n:
        board = chess.Board()
        for _ in range(rng.randrange(10, 120)):
            moves = list(board.legal_moves)
            if not moves:
                break
            # Captures, promotions and castling more often than by chance.
            special = [m for m in moves if board.is_capture(m) or m.promotion or board.is_castling(m)]
            board.push(rng.choice(special if special and rng.random() < 0.4 else moves))
            if rng.random() < 0.05:
                boards.append(board.copy())
    return boards[:n]


def main():
    pgn, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    for b in positions(pgn, n, seed):
        line = {"fen": b.fen()}
        for name, f in FAMILIES.items():
            line[name] = {"white": f(b, chess.WHITE), "black": f(b, chess.BLACK)}
        print(json.dumps(line))


main()
