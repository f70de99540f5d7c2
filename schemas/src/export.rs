//! Data out as a job (issue 45): a committed dataset, optionally masked, or a committed
//! shuffle, written in another tool's format into the lake (`exports/<id>/`), one part per
//! dataset part (shuffle chunk) so large data
//! fans out over the workers (`export_part`), read back whole as the parts concatenated
//! (every format here concatenates: binpack chunks, text lines, fixed records).

use serde::{Deserialize, Serialize};

use crate::names::ShuffleId;
use crate::{DatasetName, MaskName, Source};

/// What a profile or an export reads: a committed dataset (the rows a committed mask keeps,
/// when one is given) or a committed shuffle (its chunks in order). Specs name one as
/// `dataset` (with `source`, `mask`) or `shuffle`; [`rows_of`] checks that exactly one is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowsOf {
    Dataset {
        source: Source,
        dataset: DatasetName,
        mask: Option<MaskName>,
    },
    Shuffle(ShuffleId),
}

impl std::fmt::Display for RowsOf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RowsOf::Dataset {
                source,
                dataset,
                mask: None,
            } => write!(f, "{source}/{dataset}"),
            RowsOf::Dataset {
                source,
                dataset,
                mask: Some(m),
            } => write!(f, "{source}/{dataset} (mask {m})"),
            RowsOf::Shuffle(id) => write!(f, "shuffle {id}"),
        }
    }
}

/// The rows a spec's `dataset`/`source`/`mask` or `shuffle` fields name, or why they name none.
pub fn rows_of(
    dataset: Option<&DatasetName>,
    source: Source,
    mask: Option<&MaskName>,
    shuffle: Option<&ShuffleId>,
) -> Result<RowsOf, String> {
    match (dataset, shuffle) {
        (Some(d), None) => Ok(RowsOf::Dataset {
            source,
            dataset: d.clone(),
            mask: mask.cloned(),
        }),
        (None, Some(_)) if mask.is_some() => {
            Err("mask: a shuffle's rows are already the ones its mask kept".into())
        }
        (None, Some(id)) => Ok(RowsOf::Shuffle(id.clone())),
        (Some(_), Some(_)) => Err("dataset and shuffle: name one of them, not both".into()),
        (None, None) => Err("dataset or shuffle: name one of them".into()),
    }
}

/// The formats a dataset can be written in (what survives in each: `lakefish_jobs::export`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ExportFormat {
    Plain,
    Binpack,
    BulletText,
    Bulletformat,
}

impl ExportFormat {
    pub fn parse(name: &str) -> Result<ExportFormat, String> {
        match name {
            "plain" => Ok(ExportFormat::Plain),
            "binpack" => Ok(ExportFormat::Binpack),
            "bullet-text" => Ok(ExportFormat::BulletText),
            "bulletformat" => Ok(ExportFormat::Bulletformat),
            other => Err(format!(
                "format {other:?}: plain or binpack (Stockfish's tools, nnue-pytorch), bullet-text or bulletformat (bullet)"
            )),
        }
    }

    /// The file extension of an export.
    pub fn extension(self) -> &'static str {
        match self {
            ExportFormat::Plain => "plain",
            ExportFormat::Binpack => "binpack",
            ExportFormat::BulletText => "txt",
            ExportFormat::Bulletformat => "data",
        }
    }
}

/// `export`: a committed dataset written in `format` under `exports/<id>/`; the id is a
/// function of the spec and the dataset's commit, so the same export asked twice is one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportSpec {
    /// A committed dataset (in `source`), or ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<DatasetName>,
    #[serde(default = "binpack_source")]
    pub source: Source,
    /// Only the rows this committed mask keeps (datasets only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask: Option<MaskName>,
    /// ... a committed shuffle, its chunks in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shuffle: Option<ShuffleId>,
    pub format: ExportFormat,
}

impl ExportSpec {
    pub fn rows(&self) -> Result<RowsOf, String> {
        rows_of(
            self.dataset.as_ref(),
            self.source,
            self.mask.as_ref(),
            self.shuffle.as_ref(),
        )
    }
}

fn binpack_source() -> Source {
    Source::Binpack
}

impl crate::job::KindSpec for ExportSpec {
    fn validate(&self) -> Result<(), String> {
        self.rows().map(|_| ())
    }
}

/// One part of a fanned-out export (`export_part`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportTask {
    /// `out-` and 12 hex digits.
    pub export: String,
    pub index: u32,
}

impl crate::job::KindSpec for ExportTask {
    fn validate(&self) -> Result<(), String> {
        if is_export_id(&self.export) {
            Ok(())
        } else {
            Err(format!(
                "export: {:?} is not an export id (out- and 12 hex digits)",
                self.export
            ))
        }
    }
}

/// `out-` and 12 lower-case hex digits: the id becomes part of lake keys.
pub fn is_export_id(id: &str) -> bool {
    id.strip_prefix("out-").is_some_and(|h| {
        h.len() == 12
            && h.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    })
}

/// What one part wrote (`exports/<id>/_done/part-NNNNN.json`), and the counts summed in the
/// manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ExportCounts {
    pub rows_read: u64,
    /// Rows the mask dropped.
    pub masked_out: u64,
    pub no_score: u64,
    pub no_result: u64,
    /// binpack: rows without a move (bullet's data, null moves), which a binpack cannot hold.
    #[serde(default)]
    pub no_move: u64,
    pub rows_written: u64,
    pub bytes: u64,
}

/// Written first: what the export reads and where each part goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ExportPlan {
    pub id: String,
    pub spec: ExportSpec,
    /// The commit exported: the dataset manifest's job, or the shuffle's id.
    pub dataset_job_id: String,
    /// The dataset's part names (a shuffle's chunk names), in order.
    pub parts: Vec<String>,
    pub created: String,
}

/// Written last (`exports/<id>/_manifest.json`): the export is whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ExportManifest {
    pub id: String,
    pub spec: ExportSpec,
    pub dataset_job_id: String,
    /// The files, in order: the export is their concatenation.
    pub files: Vec<String>,
    pub counts: ExportCounts,
    pub created: String,
}
