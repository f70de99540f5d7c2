//! `mask`: one boolean per `positions` row, beside the data (`masks/<name>/...`).
//!
//! A mask part has the same file name as its positions part and exactly as many rows; the
//! manifest `_mask.json` is written last and names the dataset commit it was computed from.
//! Readers go through [`read_mask`], which refuses a missing mask or one of the wrong length
//! instead of silently misaligning rows.

use crate::{JobContext, JobError, Lake};
use arrow_array::{Array, BooleanArray, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use lakefish_lake::datasets::{index_dataset, read_manifest};

use lakefish_lake::records::now;
use lakefish_schemas::mask::{
    MASK_COLUMN, MASK_MANIFEST_FILE, META_MASK, META_PART_ROWS, MaskPart, mask_prefix,
};
use lakefish_schemas::positions::dataset_prefix;
use lakefish_schemas::{
    DatasetManifest, DatasetName, JobId, MaskDefinition, MaskManifest, MaskName, MaskRule,
    MaskSpec, PartInfo, Progress, Source,
};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use rayon::prelude::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub const MASK_MANIFEST_VERSION: u32 = 1;

#[derive(Debug, Clone, serde::Serialize)]
pub struct MaskSummary {
    pub mask: String,
    pub dataset: String,
    pub parts: usize,
    pub rows: u64,
    pub selected: u64,
    /// True when an identical mask was already committed: nothing was written.
    pub already_present: bool,
}

/// Material of one position: how many men (kings included), and nnue-pytorch's
/// `simple_eval` from the side to move's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Material {
    pub pieces: u8,
    pub simple_eval: i32,
}

/// nnue-pytorch's `simple_eval` values for P, N, B, R, Q.
const SIMPLE_VALUES: [i32; 5] = [208, 781, 825, 1276, 2538];

/// [`Material`] from a FEN's board and side-to-move fields (no full parse).
pub fn material_of_fen(fen: &str) -> Result<Material, String> {
    let mut fields = fen.split_whitespace();
    let board = fields.next().ok_or("empty FEN")?;
    let white_to_move = fields.next() != Some("b");
    let (mut pieces, mut balance) = (0u8, 0i32);
    for c in board.chars() {
        let value = match c.to_ascii_lowercase() {
            'p' => SIMPLE_VALUES[0],
            'n' => SIMPLE_VALUES[1],
            'b' => SIMPLE_VALUES[2],
            'r' => SIMPLE_VALUES[3],
            'q' => SIMPLE_VALUES[4],
            'k' => 0,
            _ => continue,
        };
        pieces = pieces.saturating_add(1);
        balance += if c.is_ascii_uppercase() {
            value
        } else {
            -value
        };
    }
    Ok(Material {
        pieces,
        simple_eval: if white_to_move { balance } else { -balance },
    })
}

fn material_of_board(board: &shakmaty::Board, turn: shakmaty::Color) -> Material {
    use shakmaty::Role;
    let roles = [
        Role::Pawn,
        Role::Knight,
        Role::Bishop,
        Role::Rook,
        Role::Queen,
    ];
    let mut balance = 0;
    for (role, value) in roles.into_iter().zip(SIMPLE_VALUES) {
        let bb = board.by_role(role);
        let us = (bb & board.by_color(turn)).count() as i32;
        let them = (bb & board.by_color(!turn)).count() as i32;
        balance += value * (us - them);
    }
    Material {
        pieces: board.occupied().count() as u8,
        simple_eval: balance,
    }
}

