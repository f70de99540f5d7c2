//! bullet itself as the oracle for its saved layouts: bullet's CPU trainer (the version
//! `../shared/bench/bullet-cpu/` holds) trains each of its four progression nets a few steps
//! and saves `quantised.bin`; lakefish imports each file with the shipped layout, evaluates
//! 300 positions of the sample binpack, and must agree with bullet's own float output
//! (`eval_raw_output` × the eval scale) within quantization; exporting the imported net in
//! the same layout gives bullet's bytes back. Needs `../shared` (bullet's source, the binpack)
//! and the crates registry for bullet's first build (about a minute on 2 cores, cached in
//! target/bullet afterwards); without them it says so and checks nothing.

use lakefish_tests::{assert_success, lakefish_bin, shared_data, workspace_root};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

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
    let example = build_bullet(&bullet, dir.path());
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
