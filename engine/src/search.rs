//! Alpha-beta search: iterative deepening over a principal-variation search with
//! quiescence, a transposition table, move ordering (hash move, MVV-LVA, killers, history),
//! check extensions, null-move pruning and late-move reductions; repetition, fifty-move and
//! insufficient-material draws; mate scores counted from the root.
//!
//! Positions are copied, not unmade: shakmaty's `Chess` is a few bitboards, and copying keeps
//! every node's position valid for the accumulator stack in [`EvalStack`]. One `Searcher`
//! serves one game at a time; its table and history carry over between moves of a game.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use shakmaty::zobrist::Zobrist64;
use shakmaty::{Bitboard, Chess, Color, EnPassantMode, Move, MoveList, Position, Role};

use crate::eval::{EvalStack, Evaluator};
use crate::scores::{VALUE_MATE, VALUE_MATE_IN_MAX_PLY, internal_to_centipawns, material};

/// Deepest ply the search reaches (extensions included).
pub const MAX_SEARCH_PLY: usize = 128;
const INFINITE: i32 = VALUE_MATE + 1;

/// When to stop. All limits may combine; the first reached ends the search.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits {
    pub depth: Option<u32>,
    pub nodes: Option<u64>,
    pub movetime: Option<Duration>,
    pub wtime: Option<Duration>,
    pub btime: Option<Duration>,
    pub winc: Option<Duration>,
    pub binc: Option<Duration>,
    pub movestogo: Option<u32>,
    /// Search until stopped (`go infinite`, `go ponder`).
    pub infinite: bool,
}

impl Limits {
    pub fn depth(depth: u32) -> Limits {
        Limits {
            depth: Some(depth),
            ..Limits::default()
        }
    }

    pub fn nodes(nodes: u64) -> Limits {
        Limits {
            nodes: Some(nodes),
            ..Limits::default()
        }
    }

    /// (soft, hard) time budgets for `turn`: stop deepening after soft, abort at hard.
    fn budget(&self, turn: Color) -> (Option<Duration>, Option<Duration>) {
        if self.infinite {
            return (None, None);
        }
        let overhead = Duration::from_millis(10);
        let clock = match turn {
            Color::White => self.wtime.map(|t| (t, self.winc.unwrap_or_default())),
            Color::Black => self.btime.map(|t| (t, self.binc.unwrap_or_default())),
        };
        let from_clock = clock.map(|(time, inc)| {
            let moves = self.movestogo.unwrap_or(30).clamp(1, 50);
            let soft = time / moves + inc * 3 / 4;
            let hard = (soft * 3).min(time / 3);
            (
                soft.min(hard).saturating_sub(overhead),
                hard.saturating_sub(overhead),
            )
        });
        let fixed = self
            .movetime
            .map(|t| (t.saturating_sub(overhead), t.saturating_sub(overhead)));
        match (from_clock, fixed) {
            (Some(a), Some(b)) => (Some(a.0.min(b.0)), Some(a.1.min(b.1))),
            (Some((s, h)), None) | (None, Some((s, h))) => (Some(s), Some(h)),
            (None, None) => (None, None),
        }
    }
}

/// A score as UCI reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Score {
    /// Centipawns, converted from internal units by Stockfish's win-rate model.
    Cp(i32),
    /// Mate in this many moves (negative: getting mated).
    Mate(i32),
}

impl Score {
    /// `value` in internal units from the side to move's view on `board`.
    pub fn from_internal(value: i32, pos: &Chess) -> Score {
        if value >= VALUE_MATE_IN_MAX_PLY {
            Score::Mate((VALUE_MATE - value + 1) / 2)
        } else if value <= -VALUE_MATE_IN_MAX_PLY {
            Score::Mate(-(VALUE_MATE + value) / 2)
        } else {
            Score::Cp(internal_to_centipawns(value, material(pos.board())).round() as i32)
        }
    }
}

