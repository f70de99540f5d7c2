//! Job records, kept in the lake as `jobs/<id>.json` so every API process and worker, on any
//! machine, sees the same history, and it survives restarts of all of them.

use crate::{JobError, Lake};
use futures::{StreamExt, TryStreamExt};
use lakefish_schemas::{JobId, JobRecord, JobSpec, JobState, Progress};

pub const JOBS_PREFIX: &str = "jobs";

pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[derive(Clone, Debug)]
pub struct JobStore {
    lake: Lake,
}

impl JobStore {
    pub fn new(lake: Lake) -> Self {
        JobStore { lake }
    }

    fn key(id: &JobId) -> String {
        format!("{JOBS_PREFIX}/{id}.json")
    }

    /// A fresh record in state `queued`.
    pub fn new_record(id: JobId, spec: JobSpec) -> JobRecord {
        JobRecord {
            id,
            kind: spec.kind().to_string(),
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
        mut change: impl FnMut(Option<JobRecord>) -> Option<JobRecord>,
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

    /// Stores `rec` unless the stored record already succeeded (and `rec` did not), or a
    /// newer attempt has started since `rec`'s: a succeeded job's record is final, and a
    /// delivery presumed dead never writes over the one that replaced it.
    pub async fn put_unless_succeeded(&self, rec: &JobRecord) -> Result<JobRecord, JobError> {
        let stored = self
            .update(&rec.id, |stored| match stored {
                Some(s) if s.state == JobState::Succeeded && rec.state != JobState::Succeeded => {
                    None
                }
                Some(s) if s.attempts > rec.attempts => None,
                _ => Some(rec.clone()),
            })
            .await?;
        Ok(stored.expect("stored or written"))
    }

    pub async fn put(&self, rec: &JobRecord) -> Result<(), JobError> {
        let bytes = serde_json::to_vec_pretty(rec)?;
        self.lake.put(&Self::key(&rec.id), bytes).await
    }

    /// Forgets a record (one whose job never reached the queue).
    pub async fn delete(&self, id: &JobId) -> Result<(), JobError> {
        self.lake.delete(&Self::key(id)).await
    }

    pub async fn get(&self, id: &JobId) -> Result<Option<JobRecord>, JobError> {
        self.lake.get_json(&Self::key(id), "job record").await
    }

    /// Records, newest first, optionally only those in `state`.
    pub async fn list(
        &self,
        state: Option<JobState>,
        limit: usize,
    ) -> Result<Vec<JobRecord>, JobError> {
        let mut metas = self.lake.list(JOBS_PREFIX).await?;
        metas.retain(|m| m.location.as_ref().ends_with(".json"));
        metas.reverse(); // UUIDv7 ids sort by creation time
        let mut out = Vec::new();
        let mut stream = futures::stream::iter(metas)
            .map(|m| {
                let key = m.location.to_string();
                async move {
                    let bytes = self.lake.get(&key).await?;
                    Ok::<_, JobError>(
                        bytes.and_then(|b| serde_json::from_slice::<JobRecord>(&b).ok()),
                    )
                }
            })
            .buffered(16);
        while let Some(rec) = stream.try_next().await? {
            if let Some(rec) = rec.filter(|r| state.is_none_or(|s| r.state == s)) {
                out.push(rec);
                if out.len() >= limit {
                    break;
                }
            }
        }
        Ok(out)
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
            JobStore::key(&running.id).into(),
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
            JobStore::key(&rec.id).into(),
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
