//! Fuzzing without nightly or cargo-fuzz: seeded inputs, mutated from valid ones the crates
//! write themselves, fed to every parser that reads bytes from outside (binpack chunks and
//! files, PGN blocks, `[%eval]`, `.nnue` files, UCI sessions, FENs, books, job specs, SPRT
//! time controls, `lakefish.toml`, match sides, UCI `info` lines).
//!
//! `cargo test -p lakefish-fuzz` runs a bounded number of inputs per target; set
//! `LAKEFISH_FUZZ_ITERS` (inputs per target), `LAKEFISH_FUZZ_SEED` and `LAKEFISH_FUZZ_TARGET`
//! (one target) to run longer by hand, `LAKEFISH_FUZZ_INPUT=file` to replay a saved input.

pub mod engine_targets;
pub mod harness;
pub mod mutate;
pub mod targets;

pub use harness::{Stats, Target, Verdict, fuzz, run_one};
