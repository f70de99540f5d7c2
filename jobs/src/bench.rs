//! `lakefish bench ingest-binpack`: the full ingest against a bare `sfbinpack` decode loop
//! over the same file, measured in the same run.

use crate::ingest_binpack::ingest_binpack;
use crate::{JobContext, JobError, Lake};
use lakefish_schemas::{DatasetName, IngestBinpackSpec, JobId};
use serde::Serialize;
use std::collections::HashMap;
use std::time::Instant;

#[derive(Debug, Clone, Serialize)]
pub struct IngestBench {
    pub file: String,
    pub positions: u64,
    pub threads: usize,
    /// Bare `CompressedTrainingDataEntryReader` loop, one core, best of the runs.
    pub decode_positions_per_s: f64,
    /// Full ingest (decode, FEN/UCI text, checks, Parquet zstd encode, write), best of the runs.
    pub ingest_positions_per_s: f64,
    pub ingest_positions_per_s_per_core: f64,
    /// ingest per core / bare decode (target: at least 0.5).
    pub ratio_per_core: f64,
    pub binpack_bytes_per_position: f64,
    pub parquet_bytes_per_position: f64,
}

fn bare_decode(bytes: &[u8]) -> Result<(u64, f64), JobError> {
    let start = Instant::now();
    let mut reader = sfbinpack::CompressedTrainingDataEntryReader::from_slice(bytes)
        .map_err(|e| JobError::Internal(format!("sfbinpack reader: {e}")))?;
    let mut n = 0u64;
    let mut checksum = 0i64;
    while reader.has_next() {
        let e = reader.next();
        checksum = checksum.wrapping_add(e.score as i64 + e.ply as i64);
        n += 1;
    }
    std::hint::black_box(checksum);
    Ok((n, start.elapsed().as_secs_f64()))
}

/// Runs both measurements `runs` times and keeps the best of each.
pub fn bench_ingest_binpack(
    rt: &tokio::runtime::Handle,
    file: &str,
    threads: usize,
    runs: usize,
) -> Result<IngestBench, JobError> {
    let bytes = std::fs::read(file).map_err(|e| JobError::Input {
        input: file.to_string(),
        reason: e.to_string(),
    })?;
    let mut decode_best = f64::MAX;
    let mut ingest_best = f64::MAX;
    let mut positions = 0;
    let mut parquet_bytes = 0;
    for run in 0..runs.max(1) {
        let (n, secs) = bare_decode(&bytes)?;
        decode_best = decode_best.min(secs);
        positions = n;

        let dir = std::env::temp_dir().join(format!("lakefish-bench-{}-{run}", std::process::id()));
        let lake = Lake::open(dir.to_str().unwrap(), &HashMap::new())?;
        let ctx = JobContext::new(lake, rt.clone()).with_threads(threads);
        let spec = IngestBinpackSpec {
            inputs: vec![file.to_string()],
            dataset: DatasetName::new("bench").expect("valid name"),
            rows_per_part: lakefish_schemas::job::default_rows_per_part(),
        };
        let start = Instant::now();
        let summary = ingest_binpack(&ctx, &JobId::new(), &spec);
        let secs = start.elapsed().as_secs_f64();
        let _ = std::fs::remove_dir_all(&dir);
        let summary = summary?;
        ingest_best = ingest_best.min(secs);
        parquet_bytes = summary.bytes;
        if summary.rows != n {
            return Err(JobError::Internal(format!(
                "ingest wrote {} rows, the bare reader saw {n}",
                summary.rows
            )));
        }
    }
    let decode_rate = positions as f64 / decode_best;
    let ingest_rate = positions as f64 / ingest_best;
    let per_core = ingest_rate / threads as f64;
    Ok(IngestBench {
        file: file.to_string(),
        positions,
        threads,
        decode_positions_per_s: decode_rate,
        ingest_positions_per_s: ingest_rate,
        ingest_positions_per_s_per_core: per_core,
        ratio_per_core: per_core / decode_rate,
        binpack_bytes_per_position: bytes.len() as f64 / positions as f64,
        parquet_bytes_per_position: parquet_bytes as f64 / positions as f64,
    })
}
