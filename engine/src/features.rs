//! NNUE input feature sets: which inputs a position switches on, and how a move changes them.
//!
//! The trainer and the engine share these definitions so that a net trained here evaluates
//! the same in the engine. The trainer turns boards parsed from FEN into active-index lists on
//! loader threads ([`FeatureSet::active`], [`FeatureSetKind::active_features`]). The engine
//! keeps one accumulator per perspective and updates it per move ([`BoardDelta`],
//! [`FeatureSet::changed`]), rebuilding it only when [`FeatureSet::needs_refresh`] says the
//! perspective's own king moved somewhere that selects other weights.
//!
//! Notation for the formulas: squares are `0..64` with a1 = 0, b1 = 1, …, h8 = 63; `role` is
//! pawn 0, knight 1, bishop 2, rook 3, queen 4, king 5; `them` is 1 when the piece does not
//! belong to the perspective, else 0; `black` is 1 for Black's perspective, else 0.
//!
//! | set            | inputs | index of a piece on `sq`, king of the perspective on `ksq`         |
//! |----------------|-------:|-------------------------------------------------------------------|
//! | `all768`       |    768 | `384·them + 64·role + (sq ^ 56·black)`                            |
//! | `halfkp`       | 41,024 | `641·(ksq ^ 63·black) + 1 + 64·(2·role + them) + (sq ^ 63·black)` |
//! | `halfka_v2_hm` | 22,528 | `704·bucket + 64·min(2·role + them, 10) + (sq ^ flip)`            |
//!
//! `halfkp` and `halfka_v2_hm` are laid out exactly as Stockfish's `half_kp` (SF 12 and 13)
//! and `half_ka_v2_hm` (SF 15 on) and nnue-pytorch's feature blocks of those names, so nets
//! and tools from that ecosystem line up index for index. See each type for the details.

use std::fmt;
use std::str::FromStr;

use shakmaty::{Board, CastlingSide, Color, Move, Piece, Role, Square};

/// Why a board has no feature list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FeatureError {
    /// King-relative sets index everything by the perspective's king square.
    #[error("{0:?} has no king or more than one; king-relative features need exactly one")]
    NoKing(Color),
}

/// A feature-set name the trainer's CLI did not recognise.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown feature set {name:?}; expected one of all768, halfkp, halfka_v2_hm")]
pub struct UnknownFeatureSet {
    pub name: String,
}

/// One NNUE input encoding. Static dispatch, so the per-piece index math inlines into loops
/// over millions of positions; [`FeatureSetKind`] selects one at run time.
pub trait FeatureSet {
    /// Name used on the command line and in net metadata.
    const NAME: &'static str;
    /// Width of the input layer.
    const INPUTS: usize;
    /// Most features one perspective can have on in a position reachable in chess (at most
    /// 32 men); boards from arbitrary FENs may exceed it.
    const MAX_ACTIVE: usize;
    /// Whether indices depend on the perspective's king square.
    const KING_RELATIVE: bool;

    /// Feature of `piece` on `sq` seen from `perspective`, whose own king stands on `king`
    /// (ignored by sets that are not king-relative). `None` when the set has no input for the
    /// piece (HalfKP does not encode kings as pieces).
    fn index(perspective: Color, king: Square, piece: Piece, sq: Square) -> Option<u32>;

    /// Whether indices computed with the own king on `from` become wrong with it on `to`.
    fn king_move_needs_refresh(perspective: Color, from: Square, to: Square) -> bool;

