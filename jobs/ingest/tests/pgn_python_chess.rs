//! PGN ingest compared row by row with python-chess reading the same file
//! (`tests/py/pgn_expected_rows.py`): null moves (`--`, `Z0`, `0000`), Chess960 games under
//! each tag spelling (X-FEN and Shredder-FEN, castling both ways, king beside its rook),
//! movetext in UCI, and the games the ingest must skip (Crazyhouse, an illegal UCI move, a
//! null move in check). Then the real samples in `../shared/data/pgn` when present.

use lakefish_engine::fen::write_uci;
use lakefish_engine::random_games::SplitMix;
use lakefish_ingest::ingest_pgn::ingest_pgn;
use lakefish_lake::datasets::read_manifest;
use lakefish_lake::{JobContext, Lake};
use lakefish_schemas::{DatasetManifest, DatasetName, IngestSpec, JobId, Source};
use lakefish_testkit::{shared_data, workspace_root};
use serde_json::{Value, json};
use shakmaty::fen::Fen;
use shakmaty::san::SanPlus;
use shakmaty::{CastlingMode, Chess, Move, Position};
use std::collections::HashMap;
use std::path::Path;

struct Checked {
    report: Value,
    manifest: DatasetManifest,
    moves: Vec<String>,
}

/// Ingests `pgn` into a scratch lake and runs the python-chess comparison on it.
fn ingest_and_compare(pgn: &Path) -> Checked {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("lake");
    let lake = Lake::open(root.to_str().unwrap(), &HashMap::new()).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ctx = JobContext::new(lake.clone(), rt.handle().clone()).with_threads(2);
    let dataset = DatasetName::new("pgn").unwrap();
    let spec = IngestSpec {
        max_game_bytes: None,
        inputs: vec![pgn.to_str().unwrap().to_string()],
        dataset: dataset.clone(),
        rows_per_part: 5_000,
    };
    let summary = ingest_pgn(&ctx, &JobId::new(), &spec).unwrap();
    let manifest = rt
        .block_on(read_manifest(&lake, Source::Lichess, &dataset))
        .unwrap()
        .expect("committed");
    let python = workspace_root().join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} missing: run `make setup`",
        python.display()
    );
    let out = std::process::Command::new(python)
        .arg(workspace_root().join("tests/py/pgn_expected_rows.py"))
        .arg(pgn)
        .arg(root.join("positions/source=lichess/dataset=pgn"))
        .arg(root.join("games/source=lichess/dataset=pgn"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &report;
    assert_eq!(r["mismatches"], json!([]), "{r}");
    assert_eq!(r["lake_rows"], r["expected_rows"], "{r}");
    assert_eq!(r["lake_rows"], summary.rows, "{r}");
    assert_eq!(r["lake_games"], r["games"], "{r}");
    assert_eq!(r["chess960_mismatches"], json!([]), "{r}");
    assert_eq!(r["lake_chess960"], r["expected_chess960"], "{r}");
    assert_eq!(r["lake_scored"], r["expected_scored"], "{r}");
    // The same games are skipped, by their number in the file.
    let input = &manifest.inputs[0];
    assert_eq!(input.chunks, r["games_read"].as_u64().unwrap(), "{r}");
    let mut lake_skips: Vec<u64> = input.skipped_games.iter().map(|s| s.game).collect();
    lake_skips.extend(input.skipped_variants.values().map(|_| 0));
    let python_skips: Vec<u64> = r["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s[0].as_u64().unwrap())
        .collect();
    assert_eq!(
        lake_skips.len(),
        python_skips.len(),
        "lake {:?} {:?}, python {r}",
        input.skipped_games,
        input.skipped_variants
    );
    for s in &input.skipped_games {
        assert!(python_skips.contains(&s.game), "{s:?} vs {r}");
    }
    let moves = read_moves(&root.join("positions/source=lichess/dataset=pgn"));
    Checked {
        report,
        manifest,
        moves,
    }
}

/// The `move` column of every positions part under `dir`.
fn read_moves(dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                files.push(p);
            }
        }
    }
    files.sort();
    files
        .iter()
        .flat_map(|p| {
            let key = p.display().to_string();
            lakefish_lake::parts::read_positions(std::fs::read(p).unwrap().into(), &key).unwrap()
        })
        .map(|r| r.mv)
        .collect()
}

