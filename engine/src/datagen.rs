//! Self-play training data, like Stockfish's gensfen: a few random opening plies, then both
//! sides search at a fixed depth or node count; every searched position is kept with its
//! score, best move, ply and, once the game ends, the result from its side to move's view.

use shakmaty::zobrist::Zobrist64;
use shakmaty::{Chess, Color, EnPassantMode, Move, Position};

use std::time::Duration;

use shakmaty::uci::UciMove;
use shakmaty::{CastlingMode, fen::Fen};

use crate::eval::Evaluator;
use crate::matchplay::rule_ending;
use crate::random_games::SplitMix;
use crate::scores::{centipawns_to_internal, mate_to_internal, material};
use crate::search::{Limits, Score, Searcher};
use crate::uci_client::{UciCommand, UciProcess, position_command};

/// What plays self-play games: lakefish's search, or another UCI engine.
pub trait SelfplayEngine {
    /// Called before each game (and before its opening check).
    fn new_game(&mut self) -> Result<(), String>;
    /// The move to play at `pos` (reached from `start` by `moves`; `keys` are the earlier
    /// positions' Zobrist keys) and its score, internal units, side to move's view.
    fn best(
        &mut self,
        start: &Chess,
        moves: &[Move],
        pos: &Chess,
        keys: &[u64],
        limits: &Limits,
    ) -> Result<(Move, i32), String>;
}

impl SelfplayEngine for Searcher {
    fn new_game(&mut self) -> Result<(), String> {
        self.clear();
        Ok(())
    }

    fn best(
        &mut self,
        _start: &Chess,
        _moves: &[Move],
        pos: &Chess,
        keys: &[u64],
        limits: &Limits,
    ) -> Result<(Move, i32), String> {
        let r = self.search(pos, keys, limits, |_| {});
        Ok((r.best.expect("a legal move exists"), r.value))
    }
}

/// A UCI engine for self-play: one process kept across games (`ucinewgame` between them),
/// started again after it failed. Its `info ... score` becomes internal units with the same
/// win-rate normalization lakefish's engine prints with.
pub struct UciSelfplay {
    command: UciCommand,
    process: Option<UciProcess>,
    /// How long `uci`/`isready` and each search may take.
    pub handshake: Duration,
    pub stall: Duration,
}

impl UciSelfplay {
    pub fn new(command: UciCommand) -> UciSelfplay {
        UciSelfplay {
            command,
            process: None,
            handshake: Duration::from_secs(10),
            stall: Duration::from_secs(60),
        }
    }
}

impl SelfplayEngine for UciSelfplay {
    fn new_game(&mut self) -> Result<(), String> {
        if self.process.is_none() {
            self.process =
                Some(UciProcess::start(&self.command, self.handshake).map_err(|e| e.to_string())?);
        }
        let p = self.process.as_mut().expect("started");
        if let Err(e) = p.new_game(self.handshake) {
            self.process = None;
            return Err(e.to_string());
        }
        Ok(())
    }

    fn best(
        &mut self,
        start: &Chess,
        moves: &[Move],
        pos: &Chess,
        _keys: &[u64],
        limits: &Limits,
    ) -> Result<(Move, i32), String> {
        let p = self.process.as_mut().ok_or("the engine is not running")?;
        let fen = Fen::from_position(start, EnPassantMode::Legal).to_string();
        let line: Vec<String> = moves
            .iter()
            .map(|m| m.to_uci(CastlingMode::Standard).to_string())
            .collect();
        let go = match (limits.depth, limits.nodes) {
            (Some(d), _) => format!("go depth {d}"),
            (None, n) => format!("go nodes {}", n.unwrap_or(5000)),
        };
        let reply = match p.go(&position_command(&fen, &line), &go, self.stall) {
            Ok(r) => r,
            Err(e) => {
                self.process = None;
                return Err(e.to_string());
            }
        };
        let Some(mv) = UciMove::from_ascii(reply.bestmove.as_bytes())
            .ok()
            .and_then(|u| u.to_move(pos).ok())
        else {
            self.process = None;
            let shown: String = reply.bestmove.chars().take(40).collect();
            return Err(format!(
                "illegal move {shown:?} in {}",
                Fen::from_position(pos, EnPassantMode::Legal)
            ));
        };
        let value = match reply.score {
            Some(Score::Cp(cp)) => {
                i32::from(centipawns_to_internal(cp as f64, material(pos.board())))
            }
            Some(Score::Mate(m)) => i32::from(mate_to_internal(m)),
            None => return Err("no score in its info lines".into()),
        };
        Ok((mv, value))
    }
}

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
    /// Adjudication as modern engines' datagen does it (`None`: off). Each rule ends a game
    /// early, saving the searches whose outcome is already clear.
    pub adjudication: Adjudication,
}

