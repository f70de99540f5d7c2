//! `lakefish engine` through a real UCI client (python-chess's `chess.engine`), and the
//! engine's refusals of bad nets on the command line and over UCI.

use std::io::Write;
use std::process::{Command, Stdio};

use lakefish_engine::features::FeatureSetKind;
use lakefish_engine::nnue::random_network;
use lakefish_tests::{assert_success, lakefish_bin, play_through_python_chess, shared_data};

#[test]
fn python_chess_plays_a_whole_game() {
    let game = play_through_python_chess(&["engine", "--net", "classical"], 2000, 400);
    let moves = game["moves"].as_array().unwrap();
    let result = game["result"].as_str().unwrap();
    // The game ended by the rules (python-chess judged it), or at the ply cap.
    assert!(
        ["1-0", "0-1", "1/2-1/2"].contains(&result) || moves.len() == 400,
        "{game}"
    );
    assert!(moves.len() >= 20, "{game}");
    let options = game["options"].as_array().unwrap();
    for o in ["Hash", "EvalFile", "UCI_Chess960"] {
        assert!(options.iter().any(|v| v == o), "{o} not offered: {game}");
    }
    assert!(!game["scores"].as_array().unwrap().is_empty(), "{game}");
    assert!(game["max_depth"].as_u64().unwrap() >= 4, "{game}");
    assert!(game["analysis_depth"].as_u64().unwrap() >= 1, "{game}");
}

/// Feeds `script` to `lakefish engine ARGS` and returns (success, stdout, stderr).
fn uci(args: &[&str], script: &str) -> (bool, String, String) {
    let mut child = Command::new(lakefish_bin())
        .arg("engine")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn nets_from_files_and_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.nnue");
    let bytes = random_network(FeatureSetKind::HalfKp, "64x2-32-32", 3).to_bytes();
    std::fs::write(&good, &bytes).unwrap();
    // A file whose header claims another architecture than its tensors have.
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let at = text.find("64x2-32-32").unwrap();
    let mut lying = bytes.clone();
    lying[at..at + 2].copy_from_slice(b"32");
    let wrong = dir.path().join("wrong-arch.nnue");
    std::fs::write(&wrong, &lying).unwrap();

    // A real net file plays.
    let (ok, out, err) = uci(
        &["--net", good.to_str().unwrap()],
        "uci\nposition startpos moves e2e4\ngo nodes 5000\nquit\n",
    );
    assert!(ok, "{err}");
    assert!(err.contains("nnue halfkp 64x2-32-32"), "{err}");
    assert!(out.contains("bestmove "), "{out}");

    // The wrong architecture is refused on the command line, naming the file and reason.
    let (ok, _, err) = uci(&["--net", wrong.to_str().unwrap()], "quit\n");
    assert!(!ok);
    assert!(err.contains("wrong-arch.nnue is not a net"), "{err}");
    assert!(err.contains("hash"), "{err}");
    // ...and over UCI, where the session carries on with the evaluation it had.
    let script = format!(
        "setoption name EvalFile value {}\nsetoption name EvalFile value nn-000000000000\n\
         position startpos\ngo depth 3\nquit\n",
        wrong.display()
    );
    let lake = dir.path().join("lake");
    let (ok, out, _) = uci(
        &["--lake", lake.to_str().unwrap(), "--net", "classical"],
        &script,
    );
    assert!(ok);
    assert!(
        out.contains("info string error: setoption EvalFile"),
        "{out}"
    );
    assert!(out.contains("is not a net"), "{out}");
    assert!(out.contains("nn-000000000000 is not registered"), "{out}");
    assert!(out.contains("bestmove "), "{out}");
    // An unknown name that is no file, and `best` before any promotion.
    let (ok, _, err) = uci(&["--net", "no-such-thing"], "quit\n");
    assert!(!ok && err.contains("neither a file"), "{err}");
    let (ok, _, err) = uci(
        &["--lake", lake.to_str().unwrap(), "--net", "best"],
        "quit\n",
    );
    assert!(ok && err.contains("classical"), "{err}");
}

