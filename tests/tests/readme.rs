//! The README's commands, run in order as a new user would (issue 35): every `lakefish` line
//! of its "Using it" section, with the ids it shows (`sh-0123456789ab`, `run-…`, `nn-…`,
//! `sprt-…`) replaced by the ones the commands before it printed, and its sizes scaled down
//! (games, nodes, epochs, depth, pairs, time controls) so the whole sequence fits in about a
//! minute. A line that fails fails the test with its output; a README line the test neither
//! runs nor names in `SKIPPED` fails it too, so the README and this test cannot drift apart.

use lakefish_tests::{lakefish_bin, serve_embedded, shared_data, workspace_root};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

/// README lines not run here, by prefix, with the reason.
const SKIPPED: &[(&str, &str)] = &[
    (
        "lakefish serve --listen",
        "the test serves the lake itself, on a free port",
    ),
    (
        "export ",
        "the S3/PostgreSQL set-up: faults.rs and operations.rs run those servers",
    ),
    (
        "lakefish --lake s3://",
        "S3, Redis and PostgreSQL: faults.rs and operations.rs run those servers",
    ),
    (
        "make bench-train",
        "a benchmark with a venv of its own, minutes long",
    ),
    (
        "lakefish experiment run infra/",
        "trains three nets on the measured self-play shuffle; sprt.rs and the trainer's \
         quantize.rs run small experiments end to end",
    ),
    (
        "lakefish engines add myengine",
        "needs an engine that loads bullet's files; jobs/src/engines.rs tests the layout path",
    ),
];

/// The README's sizes, scaled down for a test. Applied to whole arguments.
const SCALE: &[(&str, &str)] = &[
    ("--games 1000", "--games 2"),
    ("--nodes 5000", "--nodes 300"),
    ("--nodes 20000", "--nodes 300"),
    ("--epochs 10", "--epochs 1"),
    ("--epochs 20", "--epochs 2"),
    ("--depth 8", "--depth 5"),
    ("--depth 9", "--depth 5"),
    ("--pairs 20", "--pairs 1"),
    ("--levels 1350,1700,2000,2300", "--levels 1350,2850"),
    ("--tc 4+0.04", "--tc 0.3+0.01"),
    ("--tc 1+0.01", "--tc 0.3+0.01"),
    ("--chunks 64", "--chunks 8"),
];

/// Arguments added to the README's commands, by prefix, for the same reason: fewer
/// positions, games and runs, never another meaning.
const APPEND: &[(&str, &str)] = &[
    // An SPRT plays one pair here: the README's bounds decide nothing that fast.
    ("lakefish sprt --", "--batch-pairs 1 --max-pairs 1"),
    ("lakefish quantize", "--positions 1000"),
    ("lakefish bench ingest-binpack", "--runs 1"),
    ("lakefish bench ingest-pgn", "--runs 1 --min-mib 1"),
    (
        "lakefish engine bench --random-net",
        "--eval-pgn games.pgn --depth 5",
    ),
];

/// Commands that talk to the service at its default address (`serve --listen
/// 127.0.0.1:8080` above): here `LAKEFISH_API` points them at the test's.
const TO_DEFAULT_API: &[&str] = &["lakefish submit", "lakefish jobs"];

/// What some commands must print besides exiting 0, by prefix.
const EXPECT: &[(&str, &str)] = &[
    ("lakefish chunk", "\t"),
    ("lakefish runs", "finished"),
    ("lakefish nets ls", "nn-"),
    ("lakefish datasets", "binpack/sf-2024-01 "),
    ("lakefish engine --net best", "uciok"),
    ("lakefish sprt calc", "LLR"),
    // Stockfish loaded the net exported here (it stops at once when it cannot).
    ("printf 'setoption name EvalFile", "NNUE evaluation"),
];

/// The ids the README shows and what each stands for: a run, a shuffle, a net, a test.
const PLACEHOLDERS: &[(&str, &str)] = &[
    ("sh-0123456789ab", "sh-"),
    ("run-0123456789ab", "run-"),
    ("nn-0123456789ab", "nn-"),
    ("sprt-0123456789ab", "sprt-"),
];

/// The shell commands of the README's "Using it" section (up to "## Dashboard"), in order:
/// continuation lines joined, comments dropped.
fn readme_commands() -> Vec<String> {
    let text = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    let start = text
        .find("## Using it")
        .expect("README has a \"Using it\" section");
    let end = text[start..]
        .find("## Dashboard")
        .map_or(text.len(), |e| start + e);
    let mut out = Vec::new();
    let mut in_block = false;
    let mut pending = String::new();
    for line in text[start..end].lines() {
        if line.starts_with("```") {
            in_block = line.trim() == "```sh";
            continue;
        }
        if !in_block {
            continue;
        }
        let code = strip_comment(line).trim_end();
        if code.trim().is_empty() {
            continue;
        }
        match code.strip_suffix('\\') {
            Some(head) => pending.push_str(head),
            None => {
                pending.push_str(code);
                out.push(pending.split_whitespace().collect::<Vec<_>>().join(" "));
                pending.clear();
            }
        }
    }
    out
}

