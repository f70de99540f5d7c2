//! Two-pass shuffle (Jane Street style) on object storage.
//!
//! Pass 1 ([`deal_part`], one job per input part) reads a part and its mask and deals every
//! selected row to one of N piles, written as `shuffled/<id>/_deal/pile-NNNNN/from-PPPPP.arrows`.
//! Pass 2 ([`shuffle_pile`], one job per pile) reads one pile, permutes it in memory and writes
//! `shuffled/<id>/chunk-NNNNN.parquet`. [`commit`] writes the manifest and drops the deal files.
//!
//! The deal files live only until the commit and are read by this module alone, so they are
//! Arrow IPC files with LZ4 buffers: writing and reading them is close to a memory copy, where
//! Parquet would cost a second full encode and decode of every row.
//!
//! Determinism: a row's pile is a hash of (seed, part, row number) and a pile's permutation
//! is seeded by (seed, pile); piles are concatenated in part order. No decision depends on
//! which worker ran what, or when, so the chunks are byte-identical for the same inputs,
//! mask and seed. Memory is bounded by one part (pass 1) or one pile (pass 2).

use crate::masks::{read_mask, read_mask_manifest};
use crate::{JobContext, JobError};
use arrow_array::{RecordBatch, RecordBatchReader, UInt32Array};
use bytes::Bytes;
use lakefish_engine::random_games::SplitMix;
use lakefish_lake::catalog::{CatalogEntry, CatalogKind, CatalogQuery};
use lakefish_lake::datasets::read_manifest;
use lakefish_lake::parts::{chunk_writer_properties, encode_parquet_with};
use lakefish_lake::records::now;
use lakefish_schemas::names::ShuffleId;
use lakefish_schemas::positions::dataset_prefix;
use lakefish_schemas::shuffle::{
    PlannedPart, SHUFFLE_MANIFEST_FILE, SHUFFLE_PLAN_FILE, ShuffleChunk, chunk_file_name,
};
use lakefish_schemas::{
    JobId, JobSpec, PartInfo, Progress, ShuffleManifest, ShufflePlan, ShuffleSpec,
};
use rayon::prelude::*;
use sha2::{Digest, Sha256};

pub const SHUFFLE_MANIFEST_VERSION: u32 = 1;

pub fn shuffle_prefix(id: &str) -> String {
    format!("shuffled/{id}")
}

fn deal_prefix(id: &str, pile: u32) -> String {
    format!("shuffled/{id}/_deal/pile-{pile:05}")
}

fn pile_marker(id: &str, pile: u32) -> String {
    format!("shuffled/{id}/_piles/pile-{pile:05}.json")
}

fn deal_marker(id: &str, part: usize) -> String {
    format!("shuffled/{id}/_dealt/part-{part:05}.json")
}

pub(crate) fn corrupt(what: &'static str, key: &str, reason: impl Into<String>) -> JobError {
    JobError::Corrupt {
        what,
        key: key.to_string(),
        reason: reason.into(),
    }
}

/// Checks the inputs (datasets committed, masks present and computed from those commits) and
/// fixes the order of the input parts. The id is a hash of the spec and the dataset commits.
pub fn plan(ctx: &JobContext, spec: &ShuffleSpec) -> Result<ShufflePlan, JobError> {
    let mut dataset_jobs = Vec::new();
    let mut parts = Vec::new();
    let (mut selected, mut kept) = (0u64, Vec::new());
    for input in spec.inputs() {
        let (source, ds) = (input.source, &input.dataset);
        let Some(m) = ctx.block_on(read_manifest(&ctx.lake, source, ds))? else {
            return Err(ctx.block_on(lakefish_lake::datasets::no_such_dataset(
                &ctx.lake, source, ds,
            )));
        };
        let mask = ctx
            .block_on(read_mask_manifest(&ctx.lake, &spec.mask, source, ds))?
            .ok_or_else(|| JobError::Input {
                input: dataset_prefix(source, ds),
                reason: format!(
                    "dataset {ds} has no mask {}: run `lakefish mask {} --dataset {ds}` first \
                     (with --rule ... when {} is not a rule's name; see `lakefish mask --help`)",
                    spec.mask, spec.mask, spec.mask
                ),
            })?;
        if mask.dataset_job_id != m.job_id {
            return Err(JobError::Input {
                input: dataset_prefix(source, ds),
                reason: format!(
                    "mask {} was computed from another version of the dataset",
                    spec.mask
                ),
            });
        }
        selected += mask.selected;
        kept.push(format!("{ds}: {} of {}", mask.selected, mask.rows));
        dataset_jobs.push(m.job_id.clone());
        parts.extend(m.parts.iter().map(|p| PlannedPart {
            source: (source != spec.source).then_some(source),
            dataset: ds.clone(),
            name: p.name.clone(),
            rows: p.rows,
        }));
    }
    if selected == 0 {
        return Err(JobError::Input {
            input: format!("mask {}", spec.mask),
            reason: format!(
                "mask {} keeps no row ({}), so there is nothing to shuffle; rows without a score (a PGN without [%eval] comments) are never quiet: ingest scored data, or mask with other limits",
                spec.mask,
                kept.join(", ")
            ),
        });
    }
    let mut h = Sha256::new();
    h.update(serde_json::to_vec(spec).expect("specs serialize"));
    for j in &dataset_jobs {
        h.update(j.as_str());
    }
    let id = lakefish_schemas::names::ShuffleId::new(&format!(
        "sh-{}",
        &hex::encode(h.finalize())[..12]
    ))
    .expect("sh- and hex digits make a name");
    Ok(ShufflePlan {
        id,
        spec: spec.clone(),
        dataset_jobs,
        parts,
    })
}

