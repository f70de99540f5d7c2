//! Jobs run in this process (`lakefish ingest|mask|shuffle|train|...` without `--api`): the
//! same job functions a worker runs, with a progress bar instead of a job record.

use crate::cli_progress;
use crate::config::cores;
use lakefish_jobs::JobContext;
use lakefish_schemas::{JobId, JobSpec};
use std::sync::Arc;

/// Runs a job in this process with a progress bar and prints its result.
pub(crate) fn run_here(
    lake: &str,
    rt: &tokio::runtime::Handle,
    spec: JobSpec,
    threads: Option<usize>,
) -> anyhow::Result<()> {
    let out = run_here_value(lake, rt, spec, threads)?;
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

/// Runs a job in this process with a progress bar and returns its result.
pub(crate) fn run_here_value(
    lake: &str,
    rt: &tokio::runtime::Handle,
    spec: JobSpec,
    threads: Option<usize>,
) -> anyhow::Result<serde_json::Value> {
    let lake = rt.block_on(crate::config::open_lake_for_writing(lake))?;
    let bar = Arc::new(cli_progress::Bar::new());
    let ctx = JobContext::new(lake, rt.clone())
        .with_progress(bar.clone())
        .with_threads(threads.unwrap_or_else(cores))
        .with_hooks(lakefish_jobs::Hooks {
            // In-process jobs queue nothing: no record of theirs is kept.
            mode: lakefish_jobs::Mode::InProcess,
            trainer: Some(Arc::new(lakefish_train::LakefishTrainer)),
            // The user's own machine and files: the CLI reads any path its user can.
            inputs: lakefish_lake::input::InputPolicy::Unconfined,
        });
    let out = lakefish_jobs::runner::run_spec(&ctx, &JobId::new(), &spec);
    bar.finish();
    Ok(out?)
}

/// Who acts from this terminal, for records of actions done on the lake directly: the login
/// name, as `local:<name>` (a token's name is what the API records).
pub(crate) fn user() -> String {
    let name = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .ok()
        .filter(|n| !n.is_empty())
        .or_else(login_of_this_process)
        .unwrap_or_else(|| "unknown".into());
    format!("local:{name}")
}

/// The login name of this process's user, from `/etc/passwd` (services and containers often
/// run without `USER`).
fn login_of_this_process() -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata("/proc/self").ok()?.uid().to_string();
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        (f.nth(1)? == uid).then(|| name.to_string())
    })
}
