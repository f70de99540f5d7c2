//! Stockfish 15.1's own network in lakefish, checked by the real binary (Debian's
//! `/usr/games/stockfish`, installed by `make setup`): exported by Stockfish, imported into the
//! registry, written back byte for byte, and evaluated by lakefish exactly as Stockfish's
//! `eval` prints it on positions from the lake.

use lakefish_jobs::Lake;
use lakefish_tests::*;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

const STOCKFISH: &str = "/usr/games/stockfish";
/// The net Stockfish 15.1 embeds, by the name it prints.
const EMBEDDED: &str = "nn-ad9b42354671.nnue";

struct Stockfish {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Stockfish {
    fn start() -> Stockfish {
        assert!(
            Path::new(STOCKFISH).exists(),
            "{STOCKFISH} missing: run `make setup` (Debian's stockfish package)"
        );
        let mut child = Command::new(STOCKFISH)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut sf = Stockfish {
            child,
            stdin,
            stdout,
        };
        sf.send("uci");
        sf.lines_until(|l| l == "uciok");
        sf
    }

    fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn lines_until(&mut self, last: impl Fn(&str) -> bool) -> Vec<String> {
        let mut out = Vec::new();
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "stockfish quit"
            );
            let line = line.trim_end().to_string();
            let done = last(&line);
            out.push(line);
            if done {
                return out;
            }
        }
    }

    /// `eval` of one position: the bucket table's cells (PSQT, positional, total per bucket),
    /// the bucket it marks, and the "NNUE evaluation" value; `None` in check (no trace).
    fn eval(&mut self, fen: &str) -> Option<SfTrace> {
        self.send(&format!("position fen {fen}"));
        self.send("eval");
        let lines = self.lines_until(|l| l.starts_with("Final evaluation"));
        if lines.last().unwrap().contains("none (in check)") {
            return None;
        }
        let mut t = SfTrace::default();
        for l in &lines {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            if cells.len() >= 5 && cells[1].parse::<usize>().is_ok() {
                t.table
                    .push([cells[2], cells[3], cells[4]].map(|c| c.replace(' ', "")));
                if l.contains("this bucket is used") {
                    t.bucket = cells[1].parse().unwrap();
                }
            }
            if let Some(net) = l.strip_prefix("info string NNUE evaluation using ") {
                t.using = net.trim_end_matches(" enabled").to_string();
            }
            if let Some(v) = l.strip_prefix("NNUE evaluation") {
                t.nnue = v.trim().split(' ').next().unwrap().to_string();
            }
        }
        assert_eq!(t.table.len(), 8, "{lines:#?}");
        Some(t)
    }
}

impl Drop for Stockfish {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Default, Debug)]
struct SfTrace {
    table: Vec<[String; 3]>,
    bucket: usize,
    nnue: String,
    /// The net Stockfish says it evaluates with.
    using: String,
}

/// Internal units as Stockfish prints them, spaces dropped: `+0.43`, `-100.00`, `0.00`.
fn table_cell(v: i64) -> String {
    lakefish_engine::stockfish_net::format_table_cp(v as i32).replace(' ', "")
}

