//! Static evaluation for the search: a quantized NNUE with accumulators updated move by move,
//! or the hand-written material + piece-square evaluation that plays before any net exists
//! and serves as the baseline opponent.
//!
//! Scores are in Stockfish internal units (the lake's score unit), from the side to move's
//! point of view, kept inside ±[`MAX_EVAL`] so they never look like mate scores.

use std::sync::Arc;

use shakmaty::{Bitboard, Board, Chess, Color, Move, Piece, Position, Role, Square};

use crate::features::king_buckets::KingBuckets;
use crate::features::{All768, BoardDelta, FeatureSetKind, HalfKaV2Hm, HalfKp};
use crate::nnue::Network;
use crate::scores::MAX_EVAL;
use crate::simd::{AlignedI16, Kernel};
use crate::spec_net::{Fixed, Incremental, InputFamily, SpecNet};
use crate::stockfish_net::{self, StockfishNet};

/// What the engine evaluates with.
#[derive(Debug, Clone)]
pub enum Evaluator {
    /// Material and piece-square tables, tapered between middlegame and endgame.
    Classical,
    /// Material alone: a weaker built-in opponent, so matches can be tested without nets.
    Material,
    Nnue(Arc<Network>),
    /// A Stockfish 15.1 net (imported from Stockfish or exported in its format).
    Stockfish(Arc<StockfishNet>),
    /// A net its NetSpec describes (king buckets, output buckets, ...).
    Spec(Arc<SpecNet>),
}

/// The input family of a transformer, borrowed from its net.
#[derive(Clone, Copy)]
enum Family<'a> {
    Fixed(FeatureSetKind),
    Buckets(&'a KingBuckets),
    /// Followed by the difference of feature lists (threats, combinations).
    Listed(&'a InputFamily),
}

impl Family<'_> {
    fn active(self, board: &Board, color: Color, out: &mut Vec<u32>) {
        match self {
            Family::Fixed(k) => k.active_features(board, color, out),
            Family::Buckets(b) => b.active(board, color, out),
            Family::Listed(f) => f.active(board, color, out),
        }
        .expect("legal positions have both kings");
    }
}

/// The feature transformer of an NNUE evaluator: its input family, biases and weights.
fn transformer(e: &Evaluator) -> Option<(Family<'_>, &[i16], &[i16])> {
    match e {
        Evaluator::Classical | Evaluator::Material => None,
        Evaluator::Nnue(net) => Some((Family::Fixed(net.features), &net.ft_bias, &net.ft_weights)),
        Evaluator::Stockfish(net) => Some((
            Family::Fixed(FeatureSetKind::HalfKaV2Hm),
            &net.ft_bias,
            &net.ft_weights,
        )),
        Evaluator::Spec(net) => {
            let family = match &net.family {
                InputFamily::Preset(k) => Family::Fixed(*k),
                InputFamily::KingBuckets(b) => Family::Buckets(b),
                f => Family::Listed(f),
            };
            Some((family, &net.ft_bias, &net.ft_weights))
        }
    }
}

impl Evaluator {
    /// The net in a file of either format (lakefish's, told by its magic bytes, or Stockfish
    /// 15.1's).
    pub fn from_net_bytes(bytes: &[u8]) -> Result<Evaluator, String> {
        if SpecNet::sniff(bytes) {
            return SpecNet::from_bytes(bytes)
                .map(|n| Evaluator::Spec(Arc::new(n)))
                .map_err(|e| e.to_string());
        }
        if bytes.starts_with(crate::nnue::MAGIC) {
            return Network::from_bytes(bytes)
                .map(|n| Evaluator::Nnue(Arc::new(n)))
                .map_err(|e| e.to_string());
        }
        StockfishNet::from_bytes(bytes)
            .map(|n| Evaluator::Stockfish(Arc::new(n)))
            .map_err(|e| format!("neither a lakefish net nor a Stockfish 15.1 one: {e}"))
    }

