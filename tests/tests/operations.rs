//! Operating the service: the config file (and its environment overrides), API tokens with
//! scopes, request limits, and the configs in infra/ loading.

use lakefish_tests::*;
use serde_json::json;
use std::process::Command;

fn token_entry(name: &str, token: &str, scopes: &str) -> String {
    format!(
        "[[auth.tokens]]\nname = \"{name}\"\nsha256 = \"{}\"\nscopes = {scopes}\n",
        lakefish_schemas::config::token_sha256(token)
    )
}

async fn status(req: reqwest::RequestBuilder) -> u16 {
    req.send().await.unwrap().status().as_u16()
}

#[tokio::test(flavor = "multi_thread")]
async fn tokens_scopes_and_limits() {
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "version = 1\n[server]\nlake = \"lake\"\nmax_body_bytes = 4096\n[auth]\nanonymous_read = false\n{}{}{}",
        token_entry("reader", "r-token", "[\"read\"]"),
        token_entry("ci", "s-token", "[\"read\", \"submit\"]"),
        token_entry("ops", "a-token", "[\"admin\"]"),
    );
    std::fs::write(dir.path().join("lakefish.toml"), config).unwrap();
    // The listen address comes from the environment override, the lake from the file.
    let env = [(
        "LAKEFISH__SERVER__LISTEN".to_string(),
        "127.0.0.1:0".to_string(),
    )];
    let (_serve, api) = lakefish(&["--config", "lakefish.toml", "serve"], &env, dir.path());
    let api = api.unwrap();
    let c = reqwest::Client::new();
    let jobs = format!("{api}/v1/jobs");

    // Health checks need no token; everything else does.
    assert_eq!(status(c.get(format!("{api}/healthz"))).await, 200);
    let resp = c.get(&jobs).send().await.unwrap();
    assert_eq!(resp.status(), 401);
    assert!(resp.headers().contains_key("www-authenticate"));
    assert_eq!(status(c.get(&jobs).bearer_auth("wrong")).await, 401);
    assert_eq!(status(c.get(&jobs).bearer_auth("r-token")).await, 200);
    assert_eq!(status(c.get(&jobs).bearer_auth("a-token")).await, 200);

    // A reader may not submit (403, naming the scope); a submitter may.
    let mask = json!({ "kind": "mask", "spec": { "dataset": "nothing", "definition": { "name": "quiet" } } });
    let resp = c
        .post(&jobs)
        .bearer_auth("r-token")
        .json(&mask)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("submit"), "{body}");
    assert_eq!(
        status(c.post(&jobs).bearer_auth("s-token").json(&mask)).await,
        202
    );
    // Nothing was queued by the refused request: one job exists.
    let listed: serde_json::Value = c
        .get(&jobs)
        .bearer_auth("s-token")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 1);

    // Running a pipeline by hand is for admins.
    let run = format!("{api}/v1/pipelines/nightly/run");
    assert_eq!(status(c.post(&run).bearer_auth("s-token")).await, 403);

    // The configured body limit (4 KiB) holds.
    let big = json!({ "kind": "mask", "spec": { "dataset": "x".repeat(5000) } });
    assert_eq!(
        status(c.post(&jobs).bearer_auth("s-token").json(&big)).await,
        413
    );

    // Names that would walk out of the lake are refused before any lake access.
    for bad in ["..%2F..%2Fetc", "a%2Fb", "..", "%2E%2E"] {
        let s = status(c.get(format!("{api}/v1/nets/{bad}")).bearer_auth("r-token")).await;
        assert!(s == 400 || s == 404, "{bad}: {s}");
        for upload in [
            format!("{api}/v1/raw/binpack/{bad}"),
            format!("{api}/v1/books/{bad}"),
        ] {
            let s = status(c.put(upload).bearer_auth("s-token").body("x")).await;
            assert!(s == 400 || s == 404, "{bad}: {s}");
        }
        let run = format!("{api}/v1/pipelines/nightly/runs/{bad}");
        let s = status(c.get(run).bearer_auth("r-token")).await;
        assert_eq!(s, 404, "{bad}");
    }
    assert!(!dir.path().join("etc").exists());
    assert!(
        !dir.path().join("lake/raw").exists(),
        "a refused upload wrote something"
    );

    // The CLI sends LAKEFISH_TOKEN.
    let out = Command::new(lakefish_bin())
        .args(["jobs", "--api", &api])
        .env("LAKEFISH_TOKEN", "r-token")
        .output()
        .unwrap();
    assert_success(&out);
    let out = Command::new(lakefish_bin())
        .args(["jobs", "--api", &api])
        .env_remove("LAKEFISH_TOKEN")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("401"));
}

