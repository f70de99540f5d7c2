//! The packed board: a position in 32 fixed bytes, made once from its FEN when a shuffle
//! deals rows, so that training reads boards without parsing text every epoch.
//!
//! Layout `lakefish-packed-board-v1` (the name shuffle chunks record in their metadata):
//!
//! | bytes  | what |
//! |--------|------|
//! | 0..8   | occupancy, u64 little-endian, bit i = square i (a1 = 0, b1 = 1, …, h8 = 63) |
//! | 8..24  | one 4-bit code per occupied square in ascending square order, low nibble first: role in bits 0-2 (pawn 1, knight 2, bishop 3, rook 4, queen 5, king 6), bit 3 set for Black; unused nibbles 0 |
//! | 24     | bit 0: Black to move; other bits 0 |
//! | 25..28 | the FEN's castling field as up to four 5-bit tokens (bits 0-4, 5-9, 10-14, 15-19 of a little-endian u24, in FEN order; 0 ends): `K Q k q` are 1-4, `A`-`H` 5-12, `a`-`h` 13-20 (X-FEN and Shredder-FEN files), so the field prints back as it was written |
//! | 28     | en-passant square 0..63 as the FEN gives it, 255 for none |
//! | 29     | half-move clock, saturating at 255 |
//! | 30..32 | full-move number, u16 little-endian, saturating at 65,535 |
//!
//! At most 32 men fit (no position reachable in chess has more); a board with more is refused.
//! This module reads and writes FEN text itself (no shakmaty position is built), because the
//! shuffle packs millions of rows per second.

use shakmaty::{Bitboard, Board, ByColor, ByRole, Color, Role, Square};

use crate::features::{MAX_MEN, Men};

/// Bytes in one packed board.
pub const PACKED_BOARD_BYTES: usize = 32;
/// The layout's name, recorded in the metadata of every chunk that carries packed boards.
pub const PACKED_BOARD_LAYOUT: &str = "lakefish-packed-board-v1";

/// One position, packed ([module docs](self)).
pub type PackedBoard = [u8; PACKED_BOARD_BYTES];

/// Why a FEN could not be packed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PackError {
    #[error("unreadable piece placement: {0}")]
    Placement(&'static str),
    #[error("{0} men on the board; a packed board holds at most 32")]
    TooManyMen(u32),
    #[error("side to move {0:?} is neither w nor b")]
    SideToMove(String),
    #[error("unreadable castling field {0:?}")]
    Castling(String),
    #[error("unreadable en-passant square {0:?}")]
    EnPassant(String),
    #[error("unreadable move counter {0:?}")]
    Counter(String),
}

/// Why bytes are not a packed board.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnpackError {
    #[error("{0} bytes; a packed board has 32")]
    Length(usize),
    #[error("piece code {code} on square {square} is not a piece")]
    Piece { code: u8, square: u8 },
    #[error("more than 32 occupied squares")]
    TooManyMen,
    #[error("en-passant byte {0} is neither a square nor 255")]
    EnPassant(u8),
    #[error("castling token {0} is not a castling letter")]
    Castling(u32),
    #[error("flags byte {0:#04x} has bits other than the side to move")]
    Flags(u8),
}

const CASTLING_LETTERS: &[u8; 20] = b"KQkqABCDEFGHabcdefgh";

/// Piece code by FEN letter (0: not a piece letter).
const PIECE_CODES: [u8; 128] = {
    let mut t = [0u8; 128];
    let letters = *b"PNBRQK";
    let mut i = 0;
    while i < 6 {
        t[letters[i] as usize] = i as u8 + 1;
        t[letters[i].to_ascii_lowercase() as usize] = i as u8 + 9;
        i += 1;
    }
    t
};

/// How each placement character moves the reader: bits 0-3 the piece code (0: none), bits 4-7
/// how many squares it covers; `SLASH` and `BAD` mark the rest.
const PLACEMENT_CHARS: [u8; 256] = {
    let mut t = [BAD; 256];
    let mut c = 0;
    while c < 128 {
        if PIECE_CODES[c] != 0 {
            t[c] = 0x10 | PIECE_CODES[c];
        }
        c += 1;
    }
    let mut d = 1;
    while d <= 8 {
        t[(b'0' + d) as usize] = d << 4;
        d += 1;
    }
    t[b'/' as usize] = SLASH;
    t
};
const SLASH: u8 = 0x00;
const BAD: u8 = 0xff;

