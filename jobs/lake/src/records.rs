//! Job records: one per job (state, progress, result, error, attempts, worker, times), read by
//! every API process and worker on any machine. Where they live is a [`RecordBackend`]: a
//! database (crate `lakefish-metastore`: SQLite or PostgreSQL, the default) or the lake
//! itself ([`LakeRecords`], `jobs/<id>.json`: what older versions wrote, kept for reading
//! such lakes and as the reference the metastore bench measures against).

use crate::{JobError, Lake};
use futures::{StreamExt, TryStreamExt};
use lakefish_schemas::{JobId, JobRecord, JobSpec, JobState, Progress};
use std::sync::Arc;

pub const JOBS_PREFIX: &str = "jobs";

/// Job records the lake backend reads per list or tally at most (newest first by id).
pub const MAX_LAKE_RECORDS_SCANNED: usize = 100_000;

pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Where a list of job records goes on from: the last record of the previous page.
/// Pages run newest first by creation time, ties broken by id, so a job created while a
/// client pages never shifts what the next page holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobCursor {
    pub created: String,
    pub id: String,
}

impl JobCursor {
    pub fn after(rec: &JobRecord) -> Self {
        JobCursor {
            created: rec.created.clone(),
            id: rec.id.to_string(),
        }
    }

    /// `CREATED_ID` as the API hands it out (both parts are URL-safe).
    pub fn encode(&self) -> String {
        format!("{}_{}", self.created, self.id)
    }

    pub fn parse(s: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("cursor {s:?}: {why} (pass back the `next` of a page)");
        let (created, id) = s.split_once('_').ok_or_else(|| bad("no '_'"))?;
        let created = chrono::DateTime::parse_from_rfc3339(created)
            .map_err(|e| bad(&e.to_string()))?
            .with_timezone(&chrono::Utc);
        JobId::parse(id).ok_or_else(|| bad("not a job id"))?;
        // Compared as text with stored times: written as `now()` writes them.
        Ok(JobCursor {
            created: created.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            id: id.to_string(),
        })
    }

    /// Does `rec` come after this cursor (older, or as old with a smaller id)?
    fn precedes(&self, rec: &JobRecord) -> bool {
        (rec.created.as_str(), rec.id.as_str()) < (self.created.as_str(), self.id.as_str())
    }
}

/// Which records a page holds.
#[derive(Clone, Debug, Default)]
pub struct JobQuery {
    pub state: Option<JobState>,
    pub kind: Option<lakefish_schemas::JobKind>,
    pub after: Option<JobCursor>,
    pub limit: usize,
    /// Leave out the tasks lakefish queues itself ([`lakefish_schemas::JobKind::is_internal`]),
    /// so a page's `limit` counts what people submitted.
    pub submitted_only: bool,
}

#[derive(Clone, Debug, Default)]
pub struct JobPage {
    pub jobs: Vec<JobRecord>,
    /// The cursor of the next page; `None` on the last.
    pub next: Option<JobCursor>,
}

/// How many jobs of a kind are in a state, and how long the finished ones took.
#[derive(Clone, Debug, PartialEq)]
pub struct JobTally {
    pub kind: lakefish_schemas::JobKind,
    pub state: JobState,
    pub count: u64,
    /// Start to finish, summed over the `timed` records that have both.
    pub seconds: f64,
    pub timed: u64,
}

/// Seconds from `started` to `finished` of a finished record.
pub fn run_seconds(rec: &JobRecord) -> Option<f64> {
    let a = chrono::DateTime::parse_from_rfc3339(rec.started.as_deref()?).ok()?;
    let b = chrono::DateTime::parse_from_rfc3339(rec.finished.as_deref()?).ok()?;
    Some(((b - a).num_milliseconds() as f64 / 1000.0).max(0.0))
}

/// A change to one record, decided on the record as stored (see [`JobStore::update`]).
pub type RecordChange<'a> = dyn FnMut(Option<JobRecord>) -> Option<JobRecord> + Send + 'a;

