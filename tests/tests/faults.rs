//! Faults on a loopback deployment (redis-server, moto S3, PostgreSQL as the metastore, API
//! and worker processes): a worker SIGKILLed mid-ingest and mid-training, redis-server
//! restarted, PostgreSQL restarted, the S3 endpoint unreachable for 20 seconds and the API
//! process restarted in the middle of a pipeline run.
//! Each test is bounded in time.

use lakefish_schemas::{DatasetName, JobRecord, JobState, Source};
use lakefish_tests::*;
use serde_json::json;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// Waits until job `id` runs and `ready` holds, then SIGKILLs the worker running it. Returns
/// the killed worker's name.
async fn kill_its_worker(
    cluster: &mut Cluster,
    id: &str,
    ready: impl AsyncFnMut(&JobRecord) -> bool,
) -> String {
    let mut ready = ready;
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        assert!(
            Instant::now() < deadline,
            "job {id} never got ready to kill"
        );
        let rec: JobRecord =
            serde_json::from_value(get_json(format!("{}/v1/jobs/{id}", cluster.api)).await)
                .unwrap();
        assert!(
            !rec.state.is_final(),
            "job {id} ended before its worker could be killed: {rec:?}"
        );
        if rec.state == JobState::Running && ready(&rec).await {
            let worker = rec.worker.clone().unwrap();
            cluster.kill_worker_named(&worker);
            return worker;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn worker_killed_mid_ingest_and_mid_training_is_picked_up_again() {
    let dir = tempfile::tempdir().unwrap();
    let one = binpack_input(dir.path());
    // Copies back to back (a binpack is a sequence of self-contained chunks): long enough to
    // be caught running. Six of the real sample; the generated input (without ../shared) is
    // a seventh of its size and ingested six times over in under half a second, before a
    // worker could be killed, so it gets more copies.
    let one_bytes = std::fs::read(&one).unwrap();
    let copies: u64 = if one_bytes.len() < 512 * 1024 { 60 } else { 6 };
    let big = dir.path().join("six.binpack");
    std::fs::write(&big, one_bytes.repeat(copies as usize)).unwrap();
    // The reference count: one copy ingested in-process into a local lake.
    let out = std::process::Command::new(lakefish_bin())
        .args(["--lake", "local", "ingest", "binpack"])
        .arg(&one)
        .args(["--dataset", "one"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_success(&out);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows_one = report["rows"].as_u64().unwrap();
    assert!(rows_one > 0);

    let mut cluster = Cluster::start(dir.path(), "lakefish-faults-kill", &["w1", "w2"]);
    let api = cluster.api.clone();

    // Ingest: killed once it has read some of the file.
    let body = json!({ "kind": "ingest_binpack",
        "spec": { "inputs": [big.to_str().unwrap()], "dataset": "six" } });
    let id = submit_job(&api, &body).await;
    let killed =
        kill_its_worker(&mut cluster, &id, async |r: &JobRecord| r.progress.done > 0).await;
    let rec = wait_for_job(&api, &id, Duration::from_secs(240)).await;
    assert_eq!(rec.state, JobState::Succeeded, "{rec:?}");
    assert!(rec.attempts >= 2, "{rec:?}");
    assert_ne!(rec.worker.as_deref(), Some(killed.as_str()), "{rec:?}");
    // No duplicate rows: exactly the copies' worth.
    assert_eq!(rec.result.as_ref().unwrap()["rows"], copies * rows_one);
    // No partial objects: the dataset's prefix holds exactly the committed parts and the
    // manifest.
    let lake = cluster.s3.lake("lake");
    let name = DatasetName::new("six").unwrap();
    let manifest = lakefish_lake::datasets::read_manifest(&lake, Source::Binpack, &name)
        .await
        .unwrap()
        .expect("committed");
    assert_eq!(manifest.rows, copies * rows_one);
    assert_eq!(
        manifest.parts.iter().map(|p| p.rows).sum::<u64>(),
        copies * rows_one
    );
    let prefix = lakefish_schemas::positions::dataset_prefix(Source::Binpack, &name);
    let stored: BTreeSet<String> = lake
        .list(&prefix)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.location.to_string()[prefix.len() + 1..].to_string())
        .collect();
    let mut expected: BTreeSet<String> = manifest.parts.iter().map(|p| p.name.clone()).collect();
    let manifest_key = lakefish_lake::datasets::manifest_key(Source::Binpack, &name);
    expected.insert(manifest_key[prefix.len() + 1..].to_string());
    assert_eq!(stored, expected);

    // Training: a run killed after its first checkpoint goes on from its last checkpoint on
    // the surviving worker and finishes its budget.
    // A fresh worker under a new name (the dead one's registration is still fresh in Redis).
    cluster.add_worker("w3");
    run_job_ok(
        &api,
        &json!({ "kind": "ingest_binpack", "spec": { "inputs": [one.to_str().unwrap()], "dataset": "one" } }),
    )
    .await;
    run_job_ok(
        &api,
        &json!({"kind": "mask", "spec": {"dataset": "one", "definition": {"name": "quiet"}}}),
    )
    .await;
    let rec = run_job_ok(
        &api,
        &json!({"kind": "shuffle", "spec": {"datasets": ["one"], "mask": "quiet", "chunks": 4, "seed": 9}}),
    )
    .await;
    let shuffle = rec.result.unwrap()["shuffle"].as_str().unwrap().to_string();
    wait_for_shuffle(&api, &shuffle, Duration::from_secs(180)).await;
    let body = json!({ "kind": "train", "spec": { "shuffle": shuffle, "arch": "256x2-32-32",
        "batch_size": 1024, "epochs": 2, "checkpoint_every": 25, "device": "cpu", "seed": 3 } });
    let id = submit_job(&api, &body).await;
    let run_id = format!("run-{}", &id[id.len() - 12..]);
    let mut seen_step = 0;
    let run_url = format!("{api}/v1/runs/{run_id}");
    kill_its_worker(&mut cluster, &id, async |_: &JobRecord| {
        let r = reqwest::get(&run_url).await.unwrap();
        if !r.status().is_success() {
            return false;
        }
        let run: serde_json::Value = r.json().await.unwrap();
        seen_step = run["step"].as_u64().unwrap_or(0);
        !run["checkpoints"].as_array().unwrap().is_empty()
    })
    .await;
    assert!(seen_step > 0);
    let rec = wait_for_job(&api, &id, Duration::from_secs(300)).await;
    assert_eq!(rec.state, JobState::Succeeded, "{rec:?}");
    assert!(rec.attempts >= 2, "{rec:?}");
    let run = get_json(run_url.clone()).await;
    assert_eq!(run["finished"], true, "{run:#}");
    assert_eq!(run["epoch"], 2, "{run:#}");
    let resumed = run["resumed_at"].as_array().unwrap();
    assert_eq!(resumed.len(), 1, "{run:#}");
    assert!(resumed[0].as_u64().unwrap() >= seen_step, "{run:#}");
    // The metrics read as one run: steps strictly increasing, none repeated by the re-run.
    let steps: Vec<u64> = run["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["step"].as_u64().unwrap())
        .collect();
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");
    let last = run["step"].as_u64().unwrap();
    assert!(
        *steps.last().unwrap() <= last && *steps.last().unwrap() + 50 > last,
        "{steps:?}"
    );
}

const PIPELINE: &str = r#"
version = 1

[pipelines.nightly]
mask = "quiet"
[[pipelines.nightly.inputs]]
source = "binpack"
prefix = "raw/binpack/"
[pipelines.nightly.shuffle]
chunks = 4
seed = 5
[pipelines.nightly.train]
arch = "256x2-32-32"
batch_size = 1024
epochs = 4
device = "cpu"
[pipelines.nightly.quantize]
max_mean_cp = 1000.0
max_p99_cp = 1000.0
[pipelines.nightly.sprt]
book = "lake:raw/books/book.epd"
nodes = 200
model = "logistic"
elo0 = -1000.0
elo1 = -700.0
batch_pairs = 2
max_pairs = 40
concurrency = 1
"#;

/// Follows pipeline run `url` (a path) on whatever the cluster's API is now, until `until`
/// holds; API restarts in between are the caller's business.
async fn wait_run(
    api: &str,
    path: &str,
    until: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let run = get_json(format!("{api}{path}")).await;
        if until(&run) {
            return run;
        }
        assert!(Instant::now() < deadline, "run never got there: {run:#}");
        assert_ne!(run["state"], "failed", "{run:#}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn pipeline_survives_redis_and_postgres_restarts_s3_outage_and_api_restart() {
    let dir = tempfile::tempdir().unwrap();
    let opts = ClusterOptions {
        config: Some(PIPELINE),
        persistent_redis: true,
        s3_outage: true,
    };
    let mut cluster = Cluster::start_with(dir.path(), "lakefish-faults-ops", &["p1", "p2"], opts);
    let api = cluster.api.clone();
    let input = binpack_input(dir.path());
    put_created(
        format!("{api}/v1/raw/binpack/first.binpack"),
        std::fs::read(&input).unwrap(),
    )
    .await;
    put_created(format!("{api}/v1/books/book.epd"),
        b"rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -\nrnbqkbnr/pppppppp/8/8/3P4/8/PPP1PPPP/RNBQKBNR b KQkq -\n".to_vec(),
    )
    .await;
    let r = reqwest::Client::new()
        .post(format!("{api}/v1/pipelines/nightly/run"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let started: serde_json::Value = r.json().await.unwrap();
    let path = started["url"].as_str().unwrap().to_string();

    // redis-server restarted once the run is past ingest: queued work is on disk. (Any later
    // step will do: mask and shuffle may both pass between two polls.)
    wait_run(&api, &path, |r| {
        ["mask", "shuffle", "train"].iter().any(|s| r["step"] == *s)
    })
    .await;
    cluster.redis.restart(Duration::from_secs(2));
    // PostgreSQL, which holds every job record, down for 2 s and back (fast shutdown, as an
    // operator's restart): record writes in between fail as transient and are tried again.
    tokio::task::block_in_place(|| {
        cluster.postgres.stop();
        std::thread::sleep(Duration::from_secs(2));
        cluster.postgres.start_again();
    });

    // The S3 endpoint unreachable for 20 s while the net trains.
    let run = wait_run(&api, &path, |r| r["step"] == "train").await;
    let train = run["jobs"].as_array().unwrap().last().unwrap()["job"]
        .as_str()
        .unwrap()
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let rec = get_json(format!("{api}/v1/jobs/{train}")).await;
        assert_eq!(rec["kind"], "train");
        assert_ne!(
            rec["state"], "succeeded",
            "trained before the outage: {rec:#}"
        );
        if rec["state"] == "running" && rec["progress"]["done"].as_u64().unwrap_or(0) > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{rec:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let outage = cluster.outage.as_ref().unwrap();
    outage.down();
    tokio::time::sleep(Duration::from_secs(20)).await;
    outage.up();

    // The API process restarted; its successor's driver takes the run from its record.
    cluster.restart_api();
    let api = cluster.api.clone();
    let run = wait_run(&api, &path, |r| r["state"] != "running").await;
    assert_eq!(run["state"], "succeeded", "{run:#}");
    // (Whether this little net beats the classical evaluation is not this test's business.)
    let decided = run["sprt_state"].as_str().unwrap();
    assert_eq!(run["promoted"], decided == "accepted", "{run:#}");
    // No job lost: every step's jobs are records that succeeded.
    let mut steps = Vec::new();
    for j in run["jobs"].as_array().unwrap() {
        let rec = get_json(format!("{api}/v1/jobs/{}", j["job"].as_str().unwrap())).await;
        assert_eq!(rec["state"], "succeeded", "{rec:#}");
        let s = j["step"].as_str().unwrap().to_string();
        if steps.last() != Some(&s) {
            steps.push(s);
        }
    }
    assert_eq!(
        steps,
        [
            "ingest", "mask", "shuffle", "train", "quantize", "register", "sprt"
        ]
    );
    // The tally behind /metrics still agrees with the records themselves after the restarts.
    let mut listed = 0u64;
    let mut after = String::new();
    loop {
        let page = get_json(format!("{api}/v1/jobs?limit=1000{after}")).await;
        listed += page["jobs"].as_array().unwrap().len() as u64;
        match page["next"].as_str() {
            Some(next) => after = format!("&after={next}"),
            None => break,
        }
    }
    let metrics = get_text(format!("{api}/metrics")).await;
    let tallied: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("lakefish_jobs{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(tallied as u64, listed, "{metrics}");
    let nets = get_json(format!("{api}/v1/nets")).await;
    assert!(
        nets["nets"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["name"] == run["net"])
    );
}