    /// Appends the active features of `board` seen from `perspective` to `out` without
    /// clearing it, so a loader can fill one flat batch buffer. Order is unspecified.
    ///
    /// No set here depends on the side to move; callers put the side to move's perspective
    /// first themselves, as the net's input order requires.
    fn active(board: &Board, perspective: Color, out: &mut Vec<u32>) -> Result<(), FeatureError> {
        let king = if Self::KING_RELATIVE {
            board
                .king_of(perspective)
                .ok_or(FeatureError::NoKing(perspective))?
        } else {
            Square::A1
        };
        for color in Color::ALL {
            for role in Role::ALL {
                let piece = Piece { color, role };
                for sq in board.by_piece(piece) {
                    if let Some(i) = Self::index(perspective, king, piece, sq) {
                        out.push(i);
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether moving `moved` from `from` to `to` forces `perspective` to rebuild its
    /// accumulator from scratch instead of applying [`FeatureSet::changed`].
    fn needs_refresh(perspective: Color, moved: Piece, from: Square, to: Square) -> bool {
        moved.color == perspective
            && moved.role == Role::King
            && Self::king_move_needs_refresh(perspective, from, to)
    }

    /// [`FeatureSet::needs_refresh`] for a whole move, castling included.
    fn needs_refresh_for(perspective: Color, delta: &BoardDelta) -> bool {
        delta
            .king_move(perspective)
            .is_some_and(|(from, to)| Self::king_move_needs_refresh(perspective, from, to))
    }

    /// Features a move switches off and on for `perspective`, whose king stands on `king`.
    ///
    /// Only valid when [`FeatureSet::needs_refresh_for`] is false: then `king` is the same
    /// before and after the move wherever the set depends on it. Accumulators may apply the
    /// lists in any order; set-like bookkeeping should remove before it adds.
    #[inline]
    fn changed(perspective: Color, king: Square, delta: &BoardDelta) -> FeatureDelta {
        let mut out = FeatureDelta::default();
        for &(piece, sq) in delta.removed() {
            if let Some(i) = Self::index(perspective, king, piece, sq) {
                out.push_removed(i);
            }
        }
        for &(piece, sq) in delta.added() {
            if let Some(i) = Self::index(perspective, king, piece, sq) {
                out.push_added(i);
            }
        }
        out
    }
}

/// 1 for Black's view, 0 for White's: the multiplier of every orientation mask.
const fn black(perspective: Color) -> u32 {
    match perspective {
        Color::White => 0,
        Color::Black => 1,
    }
}

const fn them(perspective: Color, piece: Piece) -> u32 {
    black(perspective) ^ black(piece.color)
}

/// Pawn 0 … king 5 (shakmaty numbers roles from pawn = 1).
const fn role_index(role: Role) -> u32 {
    role as u32 - 1
}

/// Twelve piece planes of 64 squares, no king dependence: the smallest set, useful as a
/// baseline and for quick experiments.
///
/// `index = 384·them + 64·role + (sq ^ 56·black)`. Black's view flips ranks (a mirror, not a
/// rotation), so the queen stays on the d-file for both sides in the start position and a
/// colour-flipped mirror position gives identical lists with perspectives swapped.
#[derive(Debug, Clone, Copy, Default)]
pub struct All768;

impl FeatureSet for All768 {
    const NAME: &'static str = "all768";
    const INPUTS: usize = 768;
    const MAX_ACTIVE: usize = 32;
    const KING_RELATIVE: bool = false;

    #[inline]
    fn index(perspective: Color, _king: Square, piece: Piece, sq: Square) -> Option<u32> {
        let flip = 56 * black(perspective);
        Some(384 * them(perspective, piece) + 64 * role_index(piece.role) + (sq.to_u32() ^ flip))
    }

    #[inline]
    fn king_move_needs_refresh(_perspective: Color, _from: Square, _to: Square) -> bool {
        false
    }
}

/// Classic HalfKP (Stockfish 12 and 13, nnue-pytorch `HalfKP`): own king square × non-king
/// piece.
///
/// `index = 641·(ksq ^ rot) + 1 + 64·(2·role + them) + (sq ^ rot)`, `rot` = 63 for Black and 0
/// for White, `role` pawn..queen only. Black's view is a 180° rotation (`sq ^ 63`), not a rank
/// flip: that is what Stockfish's `orient()` did for HalfKP, and nets trained for it depend on
/// it. Kings have no inputs; the own king is the block selector and the enemy king is
/// invisible. Each king block is 641 wide because of the `+1`: slot 0 of every block is the
/// shogi engines' `BONA_PIECE_ZERO`, never active, kept so indices match the original
/// format (64 × 641 = 41,024 inputs of which 40,960 can fire).
#[derive(Debug, Clone, Copy, Default)]
pub struct HalfKp;

impl FeatureSet for HalfKp {
    const NAME: &'static str = "halfkp";
    const INPUTS: usize = 64 * (10 * 64 + 1);
    const MAX_ACTIVE: usize = 30;
    const KING_RELATIVE: bool = true;

    #[inline]
    fn index(perspective: Color, king: Square, piece: Piece, sq: Square) -> Option<u32> {
        if piece.role == Role::King {
            return None;
        }
        let rot = 63 * black(perspective);
        let plane = 2 * role_index(piece.role) + them(perspective, piece);
        Some(641 * (king.to_u32() ^ rot) + 1 + 64 * plane + (sq.to_u32() ^ rot))
    }

    #[inline]
    fn king_move_needs_refresh(_perspective: Color, from: Square, to: Square) -> bool {
        from != to
    }
}

/// HalfKAv2_hm (Stockfish since 15, nnue-pytorch `HalfKAv2_hm`): own king bucket × every
/// piece, kings included, board mirrored so the own king is always on files e–h.
///
/// `flip = 56·black ^ 7·(ksq on files a–d)`: Black's view flips ranks, and a king on the
/// queen side mirrors files, which halves the king squares to 32 buckets.
/// `bucket = 4·(7 − rank(ksq ^ flip)) + (7 − file(ksq ^ flip))`, so e1 is 31 and h8 is 0
/// (Stockfish's `KingBuckets` table).
/// `index = 704·bucket + 64·plane + (sq ^ flip)` with `plane = 2·role + them` for pawn..queen
/// and 10 for both kings: the two kings share one plane (they never share a square), giving
/// 11 planes, 32 × 11 × 64 = 22,528 inputs. (Some newer nnue-pytorch loaders train with the
/// kings on separate planes; this is the 11-plane layout Stockfish's engine reads.)
#[derive(Debug, Clone, Copy, Default)]
pub struct HalfKaV2Hm;

impl HalfKaV2Hm {
    /// The XOR mask that orients squares for `perspective` with its king on `king`.
    #[inline]
    pub const fn orientation(perspective: Color, king: Square) -> u32 {
        let vertical = 56 * black(perspective);
        let horizontal = if king.to_u32() & 7 < 4 { 7 } else { 0 };
        vertical ^ horizontal
    }

    /// King bucket 0..32 of `perspective`'s king on `king`; with the mirror bit it is the key
    /// of an accumulator cache.
    #[inline]
    pub const fn king_bucket(perspective: Color, king: Square) -> u32 {
        let k = king.to_u32() ^ Self::orientation(perspective, king);
        4 * (7 - k / 8) + (7 - k % 8)
    }
}

impl FeatureSet for HalfKaV2Hm {
    const NAME: &'static str = "halfka_v2_hm";
    const INPUTS: usize = 32 * 11 * 64;
    const MAX_ACTIVE: usize = 32;
    const KING_RELATIVE: bool = true;

    #[inline]
    fn index(perspective: Color, king: Square, piece: Piece, sq: Square) -> Option<u32> {
        let flip = Self::orientation(perspective, king);
        let plane = if piece.role == Role::King {
            10
        } else {
            2 * role_index(piece.role) + them(perspective, piece)
        };
        Some(704 * Self::king_bucket(perspective, king) + 64 * plane + (sq.to_u32() ^ flip))
    }

    /// Bucket and mirror together identify the king square, so in practice every king step
    /// refreshes (d1→e1 keeps bucket 31 but toggles the mirror); spelled out in those terms so
    /// it stays right if the bucket layout ever coarsens.
    #[inline]
    fn king_move_needs_refresh(perspective: Color, from: Square, to: Square) -> bool {
        Self::orientation(perspective, from) != Self::orientation(perspective, to)
            || Self::king_bucket(perspective, from) != Self::king_bucket(perspective, to)
    }
}

/// The pieces a move takes off and puts on the board, independent of perspective and feature
/// set: what the engine computes once per move before updating both accumulators.
///
/// At most two of each (castling moves two pieces; a capturing promotion removes two and adds
/// one). A piece that stays put, like the king in some Chess960 castlings, is left out.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct BoardDelta {
    removed: [(Piece, Square); BoardDelta::MAX],
    added: [(Piece, Square); BoardDelta::MAX],
    n_removed: u8,
    n_added: u8,
}

const NO_PIECE: (Piece, Square) = (
    Piece {
        color: Color::White,
        role: Role::Pawn,
    },
    Square::A1,
);

impl Default for BoardDelta {
    fn default() -> Self {
        Self::new()
    }
}

impl BoardDelta {
    /// Capacity of each list.
    pub const MAX: usize = 2;

    pub const fn new() -> Self {
        BoardDelta {
            removed: [NO_PIECE; Self::MAX],
            added: [NO_PIECE; Self::MAX],
            n_removed: 0,
            n_added: 0,
        }
    }

    /// Records `piece` leaving `sq`. Panics past [`BoardDelta::MAX`] entries.
    pub fn remove(&mut self, piece: Piece, sq: Square) {
        self.removed[usize::from(self.n_removed)] = (piece, sq);
        self.n_removed += 1;
    }

    /// Records `piece` arriving on `sq`. Panics past [`BoardDelta::MAX`] entries.
    pub fn add(&mut self, piece: Piece, sq: Square) {
        self.added[usize::from(self.n_added)] = (piece, sq);
        self.n_added += 1;
    }

    pub fn removed(&self) -> &[(Piece, Square)] {
        &self.removed[..usize::from(self.n_removed)]
    }

    pub fn added(&self) -> &[(Piece, Square)] {
        &self.added[..usize::from(self.n_added)]
    }

    /// The changes of `mv` played by `turn`. Needs no board: shakmaty moves carry the moved
    /// and captured roles, and castling squares follow from the king and rook squares.
    #[inline]
    pub fn from_move(turn: Color, mv: Move) -> Self {
        let mut d = Self::new();
        let own = |role| Piece { color: turn, role };
        match mv {
            Move::Normal {
                role,
                from,
                capture,
                to,
                promotion,
            } => {
                d.remove(own(role), from);
                if let Some(captured) = capture {
                    d.remove(
                        Piece {
                            color: !turn,
                            role: captured,
                        },
                        to,
                    );
                }
                d.add(own(promotion.unwrap_or(role)), to);
            }
            Move::EnPassant { from, to } => {
                d.remove(own(Role::Pawn), from);
                d.remove(
                    Piece {
                        color: !turn,
                        role: Role::Pawn,
                    },
                    Square::from_coords(to.file(), from.rank()),
                );
                d.add(own(Role::Pawn), to);
            }
            Move::Castle { king, rook } => {
                let side = CastlingSide::from_king_side(king < rook);
                let (king_to, rook_to) = (side.king_to(turn), side.rook_to(turn));
                if king != king_to {
                    d.remove(own(Role::King), king);
                }
                if rook != rook_to {
                    d.remove(own(Role::Rook), rook);
                }
                if king != king_to {
                    d.add(own(Role::King), king_to);
                }
                if rook != rook_to {
                    d.add(own(Role::Rook), rook_to);
                }
            }
            Move::Put { role, to } => d.add(own(role), to),
        }
        d
    }

    /// Where `color`'s king went, if this move moved it.
    pub fn king_move(&self, color: Color) -> Option<(Square, Square)> {
        let king = Piece {
            color,
            role: Role::King,
        };
        let from = self.removed().iter().find(|(p, _)| *p == king)?.1;
        let to = self.added().iter().find(|(p, _)| *p == king)?.1;
        Some((from, to))
    }
}

impl fmt::Debug for BoardDelta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BoardDelta")
            .field("removed", &self.removed())
            .field("added", &self.added())
            .finish()
    }
}

/// Feature indices one move switches off and on for one perspective; fixed size so the
/// engine's make-move path never allocates.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct FeatureDelta {
    removed: [u32; BoardDelta::MAX],
    added: [u32; BoardDelta::MAX],
    n_removed: u8,
    n_added: u8,
}

impl FeatureDelta {
    pub fn removed(&self) -> &[u32] {
        &self.removed[..usize::from(self.n_removed)]
    }