pub async fn read_plan(
    lake: &crate::Lake,
    id: &ShuffleId,
) -> Result<Option<ShufflePlan>, JobError> {
    let key = format!("{}/{SHUFFLE_PLAN_FILE}", shuffle_prefix(id));
    lake.get_json(&key, "shuffle plan").await
}

pub async fn read_shuffle_manifest(
    lake: &crate::Lake,
    id: &ShuffleId,
) -> Result<Option<ShuffleManifest>, JobError> {
    let key = format!("{}/{SHUFFLE_MANIFEST_FILE}", shuffle_prefix(id));
    lake.get_json(&key, "shuffle manifest").await
}

/// Every committed shuffle, newest first (from the catalogue when the lake has one).
pub async fn list_shuffles(lake: &crate::Lake) -> Result<Vec<ShuffleManifest>, JobError> {
    if let Some(catalog) = lake.catalog() {
        return catalog
            .decode_all(CatalogQuery::all(CatalogKind::Shuffle))
            .await;
    }
    let mut out = Vec::new();
    for dir in lake.list_dirs("shuffled").await? {
        let id = dir.rsplit('/').next().unwrap_or_default();
        let Ok(id) = ShuffleId::new(id) else { continue };
        if let Some(m) = read_shuffle_manifest(lake, &id).await? {
            out.push(m);
        }
    }
    out.sort_by(|a, b| (&b.created, &b.id).cmp(&(&a.created, &a.id)));
    Ok(out)
}

/// Records a committed shuffle in the catalogue (after the commit, and whenever a delivery
/// finds it committed: the index may have missed it).
pub async fn index_shuffle(lake: &crate::Lake, m: &ShuffleManifest) -> Result<(), JobError> {
    lake.index(CatalogEntry::of(CatalogKind::Shuffle, &m.id, &m.created, m))
        .await
}

fn decode_batch(bytes: Option<Bytes>, key: &str) -> Result<RecordBatch, JobError> {
    let bytes = bytes.ok_or_else(|| corrupt("shuffle input", key, "missing"))?;
    lakefish_lake::parts::read_whole(bytes, None).map_err(|e| corrupt("parquet file", key, e))
}

/// Every batch of `reader` as one; a damaged one is reported as `what` at `key`.
fn one_batch(
    reader: impl RecordBatchReader,
    what: &'static str,
    key: &str,
) -> Result<RecordBatch, JobError> {
    let schema = reader.schema();
    let batches = reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| corrupt(what, key, e.to_string()))?;
    arrow_select::concat::concat_batches(&schema, &batches)
        .map_err(|e| corrupt(what, key, e.to_string()))
}

/// Extension of the pass-1 deal files (Arrow IPC file format).
const DEAL_EXTENSION: &str = "arrows";

/// A deal file: `batch` as an Arrow IPC file with LZ4-compressed buffers.
fn encode_deal(batch: &RecordBatch, key: &str) -> Result<Vec<u8>, JobError> {
    let err = |e: arrow_schema::ArrowError| JobError::Internal(format!("writing {key}: {e}"));
    let options = arrow_ipc::writer::IpcWriteOptions::default()
        .try_with_compression(Some(arrow_ipc::CompressionType::LZ4_FRAME))
        .map_err(err)?;
    let mut buf = Vec::with_capacity(batch.get_array_memory_size() / 2);
    let mut w =
        arrow_ipc::writer::FileWriter::try_new_with_options(&mut buf, &batch.schema(), options)
            .map_err(err)?;
    w.write(batch).map_err(err)?;
    w.finish().map_err(err)?;
    drop(w);
    Ok(buf)
}

