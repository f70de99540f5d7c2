//! The two-pass shuffle: selected rows of one or more datasets dealt to `chunks` piles at
//! random (pass 1, one job per input part), then each pile shuffled in memory (pass 2, one job
//! per pile) into `shuffled/<id>/chunk-NNNNN.parquet`.

use crate::{DatasetName, JobId, MaskName, Source};
use serde::{Deserialize, Serialize};

pub const SHUFFLE_MANIFEST_FILE: &str = "_manifest.json";
pub const SHUFFLE_PLAN_FILE: &str = "_plan.json";
pub const MAX_CHUNKS: u32 = 100_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShuffleSpec {
    pub datasets: Vec<DatasetName>,
    #[serde(default = "default_source")]
    pub source: Source,
    pub mask: MaskName,
    pub chunks: u32,
    pub seed: u64,
    /// Datasets of other sources shuffled in too (a pipeline's binpack, lichess and
    /// self-play data in one shuffle). Left out of the JSON when empty, so ids stay stable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra: Vec<DatasetRef>,
}

/// A dataset with its source partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DatasetRef {
    pub source: Source,
    pub dataset: DatasetName,
}

/// One task of a shuffle fanned out over the queue: pass 1 for input part `index`
/// (`shuffle_deal`), or pass 2 for pile `index` (`shuffle_pile`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShuffleTask {
    /// The shuffle id, `sh-` and 12 hex digits.
    pub shuffle: crate::names::ShuffleId,
    pub index: u32,
}

impl ShuffleTask {
    /// Only well-formed ids: the id becomes part of lake keys.
    pub fn validate(&self) -> Result<(), String> {
        let hex = self.shuffle.strip_prefix("sh-").unwrap_or("");
        if hex.len() == 12
            && hex
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        {
            Ok(())
        } else {
            Err(format!(
                "{:?} is not a shuffle id (sh-<12 hex digits>)",
                self.shuffle
            ))
        }
    }
}

fn default_source() -> Source {
    Source::Binpack
}

impl DatasetRef {
    /// `SOURCE/NAME` (`lichess/twic`), or a bare `NAME` of `default` source.
    pub fn parse(s: &str, default: Source) -> Result<DatasetRef, String> {
        let (source, name) = match s.split_once('/') {
            Some((src, name)) => (
                Source::parse(src).ok_or_else(|| {
                    format!("{s:?}: unknown source {src:?} ({})", crate::Source::CHOICES)
                })?,
                name,
            ),
            None => (default, s),
        };
        let dataset = name
            .parse::<DatasetName>()
            .map_err(|e| format!("{s:?}: {e}"))?;
        Ok(DatasetRef { source, dataset })
    }
}

impl ShuffleSpec {
    /// The spec of a shuffle of `inputs` in their order: the first one's source is `source`,
    /// datasets of other sources go to `extra` (one rule for pipelines and the CLI, so the
    /// same inputs give the same shuffle id).
    pub fn from_inputs(
        inputs: &[DatasetRef],
        mask: MaskName,
        chunks: u32,
        seed: u64,
    ) -> ShuffleSpec {
        let source = inputs.first().map_or(Source::Binpack, |d| d.source);
        ShuffleSpec {
            datasets: inputs
                .iter()
                .filter(|d| d.source == source)
                .map(|d| d.dataset.clone())
                .collect(),
            source,
            extra: inputs
                .iter()
                .filter(|d| d.source != source)
                .cloned()
                .collect(),
            mask,
            chunks,
            seed,
        }
    }

    /// Every input dataset with its source: `datasets` (of `source`), then `extra`.
    pub fn inputs(&self) -> Vec<DatasetRef> {
        self.datasets
            .iter()
            .map(|d| DatasetRef {
                source: self.source,
                dataset: d.clone(),
            })
            .chain(self.extra.iter().cloned())
            .collect()
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.datasets.is_empty() {
            return Err("datasets is empty: name at least one dataset".into());
        }
        if !(1..=MAX_CHUNKS).contains(&self.chunks) {
            return Err(format!("chunks must be between 1 and {MAX_CHUNKS}"));
        }
        let mut seen = std::collections::HashSet::new();
        if let Some(d) = self.inputs().into_iter().find(|d| !seen.insert(d.clone())) {
            return Err(format!(
                "dataset {}/{} is named twice",
                d.source.as_str(),
                d.dataset
            ));
        }
        Ok(())
    }
}

/// One input part of a shuffle, in the fixed order that numbers the pass-1 jobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlannedPart {
    /// The part's source when it is not the spec's `source` (an `extra` dataset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
    pub dataset: DatasetName,
    pub name: String,
    pub rows: u64,
}

/// Everything the passes need, fixed before any of them runs (`shuffled/<id>/_plan.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShufflePlan {
    pub id: crate::names::ShuffleId,
    pub spec: ShuffleSpec,
    /// The commits of the datasets read, by dataset, in `spec.datasets` order.
    pub dataset_jobs: Vec<JobId>,
    pub parts: Vec<PlannedPart>,
}

/// Written last (`shuffled/<id>/_manifest.json`): the shuffle is complete.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShuffleManifest {
    pub version: u32,
    pub id: crate::names::ShuffleId,
    pub source: Source,
    pub datasets: Vec<DatasetName>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra: Vec<DatasetRef>,
    pub dataset_jobs: Vec<JobId>,
    pub mask: MaskName,
    pub seed: u64,
    pub chunks: Vec<ShuffleChunk>,
    /// Rows of the inputs (before the mask).
    pub input_rows: u64,
    /// Rows selected by the mask = rows in the chunks.
    pub rows: u64,
    pub bytes: u64,
    pub created: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShuffleChunk {
    pub name: String,
    pub rows: u64,
    pub bytes: u64,
}

pub fn chunk_file_name(index: u32) -> String {
    format!("chunk-{index:05}.parquet")
}

#[cfg(test)]
mod dataset_ref_tests {
    use super::*;

    /// `--dataset` as the CLI takes it: a bare name of the default source, or SOURCE/NAME;
    /// an unknown source or a bad name is refused, naming the argument.
    #[test]
    fn dataset_refs_parse_with_or_without_a_source() {
        let d = DatasetRef::parse("lichess/twic", Source::Binpack).unwrap();
        assert_eq!((d.source, d.dataset.as_str()), (Source::Lichess, "twic"));
        let d = DatasetRef::parse("sf-1", Source::Selfplay).unwrap();
        assert_eq!((d.source, d.dataset.as_str()), (Source::Selfplay, "sf-1"));
        for (bad, says) in [
            ("tape/x", "unknown source \"tape\""),
            ("lichess/", "\"lichess/\""),
            ("binpack/a/b", "\"binpack/a/b\""),
            ("../x", "\"../x\""),
        ] {
            let e = DatasetRef::parse(bad, Source::Binpack).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
