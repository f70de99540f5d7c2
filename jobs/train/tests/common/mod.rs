//! The lake fixture the trainer's tests share: a quiet-masked, shuffled dataset.

// Each test binary compiles this module and uses a different part of it.
#![allow(dead_code)]

use lakefish_jobs::binpack::synthetic_binpack;
use lakefish_jobs::{JobContext, Lake};
use lakefish_schemas::TrainSpec;
use std::collections::HashMap;
use std::path::Path;

pub struct Fixture {
    pub _dir: tempfile::TempDir,
    pub ctx: JobContext,
    pub rt: tokio::runtime::Runtime,
    pub shuffle: String,
}

/// A lake with a quiet-masked, shuffled dataset: the shared sample binpack when present,
/// else (or with LAKEFISH_TEST_SYNTHETIC set) generated games.
pub fn fixture(chunks: u32) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let lake = Lake::open(dir.path().join("lake").to_str().unwrap(), &HashMap::new()).unwrap();
    let ctx = JobContext::new(lake, rt.handle().clone()).with_threads(2);
    let shared =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/binpack/small.binpack");
    let input = if shared.exists() && std::env::var_os("LAKEFISH_TEST_SYNTHETIC").is_none() {
        shared
    } else {
        let p = dir.path().join("games.binpack");
        std::fs::write(&p, synthetic_binpack(3000, 5)).unwrap();
        p
    };
    let m = lakefish_jobs::bench::quiet_shuffle(&ctx, input.to_str().unwrap(), "train", chunks, 3)
        .unwrap();
    Fixture {
        _dir: dir,
        ctx,
        rt,
        shuffle: m.id,
    }
}

impl Fixture {
    /// The committed manifest of the fixture's shuffle.
    pub fn shuffle_manifest(&self) -> lakefish_schemas::ShuffleManifest {
        self.rt
            .block_on(lakefish_jobs::shuffle::read_shuffle_manifest(
                &self.ctx.lake,
                &self.shuffle,
            ))
            .unwrap()
            .unwrap()
    }
}

pub fn spec(shuffle: &str) -> TrainSpec {
    serde_json::from_value(serde_json::json!({
        "shuffle": shuffle, "arch": "32x2-8", "batch_size": 1024, "device": "cpu", "seed": 11
    }))
    .unwrap()
}