fn run(dir: &Path, args: &[&str], stdin: Option<&str>) -> std::process::Output {
    let mut child = Command::new(lakefish_bin())
        .args(["--lake", "lake"])
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Fed from a thread, so a command that stops reading early is seen in its output.
    let mut input = child.stdin.take().unwrap();
    let text = stdin.unwrap_or_default().to_string();
    let feeder = std::thread::spawn(move || {
        let _ = input.write_all(text.as_bytes());
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    out
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Stockfish writes its embedded net; lakefish imports it under the name Stockfish gives it,
/// writes back the same bytes, and refuses damaged or foreign files naming what is wrong.
#[test]
fn stockfish_s_own_net_imports_and_exports_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let exported = export_embedded(dir.path());
    let out = run(
        dir.path(),
        &["nets", "import", exported.to_str().unwrap()],
        None,
    );
    assert_success(&out);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.starts_with(EMBEDDED), "{said}");
    assert!(said.contains("stockfish-15.1"), "{said}");

    let show = run(dir.path(), &["nets", "show", EMBEDDED], None);
    assert_success(&show);
    let m: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(m["format"], "stockfish");
    assert_eq!(m["external"], true);
    assert_eq!(m["bytes"], 47_001_499);

    let out = run(
        dir.path(),
        &[
            "nets",
            "export",
            EMBEDDED,
            "--format",
            "stockfish",
            "-o",
            "again.nnue",
        ],
        None,
    );
    assert_success(&out);
    let original = std::fs::read(&exported).unwrap();
    let again = std::fs::read(dir.path().join("again.nnue")).unwrap();
    assert!(original == again, "export after import changed the bytes");
    // Importing the same bytes again changes nothing.
    let out = run(dir.path(), &["nets", "import", "again.nnue"], None);
    assert_success(&out);
    // Stockfish's format as a saved layout (infra/layouts/stockfish-15.1.toml): the same
    // bytes out, and read back in through it the same net.
    let out = run(
        dir.path(),
        &[
            "nets",
            "export",
            EMBEDDED,
            "--layout",
            "stockfish-15.1",
            "-o",
            "layout.nnue",
        ],
        None,
    );
    assert_success(&out);
    let through_layout = std::fs::read(dir.path().join("layout.nnue")).unwrap();
    assert!(original == through_layout, "the layout writes other bytes");
    let out = run(
        dir.path(),
        &[
            "nets",
            "import",
            "layout.nnue",
            "--layout",
            "stockfish-15.1",
            "--spec",
            "halfka_v2_hm:stockfish-15.1",
        ],
        None,
    );
    assert_success(&out);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.starts_with(EMBEDDED), "{said}");
    std::fs::write(dir.path().join("cut.nnue"), &original[..original.len() - 1]).unwrap();
    let out = run(
        dir.path(),
        &[
            "nets",
            "import",
            "cut.nnue",
            "--layout",
            "stockfish-15.1",
            "--spec",
            "halfka_v2_hm:stockfish-15.1",
        ],
        None,
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("the file has 47001498 bytes"), "{err}");
    // In lakefish's own layout the file names its net: imported without --spec, it is
    // Stockfish's net again, under the same name.
    let out = run(
        dir.path(),
        &[
            "nets", "export", EMBEDDED, "--layout", "lakefish", "-o", "own.nnue",
        ],
        None,
    );
    assert_success(&out);
    let out = run(
        dir.path(),
        &["nets", "import", "own.nnue", "--layout", "lakefish"],
        None,
    );
    assert_success(&out);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.starts_with(EMBEDDED), "{said}");
    let out = run(
        dir.path(),
        &["nets", "import", "own.nnue", "--layout", "bullet-1-simple"],
        None,
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("give its NetSpec (nets import --spec)"),
        "{err}"
    );

    // Damaged and foreign files: a clear error naming the part, nothing registered.
    let bad = |name: &str, bytes: &[u8], expect: &str| {
        std::fs::write(dir.path().join(name), bytes).unwrap();
        let out = run(dir.path(), &["nets", "import", name], None);
        assert!(!out.status.success(), "{name} was accepted");
        let err = stderr(&out);
        assert!(err.contains(expect), "{name}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    };
    bad(
        "truncated.nnue",
        &original[..1 << 20],
        "truncated: the feature transformer's weights",
    );
    let mut longer = original.clone();
    longer.extend_from_slice(b"tail");
    bad("longer.nnue", &longer, "4 bytes after the last layer");
    let mut other_version = original.clone();
    other_version[..4].copy_from_slice(&0x7AF3_2F16u32.to_le_bytes());
    bad("sf14.nnue", &other_version, "version 0x7af32f16");
    let mut other_arch = original.clone();
    other_arch[4..8].copy_from_slice(&0x3C10_3E72u32.to_le_bytes());
    bad(
        "other-arch.nnue",
        &other_arch,
        "architecture hash 0x3c103e72",
    );
    bad("empty.nnue", b"", "the version");
    // A damaged file handed to `nets eval` is refused naming it, nothing printed.
    let out = run(
        dir.path(),
        &[
            "nets",
            "eval",
            "truncated.nnue",
            "4k3/8/8/8/8/8/8/4K3 w - - 0 1",
        ],
        None,
    );
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let err = stderr(&out);
    assert!(
        err.contains("truncated.nnue") && err.contains("neither a lakefish net"),
        "{err}"
    );
    let ls = run(dir.path(), &["nets", "ls"], None);
    assert_success(&ls);
    let listed = String::from_utf8_lossy(&ls.stdout);
    assert_eq!(listed.lines().count(), 1, "only the good net is registered");
    // An imported net was never quantized here: no made-up 0.00 cp (issue 35, item 10).
    assert!(
        listed.contains("imported, not quantized here") && !listed.contains("0.00 cp"),
        "{listed}"
    );
}

/// The evaluation: lakefish's integer evaluation of Stockfish's net equals what Stockfish
/// 15.1's `eval` prints, the final NNUE value and every bucket's PSQT, positional and total
/// cell, on at least 1,000 positions of real games from the lake (generated games without
/// ../shared).
#[test]
fn lakefish_evaluates_stockfish_s_net_as_stockfish_prints_it() {
    let dir = tempfile::tempdir().unwrap();
    let exported = export_embedded(dir.path());
    let fens = lake_positions(dir.path(), 1_300);
    let mut sf = Stockfish::start();
    let using = assert_evaluations_match(dir.path(), &exported, &fens, &mut sf);
    assert_eq!(using, EMBEDDED, "the name Stockfish prints");

    // A FEN that is not one is an error naming its line; nothing is printed for it.
    let out = run(
        dir.path(),
        &["nets", "eval", exported.to_str().unwrap()],
        Some("8/8/8/8/8/8/8/8 w - - 0 1\n"),
    );
    assert!(!out.status.success());
    assert!(stderr(&out).contains("line 1"), "{}", stderr(&out));
}

/// A net of Stockfish 15.1's architecture trained here (a short run), quantized, registered
/// and exported: Stockfish loads it with `EvalFile`, says so, and its `eval` matches
/// lakefish's integer evaluation on the same positions, cell for cell.
#[test]
fn a_net_trained_here_in_stockfish_s_architecture_runs_in_stockfish() {
    let dir = tempfile::tempdir().unwrap();
    let fens = lake_positions(dir.path(), 1_300);
    let ok = |args: &[&str]| {
        let out = run(dir.path(), args, None);
        assert_success(&out);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let id_in = |said: &str, prefix: &str| {
        let at = said
            .find(prefix)
            .unwrap_or_else(|| panic!("no {prefix} in {said}"));
        said[at..]
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .next()
            .unwrap()
            .to_string()
    };
    ok(&["mask", "quiet", "--dataset", "sf", "--name", "quiet"]);
    let said = ok(&[
        "shuffle",
        "--dataset",
        "sf",
        "--mask",
        "quiet",
        "--chunks",
        "4",
        "--seed",
        "1",
    ]);
    let shuffle = id_in(&said, "sh-");
    let said = ok(&[
        "train",
        "--shuffle",
        &shuffle,
        "--features",
        "halfka_v2_hm",
        "--arch",
        "stockfish-15.1",
        "--batch-size",
        "1024",
        "--max-steps",
        "30",
        "--val-chunks",
        "1",
    ]);
    let run_id = id_in(&said, "run-");
    ok(&["quantize", "--run", &run_id]);
    let said = ok(&["register", "--run", &run_id]);
    let name = format!("{}.nnue", id_in(&said, "nn-"));
    let show: serde_json::Value = serde_json::from_str(&ok(&["nets", "show", &name])).unwrap();
    assert_eq!(show["format"], "stockfish", "{show}");
    assert_eq!(show["external"], false);
    assert_eq!(show["run"], run_id.as_str());
    ok(&[
        "nets",
        "export",
        &name,
        "--format",
        "stockfish",
        "-o",
        "trained.nnue",
    ]);
    let file = dir.path().join("trained.nnue");

    let mut sf = Stockfish::start();
    sf.send(&format!("setoption name EvalFile value {}", file.display()));
    let using = assert_evaluations_match(dir.path(), &file, &fens, &mut sf);
    assert_eq!(using, file.display().to_string());

    // A lakefish-format net does not export to Stockfish's format.
    let out = run(
        dir.path(),
        &["nets", "export", "nn-000000000000.nnue"],
        None,
    );
    assert!(!out.status.success());
}

/// Evaluates `fens` with Stockfish (skipping positions in check, where it prints no table)
/// and with `lakefish nets eval NET --buckets`, and asserts every printed value equal on at
/// least 1,000 positions. Returns the net Stockfish said it used.
fn assert_evaluations_match(dir: &Path, net: &Path, fens: &[String], sf: &mut Stockfish) -> String {
    let mut compared = Vec::new();
    for fen in fens {
        if let Some(trace) = sf.eval(fen) {
            compared.push((fen.clone(), trace));
        }
    }
    assert!(
        compared.len() >= 1_000,
        "only {} positions not in check",
        compared.len()
    );
    let input: String = compared.iter().map(|(f, _)| format!("{f}\n")).collect();
    let out = run(
        dir,
        &["nets", "eval", net.to_str().unwrap(), "--buckets"],
        Some(&input),
    );
    assert_success(&out);
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), compared.len());
    let mut buckets_seen = std::collections::BTreeSet::new();
    for ((fen, trace), ours) in compared.iter().zip(&lines) {
        assert_eq!(ours["fen"], fen.as_str());
        let eval = ours["eval"].as_i64().unwrap();
        assert_eq!(
            lakefish_engine::stockfish_net::format_line_cp(eval as i32),
            trace.nnue,
            "{fen}: NNUE evaluation (ours {eval} internal units)"
        );
        assert_eq!(
            ours["bucket"].as_u64().unwrap() as usize,
            trace.bucket,
            "{fen}"
        );
        buckets_seen.insert(trace.bucket);
        for b in 0..8 {
            let p = ours["psqt"][b].as_i64().unwrap();
            let q = ours["positional"][b].as_i64().unwrap();
            let mine = [table_cell(p), table_cell(q), table_cell(p + q)];
            assert_eq!(mine, trace.table[b], "{fen}: bucket {b} (ours {p}, {q})");
        }
    }
    assert!(
        buckets_seen.len() >= 4,
        "positions cover too few buckets: {buckets_seen:?}"
    );
    compared[0].1.using.clone()
}

