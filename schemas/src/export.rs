//! Data out as a job (issue 45): a committed dataset, optionally masked, written in another
//! tool's format into the lake (`exports/<id>/`), one part per dataset part so large data
//! fans out over the workers (`export_part`), read back whole as the parts concatenated
//! (every format here concatenates: binpack chunks, text lines, fixed records).

use serde::{Deserialize, Serialize};

use crate::{DatasetName, MaskName, Source};

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
    pub dataset: DatasetName,
    #[serde(default = "binpack_source")]
    pub source: Source,
    /// Only the rows this committed mask keeps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask: Option<MaskName>,
    pub format: ExportFormat,
}

fn binpack_source() -> Source {
    Source::Binpack
}

impl crate::job::KindSpec for ExportSpec {}

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
    /// The dataset commit exported (its manifest's job).
    pub dataset_job_id: String,
    /// The dataset's part names, in order.
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
