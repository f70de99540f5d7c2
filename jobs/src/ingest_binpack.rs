//! `ingest binpack`: Stockfish `.binpack` files → `positions/source=binpack/dataset=<name>/`.
//!
//! Pipeline: one scanner reads chunks in file order (constant memory); a window of chunks is
//! decoded in parallel on all cores; decoded chunks are appended in order to the current part,
//! which closes at the first chunk boundary past `rows_per_part`; finished parts are encoded
//! and uploaded by encoder threads while decoding goes on. The manifest is written last: it
//! is the commit point. Part names and contents depend only on the inputs, so a second run of
//! the same job rewrites identical objects.

use crate::binpack::{ChunkScanner, DecodedChunk, ScanItem, decode_chunk, input_key};
use crate::dataset_writer::{
    DatasetTarget, PartBuilder, Written, commit, skipped_lines, write_once, write_parts,
};
use crate::input::Input;
use crate::records::now;
use crate::{JobContext, JobError};
use lakefish_schemas::dataset::MANIFEST_VERSION;
use lakefish_schemas::positions::{SCHEMA_VERSION, SCORE_UNIT, dataset_prefix};
use lakefish_schemas::{
    DatasetManifest, IngestSpec, InputReport, JobId, Progress, SkippedRange, Source,
};
use rayon::prelude::*;

pub use crate::dataset_writer::WRITER_FILE;
/// A decode window holds at most this many bytes of chunk payload (or `2 × threads` chunks).
const WINDOW_BYTES: usize = 64 << 20;

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
    pub(crate) fn from_manifest(
        m: &DatasetManifest,
        null_scores: Option<u64>,
        already_present: bool,
    ) -> Self {
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

/// Scans, decodes and queues one input. Chunks that fail to decode are skipped and reported.
fn ingest_input(
    ctx: &JobContext,
    pool: &rayon::ThreadPool,
    input: &Input,
    part: &mut PartBuilder,
    written: &Written,
    progress: impl Fn(u64, u64),
) -> Result<InputReport, JobError> {
    let key = input_key(input.name(), input.len());
    let mut report = InputReport {
        input: input.name().to_string(),
        bytes: input.len(),
        rows: 0,
        chunks: 0,
        skipped: Vec::new(),
        skipped_games: Vec::new(),
        skipped_variants: Default::default(),
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
                    part.push("", chunk, Vec::new())?;
                }
                Err(why) => report.skipped.push(SkippedRange {
                    offset,
                    len: data.len() as u64 + 8,
                    reason: format!("chunk at byte offset {offset}: {why}"),
                }),
            }
        }
        if written.failed() {
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
    spec: &IngestSpec,
) -> Result<IngestSummary, JobError> {
    let target = DatasetTarget {
        source: Source::Binpack,
        dataset: &spec.dataset,
        prefix: dataset_prefix(Source::Binpack, &spec.dataset),
        games_prefix: None,
    };
    write_once(
        ctx,
        job_id,
        &target,
        &spec.inputs,
        |m| IngestSummary::from_manifest(m, None, true),
        || write_dataset(ctx, job_id, spec, &target),
    )
}

fn write_dataset(
    ctx: &JobContext,
    job_id: &JobId,
    spec: &IngestSpec,
    target: &DatasetTarget,
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
    let out = write_parts(ctx, target, spec.rows_per_part, |part, written| {
        let mut reports = Vec::new();
        let mut done_bytes = 0u64;
        for input in &inputs {
            let report = ingest_input(ctx, &pool, input, part, written, |offset, rows| {
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
        Ok(reports)
    })?;
    let reports = out.driven;
    if out.rows == 0 {
        let why = skipped_lines(&reports);
        let why = if why.is_empty() {
            "the inputs hold no binpack chunks".to_string()
        } else {
            why.join("; ")
        };
        return Err(JobError::NothingIngested(why));
    }
    let manifest = DatasetManifest {
        version: MANIFEST_VERSION,
        source: Source::Binpack,
        dataset: spec.dataset.clone(),
        job_id: job_id.clone(),
        schema_version: SCHEMA_VERSION,
        score_unit: SCORE_UNIT.into(),
        rows: out.rows,
        bytes: out.parts.iter().map(|p| p.bytes).sum(),
        parts: out.parts,
        games: Vec::new(),
        inputs: reports,
        created: now(),
    };
    commit(ctx, target, &manifest)?;
    Ok(IngestSummary::from_manifest(
        &manifest,
        Some(out.null_scores),
        false,
    ))
}