/// The line without a `#` comment outside quotes.
fn strip_comment(line: &str) -> &str {
    let (mut single, mut double) = (false, false);
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'\'' if !double => single = !single,
            b'"' if !single => double = !double,
            b'#' if !single && !double && (i == 0 || bytes[i - 1] == b' ') => {
                return &line[..i];
            }
            _ => {}
        }
    }
    line
}

/// The last id of each kind (`sh-`, `run-`, `nn-`, `sprt-` and 12 hex digits) in `text`.
fn scan_ids(text: &str, ids: &mut BTreeMap<&'static str, String>) {
    for (_, kind) in PLACEHOLDERS {
        let mut from = 0;
        while let Some(at) = text[from..].find(kind) {
            let s = from + at;
            from = s + kind.len();
            // A whole token: `sh-` inside `nn-…` or a word does not count.
            if s > 0 && text.as_bytes()[s - 1].is_ascii_alphanumeric() {
                continue;
            }
            let hex = &text[from..];
            if hex.len() >= 12
                && hex[..12]
                    .bytes()
                    .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            {
                let id = format!("{kind}{}", &hex[..12]);
                if !PLACEHOLDERS.iter().any(|(p, _)| *p == id) {
                    ids.insert(kind, id);
                }
            }
        }
    }
}