/// nnue-pytorch's `score_result_prob`: how likely the game's `result` (side to move: 1, 0,
/// −1) is under its win-rate model given `score` (internal units) at `ply`.
pub fn score_result_prob(score: i16, ply: u16, result: i8) -> f64 {
    let m = ply.min(240) as f64 / 64.0;
    let poly = |c: [f64; 4]| ((c[0] * m + c[1]) * m + c[2]) * m + c[3];
    let a = poly([-3.68389304, 30.07065921, -60.52878723, 149.53378557]);
    let b = 1.5 * poly([-2.0181857, 15.85685038, -29.83452023, 47.59078827]);
    let x = (100.0 * score as f64 / 208.0).clamp(-2000.0, 2000.0);
    let win = 1.0 / (1.0 + ((a - x) / b).exp());
    let loss = 1.0 / (1.0 + ((a + x) / b).exp());
    match result.signum() {
        1 => win,
        -1 => loss,
        _ => 1.0 - win - loss,
    }
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn fnv1a64(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A random rule's draw for row `row` of part `part`, in `[0, 1)`: the seeding rule that
/// [`MaskDefinition`] documents, so that another program can re-implement it.
pub fn row_draw(seed: u64, salt: u64, part: &str, row: u64) -> f64 {
    let u = splitmix64(seed ^ salt ^ fnv1a64(part) ^ row.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    (u >> 11) as f64 / (1u64 << 53) as f64
}

/// The target weight of `pieces` men: nnue-pytorch's cubic Hermite spline through the five
/// weights at 0, 8, 16, 24, 32 men, slopes by finite differences, never below 0.
pub fn piece_count_weight(weights: &[f64; 5], pieces: u8) -> f64 {
    let x = pieces as f64;
    if x <= 0.0 {
        return weights[0];
    }
    if x >= 32.0 {
        return weights[4];
    }
    let i = ((x / 8.0) as usize).min(3);
    let t = (x - i as f64 * 8.0) / 8.0;
    let slope = |k: usize| match k {
        0 => weights[1] - weights[0],
        4 => weights[4] - weights[3],
        k => (weights[k + 1] - weights[k - 1]) / 2.0,
    };
    let (t2, t3) = (t * t, t * t * t);
    let v = (2.0 * t3 - 3.0 * t2 + 1.0) * weights[i]
        + (t3 - 2.0 * t2 + t) * slope(i)
        + (-2.0 * t3 + 3.0 * t2) * weights[i + 1]
        + (t3 - t2) * slope(i + 1);
    v.max(0.0)
}

/// How likely a row with each piece count (0..=32) is kept by a piece-count rule, given the
/// histogram of the rows the other rules keep.
pub fn piece_count_accept(weights: &[f64; 5], max_skip: f64, histogram: &[u64; 33]) -> [f64; 33] {
    let w: Vec<f64> = (0..=32u8).map(|c| piece_count_weight(weights, c)).collect();
    let total_w: f64 = w.iter().sum();
    let n: u64 = histogram.iter().sum();
    let ratio = |c: usize| (n as f64 * w[c]) / (total_w * histogram[c] as f64);
    let min_ratio = (0..33)
        .filter(|&c| w[c] > 0.0 && histogram[c] > 0)
        .map(ratio)
        .fold(f64::INFINITY, f64::min);
    let mut accept = [0.0; 33];
    if !min_ratio.is_finite() || min_ratio <= 0.0 {
        return accept;
    }
    let alpha = (1.0 - max_skip) / min_ratio;
    for (c, a) in accept.iter_mut().enumerate() {
        if w[c] > 0.0 && histogram[c] > 0 {
            *a = (alpha * ratio(c)).clamp(0.0, 1.0);
        }
    }
    accept
}

/// One row as the rules see it.
pub struct RowView<'a> {
    pub score: Option<i16>,
    pub ply: u16,
    pub result: Option<i8>,
    /// The part's file name and the row's number in it (the random rules' draws), when the
    /// row is read from a dataset.
    pub place: Option<(&'a str, u64)>,
}

impl RowView<'_> {
    /// A row as the training loader sees it: no result, no place in a dataset.
    fn loaded(score: Option<i16>, ply: u16) -> Self {
        RowView {
            score,
            ply,
            result: None,
            place: None,
        }
    }
}

/// Decides one row by every rule except piece-count (which needs the dataset's histogram):
/// `Some(pieces)` when the row is kept, with its piece count for that last rule.
fn decide(
    def: &MaskDefinition,
    row: &RowView,
    material: impl FnOnce() -> Result<Material, String>,
    facts: impl FnOnce()
        -> Result<lakefish_engine::rules::MoveFacts, lakefish_engine::rules::RulesError>,
) -> Result<Option<u8>, String> {
    if def.rules == [MaskRule::All] {
        return Ok(Some(0));
    }
    let Some(score) = row.score else {
        return Ok(None);
    };
    if def.min_ply.is_some_and(|min| row.ply < min)
        || def
            .max_abs_score
            .is_some_and(|max| score.unsigned_abs() > max)
    {
        return Ok(None);
    }
    let draw = |rule: &MaskRule| -> Result<f64, String> {
        let (part, r) = row.place.ok_or_else(|| {
            "a random rule needs the row's place in its dataset (a mask, not a load filter)"
                .to_string()
        })?;
        Ok(row_draw(def.seed, rule.salt().unwrap_or(0), part, r))
    };
    let mut material = Some(material);
    let mut known: Option<Material> = None;
    let mut material = || -> Result<Material, String> {
        if let Some(f) = material.take() {
            known = Some(f()?);
        }
        Ok(known.expect("computed once"))
    };
    let mut facts = Some(facts);
    for rule in &def.rules {
        let keep = match rule {
            MaskRule::All | MaskRule::PieceCount { .. } => true,
            MaskRule::Quiet => {
                let f = facts.take().ok_or("quiet given twice")?;
                let f = f().map_err(|e| e.to_string())?;
                !f.in_check && !f.capture && !f.promotion
            }
            MaskRule::EarlySkip { plies } => row.ply > *plies,
            MaskRule::SimpleEvalSkip { below } => {
                material()?.simple_eval.unsigned_abs() >= *below as u32
            }
            MaskRule::RandomSkip { skip } => {
                let p_skip = *skip as f64 / (*skip as f64 + 1.0);
                draw(rule)? >= p_skip
            }
            MaskRule::Wld => match row.result {
                None => false,
                Some(result) => draw(rule)? < score_result_prob(score, row.ply, result),
            },
        };
        if !keep {
            return Ok(None);
        }
    }
    let pieces = match def
        .rules
        .iter()
        .any(|r| matches!(r, MaskRule::PieceCount { .. }))
    {
        true => material()?.pieces,
        false => 0,
    };
    Ok(Some(pieces))
}

/// Decides one row by a definition that applies row by row ([`MaskDefinition::applies_per_row`]):
/// the training loader's filter. Random rules are an error here.
pub fn keep_row(
    def: &MaskDefinition,
    fen: &str,
    uci: &str,
    score: Option<i16>,
    ply: u16,
) -> Result<bool, String> {
    Ok(decide(
        def,
        &RowView::loaded(score, ply),
        || material_of_fen(fen),
        || lakefish_engine::rules::move_facts(fen, uci),
    )?
    .is_some())
}

/// [`keep_row`] on a shuffle chunk's packed board instead of its FEN: the same decision for
/// every row a dataset's ingest accepted (the move is not checked for legality again).
pub fn keep_packed_row(
    def: &MaskDefinition,
    board: &lakefish_engine::packed_board::PackedBoard,
    uci: &str,
    score: Option<i16>,
    ply: u16,
) -> Result<bool, String> {
    let unpacked = std::cell::OnceCell::new();
    let unpack = || -> Result<_, lakefish_engine::rules::RulesError> {
        if let Some(b) = unpacked.get() {
            return Ok(Clone::clone(b));
        }
        let b = lakefish_engine::packed_board::board_of(board).map_err(|e| {
            lakefish_engine::rules::RulesError::Position {
                fen: "(packed board)".into(),
                reason: e.to_string(),
            }
        })?;
        let _ = unpacked.set(b.clone());
        Ok(b)
    };
    Ok(decide(
        def,
        &RowView::loaded(score, ply),
        || {
            let (b, turn) = unpack().map_err(|e| e.to_string())?;
            Ok(material_of_board(&b, turn))
        },
        || {
            let (b, turn) = unpack()?;
            lakefish_engine::rules::move_facts_on_board(&b, turn, uci)
        },
    )?
    .is_some())
}

fn mask_manifest_key(def: &MaskName, source: Source, dataset: &DatasetName) -> String {
    format!("{}/{MASK_MANIFEST_FILE}", mask_prefix(def, source, dataset))
}

pub async fn read_mask_manifest(
    lake: &Lake,
    name: &MaskName,
    source: Source,
    dataset: &DatasetName,
) -> Result<Option<MaskManifest>, JobError> {
    lake.get_json(&mask_manifest_key(name, source, dataset), "mask manifest")
        .await
}

fn encode_mask(keep: Vec<bool>, def: &MaskName, key: &str) -> Result<Vec<u8>, JobError> {
    let err = |e: parquet::errors::ParquetError| JobError::Parquet {
        key: key.to_string(),
        reason: e.to_string(),
    };
    let rows = keep.len();
    let schema = Arc::new(Schema::new(vec![Field::new(
        MASK_COLUMN,
        DataType::Boolean,
        false,
    )]));
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(BooleanArray::from(keep))])
        .expect("one boolean column");
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).unwrap()))
        .set_key_value_metadata(Some(vec![
            KeyValue::new(META_MASK.to_string(), def.to_string()),
            KeyValue::new(META_PART_ROWS.to_string(), rows.to_string()),
        ]))
        .build();
    let mut buf = Vec::new();
    let mut w = ArrowWriter::try_new(&mut buf, schema, Some(props)).map_err(err)?;
    w.write(&batch).map_err(err)?;
    w.close().map_err(err)?;
    Ok(buf)
}

