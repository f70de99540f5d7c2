//! `transform`: a new dataset made from a committed one, row by row, with lineage to it
//! (the new manifest's `derived_from`).

use serde::{Deserialize, Serialize};

use crate::{DatasetName, JobId, Source};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TransformSpec {
    /// The dataset read.
    pub dataset: DatasetName,
    /// Its source partition; the output is written under the same one.
    #[serde(default = "default_source")]
    pub source: Source,
    /// The dataset written (a new name: datasets are immutable).
    pub output: DatasetName,
    pub transform: Transform,
    #[serde(default = "crate::job::default_rows_per_part")]
    pub rows_per_part: u64,
}

fn default_source() -> Source {
    Source::Binpack
}

/// What becomes of each row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Transform {
    /// Nodchip's quiescence leaf: each position is replaced by the leaf of its quiescence
    /// search (`engine/src/qleaf.rs`: captures and promotions, exact on material), its ply
    /// advanced and its score and result seen from the leaf's side to move. A leaf reached
    /// by captures has no game move: its move is `0000` (UCI's null move). Rows without a
    /// score, and positions whose search passes `max_nodes`, are kept as they are.
    QsearchLeaf {
        /// The leaf's score: `keep` (the row's, negated when the side to move changed) or
        /// `classical` (lakefish's hand-written evaluation of the leaf).
        #[serde(default)]
        score: LeafScore,
        #[serde(default = "d_max_nodes")]
        max_nodes: u64,
    },
    /// Every position scored again by a registered engine (Stockfish's `transform rescore`):
    /// `ucinewgame`, `position fen`, `go depth N` or `go nodes N`; the last `info` score,
    /// converted to internal units as datagen converts it.
    Rescore {
        /// A side as SPRTs take them: `ENGINE[,OPTION=VALUE...]`, e.g.
        /// `stockfish,Threads=1,Hash=16`.
        engine: crate::engines::SideRequest,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        depth: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nodes: Option<u64>,
    },
}

#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum LeafScore {
    #[default]
    Keep,
    Classical,
}

fn d_max_nodes() -> u64 {
    100_000
}

impl Transform {
    pub fn name(&self) -> &'static str {
        match self {
            Transform::QsearchLeaf { .. } => "qsearch-leaf",
            Transform::Rescore { .. } => "rescore",
        }
    }
}

impl TransformSpec {
    pub fn validate(&self) -> Result<(), String> {
        if self.output == self.dataset {
            return Err(format!(
                "output: {} is the dataset read; name a new dataset (datasets are immutable)",
                self.output
            ));
        }
        if self.rows_per_part == 0 {
            return Err("rows_per_part must be at least 1".into());
        }
        match &self.transform {
            Transform::QsearchLeaf { max_nodes, .. } if *max_nodes == 0 => {
                Err("transform.max_nodes must be at least 1".into())
            }
            Transform::Rescore {
                engine,
                depth,
                nodes,
            } => {
                engine
                    .parse()
                    .map_err(|m| format!("transform.engine: {m}"))?;
                match (depth, nodes) {
                    (Some(d), None) if (1..=99).contains(d) => Ok(()),
                    (None, Some(n)) if *n >= 1 => Ok(()),
                    (Some(_), Some(_)) | (None, None) => {
                        Err("transform: give one of depth and nodes".into())
                    }
                    _ => Err("transform.depth is 1 to 99, transform.nodes at least 1".into()),
                }
            }
            _ => Ok(()),
        }
    }
}

/// Where a transformed dataset came from: the `transform` that made it and the commit of the
/// dataset it read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Derivation {
    pub transform: Transform,
    pub source: Source,
    pub dataset: DatasetName,
    /// The job that committed the dataset read.
    pub dataset_job_id: JobId,
    /// What ran it, when not lakefish itself: the rescoring engine's program, arguments and
    /// options as resolved from its registration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// Rows the transform changed (moved to a leaf, scored differently); 0 in manifests
    /// written before it was counted, which must still open.
    #[serde(default)]
    pub changed: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lineage written before `changed` was counted (a lake made by an earlier build) still
    /// opens, with 0 changed rows; a field nobody wrote is still refused.
    #[test]
    fn older_lineage_still_reads() {
        let old = r#"{"transform": {"kind": "qsearch-leaf", "score": "keep", "max_nodes": 100000},
                      "source": "binpack", "dataset": "sp",
                      "dataset_job_id": "01a22112-045d-752f-a32f-3a65c1b3e307"}"#;
        let d: Derivation = serde_json::from_str(old).unwrap();
        assert_eq!((d.changed, d.dataset.as_str()), (0, "sp"));
        let bad = old.replace("\"source\"", "\"sauce\": 1, \"source\"");
        assert!(serde_json::from_str::<Derivation>(&bad).is_err());
    }
}
