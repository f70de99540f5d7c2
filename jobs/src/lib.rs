//! lakefish's jobs over the lake: quiet masks, the shuffle, the net registry (nets and
//! training runs), SPRT orchestration, self-play data, pipelines, metrics and the runner.
//!
//! Each job is a plain function over a [`JobContext`]: it reads inputs, writes the lake and
//! reports [`Progress`](lakefish_schemas::Progress) as data. Each kind of the registry
//! ([`lakefish_schemas::job_kinds`]) implements [`Job`] beside its function; the CLI runs them
//! in-process through [`runner::run_spec`], workers through [`runner::run_queued_job`], which
//! also keeps the job record.
//! The lake and the job contract are `lakefish-lake`; the readers are `lakefish-ingest`;
//! training and quantizing reach `lakefish-train` only through the [`Trainer`] hook.
//!
//! Architecture invariant: nothing here knows about HTTP, the queue implementation or
//! libtorch (no dependency on axum, apalis or lakefish-train; `tests/tests/architecture.rs`).

pub mod admission;
pub mod catalog;
pub mod chunks;
pub mod datagen;
pub mod engines;
pub mod experiment;
pub mod export;
pub mod foreign_nets;
pub mod gauntlet;
pub mod gc;
pub mod masks;
pub mod metrics;
pub mod nets;
pub mod pipeline;
pub mod profile;
pub mod remove;
pub mod rows;
pub mod runner;
pub mod shuffle;
pub mod space;
pub mod sprt;
pub mod transform;

pub use lakefish_lake::{
    ErrorCode, Hooks, JobContext, JobError, JobSubmitter, Lake, Mode, ProgressSink, Trainer,
};
pub use runner::Job;
