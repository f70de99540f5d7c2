//! Engine-vs-engine games for SPRT: colour-reversed pairs from one opening, limited by nodes
//! (deterministic for lakefish's own engine: the same nets, opening and limits give the same
//! games) or by a clock, with resign and draw adjudication; games written as PGN. A side is
//! lakefish's engine in-process or any UCI engine as a child process; an engine that plays an
//! illegal move, crashes, stalls, loses on time or does not answer loses the game, with the
//! reason kept, and a fresh process plays the next game.

use std::time::{Duration, Instant};

use shakmaty::fen::Fen;
use shakmaty::san::SanPlus;
use shakmaty::uci::UciMove;
use shakmaty::zobrist::Zobrist64;
use shakmaty::{CastlingMode, Chess, Color, EnPassantMode, Position};

use crate::eval::Evaluator;
use crate::search::{Limits, Score, Searcher};
use crate::uci_client::{EngineFault, UciCommand, UciProcess, position_command};

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
    /// How far past its clock a UCI engine's `bestmove` may arrive before it is a time
    /// forfeit (fastchess's `timemargin`), in milliseconds.
    #[serde(default)]
    pub time_margin_ms: u64,
    /// How long past its limit (the clock, or none at a node limit) a UCI engine may stay
    /// silent before it is stalled: it loses and its process is killed.
    #[serde(default = "default_stall_ms")]
    pub stall_ms: u64,
    /// How long a UCI engine may take to answer `uci` and `isready`.
    #[serde(default = "default_handshake_ms")]
    pub handshake_ms: u64,
}

fn default_stall_ms() -> u64 {
    10_000
}
fn default_handshake_ms() -> u64 {
    10_000
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
            time_margin_ms: 0,
            stall_ms: default_stall_ms(),
            handshake_ms: default_handshake_ms(),
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
    /// The loser sent a move that is not legal (or none).
    IllegalMove,
    /// The loser's process ended mid-game.
    Crash,
    /// The loser sent no `bestmove` within its limit plus the stall margin.
    Stall,
    /// The loser did not start or did not answer `uci` / `isready`.
    Unresponsive,
}

impl Termination {
    /// Ends that count against the engine that lost, per engine, in a test's integrity counts.
    pub fn is_fault(self) -> bool {
        matches!(
            self,
            Termination::TimeForfeit
                | Termination::IllegalMove
                | Termination::Crash
                | Termination::Stall
                | Termination::Unresponsive
        )
    }
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
    /// What went wrong, for a game that ended by a fault (names the engine and the move).
    #[serde(default)]
    pub reason: Option<String>,
    /// PGN `TimeControl`: `8+0.08`, or `-` for node-limited games.
    #[serde(default)]
    pub time_control: Option<String>,
    /// What the engine said about each move: its score, depth and time (the PGN's move
    /// comments, as fastchess writes them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<MoveNote>,
    /// When the game started and ended (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
}

/// One move's engine output, from the mover's view.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MoveNote {
    /// `+0.31` (pawns) or `+M3` / `-M2` (mate in moves), when the engine gave a score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<u32>,
    /// Time the move took, milliseconds.
    pub ms: u64,
}

impl MoveNote {
    fn new(score: Option<Score>, depth: Option<u32>, took: Duration) -> MoveNote {
        let eval = score.map(|s| match s {
            Score::Cp(cp) => format!("{:+.2}", cp as f64 / 100.0),
            Score::Mate(m) if m >= 0 => format!("+M{m}"),
            Score::Mate(m) => format!("-M{}", -m),
        });
        MoveNote {
            eval,
            depth,
            ms: took.as_millis() as u64,
        }
    }

    /// `+0.31/14 0.212s`, fastchess's move comment.
    fn comment(&self) -> String {
        let time = format!("{:.3}s", self.ms as f64 / 1000.0);
        match (&self.eval, self.depth) {
            (Some(e), Some(d)) => format!("{e}/{d} {time}"),
            (Some(e), None) => format!("{e} {time}"),
            _ => time,
        }
    }
}

