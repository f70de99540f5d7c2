//! The catalogue: an index of what the lake holds (datasets, shuffles, training runs, nets,
//! SPRT tests, pipeline runs, the best-net pointer), kept in the metastore so that lists,
//! the dashboard and `/metrics` read a page of rows instead of every manifest in the lake.
//!
//! Invariants:
//! - The lake is the source of truth. A writer commits its manifest to the lake first and
//!   then indexes it ([`Lake::index`]); an index write that fails fails the job with a
//!   transient error, and the retried job writes both again (both writes are idempotent).
//! - An entry holds the same document the lake's list functions return (`summary`), so a
//!   list answers the same with or without an index.
//! - `lakefish metastore rebuild` re-creates every entry from the lake alone.

use crate::{JobError, Lake};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What an entry describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatalogKind {
    /// `SOURCE/NAME` → `DatasetSummary` (with its masks).
    Dataset,
    /// shuffle id → `ShuffleManifest`.
    Shuffle,
    /// run id → `RunRecord`.
    Run,
    /// net name → `NetManifest`.
    Net,
    /// test id → `SprtStatus`; state: the test's; links: both sides' evaluations.
    Sprt,
    /// `PIPELINE/ID` → `PipelineRun`; state: the run's; links: the pipeline.
    PipelineRun,
    /// The best-net pointer (name `best`) → `BestNet`.
    Best,
    /// `KIND:ITEM` → `SpaceItem`: the bytes and objects of one item of the lake, measured
    /// when the entry it links (`dataset:SOURCE/NAME`, `run:ID`...) was indexed; state: the
    /// space kind; weight: bytes (`crate::space`).
    Space,
}

impl CatalogKind {
    pub const ALL: [CatalogKind; 8] = [
        CatalogKind::Dataset,
        CatalogKind::Shuffle,
        CatalogKind::Run,
        CatalogKind::Net,
        CatalogKind::Sprt,
        CatalogKind::PipelineRun,
        CatalogKind::Best,
        CatalogKind::Space,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CatalogKind::Dataset => "dataset",
            CatalogKind::Shuffle => "shuffle",
            CatalogKind::Run => "run",
            CatalogKind::Net => "net",
            CatalogKind::Sprt => "sprt",
            CatalogKind::PipelineRun => "pipeline_run",
            CatalogKind::Best => "best",
            CatalogKind::Space => "space",
        }
    }
}

/// One indexed thing.
#[derive(Clone, Debug, PartialEq)]
pub struct CatalogEntry {
    pub kind: CatalogKind,
    pub name: String,
    /// When the thing was created (RFC 3339, as its manifest says): lists run newest first.
    pub created: String,
    /// A state lists filter on (SPRT tests, pipeline runs), as stored in the manifest.
    pub state: Option<String>,
    /// Names lists filter on: the nets of an SPRT test, the pipeline of a pipeline run.
    pub links: Vec<String>,
    /// How far the thing has got (games counted, steps trained, masks committed): an
    /// upsert with a lower rank than the stored entry's changes nothing, so two writers
    /// racing never take an entry back.
    pub rank: i64,
    /// What aggregates sum (`/metrics`): an SPRT test's games, a dataset's rows.
    pub weight: i64,
    /// The document the lake's list function returns for it, as JSON.
    pub summary: serde_json::Value,
}

impl CatalogEntry {
    /// An entry for `doc`, whose JSON is what lists show.
    pub fn of<T: Serialize>(
        kind: CatalogKind,
        name: impl AsRef<str>,
        created: impl Into<String>,
        doc: &T,
    ) -> Self {
        CatalogEntry {
            kind,
            name: name.as_ref().to_string(),
            created: created.into(),
            state: None,
            links: Vec::new(),
            rank: 0,
            weight: 0,
            summary: serde_json::to_value(doc).expect("catalogued documents serialize"),
        }
    }

    pub fn with_state(mut self, state: impl Into<String>) -> Self {
        self.state = Some(state.into());
        self
    }

    pub fn with_rank(mut self, rank: i64) -> Self {
        self.rank = rank;
        self
    }

    pub fn with_weight(mut self, weight: i64) -> Self {
        self.weight = weight;
        self
    }

    pub fn with_links(mut self, links: impl IntoIterator<Item = String>) -> Self {
        self.links = links.into_iter().collect();
        self.links.sort();
        self.links.dedup();
        self
    }

    /// The summary as its type; an entry that does not parse is reported as corrupt.
    pub fn decode<T: serde::de::DeserializeOwned>(&self) -> Result<T, JobError> {
        serde_json::from_value(self.summary.clone()).map_err(|e| JobError::Corrupt {
            what: "catalogue entry",
            key: format!("metastore catalog/{}/{}", self.kind.as_str(), self.name),
            reason: e.to_string(),
        })
    }
}

/// Where a page goes on from: the last entry of the previous page (newest first by
/// creation time, ties by name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogCursor {
    pub created: String,
    pub name: String,
}

