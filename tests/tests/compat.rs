//! What an older release wrote, the code of today reads, serves, runs and trains on (issue
//! 36): `tests/data/compat/` holds a lake, its SQLite metastore and a SQLite queue with one job
//! left queued, all made by `tests/data/compat/make.sh` with the release named in its
//! `VERSION`. The fixture is copied first: the repository's files stay as they are.

use lakefish_testkit::copy_dir;
use lakefish_tests::{assert_success, get_json, get_text, lakefish, lakefish_bin, workspace_root};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn run(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(lakefish_bin())
        .args(args)
        .current_dir(dir)
        .env_remove("LAKEFISH_LAKE")
        .env_remove("LAKEFISH_API")
        .output()
        .unwrap();
    assert_success(&out);
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lake_metastore_and_queue_of_an_older_release_open_run_and_train() {
    let fixture = workspace_root().join("tests/data/compat");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    copy_dir(&fixture, dir);
    let queued: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("queued.json")).unwrap()).unwrap();
    let queued = queued["id"].as_str().unwrap().to_string();

    // Read: datasets, runs and nets as the older release left them.
    let datasets: serde_json::Value =
        serde_json::from_str(&run(dir, &["--lake", "lake", "datasets", "--json"])).unwrap();
    let names: Vec<&str> = datasets
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["compat", "play"], "{datasets:#}");
    let runs: serde_json::Value =
        serde_json::from_str(&run(dir, &["--lake", "lake", "runs", "--json"])).unwrap();
    let run_id = runs[0]["id"].as_str().unwrap().to_string();
    assert_eq!(runs[0]["finished"], true, "{runs:#}");
    let nets = run(dir, &["--lake", "lake", "nets", "ls"]);
    let net = nets.split_whitespace().next().unwrap().to_string();
    assert!(net.starts_with("nn-") && net.ends_with(".nnue"), "{nets}");

    // Served: the queued job runs, the dashboard and the API list what the lake holds.
    let (mut server, api) = lakefish(
        &[
            "--lake",
            "lake",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--queue-db",
            "queue.sqlite",
        ],
        &[],
        dir,
    );
    let api = api.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let job = loop {
        let job = get_json(format!("{api}/v1/jobs/{queued}")).await;
        if job["state"] == "succeeded" || job["state"] == "failed" {
            break job;
        }
        assert!(
            Instant::now() < deadline,
            "the queued job never ran: {job:#}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(job["state"], "succeeded", "{job:#}");
    let listed = get_json(format!("{api}/v1/datasets")).await;
    let compat = listed["datasets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "compat")
        .unwrap_or_else(|| panic!("{listed:#}"));
    assert_eq!(
        compat["masks"],
        serde_json::json!(["ply8", "quiet"]),
        "{listed:#}"
    );
    let page = get_text(format!("{api}/ui/nets")).await;
    assert!(page.contains(&net), "{page}");
    let tests = get_json(format!("{api}/v1/sprt?net={net}")).await;
    assert_eq!(tests["tests"].as_array().unwrap().len(), 1, "{tests:#}");
    server.kill();

    // Trained on: the old run goes on from its last checkpoint; a new run uses its shuffle.
    let shuffle = runs[0]["spec"]["shuffle"].as_str().unwrap().to_string();
    let resumed: serde_json::Value = serde_json::from_str(&run(
        dir,
        &[
            "--lake",
            "lake",
            "train",
            "--shuffle",
            &shuffle,
            "--resume",
            &run_id,
            "--epochs",
            "2",
        ],
    ))
    .unwrap();
    assert_eq!(resumed["finished"], true, "{resumed:#}");
    assert!(
        resumed["step"].as_u64().unwrap() > runs[0]["step"].as_u64().unwrap(),
        "{resumed:#}"
    );
    assert_eq!(resumed["val_loss"].as_array().unwrap().len(), 2);
    let fresh: serde_json::Value = serde_json::from_str(&run(
        dir,
        &[
            "--lake",
            "lake",
            "train",
            "--shuffle",
            &shuffle,
            "--arch",
            "32x2-8-8",
            "--batch-size",
            "256",
        ],
    ))
    .unwrap();
    assert_eq!(fresh["finished"], true, "{fresh:#}");
    // The fixture itself is as it was.
    assert!(!fixture.join("lake/masks/ply8").exists());
}
