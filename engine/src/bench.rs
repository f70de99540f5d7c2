//! `lakefish engine bench`: a fixed set of positions searched to a fixed depth. The node
//! total is a signature of the search (the same on every run and machine for the same
//! evaluation); the speed is nodes per second on one thread.
//!
//! Also the evaluation benchmark: incremental accumulator updates against full refreshes
//! over the same positions, in the same run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use shakmaty::fen::Fen;
use shakmaty::{CastlingMode, Chess, Color, Move, Position};

use crate::eval::{EvalStack, Evaluator};
use crate::nnue::Network;
use crate::random_games::SplitMix;
use crate::search::{Limits, Searcher};

/// Openings, middlegames with tactics, and endgames of several kinds.
pub const POSITIONS: &[&str] = &[
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
    "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",
    "r1bqkb1r/pppp1ppp/2n2n2/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R w KQkq - 4 4",
    "rnbqkb1r/pp1p1ppp/4pn2/2p5/2PP4/2N5/PP2PPPP/R1BQKBNR w KQkq - 0 4",
    "r1bq1rk1/pp2bppp/2n1pn2/2pp4/3P4/2PBPN2/PP1N1PPP/R1BQ1RK1 w - - 0 8",
    "2rq1rk1/pb1nbppp/1p2pn2/2pp4/2PP4/1PN1PN2/PB2BPPP/2RQ1RK1 w - - 4 11",
    "r4rk1/1pp1qppp/p1np1n2/2b1p1B1/2B1P1b1/P1NP1N2/1PP1QPPP/R4RK1 w - - 0 10",
    "r2q1rk1/ppp2ppp/2n1bn2/2b1p3/3pP3/3P1NPP/PPP1NPB1/R1BQ1RK1 b - - 0 9",
    "3r1rk1/p4ppp/1pn1p3/2p5/2P1P3/P1N2P2/1P3P1P/2KR3R w - - 0 17",
    "4rrk1/pp1n3p/3q2pQ/2p1pb2/2PP4/2P3N1/P2B2PP/4RRK1 b - - 7 19",
    "r3r1k1/2p2ppp/p1p1bn2/8/1q2P3/2NPQN2/PPP3PP/R4RK1 b - - 2 15",
    "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1",
    "8/8/1p1k2p1/p1prp2p/P2n3P/6P1/1P1R1PK1/4R3 b - - 5 41",
    "6k1/6p1/6Pp/ppp5/3pn2P/1P3K2/1PP2P2/3N4 b - - 0 1",
    "8/3k4/8/8/8/4B3/4KB2/2B5 w - - 0 1",
    "5k2/7R/4P2p/5K2/p1r2P1p/8/8/8 b - - 0 1",
];

/// One bench run.
#[derive(Debug, Clone)]
pub struct BenchResult {
    pub nodes: u64,
    pub elapsed: Duration,
}