    pub fn added(&self) -> &[u32] {
        &self.added[..usize::from(self.n_added)]
    }

    fn push_removed(&mut self, index: u32) {
        self.removed[usize::from(self.n_removed)] = index;
        self.n_removed += 1;
    }

    fn push_added(&mut self, index: u32) {
        self.added[usize::from(self.n_added)] = index;
        self.n_added += 1;
    }
}

impl fmt::Debug for FeatureDelta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FeatureDelta")
            .field("removed", &self.removed())
            .field("added", &self.added())
            .finish()
    }
}

/// A feature set chosen at run time (the trainer's `--features` flag, a net's header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FeatureSetKind {
    All768,
    HalfKp,
    HalfKaV2Hm,
}

/// Runs `$body` with `$set` bound to the feature-set type of `$kind`.
macro_rules! dispatch {
    ($kind:expr, $set:ident => $body:expr) => {
        match $kind {
            FeatureSetKind::All768 => {
                type $set = All768;
                $body
            }
            FeatureSetKind::HalfKp => {
                type $set = HalfKp;
                $body
            }
            FeatureSetKind::HalfKaV2Hm => {
                type $set = HalfKaV2Hm;
                $body
            }
        }
    };
}

impl FeatureSetKind {
    pub const ALL: [FeatureSetKind; 3] = [Self::All768, Self::HalfKp, Self::HalfKaV2Hm];