    /// `classical`, or the net's feature set, architecture and the kernels that run it.
    pub fn describe(&self) -> String {
        match self {
            Evaluator::Classical => "classical (material + piece-square tables)".to_string(),
            Evaluator::Material => "material (piece values only)".to_string(),
            Evaluator::Nnue(net) => format!(
                "nnue {} {} ({} kernels)",
                net.features,
                net.arch,
                Kernel::detect(net.arch.l1).name()
            ),
            Evaluator::Stockfish(net) => format!(
                "stockfish-15.1 net {:?} (HalfKAv2_hm, 2x1024, 8 layer stacks; {} kernels)",
                String::from_utf8_lossy(&net.description),
                Kernel::detect(stockfish_net::HALF).name()
            ),
            Evaluator::Spec(net) => format!(
                "{} ({} kernels)",
                net.describe(),
                Kernel::detect(net.width).name()
            ),
        }
    }
}

/// Evaluation state along one search path: for NNUE, one accumulator pair per ply, each
/// derived from its parent by the move's feature changes (a fresh refresh only when a
/// king-bucketed perspective's king changes bucket).
pub struct EvalStack {
    evaluator: Evaluator,
    kernel: Kernel,
    width: usize,
    /// `[ply][perspective][width]`, perspective indexed by `Color as usize`.
    acc: AlignedI16,
    /// Stockfish nets: `[ply][perspective][bucket]` PSQT sums (empty otherwise).
    psqt: Vec<i32>,
    scratch: Vec<u32>,
    /// Families that need both boards to follow a move: the board at each ply and
    /// `[ply][perspective]` how many features are active there (empty for the others).
    boards: Vec<Board>,
    active: Vec<usize>,
    /// The features a move switches off and on, for those families, before identical
    /// pairs cancel (`off`, `on`) and after (`removed`, `added`).
    off: Vec<u32>,
    on: Vec<u32>,
    removed: Vec<u32>,
    added: Vec<u32>,
}

impl EvalStack {
    /// Room for `plies` plies below the root.
    pub fn new(evaluator: Evaluator, plies: usize) -> EvalStack {
        let (width, psqt) = match &evaluator {
            Evaluator::Classical | Evaluator::Material => (0, 0),
            Evaluator::Nnue(net) => (net.arch.l1, 0),
            Evaluator::Stockfish(_) => (stockfish_net::HALF, stockfish_net::BUCKETS),
            Evaluator::Spec(net) => (net.width, 0),
        };
        let boards = match &evaluator {
            Evaluator::Spec(net) if net.family.needs_boards() => plies + 1,
            _ => 0,
        };
        EvalStack {
            kernel: Kernel::detect(width),
            evaluator,
            width,
            acc: AlignedI16::zeroed((plies + 1) * 2 * width),
            psqt: vec![0; (plies + 1) * 2 * psqt],
            scratch: Vec::with_capacity(64),
            boards: vec![Board::empty(); boards],
            active: vec![0; 2 * boards],
            off: Vec::new(),
            on: Vec::new(),
            removed: Vec::new(),
            added: Vec::new(),
        }
    }

    /// Forces a kernel (tests and benchmarks compare them).
    pub fn with_kernel(mut self, kernel: Kernel) -> EvalStack {
        assert!(
            Kernel::available(self.width.max(32)).contains(&kernel),
            "{kernel:?} does not run here"
        );
        self.kernel = kernel;
        self
    }

    pub fn evaluator(&self) -> &Evaluator {
        &self.evaluator
    }

    pub fn plies(&self) -> usize {
        match self.width {
            0 => usize::MAX,
            w => self.acc.len() / (2 * w) - 1,
        }
    }

    /// Computes ply 0 from scratch for `pos`.
    pub fn reset(&mut self, pos: &Chess) {
        if self.width > 0 {
            for color in Color::ALL {
                self.refresh(0, pos.board(), color);
            }
        }
    }

    fn slot(&self, ply: usize, color: Color) -> std::ops::Range<usize> {
        let start = (ply * 2 + color as usize) * self.width;
        start..start + self.width
    }

