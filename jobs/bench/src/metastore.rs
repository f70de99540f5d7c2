//! `lakefish bench metastore`: the requests that read job history — a first page, a deep
//! page, a filtered page, `/metrics` and the dashboard's overview — timed through the real
//! HTTP router against a metastore holding a long synthetic history (SQLite and
//! PostgreSQL), and, in the same run, against job records kept in the lake as before the
//! metastore (the reference, on a much shorter history). Beside the jobs, a catalogue of
//! decided SPRT tests (one per 50 job records) is listed and filtered through `/v1/sprt`:
//! from the metastore's index, and in the reference from each test's `result.json`.

use crate::load::Latency;
use lakefish_lake::Lake;
use lakefish_lake::catalog::CatalogHandle;
use lakefish_lake::records::{JobCursor, JobStore};
use lakefish_metastore::{MetastoreSpec, SqlRecords};
use lakefish_schemas::{JobId, JobRecord, JobSpec, JobState};
use serde::Serialize;
use std::sync::Arc;
use std::time::Instant;

/// Records are made and inserted this many at a time (memory stays flat at any history).
const FILL_BATCH: usize = 10_000;

#[derive(Debug, Serialize)]
pub struct BackendReport {
    pub backend: String,
    pub records: usize,
    /// SPRT tests in the catalogue (the lake reference: `result.json` objects).
    pub tests: usize,
    /// Records inserted per second while filling (bulk insert; the lake: one record a write).
    pub fill_per_s: f64,
    pub requests: Vec<(String, Latency)>,
}

/// Which databases to measure besides the lake reference.
pub struct Backends {
    pub sqlite: bool,
    /// A PostgreSQL URL of an empty database; `None`: start a server of our own in a temp
    /// dir (Debian's `postgresql` package), `Some("")`: skip PostgreSQL.
    pub postgres: Option<String>,
    /// Where the lakes live: `None` a temp directory, or a store URL (`s3://bucket/prefix`,
    /// credentials from `AWS_*`) under which each lake gets a prefix of its own, deleted after.
    pub store: Option<String>,
    /// Timed requests of each kind on the lake reference.
    pub lake_repeats: usize,
}

/// A lake for one part of the bench, removed when dropped (a directory) or by `clean`.
struct BenchLake {
    lake: Lake,
    on_store: bool,
    _dir: Option<tempfile::TempDir>,
}

impl BenchLake {
    fn new(store: Option<&str>, name: &str) -> anyhow::Result<BenchLake> {
        match store {
            Some(store) => {
                let env: std::collections::HashMap<String, String> = std::env::vars().collect();
                let url = format!(
                    "{}/lakefish-bench-metastore-{}/{name}",
                    store.trim_end_matches('/'),
                    std::process::id()
                );
                Ok(BenchLake {
                    lake: Lake::open(&url, &env)?,
                    on_store: true,
                    _dir: None,
                })
            }
            None => {
                let dir = tempfile::tempdir()?;
                let lake = Lake::open(
                    dir.path().join("lake").to_str().expect("utf-8 path"),
                    &Default::default(),
                )?;
                Ok(BenchLake {
                    lake,
                    on_store: false,
                    _dir: Some(dir),
                })
            }
        }
    }

    /// Deletes every object this bench wrote under its prefix of the user's store.
    async fn clean(self) -> anyhow::Result<()> {
        if self.on_store {
            let keys = self.lake.list("").await?;
            self.lake
                .delete_many(keys.into_iter().map(|o| o.location.to_string()).collect())
                .await?;
        }
        Ok(())
    }
}

/// Record `i` of the synthetic history: `mask` jobs 100 ms apart, one in 1,000 failed, each
/// 1.5 s from start to finish.
fn record(i: usize, spec: &JobSpec) -> JobRecord {
    let t0 = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00.000Z").expect("time");
    let at = |ms: i64| {
        (t0 + chrono::Duration::milliseconds(ms))
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    };
    let created = i as i64 * 100;
    let mut rec = JobStore::new_record(
        JobId::derived(&format!("bench/metastore/{i}")),
        spec.clone(),
    );
    rec.created = at(created);
    rec.started = Some(at(created + 10));
    rec.finished = Some(at(created + 1510));
    rec.attempts = 1;
    rec.worker = Some("bench".into());
    if i % 1000 == 999 {
        rec.state = JobState::Failed;
        rec.error = Some("input lake:raw/x.binpack: not found".into());
    } else {
        rec.state = JobState::Succeeded;
        rec.result = Some(serde_json::json!({"rows": 1_000_000, "kept": 612_345}));
    }
    rec
}

