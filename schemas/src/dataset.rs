//! The manifest written beside a dataset's parts (`<dataset prefix>/_manifest.json`).
//!
//! Writing it is the commit point of an ingest: lakefish readers trust the parts it lists and
//! nothing else. Tools that glob the tree skip it (pyarrow ignores names starting with `_`).

use crate::{DatasetName, JobId, Source};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const MANIFEST_FILE: &str = "_manifest.json";
pub const MANIFEST_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DatasetManifest {
    pub version: u32,
    pub source: Source,
    pub dataset: DatasetName,
    /// The job that wrote this dataset.
    pub job_id: JobId,
    pub schema_version: u32,
    pub score_unit: String,
    pub rows: u64,
    pub bytes: u64,
    pub parts: Vec<PartInfo>,
    /// Parts of the `games` table (PGN sources), relative to [`crate::games::games_prefix`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub games: Vec<PartInfo>,
    pub inputs: Vec<InputReport>,
    /// Set on a dataset a `transform` made: what it read and how.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derived_from: Option<Box<crate::transform::Derivation>>,
    /// RFC 3339.
    pub created: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PartInfo {
    /// Path inside the dataset prefix: `part-NNNNN.parquet`, or `month=YYYY-MM/part-NNNNN.parquet`
    /// for sources partitioned by month.
    pub name: String,
    pub rows: u64,
    pub bytes: u64,
}

/// What one input file contributed, and what of it could not be read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InputReport {
    /// The input as given in the job spec.
    pub input: String,
    pub bytes: u64,
    /// Which content was read: the lake object's ETag (and version id), or a local file's
    /// inode, size and modification time. Inputs are the same only when this matches too.
    /// Absent in manifests written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    pub rows: u64,
    /// Binpack: chunks read. PGN: games read (including skipped ones).
    pub chunks: u64,
    pub skipped: Vec<SkippedRange>,
    /// PGN games that were not ingested, each with its number in the file and the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_games: Vec<SkippedGame>,
    /// PGN games of chess variants (skipped by design), counted by `Variant` tag.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub skipped_variants: BTreeMap<String, u64>,
}

impl InputReport {
    /// The report of an input nothing was read from yet.
    pub fn new(input: &str, bytes: u64) -> InputReport {
        InputReport {
            input: input.to_string(),
            bytes,
            version: None,
            rows: 0,
            chunks: 0,
            skipped: Vec::new(),
            skipped_games: Vec::new(),
            skipped_variants: BTreeMap::new(),
        }
    }
}

/// A PGN game left out of the lake: `game` counts from 1 in its file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkippedGame {
    pub game: u64,
    pub reason: String,
}

impl std::fmt::Display for SkippedGame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "game {} skipped: {}", self.game, self.reason)
    }
}

/// A byte range of an input that was not ingested, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkippedRange {
    pub offset: u64,
    pub len: u64,
    pub reason: String,
}

impl std::fmt::Display for SkippedRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "bytes {}..{} skipped: {}",
            self.offset,
            self.offset + self.len,
            self.reason
        )
    }
}
