//! Fast FEN and UCI writers for shakmaty positions, for ingest paths that emit one FEN per
//! row (millions per second). They produce exactly what shakmaty's own `Fen` and `UciMove`
//! display (en passant square only when a legal capture exists), tested below.

use shakmaty::fen::Fen;
use shakmaty::uci::UciMove;
use shakmaty::{CastlingMode, Chess, Color, EnPassantMode, Move, Position, Role, Square};

/// FEN piece letters by colour (white, black) and role (pawn … king).
pub const PIECE_CHARS: [[u8; 6]; 2] = [*b"PNBRQK", *b"pnbrqk"];
const ROLES: [Role; 6] = [
    Role::Pawn,
    Role::Knight,
    Role::Bishop,
    Role::Rook,
    Role::Queen,
    Role::King,
];

/// A standard-chess position from a FEN that tests know to be legal.
#[cfg(test)]
pub(crate) fn test_position(fen: &str) -> Chess {
    fen.parse::<Fen>()
        .expect("test FEN parses")
        .into_position(CastlingMode::Standard)
        .expect("test FEN is legal")
}

/// Appends the FEN of `pos` to `out`. Standard castling rights are written as `KQkq`;
/// positions whose rights need Chess960 notation go through shakmaty's writer (rare).
pub fn write_fen(pos: &Chess, out: &mut Vec<u8>) {
    let castles = pos.castles();
    if castles.mode() == CastlingMode::Chess960 && !standard_rooks(pos) {
        let fen = Fen::from_position(pos, EnPassantMode::Legal);
        out.extend_from_slice(fen.to_string().as_bytes());
        return;
    }
    let squares = piece_letters(pos.board());
    let rights = castles.castling_rights();
    let fields = FenFields {
        squares: &squares,
        white_to_move: pos.turn() == Color::White,
        castling: [Square::H1, Square::A1, Square::H8, Square::A8].map(|sq| rights.contains(sq)),
        en_passant: pos.ep_square(EnPassantMode::Legal).map(|sq| sq as u8),
        halfmoves: pos.halfmoves(),
        fullmoves: pos.fullmoves().get(),
    };
    fields.write(out);
}

/// The piece letter on each square (a1 = 0 … h8 = 63), 0 where empty.
fn piece_letters(board: &shakmaty::Board) -> [u8; 64] {
    piece_letters_from(
        ROLES.map(|r| board.by_role(r).0),
        board.by_color(Color::Black).0,
    )
}

/// The piece letter on each square from bitboards (bit i = square i, a1 = 0): one per role in
/// the order pawn, knight, bishop, rook, queen, king, and the black pieces. For writers that
/// hold positions of other libraries as well as shakmaty's.
pub fn piece_letters_from(by_role: [u64; 6], black: u64) -> [u8; 64] {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("ssse3") {
        // SAFETY: the CPU has SSSE3, checked just above.
        return unsafe { piece_letters_ssse3(by_role, black) };
    }
    piece_letters_scalar(by_role, black)
}

fn piece_letters_scalar(by_role: [u64; 6], black: u64) -> [u8; 64] {
    let mut squares = [0u8; 64];
    for (r, &bits) in by_role.iter().enumerate() {
        for (c, side) in [bits & !black, bits & black].into_iter().enumerate() {
            let mut rest = side;
            while rest != 0 {
                squares[rest.trailing_zeros() as usize] = PIECE_CHARS[c][r];
                rest &= rest - 1;
            }
        }
    }
    squares
}

/// The same without a loop per piece type (whose exits mispredicted): each square's piece
/// as a 4-bit code (role 1..6 in bits 0-2, black in bit 3) from four bit planes, each plane
/// expanded to one byte per square, then the code looked up as a letter with `pshufb`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "ssse3")]
unsafe fn piece_letters_ssse3(by_role: [u64; 6], black: u64) -> [u8; 64] {
    use std::arch::x86_64::*;
    let [pawns, knights, bishops, rooks, queens, kings] = by_role;
    // Role codes: pawn 1, knight 2, bishop 3, rook 4, queen 5, king 6.
    let planes = [
        pawns | bishops | queens,
        knights | bishops | kings,
        rooks | queens | kings,
        black,
    ];
    let letters = _mm_setr_epi8(
        0, b'P' as i8, b'N' as i8, b'B' as i8, b'R' as i8, b'Q' as i8, b'K' as i8, 0, 0,
        b'p' as i8, b'n' as i8, b'b' as i8, b'r' as i8, b'q' as i8, b'k' as i8, 0,
    );
    // Byte i of the 16 takes bit i % 8 of the plane's byte i / 8 (of this group of 16).
    let spread = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    let bits = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
    let mut out = [0u8; 64];
    for group in 0..4 {
        let mut code = _mm_setzero_si128();
        for (bit, plane) in planes.iter().enumerate() {
            let two = (plane >> (16 * group)) as u16 as i16;
            let bytes = _mm_shuffle_epi8(_mm_set1_epi16(two), spread);
            let set = _mm_cmpeq_epi8(_mm_and_si128(bytes, bits), bits);
            code = _mm_or_si128(code, _mm_and_si128(set, _mm_set1_epi8(1 << bit)));
        }
        // SAFETY: 16 bytes at group * 16 <= 48 lie inside the 64.
        unsafe {
            _mm_storeu_si128(
                out.as_mut_ptr().add(group * 16).cast(),
                _mm_shuffle_epi8(letters, code),
            );
        }
    }
    out
}

