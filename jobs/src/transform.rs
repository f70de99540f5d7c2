//! `transform`: a new dataset from a committed one, row by row (`lakefish transform ...`).
//!
//! The output is written as an ingest writes (`lakefish_ingest::dataset_writer`: a claim on
//! the new name, parts in the input's order, the manifest last), with `derived_from` naming
//! the transform and the commit it read. The same job delivered again finds its own commit;
//! other settings under the same output name are refused.

use crate::{JobContext, JobError};
use lakefish_engine::matchplay::PlayerEngine;
use lakefish_engine::qleaf::qsearch_leaf;
use lakefish_engine::scores::{centipawns_to_internal, mate_to_internal, material};
use lakefish_engine::search::Score;
use lakefish_engine::uci_client::{UciCommand, UciProcess, position_command};
use lakefish_ingest::dataset_writer::{
    DatasetTarget, IngestSummary, InputIdentity, commit, write_once, write_parts,
};
use lakefish_lake::datasets::read_manifest;
use lakefish_lake::parts::{PositionColumns, PositionRow};
use lakefish_lake::records::now;
use lakefish_schemas::positions::{SCHEMA_VERSION, SCORE_UNIT, dataset_prefix};
use lakefish_schemas::transform::{Derivation, LeafScore, Transform, TransformSpec};
use lakefish_schemas::{DatasetManifest, InputReport, JobId, Progress};
use rayon::prelude::*;
use shakmaty::fen::Fen;
use shakmaty::{Chess, EnPassantMode, Position};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

impl crate::Job for TransformSpec {
    fn run(
        &self,
        _: lakefish_schemas::JobKind,
        ctx: &JobContext,
        id: &JobId,
    ) -> Result<serde_json::Value, JobError> {
        Ok(serde_json::to_value(transform(ctx, id, self)?)?)
    }
}

/// How a row is changed.
enum RowChange {
    Leaf { score: LeafScore, max_nodes: u64 },
    Rescore { command: UciCommand, go: String },
}

pub fn transform(
    ctx: &JobContext,
    job_id: &JobId,
    spec: &TransformSpec,
) -> Result<IngestSummary, JobError> {
    spec.validate().map_err(JobError::Payload)?;
    let Some(data) = ctx.block_on(read_manifest(&ctx.lake, spec.source, &spec.dataset))? else {
        return Err(ctx.block_on(lakefish_lake::datasets::no_such_dataset(
            &ctx.lake,
            spec.source,
            &spec.dataset,
        )));
    };
    let change = match &spec.transform {
        Transform::QsearchLeaf { score, max_nodes } => RowChange::Leaf {
            score: *score,
            max_nodes: *max_nodes,
        },
        Transform::Rescore {
            engine,
            depth,
            nodes,
        } => {
            let side = ctx.block_on(crate::engines::resolve_side(&ctx.lake, engine))?;
            let player = ctx.block_on(crate::engines::player(&ctx.lake, &side))?;
            let PlayerEngine::Uci(command) = player.engine else {
                return Err(JobError::Payload(format!(
                    "transform.engine: {engine} is lakefish's own engine; rescore with a \
                     registered UCI engine (`lakefish engines add`)"
                )));
            };
            let go = match (depth, nodes) {
                (Some(d), _) => format!("go depth {d}"),
                (None, Some(n)) => format!("go nodes {n}"),
                (None, None) => unreachable!("validated"),
            };
            RowChange::Rescore { command, go }
        }
    };
    let target = DatasetTarget {
        source: spec.source,
        dataset: &spec.output,
        prefix: dataset_prefix(spec.source, &spec.output),
        games_prefix: None,
        claim_lost: AtomicBool::new(false),
        claim_token: JobId::new().to_string(),
    };
    // The input as the committed output records it: the dataset read, with the settings,
    // at the commit read; the same job again finds its output, other settings are refused.
    // A rescore names the engine as resolved (program, arguments, options in order), so
    // a re-registered engine is another input, not the same one.
    let engine = match &change {
        RowChange::Rescore { command, .. } => Some(engine_label(command)),
        RowChange::Leaf { .. } => None,
    };
    let input = format!(
        "transform {} of {}/{}{}",
        serde_json::to_string(&spec.transform)?,
        spec.source,
        spec.dataset,
        engine
            .as_deref()
            .map_or(String::new(), |e| format!(" by {e}"))
    );
    let identity = [InputIdentity {
        name: &input,
        version: data.job_id.to_string(),
    }];
    write_once(
        ctx,
        job_id,
        &target,
        &identity,
        |m| {
            let mut summary = IngestSummary::from_manifest(m, None, true);
            summary.changed = m.derived_from.as_ref().map(|d| d.changed);
            summary
        },
        || write_output(ctx, job_id, spec, &data, &change, &target, (&input, engine)),
    )
}

/// The resolved engine command as text: program, arguments, then `name=value` options.
fn engine_label(c: &UciCommand) -> String {
    let mut parts = vec![c.program.clone()];
    parts.extend(c.args.iter().cloned());
    parts.extend(c.options.iter().map(|(k, v)| format!("{k}={v}")));
    parts.join(" ")
}