    fn refresh(&mut self, ply: usize, board: &Board, color: Color) {
        let range = self.slot(ply, color);
        let psqt = psqt_slot(ply, color);
        refresh_into(
            &self.evaluator,
            self.kernel,
            &mut self.acc[range],
            self.psqt.get_mut(psqt).unwrap_or_default(),
            board,
            color,
            &mut self.scratch,
        );
        if let Some(b) = self.boards.get_mut(ply) {
            b.clone_from(board);
            self.active[ply * 2 + color as usize] = self.scratch.len();
        }
    }

    /// Derives ply `ply + 1` from ply `ply` for `mv`, played by `turn`, which led to `child`.
    pub fn push(&mut self, ply: usize, turn: Color, mv: Move, child: &Chess) {
        let Some((family, _, _)) = transformer(&self.evaluator) else {
            return;
        };
        // One dispatch per move; below it the feature set's index math inlines.
        match family {
            Family::Fixed(FeatureSetKind::All768) => {
                self.push_with(&Fixed::<All768>::default(), ply, turn, mv, child)
            }
            Family::Fixed(FeatureSetKind::HalfKp) => {
                self.push_with(&Fixed::<HalfKp>::default(), ply, turn, mv, child)
            }
            Family::Fixed(FeatureSetKind::HalfKaV2Hm) => {
                self.push_with(&Fixed::<HalfKaV2Hm>::default(), ply, turn, mv, child)
            }
            Family::Buckets(_) => {
                // The layout lives in the net, which the stack also borrows mutably below:
                // hold the net by its own handle for the move (a reference count, no copy).
                let Evaluator::Spec(net) = &self.evaluator else {
                    unreachable!("king buckets come from a described net")
                };
                let net = Arc::clone(net);
                let InputFamily::KingBuckets(buckets) = &net.family else {
                    unreachable!("matched above")
                };
                self.push_with(&**buckets, ply, turn, mv, child)
            }
            Family::Listed(_) => self.push_following(ply, turn, mv, child),
        }
    }

    /// Derives ply `ply + 1` for families that need both boards (threats, combinations):
    /// each part's changes from the move ([`InputFamily::follow`]), identical pairs
    /// cancelled, applied to the parent's accumulator; a refresh where a part asks for one.
    fn push_following(&mut self, ply: usize, turn: Color, mv: Move, child: &Chess) {
        let Evaluator::Spec(net) = &self.evaluator else {
            unreachable!("such families come from a described net")
        };
        let net = Arc::clone(net);
        let delta = BoardDelta::from_move(turn, mv);
        let changed = delta
            .removed()
            .iter()
            .chain(delta.added())
            .fold(Bitboard::EMPTY, |b, &(_, sq)| b | Bitboard::from(sq));
        let (parents, children) = self.boards.split_at_mut(ply + 1);
        let parent = &parents[ply];
        children[0].clone_from(child.board());
        // The same men for both perspectives.
        let affected = crate::features::threats::affected_attackers(parent, child.board(), changed);
        let w = self.width;
        for color in Color::ALL {
            self.off.clear();
            self.on.clear();
            let followed = net.family.follow(
                color,
                parent,
                child.board(),
                &delta,
                affected,
                0,
                &mut self.off,
                &mut self.on,
            );
            let (before, after) = self.acc.split_at_mut((ply + 1) * 2 * w);
            let dst = &mut after[color as usize * w..][..w];
            let (from, to) = (ply * 2 + color as usize, (ply + 1) * 2 + color as usize);
            if followed {
                // A pair the move left alone is in both lists: neither row is touched.
                self.off.sort_unstable();
                self.on.sort_unstable();
                sorted_difference(&self.off, &self.on, &mut self.removed, &mut self.added);
                let (off, on) = (self.removed.len(), self.added.len());
                let now = self.active[from] + on - off;
                // More rows to change than the child has: a refresh is cheaper.
                if off + on < now {
                    let src = &before[from * w..][..w];
                    self.kernel
                        .update(dst, src, &net.ft_weights, &self.removed, &self.added);
                    self.active[to] = now;
                    continue;
                }
            }
            self.scratch.clear();
            net.family
                .active(child.board(), color, &mut self.scratch)
                .expect("legal positions have both kings");
            self.kernel
                .update(dst, &net.ft_bias, &net.ft_weights, &[], &self.scratch);
            self.active[to] = self.scratch.len();
        }
    }