/// A PGN header value: quotes and control characters (an engine's name with a newline)
/// cannot end the tag or the line.
fn tag_value(v: &str) -> String {
    v.chars()
        .map(|c| match c {
            '"' => '\'',
            '\\' => '/',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect()
}

/// `2026-11-28T03:36:37 +0000` (fastchess's GameStartTime) from RFC 3339.
fn pgn_time(t: &str) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    chrono::DateTime::parse_from_rfc3339(t).ok()
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

    /// The game as PGN, as fastchess writes it: its headers in fastchess's order (dates,
    /// times and duration, `Termination` in fastchess's words), the opening as a FEN tag, and
    /// after each move the engine's score, depth and time; the last comment says how the game
    /// ended. `round` is the pair's number, which both games of a pair share.
    pub fn to_pgn(&self, event: &str, round: &str) -> String {
        let start = self.started.as_deref().and_then(pgn_time);
        let end = self.ended.as_deref().and_then(pgn_time);
        let date = start.map_or("????.??.??".to_string(), |t| {
            t.format("%Y.%m.%d").to_string()
        });
        let stamp =
            |t: chrono::DateTime<chrono::FixedOffset>| t.format("%Y-%m-%dT%H:%M:%S %z").to_string();
        let mut tags: Vec<(&str, String)> = vec![
            ("Event", event.into()),
            ("Site", "lakefish".into()),
            ("Date", date),
            ("Round", round.into()),
            ("White", self.white.clone()),
            ("Black", self.black.clone()),
            ("Result", self.result.clone()),
            ("SetUp", "1".into()),
            ("FEN", self.opening.clone()),
        ];
        if let (Some(a), Some(b)) = (start, end) {
            let secs = (b - a).num_seconds().max(0);
            tags.push((
                "GameDuration",
                format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60),
            ));
            tags.push(("GameStartTime", stamp(a)));
            tags.push(("GameEndTime", stamp(b)));
        }
        tags.extend([
            ("PlyCount", self.moves.len().to_string()),
            (
                "Termination",
                fastchess_termination(self.termination).into(),
            ),
            (
                "TimeControl",
                self.time_control.clone().unwrap_or("-".into()),
            ),
        ]);
        let mut s = String::new();
        for (k, v) in tags {
            s.push_str(&format!("[{k} \"{}\"]\n", tag_value(&v)));
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
        // How it ended, in the last move's comment (or alone, for a game without moves).
        let ending = self
            .reason
            .clone()
            .unwrap_or_else(|| termination_text(self.termination).to_string());
        let last = self.moves.len().saturating_sub(1);
        let mut ended_said = false;
        for (i, m) in self.moves.iter().enumerate() {
            if white {
                push(format!("{number}."), &mut line, &mut s);
            } else if i == 0 {
                push(format!("{number}..."), &mut line, &mut s);
            }
            push(m.clone(), &mut line, &mut s);
            let mut comment = self.notes.get(i).map(MoveNote::comment);
            if i == last {
                comment = Some(match comment {
                    Some(c) => format!("{c}, {ending}"),
                    None => ending.clone(),
                });
                ended_said = true;
            }
            if let Some(c) = comment {
                let c = format!("{{{}}}", c.replace(['{', '}'], ""));
                for word in c.split(' ') {
                    push(word.to_string(), &mut line, &mut s);
                }
            }
            if !white {
                number += 1;
            }
            white = !white;
        }
        if !ended_said {
            let comment = format!("{{{}}}", ending.replace(['{', '}'], ""));
            for word in comment.split(' ') {
                push(word.to_string(), &mut line, &mut s);
            }
        }
        push(self.result.clone(), &mut line, &mut s);
        s.push_str(line.trim_end());
        s.push_str("\n\n");
        s
    }
}

/// fastchess's `Termination` tag: normal, adjudication, time forfeit, illegal move or
/// abandoned (the detail goes in the last move's comment).
fn fastchess_termination(t: Termination) -> &'static str {
    match t {
        Termination::Checkmate
        | Termination::Stalemate
        | Termination::Repetition
        | Termination::FiftyMoves
        | Termination::InsufficientMaterial => "normal",
        Termination::ResignAdjudication | Termination::DrawAdjudication | Termination::PlyLimit => {
            "adjudication"
        }
        Termination::TimeForfeit => "time forfeit",
        Termination::IllegalMove => "illegal move",
        Termination::Crash | Termination::Stall | Termination::Unresponsive => "abandoned",
    }
}

