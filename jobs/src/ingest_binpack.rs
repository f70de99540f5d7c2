//! `ingest binpack`: Stockfish `.binpack` files → `positions/source=binpack/dataset=<name>/`.
//!
//! Pipeline: one scanner reads chunks in file order (constant memory); a window of chunks is
//! decoded in parallel on all cores; decoded chunks are appended in order to the current part,
//! which closes at the first chunk boundary past `rows_per_part`; finished parts are encoded
//! and uploaded by encoder threads while decoding goes on. The manifest is written last: it
//! is the commit point. Part names and contents depend only on the inputs, so a second run of
//! the same job rewrites identical objects.

use crate::binpack::{ChunkScanner, DecodedChunk, ScanItem, decode_chunk, input_key};
use crate::datasets::{manifest_key, read_manifest};
use crate::input::Input;
use crate::parts::{batch_from_chunks, encode_parquet};
use crate::records::now;
use crate::{JobContext, JobError};
use lakefish_schemas::dataset::MANIFEST_VERSION;
use lakefish_schemas::positions::{
    BINPACK_NO_SCORE, SCHEMA_VERSION, SCORE_UNIT, dataset_prefix, part_file_name,
};
use lakefish_schemas::{
    DatasetManifest, IngestBinpackSpec, InputReport, JobId, PartInfo, Progress, SkippedRange,
    Source,
};
use rayon::prelude::*;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// Names the job that may write a dataset until it commits (see `ingest_binpack`).
pub const WRITER_FILE: &str = "_writer";
/// A decode window holds at most this many bytes of chunk payload (or `2 × threads` chunks).
const WINDOW_BYTES: usize = 64 << 20;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

/// What the job returns (and the job record shows as `result`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct IngestSummary {
    pub dataset: String,
    pub rows: u64,
    /// Rows with binpack's "no score" marker (null `score`); unknown when nothing was written.
    pub null_scores: Option<u64>,
    pub parts: usize,
    pub bytes: u64,
    /// True when the dataset was already committed by an identical job: nothing was written.
    pub already_present: bool,
    /// Every byte range that was not ingested, with the file and the reason.
    pub skipped: Vec<String>,
}

impl IngestSummary {
    fn from_manifest(m: &DatasetManifest, null_scores: Option<u64>, already_present: bool) -> Self {
        IngestSummary {
            dataset: m.dataset.to_string(),
            rows: m.rows,
            null_scores,
            parts: m.parts.len(),
            bytes: m.bytes,
            already_present,
            skipped: skipped_lines(&m.inputs),
        }
    }
}

fn skipped_lines(inputs: &[InputReport]) -> Vec<String> {
    inputs
        .iter()
        .flat_map(|i| i.skipped.iter().map(move |s| format!("{}: {s}", i.input)))
        .collect()
}

struct PartJob {
    index: u32,
    chunks: Vec<DecodedChunk>,
}

/// Collects decoded chunks in order and hands each full part to the encoders.
struct PartBuilder {
    target_rows: u64,
    next_index: u32,
    chunks: Vec<DecodedChunk>,
    rows: u64,
    tx: SyncSender<PartJob>,
    total_rows: u64,
    null_scores: u64,
}

impl PartBuilder {
    fn push(&mut self, chunk: DecodedChunk) -> Result<(), JobError> {
        self.rows += chunk.rows() as u64;
        self.total_rows += chunk.rows() as u64;
        self.null_scores += chunk
            .score
            .iter()
            .filter(|&&s| s == BINPACK_NO_SCORE)
            .count() as u64;
        self.chunks.push(chunk);
        if self.rows >= self.target_rows {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), JobError> {
        if self.chunks.is_empty() {
            return Ok(());
        }
        let job = PartJob {
            index: self.next_index,
            chunks: std::mem::take(&mut self.chunks),
        };
        self.next_index += 1;
        self.rows = 0;
        self.tx
            .send(job)
            .map_err(|_| JobError::Internal("every part encoder stopped".into()))
    }
}

struct Shared {
    parts: Mutex<Vec<PartInfo>>,
    failure: Mutex<Option<JobError>>,
}

fn encode_parts(ctx: &JobContext, prefix: &str, rx: &Mutex<Receiver<PartJob>>, shared: &Shared) {
    loop {
        let job = match rx.lock().unwrap().recv() {
            Ok(job) => job,
            Err(_) => return, // the driver finished and dropped the sender
        };
        let name = part_file_name(job.index);
        let key = format!("{prefix}/{name}");
        // A panic here must not kill the encoder: the driver would block on a full queue.
        let written = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let batch = batch_from_chunks(&job.chunks);
            let bytes = encode_parquet(&batch, &key)?;
            let len = bytes.len() as u64;
            ctx.block_on(ctx.lake.put(&key, bytes))?;
            Ok::<_, JobError>((batch.num_rows() as u64, len))
        }))
        .unwrap_or_else(|_| Err(JobError::Panic(format!("encoding {key}"))));
        match written {
            Ok((rows, bytes)) => shared
                .parts
                .lock()
                .unwrap()
                .push(PartInfo { name, rows, bytes }),
            Err(e) => {
                shared.failure.lock().unwrap().get_or_insert(e);
                // Keep draining so the driver never blocks on a full queue.
            }
        }
    }
}

