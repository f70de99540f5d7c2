//! Space (issue 45): what the lake holds, in bytes and objects, per kind and per item, so a
//! user whose disk or bucket fills up sees where it went (`lakefish du`, `GET /v1/space`).
//!
//! Read from one listing of the lake, each key put in its kind and item by its prefix (the
//! layout in ARCHITECTURE.md). Not yet from the catalogue alone: runs, tests and experiments
//! do not record their bytes there.

use std::collections::BTreeMap;

use crate::{JobError, Lake};

/// What an object belongs to.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SpaceKind {
    /// Uploaded inputs and books (`raw/`).
    Raw,
    /// Committed positions and their games (`positions/`).
    Datasets,
    Masks,
    Profiles,
    /// Shuffled chunks (`shuffled/`), with any pass-1 files still there.
    Shuffles,
    /// Training runs: checkpoints, metrics, the nets quantized from them (`runs/`).
    Runs,
    /// The registry (`nets/`).
    Nets,
    /// SPRT tests: games, batches, status (`sprt/`).
    Sprt,
    Experiments,
    /// Exports written for other tools (`exports/`).
    Exports,
    /// Job records, pipelines, engines, the catalogue's files and anything else.
    Other,
}

impl SpaceKind {
    /// The name JSON, the CLI and the dashboard give it.
    pub fn as_str(self) -> &'static str {
        match self {
            SpaceKind::Raw => "raw",
            SpaceKind::Datasets => "datasets",
            SpaceKind::Masks => "masks",
            SpaceKind::Profiles => "profiles",
            SpaceKind::Shuffles => "shuffles",
            SpaceKind::Runs => "runs",
            SpaceKind::Nets => "nets",
            SpaceKind::Sprt => "sprt",
            SpaceKind::Experiments => "experiments",
            SpaceKind::Exports => "exports",
            SpaceKind::Other => "other",
        }
    }
}

/// One item's share: a dataset (`SOURCE/NAME`), a shuffle, a run, a net, a test.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct SpaceItem {
    pub kind: SpaceKind,
    pub name: String,
    pub bytes: u64,
    pub objects: u64,
}

/// A kind's total.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct SpaceTotal {
    pub kind: SpaceKind,
    pub bytes: u64,
    pub objects: u64,
    pub items: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct SpaceUsage {
    pub bytes: u64,
    pub objects: u64,
    /// Largest first.
    pub kinds: Vec<SpaceTotal>,
    /// Largest first.
    pub items: Vec<SpaceItem>,
}

/// The kind and item of a lake key.
pub fn classify(key: &str) -> (SpaceKind, String) {
    let parts: Vec<&str> = key.split('/').collect();
    let seg = |i: usize| parts.get(i).copied().unwrap_or("");
    let value = |s: &str| s.split_once('=').map_or(s, |(_, v)| v).to_string();
    match seg(0) {
        "raw" => (SpaceKind::Raw, format!("{}/{}", seg(1), seg(2))),
        "positions" => (
            SpaceKind::Datasets,
            format!("{}/{}", value(seg(1)), value(seg(2))),
        ),
        "masks" => (
            SpaceKind::Masks,
            format!("{} of {}/{}", seg(1), value(seg(2)), value(seg(3))),
        ),
        "profiles" => (
            SpaceKind::Profiles,
            format!("{}/{}", value(seg(1)), value(seg(2))),
        ),
        "shuffled" => (SpaceKind::Shuffles, seg(1).to_string()),
        "runs" => (SpaceKind::Runs, seg(1).to_string()),
        "nets" => (
            SpaceKind::Nets,
            seg(1)
                .trim_end_matches(".json")
                .trim_end_matches(".nnue")
                .to_string(),
        ),
        "sprt" => (SpaceKind::Sprt, seg(1).to_string()),
        "experiments" => (SpaceKind::Experiments, seg(1).to_string()),
        "exports" => (SpaceKind::Exports, seg(1).to_string()),
        first => (SpaceKind::Other, first.to_string()),
    }
}

/// The lake's space by kind and item.
pub async fn usage(lake: &Lake) -> Result<SpaceUsage, JobError> {
    let mut items: BTreeMap<(SpaceKind, String), (u64, u64)> = BTreeMap::new();
    for o in lake.list("").await? {
        let e = items.entry(classify(o.location.as_ref())).or_default();
        e.0 += o.size;
        e.1 += 1;
    }
    let mut kinds: BTreeMap<SpaceKind, SpaceTotal> = BTreeMap::new();
    for ((kind, _), (bytes, objects)) in &items {
        let t = kinds.entry(*kind).or_insert(SpaceTotal {
            kind: *kind,
            bytes: 0,
            objects: 0,
            items: 0,
        });
        t.bytes += bytes;
        t.objects += objects;
        t.items += 1;
    }
    let mut kinds: Vec<SpaceTotal> = kinds.into_values().collect();
    kinds.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.kind.cmp(&b.kind)));
    let mut items: Vec<SpaceItem> = items
        .into_iter()
        .map(|((kind, name), (bytes, objects))| SpaceItem {
            kind,
            name,
            bytes,
            objects,
        })
        .collect();
    items.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.name.cmp(&b.name)));
    Ok(SpaceUsage {
        bytes: kinds.iter().map(|k| k.bytes).sum(),
        objects: kinds.iter().map(|k| k.objects).sum(),
        kinds,
        items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_fall_in_their_kind_and_item() {
        for (key, kind, item) in [
            (
                "positions/source=binpack/dataset=d/part-00000.parquet",
                SpaceKind::Datasets,
                "binpack/d",
            ),
            (
                "masks/quiet/source=lichess/dataset=l/month=2025-05/part-00000.parquet",
                SpaceKind::Masks,
                "quiet of lichess/l",
            ),
            (
                "shuffled/sh-0123456789ab/_deal/pile-00001/from-00000.arrows",
                SpaceKind::Shuffles,
                "sh-0123456789ab",
            ),
            (
                "runs/run-0123456789ab/checkpoints/step-000000010.ot",
                SpaceKind::Runs,
                "run-0123456789ab",
            ),
            (
                "nets/nn-0123456789ab.nnue",
                SpaceKind::Nets,
                "nn-0123456789ab",
            ),
            (
                "nets/nn-0123456789ab.json",
                SpaceKind::Nets,
                "nn-0123456789ab",
            ),
            ("raw/books/b.epd", SpaceKind::Raw, "books/b.epd"),
            ("jobs/x.json", SpaceKind::Other, "jobs"),
        ] {
            assert_eq!(classify(key), (kind, item.to_string()), "{key}");
            // The name is serde's.
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
        }
    }
}
