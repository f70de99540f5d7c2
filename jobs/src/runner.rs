//! Runs a queued job and keeps its record: the one place that turns a [`QueuedJob`] into
//! calls of the job functions. Workers (any queue backend) call [`run_queued_job`].

use crate::{JobContext, JobError, Lake, ProgressSink};
use lakefish_lake::records::{JobStore, now};
use lakefish_schemas::{JobId, JobKind, JobRecord, JobSpec, JobState, Progress, QueuedJob};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often a running job's progress is copied into its record.
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(500);

/// What a job kind does when it runs. Each spec type in the registry
/// ([`lakefish_schemas::job_kinds`]) implements it in its job's module; [`run_spec`] is
/// derived from the registry. `kind` tells apart kinds that share a spec type (both ingests,
/// both shuffle passes). Blocking: jobs run on a thread of their own.
pub trait Job {
    fn run(
        &self,
        kind: JobKind,
        ctx: &JobContext,
        id: &JobId,
    ) -> Result<serde_json::Value, JobError>;
}

/// Dispatch, built from the registry: a kind without a `Job` implementation does not compile.
macro_rules! dispatch {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal, $spec:ty, $who:ident; )*) => {
        /// Runs a job spec in-process and returns its result as JSON. Blocking: call it from
        /// a thread of its own (`spawn_blocking`), never from an async task.
        pub fn run_spec(
            ctx: &JobContext,
            id: &JobId,
            spec: &JobSpec,
        ) -> Result<serde_json::Value, JobError> {
            match spec {
                $(JobSpec::$variant(s) => Job::run(s, JobKind::$variant, ctx, id),)*
            }
        }
    };
}
lakefish_schemas::job_kinds!(dispatch);

impl Job for lakefish_schemas::sprt::GauntletSpec {
    fn run(&self, _: JobKind, ctx: &JobContext, _: &JobId) -> Result<serde_json::Value, JobError> {
        let mut done = 0;
        let report = crate::gauntlet::run_here(ctx, self, |status| {
            done += 1;
            ctx.progress.report(&Progress {
                stage: format!(
                    "gauntlet against {}: {} ({} games)",
                    self.against, status.base.name, status.games
                ),
                done,
                total: Some(self.levels.len() as u64),
                unit: "levels".into(),
                rows: 0,
            })
        })?;
        Ok(serde_json::to_value(report)?)
    }
}

impl Job for lakefish_schemas::IngestSpec {
    fn run(
        &self,
        kind: JobKind,
        ctx: &JobContext,
        id: &JobId,
    ) -> Result<serde_json::Value, JobError> {
        let summary = match kind {
            JobKind::IngestPgn => lakefish_ingest::ingest_pgn::ingest_pgn(ctx, id, self)?,
            JobKind::IngestPlain => lakefish_ingest::ingest_records::ingest_plain(ctx, id, self)?,
            JobKind::IngestBullet => lakefish_ingest::ingest_records::ingest_bullet(ctx, id, self)?,
            JobKind::IngestBinpack => {
                lakefish_ingest::ingest_binpack::ingest_binpack(ctx, id, self)?
            }
            other => {
                return Err(JobError::Internal(format!(
                    "an ingest spec dispatched as {other}"
                )));
            }
        };
        Ok(serde_json::to_value(summary)?)
    }
}

impl Job for lakefish_schemas::TrainSpec {
    fn run(&self, _: JobKind, ctx: &JobContext, id: &JobId) -> Result<serde_json::Value, JobError> {
        match &ctx.trainer {
            Some(t) => t.train(ctx, id, self),
            None => Err(JobError::Failed(
                "this process cannot train (it was built without lakefish-train)".into(),
            )),
        }
    }
}

impl Job for lakefish_schemas::QuantizeSpec {
    fn run(&self, _: JobKind, ctx: &JobContext, _: &JobId) -> Result<serde_json::Value, JobError> {
        match &ctx.trainer {
            Some(t) => t.quantize(ctx, self),
            None => Err(JobError::Failed(
                "this process cannot quantize (it was built without lakefish-train)".into(),
            )),
        }
    }
}

#[derive(Default)]
struct Latest(Mutex<Option<Progress>>);