/// The mask of one part, checked against the part's row count. Errors name the mask object.
pub async fn read_mask(
    lake: &Lake,
    name: &MaskName,
    source: Source,
    dataset: &DatasetName,
    part: &PartInfo,
) -> Result<Vec<bool>, JobError> {
    let key = format!("{}/{}", mask_prefix(name, source, dataset), part.name);
    let corrupt = |reason: String| JobError::Corrupt {
        what: "mask",
        key: key.clone(),
        reason,
    };
    let bytes = lake.get(&key).await?.ok_or_else(|| {
        corrupt(format!(
            "missing: run `lakefish mask` with definition {name} for dataset {dataset}"
        ))
    })?;
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
        .and_then(|b| b.build())
        .map_err(|e| corrupt(e.to_string()))?;
    let mut keep = Vec::with_capacity(part.rows as usize);
    for batch in reader {
        let b = batch.map_err(|e| corrupt(e.to_string()))?;
        let col = b
            .column_by_name(MASK_COLUMN)
            .and_then(|c| c.as_any().downcast_ref::<BooleanArray>())
            .ok_or_else(|| corrupt(format!("no boolean column {MASK_COLUMN}")))?;
        keep.extend((0..col.len()).map(|i| col.is_valid(i) && col.value(i)));
    }
    if keep.len() as u64 != part.rows {
        return Err(corrupt(format!(
            "has {} rows but part {} has {}: the mask does not belong to this data",
            keep.len(),
            part.name,
            part.rows
        )));
    }
    Ok(keep)
}

