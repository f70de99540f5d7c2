//! The scheduler of `lakefish serve`: apalis-cron workers start pipeline runs at their cron
//! times, and a driver loop advances every running pipeline run and every experiment not
//! ended once a second; with `[retention]`, a collection (`lakefish_jobs::gc`) every
//! `every_hours`. All only read and write the lake (and the job records), so a restarted
//! server carries on where its predecessor stopped.

use crate::queue::Queue;
use apalis::prelude::*;
use apalis_cron::{CronScheduler, Tick};
use lakefish_jobs::{Hooks, JobContext, Lake};
use lakefish_lake::input::InputPolicy;
use lakefish_lake::records::JobStore;
use lakefish_schemas::config::Config;
use lakefish_schemas::pipeline::RunState;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

/// How often running pipeline runs are looked at.
pub const DRIVE_EVERY: Duration = Duration::from_secs(1);

/// A config's schedule as a cron schedule; the error names the pipeline.
pub fn schedule(name: &str, expr: &str) -> anyhow::Result<cron::Schedule> {
    cron::Schedule::from_str(expr)
        .map_err(|e| anyhow::anyhow!("pipelines.{name}.schedule {expr:?}: {e}"))
}

/// The next time a schedule fires, RFC 3339.
pub fn next_time(expr: &str) -> Option<String> {
    let s = cron::Schedule::from_str(expr).ok()?;
    s.upcoming(chrono::Utc)
        .next()
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

struct CronState {
    lake: Lake,
    pipeline: String,
}

async fn on_tick(tick: Tick, state: Data<Arc<CronState>>) -> Result<(), BoxDynError> {
    tracing::info!(
        pipeline = state.pipeline,
        at = tick.get_timestamp(),
        "scheduled run"
    );
    lakefish_jobs::pipeline::start_run(&state.lake, &state.pipeline, "schedule").await?;
    Ok(())
}

/// Runs the cron workers and the driver until the process ends.
pub async fn run(
    lake: Lake,
    jobs: JobStore,
    queue: Queue,
    config: Arc<Config>,
) -> anyhow::Result<()> {
    let mut crons = Vec::new();
    for (name, p) in &config.pipelines {
        let Some(expr) = &p.schedule else { continue };
        let state = Arc::new(CronState {
            lake: lake.clone(),
            pipeline: name.clone(),
        });
        let worker = WorkerBuilder::new(format!("cron-{name}"))
            .backend(CronScheduler::new(schedule(name, expr)?))
            .data(state)
            .build(on_tick);
        tracing::info!(pipeline = name, schedule = expr, "pipeline scheduled");
        crons.push(tokio::spawn(async move { worker.run().await }));
    }
    if let Some(r) = config.retention.clone() {
        let (lake, jobs) = (lake.clone(), jobs.clone());
        tracing::info!(every_hours = r.every_hours, keep_checkpoints = r.keep_checkpoints, unused_shuffle_days = ?r.unused_shuffle_days, "retention scheduled");
        tokio::spawn(async move {
            let every = Duration::from_secs(3600 * u64::from(r.every_hours));
            loop {
                tokio::time::sleep(every).await;
                match lakefish_jobs::gc::collect(&lake, &jobs, (&r).into(), "scheduler").await {
                    Ok(rec) => tracing::info!(
                        bytes = rec.removed_bytes,
                        objects = rec.removed_objects,
                        "retention: collected"
                    ),
                    Err(e) => tracing::warn!("retention: {e}; trying again next time"),
                }
            }
        });
    }
    let ctx = JobContext::new(lake.clone(), tokio::runtime::Handle::current()).with_hooks(Hooks {
        mode: lakefish_jobs::Mode::Queued {
            submitter: queue.submitter(jobs.clone()),
            records: jobs,
        },
        trainer: None,
        inputs: InputPolicy::confined(&config.inputs.local_roots),
    });
    let ctx = Arc::new(ctx);
    loop {
        tokio::time::sleep(DRIVE_EVERY).await;
        let (ctx, config) = (ctx.clone(), config.clone());
        let driven = tokio::task::spawn_blocking(move || drive(&ctx, &config)).await;
        match driven {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("driver: {e}; trying again"),
            Err(e) => tracing::error!("driver panicked: {e}"),
        }
    }
}

/// Advances every running run of every configured pipeline, then every experiment, each on
/// its own: one pipeline's trouble (its lake listing failing, say) never holds up the others. A run whose step fails
/// for good is marked failed by `advance`; only transient errors come back here, and the
/// run is advanced again on the next sweep.
fn drive(ctx: &JobContext, config: &Config) -> Result<(), lakefish_jobs::JobError> {
    let mut first_error = None;
    for (name, p) in &config.pipelines {
        let runs = match ctx.block_on(lakefish_jobs::pipeline::list_runs(&ctx.lake, name, 20)) {
            Ok(runs) => runs,
            Err(e) => {
                tracing::warn!(pipeline = name, "listing runs: {e}");
                first_error.get_or_insert(e);
                continue;
            }
        };
        for mut run in runs.into_iter().filter(|r| r.state == RunState::Running) {
            if let Err(e) = lakefish_jobs::pipeline::advance(ctx, p, &mut run) {
                tracing::warn!(pipeline = name, run = run.id, "advancing: {e}");
                first_error.get_or_insert(e);
            }
        }
    }
    if let Err(e) = lakefish_jobs::experiment::drive(ctx) {
        first_error.get_or_insert(e);
    }
    first_error.map_or(Ok(()), Err)
}