#[tokio::test(flavor = "multi_thread")]
async fn anonymous_read_opens_reads_only() {
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "version = 1\n[auth]\nanonymous_read = true\n{}",
        token_entry("ci", "s-token", "[\"submit\"]")
    );
    let (_serve, api) = serve_embedded(dir.path(), Some(&config));
    let c = reqwest::Client::new();
    assert_eq!(status(c.get(format!("{api}/v1/datasets"))).await, 200);
    let mask = json!({ "kind": "mask", "spec": { "dataset": "nothing", "definition": { "name": "quiet" } } });
    assert_eq!(
        status(c.post(format!("{api}/v1/jobs")).json(&mask)).await,
        401
    );
    assert_eq!(
        status(
            c.post(format!("{api}/v1/jobs"))
                .bearer_auth("s-token")
                .json(&mask)
        )
        .await,
        202
    );
}

/// `--gpu` is a claim checked at start: on a machine where libtorch sees no GPU the worker
/// refuses to start (it would take CUDA jobs it cannot run), before touching the queue.
#[test]
fn a_gpu_worker_without_a_gpu_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(lakefish_bin())
        .args(["--lake", dir.path().join("lake").to_str().unwrap()])
        .args(["worker", "--gpu", "--redis", "redis://127.0.0.1:1"])
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.success() || !err.contains("--gpu: this machine cannot train on a GPU") {
        // A machine with a usable GPU gets this far; say so rather than fail.
        assert!(
            std::path::Path::new("/proc/driver/nvidia/version").exists(),
            "status {:?}, stderr: {err}",
            out.status
        );
    } else {
        assert!(!err.contains("redis"), "refused before the queue: {err}");
    }
}

