//! Per-position masks: one boolean per row of a `positions` part, stored beside the data as
//! `masks/<name>/source=<s>/dataset=<d>/part-NNNNN.parquet` with the same file name as the
//! part, so several definitions live side by side without rewriting data.

use crate::{DatasetName, JobId, Source};
use serde::{Deserialize, Serialize};

pub const MASK_MANIFEST_FILE: &str = "_mask.json";
pub const MASK_COLUMN: &str = "keep";
/// Parquet key-value metadata of a mask part: the row count of the part it belongs to.
pub const META_PART_ROWS: &str = "lakefish.part_rows";
pub const META_MASK: &str = "lakefish.mask";

crate::segment_name!(
    /// A mask definition's name: one path segment.
    MaskName,
    "mask",
    64
);

/// A quiet-position definition: the side to move is not in check, the row's move is neither a
/// capture (en passant included) nor a promotion, and the score is not null; optionally also
/// a minimum ply and a maximum |score|.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MaskDefinition {
    pub name: MaskName,
    /// Rows before this ply are dropped (opening positions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_ply: Option<u16>,
    /// Rows whose |score| exceeds this are dropped (decided positions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_abs_score: Option<u16>,
}

impl MaskDefinition {
    pub fn quiet() -> Self {
        MaskDefinition {
            name: MaskName::new("quiet").expect("valid"),
            min_ply: None,
            max_abs_score: None,
        }
    }
}

/// `lakefish mask quiet`: write a mask for every part of one dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MaskSpec {
    pub dataset: DatasetName,
    #[serde(default = "default_source")]
    pub source: Source,
    pub definition: MaskDefinition,
}

fn default_source() -> Source {
    Source::Binpack
}

/// Written last: the mask is complete for the dataset version it names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MaskManifest {
    pub version: u32,
    pub definition: MaskDefinition,
    pub source: Source,
    pub dataset: DatasetName,
    /// The job that committed the dataset the mask was computed from.
    pub dataset_job_id: JobId,
    pub job_id: JobId,
    pub rows: u64,
    /// Rows the mask keeps.
    pub selected: u64,
    pub parts: Vec<MaskPart>,
    pub created: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MaskPart {
    pub name: String,
    pub rows: u64,
    pub selected: u64,
}

/// `masks/<name>/source=<s>/dataset=<d>`
pub fn mask_prefix(name: &MaskName, source: Source, dataset: &DatasetName) -> String {
    format!("masks/{name}/source={source}/dataset={dataset}")
}
