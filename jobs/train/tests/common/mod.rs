//! The lake fixture the trainer's tests share: a quiet-masked, shuffled dataset.

// Each test binary compiles this module and uses a different part of it.
#![allow(dead_code)]

use lakefish_ingest::binpack::synthetic_binpack;
use lakefish_jobs::{JobContext, Lake};
use lakefish_schemas::TrainSpec;
use lakefish_testkit::copy_dir;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Mutex;

pub(crate) struct Fixture {
    pub _dir: tempfile::TempDir,
    pub ctx: JobContext,
    pub rt: tokio::runtime::Runtime,
    pub shuffle: lakefish_schemas::names::ShuffleId,
}

/// A lake with a quiet-masked, shuffled dataset: the shared sample binpack when present,
/// else (or with LAKEFISH_TESTS_WITHOUT_SHARED set) generated games. The ingest, mask and
/// shuffle run once per chunk count in a test binary; each test gets its own copy of that
/// lake, so what one test writes (runs, nets) never reaches another.
pub(crate) fn fixture(chunks: u32) -> Fixture {
    let template = template_lake(chunks);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("lake");
    copy_dir(&template.0, &root);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let lake = Lake::open(root.to_str().unwrap(), &HashMap::new()).unwrap();
    let ctx = JobContext::new(lake, rt.handle().clone()).with_threads(2);
    Fixture {
        _dir: dir,
        ctx,
        rt,
        shuffle: template.1,
    }
}

/// The prepared lake for `chunks` (directory, shuffle id), made on first use. Its
/// directories are kept until the test binary exits.
fn template_lake(chunks: u32) -> (PathBuf, lakefish_schemas::names::ShuffleId) {
    static TEMPLATES: Mutex<BTreeMap<u32, (PathBuf, lakefish_schemas::names::ShuffleId)>> =
        Mutex::new(BTreeMap::new());
    let mut all = TEMPLATES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(t) = all.get(&chunks) {
        return t.clone();
    }
    let dir = tempfile::tempdir().unwrap().keep();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let root = dir.join("lake");
    let lake = Lake::open(root.to_str().unwrap(), &HashMap::new()).unwrap();
    let ctx = JobContext::new(lake, rt.handle().clone()).with_threads(2);
    let input = if let Some(shared) = lakefish_testkit::shared_data("binpack/small.binpack") {
        shared
    } else {
        let p = dir.join("games.binpack");
        std::fs::write(&p, synthetic_binpack(3000, 5)).unwrap();
        p
    };
    let m =
        lakefish_jobs::shuffle::quiet_shuffle(&ctx, input.to_str().unwrap(), "train", chunks, 3)
            .unwrap();
    let t = (root, m.id);
    all.insert(chunks, t.clone());
    t
}

impl Fixture {
    /// The committed manifest of the fixture's shuffle.
    pub(crate) fn shuffle_manifest(&self) -> lakefish_schemas::ShuffleManifest {
        self.rt
            .block_on(lakefish_jobs::shuffle::read_shuffle_manifest(
                &self.ctx.lake,
                &self.shuffle,
            ))
            .unwrap()
            .unwrap()
    }
}

pub(crate) fn spec(shuffle: &str) -> TrainSpec {
    serde_json::from_value(serde_json::json!({
        "shuffle": shuffle, "arch": "32x2-8", "batch_size": 1024, "device": "cpu", "seed": 11
    }))
    .unwrap()
}
