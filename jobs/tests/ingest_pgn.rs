//! PGN ingest: rows and evals on the right rows (against the generator's own record of the
//! games, and against the real Lichess sample when present), the games table, month
//! partitions, and bad input: truncated zstd, binary garbage, an illegal move, empty files.

mod common;

use common::{LakeFixture, shared};
use lakefish_ingest::ingest_binpack::IngestSummary;
use lakefish_ingest::ingest_pgn::ingest_pgn;
use lakefish_ingest::pgn::synthetic_pgn;
use lakefish_jobs::{JobContext, JobError, Lake};
use lakefish_lake::datasets::read_manifest;
use lakefish_lake::faults::FaultyStore;
use lakefish_lake::parts::read_positions;
use lakefish_schemas::{DatasetManifest, DatasetName, IngestSpec, JobId, Source};

fn ingest(fx: &LakeFixture, inputs: &[String], dataset: &str) -> Result<IngestSummary, JobError> {
    let spec = IngestSpec {
        max_game_bytes: None,
        inputs: inputs.to_vec(),
        dataset: DatasetName::new(dataset).unwrap(),
        rows_per_part: 1_000,
    };
    ingest_pgn(&fx.ctx().with_threads(2), &JobId::new(), &spec)
}

fn manifest(fx: &LakeFixture, dataset: &str) -> DatasetManifest {
    fx.rt
        .block_on(read_manifest(
            &fx.lake,
            Source::Lichess,
            &DatasetName::new(dataset).unwrap(),
        ))
        .unwrap()
        .expect("committed")
}

/// All rows of a dataset, in part order.
fn rows(fx: &LakeFixture, dataset: &str) -> Vec<lakefish_lake::parts::PositionRow> {
    let m = manifest(fx, dataset);
    let prefix = format!("positions/source=lichess/dataset={dataset}");
    m.parts
        .iter()
        .flat_map(|p| {
            let key = format!("{prefix}/{}", p.name);
            let bytes = std::fs::read(fx.path(&key)).unwrap();
            read_positions(bytes.into(), &key).unwrap()
        })
        .collect()
}

#[test]
fn synthetic_games_land_row_for_row_with_evals_on_the_right_rows() {
    let fx = LakeFixture::new();
    let (text, truth) = synthetic_pgn(60, 11, true);
    let input = fx.file("synthetic.pgn", text.as_bytes());
    let summary = ingest(&fx, &[input], "synthetic").unwrap();
    let want: Vec<_> = truth
        .iter()
        .filter(|g| g.ingestible)
        .flat_map(|g| g.rows.iter())
        .collect();
    let got = rows(&fx, "synthetic");
    assert_eq!(got.len(), want.len());
    assert_eq!(summary.rows as usize, want.len());
    let scored = want.iter().filter(|w| w.2.is_some()).count();
    assert!(scored > 200, "the generator wrote evals ({scored})");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!((&g.fen, &g.mv, g.score), (&w.0, &w.1, w.2), "row {i}");
    }
    // Rows of one game share an id and count plies up from the game's start.
    assert!(
        got.windows(2)
            .all(|p| p[0].game_id != p[1].game_id || p[1].ply == p[0].ply + 1)
    );

    let m = manifest(&fx, "synthetic");
    assert!(m.parts.iter().all(|p| p.name.starts_with("month=2025-05/")));
    let report = &m.inputs[0];
    assert_eq!(report.chunks, 60, "games read");
    assert_eq!(report.skipped_variants.get("Crazyhouse"), Some(&1));
    assert_eq!(report.skipped_games.len(), 1, "{:?}", report.skipped_games);
    let bad = &report.skipped_games[0];
    assert_eq!(bad.game, 3, "the illegal move is in game 3");
    assert!(bad.reason.contains("Kxa1"), "{}", bad.reason);
    assert!(
        summary.skipped.iter().any(|s| s.contains("game 3")),
        "{:?}",
        summary.skipped
    );
    // The games table: every ingested game, zero-move games included, no variant game.
    let games: u64 = m.games.iter().map(|p| p.rows).sum();
    assert_eq!(games, truth.iter().filter(|g| g.ingestible).count() as u64);
}