/// One place job records are kept. Implementations make [`RecordBackend::update`] a
/// compare-and-swap: a change decided on a record another writer has since replaced is
/// decided again on what that writer stored.
#[async_trait::async_trait]
pub trait RecordBackend: Send + Sync {
    /// Where the records are, for logs and errors (no password).
    fn describe(&self) -> String;
    async fn get(&self, id: &JobId) -> Result<Option<JobRecord>, JobError>;
    async fn update(
        &self,
        id: &JobId,
        change: &mut RecordChange<'_>,
    ) -> Result<Option<JobRecord>, JobError>;
    async fn delete(&self, id: &JobId) -> Result<(), JobError>;
    async fn page(&self, query: &JobQuery) -> Result<JobPage, JobError>;
    /// Counts by kind and state (every pair that has a record).
    async fn tally(&self) -> Result<Vec<JobTally>, JobError>;
}

/// The job records of a deployment, whichever backend keeps them.
#[derive(Clone)]
pub struct JobStore {
    backend: Arc<dyn RecordBackend>,
}

impl std::fmt::Debug for JobStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JobStore({})", self.backend.describe())
    }
}

impl JobStore {
    /// Records kept in the lake (`jobs/<id>.json`).
    pub fn new(lake: Lake) -> Self {
        Self::with_backend(Arc::new(LakeRecords { lake }))
    }

    pub fn with_backend(backend: Arc<dyn RecordBackend>) -> Self {
        JobStore { backend }
    }

    pub fn describe(&self) -> String {
        self.backend.describe()
    }

    /// A fresh record in state `queued`.
    pub fn new_record(id: JobId, spec: JobSpec) -> JobRecord {
        JobRecord {
            id,
            kind: spec.job_kind(),
            spec,
            state: JobState::Queued,
            progress: Progress::default(),
            error: None,
            result: None,
            attempts: 0,
            worker: None,
            created: now(),
            started: None,
            finished: None,
            cancel: None,
        }
    }

    /// Changes the stored record atomically: `change` sees the record as stored (`None` when
    /// there is none) and returns what to store, or `None` to leave it. A write that another
    /// writer overtook is decided again on what that writer stored (compare-and-swap), so
    /// concurrent deliveries of one job never lose or overwrite each other's decisions.
    /// Returns the record as stored afterwards.
    pub async fn update(
        &self,
        id: &JobId,
        mut change: impl FnMut(Option<JobRecord>) -> Option<JobRecord> + Send,
    ) -> Result<Option<JobRecord>, JobError> {
        self.backend.update(id, &mut change).await
    }

    /// Stores `rec` unless the stored record already succeeded (and `rec` did not), or a
    /// newer attempt has started since `rec`'s: a succeeded job's record is final, and a
    /// delivery presumed dead never writes over the one that replaced it — except with its
    /// success: jobs are idempotent, so an older attempt that finished has done the job, and
    /// the newer one (which may fail on what the success cleaned up) must not undo that.
    pub async fn put_unless_succeeded(&self, rec: &JobRecord) -> Result<JobRecord, JobError> {
        let stored = self
            .update(&rec.id, |stored| match stored {
                // A success is final: the first one to be recorded stands.
                Some(s) if s.state == JobState::Succeeded => None,
                Some(s) if s.attempts > rec.attempts && rec.state == JobState::Succeeded => {
                    Some(JobRecord {
                        attempts: s.attempts,
                        worker: s.worker.clone(),
                        cancel: s.cancel.clone().or_else(|| rec.cancel.clone()),
                        ..rec.clone()
                    })
                }
                Some(s) if s.attempts > rec.attempts => None,
                // A user's cancel request, made while this writer worked, is kept.
                Some(s) if s.cancel.is_some() && rec.cancel.is_none() => Some(JobRecord {
                    cancel: s.cancel,
                    ..rec.clone()
                }),
                _ => Some(rec.clone()),
            })
            .await?;
        Ok(stored.expect("stored or written"))
    }

    /// Stores `rec` whatever is stored.
    pub async fn put(&self, rec: &JobRecord) -> Result<(), JobError> {
        self.update(&rec.id, |_| Some(rec.clone())).await.map(drop)
    }

    /// Forgets a record (one whose job never reached the queue).
    pub async fn delete(&self, id: &JobId) -> Result<(), JobError> {
        self.backend.delete(id).await
    }

    pub async fn get(&self, id: &JobId) -> Result<Option<JobRecord>, JobError> {
        self.backend.get(id).await
    }