/// How a game ended, in words (the last move's comment).
pub fn termination_text(t: Termination) -> &'static str {
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
        Termination::IllegalMove => "rules infraction: illegal move",
        Termination::Crash => "abandoned: crash",
        Termination::Stall => "abandoned: stall",
        Termination::Unresponsive => "abandoned: unresponsive",
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

/// A side of a match: a name (the PGN's `White`/`Black`) and the engine that plays it.
#[derive(Debug, Clone)]
pub struct Player {
    pub name: String,
    pub engine: PlayerEngine,
}

#[derive(Debug, Clone)]
pub enum PlayerEngine {
    /// lakefish's own search, in this process, with this evaluation.
    Builtin(Evaluator),
    /// Any UCI engine, started as a child process for each game.
    Uci(UciCommand),
}

impl Player {
    pub fn builtin(name: impl Into<String>, evaluator: Evaluator) -> Player {
        Player {
            name: name.into(),
            engine: PlayerEngine::Builtin(evaluator),
        }
    }
}

/// One side's engine for the length of a game.
enum Mover {
    Builtin(Box<Searcher>),
    Uci(UciProcess),
}

/// What a side answered for one move.
struct Reply {
    mv: Result<shakmaty::Move, (Termination, String)>,
    /// From the mover's view, when it said.
    score: Option<Score>,
    depth: Option<u32>,
}

impl Mover {
    fn start(player: &Player, config: &MatchConfig) -> Result<Mover, EngineFault> {
        Ok(match &player.engine {
            PlayerEngine::Builtin(eval) => {
                Mover::Builtin(Box::new(Searcher::new(eval.clone(), config.hash_mb)))
            }
            PlayerEngine::Uci(cmd) => {
                let handshake = Duration::from_millis(config.handshake_ms);
                let mut p = UciProcess::start(cmd, handshake)?;
                p.new_game(handshake)?;
                Mover::Uci(p)
            }
        })
    }