/// The inputs the README's lines name, made in `dir`: a binpack under `data/`, a Lichess
/// `.pgn.zst`, `big.binpack` (also under a local root), `fens.txt`, an engine binary under
/// `build/`. Real samples from ../shared where there are some, generated files otherwise.
fn inputs(dir: &Path) -> BTreeMap<String, String> {
    let mut rewrite = BTreeMap::new();
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let binpack = lakefish_ingest::binpack::synthetic_binpack(200, 3);
    std::fs::write(dir.join("data/sf-2024-01.binpack"), &binpack).unwrap();
    std::fs::write(dir.join("big.binpack"), &binpack).unwrap();
    std::fs::create_dir_all(dir.join("local")).unwrap();
    std::fs::write(dir.join("local/big.binpack"), &binpack).unwrap();
    rewrite.insert(
        "/data/binpacks/big.binpack".to_string(),
        dir.join("local/big.binpack").display().to_string(),
    );
    // Benchmarks on the small inputs too: the README's point is that they run.
    rewrite.insert(
        "../shared/data/binpack/small.binpack".into(),
        "big.binpack".into(),
    );
    let pgn = match shared_data("pgn/lichess_db_10k.pgn") {
        Some(p) => std::fs::read(p).unwrap(),
        None => generated_pgn(12).into_bytes(),
    };
    std::fs::write(dir.join("games.pgn"), &pgn).unwrap();
    rewrite.insert(
        "../shared/data/pgn/lichess_db_1000k.pgn".into(),
        "games.pgn".into(),
    );
    let zst = zstd::encode_all(&pgn[..], 3).unwrap();
    std::fs::write(dir.join("lichess_db_standard_rated_2025-05.pgn.zst"), zst).unwrap();
    let book = match shared_data("openings/noob_2moves.epd") {
        Some(p) => std::fs::read_to_string(p).unwrap(),
        None => "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -\n\
                 rnbqkbnr/pppppppp/8/8/3P4/8/PPP1PPPP/RNBQKBNR b KQkq -\n"
            .into(),
    };
    std::fs::write(dir.join("noob_2moves.epd"), book).unwrap();
    rewrite.insert(
        "../shared/data/openings/noob_2moves.epd".into(),
        "noob_2moves.epd".into(),
    );
    std::fs::write(
        dir.join("fens.txt"),
        "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1\n\
         r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("build")).unwrap();
    std::fs::copy("/usr/games/stockfish", dir.join("build/myengine")).unwrap();
    rewrite
}

/// `n` random games as Lichess writes them: tags with a date, SAN moves, `[%eval]` comments.
fn generated_pgn(n: u64) -> String {
    use shakmaty::{Chess, Position, san::San};
    let mut out = String::new();
    for g in 0..n {
        out.push_str(&format!(
            "[Event \"Rated Blitz game\"]\n[Site \"https://lichess.org/g{g}\"]\n\
             [UTCDate \"2025.05.0{}\"]\n[White \"a\"]\n[Black \"b\"]\n[Result \"*\"]\n\n",
            1 + g % 9
        ));
        let mut pos = Chess::default();
        for (ply, m) in lakefish_engine::random_games::random_game(g + 11, 60)
            .iter()
            .enumerate()
        {
            let mv = pos
                .legal_moves()
                .into_iter()
                .find(|mv| mv.to_uci(shakmaty::CastlingMode::Standard).to_string() == m.uci)
                .expect("a random game's move is legal");
            if ply % 2 == 0 {
                out.push_str(&format!("{}. ", ply / 2 + 1));
            }
            let eval = (ply as i64 * 7 % 41 - 20) as f64 / 10.0;
            out.push_str(&format!(
                "{} {{ [%eval {eval:.2}] }} ",
                San::from_move(&pos, mv)
            ));
            pos.play_unchecked(mv);
        }
        out.push_str("*\n\n");
    }
    out
}

#[test]
fn the_readmes_commands_run_in_order() {
    if !Path::new("/usr/games/stockfish").exists() {
        // make test installs it; without it half the README cannot run.
        panic!("/usr/games/stockfish missing: run `make setup`");
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let rewrite = inputs(dir);
    // `lakefish` on PATH is the binary under test.
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(lakefish_bin(), bin.join("lakefish")).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let (_server, api) = serve_embedded(dir, None);

    let commands = readme_commands();
    assert!(commands.len() > 40, "{commands:#?}");
    let mut ids: BTreeMap<&str, String> = BTreeMap::new();
    let mut ran = 0;
    for original in &commands {
        if let Some((_, why)) = SKIPPED.iter().find(|(p, _)| original.starts_with(p)) {
            eprintln!("skipped: {original}\n    ({why})");
            continue;
        }
        let mut line = format!(" {original} ");
        for (from, to) in SCALE {
            line = line.replace(&format!(" {from} "), &format!(" {to} "));
        }
        for (from, to) in &rewrite {
            line = line.replace(from.as_str(), to);
        }
        line = line.replace("http://127.0.0.1:8080", &api);
        for (placeholder, kind) in PLACEHOLDERS {
            if line.contains(placeholder) {
                let id = ids.get(kind).unwrap_or_else(|| {
                    panic!("{original}: no {kind} id printed by the commands before it")
                });
                line = line.replace(placeholder, id);
            }
        }
        for (prefix, args) in APPEND {
            if line.starts_with(&format!(" {prefix}")) {
                // Before a `&&` the line may have: onto its first command.
                match line.find(" && ") {
                    Some(at) => line.insert_str(at, &format!(" {args}")),
                    None => line.push_str(args),
                }
            }
        }
        let sprt = line.starts_with(" lakefish sprt --");
        let started = std::time::Instant::now();
        let out = Command::new("bash")
            .args(["-c", &format!("set -o pipefail; {line}")])
            .current_dir(dir)
            .env("PATH", &path)
            .env_remove("LAKEFISH_API")
            .env_remove("LAKEFISH_LAKE")
            .envs(
                TO_DEFAULT_API
                    .iter()
                    .any(|p| line.starts_with(&format!(" {p}")))
                    .then_some(("LAKEFISH_API", api.as_str())),
            )
            .env_remove("RUST_BACKTRACE")
            // An engine answers `uci`, then quits; other commands read no input.
            .stdin(std::fs::File::open(write_quit(dir)).unwrap())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        // sprt exits 3 when rejected and 4 when inconclusive: both are answers.
        let code = out.status.code().unwrap_or(-1);
        let ok = code == 0 || (sprt && matches!(code, 3 | 4));
        assert!(
            ok,
            "README line failed (exit {code}):\n  {original}\nran as:\n  {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
            line.trim()
        );
        eprintln!(
            "$ {}   ({:.1} s)",
            line.trim(),
            started.elapsed().as_secs_f64()
        );
        for (prefix, want) in EXPECT {
            assert!(
                !line.starts_with(&format!(" {prefix}")) || stdout.contains(want),
                "{original}: {want:?} missing from its output:\n{stdout}\n{stderr}"
            );
        }
        scan_ids(&stdout, &mut ids);
        scan_ids(&stderr, &mut ids);
        ran += 1;
    }
    eprintln!("{ran} README commands ran");
    assert!(ran + SKIPPED.len() <= commands.len());
    // The lake holds what the commands made: both sources, a shuffle mixing them, nets.
    let datasets = Command::new(lakefish_bin())
        .args(["datasets", "--json"])
        .current_dir(dir)
        .output()
        .unwrap();
    let datasets: serde_json::Value = serde_json::from_slice(&datasets.stdout).unwrap();
    let names: Vec<String> = datasets
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            format!(
                "{}/{}",
                d["source"].as_str().unwrap(),
                d["name"].as_str().unwrap()
            )
        })
        .collect();
    for want in [
        "binpack/sf-2024-01",
        "lichess/lichess-2025-05",
        "binpack/big",
        "selfplay/selfplay-1",
        "selfplay/sf-selfplay",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} missing: {names:?}");
    }

    // After all of it, a collection (old checkpoints, every shuffle no registered net needs):
    // every page, every registered net's page and file and every run's page still answer,
    // and `du` agrees with the lake's files before and after, down by what gc removed.
    let before = du_agrees_with_a_listing(dir);
    let gc = Command::new(lakefish_bin())
        .args([
            "gc",
            "--keep-checkpoints",
            "1",
            "--unused-shuffle-days",
            "0",
            "--yes",
            "--json",
        ])
        .current_dir(dir)
        .env_remove("RUST_BACKTRACE")
        .output()
        .unwrap();
    lakefish_tests::assert_success(&gc);
    let report: serde_json::Value = serde_json::from_slice(&gc.stdout).unwrap();
    assert!(
        report["report"]["removed_objects"].as_u64() > Some(0),
        "{report}"
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let status = |path: &str| {
        rt.block_on(async {
            reqwest::get(format!("{api}{path}"))
                .await
                .unwrap()
                .status()
                .as_u16()
        })
    };
    let mut pages: Vec<String> = [
        "/",
        "/ui/jobs",
        "/ui/datasets",
        "/ui/runs",
        "/ui/nets",
        "/ui/sprt",
        "/ui/pipelines",
        "/ui/experiments",
        "/ui/space",
    ]
    .map(String::from)
    .to_vec();
    let nets = rt.block_on(lakefish_tests::get_json(format!("{api}/v1/nets?limit=500")));
    for n in nets["nets"].as_array().unwrap() {
        let name = n["name"].as_str().unwrap();
        pages.push(format!("/ui/nets/{name}"));
        pages.push(format!("/v1/nets/{name}/file"));
    }
    let runs = rt.block_on(lakefish_tests::get_json(format!("{api}/v1/runs?limit=500")));
    for r in runs["runs"].as_array().unwrap() {
        pages.push(format!("/ui/runs/{}", r["id"].as_str().unwrap()));
    }
    assert!(pages.len() > 12, "{pages:?}");
    for page in &pages {
        assert_eq!(status(page), 200, "{page} after gc");
    }
    let after = du_agrees_with_a_listing(dir);
    // Down by what gc removed, give or take what it wrote (its report, tombstones, the runs'
    // shortened records).
    let removed = report["report"]["removed_bytes"].as_u64().unwrap() as i64;
    assert!(
        (before - after - removed).abs() < 64 * 1024,
        "du before {before}, after {after}, gc removed {removed}"
    );
}