#[test]
fn zstd_input_gives_the_same_rows_and_a_truncated_one_keeps_whole_games() {
    let fx = LakeFixture::new();
    let (text, truth) = synthetic_pgn(400, 5, false);
    let plain = fx.file("g.pgn", text.as_bytes());
    let packed = zstd::encode_all(text.as_bytes(), 3).unwrap();
    let zst = fx.file("g.pgn.zst", &packed);
    ingest(&fx, &[plain], "plain").unwrap();
    ingest(&fx, &[zst], "packed").unwrap();
    let plain_rows = rows(&fx, "plain");
    assert_eq!(plain_rows, rows(&fx, "packed"));
    let total: usize = truth.iter().map(|g| g.rows.len()).sum();
    assert_eq!(plain_rows.len(), total);

    // Cut the compressed file in half: the games before the cut are kept, whole.
    let cut = fx.file("cut.pgn.zst", &packed[..packed.len() / 2]);
    let summary = ingest(&fx, &[cut], "cut").unwrap();
    assert!(
        summary
            .skipped
            .iter()
            .any(|s| s.contains("truncated or corrupt")),
        "{:?}",
        summary.skipped
    );
    let kept = rows(&fx, "cut");
    assert!(
        kept.len() > total / 4 && kept.len() < total,
        "{} of {total}",
        kept.len()
    );
    assert_eq!(
        kept[..],
        plain_rows[..kept.len()],
        "a prefix of the whole file's rows"
    );
    // The last kept game is complete: it has as many rows as the generator played.
    let last_id = kept.last().unwrap().game_id;
    let last_rows = kept.iter().filter(|r| r.game_id == last_id).count();
    let full_rows = plain_rows.iter().filter(|r| r.game_id == last_id).count();
    assert_eq!(last_rows, full_rows);
}

/// A lake that stops answering part-way through an input (after its own retries) fails the
/// job, retryably, and commits nothing: only bytes that do not decode are skipped.
#[test]
fn a_lake_read_failure_fails_the_job_and_commits_nothing() {
    let (sample, _) = synthetic_pgn(100, 3, false);
    let games = 100 * (2_500_000 / sample.len() + 1);
    let (text, _) = synthetic_pgn(games, 3, false);
    assert!(text.len() > 2_000_000, "{}", text.len());
    let faulty = FaultyStore::new();
    let lake = Lake::from_store(faulty.clone(), "faulty");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(lake.put("raw/big.pgn", text.clone().into_bytes()))
        .unwrap();
    *faulty.fail_reads_past.lock().unwrap() = Some(text.len() as u64 * 2 / 3);
    let ctx = JobContext::new(lake.clone(), rt.handle().clone()).with_threads(2);
    let spec = IngestSpec {
        max_game_bytes: None,
        inputs: vec!["lake:raw/big.pgn".into()],
        dataset: DatasetName::new("flaky").unwrap(),
        rows_per_part: 1_000,
    };
    let job = JobId::new();
    let err = ingest_pgn(&ctx, &job, &spec).unwrap_err();
    assert!(
        err.is_transient() && err.to_string().contains("connection reset"),
        "{err}"
    );
    let name = DatasetName::new("flaky").unwrap();
    let committed = rt.block_on(read_manifest(&lake, Source::Lichess, &name));
    assert!(committed.unwrap().is_none(), "nothing committed");

    // Once the lake answers again, the retry (the same job) ingests every game.
    *faulty.fail_reads_past.lock().unwrap() = None;
    let s = ingest_pgn(&ctx, &job, &spec).unwrap();
    assert!(s.skipped.is_empty() && s.rows > 0, "{s:?}");
}

/// A game that runs on past `max_game_bytes` is reported and skipped, and the games after
/// it keep their numbers; a file with no game boundary at all is skipped in bounded memory.
#[test]
fn games_longer_than_the_limit_are_skipped_and_reported() {
    let fx = LakeFixture::new();
    let game = |n: u32, comment: &str| {
        format!("[Event \"g{n}\"]\n[Result \"1-0\"]\n\n1. e4 {{ {comment} }} e5 2. Nf3 Nc6 1-0\n\n")
    };
    let huge = "x".repeat(3 << 20);
    let text = [game(1, ""), game(2, &huge), game(3, ""), game(4, "[bad")].concat();
    let input = fx.file("long.pgn", text.as_bytes());
    let spec = IngestSpec {
        max_game_bytes: Some(1 << 20),
        inputs: vec![input],
        dataset: DatasetName::new("long").unwrap(),
        rows_per_part: 1_000,
    };
    let s = ingest_pgn(&fx.ctx().with_threads(2), &JobId::new(), &spec).unwrap();
    assert_eq!(s.rows, 12, "games 1, 3 and 4 (4 plies each): {s:?}");
    let m = manifest(&fx, "long");
    let skipped = &m.inputs[0].skipped;
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    let second = game(1, "").len() as u64;
    assert_eq!(skipped[0].offset, second);
    assert_eq!(skipped[0].len, game(2, &huge).len() as u64);
    assert!(
        skipped[0].reason.contains("game 2 ")
            && skipped[0].reason.contains("more than 1048576 bytes")
            && skipped[0].reason.contains("max_game_bytes"),
        "{skipped:?}"
    );
    assert_eq!(m.inputs[0].chunks, 4, "every game counted");

    // No game boundary anywhere: nothing to ingest, said clearly, nothing stored.
    let before = fx.snapshot();
    let endless = fx.file("endless.pgn", "1. e4 e5 ".repeat(600_000).as_bytes());
    let spec = IngestSpec {
        inputs: vec![endless],
        dataset: DatasetName::new("endless").unwrap(),
        ..spec
    };
    let err = ingest_pgn(&fx.ctx(), &JobId::new(), &spec)
        .unwrap_err()
        .to_string();
    assert!(err.contains("more than 1048576 bytes"), "{err}");
    assert_eq!(fx.snapshot(), before);
}

