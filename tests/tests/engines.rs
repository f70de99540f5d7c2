//! Any UCI engine as a side of an SPRT, with Debian's Stockfish 15.1 as the real engine:
//! strength settings decide the right way, engines that misbehave lose their games with the
//! reason and the test carries on, and a binary that is not the registered one is refused.

use std::path::Path;
use std::process::{Command, Output};

use lakefish_tests::*;
use serde_json::Value;

const STOCKFISH: &str = "/usr/games/stockfish";

fn run(lake: &Path, args: &[&str]) -> Output {
    Command::new(lakefish_bin())
        .arg("--lake")
        .arg(lake)
        .args(args)
        .output()
        .unwrap()
}

fn book(dir: &Path) -> String {
    let p = dir.join("book.epd");
    std::fs::write(
        &p,
        "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -\n\
         rnbqkbnr/pppppppp/8/8/3P4/8/PPP1PPPP/RNBQKBNR b KQkq -\n\
         rnbqkbnr/pppppppp/8/8/2P5/8/PP1PPPPP/RNBQKBNR b KQkq -\n\
         rnbqkbnr/pppppppp/8/8/8/5N2/PPPPPPPP/RNBQKB1R b KQkq -\n",
    )
    .unwrap();
    p.to_str().unwrap().to_string()
}