/// Rules that end a self-play game before mate, a rule draw or `max_plies`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Adjudication {
    /// Win for the side the score favours once |score| ≥ `cp` for `plies` searched plies in
    /// a row (both sides agreeing who wins).
    pub win: Option<ScoreRun>,
    /// Draw once |score| ≤ `cp` for `plies` searched plies in a row, from game ply
    /// `after_ply` on.
    pub draw: Option<(u32, ScoreRun)>,
    /// Openings are searched with the game's per-move limit after the random plies and
    /// drawn again while |score| > this (centipawns): lopsided openings teach little.
    pub opening_max_cp: Option<i32>,
}

/// A score bound in centipawns held for a number of consecutive searched plies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoreRun {
    pub cp: i32,
    pub plies: u32,
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
            adjudication: Adjudication::default(),
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
    let mut searcher = Searcher::new(evaluator.clone(), config.hash_mb);
    selfplay_game_with(&mut searcher, config, seed).expect("lakefish's search does not fail")
}

/// [`selfplay_game`] with any engine. An engine that fails (crash, stall, illegal move, no
/// score) loses the game: `Err` says why, and nothing of the game is kept.
pub fn selfplay_game_with(
    searcher: &mut dyn SelfplayEngine,
    config: &DatagenConfig,
    seed: u64,
) -> Result<Vec<Sample>, String> {
    let mut rng = SplitMix(seed);
    searcher.new_game()?;
    let limits = match config.depth {
        Some(d) => Limits::depth(d),
        None => Limits::nodes(config.nodes.unwrap_or(5000)),
    };
    let mut pos = random_opening(&mut rng, config.random_plies);
    if let Some(max_cp) = config.adjudication.opening_max_cp {
        // Bounded: a config no opening can meet still yields games.
        for _ in 0..100 {
            let (_, value) = searcher.best(&pos, &[], &pos, &[], &limits)?;
            searcher.new_game()?;
            let cp = Score::from_internal(value, &pos).centipawns_or_mate();
            if cp.abs() <= max_cp {
                break;
            }
            pos = random_opening(&mut rng, config.random_plies);
        }
    }
    let adjudicate = &config.adjudication;
    // Consecutive searched plies meeting each rule; the win run keeps who is winning.
    let (mut win_run, mut winning, mut draw_run) = (0u32, None::<Color>, 0u32);
    let mut keys: Vec<u64> = Vec::new();
    let mut samples: Vec<Sample> = Vec::new();
    let mut searched = 0u32;
    let start = pos.clone();
    let mut played: Vec<Move> = Vec::new();
    let ply_of =
        |p: &Chess| ((p.fullmoves().get() - 1) * 2 + (p.turn() == Color::Black) as u32) as u16;
    // The winner, None for a draw.
    let winner: Option<Color> = loop {
        let key = pos.zobrist_hash::<Zobrist64>(EnPassantMode::Legal).0;
        if let Some((winner, _)) = rule_ending(&pos, key, &keys) {
            break winner;
        }
        let (mv, value) = searcher.best(&start, &played, &pos, &keys, &limits)?;
        if searched >= config.max_plies {
            let cp = Score::from_internal(value, &pos).centipawns_or_mate();
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
            score: value.clamp(i16::MIN as i32 + 1, i16::MAX as i32) as i16,
            ply: ply_of(&pos),
            result: 0,
        });
        let cp = Score::from_internal(value, &pos).centipawns_or_mate();
        if let Some(rule) = adjudicate.win {
            let ahead =
                (cp.abs() >= rule.cp).then(|| if cp > 0 { pos.turn() } else { !pos.turn() });
            win_run = match ahead {
                Some(c) if winning == Some(c) => win_run + 1,
                Some(_) => 1,
                None => 0,
            };
            winning = ahead;
            if win_run >= rule.plies {
                break winning;
            }
        }
        if let Some((after_ply, rule)) = adjudicate.draw {
            let quiet = u32::from(ply_of(&pos)) >= after_ply && cp.abs() <= rule.cp;
            draw_run = if quiet { draw_run + 1 } else { 0 };
            if draw_run >= rule.plies {
                break None;
            }
        }
        keys.push(key);
        played.push(mv);
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
    Ok(samples)
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

    fn cp(s: &Sample) -> i32 {
        Score::from_internal(s.score as i32, &s.pos).centipawns_or_mate()
    }

    /// Openings are drawn again until their search is within the bound: the first searched
    /// position of every game (searched with the same limit from a fresh table) is.
    #[test]
    fn verified_openings_are_within_the_bound() {
        let mut config = DatagenConfig {
            nodes: Some(300),
            max_plies: 4,
            random_plies: 10,
            ..DatagenConfig::default()
        };
        let plain: Vec<i32> = (0..12)
            .map(|seed| cp(&selfplay_game(&Evaluator::Material, &config, seed)[0]))
            .collect();
        assert!(plain.iter().any(|c| c.abs() > 150), "{plain:?}");
        config.adjudication.opening_max_cp = Some(150);
        for seed in 0..12 {
            let game = selfplay_game(&Evaluator::Material, &config, seed);
            assert!(cp(&game[0]).abs() <= 150, "seed {seed}: {}", cp(&game[0]));
            assert_eq!(game, selfplay_game(&Evaluator::Material, &config, seed));
        }
    }

    /// Win adjudication ends a game once the scores agree long enough; the last position's
    /// result is the side its score favours. Draw adjudication with a wide window ends every
    /// game as a draw after exactly its run of plies.
    #[test]
    fn adjudication_ends_games_by_score() {
        let base = DatagenConfig {
            nodes: Some(300),
            max_plies: 120,
            ..DatagenConfig::default()
        };
        let win = DatagenConfig {
            adjudication: Adjudication {
                win: Some(ScoreRun { cp: 250, plies: 3 }),
                ..Adjudication::default()
            },
            ..base.clone()
        };
        let (mut plain_len, mut win_len, mut decided) = (0, 0, 0);
        for seed in 0..8 {
            let a = selfplay_game(&Evaluator::Classical, &base, seed);
            let b = selfplay_game(&Evaluator::Classical, &win, seed);
            plain_len += a.len();
            win_len += b.len();
            let last = b.last().unwrap();
            if cp(last).abs() >= 250 && b.len() < a.len() {
                decided += 1;
                assert_eq!(last.result, cp(last).signum() as i8, "seed {seed}");
                let tail = &b[b.len() - 3..];
                assert!(tail.iter().all(|s| cp(s).abs() >= 250), "seed {seed}");
            }
        }
        assert!(
            decided > 0 && win_len < plain_len,
            "{decided} {win_len} {plain_len}"
        );

        let draw = DatagenConfig {
            adjudication: Adjudication {
                draw: Some((
                    0,
                    ScoreRun {
                        cp: 100_000,
                        plies: 5,
                    },
                )),
                ..Adjudication::default()
            },
            ..base
        };
        for seed in 0..4 {
            let game = selfplay_game(&Evaluator::Classical, &draw, seed);
            assert_eq!(game.len(), 5, "seed {seed}");
            assert!(game.iter().all(|s| s.result == 0));
        }
    }
}
