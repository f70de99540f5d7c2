//! The lakefish service as a library: the REST API (`api::router(state)`), bearer tokens,
//! the dashboard, the queue (apalis over SQLite or Redis) with its workers, and the
//! pipeline scheduler. The `lakefish` binary (`services/cli`) wires them to the CLI.
//!
//! Architecture invariant: no domain logic here (handlers call `lakefish-jobs`), and no
//! dependency on `lakefish-train`: the API never links libtorch; workers get the trainer
//! as a `Trainer` hook from the binary (`tests/tests/architecture.rs` checks both).

pub mod actions;
pub mod api;
pub mod auth;
pub mod bodies;
pub mod charts;
pub mod dashboard;
pub mod dataset_page;
pub mod engines_api;
pub mod error;
pub mod experiment_page;
pub mod experiments_api;
pub mod extract;
pub mod guard;
pub mod http;
pub mod job_page;
pub mod list_pages;
pub mod lists;
pub mod openapi;
pub mod queue;
pub mod scheduler;
pub mod session;
pub mod space_page;
pub mod sprt_api;
pub mod ui_actions;

pub use api::{AppState, router};
pub use queue::{Lane, Queue, WorkerSpec};