    /// Parses `all768`, `halfkp` or `halfka_v2_hm`.
    pub fn from_name(name: &str) -> Result<Self, UnknownFeatureSet> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| UnknownFeatureSet {
                name: name.to_string(),
            })
    }

    pub const fn name(self) -> &'static str {
        match self {
            Self::All768 => All768::NAME,
            Self::HalfKp => HalfKp::NAME,
            Self::HalfKaV2Hm => HalfKaV2Hm::NAME,
        }
    }

    pub const fn inputs(self) -> usize {
        match self {
            Self::All768 => All768::INPUTS,
            Self::HalfKp => HalfKp::INPUTS,
            Self::HalfKaV2Hm => HalfKaV2Hm::INPUTS,
        }
    }

    pub const fn max_active(self) -> usize {
        match self {
            Self::All768 => All768::MAX_ACTIVE,
            Self::HalfKp => HalfKp::MAX_ACTIVE,
            Self::HalfKaV2Hm => HalfKaV2Hm::MAX_ACTIVE,
        }
    }

    /// See [`FeatureSet::index`].
    #[inline]
    pub fn index(self, perspective: Color, king: Square, piece: Piece, sq: Square) -> Option<u32> {
        dispatch!(self, S => S::index(perspective, king, piece, sq))
    }

    /// See [`FeatureSet::active`]: appends, never clears `out`.
    pub fn active_features(
        self,
        board: &Board,
        perspective: Color,
        out: &mut Vec<u32>,
    ) -> Result<(), FeatureError> {
        dispatch!(self, S => S::active(board, perspective, out))
    }

    /// See [`FeatureSet::needs_refresh`].
    #[inline]
    pub fn needs_refresh(self, perspective: Color, moved: Piece, from: Square, to: Square) -> bool {
        dispatch!(self, S => S::needs_refresh(perspective, moved, from, to))
    }

    /// See [`FeatureSet::needs_refresh_for`].
    #[inline]
    pub fn needs_refresh_for(self, perspective: Color, delta: &BoardDelta) -> bool {
        dispatch!(self, S => S::needs_refresh_for(perspective, delta))
    }

    /// See [`FeatureSet::changed`].
    #[inline]
    pub fn changed(self, perspective: Color, king: Square, delta: &BoardDelta) -> FeatureDelta {
        dispatch!(self, S => S::changed(perspective, king, delta))
    }
}

impl fmt::Display for FeatureSetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FeatureSetKind {
    type Err = UnknownFeatureSet;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_name(s)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use shakmaty::fen::Fen;
    use shakmaty::{CastlingMode, Chess, Position};

    use super::*;

    use Color::{Black, White};

    const START: &str = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR";

    fn board(board_fen: &str) -> Board {
        Board::from_ascii_board_fen(board_fen.as_bytes()).unwrap()
    }