/// Runs `lakefish sprt` and returns the stored result; the exit code says how it ended.
fn sprt(lake: &Path, args: &[&str]) -> Value {
    let out = run(lake, &[&["sprt"], args].concat());
    let code = out.status.code();
    assert!(
        matches!(code, Some(0 | 3 | 4)),
        "{code:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let id = stdout
        .split_whitespace()
        .nth(1)
        .unwrap()
        .trim_end_matches(':');
    let result = lake.join(format!("sprt/{id}/result.json"));
    let v: Value = serde_json::from_slice(&std::fs::read(&result).unwrap()).unwrap();
    let want = match v["state"].as_str().unwrap() {
        "accepted" => 0,
        "rejected" => 3,
        _ => 4,
    };
    assert_eq!(code, Some(want), "the exit code says {}", v["state"]);
    v
}

fn have_stockfish() -> bool {
    let ok = Path::new(STOCKFISH).exists();
    if !ok {
        eprintln!("{STOCKFISH} is missing: make test installs it (apt: stockfish)");
    }
    ok
}

#[test]
fn stockfish_strength_settings_decide_for_the_stronger_side() {
    assert!(have_stockfish());
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let book = book(dir.path());
    let out = run(
        &lake,
        &[
            "engines",
            "add",
            "stockfish",
            "--command",
            STOCKFISH,
            "--option",
            "Threads=1",
            "--allow",
            "UCI_LimitStrength",
            "--allow",
            "UCI_Elo",
        ],
    );
    assert_success(&out);
    let registered = String::from_utf8_lossy(&out.stdout);
    assert!(
        registered.contains("sides may set UCI_Elo: 1350..2850"),
        "{registered}"
    );
    assert!(registered.contains("bench "), "{registered}");
    let strong = "stockfish,UCI_LimitStrength=true,UCI_Elo=2500";
    let weak = "stockfish,UCI_LimitStrength=true,UCI_Elo=1500";
    let common = [
        "--book",
        &book,
        "--tc",
        "1+0.01",
        "--elo0",
        "0",
        "--elo1",
        "200",
        "--model",
        "logistic",
        "--batch-pairs",
        "2",
        "--max-pairs",
        "40",
    ];
    let up = sprt(
        &lake,
        &[&["--new", strong, "--base", weak], &common[..]].concat(),
    );
    assert_eq!(up["state"], "accepted", "{up}");
    assert!(up["wins"].as_u64().unwrap() > up["losses"].as_u64().unwrap());
    assert_eq!(up["new"]["engine"], "stockfish");
    assert_eq!(up["new"]["options"]["UCI_Elo"], "2500");
    let down = sprt(
        &lake,
        &[&["--new", weak, "--base", strong], &common[..]].concat(),
    );
    assert_eq!(down["state"], "rejected", "{down}");
    // Every game is in the PGN with both engines' names, the clock and how it ended.
    let id = up["id"].as_str().unwrap();
    let pgn = std::fs::read_to_string(lake.join(format!("sprt/{id}/games.pgn"))).unwrap();
    assert_eq!(
        pgn.matches("[Event ").count() as u64,
        up["games"].as_u64().unwrap()
    );
    assert!(pgn.contains("[White \"stockfish,UCI_Elo=2500,UCI_LimitStrength=true\"]"));
    assert!(pgn.contains("[TimeControl \"1+0.01\"]"), "{pgn}");
    assert!(pgn.contains("[Termination "));
}

/// An engine that plays like Stockfish for three moves, then misbehaves.
fn register_faulty(lake: &Path, mode: &str) -> String {
    register_script(lake, &format!("faulty-{mode}"), &[mode, "3", STOCKFISH])
}

/// The python interpreter the faulty engine runs under.
fn python3() -> &'static str {
    ["/usr/bin/python3", "/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("python3")
}

/// `tests/engines/faulty_uci.py` with `args`, registered as `name`.
fn register_script(lake: &Path, name: &str, args: &[&str]) -> String {
    let script = workspace_root().join("tests/engines/faulty_uci.py");
    let mut command = vec![
        "engines",
        "add",
        name,
        "--command",
        python3(),
        "--arg",
        script.to_str().unwrap(),
    ];
    for a in args {
        command.extend(["--arg", a]);
    }
    command.push("--no-check");
    let out = run(lake, &command);
    assert_success(&out);
    name.to_string()
}

#[test]
fn engines_that_misbehave_lose_with_the_reason_and_the_test_carries_on() {
    assert!(have_stockfish());
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let book = book(dir.path());
    for (mode, limit, counter, reason) in [
        (
            "illegal",
            ["--nodes", "1000"],
            "illegal_moves",
            "played an illegal move",
        ),
        (
            "crash",
            ["--nodes", "1000"],
            "crashes",
            "exited during a search",
        ),
        ("stall", ["--nodes", "1000"], "stalls", "sent no bestmove"),
        ("slow", ["--tc", "1+0.01"], "time_forfeits", "lost on time"),
    ] {
        let engine = register_faulty(&lake, mode);
        let s = sprt(
            &lake,
            &[
                &["--new", &engine, "--base", "classical", "--book", &book][..],
                &limit[..],
                &[
                    "--elo0",
                    "0",
                    "--elo1",
                    "100",
                    "--batch-pairs",
                    "1",
                    "--max-pairs",
                    "1",
                ],
            ]
            .concat(),
        );
        // Both games of the pair were played to an end and counted, each lost by the fault.
        assert_eq!(s["games"], 2, "{mode}: {s}");
        assert_eq!(s["losses"], 2, "{mode}: {s}");
        assert_eq!(s["new_incidents"][counter], 2, "{mode}: {s}");
        assert_eq!(s["base_incidents"][counter], 0, "{mode}: {s}");
        let id = s["id"].as_str().unwrap();
        let pgn = std::fs::read_to_string(lake.join(format!("sprt/{id}/games.pgn"))).unwrap();
        // Movetext wraps at 80 columns, inside comments too.
        let flat = pgn.replace('\n', " ");
        assert_eq!(flat.matches(reason).count(), 2, "{mode}: {pgn}");
        // The fault came mid-game: each game has the engine's first three moves.
        assert!(
            pgn.contains("[PlyCount \"6\"]") || pgn.contains("[PlyCount \"7\"]"),
            "{pgn}"
        );
    }
}

#[test]
fn a_binary_that_is_not_the_registered_one_is_refused() {
    assert!(have_stockfish());
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let book = book(dir.path());
    let copy = dir.path().join("sf-copy");
    std::fs::copy(STOCKFISH, &copy).unwrap();
    // Registered with its sha256 but a bench node count the binary does not print.
    let out = run(
        &lake,
        &[
            "engines",
            "add",
            "sfcopy",
            "--command",
            copy.to_str().unwrap(),
            "--bench",
            "1234",
        ],
    );
    assert_success(&out);
    let play = |lake: &Path| {
        run(
            lake,
            &[
                "sprt",
                "--new",
                "sfcopy",
                "--base",
                "classical",
                "--book",
                &book,
                "--nodes",
                "500",
                "--max-pairs",
                "1",
                "--batch-pairs",
                "1",
            ],
        )
    };
    let out = play(&lake);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refusing to play"), "{err}");
    assert!(err.contains("the registration says 1234"), "{err}");
    // Another binary at the registered path: its sha256 gives it away before any bench.
    let mut bytes = std::fs::read(&copy).unwrap();
    bytes.push(0);
    std::fs::write(&copy, bytes).unwrap();
    let out = play(&lake);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("its sha256 is"), "{err}");
}

