//! The `positions` table: one row per chess position.
//!
//! Lake layout: `positions/source=<source>/dataset=<name>/part-NNNNN.parquet`, hive-partitioned
//! so DuckDB, pyarrow and polars open the tree directly. Rows of one game (binpack: one move
//! chain) share a `game_id` and stay together and in order inside one part.

use arrow_schema::{DataType, Field, Schema};
use std::collections::HashMap;
use std::sync::Arc;

/// Bumped whenever a column is added, removed or changes meaning.
pub const SCHEMA_VERSION: u32 = 1;

/// Scores are stored in Stockfish's internal units (what binpack files and Stockfish's search
/// use; about 328 per pawn for the 2024 nets), side to move. Converted once, at ingest.
pub const SCORE_UNIT: &str = "stockfish_internal";

/// "No score" in a block of rows before encoding (binpack's own marker, 32002). Stored as null.
pub const NO_SCORE: i16 = 32002;

pub const COL_FEN: &str = "fen";
pub const COL_SCORE: &str = "score";
pub const COL_MOVE: &str = "move";
pub const COL_RESULT: &str = "result";
pub const COL_PLY: &str = "ply";
pub const COL_GAME_ID: &str = "game_id";
/// Shuffle chunks only: the position as a packed board (`lakefish_engine::packed_board`),
/// made from `fen` when the shuffle deals the row, so training parses no text.
pub const COL_BOARD: &str = "board";
/// Bytes of a `board` cell.
pub const BOARD_BYTES: i32 = 32;

/// Parquet key-value metadata keys written into every part.
pub const META_TABLE: &str = "lakefish.table";
pub const META_SCHEMA_VERSION: &str = "lakefish.schema_version";
pub const META_SCORE_UNIT: &str = "lakefish.score_unit";
/// Chunks with a `board` column name its layout here.
pub const META_BOARD_LAYOUT: &str = "lakefish.board_layout";
/// The one board layout this version reads and writes (`lakefish_engine::packed_board`
/// defines it; a test keeps the two names equal).
pub const BOARD_LAYOUT: &str = "lakefish-packed-board-v1";

pub fn schema() -> Arc<Schema> {
    let fields = vec![
        Field::new(COL_FEN, DataType::Utf8, false).with_metadata(doc("position as FEN")),
        Field::new(COL_SCORE, DataType::Int16, true).with_metadata(doc(
            "evaluation, side to move, Stockfish internal units; null = no score",
        )),
        Field::new(COL_MOVE, DataType::Utf8, false).with_metadata(doc(
            "move played or best move, UCI: castling e1g1, king takes rook (e1h1) in Chess960 \
             games, 0000 for a null move",
        )),
        Field::new(COL_RESULT, DataType::Int8, true)
            .with_metadata(doc("game result, side to move: -1 loss, 0 draw, 1 win")),
        Field::new(COL_PLY, DataType::UInt16, false)
            .with_metadata(doc("half-move number from the game start")),
        Field::new(COL_GAME_ID, DataType::UInt64, false).with_metadata(doc(
            "rows of one game (binpack: one move chain) share it and stay in order",
        )),
    ];
    Arc::new(Schema::new(fields))
}

/// A shuffle chunk: the `positions` columns with `board` in place of `fen` (the text is
/// packed once, when the shuffle deals the row; `lakefish chunk` prints it back). Chunks
/// written before packed boards have `fen` instead; readers take either.
pub fn chunk_schema() -> Arc<Schema> {
    let fields: Vec<Field> = schema()
        .fields()
        .iter()
        .map(|f| match f.name().as_str() {
            COL_FEN => Field::new(COL_BOARD, DataType::FixedSizeBinary(BOARD_BYTES), false)
                .with_metadata(doc(
                    "the position packed in 32 bytes (layout named in the file's \
                     lakefish.board_layout)",
                )),
            _ => f.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new(fields))
}

/// Key-value metadata every `positions` part carries, in a fixed order (parts must be
/// byte-identical from run to run, so no hash-map iteration order may leak into them).
pub fn file_metadata() -> Vec<(String, String)> {
    vec![
        (META_TABLE.to_string(), "positions".to_string()),
        (META_SCHEMA_VERSION.to_string(), SCHEMA_VERSION.to_string()),
        (META_SCORE_UNIT.to_string(), SCORE_UNIT.to_string()),
    ]
}

fn doc(text: &str) -> HashMap<String, String> {
    HashMap::from([("doc".to_string(), text.to_string())])
}

/// `positions/source=<source>/dataset=<name>/`
pub fn dataset_prefix(source: crate::Source, dataset: &crate::DatasetName) -> String {
    format!("positions/source={source}/dataset={dataset}")
}

/// `part-00042.parquet`
pub fn part_file_name(index: u32) -> String {
    format!("part-{index:05}.parquet")
}
