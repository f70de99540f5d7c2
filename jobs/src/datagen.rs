//! `datagen`: self-play games (engine::datagen) on all the job's threads, written as one
//! binpack with sfbinpack's writer to `raw/selfplay/<dataset>-<sha256[:12]>.binpack`, then
//! ingested like any binpack into `positions/source=selfplay/dataset=<name>/`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use lakefish_engine::datagen::{
    Adjudication, DatagenConfig, Sample, ScoreRun, UciSelfplay, selfplay_game, selfplay_game_with,
};
use lakefish_engine::matchplay::PlayerEngine;
use lakefish_schemas::{DatagenSpec, IngestSpec, JobId, Progress};
use sfbinpack::TrainingDataEntry;
use sfbinpack::chess::coords::Square;
use sfbinpack::chess::r#move::Move as BinMove;
use sfbinpack::chess::piece::Piece;
use sfbinpack::chess::piecetype::PieceType;
use sfbinpack::chess::position::Position;
use shakmaty::fen::Fen;
use shakmaty::{EnPassantMode, Move, Role};

use crate::{JobContext, JobError};

/// A sample as a binpack entry (castling as king-takes-rook, like Stockfish).
fn entry(s: &Sample) -> TrainingDataEntry {
    binpack_entry(&s.pos, s.mv, s.score, s.ply, s.result)
}

/// A position, its move and labels as a binpack entry (castling as king-takes-rook, like
/// Stockfish); scores and results from the side to move's point of view.
pub(crate) fn binpack_entry(
    pos: &shakmaty::Chess,
    mv: Move,
    score: i16,
    ply: u16,
    result: i8,
) -> TrainingDataEntry {
    let fen = Fen::from_position(pos, EnPassantMode::Legal).to_string();
    let pos = Position::from_fen(&fen).expect("shakmaty writes valid FEN");
    let sq = |q: shakmaty::Square| Square::new(q as u32);
    let mv = match mv {
        Move::Normal {
            from,
            to,
            promotion: Some(role),
            ..
        } => {
            let t = match role {
                Role::Knight => PieceType::Knight,
                Role::Bishop => PieceType::Bishop,
                Role::Rook => PieceType::Rook,
                _ => PieceType::Queen,
            };
            BinMove::promotion(sq(from), sq(to), Piece::new(t, pos.side_to_move()))
        }
        Move::Normal { from, to, .. } => BinMove::normal(sq(from), sq(to)),
        Move::EnPassant { from, to } => BinMove::en_passant(sq(from), sq(to)),
        Move::Castle { king, rook } => BinMove::castle(sq(king), sq(rook)),
        Move::Put { .. } => unreachable!("no drops in standard chess"),
    };
    TrainingDataEntry {
        pos,
        mv,
        score,
        ply,
        result: i16::from(result),
    }
}

impl crate::Job for DatagenSpec {
    fn run(
        &self,
        _: lakefish_schemas::JobKind,
        ctx: &JobContext,
        id: &JobId,
    ) -> Result<serde_json::Value, JobError> {
        datagen(ctx, id, self)
    }
}

