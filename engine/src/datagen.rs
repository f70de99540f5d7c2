//! Self-play training data, like Stockfish's gensfen: a few random opening plies, then both
//! sides search at a fixed depth or node count; every searched position is kept with its
//! score, best move, ply and, once the game ends, the result from its side to move's view.

use shakmaty::zobrist::Zobrist64;
use shakmaty::{Chess, Color, EnPassantMode, Move, Position};

use crate::eval::Evaluator;
use crate::matchplay::rule_ending;
use crate::random_games::SplitMix;
use crate::search::{Limits, Score, Searcher};

#[derive(Debug, Clone, PartialEq)]
pub struct DatagenConfig {
    /// Random legal plies before the searched part of each game.
    pub random_plies: u32,
    /// Search limit per move: depth, else nodes.
    pub depth: Option<u32>,
    pub nodes: Option<u64>,
    /// After this many plies a game is adjudicated: |score| below `draw_cp` is a draw, else a
    /// win for the side the score favours.
    pub max_plies: u32,
    pub draw_cp: i32,
    pub hash_mb: usize,
}

impl Default for DatagenConfig {
    fn default() -> Self {
        DatagenConfig {
            random_plies: 6,
            depth: None,
            nodes: Some(5000),
            max_plies: 200,
            draw_cp: 400,
            hash_mb: 8,
        }
    }
}

/// One recorded position.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub pos: Chess,
    /// The move the search chose (and played).
    pub mv: Move,
    /// Search score, internal units, side to move's view.
    pub score: i16,
    /// Game ply of `pos` (0 = the start position, White to move).
    pub ply: u16,
    /// 1 win, 0 draw, -1 loss for the side to move.
    pub result: i8,
}

/// The random opening of game `seed`: `plies` random legal moves that do not end the game.
fn random_opening(rng: &mut SplitMix, plies: u32) -> Chess {
    'retry: loop {
        let mut pos = Chess::default();
        for _ in 0..plies {
            let moves = pos.legal_moves();
            if moves.is_empty() {
                continue 'retry;
            }
            pos.play_unchecked(moves[rng.below(moves.len() as u64) as usize]);
        }
        if !pos.is_game_over() {
            return pos;
        }
    }
}

/// Plays game `seed` and returns its samples in order (the same seed, evaluation and
/// config give the same samples).
pub fn selfplay_game(evaluator: &Evaluator, config: &DatagenConfig, seed: u64) -> Vec<Sample> {
    let mut rng = SplitMix(seed);
    let mut pos = random_opening(&mut rng, config.random_plies);
    let mut searcher = Searcher::new(evaluator.clone(), config.hash_mb);
    let limits = match config.depth {
        Some(d) => Limits::depth(d),
        None => Limits::nodes(config.nodes.unwrap_or(5000)),
    };
    let mut keys: Vec<u64> = Vec::new();
    let mut samples: Vec<Sample> = Vec::new();
    let mut searched = 0u32;
    let ply_of =
        |p: &Chess| ((p.fullmoves().get() - 1) * 2 + (p.turn() == Color::Black) as u32) as u16;
    // The winner, None for a draw.
    let winner: Option<Color> = loop {
        let key = pos.zobrist_hash::<Zobrist64>(EnPassantMode::Legal).0;
        if let Some((winner, _)) = rule_ending(&pos, key, &keys) {
            break winner;
        }
        let result = searcher.search(&pos, &keys, &limits, |_| {});
        let mv = result.best.expect("a legal move exists");
        if searched >= config.max_plies {
            let cp = Score::from_internal(result.value, &pos).centipawns_or_mate();
            break if cp.abs() < config.draw_cp {
                None
            } else if cp > 0 {
                Some(pos.turn())
            } else {
                Some(!pos.turn())
            };
        }
        samples.push(Sample {
            pos: pos.clone(),
            mv,
            score: result.value.clamp(i16::MIN as i32 + 1, i16::MAX as i32) as i16,
            ply: ply_of(&pos),
            result: 0,
        });
        keys.push(key);
        pos.play_unchecked(mv);
        searched += 1;
    };
    for s in &mut samples {
        s.result = match winner {
            None => 0,
            Some(c) if c == s.pos.turn() => 1,
            Some(_) => -1,
        };
    }
    samples
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn games_are_reproducible_and_results_alternate() {
        let config = DatagenConfig {
            nodes: Some(400),
            max_plies: 60,
            ..DatagenConfig::default()
        };
        for seed in 0..4 {
            let a = selfplay_game(&Evaluator::Classical, &config, seed);
            let b = selfplay_game(&Evaluator::Classical, &config, seed);
            assert_eq!(a, b);
            assert!(!a.is_empty() && a.len() <= 60);
            assert!(a[0].ply >= 6, "random plies come first");
            for w in a.windows(2) {
                assert_eq!(w[1].ply, w[0].ply + 1);
                assert_eq!(w[1].result, -w[0].result);
                let mut p = w[0].pos.clone();
                p.play_unchecked(w[0].mv);
                assert_eq!(p, w[1].pos, "samples form one game");
            }
        }
        assert_ne!(
            selfplay_game(&Evaluator::Classical, &config, 1)[0].pos,
            selfplay_game(&Evaluator::Classical, &config, 2)[0].pos
        );
    }
}
