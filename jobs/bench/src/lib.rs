//! Benchmarks of lakefish's hot paths, each reporting a ratio against a reference measured
//! in the same run (see docs/BENCHMARKS.md). `lakefish bench ...` calls these; nothing in
//! the production crates depends on this one.

pub mod bullet;
pub mod cli;
pub mod jobs;
pub mod load;
pub mod metastore;
pub mod train;