/// A position's FEN, field by field, for writers that hold positions of other libraries
/// (sfbinpack's binpack positions) as well as shakmaty's.
pub struct FenFields<'a> {
    /// Piece letters (`PNBRQK` / `pnbrqk`) by square, a1 = 0 … h8 = 63; 0 for empty.
    pub squares: &'a [u8; 64],
    pub white_to_move: bool,
    /// Castling rights in FEN order: white king side, white queen side, black king side,
    /// black queen side (`KQkq`); none is `-`.
    pub castling: [bool; 4],
    /// The en passant square (0..64), if the FEN is to show one.
    pub en_passant: Option<u8>,
    pub halfmoves: u32,
    pub fullmoves: u32,
}

/// For each occupancy pattern of one rank (bit f set = a piece on file f), how that rank
/// reads in a FEN: `len` output bytes, byte i taken from `source[index[i]]` where `source`
/// is the rank's 8 piece letters followed by the digits `1`..`8`. Looking the pattern up
/// replaces a branch per square, which mispredicted on every other square and made the FEN
/// a third of PGN parsing.
struct RankPattern {
    index: [u8; 8],
    len: u8,
}

const RANK_PATTERNS: [RankPattern; 256] = {
    let mut table = [const {
        RankPattern {
            index: [0; 8],
            len: 0,
        }
    }; 256];
    let mut mask = 0;
    while mask < 256 {
        let mut index = [0u8; 8];
        let mut len = 0;
        let mut empty = 0;
        let mut file = 0;
        while file < 8 {
            if mask & (1 << file) != 0 {
                if empty > 0 {
                    index[len] = 8 + empty - 1;
                    len += 1;
                    empty = 0;
                }
                index[len] = file as u8;
                len += 1;
            } else {
                empty += 1;
            }
            file += 1;
        }
        if empty > 0 {
            index[len] = 8 + empty - 1;
            len += 1;
        }
        table[mask] = RankPattern {
            index,
            len: len as u8,
        };
        mask += 1;
    }
    table
};

/// Writes the board field followed by '/' into `buf`, returns its length. Each rank stores
/// 8 bytes and advances by its real length, so `buf` must have room for 8 ranks of 9.
fn write_board(squares: &[u8; 64], buf: &mut [u8; 112]) -> usize {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("ssse3") {
        // SAFETY: the CPU has SSSE3, checked just above.
        return unsafe { write_board_ssse3(squares, buf) };
    }
    write_board_scalar(squares, buf)
}

fn write_board_scalar(squares: &[u8; 64], buf: &mut [u8; 112]) -> usize {
    let mut n = 0usize;
    for rank in (0..8usize).rev() {
        let mut source = *b"\x00\x00\x00\x00\x00\x00\x00\x0012345678";
        source[..8].copy_from_slice(&squares[rank * 8..rank * 8 + 8]);
        let mut mask = 0usize;
        for (file, &ch) in source[..8].iter().enumerate() {
            mask |= usize::from(ch != 0) << file;
        }
        let pattern = &RANK_PATTERNS[mask];
        for (i, &at) in pattern.index.iter().enumerate() {
            buf[n + i] = source[usize::from(at)];
        }
        n += usize::from(pattern.len);
        buf[n] = b'/';
        n += 1;
    }
    n
}

