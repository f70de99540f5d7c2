//! Issue 40: a pipeline run survives its server SIGKILLed at every step kind. Its own test
//! binary, so that no other test shares the CPU with its timing-sensitive kills.

use lakefish_tests::*;
use std::time::{Duration, Instant};

const BOOK: &str = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -\n\
rnbqkbnr/pppppppp/8/8/3P4/8/PPP1PPPP/RNBQKBNR b KQkq -\n";

/// A small pipeline whose every byte is reproducible: self-play and the gate at fixed nodes.
const TINY: &str = r#"
version = 1

[pipelines.tiny]
mask = "quiet"
[[pipelines.tiny.inputs]]
source = "binpack"
prefix = "raw/binpack/"
[pipelines.tiny.datagen]
net = "best"
games = 60
nodes = 200
[pipelines.tiny.shuffle]
chunks = 2
seed = 3
[pipelines.tiny.train]
arch = "32x2-8"
batch_size = 4096
epochs = 1
device = "cpu"
[pipelines.tiny.quantize]
max_mean_cp = 1000.0
max_p99_cp = 1000.0
[pipelines.tiny.sprt]
book = "lake:raw/books/book.epd"
nodes = 200
model = "logistic"
elo0 = -1500.0
elo1 = -1000.0
batch_pairs = 2
max_pairs = 6
concurrency = 1
"#;

