//! The trust boundaries of a live `lakefish serve` (issue 34), each against real processes:
//! a submitter cannot make a worker's engine write a file, a web page cannot register an
//! engine (code on every worker), slow clients cannot hold the server, an upload a killed
//! server left half-written is swept at the next start, and what we ship never runs as root.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use lakefish_tests::*;
use serde_json::{Value, json};

const STOCKFISH: &str = "/usr/games/stockfish";
const SUBMIT: &str = "lf-submit-token";
const READ: &str = "lf-read-token";

fn tokens_config() -> String {
    let token = |name: &str, secret: &str, scopes: &str| {
        format!(
            "[[auth.tokens]]\nname = \"{name}\"\nsha256 = \"{}\"\nscopes = [{scopes}]\n",
            lakefish_schemas::config::token_sha256(secret)
        )
    };
    format!(
        "version = 1\n[auth]\nanonymous_read = false\n{}{}",
        token("submitter", SUBMIT, "\"read\", \"submit\""),
        token("reader", READ, "\"read\"")
    )
}

fn book(dir: &Path) -> String {
    let p = dir.join("book.epd");
    std::fs::write(
        &p,
        "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -\n\
         rnbqkbnr/pppppppp/8/8/3P4/8/PPP1PPPP/RNBQKBNR b KQkq -\n",
    )
    .unwrap();
    p.display().to_string()
}

/// A GET with the read token, as JSON.
async fn read(url: &str) -> Value {
    reqwest::Client::new()
        .get(url)
        .bearer_auth(READ)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Scratch directories engines ran in that are still there.
fn engine_scratch_dirs(tmp: &Path) -> Vec<String> {
    std::fs::read_dir(tmp)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("lakefish-engine-"))
                .collect()
        })
        .unwrap_or_default()
}