/// The same with one byte shuffle per rank (`pshufb` does the table's gather).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "ssse3")]
unsafe fn write_board_ssse3(squares: &[u8; 64], buf: &mut [u8; 112]) -> usize {
    use std::arch::x86_64::*;
    let digits = _mm_set_epi8(
        b'8' as i8, b'7' as i8, b'6' as i8, b'5' as i8, b'4' as i8, b'3' as i8, b'2' as i8,
        b'1' as i8, 0, 0, 0, 0, 0, 0, 0, 0,
    );
    let mut n = 0usize;
    for rank in (0..8usize).rev() {
        // SAFETY: bytes rank * 8 .. rank * 8 + 8 <= 64 are read; n + 8 <= 7 * 9 + 8 < 112.
        let len = unsafe {
            let pieces = _mm_loadl_epi64(squares.as_ptr().add(rank * 8).cast());
            let empty = _mm_cmpeq_epi8(pieces, _mm_setzero_si128());
            let mask = !_mm_movemask_epi8(empty) as usize & 0xff;
            let pattern = &RANK_PATTERNS[mask];
            let control = _mm_loadl_epi64(pattern.index.as_ptr().cast());
            let out = _mm_shuffle_epi8(_mm_or_si128(pieces, digits), control);
            _mm_storel_epi64(buf.as_mut_ptr().add(n).cast(), out);
            pattern.len
        };
        n += usize::from(len);
        buf[n] = b'/';
        n += 1;
    }
    n
}

impl FenFields<'_> {
    /// Appends the FEN. Built whole in a stack buffer and appended with one fixed-size copy:
    /// per-byte `Vec::push`, and then a `memcpy` call per field, dominated the cost.
    pub fn write(&self, out: &mut Vec<u8>) {
        // Board 71 bytes at most, " w KQkq e3 " 11, two u32 of up to 10 digits and a space.
        let mut buf = [0u8; 112];
        let mut n = write_board(self.squares, &mut buf);
        // The last rank's '/' becomes the space before the side to move.
        buf[n - 1] = b' ';
        macro_rules! put {
            ($b:expr) => {{
                buf[n] = $b;
                n += 1;
            }};
        }
        put!(if self.white_to_move { b'w' } else { b'b' });
        put!(b' ');
        if !self.castling.contains(&true) {
            put!(b'-');
        }
        for (has, c) in self.castling.into_iter().zip(*b"KQkq") {
            if has {
                put!(c);
            }
        }
        put!(b' ');
        match self.en_passant {
            Some(sq) => {
                put!(b'a' + (sq & 7));
                put!(b'1' + (sq >> 3));
            }
            None => put!(b'-'),
        }
        put!(b' ');
        n = put_u32(self.halfmoves, &mut buf, n);
        put!(b' ');
        n = put_u32(self.fullmoves, &mut buf, n);
        let len = out.len();
        out.resize(len + buf.len(), 0);
        out[len..].copy_from_slice(&buf);
        out.truncate(len + n);
    }
}