    fn features(kind: FeatureSetKind, board: &Board, perspective: Color) -> Vec<u32> {
        let mut out = Vec::new();
        kind.active_features(board, perspective, &mut out).unwrap();
        out.sort_unstable();
        out
    }

    fn piece(color: Color, role: Role) -> Piece {
        Piece { color, role }
    }

    /// xorshift64: deterministic, no dependency.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    #[test]
    fn features_all768_start_position_by_hand() {
        // White: pawns a2..h2 = 8..15; Nb1 = 64+1; Bc1 = 128+2; Ra1 = 192+0; Qd1 = 256+3;
        // Ke1 = 320+4. Black pieces add 384: a7 pawn = 384+48 = 432, ke8 = 384+320+60 = 764.
        #[rustfmt::skip]
        let expected = vec![
            8, 9, 10, 11, 12, 13, 14, 15, 65, 70, 130, 133, 192, 199, 259, 324,
            432, 433, 434, 435, 436, 437, 438, 439, 505, 510, 570, 573, 632, 639, 699, 764,
        ];
        let b = board(START);
        assert_eq!(features(FeatureSetKind::All768, &b, White), expected);
        // Black flips ranks: its a7 pawn is "own pawn on a2" = 8, White's Ke1 is
        // "their king on e8" = 384+320+60 = 764. The start position is rank-symmetric.
        assert_eq!(features(FeatureSetKind::All768, &b, Black), expected);
    }

    #[test]
    fn features_halfkp_start_position_by_hand() {
        // White: king e1 = 4, base 641*4 + 1 = 2565. Own pawn a2: 2565 + 0*64 + 8 = 2573.
        // Their pawn a7: 2565 + 1*64 + 48 = 2677. Own queen d1: 2565 + 8*64 + 3 = 3080.
        // Their queen d8: 2565 + 9*64 + 59 = 3200.
        #[rustfmt::skip]
        let white = vec![
            2573, 2574, 2575, 2576, 2577, 2578, 2579, 2580, // own pawns
            2677, 2678, 2679, 2680, 2681, 2682, 2683, 2684, // their pawns
            2694, 2699, 2814, 2819, // knights
            2823, 2826, 2943, 2946, // bishops
            2949, 2956, 3069, 3076, // rooks
            3080, 3200, // queens
        ];
        // Black rotates (sq ^ 63): king e8 = 60 -> 3, base 641*3 + 1 = 1924. Own queen d8 = 59
        // -> 4: 1924 + 8*64 + 4 = 2440. Their queen d1 = 3 -> 60: 1924 + 9*64 + 60 = 2560.
        // Rotation swaps the king and queen sides, so apart from the queens this is the white
        // list shifted down one king block (641).
        #[rustfmt::skip]
        let black = vec![
            1932, 1933, 1934, 1935, 1936, 1937, 1938, 1939,
            2036, 2037, 2038, 2039, 2040, 2041, 2042, 2043,
            2053, 2058, 2173, 2178,
            2182, 2185, 2302, 2305,
            2308, 2315, 2428, 2435,
            2440, 2560,
        ];
        let b = board(START);
        assert_eq!(features(FeatureSetKind::HalfKp, &b, White), white);
        assert_eq!(features(FeatureSetKind::HalfKp, &b, Black), black);
    }

    #[test]
    fn features_halfka_v2_hm_start_position_by_hand() {
        // King e1: no mirror, bucket 31, base 31*704 = 21824. Own pawn a2: 21824 + 8 = 21832.
        // Their queen d8: 21824 + 9*64 + 59 = 22459. Kings share plane 10:
        // Ke1 = 21824 + 640 + 4 = 22468, ke8 = 21824 + 640 + 60 = 22524.
        #[rustfmt::skip]
        let expected = vec![
            21832, 21833, 21834, 21835, 21836, 21837, 21838, 21839,
            21936, 21937, 21938, 21939, 21940, 21941, 21942, 21943,
            21953, 21958, 22073, 22078,
            22082, 22085, 22202, 22205,
            22208, 22215, 22328, 22335,
            22339, 22459,
            22468, 22524,
        ];
        let b = board(START);
        assert_eq!(features(FeatureSetKind::HalfKaV2Hm, &b, White), expected);
        // Black's king e8 flips to e1: same bucket, same list.
        assert_eq!(features(FeatureSetKind::HalfKaV2Hm, &b, Black), expected);
    }

    #[test]
    fn features_start_position_counts() {
        let b = board(START);
        for (kind, n) in [
            (FeatureSetKind::All768, 32),
            (FeatureSetKind::HalfKp, 30),
            (FeatureSetKind::HalfKaV2Hm, 32),
        ] {
            for p in Color::ALL {
                assert_eq!(features(kind, &b, p).len(), n, "{kind} {p:?}");
            }
            assert_eq!(kind.max_active(), n);
        }
    }

