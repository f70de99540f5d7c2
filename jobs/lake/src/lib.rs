//! The lake and the contract every job runs under.
//!
//! - [`Lake`]: object storage (local directory, S3, memory) with conditional writes.
//! - [`input::Input`]: a job's input file, local or `lake:`, read by random access.
//! - [`records`]: job records; [`datasets`]: dataset manifests; [`catalog`]: the index of
//!   what the lake holds, kept in the metastore.
//! - [`parts`]: the one codec of the `positions` table (and the `games` table) in Parquet.
//! - [`JobContext`], [`JobError`]: what a job is given and how it fails.
//!
//! Architecture invariant: nothing here knows a file format other than Parquet, a job
//! kind, HTTP, the queue or libtorch.

pub mod catalog;
pub mod context;
pub mod datasets;
pub mod error;
pub mod faults;
pub mod input;
pub mod lake;
pub mod parts;
pub mod records;
pub mod space;

pub use context::{Hooks, JobContext, JobSubmitter, Mode, NoProgress, ProgressSink, Trainer};
pub use error::{ErrorCode, JobError};
pub use lake::Lake;