    /// One move at `pos`; `left` is the mover's clock when there is one.
    #[allow(clippy::too_many_arguments)]
    fn play(
        &mut self,
        name: &str,
        pos: &Chess,
        keys: &[u64],
        start_fen: &str,
        uci_moves: &[String],
        limits: &Limits,
        left: Option<Duration>,
        config: &MatchConfig,
    ) -> Reply {
        match self {
            Mover::Builtin(searcher) => {
                let started = Instant::now();
                let result = searcher.search(pos, keys, limits, |_| {});
                let score = Some(Score::from_internal(result.value, pos));
                let depth = Some(result.depth);
                let margin = Duration::from_millis(config.time_margin_ms);
                if left.is_some_and(|l| started.elapsed() > l + margin) {
                    return Reply {
                        mv: Err((Termination::TimeForfeit, format!("{name} lost on time"))),
                        score,
                        depth,
                    };
                }
                let mv = result.best.expect("a legal move exists");
                Reply {
                    mv: Ok(mv),
                    score,
                    depth,
                }
            }
            Mover::Uci(process) => {
                let go = match (left, limits.nodes) {
                    (Some(_), _) => format!(
                        "go wtime {} btime {} winc {} binc {}",
                        limits.wtime.unwrap_or_default().as_millis(),
                        limits.btime.unwrap_or_default().as_millis(),
                        limits.winc.unwrap_or_default().as_millis(),
                        limits.binc.unwrap_or_default().as_millis()
                    ),
                    (None, nodes) => format!("go nodes {}", nodes.unwrap_or(5000)),
                };
                let margin = Duration::from_millis(config.time_margin_ms);
                let wait = left.map_or(Duration::ZERO, |l| l + margin)
                    + Duration::from_millis(config.stall_ms);
                let reply = match process.go(&position_command(start_fen, uci_moves), &go, wait) {
                    Ok(r) => r,
                    Err(fault) => {
                        let t = match fault {
                            EngineFault::Stalled(_) => Termination::Stall,
                            EngineFault::Crashed(_) => Termination::Crash,
                            EngineFault::Unresponsive(_) => Termination::Unresponsive,
                        };
                        return Reply {
                            mv: Err((t, format!("{name} {fault}"))),
                            score: None,
                            depth: None,
                        };
                    }
                };
                let (score, depth) = (reply.score, reply.depth);
                if let Some(l) = left
                    && reply.elapsed > l + margin
                {
                    let text = format!(
                        "{name} lost on time ({} ms with {} ms left)",
                        reply.elapsed.as_millis(),
                        l.as_millis()
                    );
                    return Reply {
                        mv: Err((Termination::TimeForfeit, text)),
                        score,
                        depth,
                    };
                }
                let legal = UciMove::from_ascii(reply.bestmove.as_bytes())
                    .ok()
                    .and_then(|u| u.to_move(pos).ok());
                let mv = legal.ok_or_else(|| {
                    let shown: String = reply.bestmove.chars().take(40).collect();
                    let fen = Fen::from_position(pos, EnPassantMode::Legal);
                    (
                        Termination::IllegalMove,
                        format!("{name} played an illegal move {shown:?} in {fen}"),
                    )
                });
                Reply { mv, score, depth }
            }
        }
    }
}