    #[test]
    fn features_queen_side_king_by_hand() {
        // White Kd1, Pa2; black kh1.
        let b = board("8/8/8/8/8/8/P7/3K3k");
        // all768. White: Pa2 = 8, Kd1 = 320+3 = 323, kh1 = 384+320+7 = 711.
        // Black (sq ^ 56): Pa2 -> a7: 384+48 = 432; Kd1 -> d8: 384+320+59 = 763;
        // kh1 -> h8: 320+63 = 383.
        assert_eq!(features(FeatureSetKind::All768, &b, White), [8, 323, 711]);
        assert_eq!(features(FeatureSetKind::All768, &b, Black), [383, 432, 763]);
        // halfkp. White: king d1 = 3, Pa2 = 641*3 + 1 + 8 = 1932.
        // Black: king h1 ^ 63 = 56, Pa2 = 641*56 + 1 + 64 + (8 ^ 63 = 55) = 36016.
        assert_eq!(features(FeatureSetKind::HalfKp, &b, White), [1932]);
        assert_eq!(features(FeatureSetKind::HalfKp, &b, Black), [36016]);
        // halfka_v2_hm. White king on d1 mirrors files (flip 7): d1 -> e1, bucket 31, base
        // 21824. Pa2 -> h2 = 15: 21839. Kd1 -> e1: 21824+640+4 = 22468. kh1 -> a1: 22464.
        // Black king h1: no mirror, flip 56, h1 -> h8: bucket 0. Pa2 -> a7: 64 + 48 = 112.
        // Kd1 -> d8: 640 + 59 = 699. kh1 -> h8: 640 + 63 = 703.
        assert_eq!(
            features(FeatureSetKind::HalfKaV2Hm, &b, White),
            [21839, 22464, 22468]
        );
        assert_eq!(
            features(FeatureSetKind::HalfKaV2Hm, &b, Black),
            [112, 699, 703]
        );
    }

    #[test]
    fn features_king_buckets_match_stockfish_table() {
        // Stockfish's KingBuckets rows for White, rank 1 and rank 8.
        let rank1 = [28, 29, 30, 31, 31, 30, 29, 28];
        let rank8 = [0, 1, 2, 3, 3, 2, 1, 0];
        for file in 0..8 {
            assert_eq!(
                HalfKaV2Hm::king_bucket(White, Square::new(file)),
                rank1[file as usize]
            );
            assert_eq!(
                HalfKaV2Hm::king_bucket(White, Square::new(56 + file)),
                rank8[file as usize]
            );
            assert_eq!(
                HalfKaV2Hm::king_bucket(Black, Square::new(56 + file)),
                rank1[file as usize]
            );
            assert_eq!(
                HalfKaV2Hm::king_bucket(Black, Square::new(file)),
                rank8[file as usize]
            );
        }
    }

    /// Every (king, piece, square) combination maps inside the input range, and the ranges are
    /// fully used except HalfKP's never-active slot 0 of each king block.
    #[test]
    fn features_indices_in_range_and_cover_inputs() {
        for kind in FeatureSetKind::ALL {
            for p in Color::ALL {
                let mut seen = BTreeSet::new();
                for k in Square::ALL {
                    for color in Color::ALL {
                        for role in Role::ALL {
                            for sq in Square::ALL {
                                if let Some(i) = kind.index(p, k, piece(color, role), sq) {
                                    assert!((i as usize) < kind.inputs(), "{kind} {i}");
                                    seen.insert(i);
                                }
                            }
                        }
                    }
                }
                match kind {
                    FeatureSetKind::HalfKp => {
                        assert_eq!(seen.len(), 64 * 640);
                        assert!(seen.iter().all(|i| i % 641 != 0));
                    }
                    _ => assert_eq!(seen.len(), kind.inputs(), "{kind}"),
                }
            }
        }
    }

    /// A position and its colour-swapped image (ranks flipped for all768 and halfka_v2_hm,
    /// rotated for halfkp, matching each set's orientation) give the same lists with the
    /// perspectives swapped.
    #[test]
    fn features_symmetric_under_colour_flip() {
        let mut boards = vec![
            board(START),
            board("8/8/8/8/8/8/P7/3K3k"),
            board("r3k2r/pp1n1ppp/2p1b3/q7/3P4/2N2N2/PPQ2PPP/1K1R3R"),
            board("4k3/8/8/3pP3/8/8/8/R3K2R"),
        ];
        let mut rng = Rng(7);
        for _ in 0..20 {
            let mut pos = Chess::default();
            for _ in 0..(20 + rng.below(60)) {
                let moves = pos.legal_moves();
                if moves.is_empty() {
                    break;
                }
                pos.play_unchecked(moves[rng.below(moves.len())]);
            }
            boards.push(pos.board().clone());
        }
        for b in &boards {
            let mirrored = b.clone().into_mirrored();
            let mut rotated = b.clone();
            rotated.rotate_180();
            rotated.swap_colors();
            let mut side_mirrored = b.clone();
            side_mirrored.flip_horizontal();
            for p in Color::ALL {
                for (kind, image) in [
                    (FeatureSetKind::All768, &mirrored),
                    (FeatureSetKind::HalfKp, &rotated),
                    (FeatureSetKind::HalfKaV2Hm, &mirrored),
                    (FeatureSetKind::HalfKaV2Hm, &rotated),
                ] {
                    assert_eq!(
                        features(kind, b, p),
                        features(kind, image, !p),
                        "{kind} {b}"
                    );
                }
                // Horizontal mirroring is built into halfka_v2_hm.
                assert_eq!(
                    features(FeatureSetKind::HalfKaV2Hm, b, p),
                    features(FeatureSetKind::HalfKaV2Hm, &side_mirrored, p)
                );
            }
        }
    }