/// The occupancy and the men's codes (packed two a byte, in square order) of a well-formed
/// placement, in one pass without a branch per character; `None` for anything else, which
/// [`pack_fen`]'s checked reading then names.
fn placement_fast(placement: &[u8]) -> Option<(u64, [u8; 16])> {
    // A placement has at most 71 characters; longer text is left to the checked reader (and
    // no counter below can wrap).
    if placement.len() > 128 {
        return None;
    }
    // Each square's code in FEN order (a8 = 0 … h1 = 63); a character that is no piece
    // writes a 0 where it stands, which is empty or overwritten by the next man.
    let mut board = [0u8; 64];
    let (mut at, mut file, mut slashes) = (0u32, 0u32, 0u32);
    let mut occupancy = 0u64; // bit = FEN-order square
    let mut bad = false;
    for &c in placement {
        let t = PLACEMENT_CHARS[c as usize];
        let code = t & 0x0f;
        let is_slash = t == SLASH;
        bad |= t == BAD || (is_slash && file != 8);
        board[(at & 63) as usize] = code;
        occupancy |= u64::from(code != 0) << (at & 63);
        let advance = u32::from(t >> 4);
        at += advance;
        file = if is_slash { 0 } else { file + advance };
        slashes += u32::from(is_slash);
    }
    if bad || slashes != 7 || file != 8 || occupancy.count_ones() > 32 {
        return None;
    }
    // FEN order to squares from a1: ranks reversed (the byte order), so the square's FEN
    // index is `square ^ 56`; codes packed two a byte in square order.
    let occupancy = occupancy.swap_bytes();
    let mut codes = 0u128;
    let mut rest = occupancy;
    let mut shift = 0;
    while rest != 0 {
        let sq = rest.trailing_zeros();
        rest &= rest - 1;
        codes |= u128::from(board[(sq ^ 56) as usize]) << shift;
        shift += 4;
    }
    Some((occupancy, codes.to_le_bytes()))
}

fn piece_letter(code: u8) -> Option<u8> {
    let role = code & 7;
    if !(1..=6).contains(&role) || code > 15 {
        return None;
    }
    let upper = b"PNBRQK"[role as usize - 1];
    Some(if code & 8 != 0 {
        upper.to_ascii_lowercase()
    } else {
        upper
    })
}

/// Packs a FEN. The move counters may be left out (0 and 1 are taken then).
pub fn pack_fen(fen: &str) -> Result<PackedBoard, PackError> {
    let mut fields = fen.split(' ').filter(|f| !f.is_empty());
    let placement = fields.next().unwrap_or("");
    let mut out = [0u8; PACKED_BOARD_BYTES];
    if let Some((occupancy, codes)) = placement_fast(placement.as_bytes()) {
        out[..8].copy_from_slice(&occupancy.to_le_bytes());
        out[8..24].copy_from_slice(&codes);
    } else {
        let (occupancy, codes) = placement_checked(placement)?;
        out[..8].copy_from_slice(&occupancy.to_le_bytes());
        out[8..24].copy_from_slice(&codes);
    }
    pack_fields(fields, out)
}

/// [`placement_fast`] with a check per character: the error that names what is wrong.
fn placement_checked(placement: &str) -> Result<(u64, [u8; 16]), PackError> {
    // The placement runs from a8 to h1; men are collected per rank (files ascending) and the
    // ranks then packed from the first rank up, so the codes come out in square order.
    let mut ranks = [[0u8; 8]; 8]; // codes by rank index from the top, in file order
    let mut files = [0u8; 8]; // each rank's occupancy, bit = file
    let mut counts = [0usize; 8];
    let (mut rank, mut file, mut men) = (0usize, 0u32, 0u32);
    for &c in placement.as_bytes() {
        match c {
            b'/' => {
                if file != 8 {
                    return Err(PackError::Placement("a rank without 8 squares"));
                }
                rank += 1;
                file = 0;
                if rank > 7 {
                    return Err(PackError::Placement("more than 8 ranks"));
                }
            }
            b'1'..=b'8' => {
                file += (c - b'0') as u32;
                if file > 8 {
                    return Err(PackError::Placement("a rank without 8 squares"));
                }
            }
            _ => {
                let code = *PIECE_CODES.get(c as usize).unwrap_or(&0);
                if code == 0 {
                    return Err(PackError::Placement("not a piece letter"));
                }
                if file >= 8 {
                    return Err(PackError::Placement("a rank without 8 squares"));
                }
                men += 1;
                if men > 32 {
                    let rest = placement.bytes().filter(u8::is_ascii_alphabetic).count();
                    return Err(PackError::TooManyMen(rest as u32));
                }
                let n = counts[rank];
                ranks[rank][n] = code;
                files[rank] |= 1 << file;
                counts[rank] = n + 1;
                file += 1;
            }
        }
    }
    if rank != 7 || file != 8 {
        return Err(PackError::Placement("not 8 ranks of 8 squares"));
    }
    let mut codes = [0u8; 16];
    let mut occupancy = 0u64;
    let mut n = 0usize;
    for from_top in (0..8).rev() {
        occupancy |= (files[from_top] as u64) << (8 * (7 - from_top));
        for &code in &ranks[from_top][..counts[from_top]] {
            codes[n / 2] |= code << (4 * (n % 2));
            n += 1;
        }
    }
    Ok((occupancy, codes))
}