impl crate::Job for MaskSpec {
    fn run(
        &self,
        _: lakefish_schemas::JobKind,
        ctx: &JobContext,
        id: &JobId,
    ) -> Result<serde_json::Value, JobError> {
        Ok(serde_json::to_value(mask_dataset(ctx, id, self)?)?)
    }
}

pub fn mask_dataset(
    ctx: &JobContext,
    job_id: &JobId,
    spec: &MaskSpec,
) -> Result<MaskSummary, JobError> {
    let def = &spec.definition;
    let Some(data): Option<DatasetManifest> =
        ctx.block_on(read_manifest(&ctx.lake, spec.source, &spec.dataset))?
    else {
        return Err(ctx.block_on(lakefish_lake::datasets::no_such_dataset(
            &ctx.lake,
            spec.source,
            &spec.dataset,
        )));
    };
    let summary = |m: &MaskManifest, already_present| MaskSummary {
        mask: m.definition.name.to_string(),
        dataset: m.dataset.to_string(),
        parts: m.parts.len(),
        rows: m.rows,
        selected: m.selected,
        already_present,
    };
    if let Some(m) = ctx.block_on(read_mask_manifest(
        &ctx.lake,
        &def.name,
        spec.source,
        &spec.dataset,
    ))? {
        if &m.definition != def {
            return Err(JobError::MaskExists {
                mask: def.name.to_string(),
                existing: serde_json::to_string(&m.definition).unwrap_or_default(),
            });
        }
        if m.dataset_job_id == data.job_id {
            ctx.block_on(index_dataset(&ctx.lake, spec.source, &spec.dataset))?;
            return Ok(summary(&m, true));
        }
    }
    def.validate().map_err(JobError::Payload)?;
    let data_prefix = dataset_prefix(spec.source, &spec.dataset);
    let out_prefix = mask_prefix(&def.name, spec.source, &spec.dataset);
    let total_rows = data.rows;
    let done = AtomicU64::new(0);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(ctx.threads)
        .build()
        .map_err(|e| JobError::Internal(e.to_string()))?;
    let piece_count = def.rules.iter().find_map(|r| match r {
        MaskRule::PieceCount { weights, max_skip } => Some((*weights, *max_skip)),
        _ => None,
    });
    let write = |part: &PartInfo, keep: Vec<bool>| -> Result<MaskPart, JobError> {
        let selected = keep.iter().filter(|&&k| k).count() as u64;
        let out_key = format!("{out_prefix}/{}", part.name);
        let bytes = encode_mask(keep, &def.name, &out_key)?;
        ctx.block_on(ctx.lake.put(&out_key, bytes))?;
        Ok(MaskPart {
            name: part.name.clone(),
            rows: part.rows,
            selected,
        })
    };
    // Pass 1, per part: every rule but piece-count. Without a piece-count rule each part's
    // mask is written at once; with one, the parts' piece counts wait for the histogram.
    let decided: Vec<(Option<MaskPart>, Vec<Option<u8>>)> = pool.install(|| {
        data.parts
            .par_iter()
            .map(|part| {
                let key = format!("{data_prefix}/{}", part.name);
                let rows = ctx.block_on(lakefish_lake::datasets::read_part_rows(
                    &ctx.lake,
                    spec.source,
                    &spec.dataset,
                    part,
                ))?;
                let mut kept = Vec::with_capacity(rows.len());
                for (i, r) in rows.iter().enumerate() {
                    let view = RowView {
                        score: r.score,
                        ply: r.ply,
                        result: r.result,
                        place: Some((&part.name, i as u64)),
                    };
                    let k = decide(
                        def,
                        &view,
                        || material_of_fen(&r.fen),
                        || lakefish_engine::rules::move_facts(&r.fen, &r.mv),
                    )
                    .map_err(|why| JobError::Corrupt {
                        what: "positions part",
                        key: key.clone(),
                        reason: format!("row {i}: {why}"),
                    })?;
                    kept.push(k);
                }
                let n = done.fetch_add(part.rows, Ordering::Relaxed) + part.rows;
                ctx.check_cancelled()?;
                ctx.progress.report(&Progress {
                    stage: format!("mask {} of {}", def.name, spec.dataset),
                    done: n,
                    total: Some(total_rows),
                    unit: "rows".into(),
                    rows: n,
                });
                match piece_count {
                    None => Ok((
                        Some(write(part, kept.iter().map(Option::is_some).collect())?),
                        vec![],
                    )),
                    Some(_) => Ok((None, kept)),
                }
            })
            .collect::<Result<Vec<_>, JobError>>()
    })?;
    let parts: Vec<MaskPart> = match piece_count {
        None => decided.into_iter().filter_map(|(p, _)| p).collect(),
        Some((weights, max_skip)) => {
            // Pass 2: the histogram of what the other rules kept, then each row's draw.
            let mut histogram = [0u64; 33];
            for (_, kept) in &decided {
                for &pieces in kept.iter().flatten() {
                    histogram[pieces.min(32) as usize] += 1;
                }
            }
            let accept = piece_count_accept(&weights, max_skip, &histogram);
            let salt = MaskRule::PieceCount { weights, max_skip }
                .salt()
                .unwrap_or(0);
            pool.install(|| {
                data.parts
                    .par_iter()
                    .zip(decided)
                    .map(|(part, (_, kept))| {
                        let keep = kept
                            .iter()
                            .enumerate()
                            .map(|(i, k)| match k {
                                None => false,
                                Some(pieces) => {
                                    row_draw(def.seed, salt, &part.name, i as u64)
                                        < accept[(*pieces).min(32) as usize]
                                }
                            })
                            .collect();
                        write(part, keep)
                    })
                    .collect::<Result<Vec<_>, JobError>>()
            })?
        }
    };
    let manifest = MaskManifest {
        version: MASK_MANIFEST_VERSION,
        definition: def.clone(),
        source: spec.source,
        dataset: spec.dataset.clone(),
        dataset_job_id: data.job_id.clone(),
        job_id: job_id.clone(),
        rows: parts.iter().map(|p| p.rows).sum(),
        selected: parts.iter().map(|p| p.selected).sum(),
        parts,
        created: now(),
    };
    let bytes = serde_json::to_vec_pretty(&manifest)?;
    ctx.block_on(ctx.lake.put(
        &mask_manifest_key(&def.name, spec.source, &spec.dataset),
        bytes,
    ))?;
    // The dataset's entry lists its masks.
    ctx.block_on(index_dataset(&ctx.lake, spec.source, &spec.dataset))?;
    if manifest.selected == 0 && manifest.rows > 0 {
        tracing::warn!(
            mask = %def.name,
            dataset = %spec.dataset,
            rows = manifest.rows,
            "the mask keeps no row: a shuffle of it will be refused (rows without a score, as from a PGN without [%eval], are never quiet)"
        );
    }
    Ok(summary(&manifest, false))
}
