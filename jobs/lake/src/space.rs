//! Space (issue 45): what the lake holds, in bytes and objects, per kind and per item, and
//! the catalogue's share of keeping it. Every key has a kind and an item by its prefix
//! ([`classify`], the layout in ARCHITECTURE.md). The bulk of a lake (positions, games,
//! masks, profiles, shuffles, runs, SPRT tests: [`CATALOGUED`]) is measured item by item
//! when the catalogue indexes the item ([`Lake::index`] calls [`measure`]), and stored as
//! `space` entries linked to the item, so `du` reads them instead of listing millions of
//! objects; the rest of the lake (raw inputs, nets, exports, experiments, records) is small
//! and listed.

use std::collections::BTreeMap;

use crate::catalog::{CatalogEntry, CatalogKind, CatalogQuery};
use crate::{JobError, Lake};

/// What an object belongs to.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SpaceKind {
    /// Uploaded inputs and books (`raw/`).
    Raw,
    /// Committed positions and their games (`positions/`, `games/`).
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
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
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
    /// `catalogue` (its space entries, the rest listed) or `listing` (every object listed).
    pub from: String,
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
        "positions" | "games" => (
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

/// The top-level prefixes whose space the catalogue keeps (see the module).
pub const CATALOGUED: [&str; 7] = [
    "positions",
    "games",
    "masks",
    "profiles",
    "shuffled",
    "runs",
    "sprt",
];

/// A `space` entry's document: the item measured, and the catalogue entry it belongs to
/// (its link, kept in the document too so that one read of the `space` entries tells which
/// items were measured).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SpaceEntry {
    pub owner: String,
    #[serde(flatten)]
    pub item: SpaceItem,
}

/// The kinds of catalogue entries whose items have `space` entries.
pub const MEASURED: [CatalogKind; 4] = [
    CatalogKind::Dataset,
    CatalogKind::Shuffle,
    CatalogKind::Run,
    CatalogKind::Sprt,
];

/// How a `space` entry links the catalogue entry whose item it measures.
pub fn owner(kind: CatalogKind, name: &str) -> String {
    format!("{}:{name}", kind.as_str())
}

/// The prefixes an indexed item's objects live under; none for kinds measured by listing.
async fn item_prefixes(
    lake: &Lake,
    kind: CatalogKind,
    name: &str,
) -> Result<Vec<String>, JobError> {
    Ok(match kind {
        CatalogKind::Dataset => {
            let Some((source, dataset)) = name.split_once('/') else {
                return Ok(Vec::new());
            };
            let mut p = vec![
                format!("positions/source={source}/dataset={dataset}"),
                format!("games/source={source}/dataset={dataset}"),
                format!("profiles/source={source}/dataset={dataset}"),
            ];
            for m in lake.list_dirs("masks").await? {
                p.push(format!(
                    "{}/source={source}/dataset={dataset}",
                    m.trim_end_matches('/')
                ));
            }
            p
        }
        CatalogKind::Shuffle => vec![format!("shuffled/{name}")],
        CatalogKind::Run => vec![format!("runs/{name}")],
        CatalogKind::Sprt => vec![format!("sprt/{name}")],
        CatalogKind::Net | CatalogKind::PipelineRun | CatalogKind::Best | CatalogKind::Space => {
            Vec::new()
        }
    })
}