/// The fields after the placement into `out`.
fn pack_fields<'a>(
    mut fields: impl Iterator<Item = &'a str>,
    mut out: PackedBoard,
) -> Result<PackedBoard, PackError> {
    out[24] = match fields.next().map(str::as_bytes) {
        Some([b'w']) => 0,
        Some([b'b']) => 1,
        other => {
            let text = other.map(String::from_utf8_lossy).unwrap_or_default();
            return Err(PackError::SideToMove(text.into_owned()));
        }
    };
    let castling = fields.next().unwrap_or("-");
    let mut tokens = 0u32;
    if castling.as_bytes() != [b'-'] {
        if castling.len() > 4 {
            return Err(PackError::Castling(castling.to_string()));
        }
        for (i, c) in castling.bytes().enumerate() {
            let t = CASTLING_LETTERS
                .iter()
                .position(|&l| l == c)
                .ok_or_else(|| PackError::Castling(castling.to_string()))?;
            tokens |= (t as u32 + 1) << (5 * i);
        }
    }
    out[25..28].copy_from_slice(&tokens.to_le_bytes()[..3]);
    let ep = fields.next().unwrap_or("-");
    out[28] = match ep.as_bytes() {
        [b'-'] => 255,
        &[f @ b'a'..=b'h', r @ b'1'..=b'8'] => (r - b'1') * 8 + (f - b'a'),
        _ => return Err(PackError::EnPassant(ep.to_string())),
    };
    // Short runs of digits, read by hand (the general parser costs more than the rest of
    // the fields together); anything else goes to `parse` for its verdict.
    let counter = |text: Option<&str>, default: u64| -> Result<u64, PackError> {
        let Some(t) = text else { return Ok(default) };
        match t.as_bytes() {
            digits @ [_, ..] if digits.len() <= 6 && digits.iter().all(u8::is_ascii_digit) => {
                Ok(digits.iter().fold(0, |n, &d| n * 10 + u64::from(d - b'0')))
            }
            _ => t
                .parse::<u64>()
                .map_err(|_| PackError::Counter(t.to_string())),
        }
    };
    out[29] = counter(fields.next(), 0)?.min(255) as u8;
    let full = counter(fields.next(), 1)?.min(u16::MAX as u64) as u16;
    out[30..32].copy_from_slice(&full.to_le_bytes());
    Ok(out)
}

/// The men of a packed board as (square, code) in ascending square order, checked.
fn men_of(b: &PackedBoard) -> Result<impl Iterator<Item = (u8, u8)> + '_, UnpackError> {
    let occupancy = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
    if occupancy.count_ones() > 32 {
        return Err(UnpackError::TooManyMen);
    }
    let mut rest = occupancy;
    let mut n = 0usize;
    Ok(std::iter::from_fn(move || {
        if rest == 0 {
            return None;
        }
        let sq = rest.trailing_zeros() as u8;
        rest &= rest - 1;
        let code = (b[8 + n / 2] >> (4 * (n % 2))) & 15;
        n += 1;
        Some((sq, code))
    }))
}

/// Reads bytes as a packed board (a chunk's `board` cell).
pub fn from_bytes(bytes: &[u8]) -> Result<&PackedBoard, UnpackError> {
    bytes
        .try_into()
        .map_err(|_| UnpackError::Length(bytes.len()))
}