#[test]
fn config_files_are_checked_at_start() {
    let dir = tempfile::tempdir().unwrap();
    // The example in infra/ loads as it is.
    let example = workspace_root().join("infra/lakefish.toml");
    let out = Command::new(lakefish_bin())
        .args(["check-config", example.to_str().unwrap()])
        .output()
        .unwrap();
    assert_success(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("nightly"));
    // So do the demo's and the quality run's, every step's parameters included.
    for (file, pipeline) in [("demo.toml", "demo"), ("quality.toml", "quality")] {
        let path = workspace_root().join("infra").join(file);
        let out = Command::new(lakefish_bin())
            .args(["check-config", path.to_str().unwrap()])
            .output()
            .unwrap();
        assert_success(&out);
        assert!(String::from_utf8_lossy(&out.stdout).contains(pipeline));
    }
    // Overrides apply to the file being checked (a short quality run is made this way).
    let quality = workspace_root().join("infra/quality.toml");
    let out = Command::new(lakefish_bin())
        .args(["check-config", quality.to_str().unwrap()])
        .env("LAKEFISH__PIPELINES__QUALITY__DATAGEN__GAMES", "50")
        .output()
        .unwrap();
    assert_success(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"games\": 50"));

    // An unknown key stops `serve` before it listens, naming the key and the file.
    std::fs::write(
        dir.path().join("bad.toml"),
        "version = 1\n[server]\nlisen = \"x\"\n",
    )
    .unwrap();
    let out = Command::new(lakefish_bin())
        .args(["--config", "bad.toml", "serve"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml") && err.contains("lisen"), "{err}");

    // `token new` prints a token and an entry that loads and matches it.
    let out = Command::new(lakefish_bin())
        .args(["token", "new", "ci", "--scope", "read", "--scope", "submit"])
        .output()
        .unwrap();
    assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let token = text
        .lines()
        .next()
        .unwrap()
        .rsplit(' ')
        .next()
        .unwrap()
        .to_string();
    let entry: String = text
        .split("# for lakefish.toml:\n")
        .nth(1)
        .unwrap()
        .to_string();
    let config =
        lakefish_schemas::config::Config::parse("new.toml", &format!("version = 1\n{entry}"), [])
            .unwrap();
    let t = config
        .auth
        .find(&token)
        .expect("the printed hash matches the token");
    assert!(t.allows(lakefish_schemas::config::Scope::Submit));
    assert!(!t.allows(lakefish_schemas::config::Scope::Admin));
}

/// Without tokens the API is open: `serve` refuses an address beyond loopback (0.0.0.0:0
/// here) and says how to proceed, before it serves anything.
#[test]
fn an_open_api_is_refused_beyond_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(lakefish_bin())
        .args(["--lake", "lake", "serve", "--listen", "0.0.0.0:0"])
        .args(["--queue-db", "q.sqlite", "--no-scheduler"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("without tokens") && err.contains("--open-api-without-tokens"),
        "{err}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("listening on"));
}

/// The OpenAPI document is generated from the route table the router is built from; here
/// every documented operation is called and must reach a handler (not the fallback, not 405),
/// and the scope it documents is the one enforced.
#[tokio::test(flavor = "multi_thread")]
async fn openapi_describes_every_route() {
    let dir = tempfile::tempdir().unwrap();
    let (_serve, api) = serve_embedded(dir.path(), None);
    let doc: serde_json::Value = reqwest::get(format!("{api}/v1/openapi.json"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths.len() >= 20, "{}", paths.len());
    for p in [
        "/v1/jobs",
        "/v1/pipelines/{name}/run",
        "/metrics",
        "/v1/sprt/{id}/pgn",
    ] {
        assert!(paths.contains_key(p), "{p} undocumented");
    }
    let c = reqwest::Client::new();
    let mut operations = 0;
    for (path, ops) in paths {
        let concrete = path
            .replace("{source}", "binpack")
            .replace("{name}", "x")
            .replace("{id}", "x");
        for (method, op) in ops.as_object().unwrap() {
            operations += 1;
            let m = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let resp = c
                .request(m, format!("{api}{concrete}"))
                .body("")
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            let body = resp.text().await.unwrap();
            assert_ne!(status, 405, "{method} {path}");
            assert!(
                !body.contains("no such route"),
                "{method} {path} reached the fallback: {body}"
            );
            let scope = op["x-lakefish-scope"].as_str();
            let expected = match (method.as_str(), path.as_str()) {
                // The login form takes a token; logging out forgets one.
                (_, "/healthz" | "/ui/login" | "/ui/logout") => None,
                ("get", _) => Some("read"),
                // Running pipelines by hand, registering engines (code execution on every
                // worker) and moving `best` need admin, from the API and the dashboard alike.
                (_, p)
                    if [
                        "/v1/pipelines/",
                        "/v1/engines",
                        "/v1/promotions",
                        "/ui/pipelines/",
                        "/ui/promotions",
                    ]
                    .iter()
                    .any(|a| p.starts_with(a)) =>
                {
                    Some("admin")
                }
                _ => Some("submit"),
            };
            assert_eq!(scope, expected, "{method} {path}");
        }
    }
    assert!(operations >= 24, "{operations}");
    let resp = reqwest::get(format!("{api}/v1/nowhere")).await.unwrap();
    assert_eq!(resp.status(), 404);
    assert!(resp.text().await.unwrap().contains("no such route"));
}

/// infra/ documents deployment: the compose file and the systemd units. Every lakefish
/// command line in them parses, the lakefish.toml they mount loads (with the environment
/// overrides compose sets), and the redis.conf starts a redis-server with persistence on.
#[test]
fn deployment_configs_load() {
    let infra = workspace_root().join("infra");
    let compose = std::fs::read_to_string(infra.join("compose.yaml")).unwrap();
    let mut mounts = Vec::new();
    for line in compose.lines() {
        if let Some(m) = line.trim().strip_prefix("- ./")
            && let Some((file, _)) = m.split_once(':')
        {
            mounts.push(file.to_string());
        }
    }
    assert!(
        mounts.contains(&"lakefish.toml".to_string()) && mounts.contains(&"redis.conf".to_string()),
        "{mounts:?}"
    );
    for m in &mounts {
        assert!(infra.join(m).exists(), "compose mounts missing infra/{m}");
    }
    // Command lines: compose `command: [...]` arrays and systemd ExecStart/ExecStartPre.
    let mut commands: Vec<Vec<String>> = Vec::new();
    for line in compose.lines() {
        if let Some(list) = line.trim().strip_prefix("command: [\"lakefish\", ") {
            let args: Vec<String> = list
                .trim_end_matches(']')
                .split(", ")
                .map(|a| a.trim_matches('"').to_string())
                .collect();
            commands.push(args);
        }
    }
    for unit in ["lakefish-api.service", "lakefish-worker@.service"] {
        let text = std::fs::read_to_string(infra.join("systemd").join(unit)).unwrap();
        for line in text.lines() {
            if let Some(cmd) = line
                .strip_prefix("ExecStart=")
                .or(line.strip_prefix("ExecStartPre="))
            {
                let args: Vec<String> =
                    cmd.split_whitespace().skip(1).map(str::to_string).collect();
                commands.push(args);
            }
        }
    }
    assert!(commands.len() >= 7, "{commands:?}");
    let example = infra.join("lakefish.toml");
    for args in &commands {
        // The deployed config path is where infra/lakefish.toml is installed.
        let args: Vec<String> = args
            .iter()
            .map(|a| {
                if a == "/etc/lakefish/lakefish.toml" {
                    example.to_str().unwrap().to_string()
                } else {
                    a.clone()
                }
            })
            .collect();
        if args.first().map(String::as_str) == Some("check-config") {
            let out = Command::new(lakefish_bin()).args(&args).output().unwrap();
            assert_success(&out);
            continue;
        }
        // Parse the command line and load the config exactly as at start, without running it.
        let mut with_help = args.clone();
        with_help.push("--help".into());
        let out = Command::new(lakefish_bin())
            .args(&with_help)
            .env("LAKEFISH__SERVER__REDIS", "redis://redis:6379")
            .output()
            .unwrap();
        assert_success(&out);
        let out = Command::new(lakefish_bin())
            .args(["check-config", example.to_str().unwrap()])
            .env("LAKEFISH__SERVER__REDIS", "redis://redis:6379")
            .output()
            .unwrap();
        assert_success(&out);
        assert!(String::from_utf8_lossy(&out.stdout).contains("redis://redis:6379"));
    }

    // redis.conf: a real redis-server starts with it (port and directory moved to scratch).
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut redis = Command::new("redis-server")
        .arg(infra.join("redis.conf"))
        .args([
            "--port",
            &port.to_string(),
            "--dir",
            dir.path().to_str().unwrap(),
            "--daemonize",
            "no",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut answer = String::new();
    // Up to 30 s: a loaded CI machine can be slow to start a process.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        if let Ok(out) = Command::new("redis-cli")
            .args(["-p", &port.to_string(), "config", "get", "appendonly"])
            .output()
            && out.status.success()
            && String::from_utf8_lossy(&out.stdout).contains("appendonly")
        {
            answer = String::from_utf8_lossy(&out.stdout).to_string();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = redis.kill();
    let _ = redis.wait();
    assert!(answer.contains("yes"), "appendonly not on: {answer:?}");
}

/// `lakefish bench load` against the embedded service: many clients submit mask jobs and poll
/// them; no request errs and every submitted job ends up in the job list, finished.
#[tokio::test(flavor = "multi_thread")]
async fn load_test_accounts_for_every_job() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("small.binpack");
    std::fs::write(&input, lakefish_ingest::binpack::synthetic_binpack(50, 3)).unwrap();
    let (_serve, api) = serve_embedded(dir.path(), None);
    let ingest = json!({ "kind": "ingest_binpack",
        "spec": { "inputs": [input.display().to_string()], "dataset": "load" } });
    let rec = run_job(&api, &ingest, std::time::Duration::from_secs(120)).await;
    assert_eq!(rec.state, lakefish_schemas::JobState::Succeeded, "{rec:?}");

    let job =
        json!({ "kind": "mask", "spec": { "dataset": "load", "definition": { "name": "quiet" } } });
    let out = Command::new(lakefish_bin())
        .args([
            "bench",
            "load",
            "--api",
            &api,
            "--job",
            &job.to_string(),
            "--clients",
            "8",
            "--seconds",
            "4",
            "--reference-seconds",
            "1",
        ])
        .output()
        .unwrap();
    assert_success(&out);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let report: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let submitted = report["submitted"].as_u64().unwrap();
    assert!(submitted >= 8, "{report:#}");
    assert_eq!(
        report["succeeded"].as_u64().unwrap(),
        submitted,
        "{report:#}"
    );
    assert_eq!(report["errors"], 0);
    assert_eq!(report["unaccounted"], 0);
    assert!(report["submit"]["p99_ms"].as_f64().unwrap() > 0.0);
    assert!(stdout.contains("p99"), "{stdout}");
    // Every job the clients were given is in the API's list, succeeded.
    let listed = get_json(format!("{api}/v1/jobs?state=succeeded&limit=10000")).await;
    assert_eq!(
        listed["jobs"].as_array().unwrap().len() as u64,
        submitted + 1,
        "the ingest and every load job"
    );

    // Bad arguments are refused before any request is sent.
    let out = Command::new(lakefish_bin())
        .args(["bench", "load", "--api", &api, "--job", "{not json"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--job is not JSON"));
}

/// A lake written before the catalogue existed is indexed by `lakefish metastore rebuild`;
/// the server lists from the index, newest first in pages; a job run later in the CLI's own
/// process finds the lake's catalogue marker and indexes what it commits.
#[tokio::test(flavor = "multi_thread")]
async fn the_catalogue_is_rebuilt_from_a_lake_and_kept_current() {
    let dir = tempfile::tempdir().unwrap();
    let input = binpack_input(dir.path());
    let ingest = |dataset: &str| {
        let out = Command::new(lakefish_bin())
            .args(["--lake", "lake", "ingest", "binpack"])
            .arg(&input)
            .args(["--dataset", dataset])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_success(&out);
    };
    ingest("older");
    let meta = "sqlite:meta/catalogue.sqlite";
    let rebuild = |prune: bool| {
        let mut cmd = Command::new(lakefish_bin());
        cmd.args([
            "--lake",
            "lake",
            "metastore",
            "--metastore",
            meta,
            "rebuild",
        ]);
        if prune {
            cmd.arg("--prune");
        }
        let out = cmd.current_dir(dir.path()).output().unwrap();
        assert_success(&out);
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let said = rebuild(false);
    assert!(said.contains("indexed 1 dataset"), "{said}");
    // The dataset, and its space as measured when it was indexed.
    assert!(said.contains("2 catalogue entries"), "{said}");
    assert!(said.contains("space          1"), "{said}");

    let (_serve, api) = lakefish(
        &[
            "--lake",
            "lake",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--metastore",
            meta,
        ],
        &[],
        dir.path(),
    );
    let api = api.unwrap();
    let listed = get_json(format!("{api}/v1/datasets")).await;
    assert_eq!(listed["datasets"][0]["name"], "older", "{listed}");

    // Written in the CLI's own process, with the server running: indexed all the same.
    ingest("newer");
    let first = get_json(format!("{api}/v1/datasets?limit=1")).await;
    assert_eq!(first["datasets"][0]["name"], "newer", "{first}");
    let next = first["next"].as_str().expect("a second page");
    let second = get_json(format!("{api}/v1/datasets?limit=1&after={next}")).await;
    assert_eq!(second["datasets"][0]["name"], "older", "{second}");
    assert!(second.get("next").is_none(), "{second}");
    let bad = reqwest::get(format!("{api}/v1/nets?after=yesterday"))
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let err: serde_json::Value = bad.json().await.unwrap();
    assert!(err["error"].as_str().unwrap().contains("cursor"), "{err}");

    // A dataset deleted from the lake by hand stays listed until a pruning rebuild.
    std::fs::remove_dir_all(
        dir.path()
            .join("lake/positions/source=binpack/dataset=older"),
    )
    .unwrap();
    rebuild(false);
    let listed = get_json(format!("{api}/v1/datasets")).await;
    assert_eq!(listed["datasets"].as_array().unwrap().len(), 2, "{listed}");
    let said = rebuild(true);
    assert!(
        said.contains("pruned 1 dataset the lake no longer holds"),
        "{said}"
    );
    let listed = get_json(format!("{api}/v1/datasets")).await;
    let names: Vec<&str> = listed["datasets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["newer"], "{listed}");
    assert!(rebuild(true).contains("pruned nothing"));
}

/// Issue 35, items 2 and 3. A copy of a lake does not write into the original's metastore
/// (its `_catalog.json` names where the lake was), and a server pointed at a metastore that
/// indexed the lake earlier brings it up to date before serving lists from it.
#[tokio::test(flavor = "multi_thread")]
async fn copies_and_switched_metastores_keep_the_catalogue_true() {
    let dir = tempfile::tempdir().unwrap();
    let input = binpack_input(dir.path());
    let run = |args: &[&str]| {
        let out = Command::new(lakefish_bin())
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_success(&out);
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let said = run(&[
        "--lake",
        "orig/lake",
        "ingest",
        "binpack",
        input.to_str().unwrap(),
        "--dataset",
        "d",
    ]);
    // Output to a pipe still shows progress, as plain lines (issue 35, item 11).
    assert!(
        said.contains("s] ingesting") && said.contains("(100%)"),
        "{said}"
    );
    let masks_served = |queue_db: &str| {
        let (serve, api) = lakefish(
            &[
                "--lake",
                "orig/lake",
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--queue-db",
                queue_db,
            ],
            &[],
            dir.path(),
        );
        let api = api.unwrap();
        async move {
            let v = get_json(format!("{api}/v1/datasets")).await;
            drop(serve);
            let mut masks: Vec<String> = v["datasets"][0]["masks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m.as_str().unwrap().to_string())
                .collect();
            masks.sort();
            masks
        }
    };
    assert!(masks_served("orig/queue.sqlite").await.is_empty());
    // A copy, and a mask written into it in-process: the original's metastore is untouched.
    let out = Command::new("cp")
        .args(["-r", "orig", "copy"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_success(&out);
    let said = run(&["--lake", "copy/lake", "mask", "quiet", "--dataset", "d"]);
    assert!(said.contains("is a copy or has moved"), "{said}");
    // Logs to a file or pipe carry no terminal colour codes (issue 35, item 11).
    assert!(!said.contains('\u{1b}'), "{said:?}");
    assert!(masks_served("orig/queue.sqlite").await.is_empty());
    // The original, written while another metastore served it, then served from the first
    // one again: what was written meanwhile is listed.
    assert!(masks_served("other/queue.sqlite").await.is_empty());
    run(&[
        "--lake",
        "orig/lake",
        "mask",
        "quiet",
        "--dataset",
        "d",
        "--name",
        "late",
    ]);
    assert_eq!(masks_served("orig/queue.sqlite").await, ["late"]);
}

/// Issue 35, item 8: a command that only reads names a lake that is not there instead of
/// reading it as empty, and creates nothing.
#[test]
fn a_mistyped_lake_is_an_error_not_an_empty_lake() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["nets", "ls"][..],
        &["nets", "show", "best"],
        &["runs"],
        &["datasets"],
        &["engines", "ls"],
        &["sprt", "show", "sprt-000000000000"],
    ] {
        let out = Command::new(lakefish_bin())
            .args(["--lake", "lkae"])
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no lake at lkae"), "{args:?}: {err}");
        assert!(!dir.path().join("lkae").exists(), "{args:?} created it");
    }
}

/// Issue 35, item 9: `lakefish quantize` with no limits accepts what the demo's own pipeline
/// accepts (the README's `quantize && register` on the demo's run), and the CLI's defaults
/// are the job spec's.
#[test]
fn quantize_defaults_accept_what_the_demo_pipeline_accepts() {
    let root = workspace_root();
    let text = std::fs::read_to_string(root.join("infra/demo.toml")).unwrap();
    let config = lakefish_schemas::config::Config::parse(
        "infra/demo.toml",
        &text,
        std::iter::empty::<(String, String)>(),
    )
    .unwrap();
    let demo = &config.pipelines["demo"].quantize;
    let spec = lakefish_schemas::QuantizeSpec::new(&"run-000000000000".parse().unwrap());
    assert!(
        demo["max_mean_cp"].as_f64().unwrap() <= spec.max_mean_cp,
        "{demo:?}"
    );
    assert!(
        demo["max_p99_cp"].as_f64().unwrap() <= spec.max_p99_cp,
        "{demo:?}"
    );
    let from_json: lakefish_schemas::QuantizeSpec =
        serde_json::from_str(r#"{"run": "run-000000000000"}"#).unwrap();
    assert_eq!(from_json, spec);
    let out = Command::new(lakefish_bin())
        .args(["quantize", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for v in [spec.max_mean_cp, spec.max_p99_cp] {
        assert!(help.contains(&format!("[default: {v}]")), "{v}: {help}");
    }
}
