//! Ingest: the formats users bring become committed `positions` datasets.
//!
//! - [`binpack`]: Stockfish `.binpack` chunks, scanned and decoded in parallel.
//! - [`pgn`]: PGN blocks of whole games (Lichess `[%eval]`, zstd), parsed with pgn-reader.
//! - [`ingest_records`]: Stockfish's plain text, bullet's text and bulletformat records.
//! - [`dataset_writer`]: the claim, encoder threads and manifest commit both share.
//!
//! Architecture invariant: readers produce `lakefish_lake::parts::PositionColumns`; only
//! `lakefish_lake::parts` turns rows into Parquet.

pub mod binpack;
pub mod dataset_writer;
pub mod ingest_binpack;
pub mod ingest_pgn;
pub mod ingest_records;
pub mod pgn;

pub use dataset_writer::IngestSummary;