/// Decodes a deal file (all its batches as one); damage is reported with the key.
fn decode_deal(bytes: Option<Bytes>, key: &str) -> Result<RecordBatch, JobError> {
    let bytes = bytes.ok_or_else(|| corrupt("shuffle deal file", key, "missing"))?;
    let reader = arrow_ipc::reader::FileReader::try_new(std::io::Cursor::new(bytes), None)
        .map_err(|e| corrupt("shuffle deal file", key, e.to_string()))?;
    one_batch(reader, "shuffle deal file", key)
}

/// `batch` (rows of a `positions` part) in the layout of shuffle chunks: each FEN packed once
/// here into the `board` column that replaces it, so training never parses text. A batch
/// that has the column already is returned as it is. A FEN that cannot be packed is an error
/// naming `key` and the row.
pub fn with_boards(batch: RecordBatch, key: &str) -> Result<RecordBatch, JobError> {
    if batch
        .column_by_name(lakefish_schemas::positions::COL_BOARD)
        .is_some()
    {
        return Ok(batch);
    }
    let rows: Vec<u32> = (0..batch.num_rows() as u32).collect();
    let boards = pack_boards(&batch, &rows, key)?;
    chunk_layout(&batch, boards, key)
}

/// The packed boards of rows `rows` of `batch`'s `fen` column, in that order.
fn pack_boards(
    batch: &RecordBatch,
    rows: &[u32],
    key: &str,
) -> Result<arrow_array::ArrayRef, JobError> {
    use arrow_array::{Array, FixedSizeBinaryArray, StringArray};
    use lakefish_engine::packed_board::{PACKED_BOARD_BYTES, pack_fen};
    let fen = batch
        .column_by_name(lakefish_schemas::positions::COL_FEN)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .ok_or_else(|| corrupt("shuffle input", key, "column fen missing or not text"))?;
    let mut boards = vec![0u8; rows.len() * PACKED_BOARD_BYTES];
    for (&row, out) in rows.iter().zip(boards.chunks_exact_mut(PACKED_BOARD_BYTES)) {
        let text = fen.value(row as usize);
        let packed = pack_fen(text).map_err(|e| {
            corrupt(
                "shuffle input",
                key,
                format!("row {row}: FEN {text:?}: {e}"),
            )
        })?;
        out.copy_from_slice(&packed);
    }
    let boards = FixedSizeBinaryArray::try_new(PACKED_BOARD_BYTES as i32, boards.into(), None)
        .map_err(|e| JobError::Internal(format!("packed boards of {key}: {e}")))?;
    debug_assert_eq!(boards.len(), rows.len());
    Ok(std::sync::Arc::new(boards))
}