impl ProgressSink for Latest {
    fn report(&self, p: &Progress) {
        *self.0.lock().unwrap() = Some(p.clone());
    }
}

/// Runs a job delivered by the queue. Safe to call more than once for the same job (the queue
/// re-delivers jobs of dead workers): a job that already succeeded is not run again, and a
/// re-run writes the same objects.
///
/// `may_retry` says whether the queue will deliver the job again after a transient failure;
/// the record then goes back to `queued` (keeping the error) instead of `failed`.
/// Returns `Err` when the job failed, after recording why.
pub async fn run_queued_job(
    lake: Lake,
    job: QueuedJob,
    worker: &str,
    threads: usize,
    may_retry: bool,
    hooks: crate::Hooks,
) -> Result<(), JobError> {
    // A queued job's record lives in the deployment's store: no silent fallback to the lake.
    let store = match &hooks.mode {
        crate::Mode::Queued { records, .. } => records.clone(),
        crate::Mode::InProcess => {
            return Err(JobError::Internal(
                "a queued job runs only where the queue's submitter and record store are given \
                 (Mode::Queued)"
                    .into(),
            ));
        }
    };
    let existing = store.get(&job.id).await?;
    let spec = match job.spec() {
        Ok(spec) => spec,
        Err(e) => {
            let err = JobError::Payload(e.to_string());
            if let Some(mut rec) = existing {
                finish(&store, &mut rec, Err(err.to_string())).await?;
            }
            return Err(err);
        }
    };
    // Claimed atomically: of two deliveries racing here each counts its own attempt, and
    // none starts a job whose record already says it succeeded.
    let started = store
        .update(&job.id, |stored| {
            let mut rec =
                stored.unwrap_or_else(|| JobStore::new_record(job.id.clone(), spec.clone()));
            if rec.state == JobState::Succeeded || rec.state == JobState::Cancelled {
                return None;
            }
            if let Some(c) = &rec.cancel {
                // Cancelled while its worker died: it ends here, unrun.
                rec.state = JobState::Cancelled;
                rec.error = Some(cancelled_message(c));
                rec.finished = Some(now());
                return Some(rec);
            }
            if rec.attempts == 0 {
                // What it said while queued (waiting for a GPU worker, say) is over.
                rec.progress = Progress::default();
            }
            rec.state = JobState::Running;
            rec.attempts += 1;
            rec.worker = Some(worker.to_string());
            rec.started = Some(now());
            rec.error = None;
            Some(rec)
        })
        .await?;
    let mut rec = started.expect("stored or written");
    if rec.state != JobState::Running {
        tracing::info!(job = %job.id, state = rec.state.as_str(), "already final; delivery ignored");
        return Ok(());
    }
    tracing::info!(job = %job.id, kind = rec.kind.as_str(), attempt = rec.attempts, "job started");

    let latest = Arc::new(Latest::default());
    let ctx = JobContext::new(lake, tokio::runtime::Handle::current())
        .with_progress(latest.clone())
        .with_threads(threads)
        .with_hooks(hooks);
    let cancel = ctx.cancel.clone();
    let id = job.id.clone();
    let mut work = tokio::task::spawn_blocking(move || run_spec(&ctx, &id, &spec));
    let outcome = loop {
        tokio::select! {
            done = &mut work => break match done {
                Ok(r) => r,
                Err(e) if e.is_panic() => Err(JobError::Panic(format!("job thread panicked: {e}"))),
                // Cancelled (the worker is shutting down): another delivery finishes it.
                Err(e) => Err(JobError::Retry(format!("job thread: {e}"))),
            },
            _ = tokio::time::sleep(PROGRESS_INTERVAL) => {
                let newest = latest.0.lock().unwrap().take();
                if let Some(p) = newest {
                    rec.progress = p;
                }
                // Each beat also reads whether a user asked the job to stop.
                match put_unless_done(&store, &rec).await {
                    // Another delivery of this job already succeeded: this one's work is
                    // redundant, so it stops (its end cannot change the stored success).
                    Ok(stored) if stored.state == JobState::Succeeded => {
                        cancel.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                    Ok(stored) if stored.cancel.is_some() => {
                        rec.cancel = stored.cancel;
                        cancel.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(job = %job.id, "progress not recorded: {e}"),
                }
            }
        }
    };
    let newest = latest.0.lock().unwrap().take();
    if let Some(p) = newest {
        rec.progress = p;
    }
    if rec.cancel.is_none() && matches!(outcome, Err(JobError::Cancelled(_))) {
        // Stopped at a beat that found another delivery's success: nothing to record.
        tracing::info!(job = %job.id, "another delivery succeeded first; this one stopped");
        return Ok(());
    }
    if let (Some(c), Err(JobError::Cancelled(_))) = (rec.cancel.clone(), &outcome) {
        // It stopped because it was asked to. (A job that finished first keeps its result,
        // and its record the request.)
        tracing::info!(job = %job.id, "job cancelled by {}", c.by);
        rec.state = JobState::Cancelled;
        rec.error = Some(cancelled_message(&c));
        rec.finished = Some(now());
        put_unless_done(&store, &rec).await?;
        return Err(JobError::Cancelled(cancelled_message(&c)));
    }
    match outcome {
        Ok(result) => {
            rec.result = Some(result);
            finish(&store, &mut rec, Ok(())).await?;
            tracing::info!(job = %job.id, "job succeeded");
            Ok(())
        }
        Err(e) if e.is_transient() && may_retry => {
            tracing::warn!(job = %job.id, "attempt {} failed, will retry: {e}", rec.attempts);
            rec.state = JobState::Queued;
            rec.error = Some(format!("attempt {} failed, will retry: {e}", rec.attempts));
            put_unless_done(&store, &rec).await?;
            Err(e)
        }
        Err(e) => {
            tracing::warn!(job = %job.id, "job failed: {e}");
            finish(&store, &mut rec, Err(e.to_string())).await?;
            Err(e)
        }
    }
}

/// Writes the record unless another delivery of the same job already finished it
/// successfully (a worker presumed dead may still be running): one compare-and-swap.
async fn put_unless_done(store: &JobStore, rec: &JobRecord) -> Result<JobRecord, JobError> {
    store.put_unless_succeeded(rec).await
}

fn cancelled_message(c: &lakefish_schemas::Requested) -> String {
    format!("cancelled by {} at {}", c.by, c.at)
}

/// Asks job `id` to stop, on behalf of `by`: a queued job turns `cancelled` at once (no
/// worker will start it); a running one is told at its worker's next beat and turns
/// `cancelled` when its work stops. A finished job is a conflict, and nothing changes.
pub async fn cancel_job(store: &JobStore, id: &JobId, by: &str) -> Result<JobRecord, JobError> {
    let mut refused = None;
    let stored = store
        .update(id, |stored| {
            let mut rec = stored?;
            if rec.state.is_final() || rec.kind.is_internal() {
                refused = Some(rec.clone());
                return None;
            }
            if rec.cancel.is_none() {
                rec.cancel = Some(lakefish_schemas::Requested {
                    by: by.to_string(),
                    at: now(),
                });
            }
            if rec.state == JobState::Queued {
                rec.state = JobState::Cancelled;
                rec.error = rec.cancel.as_ref().map(cancelled_message);
                rec.finished = Some(now());
            }
            Some(rec)
        })
        .await?;
    if let Some(rec) = refused {
        if rec.kind.is_internal() {
            return Err(JobError::Conflict(format!(
                "job {id} is a {} task lakefish queued for another job: stop what it serves \
                 instead (an SPRT test with `lakefish sprt stop`, a shuffle by cancelling its job)",
                rec.kind.as_str()
            )));
        }
        return Err(JobError::Conflict(format!(
            "job {id} is {}: only a queued or running job can be cancelled",
            rec.state.as_str()
        )));
    }
    stored.ok_or_else(|| JobError::NotFound(format!("job {id} not found")))
}

async fn finish(
    store: &JobStore,
    rec: &mut JobRecord,
    outcome: Result<(), String>,
) -> Result<(), JobError> {
    match outcome {
        Ok(()) => rec.state = JobState::Succeeded,
        Err(e) => {
            rec.state = JobState::Failed;
            rec.error = Some(e);
        }
    }
    rec.finished = Some(now());
    put_unless_done(store, rec).await.map(drop)
}
