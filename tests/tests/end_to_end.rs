//! The whole backbone through real processes: `lakefish serve` and `lakefish worker`, a real
//! redis-server, a real S3-compatible server (moto), the real sample binpack.

use lakefish_jobs::Lake;
use lakefish_schemas::{JobSpec, JobState};
use lakefish_tests::*;
use serde_json::json;
use std::collections::HashMap;
use std::time::Duration;

fn ingest_body(input: &std::path::Path, dataset: &str) -> serde_json::Value {
    json!({ "version": 1, "kind": "ingest_binpack", "spec": { "inputs": [input.to_str().unwrap()], "dataset": dataset } })
}

#[tokio::test(flavor = "multi_thread")]
async fn embedded_default_rest_queue_worker_lake() {
    let dir = tempfile::tempdir().unwrap();
    let input = binpack_input(dir.path());
    let (_serve, api) = serve_embedded(dir.path(), None);

    let health: serde_json::Value = get_json(format!("{api}/healthz")).await;
    assert_eq!(health["status"], "ok");
    assert!(health["queue"].as_str().unwrap().starts_with("sqlite:"));

    let id = submit_job(&api, &ingest_body(&input, "embedded")).await;
    let rec = wait_for_job(&api, &id, Duration::from_secs(120)).await;
    assert_eq!(rec.state, JobState::Succeeded, "{rec:?}");
    assert_eq!(rec.attempts, 1);

    let lake = Lake::open(dir.path().join("lake").to_str().unwrap(), &HashMap::new()).unwrap();
    let rows = read_dataset(&lake, "embedded").await;
    assert_rows_match_binpack(&rows, &input);
    assert_eq!(rec.result.as_ref().unwrap()["rows"], rows.len());

    let ds: serde_json::Value = get_json(format!("{api}/v1/datasets")).await;
    let d = &ds["datasets"][0];
    assert_eq!(
        (d["name"].as_str(), d["source"].as_str()),
        (Some("embedded"), Some("binpack"))
    );
    assert_eq!(d["rows"], rows.len());
    assert!(d["bytes"].as_u64().unwrap() > 0 && d["partitions"].as_u64().unwrap() >= 1);

    // Prometheus metrics say the same, from the same lake.
    let metrics = reqwest::get(format!("{api}/metrics")).await.unwrap();
    assert!(
        metrics.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let metrics = metrics.text().await.unwrap();
    for line in [
        "lakefish_jobs{kind=\"ingest_binpack\",state=\"succeeded\"} 1".to_string(),
        "lakefish_jobs{kind=\"ingest_binpack\",state=\"failed\"} 0".to_string(),
        "lakefish_queue_depth 0".to_string(),
        format!(
            "lakefish_rows_ingested{{source=\"binpack\"}} {}",
            rows.len()
        ),
        "lakefish_job_duration_seconds_count{kind=\"ingest_binpack\"} 1".to_string(),
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "{line} missing in\n{metrics}"
        );
    }

    let listed: serde_json::Value = get_json(format!("{api}/v1/jobs?state=succeeded")).await;
    assert_eq!(listed["jobs"][0]["id"], id);
    let none: serde_json::Value = get_json(format!("{api}/v1/jobs?state=failed")).await;
    assert_eq!(none["jobs"].as_array().unwrap().len(), 0);

    // A quiet mask over the dataset, queued like any job; the dataset list shows it.
    let mask = json!({ "kind": "mask", "spec": { "dataset": "embedded", "definition": { "name": "quiet" } } });
    let id = submit_job(&api, &mask).await;
    let rec = wait_for_job(&api, &id, Duration::from_secs(120)).await;
    assert_eq!(rec.state, JobState::Succeeded, "{rec:?}");
    let res = rec.result.unwrap();
    assert_eq!(res["rows"], rows.len());
    assert!(
        res["selected"].as_u64().unwrap() > 0
            && res["selected"].as_u64().unwrap() < rows.len() as u64
    );
    let ds: serde_json::Value = get_json(format!("{api}/v1/datasets")).await;
    assert_eq!(ds["datasets"][0]["masks"], json!(["quiet"]));

    // A shuffle of the masked rows, queued; GET /v1/shuffles lists it.
    let selected = res["selected"].as_u64().unwrap();
    let body = json!({ "kind": "shuffle", "spec": { "datasets": ["embedded"], "mask": "quiet", "chunks": 4, "seed": 1 } });
    let id = submit_job(&api, &body).await;
    let rec = wait_for_job(&api, &id, Duration::from_secs(180)).await;
    assert_eq!(rec.state, JobState::Succeeded, "{rec:?}");
    // The shuffle job fans its passes out as jobs; follow it to the commit.
    let shuffle_id = rec.result.as_ref().unwrap()["shuffle"]
        .as_str()
        .unwrap()
        .to_string();
    wait_for_shuffle(&api, &shuffle_id, Duration::from_secs(180)).await;
    let sh: serde_json::Value = get_json(format!("{api}/v1/shuffles")).await;
    let first = &sh["shuffles"][0];
    assert_eq!(first["rows"], selected);
    assert_eq!(first["chunks"].as_array().unwrap().len(), 4);
    let one = reqwest::get(format!(
        "{api}/v1/shuffles/{}",
        first["id"].as_str().unwrap()
    ))
    .await
    .unwrap();
    assert_eq!(one.status(), 200);
    assert_eq!(
        reqwest::get(format!("{api}/v1/shuffles/sh-nope"))
            .await
            .unwrap()
            .status(),
        404
    );

    // Train a small net on the shuffle, quantize it, register it (twice: same name), all
    // through the queue; then read the registry over HTTP and pull the file with the CLI.
    let body = json!({ "kind": "train", "spec": { "shuffle": shuffle_id, "arch": "32x2-8",
        "batch_size": 1024, "epochs": 1, "lr": 0.003, "device": "cpu", "seed": 5 } });
    let rec = run_job(&api, &body, Duration::from_secs(300)).await;
    assert_eq!(rec.state, JobState::Succeeded, "{rec:?}");
    let run = rec.result.as_ref().unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let metrics = get_text(format!("{api}/metrics")).await;
    let speed = format!("lakefish_training_positions_per_second{{run=\"{run}\"}} ");
    let speed: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix(speed.as_str()))
        .unwrap_or_else(|| panic!("no training speed for {run} in\n{metrics}"))
        .parse()
        .unwrap();
    assert!(speed > 100.0, "{speed}");
    let body = json!({ "kind": "quantize", "spec": { "run": run } });
    let rec = run_job(&api, &body, Duration::from_secs(300)).await;
    assert_eq!(rec.state, JobState::Succeeded, "{rec:?}");
    let report = rec.result.unwrap();
    assert!(
        report["error"]["positions"].as_u64().unwrap() > 1000,
        "{report}"
    );
    assert!(
        report["error"]["mean_abs_cp"].as_f64().unwrap() <= 3.0,
        "{report}"
    );
    let body = json!({ "kind": "register", "spec": { "run": run } });
    let first = run_job(&api, &body, Duration::from_secs(60)).await;
    let again = run_job(&api, &body, Duration::from_secs(60)).await;
    assert_eq!(first.state, JobState::Succeeded, "{first:?}");
    assert_eq!(
        first.result, again.result,
        "registering twice changes nothing"
    );
    let name = first.result.as_ref().unwrap()["name"]
        .as_str()
        .unwrap()
        .to_string();
    let sha = report["sha256"].as_str().unwrap();
    assert_eq!(name, format!("nn-{}.nnue", &sha[..12]));
    let nets: serde_json::Value = get_json(format!("{api}/v1/nets")).await;
    assert_eq!(nets["nets"].as_array().unwrap().len(), 1);
    assert_eq!(nets["nets"][0]["name"], name);
    assert_eq!(
        nets["best"],
        serde_json::Value::Null,
        "registered, not promoted"
    );
    let r = reqwest::get(format!("{api}/v1/nets/best")).await.unwrap();
    assert_eq!(r.status(), 404);
    assert!(
        r.text()
            .await
            .unwrap()
            .contains("no net has been promoted yet")
    );
    let out = std::process::Command::new(lakefish_tests::lakefish_bin())
        .args(["--lake", "lake", "nets", "show", "best"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no net has been promoted yet"));
    let m: serde_json::Value = get_json(format!("{api}/v1/nets/{name}")).await;
    assert_eq!(m["run"], run.as_str());
    assert_eq!(m["shuffle"], shuffle_id.as_str());
    assert_eq!(m["datasets"], json!(["binpack/embedded"]));
    let file = reqwest::get(format!("{api}/v1/nets/{name}/file"))
        .await
        .unwrap();
    assert_eq!(file.status(), 200);
    assert_eq!(file.headers()["x-sha256"], sha);
    let bytes = file.bytes().await.unwrap();
    assert_eq!(lakefish_jobs::nets::sha256_hex(&bytes), sha);
    lakefish_engine::nnue::Network::from_bytes(&bytes).unwrap();
    for (path, status) in [
        ("/v1/nets/nn-000000000000", 404),
        ("/v1/nets/../runs/file", 404),
        ("/v1/nets/best.nnue/file", 404),
    ] {
        let r = reqwest::get(format!("{api}{path}")).await.unwrap();
        assert_eq!(r.status(), status, "{path}");
    }
    let pulled = dir.path().join("pulled.nnue");
    let out = std::process::Command::new(lakefish_tests::lakefish_bin())
        .args([
            "nets",
            "--api",
            &api,
            "pull",
            &name,
            "-o",
            pulled.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_success(&out);
    assert_eq!(std::fs::read(&pulled).unwrap(), bytes.to_vec());
    // `--api` after the subcommand too, as `sprt show ID --api` (issue 35, item 10).
    let out = std::process::Command::new(lakefish_tests::lakefish_bin())
        .args(["nets", "ls", "--api", &api])
        .output()
        .unwrap();
    assert_success(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains(&name));
    let out = std::process::Command::new(lakefish_tests::lakefish_bin())
        .args(["--lake", "lake", "nets", "ls"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_success(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains(&name));

    // The engine plays with the registered net, pulled from the lake by name and
    // hash-checked, through a real UCI client; and with the pulled file by path.
    let lake_dir = dir.path().join("lake");
    for net in [name.as_str(), pulled.to_str().unwrap()] {
        let args = ["--lake", lake_dir.to_str().unwrap(), "engine", "--net", net];
        let game = lakefish_tests::play_through_python_chess(&args, 500, 24);
        assert_eq!(game["moves"].as_array().unwrap().len(), 24, "{game}");
    }

    // The file followed by a truncated copy of itself: the whole part is ingested, and the
    // record's result names what was skipped, and where.
    let whole = std::fs::read(&input).unwrap();
    let cut = dir.path().join("cut.binpack");
    std::fs::write(&cut, [&whole[..], &whole[..whole.len() - 1000]].concat()).unwrap();
    let id = submit_job(&api, &ingest_body(&cut, "cut")).await;
    let rec = wait_for_job(&api, &id, Duration::from_secs(120)).await;
    assert_eq!(rec.state, JobState::Succeeded, "{rec:?}");
    let skipped = rec.result.as_ref().unwrap()["skipped"]
        .as_array()
        .unwrap()
        .clone();
    assert!(!skipped.is_empty(), "{rec:?}");
    let why = skipped.last().unwrap().as_str().unwrap();
    assert!(
        why.contains("cut.binpack") && why.contains("truncated chunk at byte offset"),
        "{why}"
    );

    // A job whose input does not exist fails with the reason in its record.
    let bad = submit_job(
        &api,
        &ingest_body(&dir.path().join("missing.binpack"), "nope"),
    )
    .await;
    let rec = wait_for_job(&api, &bad, Duration::from_secs(60)).await;
    assert_eq!(rec.state, JobState::Failed);
    assert!(
        rec.error.as_deref().unwrap().contains("missing.binpack"),
        "{rec:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_requests_get_400_and_unknown_ids_404() {
    let dir = tempfile::tempdir().unwrap();
    let (_serve, api) = serve_embedded(dir.path(), None);
    let client = reqwest::Client::new();
    for (body, needle) in [
        ("{not json", "not valid JSON"),
        (r#"{"kind":"ingest_binpack"}"#, "spec"),
        (r#"{"kind":"launch_rockets","spec":{}}"#, "unknown job kind"),
        (
            r#"{"kind":"ingest_binpack","spec":{"inputs":["a"],"dataset":"../../etc"}}"#,
            "dataset name",
        ),
        (
            r#"{"kind":"ingest_binpack","spec":{"inputs":[],"dataset":"x"}}"#,
            "inputs is empty",
        ),
        (
            r#"{"kind":"ingest_pgn","spec":{"inputs":["a.pgn"],"dataset":"x/y"}}"#,
            "dataset name",
        ),
        (
            r#"{"kind":"ingest_pgn","spec":{"inputs":["a.pgn"],"dataset":"x","colour":1}}"#,
            "unknown field",
        ),
        // Shuffle passes are queued by lakefish itself, never by clients.
        (
            r#"{"kind":"shuffle_deal","spec":{"shuffle":"sh-000000000000","index":0}}"#,
            "unknown job kind",
        ),
        (r#"{"kind":"train","spec":{"shuffle":"../runs"}}"#, "id"),
        // Warm starts and multi-source shuffles are checked like the rest of their spec.
        (
            r#"{"kind":"train","spec":{"shuffle":"sh-000000000000","init_from":{"run":"../jobs","step":1}}}"#,
            "id",
        ),
        (
            r#"{"kind":"train","spec":{"shuffle":"sh-000000000000","init_from":{"run":"run-1"}}}"#,
            "step",
        ),
        (
            r#"{"kind":"train","spec":{"shuffle":"sh-000000000000","resume":"run-1","init_from":{"run":"run-2","step":1}}}"#,
            "cannot be combined",
        ),
        (
            r#"{"kind":"shuffle","spec":{"datasets":["a"],"mask":"quiet","chunks":2,"seed":0,"extra":[{"source":"binpack","dataset":"a"}]}}"#,
            "named twice",
        ),
        (
            r#"{"kind":"shuffle","spec":{"datasets":["a"],"mask":"quiet","chunks":2,"seed":0,"extra":[{"source":"tape","dataset":"b"}]}}"#,
            "tape",
        ),
        (
            r#"{"kind":"train","spec":{"shuffle":"sh-000000000000","features":"halfkx"}}"#,
            "features",
        ),
        (
            r#"{"kind":"train","spec":{"shuffle":"sh-000000000000","lambda_start":2}}"#,
            "lambda_start",
        ),
        (
            r#"{"kind":"train","spec":{"shuffle":"sh-000000000000","batch_size":"big"}}"#,
            "batch_size",
        ),
        (
            r#"{"kind":"train","spec":{"shuffle":"sh-000000000000","filter":{"name":"x","min_ply":-1}}}"#,
            "filter.min_ply",
        ),
        (r#"{"kind":"quantize","spec":{"run":"../jobs"}}"#, "run"),
        (
            r#"{"kind":"quantize","spec":{"run":"run-1","positions":0}}"#,
            "positions",
        ),
        (
            r#"{"kind":"quantize","spec":{"run":"run-1","bits":4}}"#,
            "unknown field",
        ),
        (r#"{"kind":"register","spec":{}}"#, "run"),
        (
            r#"{"kind":"register","spec":{"run":"run-1","parent":"best"}}"#,
            "net name",
        ),
        (
            r#"{"kind":"datagen","spec":{"net":"classical","dataset":"../x","games":1}}"#,
            "dataset name",
        ),
        (
            r#"{"kind":"datagen","spec":{"net":"classical","dataset":"x","games":0}}"#,
            "games must be",
        ),
        (
            r#"{"kind":"datagen","spec":{"net":"classical","dataset":"x","games":1,"nodes":9,"depth":3}}"#,
            "nodes or depth",
        ),
        (
            r#"{"kind":"datagen","spec":{"net":"classical","dataset":"x","games":"many"}}"#,
            "games",
        ),
        (
            r#"{"kind":"sprt","spec":{"new":"a","base":"b","book":"c","elo0":5,"elo1":1}}"#,
            "elo1 (1) must be greater than elo0 (5)",
        ),
        (
            r#"{"kind":"sprt","spec":{"new":"a","base":"b","book":"c","alpha":0.9}}"#,
            "alpha",
        ),
        (r#"{"kind":"sprt","spec":{"new":"a"}}"#, "base"),
        // SPRT batches are queued by lakefish itself, never by clients.
        (
            r#"{"kind":"sprt_batch","spec":{"sprt":"sprt-000000000000","index":0}}"#,
            "unknown job kind",
        ),
    ] {
        let resp = client
            .post(format!("{api}/v1/jobs"))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400, "{body}");
        let v: serde_json::Value = resp.json().await.unwrap();
        assert!(v["error"].as_str().unwrap().contains(needle), "{body}: {v}");
    }
    // A body that is not declared JSON never reaches the handler (a browser's form post).
    let resp = client
        .post(format!("{api}/v1/jobs"))
        .body(r#"{"kind":"mask","spec":{}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 415);
    let big = vec![b' '; 2 << 20];
    let resp = client
        .post(format!("{api}/v1/jobs"))
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 413);
    let v: serde_json::Value = resp.json().await.unwrap();
    assert!(v["error"].as_str().unwrap().contains("larger than"), "{v}");
    // The server may close that connection without reading the body: start afresh.
    let client = reqwest::Client::new();
    let resp = client
        .get(format!("{api}/v1/jobs?state=sleeping"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    for path in [
        "/v1/jobs/01a1fffc-350e-77ae-9ccc-edc08879c51e",
        "/v1/jobs/..%2F..%2Fetc",
        "/v1/runs/run-000000000000",
        "/v1/runs/..%2F..%2Fjobs",
        "/v1/shuffles/sh-000000000000",
        "/v1/nets/nn-000000000000.nnue",
        "/v1/nets/nn-000000000000/file",
        "/v1/nets/..%2Fjobs",
        "/v1/nets/best/file",
        "/v1/nothing",
    ] {
        let resp = client.get(format!("{api}{path}")).send().await.unwrap();
        assert_eq!(resp.status(), 404, "{path}");
    }
    // Uploads with a bad source or name are refused before anything is stored.
    for path in [
        "/v1/raw/chess.com/a.binpack",
        "/v1/raw/binpack/..hidden",
        "/v1/raw/binpack/.x",
    ] {
        let resp = client
            .put(format!("{api}{path}"))
            .body("data")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400, "{path}");
        let v: serde_json::Value = resp.json().await.unwrap();
        assert!(v["error"].as_str().is_some(), "{path}: {v}");
    }
    assert!(!dir.path().join("lake/raw").exists());

    // --no-workers only makes sense with a shared (Redis) queue.
    let out = std::process::Command::new(lakefish_bin())
        .args(["--lake", "lake", "serve", "--no-workers"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--no-workers needs --redis"));
    // Nothing was written for the rejected requests.
    assert!(!dir.path().join("lake/jobs").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn redis_queue_separate_worker_and_s3_lake() {
    let dir = tempfile::tempdir().unwrap();
    let input = binpack_input(dir.path());
    let cluster = Cluster::start(dir.path(), "lakefish-e2e", &["e2e-worker"]);
    let (api, s3) = (cluster.api.clone(), &cluster.s3);
    let id = submit_job(&api, &ingest_body(&input, "s3set")).await;
    let rec = wait_for_job(&api, &id, Duration::from_secs(180)).await;
    assert_eq!(rec.state, JobState::Succeeded, "{rec:?}");
    assert_eq!(
        rec.worker.as_deref(),
        Some("e2e-worker"),
        "the separate worker process ran it"
    );

    let lake = s3.lake("lake");
    let rows = read_dataset(&lake, "s3set").await;
    assert_rows_match_binpack(&rows, &input);
    let manifest = lake
        .get("positions/source=binpack/dataset=s3set/_manifest.json")
        .await
        .unwrap();
    assert!(manifest.is_some(), "the manifest commits the dataset");
    let ds: serde_json::Value = get_json(format!("{api}/v1/datasets")).await;
    assert_eq!(ds["datasets"][0]["rows"], rows.len());

    // A client on another machine: upload through the API into raw/, the worker reads the
    // input from the S3 lake by ranged GETs.
    let out = std::process::Command::new(lakefish_bin())
        .args([
            "submit",
            "--api",
            &api,
            "--upload",
            "--wait",
            "ingest",
            "binpack",
            input.to_str().unwrap(),
            "--dataset",
            "uploaded",
        ])
        .output()
        .unwrap();
    assert_success(&out);
    let rec: lakefish_schemas::JobRecord = serde_json::from_slice(&out.stdout).unwrap();
    let name = input.file_name().unwrap().to_str().unwrap();
    let JobSpec::IngestBinpack(spec) = &rec.spec else {
        panic!("{rec:?}")
    };
    assert_eq!(spec.inputs, [format!("lake:raw/binpack/{name}")]);
    assert_eq!(
        lake.size(&format!("raw/binpack/{name}")).await.unwrap(),
        Some(std::fs::metadata(&input).unwrap().len())
    );
    assert_rows_match_binpack(&read_dataset(&lake, "uploaded").await, &input);
}

#[test]
fn pyarrow_and_duckdb_read_the_partitioned_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.binpack");
    let b = dir.path().join("b.binpack");
    std::fs::write(&a, lakefish_ingest::binpack::synthetic_binpack(60, 1)).unwrap();
    std::fs::write(&b, lakefish_ingest::binpack::synthetic_binpack(50, 2)).unwrap();
    let mut total = 0u64;
    for (file, name) in [(&a, "one"), (&b, "two")] {
        let out = std::process::Command::new(lakefish_bin())
            .args([
                "--lake",
                "lake",
                "ingest",
                "binpack",
                file.to_str().unwrap(),
                "--dataset",
                name,
                "--rows-per-part",
                "2000",
            ])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_success(&out);
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        total += summary["rows"].as_u64().unwrap();
    }
    let script = r#"
import sys, json, pyarrow.dataset as ds, duckdb
root = sys.argv[1]
d = ds.dataset(root + "/positions", format="parquet", partitioning="hive")
t = d.to_table()
types = {f.name: str(f.type) for f in d.schema}
con = duckdb.connect()
n, datasets = con.execute(f"select count(*), count(distinct dataset) from read_parquet('{root}/positions/*/*/*.parquet', hive_partitioning=true)").fetchone()
dtypes = dict(con.execute(f"select column_name, column_type from (describe select * from read_parquet('{root}/positions/*/*/*.parquet', hive_partitioning=true))").fetchall())
print(json.dumps({"rows": t.num_rows, "types": types, "duckdb_rows": n, "duckdb_datasets": datasets, "duckdb_types": dtypes}))
"#;
    let out = std::process::Command::new(venv_bin("python"))
        .args(["-c", script, dir.path().join("lake").to_str().unwrap()])
        .output()
        .unwrap();
    assert_success(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["rows"], total);
    assert_eq!(v["duckdb_rows"], total);
    assert_eq!(v["duckdb_datasets"], 2);
    let t = &v["types"];
    assert_eq!(
        (t["fen"].as_str(), t["score"].as_str(), t["move"].as_str()),
        (Some("string"), Some("int16"), Some("string"))
    );
    assert_eq!(
        (
            t["result"].as_str(),
            t["ply"].as_str(),
            t["game_id"].as_str()
        ),
        (Some("int8"), Some("uint16"), Some("uint64"))
    );
    assert!(
        t["source"].is_string() && t["dataset"].is_string(),
        "hive partition columns: {t}"
    );
    let d = &v["duckdb_types"];
    assert_eq!(
        (
            d["score"].as_str(),
            d["ply"].as_str(),
            d["game_id"].as_str()
        ),
        (Some("SMALLINT"), Some("USMALLINT"), Some("UBIGINT"))
    );
}

/// Each mask rule's kept rows equal an independent decision (DuckDB reads the rows and the
/// masks, python-chess and the formulas in tests/py/mask_counts.py decide), row by row; the
/// random rules re-implemented from their documented seeding rule.
#[test]
fn mask_rules_keep_what_an_independent_count_keeps() {
    let dir = tempfile::tempdir().unwrap();
    let input = binpack_input(dir.path());
    let lf = |args: &[&str]| -> serde_json::Value {
        let out = std::process::Command::new(lakefish_bin())
            .args(["--lake", "lake"])
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_success(&out);
        serde_json::from_slice(&out.stdout).unwrap()
    };
    // A second, generated input makes a second part (the draws depend on a row's part).
    let second = dir.path().join("second.binpack");
    std::fs::write(&second, lakefish_ingest::binpack::synthetic_binpack(40, 3)).unwrap();
    let ingested = lf(&[
        "ingest",
        "binpack",
        input.to_str().unwrap(),
        second.to_str().unwrap(),
        "--dataset",
        "d",
        "--rows-per-part",
        "1000",
    ]);
    assert!(ingested["parts"].as_u64().unwrap() >= 2, "{ingested}");
    let masks: &[(&str, &[&str])] = &[
        ("quiet", &[]),
        ("all", &[]),
        ("wld", &["--seed", "7"]),
        ("rand", &["--rule", "random-skip=3", "--seed", "5"]),
        ("early", &["--rule", "early-skip=12"]),
        ("material", &["--rule", "simple-eval-skip=300"]),
        ("piece-count", &[]),
        (
            "shaped",
            &[
                "--rule",
                "piece-count=1,1,2,1,1:0.5",
                "--seed",
                "3",
                "--rule",
                "early-skip=2",
            ],
        ),
        (
            "mixed",
            &[
                "--rule",
                "quiet",
                "--rule",
                "wld",
                "--rule",
                "early-skip=4",
                "--min-ply",
                "6",
            ],
        ),
    ];
    let mut selected = std::collections::BTreeMap::new();
    let mut definitions = Vec::new();
    for (name, extra) in masks {
        let mut args = vec!["mask", name, "--dataset", "d"];
        args.extend_from_slice(extra);
        let summary = lf(&args);
        selected.insert(name.to_string(), summary["selected"].as_u64().unwrap());
        let manifest: serde_json::Value = serde_json::from_slice(
            &std::fs::read(dir.path().join(format!(
                "lake/masks/{name}/source=binpack/dataset=d/_mask.json"
            )))
            .unwrap(),
        )
        .unwrap();
        definitions.push(manifest["definition"].clone());
    }
    let out = std::process::Command::new(venv_bin("python"))
        .arg(workspace_root().join("tests/py/mask_counts.py"))
        .args([
            dir.path().join("lake").to_str().unwrap(),
            "d",
            &serde_json::to_string(&definitions).unwrap(),
        ])
        .output()
        .unwrap();
    assert_success(&out);
    let counted: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for (name, kept) in &selected {
        let c = &counted[name.as_str()];
        assert_eq!(c["kept"].as_u64(), Some(*kept), "{name}: {c}");
        assert_eq!(c["differ"], 0, "{name}: rows decided differently: {c}");
    }
    // The rules do something: all keeps every row, each other rule drops some, and the
    // random ones are near their expected rates.
    let rows = counted["all"]["rows"].as_u64().unwrap();
    assert_eq!(selected["all"], rows);
    for name in [
        "quiet",
        "wld",
        "rand",
        "early",
        "material",
        "piece-count",
        "shaped",
        "mixed",
    ] {
        assert!(
            selected[name] > 0 && selected[name] < rows,
            "{name}: {selected:?}"
        );
    }
    let rate = selected["rand"] as f64 / counted["quiet"]["rows"].as_f64().unwrap();
    assert!(
        (rate - 0.25).abs() < 0.05,
        "random-skip=3 keeps about a quarter of scored rows: {rate}"
    );
    assert!(selected["mixed"] < selected["quiet"]);
    // Same definition, same seed: nothing rewritten; another seed under another name differs.
    let again = lf(&[
        "mask",
        "rand",
        "--dataset",
        "d",
        "--rule",
        "random-skip=3",
        "--seed",
        "5",
    ]);
    assert_eq!(again["already_present"], true);
    let other = lf(&[
        "mask",
        "rand2",
        "--dataset",
        "d",
        "--rule",
        "random-skip=3",
        "--seed",
        "6",
    ]);
    assert_ne!(other["selected"].as_u64(), Some(selected["rand"]));
    // Bad rules are refused naming them, and nothing is written.
    for (args, says) in [
        (
            vec!["mask", "thin", "--dataset", "d"],
            "with no --rule the name is the rule",
        ),
        (
            vec!["mask", "x", "--dataset", "d", "--rule", "random-skip"],
            "needs a value",
        ),
        (
            vec!["mask", "x", "--dataset", "d", "--rule", "piece-count=1,2"],
            "five numbers",
        ),
        (
            vec![
                "mask",
                "x",
                "--dataset",
                "d",
                "--rule",
                "all",
                "--rule",
                "quiet",
            ],
            "stands alone",
        ),
        (
            vec!["mask", "x", "--dataset", "d", "--rule", "fen-skip"],
            "unknown rule",
        ),
    ] {
        let out = std::process::Command::new(lakefish_bin())
            .args(["--lake", "lake"])
            .args(&args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(says),
            "{args:?}: {err}"
        );
    }
    assert!(
        !dir.path().join("lake/masks/x").exists() && !dir.path().join("lake/masks/thin").exists()
    );
}

/// `transform qsearch-leaf`: every leaf checked with python-chess (valid, reached by captures
/// from its row, quiet on material by an unpruned search, score and result from its side to
/// move), lineage in the manifest, idempotent, other settings under the same name refused,
/// and the output masks like any dataset.
#[test]
fn qsearch_leaf_transform_writes_quiet_leaves_with_lineage() {
    let dir = tempfile::tempdir().unwrap();
    let input = binpack_input(dir.path());
    let lf = |args: &[&str]| -> std::process::Output {
        std::process::Command::new(lakefish_bin())
            .args(["--lake", "lake"])
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let json = |out: std::process::Output| -> serde_json::Value {
        assert_success(&out);
        serde_json::from_slice(&out.stdout).unwrap()
    };
    json(lf(&[
        "ingest",
        "binpack",
        input.to_str().unwrap(),
        "--dataset",
        "d",
    ]));
    let leaf = [
        "transform",
        "qsearch-leaf",
        "--dataset",
        "d",
        "--output",
        "dq",
    ];
    let done = json(lf(&leaf));
    assert!(done["changed"].as_u64().unwrap() > 0, "{done}");
    let out = std::process::Command::new(venv_bin("python"))
        .arg(workspace_root().join("tests/py/qleaf_check.py"))
        .args([dir.path().join("lake").to_str().unwrap(), "d", "dq", "400"])
        .output()
        .unwrap();
    assert_success(&out);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["bad"], serde_json::json!([]), "{report}");
    assert_eq!(report["changed"], done["changed"], "{report}");
    assert!(
        report["checked_changed"].as_u64().unwrap() >= 100,
        "{report}"
    );
    // Lineage: the transform and the commit it read.
    let read = |name: &str| -> serde_json::Value {
        let p = format!("lake/positions/source=binpack/dataset={name}/_manifest.json");
        serde_json::from_slice(&std::fs::read(dir.path().join(p)).unwrap()).unwrap()
    };
    let (d, dq) = (read("d"), read("dq"));
    assert_eq!(dq["derived_from"]["dataset"], "d");
    assert_eq!(dq["derived_from"]["dataset_job_id"], d["job_id"]);
    assert_eq!(dq["derived_from"]["transform"]["kind"], "qsearch-leaf");
    // Again: nothing written; other settings under the same name: refused, nothing changed.
    let again = json(lf(&leaf));
    assert_eq!(again["already_present"], true);
    assert_eq!(
        again["changed"], done["changed"],
        "a second delivery says the same"
    );
    assert_eq!(dq["derived_from"]["changed"], done["changed"]);
    let other = lf(&[&leaf[..], &["--score", "classical"]].concat());
    let err = String::from_utf8_lossy(&other.stderr);
    assert!(!other.status.success() && err.contains("dq"), "{err}");
    assert_eq!(read("dq"), dq);
    for (dataset, output, extra, says) in [
        ("d", "d", None, "immutable"),
        ("nope", "x", None, "nope"),
        ("d", "x", Some("deep"), "keep or classical"),
    ] {
        let mut args = vec!["transform", "qsearch-leaf", "--dataset", dataset];
        args.extend(["--output", output]);
        args.extend(extra.map(|score| ["--score", score]).into_iter().flatten());
        let out = lf(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(says),
            "{args:?}: {err}"
        );
    }
    assert!(
        !dir.path()
            .join("lake/positions/source=binpack/dataset=x")
            .exists()
    );
    // The leaves mask like any rows (their null moves count as quiet).
    let masked = json(lf(&["mask", "quiet", "--dataset", "dq"]));
    assert!(masked["selected"].as_u64().unwrap() > 0, "{masked}");
}

/// A dataset's profile (issue 45) equals DuckDB's own counts over the same Parquet parts:
/// rows, results, men on the board, ply and score buckets, repeated positions; it is stored
/// beside the data, and a dataset that is not there is refused by name.
#[test]
fn a_dataset_profile_equals_duckdb_counts() {
    let dir = tempfile::tempdir().unwrap();
    let input = binpack_input(dir.path());
    let lf = |args: &[&str]| {
        let out = std::process::Command::new(lakefish_bin())
            .args(["--lake", "lake"])
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_success(&out);
        out
    };
    lf(&[
        "ingest",
        "binpack",
        input.to_str().unwrap(),
        "--dataset",
        "d",
    ]);
    let out = lf(&["profile", "d", "--json"]);
    let p: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let stored: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            dir.path()
                .join("lake/profiles/source=binpack/dataset=d/profile.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(stored, p);
    let script = r#"
import sys, json, duckdb
parts = sys.argv[1] + "/positions/source=binpack/dataset=d/*.parquet"
con = duckdb.connect()
q = lambda sql: con.execute(sql.replace("T", f"read_parquet('{parts}')")).fetchall()
hist = lambda sql: {str(int(k)): n for k, n in q(sql)}
pos = "split_part(fen,' ',1)||' '||split_part(fen,' ',2)||' '||split_part(fen,' ',3)||' '||split_part(fen,' ',4)"
print(json.dumps({
  "rows": q("select count(*) from T")[0][0],
  "scored": q("select count(score) from T")[0][0],
  "result": hist("select result, count(*) from T where result is not null group by 1"),
  "men": hist("select length(regexp_replace(split_part(fen,' ',1), '[^A-Za-z]', '', 'g')), count(*) from T group by 1"),
  "ply": hist("select least(ply // 10 * 10, 400), count(*) from T group by 1"),
  "score": hist("select greatest(least(floor(score / 100) * 100, 3000), -3100), count(*) from T where score is not null group by 1"),
  "repeated": q(f"select count(*) - count(distinct {pos}) from T")[0][0],
}))
"#;
    let out = std::process::Command::new(venv_bin("python"))
        .args(["-c", script, dir.path().join("lake").to_str().unwrap()])
        .output()
        .unwrap();
    assert_success(&out);
    let want: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for k in [
        "rows", "scored", "result", "men", "ply", "score", "repeated",
    ] {
        assert_eq!(p[k], want[k], "{k}");
    }
    assert!(p["rows"].as_u64().unwrap() > 1000);
    let d = p["disagreeing"].as_u64().unwrap();
    assert!(d > 0 && d < p["scored"].as_u64().unwrap(), "{p}");
    let out = std::process::Command::new(lakefish_bin())
        .args(["--lake", "lake", "profile", "nope"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("binpack/nope: no such dataset"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A dataset's profile equals independent counts: DuckDB over the same Parquet parts and the
/// win-rate model written out again in tests/py/profile_counts.py (the real sample when
/// ../shared has it, plus generated games: two parts).
#[test]
fn a_profile_equals_independent_counts() {
    let dir = tempfile::tempdir().unwrap();
    let input = binpack_input(dir.path());
    let second = dir.path().join("second.binpack");
    std::fs::write(&second, lakefish_ingest::binpack::synthetic_binpack(40, 3)).unwrap();
    let lf = |args: &[&str]| {
        let out = std::process::Command::new(lakefish_bin())
            .args(["--lake", "lake"])
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_success(&out);
        out
    };
    lf(&[
        "ingest",
        "binpack",
        input.to_str().unwrap(),
        second.to_str().unwrap(),
        "--dataset",
        "d",
        "--rows-per-part",
        "1000",
    ]);
    let ours: serde_json::Value =
        serde_json::from_slice(&lf(&["profile", "d", "--json"]).stdout).unwrap();
    let out = std::process::Command::new(venv_bin("python"))
        .arg(workspace_root().join("tests/py/profile_counts.py"))
        .args([dir.path().join("lake").to_str().unwrap(), "binpack", "d"])
        .output()
        .unwrap();
    assert_success(&out);
    let theirs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in [
        "rows",
        "scored",
        "with_result",
        "scored_with_result",
        "score",
        "ply",
        "men",
        "result",
        "repeated",
        "disagreeing",
    ] {
        assert_eq!(ours[key], theirs[key], "{key}");
    }
    // Counts that say something: repeats and disagreements occur, several buckets each.
    assert!(ours["repeated"].as_u64().unwrap() > 0, "{ours}");
    assert!(ours["disagreeing"].as_u64().unwrap() > 0, "{ours}");
    for h in ["score", "ply", "men", "result"] {
        assert!(ours[h].as_object().unwrap().len() >= 3, "{h}: {ours}");
    }
}
