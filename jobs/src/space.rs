//! Space (issue 45): what the lake holds, in bytes and objects, per kind and per item, so a
//! user whose disk or bucket fills up sees where it went (`lakefish du`, `GET /v1/space`).
//!
//! With a catalogue, the bulk comes from its `space` entries (measured item by item as items
//! are indexed: `lakefish_lake::space`) and only the prefixes it does not keep are listed;
//! without one, or with `--scan`, every object is listed. The two agree once every item is
//! committed; what is still being written (a dataset before its commit, a shuffle before
//! its manifest) shows in a listing only.

use std::collections::BTreeMap;

pub use lakefish_lake::space::{
    CATALOGUED, SpaceItem, SpaceKind, SpaceTotal, SpaceUsage, classify, summarize, tally,
};

use crate::{JobError, Lake};

/// The lake's space by kind and item: from the catalogue where the lake has one.
pub async fn usage(lake: &Lake) -> Result<SpaceUsage, JobError> {
    if lake.catalog().is_none() {
        return usage_by_listing(lake).await;
    }
    let mut items: BTreeMap<(SpaceKind, String), (u64, u64)> = BTreeMap::new();
    for e in lakefish_lake::space::read_all(lake).await? {
        let t = items.entry((e.item.kind, e.item.name)).or_default();
        t.0 += e.item.bytes;
        t.1 += e.item.objects;
    }
    // The rest of the lake: its other top-level prefixes and files, listed.
    let catalogued = |key: &str| CATALOGUED.contains(&key.split('/').next().unwrap_or(""));
    for dir in lake.list_dirs("").await? {
        let dir = dir.trim_end_matches('/');
        if !catalogued(dir) {
            for o in lake.list(dir).await? {
                tally(&mut items, o.location.as_ref(), o.size);
            }
        }
    }
    for o in lake.list_files("").await? {
        tally(&mut items, o.location.as_ref(), o.size);
    }
    Ok(summarize(items, "catalogue"))
}

/// The lake's space by kind and item from a listing of every object.
pub async fn usage_by_listing(lake: &Lake) -> Result<SpaceUsage, JobError> {
    let mut items: BTreeMap<(SpaceKind, String), (u64, u64)> = BTreeMap::new();
    for o in lake.list("").await? {
        tally(&mut items, o.location.as_ref(), o.size);
    }
    Ok(summarize(items, "listing"))
}
