//! bullet itself as the oracle for its saved layouts: bullet's CPU trainer (the version
//! `../shared/bench/bullet-cpu/` holds) trains each of its four progression nets a few steps
//! and saves `quantised.bin`; lakefish imports each file with the shipped layout, evaluates
//! 300 positions of the sample binpack, and must agree with bullet's own float output
//! (`eval_raw_output` × the eval scale) within quantization; exporting the imported net in
//! the same layout gives bullet's bytes back. And bullet's own data loader as the oracle for
//! lakefish's bulletformat export: the sample binpack, ingested and exported, read by
//! bullet's `DirectSequentialDataLoader` gives each scored position's Chess768 inputs, score
//! and result as the binpack says. Needs `../shared` (bullet's source, the binpack) and the
//! crates registry for bullet's first build (about a minute on 2 cores, cached in
//! target/bullet afterwards); without them it says so and checks nothing.

use lakefish_tests::{assert_success, lakefish_bin, shared_data, workspace_root};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// bullet with our example, built once for the tests of this file; the example's path.
fn bullet_example(bullet: &Path) -> std::path::PathBuf {
    static BUILT: std::sync::Mutex<Option<std::path::PathBuf>> = std::sync::Mutex::new(None);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = built.as_ref() {
        return p.clone();
    }
    // Kept until the test binary exits (the source is only needed for the build).
    let dir = tempfile::tempdir().unwrap().keep();
    let p = build_bullet(bullet, &dir);
    *built = Some(p.clone());
    p
}

/// Copies bullet's source beside our example and builds it; the example's path.
fn build_bullet(bullet: &Path, dir: &Path) -> std::path::PathBuf {
    let src = dir.join("bullet");
    let status = Command::new("cp")
        .arg("-r")
        .arg(bullet)
        .arg(&src)
        .status()
        .unwrap();
    assert!(status.success());
    let root = workspace_root();
    std::fs::copy(
        root.join("tests/bullet/lakefish_check.rs"),
        src.join("examples/lakefish_check.rs"),
    )
    .unwrap();
    let manifest = src.join("crates/bullet_lib/Cargo.toml");
    let mut toml = std::fs::read_to_string(&manifest).unwrap();
    toml.push_str(
        "\n[[example]]\nname = \"lakefish_check\"\npath = \"../../examples/lakefish_check.rs\"\n",
    );
    std::fs::write(&manifest, toml).unwrap();
    let target = root.join("target/bullet");
    let out = Command::new("cargo")
        .current_dir(&src)
        .env("CARGO_TARGET_DIR", &target)
        .args(["build", "--release", "--example", "lakefish_check"])
        .args(["--features", "cpu", "--no-default-features"])
        .output()
        .unwrap();
    assert_success(&out);
    target.join("release/examples/lakefish_check")
}

/// Every 37th position of the sample binpack, 300 of them.
fn positions(binpack: &Path) -> Vec<String> {
    let bytes = std::fs::read(binpack).unwrap();
    let mut r = sfbinpack::CompressedTrainingDataEntryReader::from_slice(&bytes).unwrap();
    let mut fens = Vec::new();
    let mut i = 0;
    while r.has_next() && fens.len() < 300 {
        let e = r.next();
        if i % 37 == 0 {
            fens.push(e.pos.fen().unwrap());
        }
        i += 1;
    }
    assert_eq!(
        fens.len(),
        300,
        "the sample binpack is shorter than expected"
    );
    fens
}

fn run_with_stdin(mut cmd: Command, stdin: &str) -> std::process::Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    let text = stdin.to_string();
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(text.as_bytes());
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