impl CatalogCursor {
    pub fn after(entry: &CatalogEntry) -> Self {
        CatalogCursor {
            created: entry.created.clone(),
            name: entry.name.clone(),
        }
    }

    /// `CREATED~NAME` as the API hands it out.
    pub fn encode(&self) -> String {
        format!("{}~{}", self.created, self.name)
    }

    pub fn parse(s: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("cursor {s:?}: {why} (pass back the `next` of a page)");
        let (created, name) = s.split_once('~').ok_or_else(|| bad("no '~'"))?;
        chrono::DateTime::parse_from_rfc3339(created).map_err(|e| bad(&e.to_string()))?;
        if name.is_empty() || name.len() > 200 || name.chars().any(char::is_control) {
            return Err(bad("not a name"));
        }
        Ok(CatalogCursor {
            created: created.to_string(),
            name: name.to_string(),
        })
    }
}

/// Which entries a page holds.
#[derive(Clone, Debug)]
pub struct CatalogQuery {
    pub kind: CatalogKind,
    pub state: Option<String>,
    /// Entries that link this name.
    pub link: Option<String>,
    pub after: Option<CatalogCursor>,
    pub limit: usize,
}

impl CatalogQuery {
    pub fn all(kind: CatalogKind) -> Self {
        CatalogQuery {
            kind,
            state: None,
            link: None,
            after: None,
            limit: CATALOG_PAGE,
        }
    }
}

/// Entries one query reads at most when a caller wants them all.
pub const CATALOG_PAGE: usize = 1000;

#[derive(Clone, Debug, Default)]
pub struct CatalogPage {
    pub entries: Vec<CatalogEntry>,
    pub next: Option<CatalogCursor>,
}

/// A store of catalogue entries (the metastore's `catalog` table).
#[async_trait::async_trait]
pub trait Catalog: Send + Sync {
    fn describe(&self) -> String;
    /// Inserts the entry of `(kind, name)`, or replaces it unless the stored one has a
    /// higher rank.
    async fn upsert(&self, entry: &CatalogEntry) -> Result<(), JobError>;
    async fn get(&self, kind: CatalogKind, name: &str) -> Result<Option<CatalogEntry>, JobError>;
    async fn page(&self, query: &CatalogQuery) -> Result<CatalogPage, JobError>;
    /// Entries of each kind.
    async fn counts(&self) -> Result<Vec<(CatalogKind, u64)>, JobError>;
    /// Entries of `kind` and their summed weights, by state (one aggregate query).
    async fn totals(&self, kind: CatalogKind) -> Result<Vec<CatalogTotal>, JobError>;
    /// Deletes the entry of `(kind, name)` and its links; whether there was one.
    async fn remove(&self, kind: CatalogKind, name: &str) -> Result<bool, JobError>;
}

/// Entries of one kind in one state, and the sum of their weights.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogTotal {
    pub state: Option<String>,
    pub count: u64,
    pub weight: i64,
}

/// A shared handle on a [`Catalog`], carried by a [`Lake`].
#[derive(Clone)]
pub struct CatalogHandle(pub Arc<dyn Catalog>);

impl std::fmt::Debug for CatalogHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Catalog({})", self.0.describe())
    }
}

impl CatalogHandle {
    /// Every entry matching `query`, page after page (for callers that want a whole list).
    pub async fn all(&self, mut query: CatalogQuery) -> Result<Vec<CatalogEntry>, JobError> {
        let mut out = Vec::new();
        loop {
            let page = self.0.page(&query).await?;
            out.extend(page.entries);
            match page.next {
                Some(next) => query.after = Some(next),
                None => return Ok(out),
            }
        }
    }

    /// Every entry of `kind`, decoded, newest first.
    pub async fn decode_all<T: serde::de::DeserializeOwned>(
        &self,
        query: CatalogQuery,
    ) -> Result<Vec<T>, JobError> {
        self.all(query).await?.iter().map(|e| e.decode()).collect()
    }
}

impl Lake {
    /// Records `entry` in the catalogue this lake carries; nothing without one. Call it after
    /// the manifest the entry summarises is committed to the lake.
    /// Measures the item's space too ([`crate::space::measure`]; a failure there is logged).
    pub async fn index(&self, entry: CatalogEntry) -> Result<(), JobError> {
        match self.catalog() {
            Some(c) => {
                c.0.upsert(&entry).await?;
                // The commit and its entry stand without a measurement: `du` measures an
                // item that has none the next time it reads the catalogue.
                if let Err(e) = crate::space::measure(self, entry.kind, &entry.name).await {
                    tracing::warn!(
                        kind = entry.kind.as_str(),
                        name = entry.name,
                        "space not measured: {e}"
                    );
                }
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Removes the entry `kind`/`name` and its space entries; true when there was one.
    pub async fn unindex(&self, kind: CatalogKind, name: &str) -> Result<bool, JobError> {
        match self.catalog() {
            Some(c) => {
                let was = c.0.remove(kind, name).await?;
                crate::space::forget(self, kind, name).await?;
                Ok(was)
            }
            None => Ok(false),
        }
    }
}
