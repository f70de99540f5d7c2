//! SPRT fanned out as batches over two worker processes (Redis queue, S3-compatible lake),
//! with one worker killed mid-test, against the same test played in-process: identical
//! counts, LLR and games. Plus the API's refusals and the calculator.

use std::time::{Duration, Instant};

use lakefish_tests::*;
use serde_json::{Value, json};

fn book(dir: &std::path::Path) -> String {
    match shared_data("openings/noob_2moves.epd") {
        Some(p) => p.to_str().unwrap().to_string(),
        None => {
            let p = dir.join("book.epd");
            std::fs::write(
                &p,
                "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 0 3\n\
                 rnbqkb1r/pppp1ppp/5n2/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 0 3\n\
                 rnbqkbnr/pp1ppppp/8/2p5/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 0 2\n",
            )
            .unwrap();
            p.to_str().unwrap().to_string()
        }
    }
}

async fn post(url: String, body: &Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(url)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn check_counts(s: &Value) {
    let n = |k: &str| s[k].as_u64().unwrap();
    let penta: Vec<u64> = s["penta"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    let pairs: u64 = penta.iter().sum();
    assert_eq!(n("games"), 2 * pairs, "{s}");
    assert_eq!(n("wins") + n("draws") + n("losses"), n("games"), "{s}");
    let half_points: u64 = penta.iter().enumerate().map(|(k, c)| k as u64 * c).sum();
    assert_eq!(2 * n("wins") + n("draws"), half_points, "{s}");
    assert_eq!(
        s["llr_history"].as_array().unwrap().len() as u64,
        n("batches"),
        "{s}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn distributed_sprt_survives_a_killed_worker_and_equals_in_process() {
    let dir = tempfile::tempdir().unwrap();
    let book = book(dir.path());
    let spec = json!({
        "new": "classical", "base": "material", "book": book, "nodes": 2500,
        "elo0": 0, "elo1": 60, "batch_pairs": 2, "max_pairs": 60, "concurrency": 3,
    });

    let mut cluster = Cluster::start(dir.path(), "lakefish-sprt", &["w1", "w2"]);
    let api = cluster.api.clone();
    let (code, started) = post(format!("{api}/v1/sprt"), &spec).await;
    assert_eq!(code, 202, "{started}");
    let id = started["id"].as_str().unwrap().to_string();
    // The same request finds the same test.
    let (code, again) = post(format!("{api}/v1/sprt"), &spec).await;
    assert_eq!((code, again["id"].as_str()), (202, Some(id.as_str())));

    // Kill one worker once games are being played; its batch is re-run elsewhere.
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut killed = false;
    let status = loop {
        assert!(Instant::now() < deadline, "sprt {id} did not finish");
        let s = get_json(format!("{api}/v1/sprt/{id}")).await;
        check_counts(&s);
        if !killed && s["batches"].as_u64().unwrap() >= 1 {
            cluster.kill_worker(0);
            killed = true;
        }
        if s["state"] != "running" {
            break s;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert!(killed);
    assert_eq!(status["state"], "accepted", "{status}");
    assert!(status["llr"].as_f64().unwrap() >= status["upper"].as_f64().unwrap());
    let llr = status["llr_history"].as_array().unwrap();
    assert!(
        llr[..llr.len() - 1]
            .iter()
            .all(|v| v.as_f64().unwrap() < status["upper"].as_f64().unwrap())
    );

    // In-process, on a local lake: the same test gives the same numbers and games.
    let local = dir.path().join("local-lake");
    let out = std::process::Command::new(lakefish_bin())
        .args([
            "--lake",
            local.to_str().unwrap(),
            "sprt",
            "--new",
            "classical",
            "--base",
            "material",
        ])
        .args([
            "--book", &book, "--nodes", "2500", "--elo0", "0", "--elo1", "60",
        ])
        .args(["--batch-pairs", "2", "--max-pairs", "60"])
        .output()
        .unwrap();
    assert_success(&out);
    let here: Value = serde_json::from_slice(
        &std::fs::read(local.join(format!("sprt/{id}/result.json"))).unwrap_or_else(|e| {
            panic!(
                "in-process test has another id than {id}: {e}; {}",
                String::from_utf8_lossy(&out.stdout)
            )
        }),
    )
    .unwrap();
    for k in [
        "state",
        "wins",
        "draws",
        "losses",
        "penta",
        "games",
        "batches",
        "llr",
        "llr_history",
    ] {
        assert_eq!(here[k], status[k], "{k}");
    }
    let out = std::process::Command::new(lakefish_bin())
        .args(["--lake", local.to_str().unwrap(), "sprt", "show", &id])
        .output()
        .unwrap();
    assert_success(&out);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains(&format!("sprt {id}: Accepted")) && shown.contains("pentanomial"),
        "{shown}"
    );
    let pgn = get_text(format!("{api}/v1/sprt/{id}/pgn")).await;
    // The same games and engine output; only the clock readings differ.
    assert_eq!(
        pgn_untimed(&pgn),
        pgn_untimed(&std::fs::read_to_string(local.join(format!("sprt/{id}/games.pgn"))).unwrap())
    );
    assert_eq!(
        pgn.matches("[Event ").count() as u64,
        status["games"].as_u64().unwrap()
    );

    // Listing and filters.
    let listed = get_json(format!("{api}/v1/sprt?net=material&state=accepted")).await;
    assert_eq!(listed["tests"][0]["id"], id.as_str());
    let none = get_json(format!("{api}/v1/sprt?state=rejected")).await;
    assert!(none["tests"].as_array().unwrap().is_empty());
    let r = reqwest::get(format!("{api}/v1/sprt?state=sideways"))
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let r = reqwest::get(format!("{api}/v1/sprt/sprt-000000000000"))
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = reqwest::get(format!("{api}/v1/sprt/..%2Fnets"))
        .await
        .unwrap();
    assert_eq!(r.status(), 404);

    // Bad requests: each a 400 naming the problem, and no test written for it.
    let empty = dir.path().join("empty.epd");
    std::fs::write(&empty, "\n").unwrap();
    let illegal = dir.path().join("illegal.epd");
    std::fs::write(&illegal, "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -\nrnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNK w - -\n").unwrap();
    let before = get_json(format!("{api}/v1/sprt")).await["tests"]
        .as_array()
        .unwrap()
        .len();
    for (patch, expect) in [
        (
            json!({"elo0": 2, "elo1": 0}),
            "elo1 (0) must be greater than elo0 (2)",
        ),
        (json!({"book": empty.to_str().unwrap()}), "has no positions"),
        (
            json!({"book": illegal.to_str().unwrap()}),
            "line 2: illegal position",
        ),
        (
            json!({"new": "nn-000000000000"}),
            "nn-000000000000 is not registered",
        ),
        (json!({"base": "classical"}), "the same evaluation"),
        (json!({"tc": "fast"}), "give nodes or tc, not both"),
        (
            json!({"nodes": null, "tc": "fast"}),
            "time control \"fast\"",
        ),
        (json!({"model": "bayes"}), "model \"bayes\""),
    ] {
        let mut body = spec.clone();
        for (k, v) in patch.as_object().unwrap() {
            body[k] = v.clone();
        }
        let (code, v) = post(format!("{api}/v1/sprt"), &body).await;
        assert_eq!(code, 400, "{patch}: {v}");
        assert!(
            v["error"].as_str().unwrap().contains(expect),
            "{patch}: {v}"
        );
    }
    let after = get_json(format!("{api}/v1/sprt")).await["tests"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(before, after);

    // The calculator, against fishtest's published LLR for these counts.
    let c = get_json(format!(
        "{api}/v1/sprt/calc?penta=39,2226,31451,2412,40&elo0=0.764&elo1=3.439"
    ))
    .await;
    assert!(
        (c["llr"].as_f64().unwrap() - 2.162_940_869_6).abs() < 1e-4,
        "{c}"
    );
    assert_eq!(c["decision"], "continue");
    let r = reqwest::get(format!("{api}/v1/sprt/calc?wdl=1,2&elo0=0&elo1=2"))
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let out = std::process::Command::new(lakefish_bin())
        .args([
            "sprt",
            "calc",
            "--penta",
            "39,2226,31451,2412,40",
            "--elo0",
            "0.764",
            "--elo1",
            "3.439",
        ])
        .output()
        .unwrap();
    assert_success(&out);
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("LLR 2.1629"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// An experiment queued on two workers (Redis, an S3-compatible lake, PostgreSQL records):
/// its cells run as `experiment_cell` jobs, its matches as SPRT batches, and the scheduler is
/// killed and restarted once the first cell is in; the table equals the same document run
/// in-process (`lakefish experiment run`) on a local lake made from the same data: nets with
/// the same losses and quantization errors (their files differ only by the run and shuffle
/// they name in their description),
/// the same games and ratings.
#[tokio::test(flavor = "multi_thread")]
async fn a_queued_experiment_equals_the_same_run_in_process() {
    let dir = tempfile::tempdir().unwrap();
    let games = dir.path().join("games.binpack");
    std::fs::write(&games, lakefish_ingest::binpack::synthetic_binpack(400, 5)).unwrap();
    let games = games.to_str().unwrap().to_string();
    let book = dir.path().join("two.epd");
    std::fs::write(
        &book,
        "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -\n\
         rnbqkbnr/pppppppp/8/8/3P4/8/PPP1PPPP/RNBQKBNR b KQkq -\n",
    )
    .unwrap();
    let doc = |shuffle: &str| {
        json!({
            "base": {"shuffle": shuffle, "arch": "32x2-8", "batch_size": 1024, "device": "cpu",
                     "seed": 11, "lr": 0.003},
            "axes": [{"field": "arch", "values": ["32x2-8", "16x2-8"]},
                     {"field": "lambda_start", "values": [1.0, 0.5]}],
            "rating": {"book": book.to_str().unwrap(), "nodes": 200, "pairs": 1,
                       "anchor": "material"}
        })
    };

    let mut cluster = Cluster::start(dir.path(), "lakefish-experiment", &["w1", "w2"]);
    let api = cluster.api.clone();
    run_job_ok(
        &api,
        &json!({"kind": "ingest_binpack", "spec": {"inputs": [games], "dataset": "exp"}}),
    )
    .await;
    run_job_ok(
        &api,
        &json!({"kind": "mask", "spec": {"dataset": "exp", "definition": {"name": "quiet"}}}),
    )
    .await;
    let rec = run_job_ok(&api, &json!({"kind": "shuffle", "spec": {"datasets": ["exp"], "mask": "quiet", "chunks": 3, "seed": 3}})).await;
    let shuffle = rec.result.unwrap()["shuffle"].as_str().unwrap().to_string();
    wait_for_shuffle(&api, &shuffle, Duration::from_secs(120)).await;
    let rec = run_job_ok(&api, &json!({"kind": "experiment", "spec": doc(&shuffle)})).await;
    let id = rec.result.unwrap()["experiment"]
        .as_str()
        .unwrap()
        .to_string();

    let deadline = Instant::now() + Duration::from_secs(300);
    let mut restarted = false;
    let queued = loop {
        assert!(Instant::now() < deadline, "experiment {id} did not finish");
        let s = get_json(format!("{}/v1/experiments/{id}", cluster.api)).await;
        if !restarted && s["cells_done"].as_u64().unwrap() >= 1 {
            cluster.restart_api();
            restarted = true;
        }
        match s["state"].as_str().unwrap() {
            "succeeded" => break s,
            "failed" => panic!("{s}"),
            _ => tokio::time::sleep(Duration::from_millis(300)).await,
        }
    };
    let api = cluster.api.clone();
    let jobs = get_json(format!("{api}/v1/jobs?kind=experiment_cell&limit=100")).await;
    let cells: Vec<&Value> = jobs["jobs"].as_array().unwrap().iter().collect();
    assert_eq!(cells.len(), 4, "{jobs}");
    assert!(cells.iter().all(|j| j["state"] == "succeeded"), "{jobs}");
    let csv = get_text(format!("{api}/v1/experiments/{id}/table.csv")).await;
    assert_eq!(csv.lines().count(), 6, "{csv}");

    // In-process on a local lake: the same data, shuffle and document.
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
    cli(&["ingest", "binpack", &games, "--dataset", "exp"]);
    cli(&["mask", "quiet", "--dataset", "exp"]);
    let out = cli(&[
        "shuffle",
        "--dataset",
        "exp",
        "--mask",
        "quiet",
        "--chunks",
        "3",
        "--seed",
        "3",
    ]);
    let manifest: Value = serde_json::from_slice(&out.stdout).unwrap();
    let local_shuffle = manifest["id"].as_str().unwrap();
    let file = dir.path().join("experiment.json");
    std::fs::write(&file, doc(local_shuffle).to_string()).unwrap();
    let out = cli(&[
        "experiment",
        "run",
        file.to_str().unwrap(),
        "--threads",
        "1",
        "--json",
    ]);
    let here: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(here["state"], "succeeded", "{here}");
    assert_eq!(here["pairings"].as_array().unwrap().len(), 10);
    for (a, b) in here["table"]
        .as_array()
        .unwrap()
        .iter()
        .zip(queued["table"].as_array().unwrap())
    {
        for k in ["player", "games", "score"] {
            assert_eq!(a[k], b[k], "{k}: {a} / {b}");
        }
        for k in ["val_loss", "material_val_loss", "quantized_mean_cp"] {
            assert_eq!(a["cell"][k], b["cell"][k], "{k}: {a} / {b}");
        }
        for k in ["elo", "elo_error"] {
            assert!(
                (a[k].as_f64().unwrap() - b[k].as_f64().unwrap()).abs() < 1e-6,
                "{k}: {a} / {b}"
            );
        }
    }
    let pairs = |s: &Value| -> Vec<Value> {
        s["pairings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                json!([
                    p["a"],
                    p["b"],
                    p["wins"],
                    p["draws"],
                    p["losses"],
                    p["penta"]
                ])
            })
            .collect()
    };
    assert_eq!(pairs(&here), pairs(&queued));
    let out = cli(&["experiment", "show", here["id"].as_str().unwrap()]);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("Elo relative to material"), "{shown}");
    let out = cli(&["experiment", "ls"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("succeeded  cells 4/4  matches 10/10"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