/// Stockfish's `export_net` writes the net it embeds.
fn export_embedded(dir: &Path) -> PathBuf {
    let path = dir.join("sf-embedded.nnue");
    let mut sf = Stockfish::start();
    sf.send(&format!("export_net {}", path.display()));
    let said = sf.lines_until(|l| l.contains("Network saved") || l.contains("Failed"));
    assert!(
        said.last().unwrap().contains("saved successfully"),
        "{said:?}"
    );
    // Stockfish prints that before its file stream is closed: `readyok` comes after.
    sf.send("isready");
    sf.lines_until(|l| l == "readyok");
    path
}

/// About `n` FENs spread over a dataset ingested into the lake in `dir`: small.binpack's real
/// games when ../shared is there, else generated games.
fn lake_positions(dir: &Path, n: usize) -> Vec<String> {
    let input = binpack_input(dir);
    let out = run(
        dir,
        &[
            "ingest",
            "binpack",
            input.to_str().unwrap(),
            "--dataset",
            "sf",
        ],
        None,
    );
    assert_success(&out);
    let lake = Lake::open(
        dir.join("lake").to_str().unwrap(),
        &std::collections::HashMap::new(),
    )
    .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let rows = rt.block_on(read_dataset(&lake, "sf"));
    assert!(rows.len() >= n, "only {} rows", rows.len());
    let step = rows.len() / n;
    rows.iter()
        .step_by(step)
        .take(n)
        .map(|r| r.fen.clone())
        .collect()
}
