//! Fast FEN and UCI writers for shakmaty positions, for ingest paths that emit one FEN per
//! row (millions per second). They produce exactly what shakmaty's own `Fen` and `UciMove`
//! display (en passant square only when a legal capture exists), tested below.

use shakmaty::fen::Fen;
use shakmaty::uci::UciMove;
use shakmaty::{CastlingMode, Chess, Color, EnPassantMode, Move, Position, Role, Square};

const PIECE_CHARS: [[u8; 6]; 2] = [*b"PNBRQK", *b"pnbrqk"];
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
    let board = pos.board();
    let mut squares = [0u8; 64];
    for (c, color) in [Color::White, Color::Black].into_iter().enumerate() {
        let ours = board.by_color(color);
        for (r, role) in ROLES.into_iter().enumerate() {
            for sq in board.by_role(role) & ours {
                squares[sq as usize] = PIECE_CHARS[c][r];
            }
        }
    }
    let rights = castles.castling_rights();
    let mut castling = [0u8; 4];
    let mut n = 0;
    for (sq, ch) in [
        (Square::H1, b'K'),
        (Square::A1, b'Q'),
        (Square::H8, b'k'),
        (Square::A8, b'q'),
    ] {
        if rights.contains(sq) {
            castling[n] = ch;
            n += 1;
        }
    }
    let fields = FenFields {
        squares: &squares,
        white_to_move: pos.turn() == Color::White,
        castling: &castling[..n],
        en_passant: pos.ep_square(EnPassantMode::Legal).map(|sq| sq as u8),
        halfmoves: pos.halfmoves(),
        fullmoves: pos.fullmoves().get(),
    };
    fields.write(out);
}

/// A position's FEN, field by field, for writers that hold positions of other libraries
/// (sfbinpack's binpack positions) as well as shakmaty's.
pub struct FenFields<'a> {
    /// Piece letters (`PNBRQK` / `pnbrqk`) by square, a1 = 0 … h8 = 63; 0 for empty.
    pub squares: &'a [u8; 64],
    pub white_to_move: bool,
    /// Castling letters in FEN order (`KQkq` subset); empty for `-`.
    pub castling: &'a [u8],
    /// The en passant square (0..64), if the FEN is to show one.
    pub en_passant: Option<u8>,
    pub halfmoves: u32,
    pub fullmoves: u32,
}

impl FenFields<'_> {
    /// Appends the FEN. Built in a stack buffer and appended once: per-byte `Vec::push`
    /// dominated the cost.
    pub fn write(&self, out: &mut Vec<u8>) {
        let mut buf = [0u8; 96];
        let mut n = 0usize;
        macro_rules! put {
            ($b:expr) => {{
                buf[n] = $b;
                n += 1;
            }};
        }
        for rank in (0..8usize).rev() {
            let mut empty = 0u8;
            for &ch in &self.squares[rank * 8..rank * 8 + 8] {
                if ch == 0 {
                    empty += 1;
                } else {
                    if empty > 0 {
                        put!(b'0' + empty);
                        empty = 0;
                    }
                    put!(ch);
                }
            }
            if empty > 0 {
                put!(b'0' + empty);
            }
            if rank > 0 {
                put!(b'/');
            }
        }
        put!(b' ');
        put!(if self.white_to_move { b'w' } else { b'b' });
        put!(b' ');
        if self.castling.is_empty() {
            put!(b'-');
        }
        for &c in self.castling {
            put!(c);
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
        out.extend_from_slice(&buf[..n]);
        push_u32(self.halfmoves, out);
        out.push(b' ');
        push_u32(self.fullmoves, out);
    }
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

/// Appends `v` in decimal without allocating.
pub fn push_u32(mut v: u32, out: &mut Vec<u8>) {
    let mut digits = [0u8; 10];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
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