#[test]
fn garbage_uci_input_never_crashes() {
    let mut script = String::from("uci\n");
    for line in [
        "position",
        "position fen",
        "position fen 8/8/8/8/8/8/8/8 w - - 0 1",
        "position startpos moves",
        "position startpos moves e2e4 zzzz",
        "position startpos garbage",
        "go depth",
        "go nodes -5",
        "go movetime 1e9",
        "go wtime 100 btime",
        "setoption",
        "setoption name",
        "setoption name Hash value 99999999999999999999",
        "setoption name UCI_Chess960 value maybe",
        "\u{0}\u{1}\u{2}",
        "ünïcödé",
        "stop",
        "isready",
    ] {
        script.push_str(line);
        script.push('\n');
    }
    script.push_str("position startpos moves e2e4\ngo depth 2\nisready\nquit\n");
    let (ok, out, err) = uci(&["--net", "classical"], &script);
    assert!(ok, "{err}");
    assert!(out.matches("info string error").count() >= 12, "{out}");
    assert!(out.contains("readyok"), "{out}");
    // `go nodes -5` searches one node's worth; the last go answers too.
    assert!(out.matches("bestmove").count() >= 2, "{out}");
}

/// Self-play data: the same seed gives the same binpack whatever the thread count; the rows
/// in positions/source=selfplay are exactly the file's entries, every move is legal in its
/// position, and results alternate along each game.
#[tokio::test(flavor = "multi_thread")]
async fn datagen_writes_reproducible_selfplay_data() {
    let dir = tempfile::tempdir().unwrap();
    let mut outputs = Vec::new();
    for threads in ["1", "2"] {
        let lake = dir.path().join(format!("lake-{threads}"));
        let out = Command::new(lakefish_bin())
            .args([
                "--lake",
                lake.to_str().unwrap(),
                "datagen",
                "--net",
                "classical",
            ])
            .args([
                "--games",
                "6",
                "--nodes",
                "500",
                "--dataset",
                "sp",
                "--seed",
                "9",
            ])
            .args(["--threads", threads])
            .output()
            .unwrap();
        lakefish_tests::assert_success(&out);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        outputs.push((lake, v));
    }
    let (lake_dir, v) = &outputs[0];
    assert_eq!(
        v["binpack"], outputs[1].1["binpack"],
        "same games on 1 and 2 threads"
    );
    let positions = v["positions"].as_u64().unwrap();
    assert_eq!(v["ingest"]["rows"].as_u64().unwrap(), positions);
    assert!(positions > 6 * 10, "{v}");

    let lake = lakefish_jobs::Lake::open(lake_dir.to_str().unwrap(), &Default::default()).unwrap();
    let rows = lakefish_tests::read_source_dataset(&lake, "selfplay", "sp").await;
    let binpack = lake_dir.join(v["binpack"].as_str().unwrap());
    lakefish_tests::assert_rows_match_binpack(&rows, &binpack);
    for (i, row) in rows.iter().enumerate() {
        let pos: shakmaty::Chess = row
            .fen
            .parse::<shakmaty::fen::Fen>()
            .unwrap()
            .into_position(shakmaty::CastlingMode::Standard)
            .unwrap();
        let uci: shakmaty::uci::UciMove = row.mv.parse().unwrap();
        assert!(
            uci.to_move(&pos).is_ok(),
            "row {i}: {} illegal in {}",
            row.mv,
            row.fen
        );
        assert!(row.score.is_some() && row.result.is_some(), "row {i}");
        if let Some(next) = rows.get(i + 1).filter(|n| n.game_id == row.game_id) {
            assert_eq!(next.ply, row.ply + 1, "row {i}");
            assert_eq!(next.result, row.result.map(|r| -r), "row {i}");
        }
    }

    // An unknown net, a bad dataset name, bad limits: clear errors, and the dataset
    // already there is untouched.
    for (args, needle) in [
        (
            vec!["--net", "nn-000000000000", "--dataset", "sp"],
            "nn-000000000000 is not registered",
        ),
        (
            vec!["--net", "classical", "--dataset", "../sp"],
            "dataset name",
        ),
        (
            vec!["--net", "classical", "--dataset", "sp", "--games", "0"],
            "games must be",
        ),
        (
            vec!["--net", "classical", "--dataset", "sp", "--max-plies", "0"],
            "max_plies",
        ),
        // A taken name is refused before any game is played (issue 35, item 5).
        (
            vec![
                "--net",
                "classical",
                "--dataset",
                "sp",
                "--seed",
                "10",
                "--games",
                "50",
            ],
            "dataset sp already exists",
        ),
    ] {
        let out = Command::new(lakefish_bin())
            .args(["--lake", lake_dir.to_str().unwrap(), "datagen"])
            .args(&args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        // In the user's words, not the queue's (issue 35, item 10).
        assert!(!err.contains("payload"), "{args:?}: {err}");
    }
    let after = lakefish_tests::read_source_dataset(&lake, "selfplay", "sp").await;
    assert_eq!(after, rows);
    // No binpack of games that were never ingested.
    let raw: Vec<_> = std::fs::read_dir(lake_dir.join("raw/selfplay"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(raw.len(), 1, "{raw:?}");
}

/// `engine bench --eval` over real games from a PGN: incremental and refreshed evaluations are
/// compared (the command asserts they agree) and the ratio printed; a PGN with no games is
/// refused.
#[test]
fn eval_bench_replays_pgn_games() {
    let dir = tempfile::tempdir().unwrap();
    let pgn = match shared_data("pgn/lichess_db_10k.pgn") {
        Some(p) => p,
        None => {
            let p = dir.path().join("games.pgn");
            std::fs::write(
                &p,
                "[Event \"x\"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 4. Ba4 Nf6 5. O-O Be7 1/2-1/2\n",
            )
            .unwrap();
            p
        }
    };
    let run = |pgn: &std::path::Path| {
        std::process::Command::new(lakefish_bin())
            .args([
                "engine",
                "bench",
                "--random-net",
                "halfkp:32x2-8",
                "--depth",
                "1",
                "--eval",
                "--eval-pgn",
            ])
            .arg(pgn)
            .output()
            .unwrap()
    };
    let out = run(&pgn);
    assert_success(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("eval positions: ") && text.contains(" games of "),
        "{text}"
    );
    assert!(text.contains("ratio"), "{text}");

    let empty = dir.path().join("empty.pgn");
    std::fs::write(&empty, "not a pgn at all\n").unwrap();
    let out = run(&empty);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no games from the standard position"));
}

/// Threat features (nnue-pytorch's Full_Threats) and the thesis's King-All (king buckets, one
/// per square), axes, mobility and pairwise axes on 1,000
/// positions, real games from the samples and random games with captures, promotions,
/// castling and en passant, equal an enumeration written with python-chess's attack tables
/// (tests/py/families_reference.py).
#[test]
fn input_families_equal_python_chess_s_enumeration() {
    use lakefish_engine::spec_net::InputFamily;
    use lakefish_schemas::netspec::Inputs;
    let pgn = shared_data("pgn/lichess_db_1000k.pgn")
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "none".into());
    let out = Command::new(lakefish_tests::venv_bin("python"))
        .arg(lakefish_tests::workspace_root().join("tests/py/families_reference.py"))
        .args([pgn.as_str(), "1000", "5"])
        .output()
        .unwrap();
    assert_success(&out);
    let families = [
        (
            "king_all",
            Inputs::KingBuckets {
                layout: (0..64).collect(),
                mirror: false,
                factoriser: false,
            },
        ),
        ("threats", Inputs::Threats {}),
        ("axes", Inputs::Axes {}),
        ("mobility", Inputs::Mobility {}),
        ("pairwise_axes", Inputs::PairwiseAxes {}),
    ]
    .map(|(name, inputs)| (name, InputFamily::of(&inputs).unwrap()));
    let mut most = [0; 5];
    let mut checked = 0;
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let fen = v["fen"].as_str().unwrap();
        let pos = lakefish_engine::rules::parse_position(fen).unwrap();
        let board = shakmaty::Position::board(&pos);
        for (i, (name, family)) in families.iter().enumerate() {
            for (colour, key) in [
                (shakmaty::Color::White, "white"),
                (shakmaty::Color::Black, "black"),
            ] {
                let mut got = Vec::new();
                family.active(board, colour, &mut got).unwrap();
                got.sort_unstable();
                let want: Vec<u32> = serde_json::from_value(v[name][key].clone()).unwrap();
                assert_eq!(got, want, "{name} of {fen} for {key}");
                assert!(got.iter().all(|&f| (f as usize) < family.inputs()));
                assert!(got.len() <= family.max_active(), "{name} of {fen}");
                most[i] = most[i].max(got.len());
            }
        }
        checked += 1;
    }
    assert_eq!(checked, 1000);
    assert!(
        most[0] > 10,
        "positions with many threats came up: {most:?}"
    );
}