/// Scans, decodes and queues one input. Chunks that fail to decode are skipped and reported.
fn ingest_input(
    ctx: &JobContext,
    pool: &rayon::ThreadPool,
    input: &Input,
    part: &mut PartBuilder,
    shared: &Shared,
    progress: impl Fn(u64, u64),
) -> Result<InputReport, JobError> {
    let key = input_key(input.name(), input.len());
    let mut report = InputReport {
        input: input.name().to_string(),
        bytes: input.len(),
        rows: 0,
        chunks: 0,
        skipped: Vec::new(),
    };
    if input.is_empty() {
        report.skipped.push(SkippedRange {
            offset: 0,
            len: 0,
            reason: "empty file: no binpack chunks".into(),
        });
        return Ok(report);
    }
    let window_len = (ctx.threads * 2).max(2);
    let mut window_bytes = 0usize;
    let mut scanner = ChunkScanner::new(input);
    let mut window: Vec<(u64, Vec<u8>)> = Vec::with_capacity(window_len);
    loop {
        let item = scanner.next().transpose()?;
        let at_end = item.is_none();
        match item {
            Some(ScanItem::Chunk { offset, data }) => {
                window_bytes += data.len();
                window.push((offset, data));
            }
            Some(ScanItem::Skipped(range)) => report.skipped.push(range),
            None => {}
        }
        if window.len() < window_len && window_bytes < WINDOW_BYTES && !at_end {
            continue;
        }
        window_bytes = 0;
        let decoded: Vec<Result<DecodedChunk, String>> = pool.install(|| {
            window
                .par_iter()
                .map(|(offset, data)| decode_chunk(data, key, *offset))
                .collect()
        });
        for ((offset, data), result) in window.drain(..).zip(decoded) {
            report.chunks += 1;
            match result {
                Ok(chunk) => {
                    report.rows += chunk.rows() as u64;
                    part.push(chunk)?;
                }
                Err(why) => report.skipped.push(SkippedRange {
                    offset,
                    len: data.len() as u64 + 8,
                    reason: format!("chunk at byte offset {offset}: {why}"),
                }),
            }
        }
        if shared.failure.lock().unwrap().is_some() {
            return Err(JobError::Internal("a part failed to write".into()));
        }
        progress(scanner.offset(), part.total_rows);
        if at_end {
            // Scan skips are found before decode skips of earlier chunks: report by offset.
            report.skipped.sort_by_key(|s| s.offset);
            return Ok(report);
        }
    }
}

pub fn ingest_binpack(
    ctx: &JobContext,
    job_id: &JobId,
    spec: &IngestBinpackSpec,
) -> Result<IngestSummary, JobError> {
    let prefix = dataset_prefix(Source::Binpack, &spec.dataset);
    // One writer per dataset: the claim is created atomically and names the job, so only the
    // same job (re-delivered) may write here until it commits or fails.
    if let Some(done) = committed(ctx, spec)? {
        return Ok(done);
    }
    let claim = format!("{prefix}/{WRITER_FILE}");
    if !ctx.block_on(ctx.lake.put_if_absent(&claim, job_id.to_string()))? {
        let holder = ctx.block_on(ctx.lake.get(&claim))?.unwrap_or_default();
        let holder = String::from_utf8_lossy(&holder).to_string();
        if holder != job_id.as_str() {
            return Err(JobError::DatasetBusy {
                dataset: spec.dataset.to_string(),
                job: holder,
                claim,
            });
        }
    }
    // Another job may have committed between the first look and the claim.
    match committed(ctx, spec) {
        Ok(None) => {}
        done => {
            ctx.block_on(ctx.lake.delete(&claim))?;
            return done.map(|d| d.expect("matched Some"));
        }
    }
    let outcome = write_dataset(ctx, job_id, spec, &prefix);
    let is_committed = || {
        ctx.block_on(read_manifest(&ctx.lake, Source::Binpack, &spec.dataset))
            .map_or(true, |m| m.is_some())
    };
    match &outcome {
        Err(e) if e.is_transient() => {} // the retry (same job) overwrites what is there
        Err(_) if is_committed() => {}
        Err(_) => {
            // Nothing is committed and we hold the claim: every part here is ours.
            for meta in ctx.block_on(ctx.lake.list(&prefix)).unwrap_or_default() {
                let key = meta.location.to_string();
                if key.ends_with(".parquet") {
                    let _ = ctx.block_on(ctx.lake.delete(&key));
                }
            }
            let _ = ctx.block_on(ctx.lake.delete(&claim));
        }
        Ok(_) => ctx.block_on(ctx.lake.delete(&claim))?,
    }
    outcome
}