    /// The first `limit` records, newest first, optionally only those in `state`.
    pub async fn list(
        &self,
        state: Option<JobState>,
        limit: usize,
    ) -> Result<Vec<JobRecord>, JobError> {
        let query = JobQuery {
            state,
            limit,
            ..JobQuery::default()
        };
        Ok(self.backend.page(&query).await?.jobs)
    }

    pub async fn page(&self, query: &JobQuery) -> Result<JobPage, JobError> {
        self.backend.page(query).await
    }

    pub async fn tally(&self) -> Result<Vec<JobTally>, JobError> {
        self.backend.tally().await
    }
}

/// Records as objects in the lake, `jobs/<id>.json`: each list reads every record (up to
/// [`MAX_LAKE_RECORDS_SCANNED`]), which is why deployments keep them in a database.
#[derive(Clone, Debug)]
pub struct LakeRecords {
    lake: Lake,
}

impl LakeRecords {
    pub fn new(lake: Lake) -> Self {
        LakeRecords { lake }
    }

    fn key(id: &JobId) -> String {
        format!("{JOBS_PREFIX}/{id}.json")
    }

    /// Every record, newest id first (UUIDv7 ids sort by creation time). Unreadable objects
    /// are skipped: one damaged record must not hide the others.
    pub async fn scan(&self, max: usize) -> Result<Vec<JobRecord>, JobError> {
        let mut metas = self.lake.list(JOBS_PREFIX).await?;
        metas.retain(|m| m.location.as_ref().ends_with(".json"));
        metas.reverse();
        metas.truncate(max);
        futures::stream::iter(metas)
            .map(|m| {
                let key = m.location.to_string();
                async move {
                    let bytes = self.lake.get(&key).await?;
                    Ok::<_, JobError>(
                        bytes.and_then(|b| serde_json::from_slice::<JobRecord>(&b).ok()),
                    )
                }
            })
            .buffered(16)
            .try_filter_map(|r| async move { Ok(r) })
            .try_collect()
            .await
    }
}

#[async_trait::async_trait]
impl RecordBackend for LakeRecords {
    fn describe(&self) -> String {
        format!("lake:{}", self.lake.describe())
    }

    async fn get(&self, id: &JobId) -> Result<Option<JobRecord>, JobError> {
        self.lake.get_json(&Self::key(id), "job record").await
    }

    async fn update(
        &self,
        id: &JobId,
        change: &mut RecordChange<'_>,
    ) -> Result<Option<JobRecord>, JobError> {
        let key = Self::key(id);
        for _ in 0..1000 {
            let (current, version) = match self.lake.get_versioned(&key).await? {
                Some((bytes, v)) => {
                    let rec = serde_json::from_slice(&bytes).map_err(|e| JobError::Corrupt {
                        what: "job record",
                        key: key.clone(),
                        reason: e.to_string(),
                    })?;
                    (Some(rec), Some(v))
                }
                None => (None, None),
            };
            let Some(next) = change(current.clone()) else {
                return Ok(current);
            };
            let bytes = serde_json::to_vec_pretty(&next)?;
            if self
                .lake
                .put_if_unchanged(&key, bytes, version.as_ref())
                .await?
            {
                return Ok(Some(next));
            }
        }
        Err(JobError::Retry(format!(
            "{key} kept changing under 1000 writes"
        )))
    }

    async fn delete(&self, id: &JobId) -> Result<(), JobError> {
        self.lake.delete(&Self::key(id)).await
    }

    async fn page(&self, query: &JobQuery) -> Result<JobPage, JobError> {
        let mut all = self.scan(MAX_LAKE_RECORDS_SCANNED).await?;
        all.retain(|r| {
            query.state.is_none_or(|s| r.state == s)
                && query.kind.as_ref().is_none_or(|k| r.kind == *k)
                && !(query.submitted_only && r.kind.is_internal())
                && query.after.as_ref().is_none_or(|c| c.precedes(r))
        });
        all.sort_by(|a, b| (&b.created, b.id.as_str()).cmp(&(&a.created, a.id.as_str())));
        let more = all.len() > query.limit;
        all.truncate(query.limit);
        let next = if more {
            all.last().map(JobCursor::after)
        } else {
            None
        };
        Ok(JobPage { jobs: all, next })
    }