/// The FEN of a packed board: the text it was packed from, save for move counters beyond
/// the saturation limits.
pub fn unpack_fen(b: &PackedBoard) -> Result<String, UnpackError> {
    let mut letters = [0u8; 64];
    for (sq, code) in men_of(b)? {
        letters[sq as usize] = piece_letter(code).ok_or(UnpackError::Piece { code, square: sq })?;
    }
    let mut out = String::with_capacity(90);
    for rank in (0..8).rev() {
        let mut empty = 0u8;
        for file in 0..8 {
            match letters[rank * 8 + file] {
                0 => empty += 1,
                l => {
                    if empty > 0 {
                        out.push((b'0' + empty) as char);
                        empty = 0;
                    }
                    out.push(l as char);
                }
            }
        }
        if empty > 0 {
            out.push((b'0' + empty) as char);
        }
        if rank > 0 {
            out.push('/');
        }
    }
    if b[24] & !1 != 0 {
        return Err(UnpackError::Flags(b[24]));
    }
    out.push_str(if b[24] & 1 == 1 { " b " } else { " w " });
    let tokens = u32::from_le_bytes([b[25], b[26], b[27], 0]);
    if tokens == 0 {
        out.push('-');
    }
    // Tokens fill the low bits in order: after the first empty one, every bit is clear.
    let mut ended = false;
    for i in 0..5 {
        match ((tokens >> (5 * i)) & 31, ended || i == 4) {
            (0, _) => ended = true,
            (t @ 1..=20, false) => out.push(CASTLING_LETTERS[t as usize - 1] as char),
            (t, _) => return Err(UnpackError::Castling(t)),
        }
    }
    match b[28] {
        255 => out.push_str(" -"),
        sq @ 0..=63 => {
            out.push(' ');
            out.push((b'a' + sq % 8) as char);
            out.push((b'1' + sq / 8) as char);
        }
        other => return Err(UnpackError::EnPassant(other)),
    }
    let full = u16::from_le_bytes([b[30], b[31]]);
    out.push_str(&format!(" {} {full}", b[29]));
    Ok(out)
}

/// The board and side to move of a packed board, for feature extraction and the quiet
/// filters: no text is read.
pub fn board_of(b: &PackedBoard) -> Result<(Board, Color), UnpackError> {
    let mut by_role = ByRole::<Bitboard>::default();
    let mut by_color = ByColor::<Bitboard>::default();
    for (sq, code) in men_of(b)? {
        let role = Role::try_from(code & 7).map_err(|_| UnpackError::Piece { code, square: sq })?;
        let bit = Bitboard::from_square(Square::new(sq as u32));
        *by_role.get_mut(role) |= bit;
        *by_color.get_mut(Color::from_white(code & 8 == 0)) |= bit;
    }
    let board = Board::try_from_bitboards(by_role, by_color)
        .map_err(|_| UnpackError::Piece { code: 0, square: 0 })?;
    let turn = if b[24] & 1 == 1 {
        Color::Black
    } else {
        Color::White
    };
    Ok((board, turn))
}

/// The twelve piece planes of a packed board (index `6·colour + role`, White first, pawn …
/// king) and the side to move: [`board_of`] without building a shakmaty board, for the
/// material balance of validation rows.
pub fn planes_of(b: &PackedBoard) -> Result<([u64; 12], Color), UnpackError> {
    let (occupancy, turn) = checked_header(b)?;
    // Codes shifted out of one 128-bit word, each man's bit or-ed into the plane its code
    // names (every code is a piece: `checked_header`).
    let mut codes = u128::from_le_bytes(b[8..24].try_into().expect("16 bytes"));
    let mut planes = [0u64; 16];
    let mut rest = occupancy;
    while rest != 0 {
        let bit = rest & rest.wrapping_neg();
        rest ^= bit;
        planes[CODE_PLANES[(codes & 15) as usize] as usize] |= bit;
        codes >>= 4;
    }
    Ok((planes[..12].try_into().expect("12 planes"), turn))
}

