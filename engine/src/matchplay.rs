//! Engine-vs-engine games for SPRT: colour-reversed pairs from one opening, limited by nodes
//! (deterministic: the same nets, opening and limits give the same games) or by a clock,
//! with resign and draw adjudication; games written as PGN.

use std::time::{Duration, Instant};

use shakmaty::fen::Fen;
use shakmaty::san::SanPlus;
use shakmaty::zobrist::Zobrist64;
use shakmaty::{Chess, Color, EnPassantMode, Position};

use crate::eval::Evaluator;
use crate::search::{Limits, Score, Searcher};

/// How games are played and when they are cut short.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatchConfig {
    /// Nodes per move (deterministic games). Exactly one of `nodes` and `clock` is set.
    pub nodes: Option<u64>,
    /// Clock per side: base time and increment, in milliseconds.
    pub clock: Option<(u64, u64)>,
    /// A game still running after this many plies is a draw.
    pub max_plies: u32,
    /// A side whose score is at most minus this (centipawns) for `resign_moves` moves in a
    /// row, while its opponent agrees, loses.
    pub resign_cp: i32,
    pub resign_moves: u32,
    /// After `draw_after_ply`, |score| at most `draw_cp` for `draw_moves` moves of each side
    /// in a row is a draw.
    pub draw_cp: i32,
    pub draw_moves: u32,
    pub draw_after_ply: u32,
    pub hash_mb: usize,
}

