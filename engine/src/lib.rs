//! Chess knowledge for lakefish, independent of storage and async runtimes.
//!
//! Today it holds the rules checks the lake's ingest jobs need. Feature sets, NNUE inference,
//! search and UCI land here next (see ARCHITECTURE.md).
//!
//! Architecture invariant: no tokio, no object_store, no job or HTTP types in this crate.

pub mod bench;
pub mod book;
pub mod bytes;
pub mod datagen;
pub mod eval;
pub mod features;
pub mod fen;
pub mod layout;
pub mod matchplay;
pub mod nnue;
pub mod packed_board;
pub mod qleaf;
pub mod random_games;
pub mod rating;
pub mod rules;
pub mod scores;
pub mod search;
pub mod simd;
pub mod spec_net;
pub mod sprt;
pub mod stockfish_net;
pub mod uci;
pub mod uci_client;