/// Issue 34, item 1: with a `submit` token, Stockfish's `Debug Log File` (a path), an option
/// no admin allowed, more threads than registered, or a misspelled option are refused at the
/// door naming the option, for SPRTs and datagen alike; the file stays as it was. What the
/// admin allowed still plays, on a worker, in a scratch directory removed afterwards.
#[tokio::test(flavor = "multi_thread")]
async fn a_submitter_cannot_make_a_worker_s_engine_write_a_file() {
    assert!(
        Path::new(STOCKFISH).exists(),
        "make test installs stockfish (apt)"
    );
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(lakefish_bin())
        .args([
            "--lake",
            "lake",
            "engines",
            "add",
            "sf",
            "--command",
            STOCKFISH,
        ])
        .args([
            "--option",
            "Threads=1",
            "--allow",
            "Skill Level=0..10",
            "--no-check",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_success(&out);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("sides may set Skill Level: 0..10"), "{said}");
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "precious\n").unwrap();
    std::fs::write(dir.path().join("lakefish.toml"), tokens_config()).unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let (_serve, api) = lakefish(
        &[
            "--config",
            "lakefish.toml",
            "--lake",
            "lake",
            "serve",
            "--listen",
            "127.0.0.1:0",
        ],
        &[("TMPDIR".into(), tmp.display().to_string())],
        dir.path(),
    );
    let api = api.unwrap();
    let http = reqwest::Client::new();
    let book = book(dir.path());
    let log = victim.display().to_string();
    for (side, status, names) in [
        (
            format!("sf,Debug Log File={log},Skill Level=1"),
            403,
            "Debug Log File",
        ),
        (format!("sf,Debug Log File={log}"), 403, "Debug Log File"),
        ("sf,Threads=8".into(), 403, "Threads"),
        ("sf,Skill Level=20".into(), 403, "0..10"),
        (format!("sf,EvalFile={log}"), 403, "EvalFile"),
        ("sf,Thraeds=1".into(), 400, "Thraeds"),
    ] {
        let sprt = json!({"new": side, "base": "sf", "book": book, "nodes": 100});
        let datagen = json!({"kind": "datagen", "spec": {
            "net": "classical", "engine": side, "dataset": "sfdata", "games": 1, "nodes": 100}});
        for (route, body) in [("sprt", &sprt), ("jobs", &datagen)] {
            let r = http
                .post(format!("{api}/v1/{route}"))
                .bearer_auth(SUBMIT)
                .json(body)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), status, "{route} {side}");
            let err: Value = r.json().await.unwrap();
            let msg = err["error"].as_str().unwrap();
            assert!(msg.contains(names), "{route} {side}: {msg}");
        }
    }
    // A reader may not submit at all; nothing above was recorded.
    let r = http
        .post(format!("{api}/v1/jobs"))
        .bearer_auth(READ)
        .json(&json!({"kind": "datagen", "spec": {"net": "classical", "dataset": "x", "games": 1}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let jobs = read(&format!("{api}/v1/jobs")).await;
    assert_eq!(jobs["jobs"].as_array().unwrap().len(), 0, "{jobs}");

    // What the admin allowed plays: Stockfish at Skill Level 1 on the worker.
    let r = http
        .post(format!("{api}/v1/jobs"))
        .bearer_auth(SUBMIT)
        .json(&json!({"kind": "datagen", "spec": {"net": "classical",
            "engine": "sf,skill level=1", "dataset": "sfdata", "games": 2, "nodes": 300,
            "random_plies": 4, "max_plies": 40}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let id = r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    let rec = loop {
        let rec = read(&format!("{api}/v1/jobs/{id}")).await;
        if rec["state"] == "succeeded" || rec["state"] == "failed" {
            break rec;
        }
        assert!(std::time::Instant::now() < deadline, "datagen still {rec}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(rec["state"], "succeeded", "{rec}");
    assert_eq!(rec["result"]["net"], "sf,Skill Level=1", "{rec}");
    assert!(rec["result"]["positions"].as_u64().unwrap() > 0, "{rec}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert_eq!(engine_scratch_dirs(&tmp), Vec::<String>::new());
}

/// Issue 34, item 2: the token-less loopback default, driven as a web page would drive it.
/// Form posts and `text/plain` bodies never reach a JSON handler, a request from another
/// origin or under a rebinding name is refused, and the engine routes are off without
/// tokens: no engine is registered, no job recorded, no command run.
#[tokio::test(flavor = "multi_thread")]
async fn a_web_page_cannot_register_an_engine_or_run_a_command() {
    let dir = tempfile::tempdir().unwrap();
    let (_serve, api) = serve_embedded(dir.path(), None);
    let witness = dir.path().join("pwned");
    let engine = json!({"name": "sh", "command": "/bin/sh",
        "args": ["-c", format!("id > {}; echo uciok", witness.display())]})
    .to_string();
    let datagen = json!({"kind": "datagen", "spec": {"net": "classical", "engine": "sh",
        "dataset": "pwn", "games": 1}})
    .to_string();
    let port = api.rsplit(':').next().unwrap().to_string();
    let http = reqwest::Client::new();
    let post = |path: &str, body: &str, headers: &[(&str, String)]| {
        let mut r = http.post(format!("{api}{path}")).body(body.to_string());
        for (k, v) in headers {
            r = r.header(*k, v);
        }
        r.send()
    };
    let evil = ("origin", "http://evil.example".to_string());
    for ct in ["text/plain", "application/x-www-form-urlencoded"] {
        let plain = ("content-type", ct.to_string());
        let r = post("/v1/engines", &engine, &[evil.clone(), plain.clone()])
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{ct}");
        let r = post("/v1/engines", &engine, std::slice::from_ref(&plain))
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "no tokens: the engine routes are off");
        let r = post("/v1/jobs", &datagen, std::slice::from_ref(&plain))
            .await
            .unwrap();
        assert_eq!(r.status(), 415, "{ct}");
        let r = post("/v1/jobs", &datagen, &[evil.clone(), plain])
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{ct}");
    }
    let json_ct = ("content-type", "application/json".to_string());
    let r = post("/v1/engines", &engine, std::slice::from_ref(&json_ct))
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let msg: Value = r.json().await.unwrap();
    assert!(
        msg["error"]
            .as_str()
            .unwrap()
            .contains("admin_without_tokens"),
        "{msg}"
    );
    // DNS rebinding: the page's own name in Host, on a read as on a write.
    let rebound = ("host", format!("attacker.example:{port}"));
    let r = http
        .get(format!("{api}/v1/engines"))
        .header("host", rebound.1.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = post("/v1/jobs", &datagen, &[rebound, json_ct])
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let engines = get_json(format!("{api}/v1/engines")).await;
    assert_eq!(engines["engines"].as_array().unwrap().len(), 0, "{engines}");
    let jobs = get_json(format!("{api}/v1/jobs")).await;
    assert_eq!(jobs["jobs"].as_array().unwrap().len(), 0, "{jobs}");
    assert!(!witness.exists(), "the command ran");
}

/// Reads until the server closes the connection (or 60 s pass: a server that holds it
/// fails the test). Returns what it answered.
fn read_until_closed(mut s: TcpStream) -> Result<String, String> {
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut out = Vec::new();
    match s.read_to_end(&mut out) {
        Ok(_) => Ok(String::from_utf8_lossy(&out).into_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
            Ok(String::from_utf8_lossy(&out).into_owned())
        }
        Err(e) => Err(format!("still open: {e}")),
    }
}

/// Issue 34, item 3: clients that never finish their headers, or stall their bodies, are
/// cut off; more of them than the connection cap only wait; a normal client still gets in.
#[tokio::test(flavor = "multi_thread")]
async fn slow_clients_are_cut_off_and_cannot_hold_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let config = "version = 1\n[server]\nheader_timeout_secs = 1\nbody_timeout_secs = 1\n\
                  max_connections = 8\n";
    let (_serve, api) = serve_embedded(dir.path(), Some(config));
    let addr = api.strip_prefix("http://").unwrap().to_string();
    let mut slow = Vec::new();
    for i in 0..24 {
        let mut s = TcpStream::connect(&addr).unwrap();
        let partial = if i % 2 == 0 {
            // Headers that never end.
            format!("GET /v1/jobs HTTP/1.1\r\nHost: {addr}\r\nX-Slow: ")
        } else {
            // A body that stalls after its first byte.
            format!(
                "POST /v1/jobs HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
                 Content-Length: 1000\r\n\r\n{{"
            )
        };
        s.write_all(partial.as_bytes()).unwrap();
        slow.push(s);
    }
    // A normal request gets an answer while they hang on (it waits for a slot at most).
    let r = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
        .get(format!("{api}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let answers: Vec<Result<String, String>> =
        tokio::task::spawn_blocking(move || slow.into_iter().map(read_until_closed).collect())
            .await
            .unwrap();
    for (i, a) in answers.iter().enumerate() {
        let a = a.as_ref().unwrap_or_else(|e| panic!("connection {i}: {e}"));
        // A stalled body is answered (the handler saw its read fail), never with a 202.
        assert!(!a.contains(" 202 "), "connection {i}: {a}");
    }
    let jobs = get_json(format!("{api}/v1/jobs")).await;
    assert_eq!(jobs["jobs"].as_array().unwrap().len(), 0, "{jobs}");
}

/// Issue 34, item 4: a server SIGKILLed in the middle of an upload leaves a staging file
/// (`NAME#N`) and no object; the next start removes the staging file once it is older than
/// any live upload could leave it.
#[tokio::test(flavor = "multi_thread")]
async fn an_interrupted_upload_s_staging_file_is_swept_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let (mut serve, api) = serve_embedded(dir.path(), None);
    let addr = api.strip_prefix("http://").unwrap().to_string();
    let mut s = TcpStream::connect(&addr).unwrap();
    let total = 40usize << 20;
    s.write_all(
        format!(
            "PUT /v1/raw/binpack/big.binpack HTTP/1.1\r\nHost: {addr}\r\n\
             Content-Length: {total}\r\n\r\n"
        )
        .as_bytes(),
    )
    .unwrap();
    let chunk = vec![7u8; 1 << 20];
    for _ in 0..24 {
        s.write_all(&chunk).unwrap();
    }
    let folder = dir.path().join("lake/raw/binpack");
    let staging = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(&folder)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .filter(|p| p.to_string_lossy().contains('#'))
                    .collect()
            })
            .unwrap_or_default()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while staging().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no staging file appeared"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    serve.kill();
    drop(s);
    let left = staging();
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(
        !folder.join("big.binpack").exists(),
        "no object from a cut upload"
    );
    // Younger than an hour: a live upload's, kept.
    let (again, _) = serve_embedded(dir.path(), None);
    drop(again);
    assert_eq!(staging(), left);
    let old = std::time::SystemTime::now() - Duration::from_secs(2 * 3600);
    std::fs::File::options()
        .write(true)
        .open(&left[0])
        .unwrap()
        .set_modified(old)
        .unwrap();
    let (_serve, api) = serve_embedded(dir.path(), None);
    assert_eq!(staging(), Vec::<std::path::PathBuf>::new());
    // The name is free: the whole file uploads as new.
    put_created(format!("{api}/v1/raw/binpack/big.binpack"), vec![1, 2, 3]).await;
}

/// Issue 34: what we ship runs as an unprivileged user, so a mistake elsewhere is not root
/// on a worker.
#[test]
fn shipped_deployments_never_run_as_root() {
    let root = workspace_root();
    let docker = std::fs::read_to_string(root.join("infra/Dockerfile")).unwrap();
    let final_stage = docker.rsplit("\nFROM ").next().unwrap();
    let user = final_stage
        .lines()
        .filter_map(|l| l.trim().strip_prefix("USER "))
        .next_back()
        .expect("the final image sets USER");
    assert!(!["root", "0", "0:0"].contains(&user.trim()), "{user}");
    let compose = std::fs::read_to_string(root.join("infra/compose.yaml")).unwrap();
    let lakefish_services = compose.matches("infra/Dockerfile").count();
    assert_eq!(
        compose.matches("user: \"10001:10001\"").count(),
        lakefish_services,
        "every lakefish service in compose.yaml names the unprivileged user"
    );
    for unit in ["lakefish-api.service", "lakefish-worker@.service"] {
        let text = std::fs::read_to_string(root.join("infra/systemd").join(unit)).unwrap();
        let user = text
            .lines()
            .find_map(|l| l.strip_prefix("User="))
            .unwrap_or_else(|| panic!("{unit} sets no User="));
        assert_ne!(user.trim(), "root", "{unit}");
        assert!(text.contains("NoNewPrivileges=true"), "{unit}");
    }
}