    #[inline(always)]
    fn push_with<F: Incremental>(
        &mut self,
        family: &F,
        ply: usize,
        turn: Color,
        mv: Move,
        child: &Chess,
    ) {
        let Some((_, _, weights)) = transformer(&self.evaluator) else {
            return;
        };
        let delta = BoardDelta::from_move(turn, mv);
        let w = self.width;
        let (parent, child_acc) = self.acc.split_at_mut((ply + 1) * 2 * w);
        let parent = &parent[ply * 2 * w..];
        for color in Color::ALL {
            let dst = &mut child_acc[color as usize * w..][..w];
            let psqt_dst = psqt_slot(ply + 1, color);
            if family.needs_refresh_for(color, &delta) {
                refresh_into(
                    &self.evaluator,
                    self.kernel,
                    dst,
                    self.psqt.get_mut(psqt_dst).unwrap_or_default(),
                    child.board(),
                    color,
                    &mut self.scratch,
                );
                continue;
            }
            let king = if family.king_relative() {
                child.board().king_of(color).unwrap_or(Square::A1)
            } else {
                Square::A1
            };
            let changes = family.changed(color, king, &delta);
            self.kernel.update(
                dst,
                &parent[color as usize * w..][..w],
                weights,
                changes.removed(),
                changes.added(),
            );
            if let Evaluator::Stockfish(net) = &self.evaluator {
                let from = psqt_slot(ply, color);
                self.psqt.copy_within(from, psqt_dst.start);
                net.update_psqt(&mut self.psqt[psqt_dst], changes.removed(), changes.added());
            }
        }
    }

    /// A null move changes no piece: ply `ply + 1` copies ply `ply`.
    pub fn push_null(&mut self, ply: usize) {
        if !self.boards.is_empty() {
            let (from, to) = self.boards.split_at_mut(ply + 1);
            to[0].clone_from(&from[ply]);
            self.active.copy_within(ply * 2..ply * 2 + 2, (ply + 1) * 2);
        }
        if self.width > 0 {
            let from = self.slot(ply, Color::Black).start;
            self.acc
                .copy_within(from..from + 2 * self.width, from + 2 * self.width);
        }
        if !self.psqt.is_empty() {
            let from = psqt_slot(ply, Color::Black).start;
            let n = 2 * stockfish_net::BUCKETS;
            self.psqt.copy_within(from..from + n, from + n);
        }
    }

    /// The accumulator of `color` at `ply` (tests compare it with a full refresh).
    pub fn accumulator(&self, ply: usize, color: Color) -> &[i16] {
        &self.acc[self.slot(ply, color)]
    }

    /// Score of `pos` (the position at `ply`) for its side to move.
    pub fn evaluate(&self, ply: usize, pos: &Chess) -> i32 {
        let v = match &self.evaluator {
            Evaluator::Classical => classical(pos.board(), pos.turn()),
            Evaluator::Material => material_only(pos.board(), pos.turn()),
            Evaluator::Nnue(net) => {
                let turn = pos.turn();
                net.propagate_with(
                    self.kernel,
                    self.accumulator(ply, turn),
                    self.accumulator(ply, turn.other()),
                )
            }
            Evaluator::Stockfish(net) => {
                let turn = pos.turn();
                net.evaluate_accumulated(
                    self.kernel,
                    pos.board().occupied().count(),
                    self.accumulator(ply, turn),
                    self.accumulator(ply, turn.other()),
                    &self.psqt[psqt_slot(ply, turn)],
                    &self.psqt[psqt_slot(ply, turn.other())],
                )
            }
            Evaluator::Spec(net) => {
                let turn = pos.turn();
                net.evaluate(
                    self.kernel,
                    self.accumulator(ply, turn),
                    self.accumulator(ply, turn.other()),
                    pos.board().occupied().count() as u32,
                )
            }
        };
        #[cfg(test)]
        if let Evaluator::Nnue(net) = &self.evaluator
            && VERIFY_SEARCH.load(std::sync::atomic::Ordering::Relaxed)
        {
            let fresh = net.refresh(pos.board()).expect("features");
            assert_eq!(
                v,
                net.evaluate(&fresh, pos.turn()),
                "stale accumulator at ply {ply}"
            );
        }
        #[cfg(test)]
        if let Evaluator::Stockfish(net) = &self.evaluator
            && VERIFY_SEARCH.load(std::sync::atomic::Ordering::Relaxed)
        {
            let fresh = net
                .evaluate(pos.board(), pos.turn())
                .expect("a legal board");
            assert_eq!(v, fresh.side_to_move(), "stale accumulator at ply {ply}");
        }
        #[cfg(test)]
        if let Evaluator::Spec(net) = &self.evaluator
            && VERIFY_SEARCH.load(std::sync::atomic::Ordering::Relaxed)
        {
            let fresh = net
                .evaluate_board(pos.board(), pos.turn())
                .expect("features");
            assert_eq!(v, fresh, "stale accumulator at ply {ply}");
        }
        v.clamp(-MAX_EVAL, MAX_EVAL)
    }
}