impl Score {
    /// Centipawns, with a mate counted as ±100,000 (for adjudication thresholds).
    pub fn centipawns_or_mate(self) -> i32 {
        match self {
            Score::Cp(cp) => cp,
            Score::Mate(m) => m.signum() * 100_000,
        }
    }
}

impl std::fmt::Display for Score {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Score::Cp(cp) => write!(f, "cp {cp}"),
            Score::Mate(m) => write!(f, "mate {m}"),
        }
    }
}

/// Progress after each completed iteration.
#[derive(Debug, Clone)]
pub struct Info {
    pub depth: u32,
    pub seldepth: u32,
    /// Internal units, side to move's view.
    pub value: i32,
    pub score: Score,
    pub nodes: u64,
    pub time: Duration,
    pub pv: Vec<Move>,
}

impl Info {
    pub fn nps(&self) -> u64 {
        let micros = self.time.as_micros().max(1) as u64;
        self.nodes.saturating_mul(1_000_000) / micros
    }
}

/// What a search found.
#[derive(Debug, Clone)]
pub struct SearchResult {
    /// `None` only when the root has no legal move.
    pub best: Option<Move>,
    /// Internal units, side to move's view.
    pub value: i32,
    pub depth: u32,
    pub nodes: u64,
    pub pv: Vec<Move>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Bound {
    Exact,
    Lower,
    Upper,
}

#[derive(Clone, Copy, Default)]
struct Entry {
    key: u64,
    mv: u16,
    value: i16,
    depth: u8,
    /// 0 empty, 1 exact, 2 lower, 3 upper.
    bound: u8,
}

/// The engine has no logger (it speaks UCI on stdout): a smaller table is said on stderr.
fn tracing_free_warning(e: &str) {
    eprintln!("hash table: {e}; trying half the size");
}

/// `MemAvailable` from `/proc/meminfo` (Linux), in MiB; `None` where it cannot be read.
pub(crate) fn available_megabytes() -> Option<usize> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}

/// Transposition table: one entry per slot, replaced when the new result is at least as deep
/// or belongs to another position.
struct Table {
    entries: Vec<Entry>,
}

impl Table {
    /// A table of `megabytes`, or the largest smaller power of two the machine can back
    /// (never a panic: a searcher must start).
    fn new(megabytes: usize) -> Table {
        let mut mb = megabytes.max(1);
        loop {
            match Table::try_new(mb) {
                Ok(t) => return t,
                Err(e) if mb > 1 => {
                    tracing_free_warning(&e);
                    mb = (mb / 2).max(1);
                }
                Err(e) => panic!("no memory even for a 1 MiB hash table: {e}"),
            }
        }
    }

    /// A table of `megabytes`, or why the memory could not be had: a size the machine
    /// cannot back is refused up front, instead of the process dying while filling it.
    fn try_new(megabytes: usize) -> Result<Table, String> {
        let n = (megabytes.max(1) << 20) / std::mem::size_of::<Entry>();
        let mut entries = Vec::new();
        entries
            .try_reserve_exact(n)
            .map_err(|e| format!("cannot allocate {megabytes} MiB: {e}"))?;
        if let Some(free) = available_megabytes()
            && megabytes > free
        {
            return Err(format!(
                "{megabytes} MiB is more than the {free} MiB of memory available"
            ));
        }
        entries.resize(n, Entry::default());
        Ok(Table { entries })
    }

    fn index(&self, key: u64) -> usize {
        ((key as u128 * self.entries.len() as u128) >> 64) as usize
    }

    fn probe(&self, key: u64) -> Option<Entry> {
        let e = self.entries[self.index(key)];
        (e.bound != 0 && e.key == key).then_some(e)
    }

    fn store(&mut self, key: u64, mv: u16, value: i32, depth: i32, bound: Bound) {
        let i = self.index(key);
        let old = self.entries[i];
        let depth = depth.clamp(0, 255) as u8;
        if old.key == key && depth + 2 < old.depth && bound != Bound::Exact {
            return;
        }
        let mv = if mv == 0 && old.key == key {
            old.mv
        } else {
            mv
        };
        self.entries[i] = Entry {
            key,
            mv,
            value: value as i16,
            depth,
            bound: match bound {
                Bound::Exact => 1,
                Bound::Lower => 2,
                Bound::Upper => 3,
            },
        };
    }