/// SPRT test `i` of the synthetic catalogue: decided, 10 s apart, one in four rejected.
fn sprt_status(i: usize) -> anyhow::Result<lakefish_schemas::SprtStatus> {
    let t0 = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00.000Z")?;
    let created = (t0 + chrono::Duration::seconds(10 * i as i64))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let state = if i % 4 == 3 { "rejected" } else { "accepted" };
    let net = format!("nn-{:012x}", i % 97);
    Ok(serde_json::from_value(serde_json::json!({
        "id": format!("sprt-{i:012x}"), "state": state,
        "new": {"name": net, "requested": format!("{net}.nnue")},
        "base": {"name": "classical", "requested": "classical"},
        "elo0": 0.0, "elo1": 5.0, "model": "normalized", "llr": 2.95, "lower": -2.94,
        "upper": 2.94, "wins": 300, "draws": 500, "losses": 200, "penta": [10, 90, 200, 150, 50],
        "games": 1000, "batches": 25, "llr_history": vec![0.1; 25],
        "elo": {"elo": 35.0, "elo_error": 12.0, "nelo": 60.0, "nelo_error": 20.0, "los": 99.9},
        "spec": {"new": net, "base": "classical", "book": "noob_2moves.epd"},
        "created": created,
    }))?)
}

fn mask_spec() -> JobSpec {
    serde_json::from_value(serde_json::json!({
        "kind": "mask",
        "spec": {"dataset": "d1", "definition": {"name": "quiet"}}
    }))
    .expect("a mask spec")
}

