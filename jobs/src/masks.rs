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
use lakefish_lake::parts::read_positions;
use lakefish_lake::records::now;
use lakefish_schemas::mask::{
    MASK_COLUMN, MASK_MANIFEST_FILE, META_MASK, META_PART_ROWS, MaskPart, mask_prefix,
};
use lakefish_schemas::positions::dataset_prefix;
use lakefish_schemas::{
    DatasetManifest, DatasetName, JobId, MaskDefinition, MaskManifest, MaskName, MaskSpec,
    PartInfo, Progress, Source,
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

/// Decides one row: a null `score` is never kept (no need to look at the board); otherwise
/// the ply and score limits, then the quiet rule on the position and move.
pub fn keep_row(
    def: &MaskDefinition,
    fen: &str,
    uci: &str,
    score: Option<i16>,
    ply: u16,
) -> Result<bool, String> {
    keep_row_with(def, score, ply, || {
        lakefish_engine::rules::move_facts(fen, uci)
    })
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
    keep_row_with(def, score, ply, || {
        let (board, turn) = lakefish_engine::packed_board::board_of(board).map_err(|e| {
            lakefish_engine::rules::RulesError::Position {
                fen: "(packed board)".into(),
                reason: e.to_string(),
            }
        })?;
        lakefish_engine::rules::move_facts_on_board(&board, turn, uci)
    })
}

fn keep_row_with(
    def: &MaskDefinition,
    score: Option<i16>,
    ply: u16,
    facts: impl FnOnce()
        -> Result<lakefish_engine::rules::MoveFacts, lakefish_engine::rules::RulesError>,
) -> Result<bool, String> {
    let Some(score) = score else {
        return Ok(false);
    };
    if def.min_ply.is_some_and(|min| ply < min) {
        return Ok(false);
    }
    if def
        .max_abs_score
        .is_some_and(|max| score.unsigned_abs() > max)
    {
        return Ok(false);
    }
    let f = facts().map_err(|e| e.to_string())?;
    Ok(!f.in_check && !f.capture && !f.promotion)
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
    let data_prefix = dataset_prefix(spec.source, &spec.dataset);
    let out_prefix = mask_prefix(&def.name, spec.source, &spec.dataset);
    let total_rows = data.rows;
    let done = AtomicU64::new(0);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(ctx.threads)
        .build()
        .map_err(|e| JobError::Internal(e.to_string()))?;
    let parts: Vec<MaskPart> = pool.install(|| {
        data.parts
            .par_iter()
            .map(|part| {
                let key = format!("{data_prefix}/{}", part.name);
                let bytes = ctx
                    .block_on(ctx.lake.get(&key))?
                    .ok_or_else(|| JobError::Corrupt {
                        what: "dataset",
                        key: key.clone(),
                        reason: "a part listed in the manifest is missing".into(),
                    })?;
                let rows = read_positions(bytes, &key)?;
                if rows.len() as u64 != part.rows {
                    return Err(JobError::Corrupt {
                        what: "positions part",
                        key,
                        reason: format!("has {} rows, the manifest says {}", rows.len(), part.rows),
                    });
                }
                let mut keep = Vec::with_capacity(rows.len());
                for (i, r) in rows.iter().enumerate() {
                    let k = keep_row(def, &r.fen, &r.mv, r.score, r.ply).map_err(|why| {
                        JobError::Corrupt {
                            what: "positions part",
                            key: key.clone(),
                            reason: format!("row {i}: {why}"),
                        }
                    })?;
                    keep.push(k);
                }
                let selected = keep.iter().filter(|&&k| k).count() as u64;
                let out_key = format!("{out_prefix}/{}", part.name);
                let bytes = encode_mask(keep, &def.name, &out_key)?;
                ctx.block_on(ctx.lake.put(&out_key, bytes))?;
                let n = done.fetch_add(part.rows, Ordering::Relaxed) + part.rows;
                ctx.check_cancelled()?;
                ctx.progress.report(&Progress {
                    stage: format!("mask {} of {}", def.name, spec.dataset),
                    done: n,
                    total: Some(total_rows),
                    unit: "rows".into(),
                    rows: n,
                });
                Ok(MaskPart {
                    name: part.name.clone(),
                    rows: part.rows,
                    selected,
                })
            })
            .collect::<Result<Vec<_>, JobError>>()
    })?;
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