    fn clear(&mut self) {
        self.entries.fill(Entry::default());
    }
}

/// A move in 16 bits for the table: from, to (the rook for castling), promotion role.
fn encode(mv: Move) -> u16 {
    let (from, to) = match mv {
        Move::Castle { king, rook } => (king, rook),
        _ => (mv.from().expect("board move"), mv.to()),
    };
    let promo = mv.promotion().map_or(0, |r| r as u16);
    1 | (from as u16) << 1 | (to as u16) << 7 | promo << 13
}

/// Mate scores are stored relative to the node, reported relative to the root.
fn to_table(value: i32, ply: usize) -> i32 {
    if value >= VALUE_MATE_IN_MAX_PLY {
        value + ply as i32
    } else if value <= -VALUE_MATE_IN_MAX_PLY {
        value - ply as i32
    } else {
        value
    }
}

fn from_table(value: i32, ply: usize) -> i32 {
    if value >= VALUE_MATE_IN_MAX_PLY {
        value - ply as i32
    } else if value <= -VALUE_MATE_IN_MAX_PLY {
        value + ply as i32
    } else {
        value
    }
}

fn hash(pos: &Chess) -> u64 {
    pos.zobrist_hash::<Zobrist64>(EnPassantMode::Legal).0
}

fn child_hash(pos: &Chess, key: u64, mv: Move, child: &Chess) -> u64 {
    pos.update_zobrist_hash(Zobrist64(key), mv, EnPassantMode::Legal)
        .map_or_else(|| hash(child), |z| z.0)
}

/// Values of roles for MVV-LVA, indexed by `Role as usize` (pawn = 1).
const ROLE_VALUE: [i32; 7] = [0, 1, 3, 3, 5, 9, 20];

fn is_tactical(mv: &Move) -> bool {
    mv.is_capture() || mv.is_promotion()
}

const SEE_VALUE: [i32; 7] = [0, 100, 300, 300, 500, 900, 20000];

/// Static exchange evaluation: the material `mv` wins (in centipawns) if both sides keep
/// recapturing on its target square with their least valuable piece, each free to stop.
fn see(pos: &Chess, mv: &Move) -> i32 {
    let Move::Normal {
        role,
        from,
        capture,
        to,
        promotion,
    } = *mv
    else {
        return 0; // en passant trades pawns; castling captures nothing
    };
    let board = pos.board();
    let promo_gain = promotion.map_or(0, |p| SEE_VALUE[p as usize] - SEE_VALUE[1]);
    let mut gain = [0i32; 34];
    gain[0] = capture.map_or(0, |c| SEE_VALUE[c as usize]) + promo_gain;
    let mut on_square = SEE_VALUE[promotion.unwrap_or(role) as usize];
    let mut occupied = board.occupied() ^ Bitboard::from(from);
    let mut side = !pos.turn();
    let mut d = 0;
    loop {
        let attackers = board.attacks_to(to, side, occupied) & occupied & board.by_color(side);
        let Some((sq, r)) = Role::ALL
            .into_iter()
            .find_map(|r| (attackers & board.by_role(r)).first().map(|sq| (sq, r)))
        else {
            break;
        };
        if r == Role::King
            && (board.attacks_to(to, !side, occupied) & occupied & board.by_color(!side)).any()
        {
            break; // the king may not capture into a defended square
        }
        d += 1;
        gain[d] = on_square - gain[d - 1];
        if (-gain[d - 1]).max(gain[d]) < 0 || d == gain.len() - 1 {
            break;
        }
        on_square = SEE_VALUE[r as usize];
        occupied ^= Bitboard::from(sq);
        side = !side;
    }
    while d > 0 {
        gain[d - 1] = -(-gain[d - 1]).max(gain[d]);
        d -= 1;
    }
    gain[0]
}