/// Back rank of Chess960 start position `n` (0..960), white pieces, a to h.
fn chess960_rank(n: u64) -> String {
    let mut rank = [' '; 8];
    let (n, light) = (n / 4, n % 4);
    rank[2 * light as usize + 1] = 'B';
    let (n, dark) = (n / 4, n % 4);
    rank[2 * dark as usize] = 'B';
    let place = |rank: &mut [char; 8], mut k: u64, piece: char| {
        for sq in rank.iter_mut() {
            if *sq == ' ' {
                if k == 0 {
                    *sq = piece;
                    return;
                }
                k -= 1;
            }
        }
    };
    let (n, queen) = (n / 6, n % 6);
    place(&mut rank, queen, 'Q');
    let knights = [
        (0, 1),
        (0, 2),
        (0, 3),
        (0, 4),
        (1, 2),
        (1, 3),
        (1, 4),
        (2, 3),
        (2, 4),
        (3, 4),
    ][n as usize];
    place(&mut rank, knights.1, 'N');
    place(&mut rank, knights.0, 'N');
    for piece in ['R', 'K', 'R'] {
        place(&mut rank, 0, piece);
    }
    rank.iter().collect()
}

/// A random game from `pos` as SAN movetext (castling preferred when legal, evals now and
/// then), or as UCI when `uci`. Castling moves played are counted in `castles`.
fn random_movetext(
    mut pos: Chess,
    plies: usize,
    rng: &mut SplitMix,
    uci: bool,
    castles: &mut usize,
) -> String {
    let mut text = String::new();
    for ply in 0..plies {
        let moves = pos.legal_moves();
        if moves.is_empty() {
            break;
        }
        let castling: Vec<Move> = moves.iter().copied().filter(|m| m.is_castle()).collect();
        let m = if !castling.is_empty() && rng.below(3) > 0 {
            castling[rng.below(castling.len() as u64) as usize]
        } else {
            moves[rng.below(moves.len() as u64) as usize]
        };
        *castles += m.is_castle() as usize;
        if pos.turn().is_white() {
            text.push_str(&format!("{}. ", pos.fullmoves()));
        } else if ply == 0 {
            text.push_str(&format!("{}... ", pos.fullmoves()));
        }
        if uci {
            let mut bytes = Vec::new();
            write_uci(&m, pos.castles().mode(), &mut bytes);
            pos.play_unchecked(m);
            text.push_str(std::str::from_utf8(&bytes).unwrap());
        } else {
            text.push_str(&SanPlus::from_move_and_play_unchecked(&mut pos, m).to_string());
        }
        text.push(' ');
        if rng.below(4) == 0 {
            let pawns = rng.below(401) as f64 / 100.0 - 2.0;
            text.push_str(&format!("{{ [%eval {pawns:.2}] }} "));
        }
    }
    text
}

fn game(tags: &[(&str, &str)], movetext: &str) -> String {
    let mut out = String::from("[Event \"t\"]\n[Site \"?\"]\n");
    for (k, v) in tags {
        out.push_str(&format!("[{k} \"{v}\"]\n"));
    }
    out.push_str(&format!("[Result \"*\"]\n\n{movetext} *\n\n"));
    out
}