/// Stockfish at a node limit plays and scores self-play games; the data is ingested, masked,
/// shuffled and trains a net, and the same seed gives the same games.
#[test]
fn stockfish_self_play_data_trains_a_net() {
    assert!(have_stockfish());
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let ok = |args: &[&str]| {
        let out = run(&lake, args);
        assert_success(&out);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    ok(&[
        "engines",
        "add",
        "stockfish",
        "--command",
        STOCKFISH,
        "--option",
        "Threads=1",
        "--option",
        "Hash=64",
        "--allow",
        "Hash=1..64",
        "--no-check",
    ]);
    let datagen = |dataset: &str| {
        ok(&[
            "datagen",
            "--engine",
            "stockfish,Hash=8",
            "--games",
            "24",
            "--nodes",
            "1500",
            "--seed",
            "7",
            "--random-plies",
            "8",
            "--dataset",
            dataset,
            "--win-cp",
            "1500",
        ])
    };
    let said = datagen("sf1");
    let summary: Value = serde_json::from_str(said.trim()).unwrap_or_else(|_| {
        let at = said.find('{').unwrap();
        serde_json::from_str(&said[at..]).unwrap()
    });
    assert_eq!(summary["net"], "stockfish,Hash=8", "{summary}");
    assert_eq!(summary["failed_games"], 0, "{summary}");
    let positions = summary["positions"].as_u64().unwrap();
    assert!(positions > 24 * 10, "{summary}");
    let again = datagen("sf2");
    let key = |s: &str| s.split("raw/selfplay/").nth(1).unwrap()[4..16].to_string();
    assert_eq!(
        key(&said),
        key(&again),
        "the same seed gives the same games"
    );

    // Every position is stored with Stockfish's score (internal units): of both signs,
    // almost all below the 1500 cp win adjudication (about 5,000 internal units).
    let script = "import pyarrow.dataset as d, sys\n\
        t = d.dataset(sys.argv[1], format='parquet').to_table(columns=['score'])\n\
        s = t.column('score').to_pylist()\n\
        print(len(s), sum(x is None for x in s), sum(abs(x) < 6000 for x in s if x is not None), \
        sum(x > 0 for x in s if x is not None), sum(x < 0 for x in s if x is not None))";
    let out = Command::new(venv_bin("python"))
        .args(["-c", script])
        .arg(lake.join("positions/source=selfplay/dataset=sf1"))
        .output()
        .unwrap();
    assert_success(&out);
    let n: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(n[0], positions, "one row per position");
    assert_eq!(n[1], 0, "no position without a score");
    assert!(
        n[2] * 10 > n[0] * 9,
        "mostly below mate and adjudication scores: {n:?}"
    );
    assert!(n[3] > 0 && n[4] > 0, "both signs: {n:?}");
    ok(&[
        "mask",
        "quiet",
        "--source",
        "selfplay",
        "--dataset",
        "sf1",
        "--name",
        "q",
    ]);
    let said = ok(&[
        "shuffle",
        "--source",
        "selfplay",
        "--dataset",
        "sf1",
        "--mask",
        "q",
        "--chunks",
        "2",
        "--seed",
        "1",
    ]);
    let at = said.find("sh-").unwrap();
    let shuffle: String = said[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    let said = ok(&[
        "train",
        "--shuffle",
        &shuffle,
        "--batch-size",
        "256",
        "--max-steps",
        "10",
        "--val-chunks",
        "1",
    ]);
    assert!(said.contains("run-"), "{said}");
}

/// A binary uploaded to the lake: each worker fetches it into its cache, checks its sha256
/// and runs its copy; a damaged object in the lake is refused, not run.
#[test]
fn an_uploaded_engine_is_fetched_checked_and_run() {
    assert!(have_stockfish());
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let cache = dir.path().join("cache");
    let book = book(dir.path());
    let with_cache = |args: &[&str]| {
        Command::new(lakefish_bin())
            .arg("--lake")
            .arg(&lake)
            .args(args)
            .env("LAKEFISH_CACHE_DIR", &cache)
            .output()
            .unwrap()
    };
    let out = with_cache(&[
        "engines",
        "add",
        "sfup",
        "--upload",
        STOCKFISH,
        "--no-check",
    ]);
    assert_success(&out);
    let show: Value =
        serde_json::from_slice(&with_cache(&["engines", "show", "sfup"]).stdout).unwrap();
    let command = show["command"].as_str().unwrap();
    let sha = command.strip_prefix("lake:engines/bin/").expect(command);
    let play = || {
        with_cache(&[
            "sprt",
            "--new",
            "sfup",
            "--base",
            "classical",
            "--book",
            &book,
            "--nodes",
            "500",
            "--max-pairs",
            "1",
            "--batch-pairs",
            "1",
            "--seed",
            "3",
        ])
    };
    let out = play();
    // One pair decides nothing: 4, inconclusive (the exit code says how a test ended).
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let copy = cache.join("engines").join(sha);
    let bytes = std::fs::read(&copy).unwrap();
    assert_eq!(bytes, std::fs::read(STOCKFISH).unwrap());
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&copy).unwrap().permissions().mode() & 0o111,
        0o111
    );
    // Damage the lake's copy and drop the cache: the worker refuses to run it.
    std::fs::write(
        lake.join("engines/bin").join(sha),
        b"#!/bin/sh\necho pwned\n",
    )
    .unwrap();
    std::fs::remove_dir_all(&cache).unwrap();
    let out = with_cache(&[
        "sprt",
        "--new",
        "sfup",
        "--base",
        "classical",
        "--book",
        &book,
        "--nodes",
        "500",
        "--max-pairs",
        "1",
        "--batch-pairs",
        "1",
        "--seed",
        "4",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("do not hash to its name"), "{err}");
    assert!(!copy.exists(), "nothing unchecked lands in the cache");
}

/// The gauntlet places lakefish's engine on Stockfish's UCI_Elo scale: it scores more
/// against the weaker level, and the estimate lies between the levels' reach.
#[test]
fn a_gauntlet_places_lakefish_on_stockfish_s_scale() {
    assert!(have_stockfish());
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let book = book(dir.path());
    let out = run(
        &lake,
        &[
            "engines",
            "add",
            "stockfish",
            "--command",
            STOCKFISH,
            "--option",
            "Threads=1",
            "--allow",
            "UCI_LimitStrength=true",
            "--allow",
            "UCI_Elo=1350..2850",
            "--no-check",
        ],
    );
    assert_success(&out);
    let out = run(
        &lake,
        &[
            "gauntlet",
            "--engine",
            "classical",
            "--levels",
            "1350,2600",
            "--pairs",
            "3",
            "--tc",
            "1+0.01",
            "--book",
            &book,
            "--json",
        ],
    );
    assert_success(&out);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["engine"], "classical");
    assert_eq!(report["games"], 12, "{report}");
    let levels = report["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2);
    let score = |i: usize| levels[i]["score"].as_f64().unwrap();
    assert!(score(0) > score(1), "{report}");
    for l in levels {
        // Each level is a stored, fixed-length match: all its pairs played.
        let id = l["sprt"].as_str().unwrap();
        let s: Value = serde_json::from_slice(
            &std::fs::read(lake.join(format!("sprt/{id}/result.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(
            (s["games"].as_u64(), s["state"].as_str()),
            (Some(6), Some("inconclusive"))
        );
    }
    if let Some(elo) = report["elo"].as_f64() {
        assert!((800.0..3200.0).contains(&elo), "{report}");
        assert!(report["elo_error"].as_f64().unwrap() > 0.0);
    }
}

/// Stockfish against lakefish's engine at a node limit, fanned out over two workers (Redis
/// queue, S3 lake, PostgreSQL records): the same counts, LLR and games as in-process.
#[tokio::test(flavor = "multi_thread")]
async fn a_distributed_test_with_stockfish_equals_the_in_process_one() {
    assert!(have_stockfish());
    let dir = tempfile::tempdir().unwrap();
    let book = book(dir.path());
    // No tokens here: the operator turns the engine routes on for this loopback test.
    let cluster = Cluster::start_with(
        dir.path(),
        "lakefish-engines",
        &["w1", "w2"],
        ClusterOptions {
            config: Some("version = 1\n[server]\nadmin_without_tokens = true\n"),
            ..Default::default()
        },
    );
    let api = cluster.api.clone();
    let http = reqwest::Client::new();
    let engine = serde_json::json!({"name": "stockfish", "command": STOCKFISH, "options": {"Threads": "1", "Hash": "16"},
            "allow": {"Hash": {"min": 1, "max": 16}}});
    let r = http
        .post(format!("{api}/v1/engines"))
        .json(&engine)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let spec = serde_json::json!({
        "new": {"engine": "stockfish", "options": {"Hash": "8"}}, "base": "classical",
        "book": book, "nodes": 1000, "elo0": 0, "elo1": 100, "model": "logistic",
        "batch_pairs": 2, "max_pairs": 12, "concurrency": 2,
    });
    let r = http
        .post(format!("{api}/v1/sprt"))
        .json(&spec)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let started: Value = r.json().await.unwrap();
    let id = started["id"].as_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    let status = loop {
        assert!(
            std::time::Instant::now() < deadline,
            "sprt {id} did not finish"
        );
        let s = get_json(format!("{api}/v1/sprt/{id}")).await;
        if s["state"] != "running" {
            break s;
        }
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    };
    assert_eq!(status["state"], "accepted", "{status}");
    assert_eq!(status["new"]["name"], "stockfish,Hash=8");

    let local = dir.path().join("local-lake");
    let out = run(
        &local,
        &[
            "engines",
            "add",
            "stockfish",
            "--command",
            STOCKFISH,
            "--option",
            "Threads=1",
            "--option",
            "Hash=16",
            "--allow",
            "Hash=1..16",
            "--no-check",
        ],
    );
    assert_success(&out);
    let here = sprt(
        &local,
        &[
            "--new",
            "stockfish,Hash=8",
            "--base",
            "classical",
            "--book",
            &book,
            "--nodes",
            "1000",
            "--elo0",
            "0",
            "--elo1",
            "100",
            "--model",
            "logistic",
            "--batch-pairs",
            "2",
            "--max-pairs",
            "12",
        ],
    );
    assert_eq!(here["id"], status["id"], "the same test");
    for k in [
        "state",
        "wins",
        "draws",
        "losses",
        "penta",
        "games",
        "llr_history",
        "new_incidents",
    ] {
        assert_eq!(here[k], status[k], "{k}");
    }
    let pgn = reqwest::get(format!("{api}/v1/sprt/{id}/pgn"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // The same games, moves and engine output; only the clock readings differ.
    let here_pgn = std::fs::read_to_string(local.join(format!("sprt/{id}/games.pgn"))).unwrap();
    assert_eq!(pgn_untimed(&pgn), pgn_untimed(&here_pgn));
    assert!(pgn.contains("[GameStartTime "), "{pgn}");
}

/// `transform rescore`: every stored score equals Stockfish 15.1's own `go depth N` score for
/// the position (python-chess asking it, Threads=1, the same Hash, ucinewgame before each),
/// with lineage to the dataset read; lakefish's own engine is refused as a rescorer.
#[test]
fn rescored_scores_equal_stockfish_s_own() {
    assert!(have_stockfish());
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let ok = |args: &[&str]| -> Value {
        let out = run(&lake, args);
        assert_success(&out);
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    };
    let input = dir.path().join("games.binpack");
    std::fs::write(&input, lakefish_ingest::binpack::synthetic_binpack(3, 8)).unwrap();
    ok(&[
        "ingest",
        "binpack",
        input.to_str().unwrap(),
        "--dataset",
        "d",
    ]);
    ok(&[
        "engines",
        "add",
        "stockfish",
        "--command",
        STOCKFISH,
        "--option",
        "Threads=1",
        "--option",
        "Hash=16",
        "--no-check",
    ]);
    let done = ok(&[
        "transform",
        "rescore",
        "--dataset",
        "d",
        "--output",
        "d9",
        "--engine",
        "stockfish",
        "--depth",
        "7",
    ]);
    let rows = done["rows"].as_u64().unwrap();
    assert!(rows >= 20, "{done}");
    let out = std::process::Command::new(venv_bin("python"))
        .arg(workspace_root().join("tests/py/rescore_check.py"))
        .args([lake.to_str().unwrap(), "d9", STOCKFISH, "7"])
        .output()
        .unwrap();
    assert_success(&out);
    let pairs: Vec<(i64, i64)> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(pairs.len() as u64, rows);
    let differ: Vec<_> = pairs.iter().filter(|(a, b)| a != b).collect();
    assert!(
        differ.is_empty(),
        "{} of {rows} differ: {differ:?}",
        differ.len()
    );
    assert!(
        done["changed"].as_u64().unwrap() > 0,
        "the engine's scores are new: {done}"
    );
    let m: Value = serde_json::from_slice(
        &std::fs::read(lake.join("positions/source=binpack/dataset=d9/_manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(m["derived_from"]["transform"]["engine"], "stockfish");
    assert_eq!(m["derived_from"]["dataset"], "d");
    // lakefish's own engine cannot rescore; an unknown engine is named.
    for (engine, says) in [("classical", "registered UCI engine"), ("nosuch", "nosuch")] {
        let out = run(
            &lake,
            &[
                "transform",
                "rescore",
                "--dataset",
                "d",
                "--output",
                "x",
                "--engine",
                engine,
                "--depth",
                "3",
            ],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(says),
            "{engine}: {err}"
        );
    }
}

/// Rescoring with an engine that fails (it exits at its first search, or answers junk with
/// no score): the engine is started again once, then the job fails naming the position and
/// what the engine did; no output dataset is committed, and the source is untouched.
#[test]
fn rescoring_with_a_failing_engine_fails_clearly_and_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let input = dir.path().join("games.binpack");
    std::fs::write(&input, lakefish_ingest::binpack::synthetic_binpack(2, 6)).unwrap();
    let out = run(
        &lake,
        &[
            "ingest",
            "binpack",
            input.to_str().unwrap(),
            "--dataset",
            "d",
        ],
    );
    assert_success(&out);
    let source = lake.join("positions/source=binpack/dataset=d/_manifest.json");
    let before = std::fs::read(&source).unwrap();
    let python = python3();
    for (mode, says) in [("crash", "exited during a search"), ("garbage", "no score")] {
        let name = register_script(&lake, &format!("broken-{mode}"), &[mode, "0"]);
        let output = format!("rescored-{mode}");
        let out = run(
            &lake,
            &[
                "transform",
                "rescore",
                "--dataset",
                "d",
                "--output",
                &output,
                "--engine",
                &name,
                "--depth",
                "3",
            ],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{mode}: {err}");
        assert!(
            err.contains("rescoring \"") && err.contains(says) && err.contains(python),
            "{mode}: {err}"
        );
        assert!(
            !lake
                .join(format!(
                    "positions/source=binpack/dataset={output}/_manifest.json"
                ))
                .exists(),
            "{mode}: a failed rescore committed its dataset"
        );
    }
    assert_eq!(
        std::fs::read(&source).unwrap(),
        before,
        "the source is untouched"
    );
}