/// Selection sort, one step: moves the best-scored of `moves[i..]` (earliest on ties) to
/// `i` and returns it. Cut-offs usually come early, so sorting the whole list would waste work.
fn pick_next(moves: &mut MoveList, scores: &mut [i32; 256], i: usize) -> Move {
    let pick = (i..moves.len())
        .max_by_key(|&j| (scores[j], std::cmp::Reverse(j)))
        .expect("non-empty range");
    scores.swap(i, pick);
    moves.swap(i, pick);
    moves[i]
}

/// Reductions for late quiet moves, by depth and move number.
fn reduction(depth: i32, moves: usize) -> i32 {
    let r = 0.8 + (depth as f64).ln() * (moves as f64).ln() / 2.4;
    r as i32
}

pub struct Searcher {
    table: Table,
    eval: EvalStack,
    killers: Vec<[u16; 2]>,
    /// `[color][from][to]`, kept within ±`HISTORY_MAX`.
    history: Vec<i32>,
    stop: Arc<AtomicBool>,
    // Per search:
    nodes: u64,
    seldepth: usize,
    node_limit: u64,
    hard_deadline: Option<Instant>,
    /// Keys of the game's earlier positions, then of the search path.
    keys: Vec<u64>,
    pv: Vec<Vec<Move>>,
    aborted: bool,
}

const HISTORY_MAX: i32 = 16384;

impl Searcher {
    pub fn new(evaluator: Evaluator, hash_megabytes: usize) -> Searcher {
        Searcher {
            table: Table::new(hash_megabytes),
            eval: EvalStack::new(evaluator, MAX_SEARCH_PLY + 1),
            killers: vec![[0; 2]; MAX_SEARCH_PLY + 2],
            history: vec![0; 2 * 64 * 64],
            stop: Arc::new(AtomicBool::new(false)),
            nodes: 0,
            seldepth: 0,
            node_limit: u64::MAX,
            hard_deadline: None,
            keys: Vec::new(),
            pv: vec![Vec::new(); MAX_SEARCH_PLY + 2],
            aborted: false,
        }
    }

    pub fn evaluator(&self) -> &Evaluator {
        self.eval.evaluator()
    }

    /// Replaces the evaluation (UCI `setoption name EvalFile`).
    pub fn set_evaluator(&mut self, evaluator: Evaluator) {
        self.eval = EvalStack::new(evaluator, MAX_SEARCH_PLY + 1);
        self.table.clear();
    }

    /// Resizes the transposition table (UCI `setoption name Hash`), clearing it.
    /// Resizes the hash table; on an error the old table stays.
    pub fn set_hash(&mut self, megabytes: usize) -> Result<(), String> {
        self.table = Table::try_new(megabytes)?;
        Ok(())
    }

    /// Forgets everything learned (UCI `ucinewgame`).
    pub fn clear(&mut self) {
        self.table.clear();
        self.history.fill(0);
        self.killers.fill([0; 2]);
    }