fn write_output(
    ctx: &JobContext,
    job_id: &JobId,
    spec: &TransformSpec,
    data: &DatasetManifest,
    change: &RowChange,
    target: &DatasetTarget,
    (input, engine): (&str, Option<String>),
) -> Result<IngestSummary, JobError> {
    let data_prefix = dataset_prefix(spec.source, &spec.dataset);
    let done = AtomicU64::new(0);
    let changed = AtomicU64::new(0);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(ctx.threads)
        .thread_name(|i| format!("transform-{i}"))
        .build()
        .map_err(|e| JobError::Internal(e.to_string()))?;
    let out = write_parts(ctx, target, spec.rows_per_part, |builder, written| {
        for part in &data.parts {
            if written.failed() {
                break;
            }
            ctx.check_cancelled()?;
            let key = format!("{data_prefix}/{}", part.name);
            let rows = ctx.block_on(lakefish_lake::datasets::read_part_rows(
                &ctx.lake,
                spec.source,
                &spec.dataset,
                part,
            ))?;
            let report = |n: u64| {
                let d = done.fetch_add(n, Ordering::Relaxed) + n;
                ctx.progress.report(&Progress {
                    stage: format!(
                        "{} {} → {}",
                        spec.transform.name(),
                        spec.dataset,
                        spec.output
                    ),
                    done: d,
                    total: Some(data.rows),
                    unit: "rows".into(),
                    rows: d,
                });
            };
            let new_rows: Vec<PositionRow> = match change {
                RowChange::Leaf { score, max_nodes } => pool.install(|| {
                    rows.par_chunks(1024)
                        .enumerate()
                        .map(|(b, block)| {
                            let out =
                                block
                                    .iter()
                                    .enumerate()
                                    .map(|(i, r)| {
                                        let i = b * 1024 + i;
                                        let (row, moved) = leaf_row(r, *score, *max_nodes)
                                            .map_err(|why| JobError::Corrupt {
                                                what: "positions part",
                                                key: key.clone(),
                                                reason: format!("row {i}: {why}"),
                                            })?;
                                        changed.fetch_add(moved as u64, Ordering::Relaxed);
                                        Ok(row)
                                    })
                                    .collect::<Result<Vec<_>, JobError>>();
                            report(block.len() as u64);
                            out
                        })
                        .collect::<Result<Vec<_>, JobError>>()
                        .map(|v| v.into_iter().flatten().collect())
                })?,
                RowChange::Rescore { command, go } => {
                    let (rows, n) = rescore(ctx, &key, rows, command, go, &report)?;
                    changed.fetch_add(n, Ordering::Relaxed);
                    rows
                }
            };
            let mut columns = PositionColumns::default();
            for r in &new_rows {
                columns.push_row(r);
            }
            builder.push("", columns, Vec::new())?;
        }
        Ok(())
    })?;
    let manifest = DatasetManifest {
        version: lakefish_schemas::dataset::MANIFEST_VERSION,
        source: spec.source,
        dataset: spec.output.clone(),
        job_id: job_id.clone(),
        schema_version: SCHEMA_VERSION,
        score_unit: SCORE_UNIT.into(),
        rows: out.rows,
        bytes: out.parts.iter().map(|p| p.bytes).sum(),
        parts: out.parts,
        games: Vec::new(),
        inputs: vec![InputReport {
            version: Some(data.job_id.to_string()),
            rows: data.rows,
            chunks: data.parts.len() as u64,
            ..InputReport::new(input, data.bytes)
        }],
        derived_from: Some(Box::new(Derivation {
            transform: spec.transform.clone(),
            source: spec.source,
            dataset: spec.dataset.clone(),
            dataset_job_id: data.job_id.clone(),
            engine,
            changed: changed.load(Ordering::Relaxed),
        })),
        created: now(),
    };
    commit(ctx, target, &manifest)?;
    let mut summary = IngestSummary::from_manifest(&manifest, Some(out.null_scores), false);
    summary.changed = Some(changed.load(Ordering::Relaxed));
    Ok(summary)
}

fn parse(fen: &str) -> Result<Chess, String> {
    lakefish_engine::rules::parse_any_position(fen).map_err(|e| e.to_string())
}

