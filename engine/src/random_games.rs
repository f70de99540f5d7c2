//! Reproducible random legal games: test and demo data that needs no files.

use shakmaty::fen::Fen;
use shakmaty::uci::UciMove;
use shakmaty::{CastlingMode, Chess, EnPassantMode, Move, Position};

/// One position of a game and the move played from it, with what a binary encoder needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlayedMove {
    pub fen: String,
    /// Standard UCI (castling as the king's two-square move).
    pub uci: String,
    pub from: u8,
    pub to: u8,
    pub kind: MoveKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoveKind {
    Normal,
    /// Promotion to the piece named by its lowercase letter.
    Promotion(char),
    EnPassant,
    /// Castling; `to` above is the rook's square (king-takes-rook encoding).
    Castle,
}

/// A small, fast, seedable generator (splitmix64).
#[derive(Debug, Clone)]
pub struct SplitMix(pub u64);

/// One step of [`SplitMix`] from state `x`: a strong 64-bit mix, used for stable ids
/// (game ids, input keys) as well as for random games.
pub fn splitmix64(x: u64) -> u64 {
    SplitMix(x).next_u64()
}

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// Plays uniformly random legal moves from the start position until the game ends or
/// `max_plies` moves were played. Same seed, same game.
pub fn random_game(seed: u64, max_plies: usize) -> Vec<PlayedMove> {
    let mut rng = SplitMix(seed);
    let mut pos = Chess::default();
    let mut out = Vec::new();
    for _ in 0..max_plies {
        let moves = pos.legal_moves();
        if moves.is_empty() || pos.is_insufficient_material() {
            break;
        }
        let m = moves[rng.below(moves.len() as u64) as usize];
        let fen = Fen::from_position(&pos, EnPassantMode::Legal).to_string();
        let uci = UciMove::from_move(m, CastlingMode::Standard).to_string();
        let (from, to, kind) = match m {
            Move::Normal {
                from,
                to,
                promotion: Some(p),
                ..
            } => (from, to, MoveKind::Promotion(p.char())),
            Move::Normal { from, to, .. } => (from, to, MoveKind::Normal),
            Move::EnPassant { from, to } => (from, to, MoveKind::EnPassant),
            Move::Castle { king, rook } => (king, rook, MoveKind::Castle),
            Move::Put { .. } => unreachable!("no drops in standard chess"),
        };
        out.push(PlayedMove {
            fen,
            uci,
            from: from as u8,
            to: to as u8,
            kind,
        });
        pos.play_unchecked(m);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn games_are_reproducible_and_legal() {
        let a = random_game(7, 120);
        assert_eq!(a, random_game(7, 120));
        assert_ne!(a, random_game(8, 120));
        for m in &a {
            crate::rules::check_move(&m.fen, &m.uci).unwrap();
        }
    }
}