impl Default for MatchConfig {
    fn default() -> Self {
        MatchConfig {
            nodes: Some(5000),
            clock: None,
            max_plies: 400,
            resign_cp: 600,
            resign_moves: 4,
            draw_cp: 10,
            draw_moves: 8,
            draw_after_ply: 60,
            hash_mb: 8,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Termination {
    Checkmate,
    Stalemate,
    Repetition,
    FiftyMoves,
    InsufficientMaterial,
    ResignAdjudication,
    DrawAdjudication,
    PlyLimit,
    TimeForfeit,
}

/// `Some(color)` for a win, `None` for a draw.
pub type Winner = Option<Color>;

/// One finished game.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GameRecord {
    pub white: String,
    pub black: String,
    pub opening: String,
    /// Standard algebraic notation, from the opening.
    pub moves: Vec<String>,
    /// "1-0", "0-1" or "1/2-1/2".
    pub result: String,
    pub termination: Termination,
}

impl GameRecord {
    /// Points for the side named `name` (1, 1/2 or 0) times two.
    pub fn half_points_of(&self, name_is_white: bool) -> u8 {
        match (self.result.as_str(), name_is_white) {
            ("1-0", true) | ("0-1", false) => 2,
            ("1/2-1/2", _) => 1,
            _ => 0,
        }
    }

    /// The game as PGN, with the opening as a FEN tag.
    pub fn to_pgn(&self, event: &str, round: &str) -> String {
        let mut s = String::new();
        for (k, v) in [
            ("Event", event),
            ("Site", "lakefish"),
            ("Date", "????.??.??"),
            ("Round", round),
            ("White", &self.white),
            ("Black", &self.black),
            ("Result", &self.result),
            ("FEN", &self.opening),
            ("SetUp", "1"),
            ("Termination", termination_text(self.termination)),
            ("PlyCount", &self.moves.len().to_string()),
        ] {
            s.push_str(&format!("[{k} \"{}\"]\n", v.replace('"', "'")));
        }
        s.push('\n');
        let start: Chess = self
            .opening
            .parse::<Fen>()
            .ok()
            .and_then(|f| f.into_position(shakmaty::CastlingMode::Standard).ok())
            .unwrap_or_default();
        let mut number = start.fullmoves().get();
        let mut white = start.turn() == Color::White;
        let mut line = String::new();
        let push = |tok: String, line: &mut String, s: &mut String| {
            if line.len() + tok.len() + 1 > 79 {
                s.push_str(line.trim_end());
                s.push('\n');
                line.clear();
            }
            line.push_str(&tok);
            line.push(' ');
        };
        for (i, m) in self.moves.iter().enumerate() {
            if white {
                push(format!("{number}."), &mut line, &mut s);
            } else if i == 0 {
                push(format!("{number}..."), &mut line, &mut s);
            }
            push(m.clone(), &mut line, &mut s);
            if !white {
                number += 1;
            }
            white = !white;
        }
        push(self.result.clone(), &mut line, &mut s);
        s.push_str(line.trim_end());
        s.push_str("\n\n");
        s
    }
}

fn termination_text(t: Termination) -> &'static str {
    match t {
        Termination::Checkmate => "checkmate",
        Termination::Stalemate => "stalemate",
        Termination::Repetition => "threefold repetition",
        Termination::FiftyMoves => "fifty-move rule",
        Termination::InsufficientMaterial => "insufficient material",
        Termination::ResignAdjudication => "adjudication: resign",
        Termination::DrawAdjudication => "adjudication: draw",
        Termination::PlyLimit => "adjudication: ply limit",
        Termination::TimeForfeit => "time forfeit",
    }
}

/// How the rules end the game at `pos`, whose Zobrist key is `key` and whose earlier
/// positions had `keys`; `None` while it goes on.
pub fn rule_ending(pos: &Chess, key: u64, keys: &[u64]) -> Option<(Winner, Termination)> {
    if pos.legal_moves().is_empty() {
        return Some(if pos.is_check() {
            (Some(!pos.turn()), Termination::Checkmate)
        } else {
            (None, Termination::Stalemate)
        });
    }
    if pos.is_insufficient_material() {
        return Some((None, Termination::InsufficientMaterial));
    }
    if pos.halfmoves() >= 100 {
        return Some((None, Termination::FiftyMoves));
    }
    // Threefold: two earlier occurrences since the last irreversible move.
    let window = (pos.halfmoves() as usize).min(keys.len());
    let seen = keys[keys.len() - window..]
        .iter()
        .filter(|&&x| x == key)
        .count();
    (seen >= 2).then_some((None, Termination::Repetition))
}

/// A side of a match: a name and what it evaluates with.
#[derive(Debug, Clone)]
pub struct Player {
    pub name: String,
    pub evaluator: Evaluator,
}

/// Plays one game from `opening`.
pub fn play_game(
    white: &Player,
    black: &Player,
    opening: &Chess,
    config: &MatchConfig,
) -> GameRecord {
    let mut searchers = [
        Searcher::new(black.evaluator.clone(), config.hash_mb),
        Searcher::new(white.evaluator.clone(), config.hash_mb),
    ];
    let mut clocks = config
        .clock
        .map(|(base, _)| [Duration::from_millis(base); 2]);
    let mut pos = opening.clone();
    let mut keys: Vec<u64> = Vec::new();
    let mut moves = Vec::new();
    // Scores in centipawns from White's view, one per ply played.
    let mut white_scores: Vec<i32> = Vec::new();
    let key = |p: &Chess| p.zobrist_hash::<Zobrist64>(EnPassantMode::Legal).0;
    let finish = |winner: Winner, termination: Termination, moves: Vec<String>| GameRecord {
        white: white.name.clone(),
        black: black.name.clone(),
        opening: Fen::from_position(opening, EnPassantMode::Legal).to_string(),
        moves,
        result: match winner {
            Some(Color::White) => "1-0",
            Some(Color::Black) => "0-1",
            None => "1/2-1/2",
        }
        .to_string(),
        termination,
    };
    loop {
        let k = key(&pos);
        if let Some((winner, termination)) = rule_ending(&pos, k, &keys) {
            return finish(winner, termination, moves);
        }
        if moves.len() as u32 >= config.max_plies {
            return finish(None, Termination::PlyLimit, moves);
        }
        if let Some(w) = adjudicate(&white_scores, moves.len() as u32, config) {
            return match w {
                Some(c) => finish(Some(c), Termination::ResignAdjudication, moves),
                None => finish(None, Termination::DrawAdjudication, moves),
            };
        }

        let turn = pos.turn();
        let limits = match clocks {
            Some(c) => {
                let inc = Duration::from_millis(config.clock.map_or(0, |(_, i)| i));
                Limits {
                    wtime: Some(c[Color::White as usize]),
                    btime: Some(c[Color::Black as usize]),
                    winc: Some(inc),
                    binc: Some(inc),
                    ..Limits::default()
                }
            }
            None => Limits::nodes(config.nodes.unwrap_or(5000)),
        };
        let started = Instant::now();
        let result = searchers[turn as usize].search(&pos, &keys, &limits, |_| {});
        if let (Some(c), Some((_, inc))) = (clocks.as_mut(), config.clock) {
            let left = &mut c[turn as usize];
            let used = started.elapsed();
            if used > *left {
                return finish(Some(!turn), Termination::TimeForfeit, moves);
            }
            *left = *left - used + Duration::from_millis(inc);
        }
        let mv = result.best.expect("a legal move exists");
        let cp = Score::from_internal(result.value, &pos).centipawns_or_mate();
        white_scores.push(if turn == Color::White { cp } else { -cp });
        moves.push(SanPlus::from_move(pos.clone(), mv).to_string());
        keys.push(k);
        pos.play_unchecked(mv);
    }
}

/// `Some(Some(color))`: that side wins by adjudication; `Some(None)`: a draw; `None`: play on.
fn adjudicate(white_scores: &[i32], plies: u32, config: &MatchConfig) -> Option<Winner> {
    let n = white_scores.len();
    let resign = 2 * config.resign_moves as usize;
    if config.resign_moves > 0 && n >= resign {
        let last = &white_scores[n - resign..];
        if last.iter().all(|&s| s >= config.resign_cp) {
            return Some(Some(Color::White));
        }
        if last.iter().all(|&s| s <= -config.resign_cp) {
            return Some(Some(Color::Black));
        }
    }
    let draw = 2 * config.draw_moves as usize;
    if config.draw_moves > 0
        && plies >= config.draw_after_ply
        && n >= draw
        && white_scores[n - draw..]
            .iter()
            .all(|s| s.abs() <= config.draw_cp)
    {
        return Some(None);
    }
    None
}

/// Two games from one opening, `new` with White first, then with Black.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PairRecord {
    pub games: [GameRecord; 2],
}