    async fn tally(&self) -> Result<Vec<JobTally>, JobError> {
        let mut by: std::collections::BTreeMap<(&'static str, &'static str), JobTally> =
            Default::default();
        for r in self.scan(MAX_LAKE_RECORDS_SCANNED).await? {
            let t = by
                .entry((r.kind.as_str(), r.state.as_str()))
                .or_insert_with(|| JobTally {
                    kind: r.kind,
                    state: r.state,
                    count: 0,
                    seconds: 0.0,
                    timed: 0,
                });
            t.count += 1;
            if let Some(s) = run_seconds(&r) {
                t.seconds += s;
                t.timed += 1;
            }
        }
        Ok(by.into_values().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::FaultyStore;

    fn record() -> JobRecord {
        let spec: JobSpec = serde_json::from_value(serde_json::json!({
            "kind": "ingest_pgn",
            "spec": { "inputs": ["lake:raw/a.pgn"], "dataset": "d" }
        }))
        .unwrap();
        let mut rec = JobStore::new_record(JobId::new(), spec);
        rec.state = JobState::Running;
        rec
    }

    /// Another delivery records success between this one's read and its write: the success
    /// stays (a get-then-put would overwrite it with the failure).
    #[tokio::test]
    async fn a_racing_failure_never_overwrites_a_success() {
        let faulty = FaultyStore::new();
        let store = JobStore::new(Lake::from_store(faulty.clone(), "faulty"));
        let running = record();
        store.put(&running).await.unwrap();
        let mut succeeded = running.clone();
        succeeded.state = JobState::Succeeded;
        *faulty.race_next_conditional_put.lock().unwrap() = Some((
            LakeRecords::key(&running.id).into(),
            serde_json::to_vec(&succeeded).unwrap().into(),
        ));
        let mut failed = running.clone();
        failed.state = JobState::Failed;
        let stored = store.put_unless_succeeded(&failed).await.unwrap();
        assert_eq!(stored.state, JobState::Succeeded);
        let now = store.get(&running.id).await.unwrap().unwrap();
        assert_eq!(now.state, JobState::Succeeded);
    }

    /// A delivery presumed dead reports after a newer attempt started: its report is dropped
    /// (it would undo the newer attempt's count, or fail a job still running).
    #[tokio::test]
    async fn an_older_attempt_never_writes_over_a_newer_one() {
        let store = JobStore::new(Lake::in_memory());
        let mut old = record();
        old.attempts = 1;
        let mut newer = old.clone();
        newer.attempts = 2;
        store.put(&newer).await.unwrap();
        old.state = JobState::Failed;
        let stored = store.put_unless_succeeded(&old).await.unwrap();
        assert_eq!((stored.attempts, stored.state), (2, JobState::Running));
    }

    /// An older delivery succeeds while a newer one runs: the success stands (the job is
    /// done), the attempt count is kept, and the newer delivery's failure cannot undo it.
    #[tokio::test]
    async fn an_older_attempts_success_stands() {
        let store = JobStore::new(Lake::in_memory());
        let mut old = record();
        old.attempts = 1;
        let mut newer = old.clone();
        newer.attempts = 2;
        store.put(&newer).await.unwrap();
        old.state = JobState::Succeeded;
        let stored = store.put_unless_succeeded(&old).await.unwrap();
        assert_eq!((stored.attempts, stored.state), (2, JobState::Succeeded));
        newer.state = JobState::Failed;
        newer.error = Some("its inputs were cleaned up".into());
        let stored = store.put_unless_succeeded(&newer).await.unwrap();
        assert_eq!((stored.state, stored.error), (JobState::Succeeded, None));
    }

    /// Two deliveries starting at once each count their attempt: none is lost.
    #[tokio::test]
    async fn concurrent_updates_count_every_attempt() {
        let faulty = FaultyStore::new();
        let store = JobStore::new(Lake::from_store(faulty.clone(), "faulty"));
        let rec = record();
        store.put(&rec).await.unwrap();
        let mut raced = rec.clone();
        raced.attempts = 1;
        *faulty.race_next_conditional_put.lock().unwrap() = Some((
            LakeRecords::key(&rec.id).into(),
            serde_json::to_vec(&raced).unwrap().into(),
        ));
        let stored = store
            .update(&rec.id, |r| {
                let mut r = r.unwrap();
                r.attempts += 1;
                Some(r)
            })
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stored.attempts, 2);
    }
}
