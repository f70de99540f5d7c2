//! A bounded, seeded run of every fuzz target (see `src/lib.rs` for running longer), and the
//! inputs that once broke a parser, kept as regressions.

use lakefish_fuzz::harness::{iters_from_env, seed_from_env};
use lakefish_fuzz::targets::{self, by_name};
use lakefish_fuzz::{Verdict, fuzz, run_one};
use std::sync::Arc;

/// Runs `name` for its default count (or `LAKEFISH_FUZZ_ITERS`), unless
/// `LAKEFISH_FUZZ_TARGET` names another target.
fn run(name: &str, default_iters: u64) {
    if std::env::var("LAKEFISH_FUZZ_TARGET").is_ok_and(|t| t != name) {
        return;
    }
    let target = by_name(name).expect("a target");
    let (iters, seed) = (iters_from_env(default_iters), seed_from_env());
    let stats = fuzz(Arc::new(target), iters, seed);
    eprintln!("fuzz {name} (seed {seed}): {stats}");
    assert_eq!(stats.inputs, iters);
}

#[test]
fn binpack_chunk() {
    run("binpack_chunk", 10000);
}

#[test]
fn binpack_scan() {
    run("binpack_scan", 2000);
}

#[test]
fn pgn_block() {
    run("pgn_block", 4000);
}

#[test]
fn pgn_eval() {
    run("pgn_eval", 20000);
}

#[test]
fn pgn_splitter() {
    run("pgn_splitter", 1000);
}

#[test]
fn nnue() {
    run("nnue", 10000);
}

#[test]
fn nnue_described() {
    run("nnue_described", 3000);
}

#[test]
fn layout_document() {
    run("layout_document", 3000);
}

#[test]
fn layout_file() {
    run("layout_file", 2000);
}

#[test]
fn layout_file_lakefish() {
    run("layout_file_lakefish", 1000);
}

#[test]
fn uci() {
    run("uci", 1000);
}

#[test]
fn sprt_side() {
    run("sprt_side", 20000);
}

#[test]
fn uci_info() {
    run("uci_info", 20000);
}

#[test]
fn fen() {
    run("fen", 20000);
}

#[test]
fn book() {
    run("book", 6000);
}

#[test]
fn job_spec() {
    run("job_spec", 20000);
}

#[test]
fn sprt_tc() {
    run("sprt_tc", 10000);
}

#[test]
fn config() {
    run("config", 5000);
}

/// Seeds that are valid inputs are accepted: otherwise the mutants start from refusals and
/// test little.
#[test]
fn valid_seeds_are_accepted() {
    for t in targets::all() {
        let accepted = t
            .seeds
            .iter()
            .filter(|s| run_one(&t, s) == Ok(Verdict::Accepted))
            .count();
        assert!(accepted > 0, "{}: no seed is accepted", t.name);
        if matches!(
            t.name,
            "nnue" | "nnue_described" | "job_spec" | "fen" | "binpack_chunk"
        ) {
            assert_eq!(accepted, t.seeds.len(), "{}: a seed is refused", t.name);
        }
    }
}

/// `LAKEFISH_FUZZ_INPUT=file LAKEFISH_FUZZ_TARGET=name`: replays one saved input.
#[test]
fn replay_saved_input() {
    let (Ok(path), Ok(name)) = (
        std::env::var("LAKEFISH_FUZZ_INPUT"),
        std::env::var("LAKEFISH_FUZZ_TARGET"),
    ) else {
        return;
    };
    let target = by_name(&name).expect("a target");
    let data = std::fs::read(&path).expect("the saved input");
    let verdict = run_one(&target, &data);
    assert!(verdict.is_ok(), "{name} on {path}: {verdict:?}");
}

/// Inputs that broke a promise once, each run through its target as the fuzzer would.
#[test]
fn regressions() {
    let cases: [(&str, &[u8]); 6] = [
        // pgn.rs: a FEN tag's huge move number overflowed the first ply (debug builds panicked).
        (
            "pgn_block",
            b"[Variant \"Chess960\"]\n[FEN \"bqnb1rkr/pp3ppp/3ppn2/2p5/5P2/P2P4/NPP1P1PP/BQ1BNRKR w HFhf - 2 99999999999999999999999 \"]\n\n9. g3 O-O 10. O-O *\n",
        ),
        // job.rs: a spec that is not an object named no field.
        ("job_spec", br#"{"kind":"train","spec":true}"#),
        // binpack.rs: a decoder panic named no entry.
        (
            "binpack_chunk",
            &[
                0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x2d, 0x84, 0x4a, 0xd2, 0x00, 0x00,
                0x00, 0x00, 0x11, 0x11, 0x11, 0x11, 0x3e, 0x95, 0x5b, 0xe3, 0x0c, 0x50, 0x00, 0x27,
                0x80, 0x00, 0x00, 0x00, 0x00, 0x30, 0x1f, 0x3b, 0x97, 0xd6, 0x50, 0xd3, 0xce, 0x11,
                0x6c, 0x2c, 0xc8, 0xb1, 0x6f, 0xe5, 0xf4, 0xb1, 0x1d, 0x3e, 0xd0, 0x1c, 0x24, 0x34,
                0x72,
            ],
        ),
        // layout.rs, netspec.rs: an empty key at the top of a JSON document named no field.
        (
            "layout_document",
            br#"{"version":1,"":[],"tensors":[]}"#,
        ),
        (
            "job_spec",
            br#"{"kind":"train","spec":{"shuffle":"sh-0123456789ab","":1}}"#,
        ),
        // uci.rs: `go` with every limit at its extreme, then stop.
        (
            "uci",
            b"go depth 18446744073709551616 nodes -1 movetime 99999999999999999999999 mate 0\n",
        ),
    ];
    for (name, input) in cases {
        let target = by_name(name).expect("a target");
        let verdict = run_one(&target, input);
        assert!(verdict.is_ok(), "{name}: {verdict:?}");
    }
    // nnue.rs: a tensor whose name was damaged was reported under the empty name.
    let target = by_name("nnue").unwrap();
    let mut net = target.seeds[0].clone();
    let at = net.windows(7).position(|w| w == b"ft.bias").unwrap();
    net[at - 2] = 0;
    assert_eq!(run_one(&target, &net), Ok(Verdict::Refused));
}