impl PairRecord {
    /// `new`'s half points over the pair, 0..=4: the pentanomial bin.
    pub fn bin(&self) -> usize {
        (self.games[0].half_points_of(true) + self.games[1].half_points_of(false)) as usize
    }

    /// `new`'s (wins, draws, losses) over the pair.
    pub fn wdl(&self) -> (u64, u64, u64) {
        let mut w = (0, 0, 0);
        for (g, new_white) in [(&self.games[0], true), (&self.games[1], false)] {
            match g.half_points_of(new_white) {
                2 => w.0 += 1,
                1 => w.1 += 1,
                _ => w.2 += 1,
            }
        }
        w
    }
}

pub fn play_pair(new: &Player, base: &Player, opening: &Chess, config: &MatchConfig) -> PairRecord {
    PairRecord {
        games: [
            play_game(new, base, opening, config),
            play_game(base, new, opening, config),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classical(name: &str) -> Player {
        Player {
            name: name.into(),
            evaluator: Evaluator::Classical,
        }
    }

    #[test]
    fn a_pair_is_deterministic_and_consistent() {
        let config = MatchConfig {
            nodes: Some(800),
            ..MatchConfig::default()
        };
        let open = Chess::default();
        let a = play_pair(&classical("new"), &classical("base"), &open, &config);
        let b = play_pair(&classical("new"), &classical("base"), &open, &config);
        assert_eq!(a, b);
        let (w, d, l) = a.wdl();
        assert_eq!(w + d + l, 2);
        assert_eq!(a.bin() as u64, 2 * w + d);
        // The PGN replays: every SAN move is legal from the opening, and the result matches.
        let pgn = a.games[0].to_pgn("test", "1.1");
        let book = crate::book::Book::parse("g.pgn", pgn.as_bytes());
        match a.games[0].termination {
            Termination::Checkmate | Termination::Stalemate => assert!(book.is_err()),
            _ => assert_eq!(book.unwrap().positions.len(), 1),
        }
        assert!(pgn.contains(&format!("[Result \"{}\"]", a.games[0].result)));
    }

    #[test]
    fn a_game_on_the_clock_ends_without_a_forfeit() {
        let config = MatchConfig {
            nodes: None,
            // Roomy enough that a busy CI machine pausing the search thread for a second
            // does not lose on time; the time manager still has to share 3 s over the game.
            clock: Some((3000, 100)),
            max_plies: 40,
            ..MatchConfig::default()
        };
        let start = std::time::Instant::now();
        let g = play_game(&classical("a"), &classical("b"), &Chess::default(), &config);
        assert_ne!(g.termination, Termination::TimeForfeit, "{g:?}");
        assert!(!g.moves.is_empty());
        // Two clocks of 3 s plus increments bound the game's length.
        assert!(
            start.elapsed().as_secs_f64() < 6.0 + 0.2 * 40.0,
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn adjudication_rules() {
        let c = MatchConfig::default();
        assert_eq!(adjudicate(&[700; 8], 8, &c), Some(Some(Color::White)));
        assert_eq!(adjudicate(&[700; 7], 7, &c), None);
        assert_eq!(adjudicate(&[-900; 8], 8, &c), Some(Some(Color::Black)));
        assert_eq!(adjudicate(&[5; 16], 70, &c), Some(None));
        assert_eq!(adjudicate(&[5; 16], 40, &c), None, "too early for a draw");
        let mut mixed = vec![700; 8];
        mixed[3] = 100;
        assert_eq!(adjudicate(&mixed, 8, &c), None);
    }
}