/// What turns sorted list `old` into sorted list `new`: `removed` holds what only `old`
/// has, `added` what only `new` has.
fn sorted_difference(old: &[u32], new: &[u32], removed: &mut Vec<u32>, added: &mut Vec<u32>) {
    removed.clear();
    added.clear();
    let (mut i, mut j) = (0, 0);
    while i < old.len() && j < new.len() {
        match old[i].cmp(&new[j]) {
            std::cmp::Ordering::Less => {
                removed.push(old[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                added.push(new[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                i += 1;
                j += 1;
            }
        }
    }
    removed.extend_from_slice(&old[i..]);
    added.extend_from_slice(&new[j..]);
}

/// Tests set this to check every evaluation in a search against a full refresh.
#[cfg(test)]
pub(crate) static VERIFY_SEARCH: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Where the PSQT sums of `color` at `ply` live in [`EvalStack`]'s `psqt`.
fn psqt_slot(ply: usize, color: Color) -> std::ops::Range<usize> {
    let start = (ply * 2 + color as usize) * stockfish_net::BUCKETS;
    start..start + stockfish_net::BUCKETS
}

/// Rebuilds one perspective's accumulator (and for a Stockfish net its PSQT sums) from the
/// board.
fn refresh_into(
    evaluator: &Evaluator,
    kernel: Kernel,
    acc: &mut [i16],
    psqt: &mut [i32],
    board: &Board,
    color: Color,
    scratch: &mut Vec<u32>,
) {
    let Some((family, bias, weights)) = transformer(evaluator) else {
        return;
    };
    scratch.clear();
    family.active(board, color, scratch);
    kernel.update(acc, bias, weights, &[], scratch);
    if let Evaluator::Stockfish(net) = evaluator {
        psqt.fill(0);
        net.update_psqt(psqt, &[], scratch);
    }
}

/// Game phase weight of a role: 24 with all minor and major pieces on the board.
const PHASE: [i32; 6] = [0, 1, 1, 2, 4, 0];
const PHASE_TOTAL: i32 = 24;
/// Piece values (middlegame, endgame) in internal units (about 3.7 per centipawn).
const VALUE: [(i32, i32); 6] = [
    (310, 440),
    (1120, 1010),
    (1180, 1070),
    (1600, 1750),
    (3300, 3400),
    (0, 0),
];
const TEMPO: i32 = 40;

/// Piece-square bonus (middlegame, endgame) for a piece of `role` on `sq`, seen from its own
/// side (rank 0 is its back rank). Built from a few plain ideas rather than tuned tables:
/// knights, bishops and queens like the centre, pawns gain as they advance, rooks like the
/// seventh rank, the king hides in the middlegame and centralizes in the endgame.
const fn square_bonus(role: Role, sq: usize) -> (i32, i32) {
    let file = (sq % 8) as i32;
    let rank = (sq / 8) as i32;
    // 0 in the four centre squares, 6 in the corners.
    let fd = if file < 4 { 3 - file } else { file - 4 };
    let rd = if rank < 4 { 3 - rank } else { rank - 4 };
    let centre = 6 - (fd + rd);
    match role {
        Role::Pawn => {
            let central = if file == 3 || file == 4 { 12 } else { 0 };
            let advance = if rank > 4 { 3 } else { rank - 1 };
            ((rank - 1) * 10 + central * advance, (rank - 1) * 28)
        }
        Role::Knight => (centre * 28 - 70, centre * 22 - 60),
        Role::Bishop => (centre * 14 - 30, centre * 12 - 30),
        Role::Rook => {
            let seventh = if rank == 6 { 70 } else { 0 };
            let central = if file == 3 || file == 4 { 15 } else { 0 };
            (seventh + central, seventh / 2)
        }
        Role::Queen => (centre * 6 - 15, centre * 14 - 35),
        Role::King => {
            let shelter = match file {
                1 | 2 | 6 => 60,
                0 | 7 => 35,
                _ => 0,
            };
            (shelter - rank * 70, centre * 35 - 100)
        }
    }
}

/// `(mg, eg)` material plus square bonus for every role and square, White's view.
const TABLE: [[(i32, i32); 64]; 6] = {
    let roles = Role::ALL;
    let mut t = [[(0, 0); 64]; 6];
    let mut r = 0;
    while r < 6 {
        let mut sq = 0;
        while sq < 64 {
            let (mg, eg) = square_bonus(roles[r], sq);
            t[r][sq] = (VALUE[r].0 + mg, VALUE[r].1 + eg);
            sq += 1;
        }
        r += 1;
    }
    t
};

/// The hand-written evaluation of `board` for `turn`, in internal units.
pub fn classical(board: &Board, turn: Color) -> i32 {
    let (mut mg, mut eg, mut phase) = (0, 0, 0);
    for color in Color::ALL {
        let sign = if color == Color::White { 1 } else { -1 };
        for role in Role::ALL {
            let r = role as usize - 1;
            let pieces: Bitboard = board.by_piece(Piece { color, role });
            for sq in pieces {
                let own = if color == Color::White {
                    sq as usize
                } else {
                    sq as usize ^ 56
                };
                let (m, e) = TABLE[r][own];
                mg += sign * m;
                eg += sign * e;
                phase += PHASE[r];
            }
        }
    }
    let phase = phase.min(PHASE_TOTAL);
    let white = (mg * phase + eg * (PHASE_TOTAL - phase)) / PHASE_TOTAL;
    let v = if turn == Color::White { white } else { -white };
    v + TEMPO
}

/// Tapered piece values alone, for `turn`.
pub fn material_only(board: &Board, turn: Color) -> i32 {
    let (mut mg, mut eg, mut phase) = (0, 0, 0);
    for color in Color::ALL {
        let sign = if color == Color::White { 1 } else { -1 };
        for role in Role::ALL {
            let r = role as usize - 1;
            let n = board.by_piece(Piece { color, role }).count() as i32;
            mg += sign * n * VALUE[r].0;
            eg += sign * n * VALUE[r].1;
            phase += n * PHASE[r];
        }
    }
    let phase = phase.min(PHASE_TOTAL);
    let white = (mg * phase + eg * (PHASE_TOTAL - phase)) / PHASE_TOTAL;
    if turn == Color::White { white } else { -white }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::fen::test_position as pos;

    #[test]
    fn classical_is_symmetric_and_counts_material() {
        let start = Chess::default();
        assert_eq!(classical(start.board(), Color::White), TEMPO);
        assert_eq!(classical(start.board(), Color::Black), TEMPO);
        // A colour-flipped mirror scores the same for its side to move.
        let a = pos("r1bqkb1r/pppp1ppp/2n2n2/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R w KQkq - 4 4");
        let b = pos("rnbqk2r/pppp1ppp/5n2/2b1p3/4P3/2N2N2/PPPP1PPP/R1BQKB1R b KQkq - 4 4");
        assert_eq!(
            classical(a.board(), Color::White),
            classical(b.board(), Color::Black)
        );
        // A queen up is a lot better, whoever is to move.
        let up = pos("rnb1kbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1");
        assert!(classical(up.board(), Color::White) > 2500);
        assert!(classical(up.board(), Color::Black) < -2500);
    }
}

#[cfg(test)]
mod property_tests {
    use super::*;
    use crate::features::FeatureSetKind;
    use crate::nnue::random_network;
    use crate::random_games::SplitMix;

    /// Plays one random game of up to 150 plies from the start position through `stack`
    /// (sometimes with null moves around a move: a null move copies, and the next real move
    /// derives from the copy), calling `check` after each move with the new ply and position.
    /// Returns the number of checks.
    fn random_walk(
        stack: &mut EvalStack,
        rng: &mut SplitMix,
        mut check: impl FnMut(&EvalStack, usize, &Chess),
    ) -> usize {
        let mut pos = Chess::default();
        stack.reset(&pos);
        for ply in 0..150 {
            let moves = pos.legal_moves();
            if moves.is_empty() {
                return ply;
            }
            let mv = moves[rng.below(moves.len() as u64) as usize];
            let mut child = pos.clone();
            child.play_unchecked(mv);
            if rng.below(16) == 0 {
                stack.push_null(ply);
                stack.push(ply + 1, pos.turn(), mv, &child);
                stack.push_null(ply + 1);
                stack.push(ply, pos.turn(), mv, &child);
            } else {
                stack.push(ply, pos.turn(), mv, &child);
            }
            pos = child;
            check(stack, ply + 1, &pos);
        }
        150
    }

    /// After every move of random games, for every feature set and every kernel this CPU
    /// has: the incrementally updated accumulators equal a full refresh, and the evaluation
    /// equals the scalar reference over that refresh (so SIMD equals scalar too).
    #[test]
    fn incremental_equals_refresh_and_simd_equals_scalar() {
        for features in FeatureSetKind::ALL {
            let net = Arc::new(random_network(features, "64x2-32-32", 5));
            for (k, kernel) in Kernel::available(64).into_iter().enumerate() {
                let mut rng = SplitMix(features as u64 * 1000 + k as u64);
                let mut checked = 0;
                for _game in 0..12 {
                    let mut stack =
                        EvalStack::new(Evaluator::Nnue(Arc::clone(&net)), 160).with_kernel(kernel);
                    checked += random_walk(&mut stack, &mut rng, |stack, ply, pos| {
                        let fresh = net.refresh(pos.board()).unwrap();
                        for color in Color::ALL {
                            assert_eq!(
                                stack.accumulator(ply, color),
                                &fresh.values[color as usize][..],
                                "{features} {kernel:?} ply {ply} {color:?}"
                            );
                        }
                        let reference = net.evaluate(&fresh, pos.turn()).clamp(-MAX_EVAL, MAX_EVAL);
                        assert_eq!(stack.evaluate(ply, pos), reference);
                    });
                }
                assert!(checked > 1000, "{features}: only {checked} positions");
            }
        }
    }

    /// The same for a Stockfish 15.1 net: the accumulators and PSQT sums the search keeps
    /// move by move (refreshing on king moves, copying on null moves) give the evaluation a
    /// full refresh gives, with every kernel.
    #[test]
    fn stockfish_net_accumulators_follow_the_moves() {
        let net = Arc::new(crate::stockfish_net::random_net(7));
        for (k, kernel) in Kernel::available(64).into_iter().enumerate() {
            let mut rng = SplitMix(700 + k as u64);
            let mut checked = 0;
            for _game in 0..4 {
                let mut stack =
                    EvalStack::new(Evaluator::Stockfish(Arc::clone(&net)), 160).with_kernel(kernel);
                checked += random_walk(&mut stack, &mut rng, |stack, ply, pos| {
                    let fresh = net.evaluate(pos.board(), pos.turn()).unwrap();
                    let reference = fresh.side_to_move().clamp(-MAX_EVAL, MAX_EVAL);
                    assert_eq!(stack.evaluate(ply, pos), reference, "{kernel:?} ply {ply}");
                });
            }
            assert!(checked > 300, "only {checked} positions");
        }
    }
}