#[test]
fn garbage_empty_and_mislabelled_inputs_fail_clearly_and_change_nothing() {
    let fx = LakeFixture::new();
    let (text, _) = synthetic_pgn(20, 1, false);
    let good = fx.file("good.pgn", text.as_bytes());
    ingest(&fx, std::slice::from_ref(&good), "good").unwrap();
    let before = fx.snapshot();

    let mut noise = vec![0u8; 200_000];
    let mut x = 0x1234_5678_u64;
    for b in noise.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    let garbage = fx.file("garbage.pgn", &noise);
    let err = ingest(&fx, &[garbage], "garbage").unwrap_err().to_string();
    assert!(err.contains("nothing could be ingested"), "{err}");
    assert!(err.contains("garbage.pgn"), "{err}");

    let empty = fx.file("empty.pgn", b"");
    let err = ingest(&fx, &[empty], "empty").unwrap_err().to_string();
    assert!(err.contains("empty file"), "{err}");

    let fake = fx.file("fake.pgn.zst", text.as_bytes());
    let err = ingest(&fx, &[fake], "fake").unwrap_err().to_string();
    assert!(err.contains("not a zstd stream"), "{err}");

    let err = ingest(&fx, &["/no/such/file.pgn".into()], "missing")
        .unwrap_err()
        .to_string();
    assert!(err.contains("/no/such/file.pgn"), "{err}");
    assert_eq!(
        fx.snapshot(),
        before,
        "failed ingests leave the lake as it was"
    );

    // Twice the same job: nothing changes. (A local file written again is another version,
    // as for make or rsync's quick check: its inode, size and mtime identify it.)
    let again = ingest(&fx, &[good], "good").unwrap();
    assert!(again.already_present);
    assert_eq!(fx.snapshot(), before);
}

#[test]
fn real_lichess_sample_row_count_equals_its_plies() {
    let fx = LakeFixture::new();
    let Some(path) = shared("pgn/lichess_db_1000k.pgn") else {
        // Without ../shared: generated games, counted the same way by hand.
        let (text, truth) = synthetic_pgn(200, 21, false);
        let input = fx.file("generated.pgn", text.as_bytes());
        let summary = ingest(&fx, &[input], "real").unwrap();
        let want: usize = truth.iter().map(|g| g.rows.len()).sum();
        assert_eq!(summary.rows, count_plies(&text));
        assert_eq!(summary.rows as usize, want);
        let m = manifest(&fx, "real");
        assert_eq!(m.inputs[0].chunks as usize, truth.len());
        assert!(m.inputs[0].skipped_games.is_empty());
        return;
    };
    let summary = ingest(&fx, &[path.to_str().unwrap().to_string()], "real").unwrap();
    // 28,538 plies in 438 games (SOURCES.md); counted again here without pgn-reader: every
    // main-line SAN token outside comments, variations and move numbers.
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(summary.rows, count_plies(&text));
    assert_eq!(summary.rows, 28_538);
    let m = manifest(&fx, "real");
    assert_eq!(m.inputs[0].chunks, 438);
    assert!(m.inputs[0].skipped_games.is_empty());
}

/// Counts main-line moves by tokenizing movetext by hand.
fn count_plies(text: &str) -> u64 {
    let mut n = 0;
    for line in text.lines() {
        let line = line.trim_start_matches('\u{feff}');
        if line.starts_with('[') {
            continue;
        }
        let mut depth_comment = false;
        let mut depth_var = 0;
        let mut cleaned = String::new();
        for ch in line.chars() {
            match ch {
                '{' => depth_comment = true,
                '}' => depth_comment = false,
                '(' if !depth_comment => depth_var += 1,
                ')' if !depth_comment => depth_var -= 1,
                _ if !depth_comment && depth_var == 0 => cleaned.push(ch),
                _ => {}
            }
        }
        for tok in cleaned.split_whitespace() {
            let is_result = matches!(tok, "1-0" | "0-1" | "1/2-1/2" | "*");
            let tok = tok.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
            if !tok.is_empty() && !tok.starts_with('$') && !is_result {
                n += 1;
            }
        }
    }
    n
}
