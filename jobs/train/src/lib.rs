//! The NNUE trainer: shuffled chunks from the lake → sparse features (`loader`) → a libtorch
//! model (`model`) trained with checkpoints that resume exactly (`train`).
//!
//! Architecture invariant: the only crate that links libtorch. Workers reach it through
//! [`LakefishTrainer`], the `lakefish_jobs::Trainer` hook, so `lakefish-jobs` stays free of it.

pub mod adam;
pub mod cuda;
pub mod fused;
pub mod loader;
pub mod model;
pub mod quantize;
mod recipes;
pub mod sparse;
pub mod spec_model;
pub mod stockfish_model;
pub mod train;

use lakefish_jobs::{JobContext, JobError};
use lakefish_schemas::{JobId, TrainSpec};

/// Seeds libtorch's random generator and draws under one lock. The generator is one per
/// process: a run seeding it while another draws its initial weights (tests run in parallel, a
/// worker may train two jobs at once) would give the same seed other weights, and a resumed
/// run would then differ from one trained straight through.
pub(crate) fn seeded<T>(seed: i64, draw: impl FnOnce() -> T) -> T {
    static GENERATOR: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _held = GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
    tch::manual_seed(seed);
    draw()
}

/// Keeps libtorch's large tensors in the process heap between training steps.
///
/// glibc serves allocations above its mmap threshold (at most 32 MiB, usually far less) with
/// a fresh `mmap` and returns them with `munmap` on free. A CPU step allocates and frees
/// tensors of tens of MiB (activations, gradients) every step, so each step faulted in and
/// cleared every page again: about a third of a halfkp step (docs/BENCHMARKS.md, "Sparse on
/// the CPU"). With mmap off and the trim threshold high, freed blocks are reused as they are.
/// The process keeps its peak heap until exit, which a training worker reaches anyway on its
/// next step. Called once per process, before training; idempotent.
pub fn keep_tensors_in_heap() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: mallopt only sets allocator parameters; any thread may call it at any time.
        #[cfg(target_env = "gnu")]
        unsafe {
            libc::mallopt(libc::M_MMAP_MAX, 0);
            libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
        }
    });
}

#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error("chunk {chunk}: {reason}")]
    Data { chunk: String, reason: String },
    #[error(transparent)]
    Arch(#[from] lakefish_engine::nnue::ArchError),
    #[error("{0}")]
    Spec(String),
    #[error("checkpoint {key}: {reason}")]
    Checkpoint { key: String, reason: String },
    #[error("tensor {tensor}: {reason}; nothing was written")]
    Quantize { tensor: String, reason: String },
    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),
    #[error(transparent)]
    Job(#[from] JobError),
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<TrainError> for JobError {
    fn from(e: TrainError) -> JobError {
        match e {
            TrainError::Job(j) => j,
            TrainError::Internal(m) => JobError::Internal(m),
            other => JobError::Failed(other.to_string()),
        }
    }
}

/// The trainer as the job runner sees it.
pub struct LakefishTrainer;

impl lakefish_jobs::Trainer for LakefishTrainer {
    fn train(
        &self,
        ctx: &JobContext,
        id: &JobId,
        spec: &TrainSpec,
    ) -> Result<serde_json::Value, JobError> {
        let record = train::train(ctx, id, spec)?;
        Ok(serde_json::to_value(record)?)
    }

    fn quantize(
        &self,
        ctx: &JobContext,
        spec: &lakefish_schemas::QuantizeSpec,
    ) -> Result<serde_json::Value, JobError> {
        // Before any libtorch call: libtorch answers "is there CUDA?" once per process, and a
        // CPU job asking first would leave a later train job in this worker without the GPU.
        let _ = cuda::load_backend();
        let report = quantize::quantize(ctx, spec)?;
        Ok(serde_json::to_value(report)?)
    }
}