/// A batch of chunk rows: `board` and the other columns of `rest` (by name; its `fen`, if
/// any, left out), in the chunk schema.
fn chunk_layout(
    rest: &RecordBatch,
    board: arrow_array::ArrayRef,
    key: &str,
) -> Result<RecordBatch, JobError> {
    use lakefish_schemas::positions::{COL_BOARD, chunk_schema};
    let schema = chunk_schema();
    let columns = schema
        .fields()
        .iter()
        .map(|field| match field.name().as_str() {
            COL_BOARD => Ok(board.clone()),
            name => rest
                .column_by_name(name)
                .cloned()
                .ok_or_else(|| corrupt("shuffle input", key, format!("column {name} missing"))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(schema, columns).map_err(|e| corrupt("shuffle input", key, e.to_string()))
}

/// The pile of row `row` of input part `part`: uniform, and the same wherever it is computed.
pub fn pile_of(seed: u64, part: usize, row: u64, piles: u32) -> u32 {
    let mut r = SplitMix(
        seed ^ (part as u64).wrapping_mul(0xA24B_AED4_963E_E407)
            ^ row.wrapping_mul(0x9FB2_1C65_1E98_DF25),
    );
    (r.next_u64() % piles as u64) as u32
}

/// Pass 1 for one input part: deal its selected rows to the piles. Returns the rows dealt.
pub fn deal_part(ctx: &JobContext, plan: &ShufflePlan, index: usize) -> Result<u64, JobError> {
    let spec = &plan.spec;
    let part = plan
        .parts
        .get(index)
        .ok_or_else(|| JobError::Internal(format!("shuffle {} has no part {index}", plan.id)))?;
    let source = part.source.unwrap_or(spec.source);
    let key = format!("{}/{}", dataset_prefix(source, &part.dataset), part.name);
    let info = PartInfo {
        name: part.name.clone(),
        rows: part.rows,
        bytes: 0,
    };
    let (bytes, keep) = ctx.block_on(async {
        futures::join!(
            ctx.lake.get(&key),
            read_mask(&ctx.lake, &spec.mask, source, &part.dataset, &info)
        )
    });
    let batch = decode_batch(bytes?, &key)?;
    let keep = keep?;
    if batch.num_rows() != keep.len() {
        return Err(corrupt(
            "positions part",
            &key,
            format!("has {} rows, its mask {}", batch.num_rows(), keep.len()),
        ));
    }
    // Each pile's rows of the part, and where those rows' boards are among the selected
    // rows' (packed once, in part order; the FEN text itself is never copied to a pile).
    let mut by_pile: Vec<(Vec<u32>, Vec<u32>)> = vec![Default::default(); spec.chunks as usize];
    let mut selected: Vec<u32> = Vec::new();
    for (row, _) in keep.iter().enumerate().filter(|(_, k)| **k) {
        let pile = &mut by_pile[pile_of(spec.seed, index, row as u64, spec.chunks) as usize];
        pile.0.push(row as u32);
        pile.1.push(selected.len() as u32);
        selected.push(row as u32);
    }
    let boards = pack_boards(&batch, &selected, &key)?;
    let fen_column = batch
        .schema()
        .index_of(lakefish_schemas::positions::COL_FEN)
        .map_err(|e| corrupt("positions part", &key, e.to_string()))?;
    let others: Vec<usize> = (0..batch.num_columns())
        .filter(|&c| c != fen_column)
        .collect();
    let rest = batch.project(&others)?;
    let mut dealt = 0u64;
    let mut deals = Vec::new();
    for (pile, (rows, at)) in by_pile.into_iter().enumerate() {
        if rows.is_empty() {
            continue;
        }
        dealt += rows.len() as u64;
        let picked = arrow_select::take::take_record_batch(&rest, &UInt32Array::from(rows))?;
        let board = arrow_select::take::take(&boards, &UInt32Array::from(at), None)?;
        let picked = chunk_layout(&picked, board, &key)?;
        let out = format!(
            "{}/from-{index:05}.{DEAL_EXTENSION}",
            deal_prefix(&plan.id, pile as u32)
        );
        deals.push((out.clone(), Bytes::from(encode_deal(&picked, &out)?)));
    }
    ctx.block_on(ctx.lake.put_many(deals))?;
    ctx.block_on(
        ctx.lake
            .put(&deal_marker(&plan.id, index), dealt.to_string()),
    )?;
    Ok(dealt)
}

/// Pass 2 for one pile: read it whole, permute, write the chunk.
pub fn shuffle_pile(
    ctx: &JobContext,
    plan: &ShufflePlan,
    pile: u32,
) -> Result<ShuffleChunk, JobError> {
    let spec = &plan.spec;
    let prefix = deal_prefix(&plan.id, pile);
    // One deal file per input part, `from-PPPPP.arrows`. Deals written before the switch to
    // Arrow IPC are `from-PPPPP.parquet` with the same rows: read those too, so a shuffle
    // begun before an upgrade loses nothing, and where a part has both, read it once.
    let mut by_part: std::collections::BTreeMap<String, String> = Default::default();
    for m in ctx.block_on(ctx.lake.list(&prefix))? {
        let key = m.location.to_string();
        let name = key.rsplit('/').next().unwrap_or_default();
        let Some((stem, ext)) = name.rsplit_once('.') else {
            continue;
        };
        if ext == DEAL_EXTENSION || (ext == "parquet" && !by_part.contains_key(stem)) {
            by_part.insert(stem.to_string(), key);
        }
    }
    let keys: Vec<String> = by_part.into_values().collect();
    let name = chunk_file_name(pile);
    let read = ctx.block_on(ctx.lake.get_many(&keys))?;
    if read.iter().any(Option::is_none) {
        // Listed, then gone: another delivery of this pile committed the shuffle meanwhile
        // (the commit removes the pass-1 files). Its chunk stands; without a manifest yet,
        // the commit is under way: try again.
        return match committed_chunk(ctx, plan, &name)? {
            Some(c) => Ok(c),
            None => Err(JobError::Retry(format!(
                "pile {pile} of shuffle {}: its deal files went while it read them",
                plan.id
            ))),
        };
    }
    let batches = read
        .into_iter()
        .zip(&keys)
        .map(|(bytes, k)| {
            // Deal files from before packed boards get theirs here.
            with_boards(
                match k.ends_with(".parquet") {
                    true => decode_batch(bytes, k)?,
                    false => decode_deal(bytes, k)?,
                },
                k,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    // Row i of the pile is row `i - offset` of the batch it fell in, batches in part order.
    let mut rows: Vec<(usize, usize)> = Vec::new();
    for (b, batch) in batches.iter().enumerate() {
        rows.extend((0..batch.num_rows()).map(|r| (b, r)));
    }
    let n = rows.len();
    let mut rng =
        SplitMix(spec.seed ^ 0x5348_5546 ^ (pile as u64).wrapping_mul(0xD1B5_4A32_D192_ED03));
    for i in (1..n).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        rows.swap(i, j);
    }
    // One gather straight from the deal batches (no concatenated copy first).
    let refs: Vec<&RecordBatch> = batches.iter().collect();
    let schema = lakefish_schemas::positions::chunk_schema();
    let shuffled = if refs.is_empty() {
        RecordBatch::new_empty(schema)
    } else {
        // The chunk gets the plain chunk schema (the deal files carry the input part's
        // file metadata, which depends on which part came first) and its checks.
        let gathered = arrow_select::interleave::interleave_record_batch(&refs, &rows)?;
        RecordBatch::try_new(schema, gathered.columns().to_vec())
            .map_err(|e| JobError::Internal(format!("pile {pile}: {e}")))?
    };
    let key = format!("{}/{name}", shuffle_prefix(&plan.id));
    let bytes = encode_parquet_with(
        &shuffled,
        &key,
        ctx.threads,
        chunk_writer_properties(lakefish_engine::packed_board::PACKED_BOARD_LAYOUT),
    )?;
    // A duplicate delivery racing the commit may have read a pile whose files were already
    // removed: once committed, the committed chunk stands.
    if let Some(c) = committed_chunk(ctx, plan, &name)? {
        return Ok(c);
    }
    let chunk = ShuffleChunk {
        name,
        rows: n as u64,
        bytes: bytes.len() as u64,
    };
    ctx.block_on(ctx.lake.put(&key, bytes))?;
    let marker = serde_json::to_vec(&chunk).expect("serializes");
    ctx.block_on(ctx.lake.put(&pile_marker(&plan.id, pile), marker))?;
    Ok(chunk)
}

/// Chunk `name` as the committed manifest lists it, when the shuffle is committed.
fn committed_chunk(
    ctx: &JobContext,
    plan: &ShufflePlan,
    name: &str,
) -> Result<Option<ShuffleChunk>, JobError> {
    Ok(ctx
        .block_on(read_shuffle_manifest(&ctx.lake, &plan.id))?
        .and_then(|m| m.chunks.into_iter().find(|c| c.name == name)))
}

/// How many pass-1 parts and pass-2 piles are done (from their markers).
pub fn progress_of(ctx: &JobContext, plan: &ShufflePlan) -> Result<(usize, usize), JobError> {
    let count =
        |p: String| -> Result<usize, JobError> { Ok(ctx.block_on(ctx.lake.list(&p))?.len()) };
    Ok((
        count(format!("{}/_dealt", shuffle_prefix(&plan.id)))?,
        count(format!("{}/_piles", shuffle_prefix(&plan.id)))?,
    ))
}

/// Writes the manifest from the pile markers, then removes the pass-1 files.
pub fn commit(ctx: &JobContext, plan: &ShufflePlan) -> Result<ShuffleManifest, JobError> {
    let spec = &plan.spec;
    if let Some(m) = ctx.block_on(read_shuffle_manifest(&ctx.lake, &plan.id))? {
        // Committed already (this is a second delivery): finish the clean-up it may not have.
        remove_pass_files(ctx, plan)?;
        ctx.block_on(lakefish_lake::space::measure(
            &ctx.lake,
            lakefish_lake::catalog::CatalogKind::Shuffle,
            plan.id.as_str(),
        ))?;
        return Ok(m);
    }
    let mut chunks = Vec::new();
    let keys: Vec<String> = (0..spec.chunks).map(|p| pile_marker(&plan.id, p)).collect();
    let markers = ctx.block_on(ctx.lake.get_many(&keys))?;
    if markers.iter().any(Option::is_none)
        && let Some(m) = ctx.block_on(read_shuffle_manifest(&ctx.lake, &plan.id))?
    {
        // Two last piles both committing: the other one's commit removed the markers.
        return Ok(m);
    }
    for ((pile, key), b) in (0..spec.chunks).zip(keys).zip(markers) {
        let b = b.ok_or_else(|| {
            JobError::Retry(format!("pile {pile} of shuffle {} is not done", plan.id))
        })?;
        chunks.push(
            serde_json::from_slice::<ShuffleChunk>(&b)
                .map_err(|e| corrupt("pile marker", &key, e.to_string()))?,
        );
    }
    let manifest = ShuffleManifest {
        version: SHUFFLE_MANIFEST_VERSION,
        id: plan.id.clone(),
        source: spec.source,
        datasets: spec.datasets.clone(),
        extra: spec.extra.clone(),
        dataset_jobs: plan.dataset_jobs.clone(),
        mask: spec.mask.clone(),
        seed: spec.seed,
        input_rows: plan.parts.iter().map(|p| p.rows).sum(),
        rows: chunks.iter().map(|c| c.rows).sum(),
        bytes: chunks.iter().map(|c| c.bytes).sum(),
        chunks,
        created: now(),
    };
    let key = format!("{}/{SHUFFLE_MANIFEST_FILE}", shuffle_prefix(&plan.id));
    let bytes = serde_json::to_vec_pretty(&manifest)?;
    // Two last piles committing at once: the first manifest written stands.
    if !ctx.block_on(ctx.lake.put_if_absent(&key, bytes))? {
        return ctx
            .block_on(read_shuffle_manifest(&ctx.lake, &plan.id))?
            .ok_or_else(|| JobError::Retry(format!("shuffle {}: manifest unreadable", plan.id)));
    }
    ctx.block_on(index_shuffle(&ctx.lake, &manifest))?;
    remove_pass_files(ctx, plan)?;
    // Measured again without the pass files the index counted.
    ctx.block_on(lakefish_lake::space::measure(
        &ctx.lake,
        lakefish_lake::catalog::CatalogKind::Shuffle,
        plan.id.as_str(),
    ))?;
    Ok(manifest)
}

/// Deletes a committed shuffle's pass-1 and pass-2 files.
fn remove_pass_files(ctx: &JobContext, plan: &ShufflePlan) -> Result<(), JobError> {
    let mut pass_files = Vec::new();
    for sub in ["_deal", "_dealt", "_piles"] {
        let listed = ctx.block_on(
            ctx.lake
                .list(&format!("{}/{sub}", shuffle_prefix(&plan.id))),
        )?;
        pass_files.extend(listed.into_iter().map(|m| m.location.to_string()));
    }
    ctx.block_on(ctx.lake.delete_many(pass_files))
}

/// Plans the shuffle and records the plan (idempotent: the id is derived from the inputs).
pub fn start(ctx: &JobContext, spec: &ShuffleSpec) -> Result<ShufflePlan, JobError> {
    let plan = plan(ctx, spec)?;
    let key = format!("{}/{SHUFFLE_PLAN_FILE}", shuffle_prefix(&plan.id));
    let bytes = serde_json::to_vec_pretty(&plan)?;
    ctx.block_on(ctx.lake.put(&key, bytes))?;
    Ok(plan)
}

/// Queued, a shuffle fans out as deal and pile jobs; in-process it runs here.
impl crate::Job for ShuffleSpec {
    fn run(
        &self,
        _: lakefish_schemas::JobKind,
        ctx: &JobContext,
        _: &lakefish_schemas::JobId,
    ) -> Result<serde_json::Value, JobError> {
        Ok(if ctx.is_queued() {
            serde_json::to_value(fan_out(ctx, self)?)?
        } else {
            serde_json::to_value(shuffle_here(ctx, self)?)?
        })
    }
}

/// A fanned-out shuffle's pass: `shuffle_deal` or `shuffle_pile`.
impl crate::Job for lakefish_schemas::ShuffleTask {
    fn run(
        &self,
        kind: lakefish_schemas::JobKind,
        ctx: &JobContext,
        _: &lakefish_schemas::JobId,
    ) -> Result<serde_json::Value, JobError> {
        match kind {
            lakefish_schemas::JobKind::ShuffleDeal => deal_task(ctx, self),
            lakefish_schemas::JobKind::ShufflePile => pile_task(ctx, self),
            other => Err(JobError::Internal(format!(
                "a shuffle task dispatched as {other}"
            ))),
        }
    }
}

/// The whole shuffle in this process: both passes on all cores, then the commit.
pub fn shuffle_here(ctx: &JobContext, spec: &ShuffleSpec) -> Result<ShuffleManifest, JobError> {
    let plan = plan(ctx, spec)?;
    if let Some(m) = ctx.block_on(read_shuffle_manifest(&ctx.lake, &plan.id))? {
        ctx.block_on(index_shuffle(&ctx.lake, &m))?;
        return Ok(m);
    }
    let plan = start(ctx, spec)?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(ctx.threads)
        .build()
        .map_err(|e| JobError::Internal(e.to_string()))?;
    let total = plan.parts.len() as u64 + spec.chunks as u64;
    let done = std::sync::atomic::AtomicU64::new(0);
    let report = |stage: &str| {
        let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        ctx.progress.report(&Progress {
            stage: format!("shuffle {}: {stage}", plan.id),
            done: n,
            total: Some(total),
            unit: "tasks".into(),
            rows: 0,
        });
    };
    pool.install(|| {
        (0..plan.parts.len()).into_par_iter().try_for_each(|i| {
            ctx.check_cancelled()?;
            deal_part(ctx, &plan, i)?;
            report("pass 1 (deal)");
            Ok::<_, JobError>(())
        })
    })?;
    pool.install(|| {
        (0..spec.chunks).into_par_iter().try_for_each(|p| {
            ctx.check_cancelled()?;
            shuffle_pile(ctx, &plan, p)?;
            report("pass 2 (shuffle piles)");
            Ok::<_, JobError>(())
        })
    })?;
    commit(ctx, &plan)
}

/// What a fanned-out `shuffle` job returns: the passes run as their own jobs.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FannedOut {
    pub shuffle: lakefish_schemas::names::ShuffleId,
    /// True when the shuffle was already committed: nothing was queued.
    pub already_present: bool,
    pub deal_jobs: usize,
    pub piles: u32,
}

fn task_id(plan_id: &str, pass: &str, index: u32) -> JobId {
    JobId::derived(&format!("{plan_id}/{pass}/{index}"))
}

/// The error of a fanned-out shuffle's first failed pass, if one failed for good (the
/// shuffle then never completes, and whoever waits for it should stop waiting).
pub fn failed_task(ctx: &JobContext, id: &ShuffleId) -> Result<Option<String>, JobError> {
    let Some(plan) = ctx.block_on(read_plan(&ctx.lake, id))? else {
        return Ok(None);
    };
    let store = &ctx.jobs;
    let deals = (0..plan.parts.len() as u32).map(|i| ("deal", i));
    let piles = (0..plan.spec.chunks).map(|i| ("pile", i));
    for (pass, i) in deals.chain(piles) {
        if let Some(rec) = ctx.block_on(store.get(&task_id(id, pass, i)))?
            && rec.state.ended_without_result()
        {
            return Ok(Some(format!(
                "{pass} {i}: {}",
                rec.error.unwrap_or_default()
            )));
        }
    }
    Ok(None)
}

fn submitter(ctx: &JobContext) -> Result<&std::sync::Arc<dyn crate::JobSubmitter>, JobError> {
    ctx.submitter("a shuffle's tasks")
}

/// Plans the shuffle and queues one `shuffle_deal` job per input part. The last deal queues
/// the piles and the last pile commits, so the shuffle completes without anyone waiting.
pub fn fan_out(ctx: &JobContext, spec: &ShuffleSpec) -> Result<FannedOut, JobError> {
    let plan = plan(ctx, spec)?;
    let mut out = FannedOut {
        shuffle: plan.id.clone(),
        already_present: false,
        deal_jobs: plan.parts.len(),
        piles: spec.chunks,
    };
    if let Some(m) = ctx.block_on(read_shuffle_manifest(&ctx.lake, &plan.id))? {
        ctx.block_on(index_shuffle(&ctx.lake, &m))?;
        out.already_present = true;
        return Ok(out);
    }
    let plan = start(ctx, spec)?;
    let submit = submitter(ctx)?;
    for index in 0..plan.parts.len() as u32 {
        let task = lakefish_schemas::ShuffleTask {
            shuffle: plan.id.clone(),
            index,
        };
        submit.submit(task_id(&plan.id, "deal", index), JobSpec::ShuffleDeal(task))?;
    }
    Ok(out)
}

fn task_plan(
    ctx: &JobContext,
    task: &lakefish_schemas::ShuffleTask,
) -> Result<Option<ShufflePlan>, JobError> {
    task.validate().map_err(JobError::Payload)?;
    // Once committed, the pass-1 files are gone: a late re-delivery must not redo a pile.
    if let Some(m) = ctx.block_on(read_shuffle_manifest(&ctx.lake, &task.shuffle))? {
        ctx.block_on(index_shuffle(&ctx.lake, &m))?;
        return Ok(None);
    }
    let plan = ctx
        .block_on(read_plan(&ctx.lake, &task.shuffle))?
        .ok_or_else(|| JobError::Input {
            input: shuffle_prefix(&task.shuffle),
            reason: "no such shuffle (no plan)".into(),
        })?;
    Ok(Some(plan))
}

/// A queued pass-1 task; the task that finds every part dealt queues the piles.
pub fn deal_task(
    ctx: &JobContext,
    task: &lakefish_schemas::ShuffleTask,
) -> Result<serde_json::Value, JobError> {
    let Some(plan) = task_plan(ctx, task)? else {
        return Ok(serde_json::json!({"shuffle": task.shuffle, "already_committed": true}));
    };
    let dealt = deal_part(ctx, &plan, task.index as usize)?;
    let (deals, _) = progress_of(ctx, &plan)?;
    let last = deals == plan.parts.len();
    if last {
        let submit = submitter(ctx)?;
        for pile in 0..plan.spec.chunks {
            let t = lakefish_schemas::ShuffleTask {
                shuffle: plan.id.clone(),
                index: pile,
            };
            submit.submit(task_id(&plan.id, "pile", pile), JobSpec::ShufflePile(t))?;
        }
    }
    Ok(
        serde_json::json!({"shuffle": plan.id, "part": task.index, "rows": dealt, "queued_piles": last}),
    )
}

/// A queued pass-2 task; the task that finds every pile done commits the shuffle.
pub fn pile_task(
    ctx: &JobContext,
    task: &lakefish_schemas::ShuffleTask,
) -> Result<serde_json::Value, JobError> {
    let Some(plan) = task_plan(ctx, task)? else {
        return Ok(serde_json::json!({"shuffle": task.shuffle, "already_committed": true}));
    };
    let (deals, _) = progress_of(ctx, &plan)?;
    if deals != plan.parts.len() {
        return Err(JobError::Retry(format!(
            "pile {} of shuffle {} queued before every part was dealt ({deals} of {})",
            task.index,
            plan.id,
            plan.parts.len()
        )));
    }
    // A second delivery of a pile that is done (two deals may both find every part dealt
    // and queue the piles) keeps the first one's chunk rather than writing it again.
    let marker = ctx.block_on(ctx.lake.get(&pile_marker(&plan.id, task.index)))?;
    let chunk = match marker {
        Some(b) => serde_json::from_slice::<ShuffleChunk>(&b).map_err(|e| {
            corrupt(
                "pile marker",
                &pile_marker(&plan.id, task.index),
                e.to_string(),
            )
        })?,
        None => shuffle_pile(ctx, &plan, task.index)?,
    };
    let (_, piles) = progress_of(ctx, &plan)?;
    let committed = piles == plan.spec.chunks as usize;
    if committed {
        commit(ctx, &plan)?;
    }
    Ok(serde_json::json!({"shuffle": plan.id, "chunk": chunk, "committed": committed}))
}

/// Where a shuffle stands: committed (its manifest), or passes still running.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ShuffleStatus {
    Committed(ShuffleManifest),
    Running {
        id: String,
        /// Input parts, and how many are dealt (pass 1).
        parts: usize,
        dealt: usize,
        /// Piles, and how many are shuffled into chunks (pass 2).
        chunks: u32,
        piles_done: usize,
    },
}

pub async fn shuffle_status(
    lake: &crate::Lake,
    id: &ShuffleId,
) -> Result<Option<ShuffleStatus>, JobError> {
    if let Some(m) = read_shuffle_manifest(lake, id).await? {
        return Ok(Some(ShuffleStatus::Committed(m)));
    }
    let Some(plan) = read_plan(lake, id).await? else {
        return Ok(None);
    };
    let dealt = lake
        .list(&format!("{}/_dealt", shuffle_prefix(id)))
        .await?
        .len();
    let piles_done = lake
        .list(&format!("{}/_piles", shuffle_prefix(id)))
        .await?
        .len();
    Ok(Some(ShuffleStatus::Running {
        id: plan.id.to_string(),
        parts: plan.parts.len(),
        dealt,
        chunks: plan.spec.chunks,
        piles_done,
    }))
}

/// Ingests a binpack `input` as `dataset`, masks it `quiet` and shuffles the quiet rows into
/// `chunks` chunks: the training data benches and trainer tests start from.
pub fn quiet_shuffle(
    ctx: &JobContext,
    input: &str,
    dataset: &str,
    chunks: u32,
    seed: u64,
) -> Result<lakefish_schemas::ShuffleManifest, JobError> {
    use lakefish_schemas::{MaskDefinition, MaskName, MaskSpec, ShuffleSpec, Source};
    let dataset = lakefish_schemas::DatasetName::new(dataset)?;
    let ingest = lakefish_schemas::IngestBinpackSpec {
        max_game_bytes: None,
        inputs: vec![input.to_string()],
        dataset: dataset.clone(),
        rows_per_part: lakefish_schemas::job::default_rows_per_part(),
    };
    lakefish_ingest::ingest_binpack::ingest_binpack(ctx, &JobId::new(), &ingest)?;
    let quiet = MaskName::new("quiet")?;
    let mask = MaskSpec {
        dataset: dataset.clone(),
        source: Source::Binpack,
        definition: MaskDefinition {
            name: quiet.clone(),
            min_ply: None,
            max_abs_score: None,
            ..MaskDefinition::quiet()
        },
    };
    crate::masks::mask_dataset(ctx, &JobId::new(), &mask)?;
    let spec = ShuffleSpec {
        datasets: vec![dataset],
        source: Source::Binpack,
        mask: quiet,
        chunks,
        seed,
        extra: Vec::new(),
    };
    shuffle_here(ctx, &spec)
}
