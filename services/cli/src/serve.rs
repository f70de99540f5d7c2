//! `lakefish serve` (API, scheduler and in-process workers) and `lakefish worker` (workers
//! on the shared Redis queue). Both give their workers the trainer.

use crate::cli::{MetastoreArg, MetastoreCommand, QueueArgs, WorkArgs};
use crate::config::{cores, open_lake};
use anyhow::{Context, bail};
use lakefish_lake::catalog::CatalogHandle;
use lakefish_lake::input::InputPolicy;
use lakefish_lake::records::JobStore;
use lakefish_metastore::{MetastoreSpec, SqlRecords};
use lakefish_schemas::JobId;
use lakefish_schemas::config::Config;
use lakefish_services::{AppState, Queue, WorkerSpec, scheduler};
use std::net::SocketAddr;
use std::sync::Arc;

/// `<host>-<pid>-<random>`: apalis refuses a worker name it still believes alive, and a
/// restarted container can get the same pid.
fn default_worker_name() -> String {
    let host = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
    let host = if host.trim().is_empty() {
        "worker"
    } else {
        host.trim()
    };
    let suffix = &JobId::new().to_string()[24..];
    format!("{host}-{}-{suffix}", std::process::id())
}

/// Ctrl-C, or the SIGTERM that systemd and Docker send to stop a service.
async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
}

/// How long an upload's staging file may sit untouched before `serve` removes it at start.
pub(crate) const STAGING_MAX_IDLE: std::time::Duration = std::time::Duration::from_secs(3600);

pub(crate) async fn serve(
    lake: &str,
    listen: &str,
    q: QueueArgs,
    work: WorkArgs,
    (no_workers, no_scheduler): (bool, bool),
    config: Config,
) -> anyhow::Result<()> {
    for (name, p) in &config.pipelines {
        if let Some(expr) = &p.schedule {
            scheduler::schedule(name, expr)?;
        }
    }
    if no_workers && q.redis.is_none() {
        bail!(
            "--no-workers needs --redis: only a Redis queue can be served by separate `lakefish worker` processes"
        );
    }
    let worker = worker_spec(default_worker_name(), &work)?;
    let lake = open_lake(lake)?;
    let inputs = InputPolicy::confined(&config.inputs.local_roots);
    let queue = match &q.redis {
        Some(url) => Queue::redis(url).await?,
        None => Queue::sqlite(&q.queue_db).await?,
    };
    let (lake, jobs) =
        open_metastore(&q.meta, lake, q.redis.is_none().then_some(&q.queue_db)).await?;
    // Uploads a killed server left half-written: an hour untouched is long past any live one.
    for prefix in ["raw", lakefish_schemas::engines::ENGINE_BINARIES] {
        match lake.sweep_staging(prefix, STAGING_MAX_IDLE) {
            Ok(keys) => {
                for key in keys {
                    tracing::info!(key, "removed the staging file of an interrupted upload");
                }
            }
            // Serving matters more than tidying: say what is left and go on.
            Err(e) => tracing::warn!("could not sweep upload staging files: {e}"),
        }
    }
    let state = AppState {
        lake: lake.clone(),
        jobs: jobs.clone(),
        queue: queue.clone(),
        config: Arc::new(config),
    };
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let addr = listener.local_addr()?;
    check_exposure(
        addr,
        state.config.auth.enabled(),
        state.config.server.open_api_without_tokens == Some(true),
    )?;
    // Also without pipelines: the scheduler drives experiments.
    if !no_scheduler {
        let (lake, jobs, queue, config) = (
            lake.clone(),
            jobs.clone(),
            queue.clone(),
            state.config.clone(),
        );
        tokio::spawn(async move {
            if let Err(e) = scheduler::run(lake, jobs, queue, config).await {
                tracing::error!("the scheduler stopped: {e}");
            }
        });
    }
    tracing::info!(
        lake = lake.describe(),
        queue = queue.describe(),
        metastore = jobs.describe(),
        "serving on http://{addr}"
    );
    // Machine-readable line for scripts and tests that pass port 0.
    println!("listening on http://{addr}");
    let limits = state.config.server.clone();
    let app = lakefish_services::router(state);
    let server = lakefish_services::http::serve(listener, app, &limits, shutdown_signal());
    if no_workers {
        server.await?;
        return Ok(());
    }
    let workers = queue.run_workers(
        (lake, jobs),
        worker,
        Some(Arc::new(lakefish_train::LakefishTrainer)),
        inputs,
    );
    tokio::select! {
        r = server => r?,
        r = workers => r?,
    }
    Ok(())
}