    #[test]
    fn features_names_round_trip() {
        for kind in FeatureSetKind::ALL {
            assert_eq!(FeatureSetKind::from_name(kind.name()), Ok(kind));
            assert_eq!(kind.to_string().parse::<FeatureSetKind>(), Ok(kind));
        }
        assert_eq!(FeatureSetKind::HalfKp.inputs(), 41_024);
        assert_eq!(FeatureSetKind::HalfKaV2Hm.inputs(), 22_528);
        assert_eq!(FeatureSetKind::All768.inputs(), 768);
        let err = FeatureSetKind::from_name("HalfKP").unwrap_err();
        assert!(err.to_string().contains("halfka_v2_hm"), "{err}");
    }

    #[test]
    fn features_need_a_king_only_when_king_relative() {
        let b = board("8/8/8/8/8/8/P7/7k");
        let mut out = Vec::new();
        assert_eq!(
            FeatureSetKind::HalfKp.active_features(&b, White, &mut out),
            Err(FeatureError::NoKing(White))
        );
        assert_eq!(
            FeatureSetKind::HalfKaV2Hm.active_features(&b, White, &mut out),
            Err(FeatureError::NoKing(White))
        );
        assert!(out.is_empty());
        FeatureSetKind::All768
            .active_features(&b, White, &mut out)
            .unwrap();
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn features_refresh_rules() {
        let k = piece(White, Role::King);
        let (d1, e1, f1, e2) = (Square::D1, Square::E1, Square::F1, Square::E2);
        for (kind, own_king_moves) in [
            (FeatureSetKind::All768, false),
            (FeatureSetKind::HalfKp, true),
            (FeatureSetKind::HalfKaV2Hm, true),
        ] {
            assert_eq!(
                kind.needs_refresh(White, k, e1, f1),
                own_king_moves,
                "{kind}"
            );
            assert_eq!(
                kind.needs_refresh(White, k, e1, e2),
                own_king_moves,
                "{kind}"
            );
            // The other side's king, and non-king pieces, never force a refresh.
            assert!(!kind.needs_refresh(Black, k, e1, f1), "{kind}");
            assert!(!kind.needs_refresh(White, piece(White, Role::Queen), d1, e2));
        }
        // d1 and e1 share bucket 31 in halfka_v2_hm but differ in mirroring.
        assert_eq!(
            HalfKaV2Hm::king_bucket(White, d1),
            HalfKaV2Hm::king_bucket(White, e1)
        );
        assert!(HalfKaV2Hm::needs_refresh(White, k, d1, e1));
    }

    fn play(fen: &str, uci: &str, mode: CastlingMode) -> (Chess, BoardDelta) {
        let pos: Chess = fen.parse::<Fen>().unwrap().into_position(mode).unwrap();
        let mv = uci
            .parse::<shakmaty::uci::UciMove>()
            .unwrap()
            .to_move(&pos)
            .unwrap();
        (pos.clone(), BoardDelta::from_move(pos.turn(), mv))
    }

    #[test]
    fn features_board_delta_special_moves() {
        let std = CastlingMode::Standard;
        let (_, d) = play("r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1", "e1g1", std);
        let (wk, wr) = (piece(White, Role::King), piece(White, Role::Rook));
        assert_eq!(d.removed(), [(wk, Square::E1), (wr, Square::H1)]);
        assert_eq!(d.added(), [(wk, Square::G1), (wr, Square::F1)]);
        assert_eq!(d.king_move(White), Some((Square::E1, Square::G1)));
        assert_eq!(d.king_move(Black), None);

        let (_, d) = play("r3k2r/8/8/8/8/8/8/R3K2R b KQkq - 0 1", "e8c8", std);
        let (bk, br) = (piece(Black, Role::King), piece(Black, Role::Rook));
        assert_eq!(d.removed(), [(bk, Square::E8), (br, Square::A8)]);
        assert_eq!(d.added(), [(bk, Square::C8), (br, Square::D8)]);

        let (_, d) = play("4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 2", "e5d6", std);
        let (wp, bp) = (piece(White, Role::Pawn), piece(Black, Role::Pawn));
        assert_eq!(d.removed(), [(wp, Square::E5), (bp, Square::D5)]);
        assert_eq!(d.added(), [(wp, Square::D6)]);

        let (_, d) = play("1r2k3/P7/8/8/8/8/8/4K3 w - - 0 1", "a7b8q", std);
        assert_eq!(d.removed(), [(wp, Square::A7), (br, Square::B8)]);
        assert_eq!(d.added(), [(piece(White, Role::Queen), Square::B8)]);

        // Chess960: king already on g1 castles short; only the rook moves.
        let (_, d) = play(
            "4k3/8/8/8/8/8/8/6KR w H - 0 1",
            "g1h1",
            CastlingMode::Chess960,
        );
        assert_eq!(d.removed(), [(wr, Square::H1)]);
        assert_eq!(d.added(), [(wr, Square::F1)]);
        assert_eq!(d.king_move(White), None);
        for kind in FeatureSetKind::ALL {
            assert!(!kind.needs_refresh_for(White, &d));
        }

        // halfka_v2_hm deltas are in the moving perspective's king frame: black's Ra8-d8 after
        // castling long, seen by White (king e1, bucket 31): their rook plane 7.
        let (_, d) = play("r3k2r/8/8/8/8/8/8/R3K2R b KQkq - 0 1", "e8c8", std);
        let fd = HalfKaV2Hm::changed(White, Square::E1, &d);
        let base = 31 * 704;
        assert_eq!(fd.removed(), [base + 640 + 60, base + 7 * 64 + 56]);
        assert_eq!(fd.added(), [base + 640 + 58, base + 7 * 64 + 59]);
        // HalfKP ignores the enemy king entirely.
        let fd = HalfKp::changed(White, Square::E1, &d);
        assert_eq!(fd.removed().len(), 1);
        assert_eq!(fd.added().len(), 1);
    }

    fn chess960_start(n: u32) -> Chess {
        let fen = format!("{} w KQkq - 0 1", Board::chess960(n));
        fen.parse::<Fen>()
            .unwrap()
            .into_position(CastlingMode::Chess960)
            .unwrap()
    }

    const TACTICAL: [&str; 3] = [
        "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",
        "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1",
        "n1n5/PPPk4/8/8/8/8/4Kppp/5N1N b - - 0 1",
    ];

    #[derive(Default, Debug)]
    struct Seen {
        plies: usize,
        castles: usize,
        en_passant: usize,
        promotions: usize,
        capture_promotions: usize,
        refreshes: usize,
    }

    /// Over many random legal games, applying the per-move deltas (or refreshing when told to)
    /// reproduces the full recomputation after every move, for every set and perspective.
    #[test]
    fn features_incremental_updates_match_full_recompute() {
        const GAMES: usize = 240;
        const MAX_PLIES: usize = 300;
        let mut rng = Rng(0x2545_F491_4F6C_DD1D);
        let mut seen = Seen::default();
        let full = |kind, b: &Board, p| features(kind, b, p).into_iter().collect::<BTreeSet<_>>();

        for game in 0..GAMES {
            let mut pos = match game % 4 {
                0 | 1 => Chess::default(),
                2 => chess960_start(rng.below(960) as u32),
                // Perft positions thick with castling, en passant and promotions.
                _ => TACTICAL[game / 4 % TACTICAL.len()]
                    .parse::<Fen>()
                    .unwrap()
                    .into_position(CastlingMode::Standard)
                    .unwrap(),
            };
            let mut acc: Vec<[BTreeSet<u32>; 2]> = FeatureSetKind::ALL
                .iter()
                .map(|&k| Color::ALL.map(|p| full(k, pos.board(), p)))
                .collect();

            for _ in 0..MAX_PLIES {
                let moves = pos.legal_moves();
                if moves.is_empty() {
                    break;
                }
                let mv = moves[rng.below(moves.len())];
                let turn = pos.turn();
                let delta = BoardDelta::from_move(turn, mv);
                let kings_before = Color::ALL.map(|c| pos.board().king_of(c).unwrap());
                seen.plies += 1;
                seen.castles += usize::from(mv.is_castle());
                seen.en_passant += usize::from(mv.is_en_passant());
                seen.promotions += usize::from(mv.is_promotion());
                seen.capture_promotions += usize::from(mv.is_promotion() && mv.is_capture());
                pos.play_unchecked(mv);
                let b = pos.board();

                for (kind, sets) in FeatureSetKind::ALL.iter().zip(acc.iter_mut()) {
                    for ((p, set), king_before) in
                        Color::ALL.into_iter().zip(sets).zip(kings_before)
                    {
                        let king = b.king_of(p).unwrap();
                        let refresh = kind.needs_refresh_for(p, &delta);
                        let king_moved = king != king_before;
                        assert_eq!(refresh, king_moved && *kind != FeatureSetKind::All768);
                        if let Move::Normal { role, from, to, .. } = mv {
                            let moved = piece(turn, role);
                            assert_eq!(refresh, kind.needs_refresh(p, moved, from, to));
                        }
                        if refresh {
                            seen.refreshes += 1;
                            *set = full(*kind, b, p);
                        } else {
                            let fd = kind.changed(p, king, &delta);
                            for i in fd.removed() {
                                assert!(set.remove(i), "{kind} {p:?} {mv:?}: {i} was not on");
                            }
                            for &i in fd.added() {
                                assert!(set.insert(i), "{kind} {p:?} {mv:?}: {i} already on");
                            }
                        }
                        assert_eq!(*set, full(*kind, b, p), "{kind} {p:?} after {mv:?} in {b}");
                        assert!(set.len() <= kind.max_active());
                        assert!(set.iter().all(|&i| (i as usize) < kind.inputs()));
                    }
                }
            }
        }
        eprintln!("{seen:?}");
        assert!(seen.castles > 0 && seen.en_passant > 0, "{seen:?}");
        assert!(
            seen.promotions > 0 && seen.capture_promotions > 0,
            "{seen:?}"
        );
    }
}
