//! Score units: conversions into Stockfish's internal units, the unit of the lake's `score`
//! column (binpack files already use it; everything else is converted once, at ingest).
//!
//! Stockfish prints UCI centipawns normalized so that +100 cp means a 50 % chance to win:
//! `cp = 100 · v / a(material)` (`UCIEngine::to_cp` in Stockfish 17's `src/uci.cpp`), where
//! `a` comes from its published win-rate model (github.com/official-stockfish/WDL_model). So
//! a centipawn value from an engine that uses this convention (Lichess's analysis does) is
//! turned back into internal units with `v = cp · a(material) / 100`.

use shakmaty::{Board, Role};

/// Stockfish's `VALUE_MATE`: a mate on the board, from the loser's side.
pub const VALUE_MATE: i32 = 32000;
/// Stockfish's `MAX_PLY`.
pub const MAX_PLY: i32 = 246;
pub const VALUE_MATE_IN_MAX_PLY: i32 = VALUE_MATE - MAX_PLY;
/// Below this, scores are evaluations; above, tablebase wins and mates.
pub const VALUE_TB_WIN_IN_MAX_PLY: i32 = VALUE_MATE_IN_MAX_PLY - 1 - MAX_PLY;
/// Largest evaluation (not a mate) a converted score may take.
pub const MAX_EVAL: i32 = VALUE_TB_WIN_IN_MAX_PLY - 1;

/// Win-rate model coefficients of Stockfish 17 (`win_rate_params` in `src/uci.cpp`):
/// `a(m) = ((as0·m + as1)·m + as2)·m + as3` with `m = clamp(material, 17, 78) / 58`.
const WIN_RATE_AS: [f64; 4] = [-37.45051876, 121.19101539, -132.78783573, 420.70576692];
const WIN_RATE_BS: [f64; 4] = [90.26261072, -137.26549898, 71.10130540, 51.35259597];

/// The material count of the win-rate model: pawns 1, knights and bishops 3, rooks 5,
/// queens 9, both sides together.
pub fn material(board: &Board) -> i32 {
    let count = |role| board.by_role(role).count() as i32;
    count(Role::Pawn)
        + 3 * count(Role::Knight)
        + 3 * count(Role::Bishop)
        + 5 * count(Role::Rook)
        + 9 * count(Role::Queen)
}

fn poly(c: &[f64; 4], m: f64) -> f64 {
    ((c[0] * m + c[1]) * m + c[2]) * m + c[3]
}

/// The model's `(a, b)`: the internal value with a 50 % win rate, and the spread.
pub fn win_rate_params(material: i32) -> (f64, f64) {
    let m = material.clamp(17, 78) as f64 / 58.0;
    (poly(&WIN_RATE_AS, m), poly(&WIN_RATE_BS, m))
}

/// Win probability (0..1) of an internal value for the side it belongs to.
pub fn win_rate(value: i32, material: i32) -> f64 {
    let (a, b) = win_rate_params(material);
    1.0 / (1.0 + ((a - value as f64) / b).exp())
}

/// UCI centipawns (normalized, +100 = 50 % win) to internal units, rounded, clamped to the
/// evaluation range so a huge engine score never lands in the mate range.
pub fn centipawns_to_internal(cp: f64, material: i32) -> i16 {
    let (a, _) = win_rate_params(material);
    let v = (cp * a / 100.0).round();
    v.clamp(-MAX_EVAL as f64, MAX_EVAL as f64) as i16
}

/// Internal units to UCI centipawns (Stockfish's `to_cp`).
pub fn internal_to_centipawns(value: i32, material: i32) -> f64 {
    let (a, _) = win_rate_params(material);
    100.0 * value as f64 / a
}

/// A mate announced in full moves from the side to move's point of view: `moves > 0` means
/// the side to move mates in `moves` (mate in `2·moves − 1` plies), `moves < 0` means it is
/// mated in `-moves` (`2·|moves|` plies), `0` means it is mated on the board. Stockfish's
/// `mate_in(ply)` / `mated_in(ply)` values.
pub fn mate_to_internal(moves: i32) -> i16 {
    // In i64: 2 × i32::MIN does not fit an i32.
    let moves = moves as i64;
    let plies = if moves > 0 { 2 * moves - 1 } else { -2 * moves };
    let plies = plies.min(MAX_PLY as i64) as i32;
    let v = VALUE_MATE - plies;
    (if moves > 0 { v } else { -v }) as i16
}

#[cfg(test)]
mod tests {
    use super::*;
    use shakmaty::{Chess, Position};

    #[test]
    fn mates_of_any_length_saturate_without_overflow() {
        assert_eq!(mate_to_internal(i32::MAX), mate_to_internal(124));
        assert_eq!(mate_to_internal(i32::MIN), mate_to_internal(-123));
        assert_eq!(mate_to_internal(1), (VALUE_MATE - 1) as i16);
    }

    #[test]
    fn start_position_material_and_pawn_value() {
        let board = Chess::default().board().clone();
        assert_eq!(material(&board), 78);
        // At the anchor (material 58) a is the sum of the coefficients: 100 cp ≈ 372 units.
        let (a, _) = win_rate_params(58);
        assert!((a - WIN_RATE_AS.iter().sum::<f64>()).abs() < 1e-9);
        assert_eq!(centipawns_to_internal(100.0, 58), 372);
        // +100 cp is a 50 % win rate by construction, whatever the material.
        for m in [17, 40, 58, 78] {
            let v = centipawns_to_internal(100.0, m) as i32;
            assert!((win_rate(v, m) - 0.5).abs() < 0.01, "material {m}");
        }
    }

    #[test]
    fn round_trip_and_clamping() {
        for cp in [-1500.0, -37.0, 0.0, 12.0, 250.0] {
            let v = centipawns_to_internal(cp, 40);
            assert!((internal_to_centipawns(v as i32, 40) - cp).abs() < 0.5);
        }
        assert_eq!(centipawns_to_internal(1e9, 40) as i32, MAX_EVAL);
        assert_eq!(centipawns_to_internal(-1e9, 40) as i32, -MAX_EVAL);
    }

    #[test]
    fn mates() {
        assert_eq!(mate_to_internal(1), 31999);
        assert_eq!(mate_to_internal(-1), -31998);
        assert_eq!(mate_to_internal(0), -32000);
        assert!(mate_to_internal(1000) as i32 >= VALUE_MATE_IN_MAX_PLY);
        assert!(mate_to_internal(3) as i32 > MAX_EVAL);
    }
}