#[test]
fn bullets_own_nets_import_and_evaluate_as_bullet_does() {
    let (Some(bullet), Some(binpack)) = (
        shared_data("../bench/bullet-cpu/bullet"),
        shared_data("binpack/small.binpack"),
    ) else {
        eprintln!("../shared/bench/bullet-cpu or the sample binpack is absent: nothing to compare");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let example = bullet_example(&bullet);
    let fens = positions(&binpack);
    let lake = dir.path().join("lake");
    let lakefish = |args: &[&str]| {
        let mut c = Command::new(lakefish_bin());
        c.arg("--lake").arg(&lake).args(args);
        c
    };
    let root = workspace_root();
    for (n, name) in [
        (1, "bullet-1-simple"),
        (2, "bullet-2-output-buckets"),
        (3, "bullet-3-input-buckets"),
        (4, "bullet-4-multi-layer"),
    ] {
        let out_dir = dir.path().join(format!("out-{n}"));
        let mut cmd = Command::new(&example);
        cmd.env("NET", n.to_string())
            .env("HL", "64")
            .env("STEPS", "20")
            .env("DATA", &binpack)
            .env("OUT", &out_dir);
        let out = run_with_stdin(cmd, &fens.join("\n"));
        assert_success(&out);
        let theirs: Vec<f64> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .filter_map(|l| l.strip_prefix("eval "))
            .map(|v| v.parse::<f64>().unwrap() * 400.0)
            .collect();
        assert_eq!(theirs.len(), fens.len(), "{name}: bullet's evaluations");
        let quantised = out_dir.join("lakefish_check-1/quantised.bin");

        // The net bullet trained: bullet's example, 64 wide.
        let text = std::fs::read_to_string(root.join(format!("infra/nets/{name}.toml"))).unwrap();
        let mut spec = lakefish_schemas::netspec::NetSpec::parse(&text).unwrap();
        spec.transformer.width = 64;
        let spec_path = dir.path().join(format!("{name}.json"));
        std::fs::write(&spec_path, serde_json::to_string(&spec).unwrap()).unwrap();

        let out = lakefish(&["nets", "import"])
            .arg(&quantised)
            .args(["--layout", name, "--spec"])
            .arg(&spec_path)
            .output()
            .unwrap();
        assert_success(&out);
        let stdout = String::from_utf8(out.stdout).unwrap();
        let net = stdout.split('\t').next().unwrap().to_string();
        assert!(stdout.contains("external"), "{stdout}");

        let out = run_with_stdin(lakefish(&["nets", "eval", &net]), &fens.join("\n"));
        assert_success(&out);
        let ours: Vec<f64> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .zip(&fens)
            .map(|(v, fen)| {
                // `nets eval` prints White's side; bullet's output is the side to move's.
                let white: f64 = v.parse().unwrap();
                if fen.split(' ').nth(1) == Some("b") {
                    -white
                } else {
                    white
                }
            })
            .collect();
        assert_eq!(ours.len(), fens.len());
        let mut delta: Vec<f64> = ours
            .iter()
            .zip(&theirs)
            .map(|(a, b)| (a - b).abs())
            .collect();
        delta.sort_by(f64::total_cmp);
        let mean = delta.iter().sum::<f64>() / delta.len() as f64;
        let spread = theirs.iter().map(|v| v.abs()).sum::<f64>() / theirs.len() as f64;
        eprintln!(
            "{name}: |lakefish - bullet| mean {mean:.2} cp, median {:.2}, max {:.2}; bullet's mean |eval| {spread:.1} cp",
            delta[delta.len() / 2],
            delta[delta.len() - 1]
        );
        // Quantization (x255 transformer, x64 output weights) moves these 20-step nets by a
        // few centipawns; a wrong input index, bucket or mirror moves them by far more.
        assert!(spread > 40.0, "{name}: bullet's evaluations say too little");
        assert!(
            mean <= 12.0 && delta[delta.len() - 1] <= 60.0,
            "{name}: {delta:?}"
        );

        // Exported in the same layout, the imported net is bullet's file again.
        let back = dir.path().join(format!("{name}.bin"));
        let out = lakefish(&["nets", "export", &net, "--layout", name, "-o"])
            .arg(&back)
            .output()
            .unwrap();
        assert_success(&out);
        assert!(
            std::fs::read(&back).unwrap() == std::fs::read(&quantised).unwrap(),
            "{name}: the export differs from bullet's quantised.bin"
        );
    }
}

/// The side to move's Chess768 inputs of a position as bullet numbers them (its
/// `inputs/chess768.rs`): 384 for the other side's men, 64 per kind from pawn to king, the
/// square flipped rank for rank when Black is to move; sorted.
fn chess768(fen: &str) -> Vec<usize> {
    use shakmaty::{Color, Role};
    let setup = fen.parse::<shakmaty::fen::Fen>().unwrap().into_setup();
    let white = setup.turn == Color::White;
    let mut out: Vec<usize> = setup
        .board
        .iter()
        .map(|(sq, piece)| {
            let theirs = usize::from((piece.color == Color::White) != white);
            let kind = match piece.role {
                Role::Pawn => 0,
                Role::Knight => 1,
                Role::Bishop => 2,
                Role::Rook => 3,
                Role::Queen => 4,
                Role::King => 5,
            };
            let sq = if white { sq as usize } else { sq as usize ^ 56 };
            384 * theirs + 64 * kind + sq
        })
        .collect();
    out.sort_unstable();
    out
}

#[test]
fn bullets_loader_reads_our_bulletformat_export_as_the_binpack_says() {
    let (Some(bullet), Some(binpack)) = (
        shared_data("../bench/bullet-cpu/bullet"),
        shared_data("binpack/small.binpack"),
    ) else {
        eprintln!("../shared/bench/bullet-cpu or the sample binpack is absent: nothing to compare");
        return;
    };
    let example = bullet_example(&bullet);
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let out = Command::new(lakefish_bin())
        .arg("--lake")
        .arg(&lake)
        .args(["ingest", "binpack"])
        .arg(&binpack)
        .args(["--dataset", "s"])
        .output()
        .unwrap();
    assert_success(&out);
    let bf = dir.path().join("s.bf");
    let out = Command::new(lakefish_bin())
        .arg("--lake")
        .arg(&lake)
        .args(["export", "s", "--format", "bulletformat", "-o"])
        .arg(&bf)
        .output()
        .unwrap();
    assert_success(&out);

    // What the binpack says, read here with sfbinpack: each scored entry's inputs, its
    // score in centipawns (Stockfish's conversion at the position's material; mates at
    // ±32000) and result, both the side to move's.
    let bytes = std::fs::read(&binpack).unwrap();
    let mut r = sfbinpack::CompressedTrainingDataEntryReader::from_slice(&bytes).unwrap();
    let mut want: Vec<String> = Vec::new();
    while r.has_next() {
        let e = r.next();
        if e.score == lakefish_schemas::positions::NO_SCORE {
            continue;
        }
        let fen = e.pos.fen().unwrap();
        let board = fen
            .parse::<shakmaty::fen::Fen>()
            .unwrap()
            .into_setup()
            .board;
        let score = i32::from(e.score);
        let cp = if score.abs() > lakefish_engine::scores::MAX_EVAL {
            32000 * score.signum()
        } else {
            lakefish_engine::scores::internal_to_centipawns(
                score,
                lakefish_engine::scores::material(&board),
            )
            .round()
            .clamp(-32000.0, 32000.0) as i32
        };
        let features: Vec<String> = chess768(&fen).iter().map(usize::to_string).collect();
        want.push(format!("pos {cp} {} {}", e.result + 1, features.join(" ")));
    }

    let out = Command::new(&example).env("DUMP", &bf).output().unwrap();
    assert_success(&out);
    let mut got: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(
        got.len() as u64 * 32,
        std::fs::metadata(&bf).unwrap().len(),
        "one line per record"
    );
    assert!(want.len() > 100_000, "{} scored entries", want.len());
    // The export is in the lake's row order; compare as multisets.
    want.sort_unstable();
    got.sort_unstable();
    let differing = got.iter().zip(&want).filter(|(a, b)| a != b).count();
    assert_eq!(
        (got.len(), differing),
        (want.len(), 0),
        "first difference: {:?}",
        got.iter().zip(&want).find(|(a, b)| a != b)
    );
    // Every result and both signs of score occur: nothing collapsed to one value.
    for needle in [" 0 ", " 1 ", " 2 "] {
        assert!(
            got.iter()
                .any(|l| l.split(' ').nth(2) == Some(needle.trim())),
            "{needle}"
        );
    }
    assert!(got.iter().any(|l| l.starts_with("pos -")));
}