/// Plays one game from `opening`.
pub fn play_game(
    white: &Player,
    black: &Player,
    opening: &Chess,
    config: &MatchConfig,
) -> GameRecord {
    let start_fen = Fen::from_position(opening, EnPassantMode::Legal).to_string();
    let now = || chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let started_at = now();
    let mut notes: Vec<MoveNote> = Vec::new();
    let finish = |winner: Winner,
                  termination: Termination,
                  reason: Option<String>,
                  moves: Vec<String>,
                  notes: Vec<MoveNote>| GameRecord {
        white: white.name.clone(),
        black: black.name.clone(),
        opening: start_fen.clone(),
        moves,
        result: match winner {
            Some(Color::White) => "1-0",
            Some(Color::Black) => "0-1",
            None => "1/2-1/2",
        }
        .to_string(),
        termination,
        reason,
        time_control: Some(match config.clock {
            Some((base, inc)) => format!("{}+{}", base as f64 / 1000.0, inc as f64 / 1000.0),
            None => "-".into(),
        }),
        notes,
        started: Some(started_at.clone()),
        ended: Some(now()),
    };
    // Black's engine first, so index by `Color as usize`; White starts second, so a White
    // that does not answer is found before it would move.
    let mut movers = Vec::with_capacity(2);
    for (player, colour) in [(black, Color::Black), (white, Color::White)] {
        match Mover::start(player, config) {
            Ok(m) => movers.push(m),
            Err(fault) => {
                let text = format!("{} {fault}", player.name);
                let t = match fault {
                    EngineFault::Crashed(_) => Termination::Crash,
                    _ => Termination::Unresponsive,
                };
                return finish(Some(!colour), t, Some(text), Vec::new(), Vec::new());
            }
        }
    }
    let mut clocks = config
        .clock
        .map(|(base, _)| [Duration::from_millis(base); 2]);
    let mut pos = opening.clone();
    let mut keys: Vec<u64> = Vec::new();
    let mut moves = Vec::new();
    let mut uci_moves: Vec<String> = Vec::new();
    // Scores in centipawns from White's view, one per ply played (`None`: the engine gave none).
    let mut white_scores: Vec<Option<i32>> = Vec::new();
    let key = |p: &Chess| p.zobrist_hash::<Zobrist64>(EnPassantMode::Legal).0;
    loop {
        let k = key(&pos);
        if let Some((winner, termination)) = rule_ending(&pos, k, &keys) {
            return finish(winner, termination, None, moves, notes);
        }
        if moves.len() as u32 >= config.max_plies {
            return finish(None, Termination::PlyLimit, None, moves, notes);
        }
        if let Some(w) = adjudicate(&white_scores, moves.len() as u32, config) {
            return match w {
                Some(c) => finish(Some(c), Termination::ResignAdjudication, None, moves, notes),
                None => finish(None, Termination::DrawAdjudication, None, moves, notes),
            };
        }

        let turn = pos.turn();
        let inc = Duration::from_millis(config.clock.map_or(0, |(_, i)| i));
        let limits = match clocks {
            Some(c) => Limits {
                wtime: Some(c[Color::White as usize]),
                btime: Some(c[Color::Black as usize]),
                winc: Some(inc),
                binc: Some(inc),
                ..Limits::default()
            },
            None => Limits::nodes(config.nodes.unwrap_or(5000)),
        };
        let left = clocks.map(|c| c[turn as usize]);
        let name = if turn == Color::White {
            &white.name
        } else {
            &black.name
        };
        let started = Instant::now();
        let reply = movers[turn as usize].play(
            name, &pos, &keys, &start_fen, &uci_moves, &limits, left, config,
        );
        let mv = match reply.mv {
            Ok(mv) => mv,
            Err((termination, text)) => {
                return finish(Some(!turn), termination, Some(text), moves, notes);
            }
        };
        notes.push(MoveNote::new(reply.score, reply.depth, started.elapsed()));
        if let Some(c) = clocks.as_mut() {
            let left = &mut c[turn as usize];
            *left = left.saturating_sub(started.elapsed()) + inc;
        }
        white_scores.push(
            reply
                .score
                .map(Score::centipawns_or_mate)
                .map(|cp| if turn == Color::White { cp } else { -cp }),
        );
        moves.push(SanPlus::from_move(pos.clone(), mv).to_string());
        uci_moves.push(mv.to_uci(CastlingMode::Standard).to_string());
        keys.push(k);
        pos.play_unchecked(mv);
    }
}