/// The summary of an identical, already committed ingest; an error when the dataset was
/// committed from other inputs (datasets are immutable).
fn committed(
    ctx: &JobContext,
    spec: &IngestBinpackSpec,
) -> Result<Option<IngestSummary>, JobError> {
    if let Some(m) = ctx.block_on(read_manifest(&ctx.lake, Source::Binpack, &spec.dataset))? {
        if m.inputs.iter().map(|i| &i.input).eq(spec.inputs.iter()) {
            return Ok(Some(IngestSummary::from_manifest(&m, None, true)));
        }
        let existing: Vec<&str> = m.inputs.iter().map(|i| i.input.as_str()).collect();
        return Err(JobError::DatasetExists {
            dataset: spec.dataset.to_string(),
            existing: existing.join(", "),
        });
    }
    Ok(None)
}

fn write_dataset(
    ctx: &JobContext,
    job_id: &JobId,
    spec: &IngestBinpackSpec,
    prefix: &str,
) -> Result<IngestSummary, JobError> {
    let inputs: Vec<Input> = spec
        .inputs
        .iter()
        .map(|n| Input::open(ctx, n))
        .collect::<Result<_, _>>()?;
    let total_bytes: u64 = inputs.iter().map(|i| i.len()).sum();

    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(ctx.threads)
        .thread_name(|i| format!("binpack-decode-{i}"))
        .build()
        .map_err(|e| JobError::Internal(e.to_string()))?;
    let shared = Shared {
        parts: Mutex::new(Vec::new()),
        failure: Mutex::new(None),
    };
    let (part_tx, part_rx) = sync_channel::<PartJob>(1);
    // Only the encoders hold the receiver: if they all stopped, the driver's send fails.
    let part_rx = Arc::new(Mutex::new(part_rx));

    let driven = std::thread::scope(|s| {
        for _ in 0..ctx.threads {
            let rx = part_rx.clone();
            let shared = &shared;
            s.spawn(move || encode_parts(ctx, prefix, &rx, shared));
        }
        drop(part_rx);
        let mut part = PartBuilder {
            target_rows: spec.rows_per_part,
            next_index: 0,
            chunks: Vec::new(),
            rows: 0,
            tx: part_tx,
            total_rows: 0,
            null_scores: 0,
        };
        let mut reports = Vec::new();
        let mut done_bytes = 0u64;
        for input in &inputs {
            let report = ingest_input(ctx, &pool, input, &mut part, &shared, |offset, rows| {
                ctx.progress.report(&Progress {
                    stage: format!("ingesting {}", input.name()),
                    done: done_bytes + offset,
                    total: Some(total_bytes),
                    unit: "bytes".into(),
                    rows,
                });
            })?;
            done_bytes += input.len();
            reports.push(report);
        }
        part.flush()?;
        Ok::<_, JobError>((reports, part.total_rows, part.null_scores))
        // `part` drops here with the sender: encoders drain the queue and exit.
    });
    if let Some(e) = shared.failure.lock().unwrap().take() {
        return Err(e);
    }
    let (reports, rows, null_scores) = driven?;
    if rows == 0 {
        let why = skipped_lines(&reports);
        let why = if why.is_empty() {
            "the inputs hold no binpack chunks".to_string()
        } else {
            why.join("; ")
        };
        return Err(JobError::NothingIngested(why));
    }
    let mut parts = shared.parts.into_inner().unwrap();
    parts.sort_by(|a, b| (a.name.len(), &a.name).cmp(&(b.name.len(), &b.name)));
    let manifest = DatasetManifest {
        version: MANIFEST_VERSION,
        source: Source::Binpack,
        dataset: spec.dataset.clone(),
        job_id: job_id.clone(),
        schema_version: SCHEMA_VERSION,
        score_unit: SCORE_UNIT.into(),
        rows,
        bytes: parts.iter().map(|p| p.bytes).sum(),
        parts,
        inputs: reports,
        created: now(),
    };
    let bytes =
        serde_json::to_vec_pretty(&manifest).map_err(|e| JobError::Internal(e.to_string()))?;
    ctx.block_on(
        ctx.lake
            .put(&manifest_key(Source::Binpack, &spec.dataset), bytes),
    )?;
    // Parts an earlier, uncommitted attempt with other inputs may have left behind.
    let keep: HashSet<String> = manifest
        .parts
        .iter()
        .map(|p| format!("{prefix}/{}", p.name))
        .collect();
    for meta in ctx.block_on(ctx.lake.list(prefix))? {
        let key = meta.location.to_string();
        if key.ends_with(".parquet") && !keep.contains(&key) {
            ctx.block_on(ctx.lake.delete(&key))?;
        }
    }
    Ok(IngestSummary::from_manifest(
        &manifest,
        Some(null_scores),
        false,
    ))
}
