//! Threat inputs as nnue-pytorch's `Full_Threats` and Stockfish (since 2026-02) lay them out:
//! for every man that attacks another (kings neither attack nor count as targets), a feature
//! for the attacker, its square, the target's piece and its square. The facts and their
//! sources are in docs/THREATS.md.
//!
//! Per perspective: squares are oriented by `o = (own king on files e-h ? 7 : 0) ^
//! (Black ? 56 : 0)` (the king lands on files a-d) and colours are relative (0: the
//! perspective's own). The pairs that count: pawn → knight, rook; knight → every non-king;
//! bishop and rook → pawn, knight, bishop, rook; queen → every non-king. Pawns attack by
//! capture only; sliders stop at the first man; own men count (defence). Of two men of the
//! same type only one direction counts: the one with `from > to` (oriented). The index is
//! `base[A] + (colour(T)·targets[A]/2 + slot[A][T])·pairs[A] + before[A][from] +
//! |attacks[A](from) ∩ squares below to|`, with `A = 5·colour + type`, `attacks` the
//! empty-board attack sets (pawns from ranks 2-7 only), `pairs[A]` their total and
//! `before[A][from]` their running sum.

use std::sync::OnceLock;

use shakmaty::{Bitboard, Board, Color, Role, Square, attacks};

use super::FeatureError;

/// The number of threat inputs per perspective.
pub const THREAT_INPUTS: u32 = lakefish_schemas::netspec::THREAT_INPUTS as u32;

/// The target slot of (attacker type, target type), pawn 0 … queen 4; `None`: no feature.
const SLOT: [[Option<u8>; 5]; 5] = [
    [None, Some(0), None, Some(1), None],
    [Some(0), Some(1), Some(2), Some(3), Some(4)],
    [Some(0), Some(1), Some(2), Some(3), None],
    [Some(0), Some(1), Some(2), Some(3), None],
    [Some(0), Some(1), Some(2), Some(3), Some(4)],
];

/// Targets per attacker type, both colours.
const TARGETS: [u32; 5] = [4, 10, 8, 8, 10];

const ROLES: [Role; 5] = [
    Role::Pawn,
    Role::Knight,
    Role::Bishop,
    Role::Rook,
    Role::Queen,
];

/// Empty-board attacks of oriented attacker `a` (`5·colour + type`) from `sq`; pawns of
/// colour 0 capture upwards, and only from ranks 2-7.
fn empty_attacks(a: usize, sq: Square) -> Bitboard {
    let (colour, ty) = (a / 5, a % 5);
    match ty {
        0 if (8..56).contains(&(sq as u32)) => attacks::pawn_attacks(
            if colour == 0 {
                Color::White
            } else {
                Color::Black
            },
            sq,
        ),
        0 => Bitboard::EMPTY,
        _ => attacks::attacks(sq, ROLES[ty].of(Color::White), Bitboard::EMPTY),
    }
}

struct Tables {
    base: [u32; 10],
    pairs: [u32; 10],
    before: [[u32; 64]; 10],
    /// `|empty_attacks(a, from) ∩ squares below to|` per oriented attacker, from and to:
    /// where `to` stands among `from`'s targets (a table: no popcount per threat).
    rank: [[[u8; 64]; 64]; 10],
}

fn tables() -> &'static Tables {
    static T: OnceLock<Tables> = OnceLock::new();
    T.get_or_init(|| {
        let mut t = Tables {
            base: [0; 10],
            pairs: [0; 10],
            before: [[0; 64]; 10],
            rank: [[[0; 64]; 64]; 10],
        };
        let mut base = 0;
        for a in 0..10 {
            t.base[a] = base;
            let mut sum = 0;
            for sq in Square::ALL {
                t.before[a][sq as usize] = sum;
                let reach = empty_attacks(a, sq);
                for to in 0..64u32 {
                    t.rank[a][sq as usize][to as usize] =
                        (reach & Bitboard((1u64 << to) - 1)).count() as u8;
                }
                sum += reach.count() as u32;
            }
            t.pairs[a] = sum;
            base += TARGETS[a % 5] * sum;
        }
        debug_assert_eq!(base, THREAT_INPUTS);
        t
    })
}

