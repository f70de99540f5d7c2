//! `ingest binpack`: Stockfish `.binpack` files → `positions/source=binpack/dataset=<name>/`.
//!
//! Pipeline: one scanner reads chunks in file order (constant memory); a window of chunks is
//! decoded in parallel on all cores; decoded chunks are appended in order to the current part,
//! which closes at the first chunk boundary past `rows_per_part`; finished parts are encoded
//! and uploaded by encoder threads while decoding goes on. The manifest is written last: it
//! is the commit point. Part names and contents depend only on the inputs, so a second run of
//! the same job rewrites identical objects.

use crate::binpack::{ChunkScanner, ScanItem, decode_chunk, input_key};
use crate::dataset_writer::{InputFormat, PartBuilder, Written, ingest};
use lakefish_lake::input::Input;
use lakefish_lake::parts::PositionColumns;
use lakefish_lake::{JobContext, JobError};
use lakefish_schemas::{IngestSpec, InputReport, JobId, SkippedRange, Source};
use rayon::prelude::*;

pub use crate::dataset_writer::{IngestSummary, WRITER_FILE};
/// A decode window holds at most this many bytes of chunk payload (or `2 × threads` chunks).
const WINDOW_BYTES: usize = 64 << 20;

/// Scans, decodes and queues one input. Chunks that fail to decode are skipped and reported.
fn ingest_input(
    ctx: &JobContext,
    _spec: &IngestSpec,
    pool: &rayon::ThreadPool,
    input: &Input,
    part: &mut PartBuilder,
    written: &Written,
    progress: &dyn Fn(u64, u64),
) -> Result<InputReport, JobError> {
    let key = input_key(input.name(), input.len());
    let mut report = InputReport::new(input.name(), input.len());
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
        let decoded: Vec<Result<PositionColumns, String>> = pool.install(|| {
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
    ingest(ctx, job_id, spec, &FORMAT)
}

/// Self-play binpacks (written by `datagen`) into `positions/source=selfplay/...`.
pub fn ingest_selfplay(
    ctx: &JobContext,
    job_id: &JobId,
    spec: &IngestSpec,
) -> Result<IngestSummary, JobError> {
    ingest(ctx, job_id, spec, &SELFPLAY)
}

const SELFPLAY: InputFormat = InputFormat {
    source: Source::Selfplay,
    ..FORMAT
};

const FORMAT: InputFormat = InputFormat {
    source: Source::Binpack,
    has_games: false,
    thread_name: "binpack-decode",
    nothing_found: "the inputs hold no binpack chunks",
    read: ingest_input,
};