/// `Some(Some(color))`: that side wins by adjudication; `Some(None)`: a draw; `None`: play on.
fn adjudicate(white_scores: &[Option<i32>], plies: u32, config: &MatchConfig) -> Option<Winner> {
    let n = white_scores.len();
    let resign = 2 * config.resign_moves as usize;
    if config.resign_moves > 0 && n >= resign {
        let last = &white_scores[n - resign..];
        if last
            .iter()
            .all(|s| s.is_some_and(|s| s >= config.resign_cp))
        {
            return Some(Some(Color::White));
        }
        if last
            .iter()
            .all(|s| s.is_some_and(|s| s <= -config.resign_cp))
        {
            return Some(Some(Color::Black));
        }
    }
    let draw = 2 * config.draw_moves as usize;
    if config.draw_moves > 0
        && plies >= config.draw_after_ply
        && n >= draw
        && white_scores[n - draw..]
            .iter()
            .all(|s| s.is_some_and(|s| s.abs() <= config.draw_cp))
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
        Player::builtin(name, Evaluator::Classical)
    }

    /// fastchess's PGN: its headers in its order, a comment with score, depth and time after
    /// each move, and how the game ended in the last one.
    #[test]
    fn games_are_written_as_fastchess_writes_them() {
        let config = MatchConfig {
            nodes: Some(300),
            ..MatchConfig::default()
        };
        let g = play_game(
            &classical("new\nname"),
            &classical("base"),
            &Chess::default(),
            &config,
        );
        let pgn = g.to_pgn("lakefish sprt x", "7");
        let tags: Vec<&str> = pgn
            .lines()
            .take_while(|l| l.starts_with('['))
            .map(|l| l[1..].split(' ').next().unwrap())
            .collect();
        assert_eq!(
            tags,
            [
                "Event",
                "Site",
                "Date",
                "Round",
                "White",
                "Black",
                "Result",
                "SetUp",
                "FEN",
                "GameDuration",
                "GameStartTime",
                "GameEndTime",
                "PlyCount",
                "Termination",
                "TimeControl"
            ]
        );
        let tag = |k: &str| {
            pgn.lines()
                .find_map(|l| l.strip_prefix(&format!("[{k} \"")))
                .and_then(|v| v.strip_suffix("\"]"))
                .unwrap()
                .to_string()
        };
        assert_eq!(
            tag("White"),
            "new name",
            "a newline cannot break the header"
        );
        assert_eq!(tag("Round"), "7");
        let date = tag("Date");
        assert!(date.len() == 10 && date.as_bytes()[4] == b'.', "{date}");
        let start = tag("GameStartTime");
        assert!(
            start.ends_with(" +0000") && start.as_bytes()[10] == b'T',
            "{start}"
        );
        let duration = tag("GameDuration");
        assert!(
            duration.len() == 8 && duration.as_bytes()[2] == b':',
            "{duration}"
        );
        assert!(
            ["normal", "adjudication"].contains(&tag("Termination").as_str()),
            "{pgn}"
        );
        // `{+0.31/14 0.212s}`, one per move; the last adds how the game ended.
        let body: String = pgn.split("\n\n").nth(1).unwrap().replace('\n', " ");
        let comments: Vec<&str> = body
            .split('{')
            .skip(1)
            .map(|c| c.split('}').next().unwrap())
            .collect();
        assert_eq!(comments.len(), g.moves.len(), "{pgn}");
        for c in &comments {
            let (score, rest) = c.split_once('/').unwrap_or_else(|| panic!("{c}"));
            assert!(
                score.starts_with(['+', '-']) && score.contains('.') || score.contains('M'),
                "{c}"
            );
            let time = rest.split(' ').nth(1).unwrap().trim_end_matches(',');
            assert!(
                time.ends_with('s') && time.trim_end_matches('s').parse::<f64>().is_ok(),
                "{c}"
            );
        }
        assert!(
            comments
                .last()
                .unwrap()
                .ends_with(termination_text(g.termination)),
            "{pgn}"
        );
        // The PGN replays from its FEN with its SAN moves.
        let book = crate::book::Book::parse("g.pgn", pgn.as_bytes());
        assert!(book.is_ok(), "{book:?}");
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
        // The same moves, results and engine output; only the clock readings differ.
        let untimed = |p: &PairRecord| {
            p.games
                .iter()
                .map(|g| {
                    let said: Vec<_> = g.notes.iter().map(|n| (n.eval.clone(), n.depth)).collect();
                    (g.moves.clone(), g.result.clone(), g.termination, said)
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(untimed(&a), untimed(&b));
        assert_eq!(a.games[0].notes.len(), a.games[0].moves.len());
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

    fn faulty(mode: &str) -> Player {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/engines/faulty_uci.py"
        );
        Player {
            name: format!("faulty-{mode}"),
            engine: PlayerEngine::Uci(UciCommand {
                program: "python3".into(),
                args: vec![script.into(), mode.into()],
                options: vec![],
            }),
        }
    }

    #[test]
    fn each_way_an_engine_fails_ends_its_game_with_the_reason() {
        let config = MatchConfig {
            nodes: Some(300),
            stall_ms: 1500,
            handshake_ms: 3000,
            ..MatchConfig::default()
        };
        let open = Chess::default();
        for (mode, termination) in [
            ("illegal", Termination::IllegalMove),
            ("garbage", Termination::IllegalMove),
            ("crash", Termination::Crash),
            ("stall", Termination::Stall),
            ("mute", Termination::Unresponsive),
        ] {
            let name = format!("faulty-{mode}");
            // As White it loses at its first move; as Black after lakefish's first.
            let g = play_game(&faulty(mode), &classical("lakefish"), &open, &config);
            assert_eq!(
                (g.termination, g.result.as_str()),
                (termination, "0-1"),
                "{g:?}"
            );
            assert!(g.moves.is_empty(), "{g:?}");
            let reason = g.reason.clone().unwrap_or_default();
            assert!(reason.starts_with(&name), "{mode}: {reason}");
            let g = play_game(&classical("lakefish"), &faulty(mode), &open, &config);
            assert_eq!(
                (g.termination, g.result.as_str()),
                (termination, "1-0"),
                "{g:?}"
            );
            let played = if mode == "mute" { 0 } else { 1 };
            assert_eq!(g.moves.len(), played, "{g:?}");
            assert!(g.termination.is_fault());
            let pgn = g.to_pgn("t", "1");
            assert!(pgn.contains("[Result \"1-0\"]"), "{pgn}");
            // Movetext wraps at 80 columns, inside comments too.
            let flat = pgn.replace('\n', " ");
            assert!(
                flat.contains(&format!("{{{name}")) || flat.contains(&format!(", {name}")),
                "the reason is a comment: {pgn}"
            );
            assert!(pgn.contains("[Termination \""), "{pgn}");
            assert!(pgn.contains("[TimeControl \"-\"]"), "{pgn}");
        }
        let pgn = play_game(&faulty("garbage"), &classical("b"), &open, &config).to_pgn("t", "1");
        assert!(
            pgn.len() < 2000,
            "junk is not copied into the PGN: {} bytes",
            pgn.len()
        );
        assert!(pgn.contains("[Termination \"illegal move\"]"), "{pgn}");
    }

    #[test]
    fn a_uci_engine_past_its_clock_loses_on_time() {
        let config = MatchConfig {
            nodes: None,
            clock: Some((400, 0)),
            stall_ms: 3000,
            ..MatchConfig::default()
        };
        let g = play_game(&faulty("slow"), &classical("b"), &Chess::default(), &config);
        assert_eq!(g.termination, Termination::TimeForfeit, "{g:?}");
        assert_eq!(g.result, "0-1");
        assert!(g.reason.unwrap().contains("lost on time"));
        assert_eq!(g.time_control.as_deref(), Some("0.4+0"));
    }

    #[test]
    fn adjudication_rules() {
        let c = MatchConfig::default();
        assert_eq!(adjudicate(&[Some(700); 8], 8, &c), Some(Some(Color::White)));
        assert_eq!(adjudicate(&[Some(700); 7], 7, &c), None);
        assert_eq!(
            adjudicate(&[Some(-900); 8], 8, &c),
            Some(Some(Color::Black))
        );
        assert_eq!(adjudicate(&[Some(5); 16], 70, &c), Some(None));
        assert_eq!(
            adjudicate(&[Some(5); 16], 40, &c),
            None,
            "too early for a draw"
        );
        let mut mixed = vec![Some(700); 8];
        mixed[3] = Some(100);
        assert_eq!(adjudicate(&mixed, 8, &c), None);
        // An engine that gives no score never gets a game adjudicated on its word.
        mixed[3] = None;
        mixed[4] = None;
        assert_eq!(adjudicate(&mixed, 8, &c), None);
        assert_eq!(adjudicate(&[None; 16], 70, &c), None);
    }
}