/// The job records `--metastore` names, and the lake with the catalogue beside them. Unset:
/// a SQLite file beside the SQLite queue file, or, with a Redis queue (workers on other
/// machines cannot share a file), the lake as before the metastore (no catalogue), with a
/// warning that says what to set. A catalogue created just now is filled from the lake.
pub(crate) async fn open_metastore(
    arg: &MetastoreArg,
    lake: lakefish_jobs::Lake,
    sqlite_queue: Option<&String>,
) -> anyhow::Result<(lakefish_jobs::Lake, JobStore)> {
    let spec = metastore_spec(arg, sqlite_queue)?;
    let opened = lakefish_metastore::open(&spec, &lake)
        .await
        .with_context(|| format!("opening the metastore {}", spec.describe()))?;
    let Some(catalog) = opened.catalog else {
        return Ok((lake, opened.jobs));
    };
    let marker = lakefish_jobs::catalog::read_marker(&lake).await?;
    if opened.catalog_is_new {
        let report = lakefish_jobs::catalog::rebuild(&lake, &catalog)
            .await
            .with_context(|| format!("indexing {} into {}", lake.describe(), spec.describe()))?;
        tracing::info!(metastore = spec.describe(), indexed = ?report.indexed, "catalogue created from the lake");
    } else if !marker.is_some_and(|m| m.names(&lake, &spec.locator())) {
        // The lake was last indexed by another metastore (or this is a copy of it): this
        // catalogue missed what was written meanwhile and may list what is gone.
        let report = lakefish_jobs::catalog::rebuild_and_prune(&lake, &catalog)
            .await
            .with_context(|| format!("indexing {} into {}", lake.describe(), spec.describe()))?;
        tracing::info!(metastore = spec.describe(), indexed = ?report.indexed, pruned = ?report.pruned, "catalogue brought up to date with the lake, which another metastore indexed last");
    }
    lakefish_jobs::catalog::mark(&lake, &spec.locator()).await?;
    Ok((lake.with_catalog(catalog), opened.jobs))
}

fn metastore_spec(
    arg: &MetastoreArg,
    sqlite_queue: Option<&String>,
) -> anyhow::Result<MetastoreSpec> {
    Ok(match (&arg.metastore, sqlite_queue) {
        (Some(s), _) => MetastoreSpec::parse(s).map_err(anyhow::Error::msg)?,
        (None, Some(queue_db)) => {
            let dir = std::path::Path::new(queue_db.as_str())
                .parent()
                .unwrap_or(std::path::Path::new(""));
            MetastoreSpec::Sqlite(dir.join("lakefish-meta.sqlite").display().to_string())
        }
        (None, None) => {
            tracing::warn!(
                "job records are kept in the lake (no --metastore): every list reads them all; \
                 give the server and every worker --metastore postgres://... (or \
                 LAKEFISH_METASTORE) and run `lakefish metastore rebuild` once"
            );
            MetastoreSpec::Lake
        }
    })
}

/// What this process's workers can take: GPU-only jobs when `--gpu` (checked) or a usable
/// GPU is found.
fn worker_spec(name: String, work: &WorkArgs) -> anyhow::Result<WorkerSpec> {
    let cuda = lakefish_train::train::cuda_usable();
    let gpu = match (work.gpu, cuda) {
        (true, Err(why)) => bail!("--gpu: this machine cannot train on a GPU: {why}"),
        (_, Ok(())) => true,
        (false, Err(_)) => false,
    };
    Ok(WorkerSpec {
        name,
        concurrency: work.concurrency.max(1),
        threads: work.threads.unwrap_or_else(cores),
        gpu,
    })
}