    /// Setting this flag ends the running search soon. The owner clears it before starting the
    /// next search: clearing it inside `search` would lose a `stop` that arrives between a
    /// UCI `go` and the search thread's first node, and `go infinite` would never end.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.stop)
    }

    /// Static evaluation of `pos` for its side to move, in internal units.
    pub fn static_eval(&mut self, pos: &Chess) -> i32 {
        self.eval.reset(pos);
        self.eval.evaluate(0, pos)
    }

    /// Searches `root`, whose game went through the positions with keys `history` before it
    /// (for repetitions; may be empty), calling `on_info` after every completed depth.
    pub fn search(
        &mut self,
        root: &Chess,
        history: &[u64],
        limits: &Limits,
        mut on_info: impl FnMut(&Info),
    ) -> SearchResult {
        let start = Instant::now();
        self.nodes = 0;
        self.aborted = false;
        self.node_limit = limits.nodes.unwrap_or(u64::MAX);
        let (soft, hard) = limits.budget(root.turn());
        self.hard_deadline = hard.map(|h| start + h);
        self.keys.clear();
        self.keys.extend_from_slice(history);
        self.keys.push(hash(root));
        self.eval.reset(root);
        self.killers.fill([0; 2]);

        let legal = root.legal_moves();
        let mut result = SearchResult {
            best: legal.first().copied(),
            value: 0,
            depth: 0,
            nodes: 0,
            pv: legal.first().copied().into_iter().collect(),
        };
        if legal.is_empty() {
            result.value = if root.is_check() { -VALUE_MATE } else { 0 };
            return result;
        }
        let max_depth = limits.depth.unwrap_or(MAX_SEARCH_PLY as u32 - 1).max(1);
        for depth in 1..=max_depth.min(MAX_SEARCH_PLY as u32 - 1) {
            self.seldepth = 0;
            let value = self.node(root, depth as i32, -INFINITE, INFINITE, 0, true, true);
            if self.aborted {
                // A partial iteration's best move is trusted only once it beat the old one
                // (the PV's first move is searched first).
                if let Some(&mv) = self.pv[0].first()
                    && Some(mv) != result.best
                    && value > result.value
                {
                    result.best = Some(mv);
                    result.pv = self.pv[0].clone();
                }
                break;
            }
            result.value = value;
            result.depth = depth;
            result.pv = self.pv[0].clone();
            result.best = result.pv.first().copied().or(result.best);
            on_info(&Info {
                depth,
                seldepth: self.seldepth as u32,
                value,
                score: Score::from_internal(value, root),
                nodes: self.nodes,
                time: start.elapsed(),
                pv: result.pv.clone(),
            });
            if soft.is_some_and(|s| start.elapsed() >= s / 2) && !limits.infinite {
                break;
            }
            if value.abs() >= VALUE_MATE_IN_MAX_PLY && limits.depth.is_none() && !limits.infinite {
                let mate_plies = (VALUE_MATE - value.abs()) as u32;
                if depth > mate_plies + 2 {
                    break;
                }
            }
        }
        result.nodes = self.nodes;
        result
    }

    fn out_of_budget(&mut self) -> bool {
        if self.aborted {
            return true;
        }
        if self.nodes >= self.node_limit
            || (self.nodes.is_multiple_of(1024)
                && (self.stop.load(Ordering::Relaxed)
                    || self.hard_deadline.is_some_and(|d| Instant::now() >= d)))
        {
            self.aborted = true;
        }
        self.aborted
    }

    fn is_repetition(&self, halfmoves: u32) -> bool {
        let n = self.keys.len();
        let key = self.keys[n - 1];
        let window = (halfmoves as usize).min(n - 1);
        (4..=window)
            .step_by(2)
            .any(|back| self.keys[n - 1 - back] == key)
    }

    fn history_slot(turn: Color, mv: &Move) -> usize {
        let from = mv.from().map_or(0, |s| s as usize);
        (turn as usize * 64 + from) * 64 + mv.to() as usize
    }

    fn update_history(&mut self, turn: Color, mv: &Move, bonus: i32) {
        let h = &mut self.history[Self::history_slot(turn, mv)];
        *h += bonus - *h * bonus.abs() / HISTORY_MAX;
    }

    /// Orders `moves` by writing a score per move: hash move, winning-first captures and
    /// promotions, killers, then quiet moves by history.
    fn score_moves(&self, pos: &Chess, moves: &MoveList, hash_move: u16, ply: usize) -> [i32; 256] {
        let turn = pos.turn();
        let mut scores = [0i32; 256];
        for (s, mv) in scores.iter_mut().zip(moves) {
            let code = encode(*mv);
            *s = if code == hash_move {
                1 << 30
            } else if mv.is_capture() && mv.promotion().is_none() && see(pos, mv) < 0 {
                // Losing captures go after the killers.
                (1 << 22) + ROLE_VALUE[mv.capture().map_or(0, |r| r as usize)]
            } else if is_tactical(mv) {
                let victim = mv.capture().map_or(0, |r| ROLE_VALUE[r as usize]);
                let promo = mv.promotion().map_or(0, |r| ROLE_VALUE[r as usize]);
                (1 << 24) + (victim + promo) * 64 - ROLE_VALUE[mv.role() as usize]
            } else if code == self.killers[ply][0] {
                (1 << 23) + 1
            } else if code == self.killers[ply][1] {
                1 << 23
            } else {
                self.history[Self::history_slot(turn, mv)]
            };
        }
        scores
    }

    #[allow(clippy::too_many_arguments)]
    fn node(
        &mut self,
        pos: &Chess,
        mut depth: i32,
        mut alpha: i32,
        beta: i32,
        ply: usize,
        pv_node: bool,
        allow_null: bool,
    ) -> i32 {
        self.pv[ply].clear();
        let root = ply == 0;
        let key = *self.keys.last().expect("root key");
        if !root {
            if self.out_of_budget() {
                return 0;
            }
            if pos.halfmoves() >= 100 && !pos.is_check()
                || pos.is_insufficient_material()
                || self.is_repetition(pos.halfmoves())
            {
                return 0;
            }
            // Mate-distance pruning: no line from here beats a mate already found nearer.
            let alpha_m = alpha.max(-VALUE_MATE + ply as i32);
            let beta_m = beta.min(VALUE_MATE - ply as i32 - 1);
            if alpha_m >= beta_m {
                return alpha_m;
            }
        }
        if ply >= MAX_SEARCH_PLY - 1 {
            return self.eval.evaluate(ply, pos);
        }
        let in_check = pos.is_check();
        if in_check {
            depth += 1;
        }
        if depth <= 0 {
            return self.quiescence(pos, alpha, beta, ply);
        }
        self.nodes += 1;
        self.seldepth = self.seldepth.max(ply);

        let entry = self.table.probe(key);
        let hash_move = entry.map_or(0, |e| e.mv);
        if let Some(e) = entry {
            let value = from_table(e.value as i32, ply);
            if !pv_node && e.depth as i32 >= depth {
                let cut = match e.bound {
                    1 => true,
                    2 => value >= beta,
                    _ => value <= alpha,
                };
                if cut {
                    return value;
                }
            }
        }

        // Null move: if passing still fails high, a real move would too. Not in check, not
        // twice in a row, and not without pieces (zugzwang lives in pawn endings). The static
        // evaluation is asked only here, where it is used: with a net it is a large share of
        // a node's cost.
        if !pv_node && !in_check && allow_null && depth >= 3 && self.eval.evaluate(ply, pos) >= beta
        {
            let turn = pos.turn();
            let pieces = pos.board().by_color(turn) & !pos.board().pawns() & !pos.board().kings();
            if pieces.any()
                && let Ok(null) = pos.clone().swap_turn()
            {
                let r = 3 + depth / 4;
                self.keys.push(hash(&null));
                self.eval.push_null(ply);
                let value = -self.node(
                    &null,
                    depth - 1 - r,
                    -beta,
                    -beta + 1,
                    ply + 1,
                    false,
                    false,
                );
                self.keys.pop();
                if self.aborted {
                    return 0;
                }
                if value >= beta {
                    return if value >= VALUE_MATE_IN_MAX_PLY {
                        beta
                    } else {
                        value
                    };
                }
            }
        }

        let mut moves = pos.legal_moves();
        if moves.is_empty() {
            return if in_check {
                -VALUE_MATE + ply as i32
            } else {
                0
            };
        }
        let turn = pos.turn();
        let mut scores = self.score_moves(pos, &moves, hash_move, ply);
        let original_alpha = alpha;
        let mut best_value = -INFINITE;
        let mut best_move = 0u16;
        let mut quiets_tried: [Option<Move>; 64] = [None; 64];
        let mut n_quiets = 0;

        for i in 0..moves.len() {
            let mv = pick_next(&mut moves, &mut scores, i);
            let mut child = pos.clone();
            child.play_unchecked(mv);
            let child_key = child_hash(pos, key, mv, &child);
            self.keys.push(child_key);
            self.eval.push(ply, turn, mv, &child);
            let quiet = !is_tactical(&mv);
            let gives_check = child.is_check();

            let value = if i == 0 {
                -self.node(&child, depth - 1, -beta, -alpha, ply + 1, pv_node, true)
            } else {
                let r = if depth >= 3 && quiet && !in_check && !gives_check && i >= 3 {
                    let mut r = reduction(depth, i);
                    if pv_node {
                        r -= 1;
                    }
                    r.clamp(0, depth - 2)
                } else {
                    0
                };
                let mut v = -self.node(
                    &child,
                    depth - 1 - r,
                    -alpha - 1,
                    -alpha,
                    ply + 1,
                    false,
                    true,
                );
                if v > alpha && r > 0 {
                    v = -self.node(&child, depth - 1, -alpha - 1, -alpha, ply + 1, false, true);
                }
                if v > alpha && v < beta && pv_node {
                    v = -self.node(&child, depth - 1, -beta, -alpha, ply + 1, true, true);
                }
                v
            };
            self.keys.pop();
            if self.aborted {
                return 0;
            }
            if value > best_value {
                best_value = value;
                if value > alpha {
                    best_move = encode(mv);
                    alpha = value;
                    let (head, tail) = self.pv.split_at_mut(ply + 1);
                    head[ply].clear();
                    head[ply].push(mv);
                    head[ply].extend_from_slice(&tail[0]);
                    if value >= beta {
                        if quiet {
                            let bonus = (depth * depth).min(1200);
                            self.update_history(turn, &mv, bonus);
                            for q in quiets_tried[..n_quiets].iter().flatten() {
                                self.update_history(turn, q, -bonus);
                            }
                            let k = &mut self.killers[ply];
                            if k[0] != best_move {
                                k[1] = k[0];
                                k[0] = best_move;
                            }
                        }
                        break;
                    }
                }
            }
            if quiet && n_quiets < quiets_tried.len() {
                quiets_tried[n_quiets] = Some(mv);
                n_quiets += 1;
            }
        }

        let bound = if best_value >= beta {
            Bound::Lower
        } else if best_value > original_alpha {
            Bound::Exact
        } else {
            Bound::Upper
        };
        self.table
            .store(key, best_move, to_table(best_value, ply), depth, bound);
        best_value
    }

    fn quiescence(&mut self, pos: &Chess, mut alpha: i32, beta: i32, ply: usize) -> i32 {
        self.pv[ply].clear();
        if self.out_of_budget() {
            return 0;
        }
        self.nodes += 1;
        self.seldepth = self.seldepth.max(ply);
        if ply >= MAX_SEARCH_PLY - 1 {
            return self.eval.evaluate(ply, pos);
        }
        let in_check = pos.is_check();
        let mut best = -INFINITE;
        if !in_check {
            let stand_pat = self.eval.evaluate(ply, pos);
            if stand_pat >= beta {
                return stand_pat;
            }
            alpha = alpha.max(stand_pat);
            best = stand_pat;
        }
        let mut moves = pos.legal_moves();
        if in_check && moves.is_empty() {
            return -VALUE_MATE + ply as i32;
        }
        if !in_check {
            // Captures that lose material by exchange cannot raise the stand-pat score.
            moves.retain(|m| is_tactical(m) && see(pos, m) >= 0);
        }
        let turn = pos.turn();
        let mut scores = self.score_moves(pos, &moves, 0, MAX_SEARCH_PLY);
        for i in 0..moves.len() {
            let mv = pick_next(&mut moves, &mut scores, i);
            let mut child = pos.clone();
            child.play_unchecked(mv);
            self.eval.push(ply, turn, mv, &child);
            let value = -self.quiescence(&child, -beta, -alpha, ply + 1);
            if self.aborted {
                return 0;
            }
            if value > best {
                best = value;
                if value > alpha {
                    alpha = value;
                    if value >= beta {
                        break;
                    }
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests;
