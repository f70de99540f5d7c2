//! lakefish's jobs and the lake they work on.
//!
//! Each job is a plain function over a [`JobContext`]: it reads inputs, writes the lake and
//! reports [`Progress`](lakefish_schemas::Progress) as data. The CLI calls them in-process;
//! workers call them through [`runner::run_queued_job`], which also keeps the job record.
//!
//! Architecture invariant: nothing here knows about HTTP or the queue implementation.

pub mod bench;
pub mod binpack;
pub mod context;
pub mod datagen;
pub mod dataset_writer;
pub mod datasets;
pub mod error;
pub mod ingest_binpack;
pub mod ingest_pgn;
pub mod input;
pub mod lake;
pub mod masks;
pub mod metrics;
pub mod nets;
pub mod parts;
pub mod pgn;
pub mod pipeline;
pub mod records;
pub mod runner;
pub mod shuffle;
pub mod sprt;

pub use context::{Hooks, JobContext, JobSubmitter, ProgressSink, Trainer};
pub use error::JobError;
pub use lake::Lake;
