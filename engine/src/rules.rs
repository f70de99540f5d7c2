//! Legality checks on positions and moves given as text (FEN, UCI).

use shakmaty::fen::Fen;
use shakmaty::uci::UciMove;
use shakmaty::{CastlingMode, Chess};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RulesError {
    #[error("unreadable FEN {fen:?}: {reason}")]
    Fen { fen: String, reason: String },
    #[error("illegal position {fen:?}: {reason}")]
    Position { fen: String, reason: String },
    #[error("unreadable UCI move {uci:?}")]
    Uci { uci: String },
    #[error("move {uci} is illegal in {fen}")]
    IllegalMove { fen: String, uci: String },
}

/// Parses a FEN into a legal standard-chess position.
///
/// Lenient where real data is sloppy but harmless (an en-passant square nobody can capture
/// on, castling rights without the rook), strict on what makes a position impossible (kings,
/// pawns on the back rank, the side not to move in check).
// shakmaty hands the rejected position back inside its error; that is what makes it large.
#[allow(clippy::result_large_err)]
pub fn parse_position(fen: &str) -> Result<Chess, RulesError> {
    parse_in_mode(fen, |_| CastlingMode::Standard)
}

/// [`parse_position`] that also takes Chess960 rows (X-FEN castling rights), as ingest does.
#[allow(clippy::result_large_err)]
pub fn parse_any_position(fen: &str) -> Result<Chess, RulesError> {
    parse_in_mode(fen, CastlingMode::detect)
}

#[allow(clippy::result_large_err)]
fn parse_in_mode(
    fen: &str,
    mode: impl Fn(&shakmaty::Setup) -> CastlingMode,
) -> Result<Chess, RulesError> {
    let parsed = Fen::from_ascii(fen.as_bytes()).map_err(|e| RulesError::Fen {
        fen: fen.to_string(),
        reason: e.to_string(),
    })?;
    let mode = mode(parsed.as_setup());
    parsed
        .into_position::<Chess>(mode)
        .or_else(|e| e.ignore_invalid_ep_square())
        .or_else(|e| e.ignore_invalid_castling_rights())
        .map_err(|e| RulesError::Position {
            fen: fen.to_string(),
            reason: e.to_string(),
        })
}