pub fn datagen(
    ctx: &JobContext,
    job_id: &JobId,
    spec: &DatagenSpec,
) -> Result<serde_json::Value, JobError> {
    spec.validate().map_err(JobError::Payload)?;
    // Who plays: lakefish's engine with a net, or a registered engine (`engine`).
    let (net, player) = match &spec.engine {
        Some(side) => {
            let side = ctx.block_on(crate::engines::resolve_side(&ctx.lake, side))?;
            let player = ctx.block_on(crate::engines::player(&ctx.lake, &side))?;
            (side.name, player.engine)
        }
        None => {
            let net = ctx.block_on(crate::nets::resolve_evaluation(&ctx.lake, &spec.net))?;
            let evaluator = ctx.block_on(crate::nets::load_evaluator(&ctx.lake, &net))?;
            (net, PlayerEngine::Builtin(evaluator))
        }
    };
    // A name another job's data holds is refused before any game is played (datasets are
    // immutable); the same job delivered again goes on and finds its own commit.
    if let Some(m) = ctx.block_on(lakefish_lake::datasets::read_manifest(
        &ctx.lake,
        lakefish_schemas::Source::Selfplay,
        &spec.dataset,
    ))? && &m.job_id != job_id
    {
        let inputs: Vec<&str> = m.inputs.iter().map(|i| i.input.as_str()).collect();
        return Err(JobError::DatasetExists {
            dataset: spec.dataset.to_string(),
            existing: inputs.join(", "),
        });
    }
    let config = DatagenConfig {
        random_plies: spec.random_plies,
        depth: spec.depth,
        nodes: spec.nodes.or(if spec.depth.is_none() {
            Some(5000)
        } else {
            None
        }),
        max_plies: spec.max_plies,
        draw_cp: spec.draw_cp,
        hash_mb: 8,
        adjudication: Adjudication {
            win: spec.win_cp.map(|cp| ScoreRun {
                cp,
                plies: spec.win_plies,
            }),
            draw: spec.draw_after_ply.map(|after| {
                let run = ScoreRun {
                    cp: spec.draw_window_cp,
                    plies: spec.draw_window_plies,
                };
                (after, run)
            }),
            opening_max_cp: spec.opening_max_cp,
        },
    };
    let games = spec.games as usize;
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Vec<Sample>>>> = Mutex::new(vec![None; games]);
    // Games an engine failed (crash, stall, illegal move, no score): left out, counted.
    let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let progress = Arc::clone(&ctx.progress);
    std::thread::scope(|s| {
        for _ in 0..ctx.threads.max(1).min(games) {
            s.spawn(|| {
                let mut uci = match &player {
                    PlayerEngine::Uci(cmd) => Some(UciSelfplay::new(cmd.clone())),
                    PlayerEngine::Builtin(_) => None,
                };
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= games || ctx.check_cancelled().is_err() {
                        break;
                    }
                    let seed = spec.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ i as u64;
                    let samples = match (&player, uci.as_mut()) {
                        (PlayerEngine::Builtin(evaluator), _) => {
                            Some(selfplay_game(evaluator, &config, seed))
                        }
                        (_, Some(engine)) => match selfplay_game_with(engine, &config, seed) {
                            Ok(samples) => Some(samples),
                            Err(why) => {
                                failures
                                    .lock()
                                    .expect("failures")
                                    .push(format!("game {i}: {why}"));
                                None
                            }
                        },
                        _ => unreachable!("a UCI player has its engine"),
                    };
                    results.lock().expect("results")[i] = samples;
                    let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                    progress.report(&Progress {
                        stage: format!("self-play with {}", net),
                        done: n as u64,
                        total: Some(games as u64),
                        unit: "games".into(),
                        rows: 0,
                    });
                }
            });
        }
    });
    ctx.check_cancelled()?;
    let failures = failures.into_inner().expect("failures");
    if failures.len() * 2 > games {
        return Err(JobError::Failed(format!(
            "{net} failed {} of {games} games, first {}",
            failures.len(),
            failures[0]
        )));
    }
    let mut writer = sfbinpack::CompressedTrainingDataEntryWriter::new_in_memory()
        .map_err(|e| JobError::Internal(format!("binpack writer: {e}")))?;
    let (mut positions, mut results_count) = (0u64, [0u64; 3]);
    for game in results.into_inner().expect("results").into_iter().flatten() {
        if let Some(first) = game.first() {
            results_count[(first.result as i32 + 1) as usize] += 1;
        }
        for s in &game {
            writer
                .write_entry(&entry(s))
                .map_err(|e| JobError::Internal(format!("binpack write: {e}")))?;
            positions += 1;
        }
    }
    let bytes = writer
        .into_bytes()
        .map_err(|e| JobError::Internal(format!("binpack writer: {e}")))?;
    let sha = crate::nets::sha256_hex(&bytes);
    let key = format!("raw/selfplay/{}-{}.binpack", spec.dataset, &sha[..12]);
    let size = bytes.len();
    ctx.block_on(ctx.lake.put(&key, bytes))?;
    let ingest = IngestSpec {
        max_game_bytes: None,
        inputs: vec![format!("{}{key}", lakefish_lake::input::LAKE_PREFIX)],
        dataset: spec.dataset.clone(),
        rows_per_part: lakefish_schemas::job::default_rows_per_part(),
    };
    let summary = lakefish_ingest::ingest_binpack::ingest_selfplay(ctx, job_id, &ingest)?;
    Ok(serde_json::json!({
        "net": net,
        "games": games,
        "positions": positions,
        "first_mover_results": {"losses": results_count[0], "draws": results_count[1], "wins": results_count[2]},
        "failed_games": failures.len(),
        "first_failure": failures.first(),
        "binpack": key,
        "binpack_bytes": size,
        "ingest": summary,
    }))
}
