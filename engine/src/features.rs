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

#[cfg(target_arch = "x86_64")]
mod avx2;
pub mod king_buckets;
pub mod thesis;
pub mod threats;

/// Why a board has no feature list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FeatureError {
    /// King-relative sets index everything by the perspective's king square.
    #[error("{0:?} has no king or more than one; king-relative features need exactly one")]
    NoKing(Color),
    /// A legal chess position has at most 32 men.
    #[error("more than {MAX_MEN} men on the board; at most {MAX_MEN} fit a position")]
    TooManyMen,
}

/// The most men a board holds: what the feature buffers are sized for.
pub const MAX_MEN: u32 = 32;

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

    /// [`FeatureSet::index`] split the way the loader computes it: in one pass over a
    /// position's men, before it knows where the kings stand. With `b = black(perspective)`,
    /// `(x, a) = king_terms(perspective, king)` and `code = piece_code(piece)`:
    /// `index = ((PIECE_TERMS[b][code] + (sq ^ SQUARE_FLIP[b])) ^ x) + a`, and
    /// `PIECE_TERMS[b][code] == NO_INPUT` exactly where `index` is `None` (and for the codes
    /// that are no piece). A test checks this for every set, perspective, king, piece and square.
    const PIECE_TERMS: [[u32; 16]; 2];
    /// See [`FeatureSet::PIECE_TERMS`].
    const SQUARE_FLIP: [u32; 2];
    /// 1 for the piece codes the set has an input for, else 0 (from `PIECE_TERMS`).
    const HAS_INPUT: [u32; 16] = has_input(&Self::PIECE_TERMS[0]);
    /// See [`FeatureSet::PIECE_TERMS`]: the XOR and the addend the own king's square brings.
    fn king_terms(perspective: Color, king: Square) -> (u32, u32);

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

/// A piece as one 4-bit code, as packed boards store it: the role in bits 0-2 (pawn 1 …
/// king 6), bit 3 set for Black. Codes 0, 7, 8 and 15 are no piece.
pub const fn piece_code(piece: Piece) -> u32 {
    piece.role as u32 | (black(piece.color) << 3)
}

/// A position's men, one byte each in ascending square order: each man's square (0..64) and
/// [`piece_code`]. What the loader's feature pass takes ([`FeatureSetKind::active_pair_from_men`]);
/// at most [`MAX_MEN`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Men {
    squares: [u8; MAX_MEN as usize],
    codes: [u8; MAX_MEN as usize],
    len: usize,
}

impl Men {
    /// Men from `(square, code)` pairs in ascending square order; more than [`MAX_MEN`] are
    /// refused.
    pub fn new(men: impl IntoIterator<Item = (u32, u32)>) -> Result<Men, FeatureError> {
        let mut out = Men {
            squares: [0; MAX_MEN as usize],
            codes: [0; MAX_MEN as usize],
            len: 0,
        };
        for (sq, code) in men {
            if out.len == MAX_MEN as usize {
                return Err(FeatureError::TooManyMen);
            }
            out.squares[out.len] = (sq & 63) as u8;
            out.codes[out.len] = (code & 15) as u8;
            out.len += 1;
        }
        Ok(out)
    }

    /// The men of `board`: the FEN loader's source.
    pub fn of_board(board: &Board) -> Result<Men, FeatureError> {
        // Each square's code from four bitboards, one per bit of the code ([`piece_code`]):
        // no search through the piece sets per square.
        let bits = |roles: [Role; 3]| roles.iter().fold(0u64, |b, &r| b | board.by_role(r).0);
        let code_bits = [
            bits([Role::Pawn, Role::Bishop, Role::Queen]),
            bits([Role::Knight, Role::Bishop, Role::King]),
            bits([Role::Rook, Role::Queen, Role::King]),
            board.black().0,
        ];
        Men::new(board.occupied().into_iter().map(|sq| {
            let sq = sq.to_u32();
            let code = (0..4).fold(0, |c, k| c | (((code_bits[k] >> sq) & 1) as u32) << k);
            (sq, code)
        }))
    }