impl BenchResult {
    pub fn nps(&self) -> f64 {
        self.nodes as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

pub fn positions() -> Vec<Chess> {
    POSITIONS
        .iter()
        .map(|f| {
            f.parse::<Fen>()
                .expect("bench FEN")
                .into_position(CastlingMode::Standard)
                .expect("legal bench position")
        })
        .collect()
}

/// Searches every bench position to `depth` with a fresh 16 MiB table each.
pub fn bench(evaluator: Evaluator, depth: u32) -> BenchResult {
    let mut searcher = Searcher::new(evaluator, 16);
    let mut nodes = 0;
    let start = Instant::now();
    for pos in positions() {
        searcher.clear();
        nodes += searcher
            .search(&pos, &[], &Limits::depth(depth), |_| {})
            .nodes;
    }
    BenchResult {
        nodes,
        elapsed: start.elapsed(),
    }
}

/// Timed passes over the positions per measure in [`bench_eval`] (the best one counts).
const EVAL_PASSES: usize = 15;

/// Nanoseconds per position along random games (the same positions for every measure).
#[derive(Debug, Clone)]
pub struct EvalBench {
    pub positions: usize,
    /// Deriving the accumulators from the parent's by the move's feature changes.
    pub incremental_ns: f64,
    /// Building the accumulators from scratch.
    pub refresh_ns: f64,
    /// The dense layers over ready accumulators (the same work either way).
    pub propagate_ns: f64,
}

impl EvalBench {
    /// Accumulator cost: refresh over incremental.
    pub fn accumulator_ratio(&self) -> f64 {
        self.refresh_ns / self.incremental_ns
    }

    /// Whole evaluation (accumulators plus dense layers): refresh over incremental.
    pub fn evaluation_ratio(&self) -> f64 {
        (self.refresh_ns + self.propagate_ns) / (self.incremental_ns + self.propagate_ns)
    }
}

/// One game as the evaluation benchmark replays it: each move with the side that played it and
/// the position it led to.
pub type Line = Vec<(Color, Move, Chess)>;

/// `games` random games of up to 120 plies (kings wander far more than in real games).
pub fn random_lines(games: usize) -> Vec<Line> {
    let mut lines = Vec::new();
    let mut rng = SplitMix(2026);
    for _ in 0..games {
        let mut pos = Chess::default();
        let mut line = Vec::new();
        for _ in 0..120 {
            let moves = pos.legal_moves();
            if moves.is_empty() {
                break;
            }
            let mv = moves[rng.below(moves.len() as u64) as usize];
            let turn = pos.turn();
            pos.play_unchecked(mv);
            line.push((turn, mv, pos.clone()));
        }
        lines.push(line);
    }
    lines
}

/// The main lines of the first `max_games` games of a PGN text that start from the standard
/// position (read as opening books are: [`crate::book`]); a game stops at its first
/// unreadable or illegal move.
pub fn pgn_lines(pgn: &str, max_games: usize) -> Vec<Line> {
    let mut lines = Vec::new();
    for game in crate::book::pgn_games(pgn) {
        if lines.len() >= max_games {
            break;
        }
        if game.tag("FEN").is_some() || game.tag("Variant").is_some() {
            continue;
        }
        let mut pos = Chess::default();
        let mut line = Line::new();
        for token in crate::book::san_tokens(&game.movetext) {
            let Some(mv) = token
                .parse::<shakmaty::san::SanPlus>()
                .ok()
                .and_then(|s| s.san.to_move(&pos).ok())
            else {
                break;
            };
            let turn = pos.turn();
            pos.play_unchecked(mv);
            line.push((turn, mv, pos.clone()));
        }
        if !line.is_empty() {
            lines.push(line);
        }
    }
    lines
}

/// Times accumulator updates against refreshes, and the dense layers, over the positions of
/// `lines`; checks that both ways give the same evaluations.
pub fn bench_eval(net: Arc<Network>, lines: &[Line]) -> EvalBench {
    let positions: usize = lines.iter().map(Vec::len).sum();
    let longest = lines.iter().map(Vec::len).max().unwrap_or(0);
    let mut stack = EvalStack::new(Evaluator::Nnue(Arc::clone(&net)), longest + 2);

    // The moves on their own, packed: in a search the move and the position are at hand (in
    // L1), so neither side should pay for streaming the benchmark's 144-byte records from
    // memory for data it does not use. The incremental side reads a move (and, only for
    // king-relative sets, the position's king); the refresh side reads the position.
    let moves: Vec<Vec<(Color, Move)>> = lines
        .iter()
        .map(|l| l.iter().map(|(turn, mv, _)| (*turn, *mv)).collect())
        .collect();
    // Each game's start position is set up untimed (it is not one of the measured positions,
    // and an engine refreshes its root once per search); then every position of the game is
    // derived from its predecessor.
    let incremental_pass = |stack: &mut EvalStack| {
        let mut total = Duration::ZERO;
        for (line, moves) in lines.iter().zip(&moves) {
            stack.reset(&Chess::default());
            let start = Instant::now();
            for (ply, (turn, mv)) in moves.iter().enumerate() {
                stack.push(ply, *turn, *mv, &line[ply].2);
            }
            std::hint::black_box(stack.accumulator(line.len(), shakmaty::Color::White));
            total += start.elapsed();
        }
        total
    };
    let refresh_pass = |stack: &mut EvalStack| {
        let start = Instant::now();
        for line in lines {
            for (_, _, child) in line {
                stack.reset(child);
                std::hint::black_box(stack.accumulator(0, shakmaty::Color::White));
            }
        }
        start.elapsed()
    };
    // One untimed pass each first: the stack's pages are touched for the first time there (a
    // page fault per 4 KiB would otherwise be charged to the incremental side) and the
    // weights come into cache. Then the best of a few alternating passes, like any bench.
    incremental_pass(&mut stack);
    refresh_pass(&mut stack);
    let (mut incremental, mut refresh) = (Duration::MAX, Duration::MAX);
    for _ in 0..EVAL_PASSES {
        incremental = incremental.min(incremental_pass(&mut stack));
        refresh = refresh.min(refresh_pass(&mut stack));
    }

    // Dense layers, and the check that both ways agree.
    let mut sums = [0i64; 2];
    let mut propagate = Duration::ZERO;
    for line in lines {
        stack.reset(&Chess::default());
        for (ply, (turn, mv, child)) in line.iter().enumerate() {
            stack.push(ply, *turn, *mv, child);
            let t = Instant::now();
            sums[0] += stack.evaluate(ply + 1, child) as i64;
            propagate += t.elapsed();
        }
    }
    for line in lines {
        for (_, _, child) in line {
            stack.reset(child);
            sums[1] += stack.evaluate(0, child) as i64;
        }
    }
    assert_eq!(
        sums[0], sums[1],
        "incremental and refreshed evaluations differ"
    );
    let per = |d: Duration| d.as_nanos() as f64 / positions as f64;
    EvalBench {
        positions,
        incremental_ns: per(incremental),
        refresh_ns: per(refresh),
        propagate_ns: per(propagate),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pgn_lines_follow_the_main_line_only() {
        let pgn = "[Event \"a\"]\n[Site \"x\"]\n\n1. e4 {[%eval 0.2] [%clk 0:03:00]} 1... e5 2. Nf3!? (2. Bc4 Nc6 (2... Nf6)) 2... Nc6 $1 3. Bb5 a6 1-0\n\n\
            [Event \"b\"]\n[FEN \"8/8/8/8/8/8/8/K1k5 w - - 0 1\"]\n\n1. Kb1 *\n\n\
            [Event \"c\"]\n\n1. d4 d5 2. Qxh7 e5 0-1\n";
        let lines = pgn_lines(pgn, 10);
        assert_eq!(lines.len(), 2, "the FEN game is skipped");
        let sans: Vec<String> = lines[0]
            .iter()
            .map(|(_, mv, _)| mv.to_uci(CastlingMode::Standard).to_string())
            .collect();
        assert_eq!(sans, ["e2e4", "e7e5", "g1f3", "b8c6", "f1b5", "a7a6"]);
        // The illegal Qxh7 ends the third game after two moves.
        assert_eq!(lines[1].len(), 2);
        assert_eq!(lines[1][1].0, Color::Black);
        assert_eq!(pgn_lines(pgn, 1).len(), 1);
    }

    #[test]
    fn bench_node_count_is_reproducible() {
        let a = bench(Evaluator::Classical, 4);
        let b = bench(Evaluator::Classical, 4);
        assert_eq!(a.nodes, b.nodes);
        assert!(a.nodes > 10_000, "{}", a.nodes);
    }
}
