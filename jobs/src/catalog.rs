//! Filling the catalogue from the lake alone (`lakefish metastore rebuild`, and the first
//! start of a metastore that has no catalogue yet): every list function of the lake is read
//! without an index, and each item is indexed. Idempotent; entries already there with a
//! higher rank (a test that went on meanwhile) are kept.

use crate::{JobError, Lake};
use lakefish_lake::catalog::{
    Catalog, CatalogCursor, CatalogEntry, CatalogHandle, CatalogKind, CatalogPage, CatalogQuery,
    CatalogTotal,
};
use lakefish_lake::datasets::list_datasets;
use lakefish_schemas::pipeline::PIPELINES_PREFIX;
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

/// How many entries of each kind a rebuild indexed (and pruned).
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RebuildReport {
    pub indexed: BTreeMap<&'static str, u64>,
    /// Entries removed by [`rebuild_and_prune`]: what the lake no longer holds.
    pub pruned: BTreeMap<&'static str, u64>,
}

/// Passes every call through to the catalogue and remembers which entries were written;
/// with `forward` off it only remembers them (a listing of the lake that changes nothing).
struct Recording {
    inner: CatalogHandle,
    forward: bool,
    seen: Mutex<HashSet<(CatalogKind, String)>>,
}

impl Recording {
    fn new(inner: &CatalogHandle, forward: bool) -> Arc<Recording> {
        Arc::new(Recording {
            inner: inner.clone(),
            forward,
            seen: Mutex::new(HashSet::new()),
        })
    }

    fn seen(&self) -> HashSet<(CatalogKind, String)> {
        std::mem::take(&mut *self.seen.lock().expect("not poisoned"))
    }
}

#[async_trait::async_trait]
impl Catalog for Recording {
    fn describe(&self) -> String {
        self.inner.0.describe()
    }
    async fn upsert(&self, entry: &CatalogEntry) -> Result<(), JobError> {
        if self.forward {
            self.inner.0.upsert(entry).await?;
        }
        self.seen
            .lock()
            .expect("not poisoned")
            .insert((entry.kind, entry.name.clone()));
        Ok(())
    }
    async fn get(&self, kind: CatalogKind, name: &str) -> Result<Option<CatalogEntry>, JobError> {
        self.inner.0.get(kind, name).await
    }
    async fn page(&self, query: &CatalogQuery) -> Result<CatalogPage, JobError> {
        self.inner.0.page(query).await
    }
    async fn counts(&self) -> Result<Vec<(CatalogKind, u64)>, JobError> {
        self.inner.0.counts().await
    }
    async fn totals(&self, kind: CatalogKind) -> Result<Vec<CatalogTotal>, JobError> {
        self.inner.0.totals(kind).await
    }
    async fn remove(&self, kind: CatalogKind, name: &str) -> Result<bool, JobError> {
        if !self.forward {
            // A listing that changes nothing (a space measurement's clean-up included).
            return Ok(false);
        }
        self.inner.0.remove(kind, name).await
    }
}

/// Indexes everything `lake` holds into `catalog`. Entries of things no longer in the lake
/// stay: see [`rebuild_and_prune`].
pub async fn rebuild(lake: &Lake, catalog: &CatalogHandle) -> Result<RebuildReport, JobError> {
    rebuild_into(lake, catalog).await
}

/// [`rebuild`], then removes every entry the lake does not give, of things deleted from the
/// lake by hand or lost with a restored backup. Safe beside running jobs: writers commit to
/// the lake before they index, so an entry read from the catalogue is in the lake by then
/// unless it is really gone; a second listing of the lake, made after the entries were read,
/// decides, and only what it does not find either is removed.
pub async fn rebuild_and_prune(
    lake: &Lake,
    catalog: &CatalogHandle,
) -> Result<RebuildReport, JobError> {
    let first = Recording::new(catalog, true);
    let mut report = rebuild_into(lake, &CatalogHandle(first.clone())).await?;
    let seen = first.seen();
    let mut candidates = Vec::new();
    for kind in CatalogKind::ALL {
        for entry in catalog.all(CatalogQuery::all(kind)).await? {
            if !seen.contains(&(kind, entry.name.clone())) {
                candidates.push((kind, entry.name));
            }
        }
    }
    if candidates.is_empty() {
        return Ok(report);
    }
    let second = Recording::new(catalog, false);
    rebuild_into(lake, &CatalogHandle(second.clone())).await?;
    let still_there = second.seen();
    for (kind, name) in candidates {
        if !still_there.contains(&(kind, name.clone()))
            && catalog.0.remove(kind, &name).await?
            // Space entries are measurements of the items, not items: not reported.
            && kind != CatalogKind::Space
        {
            *report.pruned.entry(kind.as_str()).or_default() += 1;
        }
    }
    Ok(report)
}