/// `du` from the catalogue the server kept equals, item for item, a listing of every object
/// (`du --scan`), and its total the bytes of the lake's files; the total.
fn du_agrees_with_a_listing(dir: &Path) -> i64 {
    let du = |scan: bool| -> serde_json::Value {
        let mut c = Command::new(lakefish_bin());
        c.args(["du", "--json"]).current_dir(dir);
        if scan {
            c.arg("--scan");
        }
        let out = c.output().unwrap();
        lakefish_tests::assert_success(&out);
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let (du, scan) = (du(false), du(true));
    assert_eq!(
        (du["from"].as_str(), scan["from"].as_str()),
        (Some("catalogue"), Some("listing"))
    );
    assert_eq!(
        du["items"], scan["items"],
        "du from the catalogue against a listing"
    );
    let mut files = 0u64;
    let mut stack = vec![dir.join("lake")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if !p.to_string_lossy().contains('#') {
                files += std::fs::metadata(&p).unwrap().len();
            }
        }
    }
    assert_eq!(
        du["bytes"].as_u64(),
        Some(files),
        "du against the lake's files"
    );
    files as i64
}

fn write_quit(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("quit.txt");
    if !p.exists() {
        std::fs::write(&p, "uci\nquit\n").unwrap();
    }
    p
}

#[test]
fn comments_and_continuations_are_read_as_a_shell_would() {
    assert_eq!(strip_comment("lakefish a  # b"), "lakefish a  ");
    assert_eq!(strip_comment("lakefish 'x # y' # z"), "lakefish 'x # y' ");
    assert_eq!(strip_comment("echo \"#\" a#b"), "echo \"#\" a#b");
    let mut ids: BTreeMap<&str, String> = BTreeMap::new();
    scan_ids(
        "run run-00000000000a from sh-0000000000ab; nn-0123456789ab is a placeholder, \
         nn-00000000000c.nnue and xsh-000000000000",
        &mut ids,
    );
    assert_eq!(ids["run-"], "run-00000000000a");
    assert_eq!(ids["sh-"], "sh-0000000000ab");
    assert_eq!(ids["nn-"], "nn-00000000000c");
    assert_eq!(ids.len(), 3);
}