/// Serves `jobs` with the real router on a loopback port and times each request `repeats`
/// times (after one untimed warm-up).
async fn time_requests(
    jobs: JobStore,
    lake: Lake,
    records: usize,
    repeats: usize,
) -> anyhow::Result<Vec<(String, Latency)>> {
    let dir = tempfile::tempdir()?;
    let queue =
        lakefish_services::Queue::sqlite(dir.path().join("queue.sqlite").to_str().expect("utf-8"))
            .await?;
    let state = lakefish_services::AppState {
        lake,
        jobs,
        queue,
        config: Arc::new(Default::default()),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server =
        tokio::spawn(async move { axum::serve(listener, lakefish_services::router(state)).await });
    let http = reqwest::Client::new();
    let spec = mask_spec();
    let middle = JobCursor::after(&record(records / 2, &spec)).encode();
    let requests = [
        ("first page", "/v1/jobs?limit=100".to_string()),
        ("deep page", format!("/v1/jobs?limit=100&after={middle}")),
        (
            "filtered page",
            "/v1/jobs?state=failed&limit=100".to_string(),
        ),
        ("SPRT tests, first page", "/v1/sprt?limit=100".to_string()),
        (
            "SPRT tests of one net",
            format!("/v1/sprt?net=nn-{:012x}&limit=100", 5),
        ),
        ("/metrics", "/metrics".to_string()),
        ("overview", "/".to_string()),
    ];
    let mut out = Vec::new();
    for (name, path) in requests {
        let url = format!("http://{addr}{path}");
        let mut times = Vec::new();
        for i in 0..=repeats {
            let t = Instant::now();
            let resp = http.get(&url).send().await?;
            let status = resp.status();
            let body = resp.bytes().await?;
            if !status.is_success() {
                anyhow::bail!(
                    "{name}: {status}: {}",
                    String::from_utf8_lossy(&body[..body.len().min(300)])
                );
            }
            if i > 0 {
                times.push(t.elapsed().as_secs_f64() * 1000.0);
            }
        }
        out.push((name.to_string(), Latency::of(times)));
    }
    server.abort();
    Ok(out)
}

async fn fill_sql(
    store: &SqlRecords,
    records: usize,
    progress: &dyn Fn(usize),
) -> anyhow::Result<f64> {
    let spec = mask_spec();
    let t = Instant::now();
    let mut done = 0;
    while done < records {
        let batch: Vec<JobRecord> = (done..(done + FILL_BATCH).min(records))
            .map(|i| record(i, &spec))
            .collect();
        store.insert_many(&batch).await?;
        done += batch.len();
        progress(done);
    }
    Ok(records as f64 / t.elapsed().as_secs_f64().max(1e-9))
}

/// Fills an empty database with `records` records and `records / 50` SPRT tests in its
/// catalogue (over an empty lake), and times the requests on it.
async fn measure_sql(
    backend: &str,
    spec: &MetastoreSpec,
    records: usize,
    repeats: usize,
    lake_store: Option<&str>,
    progress: &dyn Fn(&str, usize, usize),
) -> anyhow::Result<BackendReport> {
    let store = Arc::new(SqlRecords::open(spec).await?);
    let fill_per_s = fill_sql(&store, records, &|n| progress(backend, n, records)).await?;
    let bench_lake = BenchLake::new(lake_store, backend)?;
    let lake = bench_lake
        .lake
        .clone()
        .with_catalog(CatalogHandle(store.clone()));
    let tests = records / 50;
    for i in 0..tests {
        lakefish_jobs::sprt::index_status(&lake, &sprt_status(i)?).await?;
    }
    let report = BackendReport {
        backend: backend.into(),
        records,
        tests,
        fill_per_s,
        requests: time_requests(JobStore::with_backend(store), lake, records, repeats).await?,
    };
    bench_lake.clean().await?;
    Ok(report)
}

/// Measures the lake reference on `lake_records` records, then each database on `records`.
pub async fn run(
    records: usize,
    lake_records: usize,
    repeats: usize,
    backends: Backends,
    progress: &dyn Fn(&str, usize, usize),
) -> anyhow::Result<Vec<BackendReport>> {
    let mut reports = Vec::new();

    // The reference: records as objects in a lake, as before the metastore.
    let store = backends.store.as_deref();
    let reference = BenchLake::new(store, "reference")?;
    let lake = reference.lake.clone();
    let lake_repeats = backends.lake_repeats;
    let measured = async {
        let old = JobStore::new(lake.clone());
        let tests = lake_records / 50;
        for i in 0..tests {
            let status = sprt_status(i)?;
            let key = format!("sprt/{}/result.json", status.id);
            lake.put(&key, serde_json::to_vec(&status)?).await?;
        }
        let spec = mask_spec();
        let t = Instant::now();
        for i in 0..lake_records {
            old.put(&record(i, &spec)).await?;
            if i % 500 == 499 {
                progress("lake", i + 1, lake_records);
            }
        }
        let fill = lake_records as f64 / t.elapsed().as_secs_f64().max(1e-9);
        let place = if store.is_some() {
            "store"
        } else {
            "local directory"
        };
        anyhow::Ok(BackendReport {
            backend: format!("lake ({place}, the reference)"),
            records: lake_records,
            tests,
            fill_per_s: fill,
            requests: time_requests(old, lake.clone(), lake_records, lake_repeats).await?,
        })
    }
    .await;
    // Cleaned up whether the measurement worked or not: the objects are on the user's store.
    reference.clean().await?;
    reports.push(measured?);

    if backends.sqlite {
        let dir = tempfile::tempdir()?;
        let spec = MetastoreSpec::Sqlite(dir.path().join("meta.sqlite").display().to_string());
        reports.push(measure_sql("sqlite", &spec, records, repeats, store, progress).await?);
    }

    let own_server;
    let url = match backends.postgres.as_deref() {
        Some("") => None,
        Some(url) => Some(url.to_string()),
        None => {
            own_server = tokio::task::spawn_blocking(lakefish_testkit::Postgres::start).await?;
            Some(own_server.create_database("bench_metastore"))
        }
    };
    if let Some(url) = url {
        let spec = MetastoreSpec::Postgres(url);
        reports.push(measure_sql("postgres", &spec, records, repeats, store, progress).await?);
    }
    Ok(reports)
}