/// The file under test: hand-written cases, then random Chess960 and UCI games.
fn realworld_pgn() -> (String, usize) {
    let mut out = String::new();
    // Null moves: `--`, `Z0`, `0000`, with a check suffix, after a double push (the en passant
    // square goes), with evals after them; then one in check (skipped by the lake).
    out += &game(
        &[],
        "1. e4 -- { [%eval 0.5] } 2. d4 Z0 3. Nf3 { [%eval #3] } e5",
    );
    out += &game(
        &[("SetUp", "1"), ("FEN", "4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 2")],
        "2. --+ Kd7 3. Kd2 0000 4. Ke3",
    );
    out += &game(&[], "1. e4 e5 2. Qh5 Nc6 3. Qxf7+ -- 4. Qxe8");
    // Chess960: the tag spellings, X-FEN and Shredder-FEN, castling both ways, a king beside
    // its castling rook, an inner rook (written by its file in X-FEN).
    out += &game(
        &[("Variant", "Chess960")],
        "1. e4 e5 2. Nf3 Nf6 3. Bc4 { [%eval 0.2] } Bc5 4. O-O O-O",
    );
    out += &game(
        &[
            ("Variant", "fischerandom"),
            ("SetUp", "1"),
            (
                "FEN",
                "rk2r2r/pppppppp/8/8/8/8/PPPPPPPP/RK2R2R w EAea - 0 1",
            ),
        ],
        "1. O-O-O O-O 2. d4 d5",
    );
    out += &game(
        &[
            ("Variant", "Fischerandom"),
            ("SetUp", "1"),
            (
                "FEN",
                "1r3krq/pppppppp/8/8/8/8/PPPPPPPP/1R3KRQ w KQkq - 0 1",
            ),
        ],
        "1. O-O O-O-O 2. a3 a6",
    );
    // UCI movetext: castling as the king's two squares and as king takes rook, a promotion
    // without `=`; then an illegal UCI move and a Crazyhouse game (both skipped).
    out += &game(
        &[],
        "1. g1f3 g8f6 2. e2e4 f6e4 3. f1c4 e4d6 4. e1g1 d6c4 5. d2d3 c4b6 6. b1c3 e7e6 \
         7. c1e3 f8e7 8. d1d2 e8h8",
    );
    out += &game(
        &[("SetUp", "1"), ("FEN", "8/4P3/8/8/8/8/k7/4K3 w - - 0 1")],
        "1. e7e8q Ka3 2. e8e7",
    );
    out += &game(&[], "1. e2e4 e7e5 2. g1g3");
    out += &game(&[("Variant", "Crazyhouse")], "1. e4 e5 2. Nf3 Nc6");
    let mut rng = SplitMix(960);
    let mut castles = 0;
    let spellings = ["Chess960", "fischerandom", "Fischerandom"];
    for (i, n) in [518u64, 0, 959, 123, 777, 301, 42, 640]
        .into_iter()
        .enumerate()
    {
        let white = chess960_rank(n);
        // Shredder-FEN (the rook files) for every other game, X-FEN (KQkq) otherwise.
        let rights = if i % 2 == 0 {
            "KQkq".to_string()
        } else {
            let files: Vec<char> = white
                .char_indices()
                .filter(|(_, c)| *c == 'R')
                .map(|(f, _)| (b'A' + f as u8) as char)
                .rev()
                .collect();
            let upper: String = files.iter().collect();
            format!("{upper}{}", upper.to_ascii_lowercase())
        };
        let fen = format!(
            "{}/pppppppp/8/8/8/8/PPPPPPPP/{white} w {rights} - 0 1",
            white.to_ascii_lowercase()
        );
        let pos: Chess = Fen::from_ascii(fen.as_bytes())
            .unwrap()
            .into_position(CastlingMode::Chess960)
            .unwrap();
        let movetext = random_movetext(pos, 60, &mut rng, false, &mut castles);
        out += &game(
            &[("Variant", spellings[i % 3]), ("SetUp", "1"), ("FEN", &fen)],
            &movetext,
        );
    }
    for _ in 0..3 {
        let movetext = random_movetext(Chess::default(), 50, &mut rng, true, &mut castles);
        out += &game(&[], &movetext);
    }
    (out, castles)
}

#[test]
fn null_moves_chess960_and_uci_movetext_match_python_chess() {
    let dir = tempfile::tempdir().unwrap();
    let (text, castles) = realworld_pgn();
    assert!(castles >= 8, "the random games castle ({castles})");
    let path = dir.path().join("realworld.pgn");
    std::fs::write(&path, &text).unwrap();
    let Checked {
        report: r,
        manifest,
        moves,
    } = ingest_and_compare(&path);
    assert_eq!(r["games_read"], 21, "{r}");
    assert_eq!(r["games"], 18, "{r}");
    assert_eq!(r["null_moves"], 4, "{r}");
    assert_eq!(r["expected_chess960"], 11, "{r}");
    let input = &manifest.inputs[0];
    assert_eq!(input.skipped_variants.get("Crazyhouse"), Some(&1));
    let reasons: Vec<&str> = input
        .skipped_games
        .iter()
        .map(|s| s.reason.as_str())
        .collect();
    assert_eq!(
        reasons,
        [
            "move 3... -- is a null move while in check (python-chess would play it into an \
             impossible position) (ply 6)",
            "move 2. g1g3 is illegal (ply 3)"
        ]
    );
    // Chess960 castling is king takes rook; standard castling stays e1g1 (UCI input too).
    for m in [
        "e1h1", "e8h8", "b1a1", "b8e8", "f1g1", "f8b8", "e1g1", "e8g8", "e7e8q",
    ] {
        assert!(moves.iter().any(|x| x == m), "{m} missing");
    }
}

#[test]
fn real_samples_match_python_chess() {
    let Some(dir) = shared_data("pgn") else {
        return; // the generated file above covers the same paths
    };
    for name in [
        "lichess_db_10k.pgn",
        "lichess_db_1000k.pgn",
        "twic1599_100k.pgn",
    ] {
        let checked = ingest_and_compare(&dir.join(name));
        let r = &checked.report;
        assert!(r["expected_rows"].as_u64().unwrap() > 100, "{name}: {r}");
        assert_eq!(r["skipped"], json!([]), "{name}: {r}");
    }
}