/// A row moved to its quiescence leaf; `true` when the leaf is another position.
fn leaf_row(
    r: &PositionRow,
    score: LeafScore,
    max_nodes: u64,
) -> Result<(PositionRow, bool), String> {
    // Unscored rows train nothing; a search past its budget leaves the row as it was.
    if r.score.is_none() {
        return Ok((r.clone(), false));
    }
    let pos = parse(&r.fen)?;
    let Ok(leaf) = qsearch_leaf(&pos, max_nodes) else {
        return Ok((r.clone(), false));
    };
    let flip = leaf.plies % 2 == 1;
    let sign = |v: i16| if flip { v.saturating_neg() } else { v };
    let score = match score {
        LeafScore::Keep => r.score.map(sign),
        LeafScore::Classical => Some(
            lakefish_engine::eval::classical(leaf.pos.board(), leaf.pos.turn()).clamp(
                -lakefish_engine::scores::MAX_EVAL,
                lakefish_engine::scores::MAX_EVAL,
            ) as i16,
        ),
    };
    if leaf.plies == 0 {
        return Ok((PositionRow { score, ..r.clone() }, score != r.score));
    }
    Ok((
        PositionRow {
            fen: Fen::from_position(&leaf.pos, EnPassantMode::Legal).to_string(),
            score,
            mv: "0000".into(),
            result: r.result.map(|x| if flip { -x } else { x }),
            ply: r.ply.saturating_add(leaf.plies as u16),
            game_id: r.game_id,
        },
        true,
    ))
}

/// How long an engine may take to start and to answer `isready`.
const HANDSHAKE: Duration = Duration::from_secs(10);
/// How long one position's search may take before the engine counts as stalled.
const STALL: Duration = Duration::from_secs(120);

/// `rows` scored again by the engine, one process per thread, positions dealt in blocks.
/// Each position is searched fresh (`ucinewgame` before it), so the scores do not depend on
/// which process searched which position. An engine that fails is restarted once for the
/// position; failing again, the job fails naming the position and what the engine did.
fn rescore(
    ctx: &JobContext,
    key: &str,
    rows: Vec<PositionRow>,
    command: &UciCommand,
    go: &str,
    report: &(dyn Fn(u64) + Sync),
) -> Result<(Vec<PositionRow>, u64), JobError> {
    const BLOCK: usize = 16;
    let next = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let scores: Vec<std::sync::Mutex<Option<i16>>> =
        rows.iter().map(|_| std::sync::Mutex::new(None)).collect();
    let threads = ctx.threads.max(1).min(rows.len().div_ceil(BLOCK).max(1));
    let outcome: Result<(), JobError> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| -> Result<(), JobError> {
                    let mut engine: Option<UciProcess> = None;
                    let mut run = || -> Result<(), JobError> {
                        loop {
                            if stop.load(Ordering::Relaxed) {
                                return Ok(());
                            }
                            let first = next.fetch_add(BLOCK as u64, Ordering::Relaxed) as usize;
                            if first >= rows.len() {
                                return Ok(());
                            }
                            ctx.check_cancelled()?;
                            let last = (first + BLOCK).min(rows.len());
                            for i in first..last {
                                let pos = parse(&rows[i].fen).map_err(|why| JobError::Corrupt {
                                    what: "positions part",
                                    key: key.to_string(),
                                    reason: format!("row {i}: {why}"),
                                })?;
                                let score =
                                    score_with_retry(&mut engine, command, &rows[i].fen, go)
                                        .map(|s| uci_score(&pos, s))
                                        .map_err(|why| {
                                            JobError::Failed(format!(
                                                "rescoring {:?} with {}: {why}",
                                                rows[i].fen, command.program
                                            ))
                                        })?;
                                *scores[i].lock().unwrap() = Some(score);
                            }
                            report((last - first) as u64);
                        }
                    };
                    // One engine failing stops the others: the job fails as a whole.
                    let r = run();
                    if r.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        workers.into_iter().try_for_each(|w| {
            w.join()
                .unwrap_or_else(|_| Err(JobError::Panic("rescore thread".into())))
        })
    });
    outcome?;
    let mut changed = 0;
    let rows = rows
        .into_iter()
        .zip(scores)
        .map(|(r, s)| {
            let score = s.into_inner().unwrap();
            changed += (score != r.score) as u64;
            PositionRow { score, ..r }
        })
        .collect();
    Ok((rows, changed))
}

/// One position's score from the engine, starting it (again) when needed.
fn score_with_retry(
    engine: &mut Option<UciProcess>,
    command: &UciCommand,
    fen: &str,
    go: &str,
) -> Result<Score, String> {
    let mut last = String::new();
    for _ in 0..2 {
        if engine.is_none() {
            match UciProcess::start(command, HANDSHAKE) {
                Ok(p) => *engine = Some(p),
                Err(e) => {
                    last = e.to_string();
                    continue;
                }
            }
        }
        let p = engine.as_mut().expect("started");
        let reply = p
            .new_game(HANDSHAKE)
            .and_then(|_| p.go(&position_command(fen, &[]), go, STALL));
        match reply {
            Ok(r) => match r.score {
                Some(s) => return Ok(s),
                None => {
                    return Err(format!(
                        "no score in its info lines (bestmove {})",
                        r.bestmove
                    ));
                }
            },
            Err(e) => {
                last = e.to_string();
                *engine = None;
            }
        }
    }
    Err(last)
}

/// A UCI score in internal units, as datagen converts its engines' scores.
fn uci_score(pos: &Chess, s: Score) -> i16 {
    match s {
        Score::Cp(cp) => centipawns_to_internal(cp as f64, material(pos.board())),
        Score::Mate(m) => mate_to_internal(m),
    }
}