/// Checks that `uci` (standard UCI, castling as king two squares) is legal in `fen`.
pub fn check_move(fen: &str, uci: &str) -> Result<(), RulesError> {
    let pos = parse_position(fen)?;
    let m: UciMove = uci.parse().map_err(|_| RulesError::Uci {
        uci: uci.to_string(),
    })?;
    m.to_move(&pos).map_err(|_| RulesError::IllegalMove {
        fen: fen.to_string(),
        uci: uci.to_string(),
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const START: &str = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1";

    #[test]
    fn legal_and_illegal_moves() {
        assert!(check_move(START, "e2e4").is_ok());
        assert!(matches!(
            check_move(START, "e2e5"),
            Err(RulesError::IllegalMove { .. })
        ));
        assert!(matches!(
            check_move(START, "zz"),
            Err(RulesError::Uci { .. })
        ));
        let castle = "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1";
        assert!(check_move(castle, "e1g1").is_ok());
        assert!(check_move(castle, "e1c1").is_ok());
    }

    #[test]
    fn impossible_positions_are_rejected() {
        // No white king.
        let e = parse_position("8/8/8/8/8/8/8/k7 w - - 0 1").unwrap_err();
        assert!(matches!(e, RulesError::Position { .. }), "{e}");
        assert!(matches!(
            parse_position("not a fen"),
            Err(RulesError::Fen { .. })
        ));
        // Stale en-passant square is tolerated.
        assert!(parse_position("4k3/8/8/8/8/8/8/4K3 w - e6 0 1").is_ok());
    }
}

/// What the quiet-position filters need to know about a position and its move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MoveFacts {
    /// The side to move is in check.
    pub in_check: bool,
    /// The move takes a piece (en passant included).
    pub capture: bool,
    pub promotion: bool,
}

/// Facts about `uci` played in `fen`; errors when either is unreadable or the move illegal.
/// Takes what PGN ingest writes too: Chess960 rows (X-FEN castling rights, king takes rook)
/// and null moves (`0000`: no capture, no promotion).
pub fn move_facts(fen: &str, uci: &str) -> Result<MoveFacts, RulesError> {
    let pos = parse_in_mode(fen, CastlingMode::detect)?;
    let m: UciMove = uci.parse().map_err(|_| RulesError::Uci {
        uci: uci.to_string(),
    })?;
    if m == UciMove::Null {
        return Ok(MoveFacts {
            in_check: shakmaty::Position::is_check(&pos),
            capture: false,
            promotion: false,
        });
    }
    let m = m.to_move(&pos).map_err(|_| RulesError::IllegalMove {
        fen: fen.to_string(),
        uci: uci.to_string(),
    })?;
    Ok(MoveFacts {
        in_check: shakmaty::Position::is_check(&pos),
        capture: m.is_capture(),
        promotion: m.is_promotion(),
    })
}

/// [`move_facts`] on a board already unpacked (a shuffle chunk's packed board): no FEN is
/// parsed and the move is not checked for legality (the dataset's ingest did that). A capture
/// is a move onto an opponent's man or a pawn changing file (en passant); castling, written
/// either way, lands on an empty square or the mover's own rook, so it is never one.
pub fn move_facts_on_board(
    board: &shakmaty::Board,
    turn: shakmaty::Color,
    uci: &str,
) -> Result<MoveFacts, RulesError> {
    let unreadable = || RulesError::Uci {
        uci: uci.to_string(),
    };
    let in_check = board
        .king_of(turn)
        .is_some_and(|k| board.attacks_to(k, turn.other(), board.occupied()).any());
    match uci.parse::<UciMove>().map_err(|_| unreadable())? {
        UciMove::Null => Ok(MoveFacts {
            in_check,
            capture: false,
            promotion: false,
        }),
        UciMove::Normal {
            from,
            to,
            promotion,
        } => {
            let pawn_sideways =
                board.role_at(from) == Some(shakmaty::Role::Pawn) && from.file() != to.file();
            Ok(MoveFacts {
                in_check,
                capture: board.color_at(to) == Some(turn.other()) || pawn_sideways,
                promotion: promotion.is_some(),
            })
        }
        UciMove::Put { .. } => Err(unreadable()),
    }
}

#[cfg(test)]
mod facts_tests {
    use super::*;

    const START_FEN: &str = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1";

    #[test]
    fn checks_captures_promotions_and_en_passant() {
        // Quiet developing move.
        let f = move_facts(
            "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
            "g1f3",
        )
        .unwrap();
        assert_eq!(
            f,
            MoveFacts {
                in_check: false,
                capture: false,
                promotion: false
            }
        );
        // In check (Scholar's-mate style), king steps away.
        let f = move_facts(
            "rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3",
            "e1f2",
        );
        assert!(f.is_err(), "f2 is attacked: illegal");
        let f = move_facts("4k3/8/8/8/8/8/3q4/4K3 w - - 0 1", "e1d2").unwrap();
        assert!(f.in_check && f.capture && !f.promotion);
        // En passant is a capture.
        let f = move_facts("4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 2", "e5d6").unwrap();
        assert!(f.capture && !f.in_check);
        // Promotion without capture.
        let f = move_facts("4k3/P7/8/8/8/8/8/4K3 w - - 0 1", "a7a8q").unwrap();
        assert!(f.promotion && !f.capture);
        // PGN ingest rows: a null move, and Chess960 castling (X-FEN rights, king takes rook).
        let f = move_facts(START_FEN, "0000").unwrap();
        assert!(!f.in_check && !f.capture && !f.promotion);
        let chess960 = "bqnb1rkr/pp3ppp/3ppn2/2p5/5P2/P2P4/NPP1P1PP/BQ1BNRKR w KQkq - 2 9";
        assert!(
            move_facts(chess960, "g1h1").is_err(),
            "f1 is taken: illegal"
        );
        let chess960 = "bqnbrk1r/pp3ppp/3ppn2/2p5/5P2/P2P4/NPP1P1PP/BQ1BRK1R w HEhe - 2 9";
        let f = move_facts(chess960, "f1h1").unwrap();
        assert!(!f.in_check && !f.capture && !f.promotion);
        // Standard castling is still the king's two-square move.
        let castle = "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1";
        assert!(!move_facts(castle, "e1g1").unwrap().capture);
    }

    /// On every legal move of positions with checks, captures, en passant, promotions and
    /// castling both ways, the packed board's facts equal the FEN's.
    #[test]
    fn facts_on_a_packed_board_equal_those_from_the_fen() {
        use shakmaty::Position;
        let fens = [
            START_FEN,
            "4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 2",
            "4k3/8/8/8/8/8/3q4/4K3 w - - 0 1",
            "r3k2r/pPp2ppp/8/3Pp3/8/8/P1P2PpP/R3K2R w KQkq e6 0 1",
            "r3k2r/pPp2ppp/8/3Pp3/8/8/P1P2PpP/R3K2R b KQkq - 0 1",
            "bqnbrk1r/pp3ppp/3ppn2/2p5/5P2/P2P4/NPP1P1PP/BQ1BRK1R w HEhe - 2 9",
        ];
        let mut moves = 0;
        for fen in fens {
            let pos = parse_in_mode(fen, CastlingMode::detect).unwrap();
            let packed = crate::packed_board::pack_fen(fen).unwrap();
            let (board, turn) = crate::packed_board::board_of(&packed).unwrap();
            let mode = pos.castles().mode();
            for m in pos.legal_moves() {
                let uci = m.to_uci(mode).to_string();
                assert_eq!(
                    move_facts_on_board(&board, turn, &uci).unwrap(),
                    move_facts(fen, &uci).unwrap(),
                    "{fen} {uci}"
                );
                moves += 1;
            }
        }
        assert!(moves > 100, "{moves}");
        assert!(
            move_facts_on_board(&shakmaty::Board::new(), shakmaty::Color::White, "junk").is_err()
        );
    }
}