/// Why a packed board gives no feature lists.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BoardFeaturesError {
    #[error("packed board: {0}")]
    Unpack(#[from] UnpackError),
    #[error(transparent)]
    Features(#[from] crate::features::FeatureError),
}

/// Both perspectives' features of a packed board, the side to move's appended to `first` and
/// the other side's to `second` ([`FeatureSetKind::active_pair_from_men`], squares flipped
/// a↔h with `mirror`), and the side to move: the loader's hot path, one pass over the men
/// straight from the occupancy and the codes, no planes or board built.
///
/// [`FeatureSetKind::active_pair_from_men`]: crate::features::FeatureSetKind::active_pair_from_men
pub fn active_pair(
    b: &PackedBoard,
    kind: crate::features::FeatureSetKind,
    mirror: bool,
    first: &mut Vec<i32>,
    second: &mut Vec<i32>,
) -> Result<Color, BoardFeaturesError> {
    let turn = men_and_turn(b).and_then(|(men, turn)| {
        kind.active_pair_from_men(&men, turn, mirror, first, second)?;
        Ok(turn)
    })?;
    Ok(turn)
}

/// A packed board's men, laid out for the feature pass, and its side to move.
fn men_and_turn(b: &PackedBoard) -> Result<(Men, Color), BoardFeaturesError> {
    let (occupancy, turn) = checked_header(b)?;
    let mut squares = [0u8; MAX_MEN as usize];
    let mut rest = occupancy;
    for sq in squares.iter_mut().take(occupancy.count_ones() as usize) {
        *sq = rest.trailing_zeros() as u8;
        rest &= rest.wrapping_sub(1);
    }
    // Eight nibbles spread to eight bytes at once: halves, then quarters, then nibbles apart.
    let spread = |x: u32| {
        let x = u64::from(x);
        let x = (x | (x << 16)) & 0x0000_ffff_0000_ffff;
        let x = (x | (x << 8)) & 0x00ff_00ff_00ff_00ff;
        (x | (x << 4)) & 0x0f0f_0f0f_0f0f_0f0f
    };
    let mut codes = [0u8; MAX_MEN as usize];
    for (out, word) in codes.chunks_exact_mut(8).zip(b[8..24].chunks_exact(4)) {
        let x = u32::from_le_bytes(word.try_into().expect("4 bytes"));
        out.copy_from_slice(&spread(x).to_le_bytes());
    }
    let men = Men::from_parts(squares, codes, occupancy.count_ones() as usize);
    Ok((men, turn))
}

/// The occupancy and side to move of a packed board whose men are at most 32 and all have a
/// piece code: what the feature passes rely on.
#[inline(always)]
fn checked_header(b: &PackedBoard) -> Result<(u64, Color), UnpackError> {
    let occupancy = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
    let men = occupancy.count_ones();
    if men > 32 {
        return Err(UnpackError::TooManyMen);
    }
    let codes = u128::from_le_bytes(b[8..24].try_into().expect("16 bytes"));
    if has_bad_code(codes, men) {
        // Slow path, for the error message: the first man whose code is no piece.
        let (square, code) = men_of(b)?
            .find(|&(_, code)| !(1..=6).contains(&(code & 7)))
            .expect("a code is no piece");
        return Err(UnpackError::Piece { code, square });
    }
    let turn = if b[24] & 1 == 1 {
        Color::Black
    } else {
        Color::White
    };
    Ok((occupancy, turn))
}

/// Whether any of the first `men` 4-bit codes is no piece (role bits 0 or 7), all codes at
/// once: a few word operations instead of a test per man.
#[inline(always)]
fn has_bad_code(codes: u128, men: u32) -> bool {
    const LOW: u128 = 0x1111_1111_1111_1111_1111_1111_1111_1111;
    let used = if men >= 32 {
        u128::MAX
    } else {
        (1u128 << (4 * men)) - 1
    };
    let role = codes & (LOW * 7);
    // Bit 0 of each nibble: all three role bits set, or none of them.
    let all = role & (role >> 1) & (role >> 2);
    let none = !(role | (role >> 1) | (role >> 2));
    (all | none) & LOW & used != 0
}

/// The plane of each 4-bit piece code (`6·colour + role − 1`); codes that are no piece (never
/// read: `checked_header` refuses them) map past the twelve.
const CODE_PLANES: [u8; 16] = [12, 0, 1, 2, 3, 4, 5, 13, 14, 6, 7, 8, 9, 10, 11, 15];

/// The en-passant square a packed board records, if any.
pub fn ep_square(b: &PackedBoard) -> Option<Square> {
    (b[28] < 64).then(|| Square::new(b[28] as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FENS: &[&str] = &[
        "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
        "rnbqkbnr/pp1ppppp/8/2p5/4P3/8/PPPP1PPP/RNBQKBNR w KQkq c6 0 2",
        "8/8/8/8/8/8/8/K6k b - - 99 300",
        // Chess960: Shredder and X-FEN letters print back as written.
        "bqnb1rkr/pp3ppp/3ppn2/2p5/5P2/P2P4/NPP1P1PP/BQ1BNRKR w HFhf - 2 9",
        "rk2r3/8/8/8/8/8/8/RK2R3 w Aa - 0 1",
        "r3k2r/8/8/8/8/8/8/R3K2R b Kq - 0 70000",
    ];

    #[test]
    fn fens_round_trip() {
        for fen in FENS {
            let packed = pack_fen(fen).unwrap();
            let back = unpack_fen(&packed).unwrap();
            if fen.ends_with("70000") {
                assert_eq!(back, fen.replace("70000", "65535"));
            } else {
                assert_eq!(&back, fen);
            }
        }
    }

    #[test]
    fn boards_equal_shakmaty_s() {
        for fen in FENS {
            let setup = fen.parse::<shakmaty::fen::Fen>().unwrap().into_setup();
            let (board, turn) = board_of(&pack_fen(fen).unwrap()).unwrap();
            assert_eq!(board, setup.board, "{fen}");
            assert_eq!(turn, setup.turn, "{fen}");
            assert_eq!(ep_square(&pack_fen(fen).unwrap()), setup.ep_square);
        }
    }

    #[test]
    fn garbage_is_refused_with_the_reason() {
        let cases: &[(&str, &str)] = &[
            ("", "piece placement"),
            ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP w KQkq - 0 1", "8 ranks"),
            (
                "rnbqkbnr/ppppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w - - 0 1",
                "8 squares",
            ),
            (
                "rnbqkbnr/pppppppp/9/8/8/8/PPPPPPPP/RNBQKBNR w - - 0 1",
                "piece letter",
            ),
            (
                "rnbqkbnr/pppppppx/8/8/8/8/PPPPPPPP/RNBQKBNR w - - 0 1",
                "piece letter",
            ),
            (
                "qqqqqqqq/qqqqqqqq/qqqqqqqq/8/8/qqqqqqqq/qqqqqqqq/K6k w - - 0 1",
                "42 men",
            ),
            ("8/8/8/8/8/8/8/K6k x - - 0 1", "side to move"),
            ("8/8/8/8/8/8/8/K6k w KQkqK - 0 1", "castling"),
            ("8/8/8/8/8/8/8/K6k w Z - 0 1", "castling"),
            ("8/8/8/8/8/8/8/K6k w - e9 0 1", "en-passant"),
            ("8/8/8/8/8/8/8/K6k w - - x 1", "counter"),
        ];
        for (fen, want) in cases {
            let e = pack_fen(fen).unwrap_err().to_string();
            assert!(e.contains(want), "{fen}: {e}");
        }
        // Damaged bytes are refused too, never a panic.
        assert!(from_bytes(&[0; 31]).is_err());
        let mut b = pack_fen(FENS[0]).unwrap();
        b[8] = 0x77; // code 7 is not a piece
        assert!(unpack_fen(&b).is_err());
        assert!(board_of(&b).is_err());
        // The loader's path names the first man whose code is no piece (a1: low nibble 7).
        assert_eq!(
            planes_of(&b),
            Err(UnpackError::Piece { code: 7, square: 0 })
        );
        for code in [0u8, 7, 8, 15] {
            let mut b = pack_fen(FENS[0]).unwrap();
            b[23] = (b[23] & 0x0f) | (code << 4); // the last man, h8
            assert_eq!(
                planes_of(&b),
                Err(UnpackError::Piece { code, square: 63 }),
                "code {code}"
            );
        }
        let mut b = pack_fen(FENS[0]).unwrap();
        b[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(unpack_fen(&b), Err(UnpackError::TooManyMen));
        let mut b = pack_fen(FENS[0]).unwrap();
        b[28] = 64;
        assert!(unpack_fen(&b).is_err());
        // Castling tokens after an empty one, bits beyond the four tokens, stray flags.
        for (byte, value) in [(25, 0b1110_0000), (27, 0b0001_0000), (24, 0b10)] {
            let mut b = pack_fen(FENS[0]).unwrap();
            b[25..28].fill(0);
            b[byte] |= value;
            assert!(unpack_fen(&b).is_err(), "byte {byte} = {value:#b}");
        }
    }

    /// The loader's features from packed boards equal, list for list and in order, those of
    /// the same pass over the men of the board shakmaty parses from the FEN (the FEN loader's
    /// path), and as sets those of `active_features`, for every feature set, mirrored or not,
    /// on positions of random games.
    #[test]
    fn features_from_packed_boards_equal_those_from_the_board() {
        use crate::features::FeatureSetKind;
        let mut positions = 0;
        for seed in 0..40 {
            let mirror = seed % 2 == 1;
            for played in crate::random_games::random_game(seed, 120) {
                let setup = played
                    .fen
                    .parse::<shakmaty::fen::Fen>()
                    .unwrap()
                    .into_setup();
                let packed = pack_fen(&played.fen).unwrap();
                let mut flipped = setup.board.clone();
                if mirror {
                    flipped.flip_horizontal();
                }
                for kind in FeatureSetKind::ALL {
                    let (mut stm, mut nstm) = (vec![7], vec![7]); // appended to, not cleared
                    let turn = active_pair(&packed, kind, mirror, &mut stm, &mut nstm).unwrap();
                    assert_eq!(turn, setup.turn);
                    // The portable pass and (where the CPU has it) the AVX2 one agree.
                    let (men, _) = men_and_turn(&packed).unwrap();
                    let (mut portable_stm, mut portable_nstm) = (vec![7], vec![7]);
                    kind.active_pair_from_men_portable(
                        &men,
                        turn,
                        mirror,
                        &mut portable_stm,
                        &mut portable_nstm,
                    )
                    .unwrap();
                    assert_eq!((&stm, &nstm), (&portable_stm, &portable_nstm), "{kind}");
                    let (mut board_stm, mut board_nstm) = (vec![7], vec![7]);
                    let men = Men::of_board(&setup.board).unwrap();
                    assert_eq!(men, men_and_turn(&packed).unwrap().0);
                    kind.active_pair_from_men(&men, turn, mirror, &mut board_stm, &mut board_nstm)
                        .unwrap();
                    assert_eq!(stm, board_stm, "{kind} {}", played.fen);
                    assert_eq!(nstm, board_nstm, "{kind} {}", played.fen);
                    for (got, perspective) in [(&stm, turn), (&nstm, turn.other())] {
                        let mut want = vec![7];
                        kind.active_features(&flipped, perspective, &mut want)
                            .unwrap();
                        let mut want: Vec<i32> = want.into_iter().map(|f| f as i32).collect();
                        let mut got = got.clone();
                        got.sort_unstable();
                        want.sort_unstable();
                        assert_eq!(got, want, "{kind} {perspective:?} {}", played.fen);
                    }
                }
                positions += 1;
            }
        }
        assert!(positions > 1000, "{positions}");
    }

    /// Damaged boards give the error that names what is wrong, and leave the lists as they
    /// were.
    #[test]
    fn features_of_damaged_boards_are_refused() {
        use crate::features::{FeatureError, FeatureSetKind};
        let kind = FeatureSetKind::HalfKp;
        let refused = |b: &PackedBoard| {
            let (mut stm, mut nstm) = (vec![1, 2], vec![3]);
            let e = active_pair(b, kind, false, &mut stm, &mut nstm).unwrap_err();
            assert_eq!((stm, nstm), (vec![1, 2], vec![3]));
            if let Ok((men, turn)) = men_and_turn(b) {
                let (mut stm, mut nstm) = (vec![1, 2], vec![3]);
                let portable = kind
                    .active_pair_from_men_portable(&men, turn, false, &mut stm, &mut nstm)
                    .unwrap_err();
                assert_eq!((stm, nstm), (vec![1, 2], vec![3]));
                assert_eq!(e, portable.into());
            }
            e
        };
        for (square, byte, shift) in [(0u8, 8, 0), (63, 23, 4)] {
            for code in [0u8, 7, 8, 15] {
                let mut b = pack_fen(FENS[0]).unwrap();
                b[byte] = (b[byte] & !(15 << shift)) | (code << shift);
                assert_eq!(
                    refused(&b),
                    BoardFeaturesError::Unpack(UnpackError::Piece { code, square })
                );
            }
        }
        let mut b = pack_fen(FENS[0]).unwrap();
        b[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(refused(&b), UnpackError::TooManyMen.into());
        // No white king: the king-relative sets have no list, all768 has one.
        let b = pack_fen("8/8/8/8/8/8/8/7k w - - 0 1").unwrap();
        assert_eq!(refused(&b), FeatureError::NoKing(Color::White).into());
        let (mut stm, mut nstm) = (vec![], vec![]);
        active_pair(&b, FeatureSetKind::All768, false, &mut stm, &mut nstm).unwrap();
        assert_eq!((stm.len(), nstm.len()), (1, 1));
        // More men than a board holds, from elsewhere than a packed board: refused.
        let men = (0..64).map(|sq| (sq, 1)).chain((0..64).map(|sq| (sq, 9)));
        let e = Men::new(men).unwrap_err();
        assert_eq!(e, FeatureError::TooManyMen);
        assert!(e.to_string().contains("more than 32 men"), "{e}");
        let board = Board::from_ascii_board_fen(b"pppppppp/pppppppp/8/8/8/8/PPPPPPPP/PPPPPPPP")
            .unwrap()
            .into_iter()
            .chain([(Square::A3, shakmaty::Piece::from_char('K').unwrap())])
            .collect::<Board>();
        assert_eq!(Men::of_board(&board), Err(FeatureError::TooManyMen));
    }

    /// Garbage boards (random bytes, and random men under valid headers) never panic, and the
    /// AVX2 pass (where the CPU has it) and the portable pass agree on every one, errors
    /// included, leaving the lists untouched on an error.
    #[test]
    fn random_boards_are_read_the_same_by_both_passes_or_refused() {
        use crate::features::FeatureSetKind;
        let mut rng = crate::random_games::SplitMix(11);
        let (mut accepted, mut refused) = (0, 0);
        for round in 0..60_000 {
            let mut b = [0u8; 32];
            for chunk in b.chunks_exact_mut(8) {
                chunk.copy_from_slice(&rng.next_u64().to_le_bytes());
            }
            if round % 2 == 0 {
                // At most 32 men, with codes that are mostly pieces.
                let occupancy = rng.next_u64() & rng.next_u64();
                let occupancy = if occupancy.count_ones() > 32 {
                    occupancy & 0xffff_ffff
                } else {
                    occupancy
                };
                b[..8].copy_from_slice(&occupancy.to_le_bytes());
                for byte in &mut b[8..24] {
                    let code =
                        |r: u64| [1u8, 2, 3, 4, 5, 6, 9, 10, 11, 12, 13, 14][(r % 12) as usize];
                    *byte = code(rng.next_u64()) | (code(rng.next_u64()) << 4);
                }
            }
            let kind = FeatureSetKind::ALL[round % 3];
            let mirror = round % 5 == 0;
            let (mut stm, mut nstm) = (vec![-1], vec![-2]);
            let got = active_pair(&b, kind, mirror, &mut stm, &mut nstm);
            match men_and_turn(&b) {
                Ok((men, turn)) => {
                    let (mut want_stm, mut want_nstm) = (vec![-1], vec![-2]);
                    let want = kind
                        .active_pair_from_men_portable(
                            &men,
                            turn,
                            mirror,
                            &mut want_stm,
                            &mut want_nstm,
                        )
                        .map(|()| turn)
                        .map_err(BoardFeaturesError::from);
                    assert_eq!(got, want, "{kind} {b:?}");
                    assert_eq!((&stm, &nstm), (&want_stm, &want_nstm), "{kind} {b:?}");
                }
                Err(e) => assert_eq!(got, Err(e)),
            }
            match got {
                Ok(_) => accepted += 1,
                Err(_) => {
                    assert_eq!((stm, nstm), (vec![-1], vec![-2]));
                    refused += 1;
                }
            }
        }
        assert!(accepted > 1000 && refused > 1000, "{accepted} {refused}");
    }

    /// The one-pass placement reader agrees with the checked one on every position of random
    /// games, and on those placements with one character replaced it either agrees or leaves
    /// the placement to the checked reader (never a different board).
    #[test]
    fn the_fast_placement_reader_agrees_with_the_checked_one() {
        let mut rng = crate::random_games::SplitMix(5);
        let (mut fast, mut declined) = (0, 0);
        for seed in 0..30 {
            for played in crate::random_games::random_game(seed, 120) {
                let placement = played.fen.split(' ').next().unwrap().to_string();
                assert_eq!(
                    placement_fast(placement.as_bytes()),
                    Some(placement_checked(&placement).unwrap()),
                    "{placement}"
                );
                let mut bytes = placement.into_bytes();
                let at = (rng.next_u64() % bytes.len() as u64) as usize;
                bytes[at] = b"pK/18x9 "[(rng.next_u64() % 8) as usize];
                match placement_fast(&bytes) {
                    Some(got) => {
                        fast += 1;
                        let text = String::from_utf8(bytes).unwrap();
                        assert_eq!(Ok(got), placement_checked(&text), "{text}");
                    }
                    None => declined += 1,
                }
            }
        }
        assert!(fast > 100 && declined > 100, "{fast} {declined}");
        // Long runs of one letter: no overflow, no panic.
        assert_eq!(placement_fast(&[b'p'; 1000]), None);
        assert_eq!(placement_fast(&[b'8'; 1000]), None);
    }
}
