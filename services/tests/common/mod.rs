//! The HTTP app in-process for the tests of this crate: `router(state)` over an in-memory
//! lake and a SQLite queue in a scratch directory.

use lakefish_lake::Lake;
use lakefish_lake::records::JobStore;
use lakefish_schemas::config::Config;
use lakefish_services::{AppState, Queue};
use std::sync::Arc;

pub(crate) struct App {
    pub(crate) state: AppState,
    _dir: tempfile::TempDir,
}

pub(crate) async fn app(config: Config) -> App {
    let dir = tempfile::tempdir().unwrap();
    let lake = Lake::in_memory();
    let queue = Queue::sqlite(dir.path().join("queue.sqlite").to_str().unwrap())
        .await
        .unwrap();
    App {
        state: AppState {
            jobs: JobStore::new(lake.clone()),
            lake,
            queue,
            config: Arc::new(config),
        },
        _dir: dir,
    }
}