/// Measures the objects of the item the catalogue entry `kind`/`name` stands for and keeps
/// its `space` entries: one per (kind, item) found, none left for what is gone. Nothing
/// without a catalogue.
///
/// Two measurements of one item may overlap (two masks committing, two SPRT batches): each
/// is ranked by when it began listing, an upsert never replaces a newer measurement's entry
/// (the catalogue's rank rule) and only older entries are dropped. An item no longer in the
/// catalogue (removed meanwhile) gets none.
pub async fn measure(lake: &Lake, kind: CatalogKind, name: &str) -> Result<(), JobError> {
    let Some(catalog) = lake.catalog() else {
        return Ok(());
    };
    let prefixes = item_prefixes(lake, kind, name).await?;
    if prefixes.is_empty() {
        return Ok(());
    }
    let rank = chrono::Utc::now().timestamp_millis();
    let mut items: BTreeMap<(SpaceKind, String), (u64, u64)> = BTreeMap::new();
    for p in &prefixes {
        for o in lake.list(p).await? {
            let e = items.entry(classify(o.location.as_ref())).or_default();
            e.0 += o.size;
            e.1 += 1;
        }
    }
    if catalog.0.get(kind, name).await?.is_none() {
        return forget(lake, kind, name).await;
    }
    let link = owner(kind, name);
    let now = crate::records::now();
    let mut kept = std::collections::HashSet::new();
    for ((k, item), (bytes, objects)) in items {
        let doc = SpaceEntry {
            owner: link.clone(),
            item: SpaceItem {
                kind: k,
                name: item.clone(),
                bytes,
                objects,
            },
        };
        let key = format!("{}:{item}", k.as_str());
        kept.insert(key.clone());
        let mut e = CatalogEntry::of(CatalogKind::Space, &key, now.clone(), &doc)
            .with_state(k.as_str())
            .with_rank(rank);
        e.links = vec![link.clone()];
        e.weight = bytes as i64;
        catalog.0.upsert(&e).await?;
    }
    let mut q = CatalogQuery::all(CatalogKind::Space);
    q.link = Some(link);
    for e in catalog.all(q).await? {
        if !kept.contains(&e.name) && e.rank < rank {
            catalog.0.remove(CatalogKind::Space, &e.name).await?;
        }
    }
    Ok(())
}

/// Every `space` entry of the catalogue, after measuring the items that have none (a
/// catalogue made before items were measured, or an item whose measurement failed).
pub async fn read_all(lake: &Lake) -> Result<Vec<SpaceEntry>, JobError> {
    let Some(catalog) = lake.catalog() else {
        return Ok(Vec::new());
    };
    let read = || async {
        let mut out = Vec::new();
        for e in catalog.all(CatalogQuery::all(CatalogKind::Space)).await? {
            out.push(
                serde_json::from_value::<SpaceEntry>(e.summary).map_err(|err| {
                    JobError::Corrupt {
                        what: "catalogue space entry",
                        key: e.name.clone(),
                        reason: err.to_string(),
                    }
                })?,
            );
        }
        Ok::<_, JobError>(out)
    };
    let entries = read().await?;
    let owners: std::collections::HashSet<&str> =
        entries.iter().map(|e| e.owner.as_str()).collect();
    let mut live = std::collections::HashSet::new();
    let mut missing = Vec::new();
    for kind in MEASURED {
        for e in catalog.all(CatalogQuery::all(kind)).await? {
            let o = owner(kind, &e.name);
            if !owners.contains(o.as_str()) {
                missing.push((kind, e.name));
            }
            live.insert(o);
        }
    }
    let entries = if missing.is_empty() {
        entries
    } else {
        tracing::info!(
            items = missing.len(),
            "measuring the space of items the catalogue has not measured"
        );
        for (kind, name) in &missing {
            measure(lake, *kind, name).await?;
        }
        read().await?
    };
    // Entries of items removed from the catalogue (a measurement that raced a removal).
    Ok(entries
        .into_iter()
        .filter(|e| live.contains(&e.owner))
        .collect())
}

/// Drops the `space` entries of an item removed from the catalogue.
pub async fn forget(lake: &Lake, kind: CatalogKind, name: &str) -> Result<(), JobError> {
    let Some(catalog) = lake.catalog() else {
        return Ok(());
    };
    let mut q = CatalogQuery::all(CatalogKind::Space);
    q.link = Some(owner(kind, name));
    for e in catalog.all(q).await? {
        catalog.0.remove(CatalogKind::Space, &e.name).await?;
    }
    Ok(())
}

/// Adds objects to per-item tallies.
pub fn tally(items: &mut BTreeMap<(SpaceKind, String), (u64, u64)>, key: &str, size: u64) {
    let e = items.entry(classify(key)).or_default();
    e.0 += size;
    e.1 += 1;
}

/// Totals by kind, largest first, from per-item tallies.
pub fn summarize(items: BTreeMap<(SpaceKind, String), (u64, u64)>, from: &str) -> SpaceUsage {
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
    SpaceUsage {
        from: from.to_string(),
        bytes: kinds.iter().map(|k| k.bytes).sum(),
        objects: kinds.iter().map(|k| k.objects).sum(),
        kinds,
        items,
    }
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
