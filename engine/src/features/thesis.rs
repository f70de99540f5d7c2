//! The seed thesis's position encodings beyond piece-square inputs (issue 43). The thesis is
//! not at hand; these are lakefish's readings of its descriptions, written down exactly here
//! and in docs/NETSPEC.md, and checked against an independent python-chess enumeration
//! (tests/py/families_reference.py).
//!
//! Both are seen from a perspective: squares rank-flipped for Black, colours relative (kind
//! `k = 6·colour + type`, colour 0 the perspective's own, type pawn 0 … king 5).
//!
//! - **Axes** (552 inputs, 4 per man): a man on file `f`, rank `r` is on four lines: its file
//!   `46k + f`, its rank `46k + 8 + r`, its diagonal `46k + 16 + (r − f + 7)` and its
//!   anti-diagonal `46k + 31 + (r + f)`. The piece-square input `k, square` is the file ⊕ rank
//!   pair, so a net sees each line's men apart.
//! - **Mobility** (336 inputs, 1 per man): `28k + n`, where `n` counts the squares the man
//!   attacks that its own side does not occupy (pawns: their two capture squares), at most 27
//!   (a queen in the centre of an empty board). Changes when men elsewhere open or close a
//!   slider's line, as threats do.
//! - **Pairwise axes** (4,032 inputs): every two men that see each other along a file, rank,
//!   diagonal or anti-diagonal (no man between) make one input `((12·kA + kB)·4 + d)·7 +
//!   (distance − 1)`, `A` the man on the lower oriented square, `d` 0 file, 1 rank, 2 diagonal
//!   (rank − file constant), 3 anti-diagonal, `distance` in squares along the line (1-7). At
//!   most 8 neighbours per man, so at most 128 pairs.

use shakmaty::{Bitboard, Board, Color, Role, Square, attacks};

use super::FeatureError;

pub const AXES_INPUTS: u32 = lakefish_schemas::netspec::AXES_INPUTS as u32;
pub const MOBILITY_INPUTS: u32 = lakefish_schemas::netspec::MOBILITY_INPUTS as u32;
pub const PAIRWISE_AXES_INPUTS: u32 = lakefish_schemas::netspec::PAIRWISE_AXES_INPUTS as u32;

/// `(kind, oriented square)` of the man `piece` on `sq` for `perspective`.
fn kind_and_square(perspective: Color, piece: shakmaty::Piece, sq: Square) -> (u32, u32) {
    let colour = u32::from(piece.color != perspective);
    let flip = if perspective == Color::Black { 56 } else { 0 };
    (6 * colour + piece.role as u32 - 1, sq as u32 ^ flip)
}

/// The axis features of one man.
pub fn axes_of_man(perspective: Color, piece: shakmaty::Piece, sq: Square) -> [u32; 4] {
    let (k, s) = kind_and_square(perspective, piece, sq);
    let (f, r) = (s & 7, s >> 3);
    let base = 46 * k;
    [
        base + f,
        base + 8 + r,
        base + 16 + (r + 7 - f),
        base + 31 + (r + f),
    ]
}

/// Appends the axis features of every man on `men`.
pub fn axes_of(board: &Board, perspective: Color, men: Bitboard, out: &mut Vec<u32>) {
    for sq in board.occupied() & men {
        if let Some(piece) = board.piece_at(sq) {
            out.extend(axes_of_man(perspective, piece, sq));
        }
    }
}

/// Appends the mobility features of every man on `men`.
pub fn mobility_of(board: &Board, perspective: Color, men: Bitboard, out: &mut Vec<u32>) {
    for sq in board.occupied() & men {
        let Some(piece) = board.piece_at(sq) else {
            continue;
        };
        let seen = match piece.role {
            Role::Pawn => attacks::pawn_attacks(piece.color, sq),
            _ => board.attacks_from(sq),
        };
        let n = (seen & !board.by_color(piece.color)).count().min(27) as u32;
        let (k, _) = kind_and_square(perspective, piece, sq);
        out.push(28 * k + n);
    }
}

/// Every man's axis features for `perspective` (the board needs no king: kept `Result` for
/// the families' one signature).
pub fn axes_into(
    board: &Board,
    perspective: Color,
    out: &mut Vec<u32>,
) -> Result<(), FeatureError> {
    axes_of(board, perspective, Bitboard::FULL, out);
    Ok(())
}

/// Every man's mobility feature for `perspective`.
pub fn mobility_into(
    board: &Board,
    perspective: Color,
    out: &mut Vec<u32>,
) -> Result<(), FeatureError> {
    mobility_of(board, perspective, Bitboard::FULL, out);
    Ok(())
}

/// The men a move can change a line pair of: those on `changed` and the first man along each
/// of the eight lines from a changed square, before and after. A pair of two other men sees
/// the same empty squares between them in both boards.
pub fn line_neighbours(parent: &Board, child: &Board, changed: Bitboard) -> Bitboard {
    let mut out = changed;
    for sq in changed {
        for b in [parent, child] {
            out |= attacks::queen_attacks(sq, b.occupied()) & b.occupied();
        }
    }
    out
}

/// The pairwise-axis input of men `a` on `sa` and `b` on `sb`, which see each other along a
/// line, for `perspective`.
fn pair_feature(
    perspective: Color,
    a: (shakmaty::Piece, Square),
    b: (shakmaty::Piece, Square),
) -> u32 {
    let (ka, oa) = kind_and_square(perspective, a.0, a.1);
    let (kb, ob) = kind_and_square(perspective, b.0, b.1);
    let ((ka, oa), (kb, ob)) = if oa < ob {
        ((ka, oa), (kb, ob))
    } else {
        ((kb, ob), (ka, oa))
    };
    let (fa, ra, fb, rb) = (
        (oa & 7) as i32,
        (oa >> 3) as i32,
        (ob & 7) as i32,
        (ob >> 3) as i32,
    );
    let (d, distance) = if fa == fb {
        (0, rb - ra)
    } else if ra == rb {
        (1, fb - fa)
    } else if rb - fb == ra - fa {
        (2, rb - ra)
    } else {
        (3, rb - ra)
    };
    ((12 * ka + kb) * 4 + d) * 7 + distance.unsigned_abs() - 1
}

/// Appends the pairwise-axis inputs of every pair with a man on `men` (each pair once).
pub fn pairwise_axes_of(board: &Board, perspective: Color, men: Bitboard, out: &mut Vec<u32>) {
    let occupied = board.occupied();
    for sq in occupied & men {
        let Some(piece) = board.piece_at(sq) else {
            continue;
        };
        for other in attacks::queen_attacks(sq, occupied) & occupied {
            // Listed from the lower square when both ends are on `men`, else from this one.
            if men.contains(other) && other < sq {
                continue;
            }
            if let Some(o) = board.piece_at(other) {
                out.push(pair_feature(perspective, (piece, sq), (o, other)));
            }
        }
    }
}

/// Every pairwise-axis input for `perspective`.
pub fn pairwise_axes_into(
    board: &Board,
    perspective: Color,
    out: &mut Vec<u32>,
) -> Result<(), FeatureError> {
    pairwise_axes_of(board, perspective, Bitboard::FULL, out);
    Ok(())
}