/// Writes `v` in decimal at `buf[at..]`, returns the end.
fn put_u32(v: u32, buf: &mut [u8; 112], at: usize) -> usize {
    let digits = v.checked_ilog10().unwrap_or(0) as usize + 1;
    let mut rest = v;
    for i in (0..digits).rev() {
        buf[at + i] = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    at + digits
}

/// True when every castling right belongs to a rook on a1/h1/a8/h8 with the king on e1/e8,
/// so `KQkq` notation is exact even for a Chess960 start position.
fn standard_rooks(pos: &Chess) -> bool {
    let castles = pos.castles();
    let rights = castles.castling_rights();
    // a1, h1, a8, h8
    let corners = shakmaty::Bitboard(0x8100_0000_0000_0081);
    if !(rights & !corners).is_empty() {
        return false;
    }
    let board = pos.board();
    [(Color::White, Square::E1), (Color::Black, Square::E8)]
        .into_iter()
        .all(|(c, home)| !castles.has_color(c) || board.king_of(c) == Some(home))
}

/// Appends `m` in UCI: castling as the king's two-square move in standard chess
/// (`e1g1`), as king-takes-rook (`e1h1`) in Chess960, like Stockfish's `UCI_Chess960`.
pub fn write_uci(m: &Move, mode: CastlingMode, out: &mut Vec<u8>) {
    let (from, to, promotion) = match *m {
        Move::Normal {
            from,
            to,
            promotion,
            ..
        } => (from, to, promotion),
        Move::EnPassant { from, to } => (from, to, None),
        Move::Castle { .. } | Move::Put { .. } => {
            out.extend_from_slice(UciMove::from_move(*m, mode).to_string().as_bytes());
            return;
        }
    };
    out.extend_from_slice(&[
        b'a' + from.file() as u8,
        b'1' + from.rank() as u8,
        b'a' + to.file() as u8,
        b'1' + to.rank() as u8,
    ]);
    if let Some(role) = promotion {
        out.push(role.char() as u8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random_games::SplitMix;

    fn expected_fen(pos: &Chess) -> String {
        Fen::from_position(pos, EnPassantMode::Legal).to_string()
    }

    #[test]
    fn fen_and_uci_match_shakmaty_over_random_games() {
        let mut rng = SplitMix(7);
        let mut checked = 0;
        for _ in 0..300 {
            let mut pos = Chess::default();
            for _ in 0..200 {
                let mut out = Vec::new();
                write_fen(&pos, &mut out);
                assert_eq!(String::from_utf8(out).unwrap(), expected_fen(&pos));
                let moves = pos.legal_moves();
                if moves.is_empty() {
                    break;
                }
                let m = moves[rng.below(moves.len() as u64) as usize];
                let mut uci = Vec::new();
                write_uci(&m, CastlingMode::Standard, &mut uci);
                let want = UciMove::from_move(m, CastlingMode::Standard).to_string();
                assert_eq!(String::from_utf8(uci).unwrap(), want);
                pos.play_unchecked(m);
                checked += 1;
            }
        }
        assert!(checked > 20_000, "only {checked} positions checked");
    }

    #[test]
    fn board_writers_agree_on_every_rank_pattern() {
        let letters = b"PNBRQKpnbrqk";
        let mut rng = SplitMix(11);
        for round in 0..4096u64 {
            let mut squares = [0u8; 64];
            for (sq, ch) in squares.iter_mut().enumerate() {
                // Every rank takes each of the 256 occupancy patterns over the rounds.
                let occupied = ((round + sq as u64 / 8 * 37) % 256) >> (sq % 8) & 1 == 1;
                if occupied {
                    *ch = letters[rng.below(12) as usize];
                }
            }
            let mut a = [0u8; 112];
            let n = write_board_scalar(&squares, &mut a);
            #[cfg(target_arch = "x86_64")]
            if std::is_x86_feature_detected!("ssse3") {
                let mut b = [0u8; 112];
                // SAFETY: the CPU has SSSE3.
                let m = unsafe { write_board_ssse3(&squares, &mut b) };
                assert_eq!(&a[..n], &b[..m]);
            }
            let mut expected = Vec::new();
            for rank in (0..8).rev() {
                let mut empty = 0;
                for file in 0..8 {
                    match squares[rank * 8 + file] {
                        0 => empty += 1,
                        ch => {
                            if empty > 0 {
                                expected.push(b'0' + empty);
                                empty = 0;
                            }
                            expected.push(ch);
                        }
                    }
                }
                if empty > 0 {
                    expected.push(b'0' + empty);
                }
                expected.push(b'/');
            }
            assert_eq!(&a[..n], &expected[..], "round {round}");
        }
    }

    #[test]
    fn piece_letter_builders_agree_over_random_games() {
        let mut rng = SplitMix(5);
        for _ in 0..100 {
            let mut pos = Chess::default();
            for _ in 0..150 {
                let board = pos.board();
                let planes = ROLES.map(|r| board.by_role(r).0);
                let scalar = piece_letters_scalar(planes, board.by_color(Color::Black).0);
                assert_eq!(piece_letters(board), scalar);
                for (sq, &ch) in scalar.iter().enumerate() {
                    let want = pos
                        .board()
                        .piece_at(Square::new(sq as u32))
                        .map(|p| p.char() as u8);
                    assert_eq!(want.unwrap_or(0), ch);
                }
                let moves = pos.legal_moves();
                if moves.is_empty() {
                    break;
                }
                pos.play_unchecked(moves[rng.below(moves.len() as u64) as usize]);
            }
        }
    }

    #[test]
    fn chess960_castling_uses_rook_squares() {
        let fen: Fen = "r1k4r/8/8/8/8/8/8/R1K4R w HAha - 0 1".parse().unwrap();
        let pos: Chess = fen.into_position(CastlingMode::Chess960).unwrap();
        let mut out = Vec::new();
        write_fen(&pos, &mut out);
        assert_eq!(String::from_utf8(out).unwrap(), expected_fen(&pos));
        let castle = pos
            .legal_moves()
            .into_iter()
            .find(|m| m.is_castle())
            .expect("castling is legal");
        let mut uci = Vec::new();
        write_uci(&castle, CastlingMode::Chess960, &mut uci);
        assert_eq!(
            String::from_utf8(uci).unwrap(),
            UciMove::from_move(castle, CastlingMode::Chess960).to_string()
        );
    }
}