/// Starts the embedded server in `dir` with the tiny pipeline and its inputs, triggers a run
/// and returns the server, its address and the run's path.
async fn tiny_run(dir: &std::path::Path) -> (Proc, String, String) {
    // Copies back to back (a binpack is a sequence of self-contained chunks): ingest and
    // shuffle long enough to be caught running (the generated input is a seventh of the
    // real sample's size).
    let one = std::fs::read(binpack_input(dir)).unwrap();
    let copies = if one.len() < 512 * 1024 { 40 } else { 6 };
    let (serve, api) = serve_embedded(dir, Some(TINY));
    put_created(
        format!("{api}/v1/raw/binpack/first.binpack"),
        one.repeat(copies),
    )
    .await;
    put_created(format!("{api}/v1/books/book.epd"), BOOK.as_bytes().to_vec()).await;
    let r = reqwest::Client::new()
        .post(format!("{api}/v1/pipelines/tiny/run"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let started: serde_json::Value = r.json().await.unwrap();
    let path = started["url"].as_str().unwrap().to_string();
    (serve, api, path)
}

/// SHA-256 of every data file under `dir/lake/<sub>` (manifests, which hold names and times,
/// left out), sorted: equal for two lakes holding the same bytes.
fn data_hashes(dir: &std::path::Path, sub: &str) -> Vec<String> {
    fn walk(p: &std::path::Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(p).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_none_or(|x| x != "json") {
                out.push(lakefish_jobs::nets::sha256_hex(
                    &std::fs::read(&path).unwrap(),
                ));
            }
        }
    }
    let mut out = Vec::new();
    walk(&dir.join("lake").join(sub), &mut out);
    out.sort();
    out
}

/// Issue 40: the server of a running pipeline SIGKILLed at each step kind (self-play, ingest,
/// shuffle, training, the SPRT) and started again: the run finishes once, each step's jobs
/// ran under one id each and succeeded, every step has one start and end, and the data, the
/// shuffle and the net are those of an uninterrupted run after it.
#[tokio::test(flavor = "multi_thread")]
async fn a_pipeline_run_survives_its_server_killed_at_every_step() {
    let (calm, killed) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (mut serve, mut api, path) = tiny_run(killed.path()).await;
    let mut kills = Vec::new();
    let order = [
        "datagen", "ingest", "mask", "shuffle", "train", "quantize", "register", "sprt",
    ];
    let index = |s: &serde_json::Value| order.iter().position(|o| s == o);
    for step in ["datagen", "ingest", "shuffle", "train", "sprt"] {
        // At the step, with its job running.
        let t0 = Instant::now();
        let mut at_step = None;
        loop {
            let run = get_json(format!("{api}{path}")).await;
            assert_eq!(run["state"], "running", "{step}: {run:#}");
            assert!(
                index(&run["step"]) <= index(&step.into()),
                "{step} passed between two looks (killed at {kills:?}): {run:#}"
            );
            if run["step"] == step {
                let since = *at_step.get_or_insert_with(Instant::now);
                let job = run["jobs"].as_array().unwrap().last().cloned();
                let running = match job {
                    Some(j) if j["step"] == step => {
                        let rec =
                            get_json(format!("{api}/v1/jobs/{}", j["job"].as_str().unwrap())).await;
                        rec["state"] == "running"
                            && (step != "train"
                                || rec["progress"]["done"].as_u64().unwrap_or(0) > 0)
                    }
                    _ => false,
                };
                // A shuffle's and an SPRT's own jobs end at once, their fanned-out tasks
                // run on: a few tenths of a second into the step is inside them.
                let waited = since.elapsed();
                if running
                    || (["shuffle", "sprt"].contains(&step) && waited > Duration::from_millis(300))
                    || waited > Duration::from_secs(20)
                {
                    kills.push(format!("{step} (job running: {running})"));
                    break;
                }
            }
            assert!(
                t0.elapsed() < Duration::from_secs(150),
                "never reached {step}: {run:#}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        serve.kill();
        (serve, api) = serve_embedded(killed.path(), Some(TINY));
    }
    let wait_end = async |api: &str, path: &str| {
        let t0 = Instant::now();
        loop {
            let run = get_json(format!("{api}{path}")).await;
            if run["state"] != "running" {
                return run;
            }
            assert!(t0.elapsed() < Duration::from_secs(240), "stuck: {run:#}");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    };
    let run = wait_end(&api, &path).await;
    assert_eq!(run["state"], "succeeded", "killed at {kills:?}: {run:#}");
    // Each job once in the run, under the id its step derives, and it succeeded.
    let jobs = run["jobs"].as_array().unwrap();
    let mut ids: Vec<&str> = jobs.iter().map(|j| j["job"].as_str().unwrap()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), jobs.len(), "{run:#}");
    for id in ids {
        let rec = get_json(format!("{api}/v1/jobs/{id}")).await;
        assert_eq!(rec["state"], "succeeded", "{rec:#}");
    }
    // Every step begun once and ended, in order, whatever the restarts.
    let timed: Vec<&str> = run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            assert!(t["finished"].is_string(), "{t}");
            t["step"].as_str().unwrap()
        })
        .collect();
    assert_eq!(
        timed,
        [
            "datagen", "ingest", "mask", "shuffle", "train", "quantize", "register", "sprt"
        ],
        "{run:#}"
    );
    drop(serve);
    // The uninterrupted run, after it (the kills above want the CPU to themselves).
    let (_calm_serve, calm_api, calm_path) = tiny_run(calm.path()).await;
    let calm_run = wait_end(&calm_api, &calm_path).await;
    assert_eq!(calm_run["state"], "succeeded", "{calm_run:#}");
    assert_eq!(steps_of(&run), steps_of(&calm_run), "{run:#}");
    // The same data as the uninterrupted run: the ingested parts byte for byte; every
    // shuffled row (self-play's included) in the same chunk at the same place (self-play
    // game ids hash their dataset's name, which holds the run's start time, so the rows are
    // compared as `lakefish chunk` prints them); and the net.
    let (a, b) = (
        data_hashes(calm.path(), "positions/source=binpack"),
        data_hashes(killed.path(), "positions/source=binpack"),
    );
    assert!(!a.is_empty());
    assert_eq!(a, b, "ingested parts differ after the kills at {kills:?}");
    let chunk = |dir: &std::path::Path, shuffle: &str, index: &str| {
        let out = std::process::Command::new(lakefish_bin())
            .args([
                "--lake",
                "lake",
                "chunk",
                shuffle,
                index,
                "--limit",
                "100000000",
            ])
            .current_dir(dir)
            .output()
            .unwrap();
        assert_success(&out);
        out.stdout
    };
    for index in ["0", "1"] {
        let calm_rows = chunk(calm.path(), calm_run["shuffle"].as_str().unwrap(), index);
        let rows = chunk(killed.path(), run["shuffle"].as_str().unwrap(), index);
        assert!(calm_rows.len() > 1000, "chunk {index}");
        assert!(
            calm_rows == rows,
            "chunk {index} differs after the kills at {kills:?}"
        );
    }
    // The nets' bytes, but for the run and shuffle ids in their description.
    let net = |dir: &std::path::Path, run: &serde_json::Value| {
        let mut bytes =
            std::fs::read(dir.join("lake/nets").join(run["net"].as_str().unwrap())).unwrap();
        for field in ["train_run", "shuffle"] {
            let id = run[field].as_str().unwrap().as_bytes().to_vec();
            let at = bytes.windows(id.len()).position(|w| w == id).expect(field);
            bytes = [&bytes[..at], field.as_bytes(), &bytes[at + id.len()..]].concat();
        }
        bytes
    };
    assert!(
        net(calm.path(), &calm_run) == net(killed.path(), &run),
        "the nets differ after the kills at {kills:?}"
    );
    assert_eq!(run["sprt_state"], calm_run["sprt_state"]);
}