async fn rebuild_into(lake: &Lake, catalog: &CatalogHandle) -> Result<RebuildReport, JobError> {
    // Read the lake itself, write through the index.
    let source = lake.clone().without_catalog();
    let target = source.clone().with_catalog(catalog.clone());
    let mut report = RebuildReport::default();
    let mut count = |kind: CatalogKind| *report.indexed.entry(kind.as_str()).or_default() += 1;
    for d in list_datasets(&source).await? {
        lakefish_lake::datasets::index_dataset(&target, d.source, &d.name).await?;
        count(CatalogKind::Dataset);
    }
    for m in crate::shuffle::list_shuffles(&source).await? {
        crate::shuffle::index_shuffle(&target, &m).await?;
        count(CatalogKind::Shuffle);
    }
    for r in crate::nets::list_runs(&source).await? {
        crate::nets::index_run(&target, &r).await?;
        count(CatalogKind::Run);
    }
    for m in crate::nets::list_nets(&source).await? {
        crate::nets::index_net(&target, &m).await?;
        count(CatalogKind::Net);
    }
    if let Some(best) = crate::nets::read_best_in_lake(&source).await? {
        crate::nets::index_best(&target, &best).await?;
        count(CatalogKind::Best);
    }
    for s in crate::sprt::list(&source, None, None).await? {
        crate::sprt::index_status(&target, &s).await?;
        count(CatalogKind::Sprt);
    }
    for dir in source.list_dirs(PIPELINES_PREFIX).await? {
        let Some(name) = dir.trim_end_matches('/').rsplit('/').next() else {
            continue;
        };
        for run in crate::pipeline::list_runs(&source, name, usize::MAX).await? {
            crate::pipeline::index_run(&target, &run).await?;
            count(CatalogKind::PipelineRun);
        }
    }
    Ok(report)
}

/// `_catalog.json` at the lake's root: which metastore indexes this lake, so that a command
/// running jobs in its own process (not through the server) indexes what it writes too.
pub const MARKER_KEY: &str = "_catalog.json";

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CatalogMarker {
    /// `sqlite:/absolute/path` or a PostgreSQL URL without its password.
    pub metastore: String,
    pub since: String,
    /// Where the lake was when it was marked (`Lake::describe`): a copy or a moved lake finds
    /// another place here and leaves the original's metastore alone. Absent in older markers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lake: Option<String>,
}

impl CatalogMarker {
    /// Does this marker say `metastore` indexes this very lake (not a copy of it)?
    pub fn names(&self, lake: &Lake, metastore: &str) -> bool {
        self.metastore == metastore && self.is_of(lake)
    }

    /// Was it written for this lake, where it is now (older markers do not say)?
    pub fn is_of(&self, lake: &Lake) -> bool {
        // `s3://b/lake` and `s3://b/lake/` are one place.
        let same = |a: &str, b: &str| a.trim_end_matches('/') == b.trim_end_matches('/');
        self.lake
            .as_deref()
            .is_none_or(|l| same(l, lake.describe()))
    }
}

/// Records that `metastore` indexes `lake` (kept when it already says so).
pub async fn mark(lake: &Lake, metastore: &str) -> Result<(), JobError> {
    if read_marker(lake)
        .await?
        .is_some_and(|m| m.names(lake, metastore) && m.lake.is_some())
    {
        return Ok(());
    }
    let marker = CatalogMarker {
        metastore: metastore.to_string(),
        since: lakefish_lake::records::now(),
        lake: Some(lake.describe().to_string()),
    };
    lake.put(MARKER_KEY, serde_json::to_vec_pretty(&marker)?)
        .await
}

pub async fn read_marker(lake: &Lake) -> Result<Option<CatalogMarker>, JobError> {
    lake.get_json(MARKER_KEY, "catalogue marker").await
}

/// One page of a list, newest first by creation time.
#[derive(Debug, Clone)]
pub struct Listed<T> {
    pub items: Vec<T>,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<CatalogCursor>,
}

/// A page of `query` from the catalogue when the lake has one; otherwise from `scan` (the
/// lake's own list, already filtered like `query`), sorted and cut the same way, so both
/// answer alike. `key` gives an item's creation time and catalogue name.
pub async fn page<T, F>(
    lake: &Lake,
    query: &CatalogQuery,
    scan: F,
    key: impl Fn(&T) -> (String, String),
) -> Result<Listed<T>, JobError>
where
    T: serde::de::DeserializeOwned,
    F: std::future::Future<Output = Result<Vec<T>, JobError>>,
{
    if let Some(catalog) = lake.catalog() {
        let page = catalog.0.page(query).await?;
        return Ok(Listed {
            items: page
                .entries
                .iter()
                .map(|e| e.decode())
                .collect::<Result<_, _>>()?,
            next: page.next,
        });
    }
    let mut keyed: Vec<((String, String), T)> =
        scan.await?.into_iter().map(|t| (key(&t), t)).collect();
    keyed.sort_by(|a, b| b.0.cmp(&a.0));
    if let Some(after) = &query.after {
        let cut = (after.created.clone(), after.name.clone());
        keyed.retain(|(k, _)| *k < cut);
    }
    let limit = query.limit.max(1);
    let more = keyed.len() > limit;
    keyed.truncate(limit);
    let next = more.then(|| {
        let (created, name) = keyed.last().expect("a full page").0.clone();
        CatalogCursor { created, name }
    });
    Ok(Listed {
        items: keyed.into_iter().map(|(_, t)| t).collect(),
        next,
    })
}