/// `lakefish metastore status|rebuild`.
pub(crate) async fn metastore(
    lake: &str,
    what: MetastoreCommand,
    q: QueueArgs,
) -> anyhow::Result<()> {
    let lake = open_lake(lake)?;
    let spec = metastore_spec(&q.meta, q.redis.is_none().then_some(&q.queue_db))?;
    if spec == MetastoreSpec::Lake {
        bail!(
            "the job records are in the lake itself (--metastore lake): nothing to show or rebuild; name a database with --metastore"
        );
    }
    let store = Arc::new(
        SqlRecords::open(&spec)
            .await
            .with_context(|| format!("opening the metastore {}", spec.describe()))?,
    );
    let catalog = CatalogHandle(store.clone());
    if let MetastoreCommand::Rebuild { prune } = what {
        let copied = store.import_lake_records(&lake).await?;
        println!(
            "copied {copied} job records from {} into {}",
            lake.describe(),
            spec.describe()
        );
        let report = if prune {
            lakefish_jobs::catalog::rebuild_and_prune(&lake, &catalog).await?
        } else {
            lakefish_jobs::catalog::rebuild(&lake, &catalog).await?
        };
        // "3 dataset, 1 net", or None for nothing.
        let listing = |counts: &std::collections::BTreeMap<&str, u64>| {
            let parts: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
            (!parts.is_empty()).then(|| parts.join(", "))
        };
        let indexed = listing(&report.indexed).unwrap_or_else(|| "nothing".into());
        println!("indexed {indexed} from the lake");
        if prune {
            match listing(&report.pruned) {
                Some(pruned) => println!("pruned {pruned} the lake no longer holds"),
                None => println!("pruned nothing: every entry is in the lake"),
            }
        }
        lakefish_jobs::catalog::mark(&lake, &spec.locator()).await?;
    }
    println!(
        "metastore {} (schema version {})",
        spec.describe(),
        store.schema_version().await?
    );
    let counts = catalog.0.counts().await?;
    let entries: u64 = counts.iter().map(|(_, n)| n).sum();
    println!("{entries} catalogue entries");
    for (kind, n) in counts {
        println!("  {:<14} {n}", kind.as_str());
    }
    let tally = JobStore::with_backend(store).tally().await?;
    let total: u64 = tally.iter().map(|t| t.count).sum();
    println!("{total} job records");
    for t in tally {
        println!("  {:<14} {:<10} {}", t.kind, t.state.as_str(), t.count);
    }
    Ok(())
}

/// An API without tokens is open to everyone who can reach it: served on loopback only,
/// unless the operator says so in words (`--open-api-without-tokens`).
pub(crate) fn check_exposure(addr: SocketAddr, tokens: bool, open: bool) -> anyhow::Result<()> {
    if addr.ip().is_loopback() || tokens || open {
        return Ok(());
    }
    bail!(
        "refusing to serve on {addr} without tokens: anyone who can reach it could submit jobs \
         and read the lake. Configure [[auth.tokens]] (lakefish token new), listen on \
         127.0.0.1, or pass --open-api-without-tokens (server.open_api_without_tokens = true)"
    )
}

/// `lakefish worker`: runs jobs from the shared Redis queue until stopped.
pub(crate) async fn worker(
    lake: &str,
    redis: Option<String>,
    work: WorkArgs,
    (name, meta): (Option<String>, MetastoreArg),
    config: &Config,
) -> anyhow::Result<()> {
    let lake = open_lake(lake)?;
    let redis = redis.context(
        "a worker needs the shared queue: --redis URL, LAKEFISH_REDIS or server.redis in the config",
    )?;
    let worker = worker_spec(name.unwrap_or_else(default_worker_name), &work)?;
    let q = Queue::redis(&redis).await?;
    let (lake, jobs) = open_metastore(&meta, lake, None).await?;
    tracing::info!(
        lake = lake.describe(),
        queue = q.describe(),
        metastore = jobs.describe(),
        name = worker.name,
        gpu = worker.gpu,
        "worker ready"
    );
    q.run_workers(
        (lake, jobs),
        worker,
        Some(Arc::new(lakefish_train::LakefishTrainer)),
        InputPolicy::confined(&config.inputs.local_roots),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::check_exposure;

    #[test]
    fn an_open_api_stays_on_loopback_unless_said_otherwise() {
        let at = |s: &str| s.parse().unwrap();
        assert!(check_exposure(at("127.0.0.1:8080"), false, false).is_ok());
        assert!(check_exposure(at("[::1]:8080"), false, false).is_ok());
        let err = check_exposure(at("0.0.0.0:8080"), false, false).unwrap_err();
        assert!(
            err.to_string().contains("--open-api-without-tokens"),
            "{err}"
        );
        assert!(check_exposure(at("10.1.2.3:8080"), false, false).is_err());
        assert!(check_exposure(at("0.0.0.0:8080"), true, false).is_ok());
        assert!(check_exposure(at("0.0.0.0:8080"), false, true).is_ok());
    }
}
