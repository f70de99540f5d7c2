//! The `games` table: one row per PGN game, keyed by the `game_id` its `positions` rows carry.
//!
//! Lake layout: `games/source=<source>/dataset=<name>/month=YYYY-MM/part-NNNNN.parquet`, one
//! games part beside each positions part, holding the games whose rows are in that part (games
//! without moves included).

use arrow_schema::{DataType, Field, Schema};
use std::sync::Arc;

pub const COL_GAME_ID: &str = "game_id";
pub const COL_PLIES: &str = "plies";
/// True for Chess960 games (their rows use X-FEN castling rights and king-takes-rook moves).
pub const COL_CHESS960: &str = "chess960";

/// Written as `lakefish.schema_version` into every games part; bumped whenever a column is
/// added, removed or changes meaning. 1: until `chess960` (readers take a missing column as
/// false); 2: `chess960`.
pub const SCHEMA_VERSION: u32 = 2;

/// PGN tags copied into the table, in column order, with their column names.
pub const TAG_COLUMNS: [(&str, &str); 13] = [
    ("Event", "event"),
    ("Site", "site"),
    ("White", "white"),
    ("Black", "black"),
    ("Result", "result"),
    ("WhiteElo", "white_elo"),
    ("BlackElo", "black_elo"),
    ("TimeControl", "time_control"),
    ("UTCDate", "utc_date"),
    ("UTCTime", "utc_time"),
    ("Termination", "termination"),
    ("ECO", "eco"),
    ("Opening", "opening"),
];

/// Index of the Elo columns in [`TAG_COLUMNS`] (stored as integers, null when unknown).
pub fn is_elo_column(tag: &str) -> bool {
    matches!(tag, "WhiteElo" | "BlackElo")
}

pub fn schema() -> Arc<Schema> {
    let mut fields = vec![Field::new(COL_GAME_ID, DataType::UInt64, false)];
    for (tag, column) in TAG_COLUMNS {
        let ty = if is_elo_column(tag) {
            DataType::UInt16
        } else {
            DataType::Utf8
        };
        fields.push(Field::new(column, ty, true));
    }
    fields.push(Field::new("start_fen", DataType::Utf8, true));
    fields.push(Field::new(COL_PLIES, DataType::UInt16, false));
    fields.push(Field::new(COL_CHESS960, DataType::Boolean, false));
    Arc::new(Schema::new(fields))
}

/// `games/source=<source>/dataset=<name>/`
pub fn games_prefix(source: crate::Source, dataset: &crate::DatasetName) -> String {
    format!("games/source={source}/dataset={dataset}")
}