/// Whether `perspective`'s threats are oriented differently after its king went from
/// `from` to `to` (across the d/e line): every index changes, a refresh is due.
pub fn orientation_changes(from: Square, to: Square) -> bool {
    (from.file() as u32 >= 4) != (to.file() as u32 >= 4)
}

/// The threat features active for `perspective`, in no particular order.
pub fn threat_features(board: &Board, perspective: Color) -> Result<Vec<u32>, FeatureError> {
    let mut out = Vec::new();
    threat_features_into(board, perspective, &mut out)?;
    Ok(out)
}

/// Appends the threat features active for `perspective` to `out`, in no particular order.
pub fn threat_features_into(
    board: &Board,
    perspective: Color,
    out: &mut Vec<u32>,
) -> Result<(), FeatureError> {
    threats_of(board, perspective, Bitboard::FULL, out)
}

/// The men whose threats a move can change: those on the squares it changed (`changed`,
/// in the board before or after) and every man attacking one of those squares before or
/// after (a slider whose ray opened or closed there, anything whose target came or went).
/// Every other man attacks the same squares, holding the same men, in both boards.
pub fn affected_attackers(parent: &Board, child: &Board, changed: Bitboard) -> Bitboard {
    let mut out = changed;
    for sq in changed {
        for b in [parent, child] {
            out |= b.attacks_to(sq, Color::White, b.occupied())
                | b.attacks_to(sq, Color::Black, b.occupied());
        }
    }
    out
}

/// Appends the threat features of the attackers standing on `attackers` only.
pub fn threats_of(
    board: &Board,
    perspective: Color,
    attackers: Bitboard,
    out: &mut Vec<u32>,
) -> Result<(), FeatureError> {
    let ksq = board
        .king_of(perspective)
        .ok_or(FeatureError::NoKing(perspective))?;
    let o = (if ksq.file() as u32 >= 4 { 7 } else { 0 })
        ^ (if perspective == Color::Black { 56 } else { 0 });
    let t = tables();
    let kings = board.kings();
    let targets = board.occupied() & !kings;
    for from in board.occupied() & !kings & attackers {
        let Some(piece) = board.piece_at(from) else {
            continue;
        };
        let ty = piece.role as usize - 1;
        let seen = match piece.role {
            Role::Pawn => attacks::pawn_attacks(piece.color, from),
            _ => board.attacks_from(from),
        } & targets;
        let own = |c: Color| usize::from(c != perspective);
        let a = 5 * own(piece.color) + ty;
        let from_o = from as u32 ^ o;
        for to in seen {
            let Some(target) = board.piece_at(to) else {
                continue;
            };
            let tt = target.role as usize - 1;
            let Some(slot) = SLOT[ty][tt] else {
                continue;
            };
            let to_o = to as u32 ^ o;
            if ty == tt && from_o < to_o {
                continue;
            }
            let rank = u32::from(t.rank[a][from_o as usize][to_o as usize]);
            out.push(
                t.base[a]
                    + (own(target.color) as u32 * TARGETS[ty] / 2 + slot as u32) * t.pairs[a]
                    + t.before[a][from_o as usize]
                    + rank,
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tables_add_up_to_nnue_pytorch_s_sizes() {
        let t = tables();
        assert_eq!(t.pairs[..5], [84, 336, 560, 896, 1456]);
        assert_eq!(
            t.base,
            [0, 336, 3696, 8176, 15344, 29904, 30240, 33600, 38080, 45248]
        );
        assert_eq!(t.base[9] + TARGETS[4] * t.pairs[9], THREAT_INPUTS);
        // The start position: only defences, the same for both sides.
        let start = Board::default();
        let w = threat_features(&start, Color::White).unwrap();
        assert!(w.iter().all(|&i| i < THREAT_INPUTS));
        assert_eq!(
            w.len(),
            threat_features(&start, Color::Black).unwrap().len()
        );
    }
}