    /// Men from arrays a caller filled itself (a packed board's); `len` at most [`MAX_MEN`].
    pub(crate) fn from_parts(
        squares: [u8; MAX_MEN as usize],
        codes: [u8; MAX_MEN as usize],
        len: usize,
    ) -> Men {
        let len = len.min(MAX_MEN as usize);
        debug_assert!(squares[..len].iter().all(|&sq| sq < 64), "{squares:?}");
        debug_assert!(codes[..len].iter().all(|&code| code < 16), "{codes:?}");
        Men {
            squares,
            codes,
            len,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn squares(&self) -> &[u8] {
        &self.squares[..self.len]
    }

    pub fn codes(&self) -> &[u8] {
        &self.codes[..self.len]
    }
}

/// [`FeatureSet::PIECE_TERMS`]' marker for a piece code without an input.
pub const NO_INPUT: u32 = u32::MAX;

/// `[PIECE_TERMS[0], PIECE_TERMS[1]]` of a set whose term for a piece of `role` (pawn 0 …
/// king 5) that is `them` (0 or 1) is the `Option<u32>` expression given (`None`: no input).
macro_rules! piece_terms {
    (|$role:ident, $them:ident| $term:expr) => {{
        const fn term($role: u32, $them: u32) -> Option<u32> {
            $term
        }
        let mut out = [[NO_INPUT; 16]; 2];
        let mut b = 0;
        while b < 2 {
            let mut code = 0;
            while code < 16 {
                let role = code & 7;
                if role >= 1 && role <= 6 {
                    if let Some(t) = term(role - 1, b ^ (code >> 3)) {
                        out[b as usize][code as usize] = t;
                    }
                }
                code += 1;
            }
            b += 1;
        }
        out
    }};
}

const fn has_input(terms: &[u32; 16]) -> [u32; 16] {
    let mut out = [0; 16];
    let mut code = 0;
    while code < 16 {
        out[code] = (terms[code] != NO_INPUT) as u32;
        code += 1;
    }
    out
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

    const PIECE_TERMS: [[u32; 16]; 2] = piece_terms!(|role, them| Some(384 * them + 64 * role));
    const SQUARE_FLIP: [u32; 2] = [0, 56];

    #[inline]
    fn king_terms(_perspective: Color, _king: Square) -> (u32, u32) {
        (0, 0)
    }

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

    // Kings have no input.
    const PIECE_TERMS: [[u32; 16]; 2] = piece_terms!(|role, them| if role == 5 {
        None
    } else {
        Some(1 + 64 * (2 * role + them))
    });
    const SQUARE_FLIP: [u32; 2] = [0, 63];

    #[inline]
    fn king_terms(perspective: Color, king: Square) -> (u32, u32) {
        (0, 641 * (king.to_u32() ^ (63 * black(perspective))))
    }

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

    // Both kings share plane 10.
    const PIECE_TERMS: [[u32; 16]; 2] = piece_terms!(|role, them| if role == 5 {
        Some(64 * 10)
    } else {
        Some(64 * (2 * role + them))
    });
    const SQUARE_FLIP: [u32; 2] = [0, 56];

    #[inline]
    fn king_terms(perspective: Color, king: Square) -> (u32, u32) {
        let horizontal = Self::orientation(perspective, king) & 7;
        (horizontal, 704 * Self::king_bucket(perspective, king))
    }

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

    /// Both perspectives' features of a position given as its [`Men`]: `turn`'s appended to
    /// `first` and the other side's to `second`, as `i32` (the batch layout), one entry per
    /// man with an input, in the men's order (ascending square). With `mirror` every square
    /// is flipped a↔h first. The same features as [`FeatureSetKind::active_features`] on the
    /// same board (which lists them by piece): the loader's pass, in AVX2 eight men at a time
    /// where the CPU has it, else one man at a time with no branch per man. Codes that are no
    /// piece get no feature; whoever made the men vouches for them. On an error the lists are
    /// left as they were.
    pub fn active_pair_from_men(
        self,
        men: &Men,
        turn: Color,
        mirror: bool,
        first: &mut Vec<i32>,
        second: &mut Vec<i32>,
    ) -> Result<(), FeatureError> {
        #[cfg(target_arch = "x86_64")]
        if avx2::available() {
            // SAFETY: the CPU has the features `avx2::pair` is compiled for.
            return dispatch!(self, S => unsafe {
                avx2::pair::<S>(men, turn, mirror, first, second)
            });
        }
        self.active_pair_from_men_portable(men, turn, mirror, first, second)
    }

    /// [`FeatureSetKind::active_pair_from_men`] in plain Rust, for every CPU.
    pub fn active_pair_from_men_portable(
        self,
        men: &Men,
        turn: Color,
        mirror: bool,
        first: &mut Vec<i32>,
        second: &mut Vec<i32>,
    ) -> Result<(), FeatureError> {
        /// Where each code's square goes while the men pass: White's king, Black's, nowhere.
        const KING_SLOT: [usize; 16] = [2, 2, 2, 2, 2, 2, 0, 2, 2, 2, 2, 2, 2, 2, 1, 2];
        /// Kings counted in one register: White's in bits 0-7, Black's in bits 8-15.
        const KING_COUNT: [u32; 16] = [0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1 << 8, 0];
        fn pair<S: FeatureSet>(
            men: &Men,
            turn: Color,
            mirror: bool,
            first: &mut Vec<i32>,
            second: &mut Vec<i32>,
        ) -> Result<(), FeatureError> {
            let (us, them) = (turn, turn.other());
            let mirror = if mirror { 7 } else { 0 };
            let terms_us = &S::PIECE_TERMS[black(us) as usize];
            let terms_them = &S::PIECE_TERMS[black(them) as usize];
            let flip_us = S::SQUARE_FLIP[black(us) as usize] ^ mirror;
            let flip_them = S::SQUARE_FLIP[black(them) as usize] ^ mirror;
            // Written into stack buffers indexed `& 63`, so no write is bounds-checked (the
            // write for a man without an input lands one past the last feature, overwritten
            // by the next); no length bookkeeping per feature. The kings' squares and counts
            // are taken on the way, their terms applied after.
            let mut ours = [0u32; 64];
            let mut theirs = [0u32; 64];
            let mut n = 0usize;
            let mut kings = [0u32; 4];
            let mut king_counts = 0u32;
            for (&sq, &code) in men.squares().iter().zip(men.codes()) {
                let (sq, code) = (u32::from(sq), usize::from(code & 15));
                ours[n & 63] = terms_us[code].wrapping_add(sq ^ flip_us);
                theirs[n & 63] = terms_them[code].wrapping_add(sq ^ flip_them);
                n += S::HAS_INPUT[code] as usize;
                kings[KING_SLOT[code] & 3] = (sq ^ mirror) & 63;
                king_counts += KING_COUNT[code];
            }
            let king_count = |c: Color| (king_counts >> (8 * black(c))) & 0xff;
            if S::KING_RELATIVE && king_count(us) != 1 {
                return Err(FeatureError::NoKing(us));
            } else if S::KING_RELATIVE && king_count(them) != 1 {
                return Err(FeatureError::NoKing(them));
            }
            let n = n.min(MAX_MEN as usize);
            for (features, perspective, out) in [(&ours, us, first), (&theirs, them, second)] {
                let king = Square::new(kings[black(perspective) as usize]);
                let (x, a) = S::king_terms(perspective, king);
                out.extend(features[..n].iter().map(|&f| ((f ^ x) + a) as i32));
            }
            Ok(())
        }
        dispatch!(self, S => pair::<S>(men, turn, mirror, first, second))
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
mod tests;
