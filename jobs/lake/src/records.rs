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
