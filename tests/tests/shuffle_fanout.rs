//! The two-pass shuffle fanned out as jobs (one per input part, then one per pile) over two
//! worker processes on Redis, into an S3-compatible lake, gives byte-identical chunks to the
//! same shuffle run in-process on a local lake.

use lakefish_tests::*;
use serde_json::json;
use std::collections::BTreeSet;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread")]
async fn fanned_out_shuffle_on_two_workers_equals_in_process() {
    let dir = tempfile::tempdir().unwrap();
    // Three inputs, one part each (parts close at chunk boundaries): three deal tasks.
    let inputs: Vec<String> = (0..3)
        .map(|i| {
            let p = dir.path().join(format!("in{i}.binpack"));
            std::fs::write(&p, lakefish_ingest::binpack::synthetic_binpack(120, 40 + i)).unwrap();
            p.to_str().unwrap().to_string()
        })
        .collect();
    let (chunks, seed) = (6u32, 7u64);

    // Distributed: API without workers, two worker processes, Redis, moto.
    let cluster = Cluster::start(dir.path(), "lakefish-fanout", &["w1", "w2"]);
    let (api, s3) = (cluster.api.clone(), &cluster.s3);
    run_job_ok(&api, &json!({"kind": "ingest_binpack", "spec": {"inputs": inputs, "dataset": "fan", "rows_per_part": 1}})).await;
    run_job_ok(
        &api,
        &json!({"kind": "mask", "spec": {"dataset": "fan", "definition": {"name": "quiet"}}}),
    )
    .await;
    let rec = run_job_ok(&api, &json!({"kind": "shuffle", "spec": {"datasets": ["fan"], "mask": "quiet", "chunks": chunks, "seed": seed}})).await;
    let result = rec.result.unwrap();
    assert_eq!(result["deal_jobs"], 3, "{result}");
    let shuffle_id = result["shuffle"].as_str().unwrap().to_string();
    let manifest = wait_for_shuffle(&api, &shuffle_id, Duration::from_secs(180)).await;
    assert_eq!(
        manifest["chunks"].as_array().unwrap().len(),
        chunks as usize
    );

    // Every pass ran as a job of its own, each once successfully (the last pile commits
    // the shuffle a moment before its own record says succeeded).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let jobs = loop {
        let v: serde_json::Value = get_json(format!("{api}/v1/jobs?limit=100")).await;
        let jobs = v["jobs"].as_array().unwrap().clone();
        let count = |kind: &str| {
            jobs.iter()
                .filter(|j| j["kind"] == kind && j["state"] == "succeeded")
                .count()
        };
        if (count("shuffle_deal"), count("shuffle_pile")) == (3, chunks as usize) {
            break jobs;
        }
        assert!(std::time::Instant::now() < deadline, "task jobs: {jobs:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let workers: BTreeSet<&str> = jobs.iter().filter_map(|j| j["worker"].as_str()).collect();
    eprintln!("jobs ran on workers {workers:?}");

    // In-process, on a local lake: the same data, mask and seed.
    let local = dir.path().join("local");
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(lakefish_bin())
            .arg("--lake")
            .arg(&local)
            .args(args)
            .output()
            .unwrap();
        assert_success(&out);
        out
    };
    let mut ingest = vec!["ingest", "binpack"];
    ingest.extend(inputs.iter().map(String::as_str));
    ingest.extend(["--dataset", "fan", "--rows-per-part", "1"]);
    cli(&ingest);
    cli(&["mask", "quiet", "--dataset", "fan"]);
    let out = cli(&[
        "shuffle",
        "--dataset",
        "fan",
        "--mask",
        "quiet",
        "--chunks",
        &chunks.to_string(),
        "--seed",
        &seed.to_string(),
    ]);
    let here: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let here_id = here["id"].as_str().unwrap();

    let lake = s3.lake("lake");
    let mut rows = 0;
    for c in manifest["chunks"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        let remote = lake
            .get(&format!("shuffled/{shuffle_id}/{name}"))
            .await
            .unwrap()
            .unwrap();
        let mine = std::fs::read(local.join(format!("shuffled/{here_id}/{name}"))).unwrap();
        assert!(remote[..] == mine[..], "chunk {name} differs");
        rows += c["rows"].as_u64().unwrap();
    }
    assert_eq!(rows, here["rows"].as_u64().unwrap());
    assert!(rows > 1000, "{rows} rows shuffled");
    // Pass-1 leftovers are gone from the store once committed.
    let leftovers = lake
        .list(&format!("shuffled/{shuffle_id}/_deal"))
        .await
        .unwrap();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// `bench shuffle --store s3://…` runs on the given store (the shuffle's bulk deletes and
/// concurrent gets/puts go through the S3 protocol) and leaves nothing behind; a store it
/// cannot open is refused by name.
#[tokio::test(flavor = "multi_thread")]
async fn shuffle_bench_on_an_s3_store_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.binpack");
    std::fs::write(&input, lakefish_ingest::binpack::synthetic_binpack(200, 5)).unwrap();
    let s3 = S3::start("bench");
    let bench = |store: &str, env: Vec<(String, String)>| {
        std::process::Command::new(lakefish_bin())
            .args(["bench", "shuffle", input.to_str().unwrap(), "--runs", "1"])
            .args(["--chunks", "4", "--store", store])
            .envs(env)
            .output()
            .unwrap()
    };
    let out = bench("s3://bench/somewhere", s3.env());
    assert_success(&out);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let report: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert!(report["selected_rows"].as_u64().unwrap() > 100, "{report}");
    assert!(report["selected_rows"].as_u64() < report["input_rows"].as_u64());
    assert!(report["ratio"].as_f64().unwrap() > 0.0, "{report}");
    let left = s3.lake("").list("").await.unwrap();
    assert!(left.is_empty(), "left behind: {left:?}");

    let out = bench("ftp://x/y", Vec::new());
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unsupported scheme"), "{stderr}");
}
