//! The leaf of a position's quiescence search (Nodchip's learner trains on it instead of
//! dropping noisy positions): captures and promotions are searched until the side to move
//! prefers to stand pat, and the position where it does is the leaf.
//!
//! The search is exact on a material evaluation (nnue-pytorch's `simple_eval` values: 208,
//! 781, 825, 1276, 2538): every capture and promotion is searched (no pruning by static
//! exchange), in check every evasion, so a leaf is quiet by a definition another program can
//! check — no sequence of captures and promotions from it gains material for the side to
//! move — and it is never in check unless it is mate.

use shakmaty::{Chess, Color, Move, MoveList, Position, Role};

/// Material from the side to move's point of view.
pub fn material(pos: &Chess) -> i32 {
    const VALUES: [(Role, i32); 5] = [
        (Role::Pawn, 208),
        (Role::Knight, 781),
        (Role::Bishop, 825),
        (Role::Rook, 1276),
        (Role::Queen, 2538),
    ];
    let board = pos.board();
    let us = pos.turn();
    let mut v = 0;
    for (role, value) in VALUES {
        let bb = board.by_role(role);
        v += value
            * ((bb & board.by_color(us)).count() as i32
                - (bb & board.by_color(Color::other(us))).count() as i32);
    }
    v
}

/// A mate found by the search, from the mated side.
pub const MATED: i32 = -32_000;
/// Deeper than this, a line stands where it is.
const MAX_PLIES: usize = 40;

/// A quiescence leaf: the position, how many plies from the root, and the search's value
/// (material, side to move at the root).
#[derive(Debug, Clone)]
pub struct Leaf {
    pub pos: Chess,
    pub plies: usize,
    pub value: i32,
}

/// Why no leaf was found within the node budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooManyNodes(pub u64);

/// The leaf of `pos`'s quiescence search, searching at most `max_nodes` nodes.
pub fn qsearch_leaf(pos: &Chess, max_nodes: u64) -> Result<Leaf, TooManyNodes> {
    let mut nodes = 0u64;
    let (value, line) = search(pos, -i32::MAX, i32::MAX, 0, &mut nodes, max_nodes)?;
    let mut leaf = pos.clone();
    for &m in &line {
        leaf.play_unchecked(m);
    }
    Ok(Leaf {
        pos: leaf,
        plies: line.len(),
        value,
    })
}

/// Most valuable victim first, then least valuable attacker; promotions as captures of
/// what they become.
fn order(moves: &mut MoveList) {
    let worth = |r: Option<Role>| r.map_or(0, |r| r as i32);
    moves.sort_by_key(|m| {
        let gain = worth(m.capture()) * 8 + worth(m.promotion()) * 8;
        -(gain * 8 - m.role() as i32)
    });
}

/// Negamax alpha-beta: the value and the moves from `pos` to its leaf.
fn search(
    pos: &Chess,
    mut alpha: i32,
    beta: i32,
    ply: usize,
    nodes: &mut u64,
    max_nodes: u64,
) -> Result<(i32, Vec<Move>), TooManyNodes> {
    *nodes += 1;
    if *nodes > max_nodes {
        return Err(TooManyNodes(max_nodes));
    }
    let in_check = pos.is_check();
    let mut moves = pos.legal_moves();
    if moves.is_empty() {
        return Ok((if in_check { MATED + ply as i32 } else { 0 }, Vec::new()));
    }
    let mut best = (-i32::MAX, Vec::new());
    if !in_check {
        let stand = material(pos);
        if stand >= beta || ply >= MAX_PLIES {
            return Ok((stand, Vec::new()));
        }
        alpha = alpha.max(stand);
        best.0 = stand;
        moves.retain(|m| m.is_capture() || m.is_promotion());
    }
    order(&mut moves);
    for m in moves {
        let mut child = pos.clone();
        child.play_unchecked(m);
        let (v, line) = search(&child, -beta, -alpha, ply + 1, nodes, max_nodes)?;
        let v = -v;
        if v > best.0 {
            let mut to_leaf = Vec::with_capacity(line.len() + 1);
            to_leaf.push(m);
            to_leaf.extend(line);
            best = (v, to_leaf);
            if v > alpha {
                alpha = v;
                if v >= beta {
                    break;
                }
            }
        }
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shakmaty::fen::Fen;
    use shakmaty::{CastlingMode, EnPassantMode};

    fn pos(fen: &str) -> Chess {
        fen.parse::<Fen>()
            .unwrap()
            .into_position(CastlingMode::Standard)
            .unwrap()
    }

    fn fen(p: &Chess) -> String {
        Fen::from_position(p, EnPassantMode::Legal).to_string()
    }

    #[test]
    fn a_hanging_piece_is_taken_and_a_defended_one_is_not() {
        // White's rook takes the undefended knight: the leaf is after Rxd5, black to move.
        let l = qsearch_leaf(&pos("4k3/8/8/3n4/8/8/8/3RK3 w - - 0 1"), 10_000).unwrap();
        assert_eq!(l.plies, 1);
        assert_eq!(fen(&l.pos), "4k3/8/8/3R4/8/8/8/4K3 b - - 0 1");
        assert_eq!(l.value, 1276);
        // Defended by a pawn: Rxd5 exd5 loses the exchange, so white stands pat.
        let quiet = pos("4k3/8/4p3/3n4/8/8/8/3RK3 w - - 0 1");
        let l = qsearch_leaf(&quiet, 10_000).unwrap();
        assert_eq!((l.plies, l.value), (0, material(&quiet)));
        // A quiet position is its own leaf; the node budget is kept.
        let start = Chess::default();
        assert_eq!(qsearch_leaf(&start, 10).unwrap().plies, 0);
        assert_eq!(
            qsearch_leaf(&pos("4k3/8/8/3n4/8/8/8/3RK3 w - - 0 1"), 1).unwrap_err(),
            TooManyNodes(1)
        );
    }
}
