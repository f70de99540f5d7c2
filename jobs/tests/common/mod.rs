//! What the jobs' integration tests share: a scratch local lake with a runtime, input files
//! beside it, and snapshots of everything stored.
#![allow(dead_code)] // each test file uses its own subset

use lakefish_ingest::ingest_binpack::{IngestSummary, ingest_binpack};
use lakefish_jobs::{JobContext, JobError, Lake};
use lakefish_schemas::{DatasetName, IngestBinpackSpec, JobId};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

#[allow(unused_imports)] // not every test file reads the samples
pub(crate) use lakefish_testkit::shared_data as shared;

/// Every file under `root` (keys relative to it) with its bytes; `jobs/` records skipped.
pub(crate) fn snapshot_dir(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let key = p.strip_prefix(root).unwrap().display().to_string();
            if !key.starts_with("jobs/") {
                out.insert(key, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

pub(crate) struct LakeFixture {
    pub dir: tempfile::TempDir,
    pub lake: Lake,
    pub rt: tokio::runtime::Runtime,
}

impl LakeFixture {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let lake = Lake::open(dir.path().join("lake").to_str().unwrap(), &HashMap::new()).unwrap();
        let rt = tokio::runtime::Runtime::new().unwrap();
        LakeFixture { dir, lake, rt }
    }

    pub(crate) fn ctx(&self) -> JobContext {
        JobContext::new(self.lake.clone(), self.rt.handle().clone())
    }

    /// Writes an input file beside the lake and returns its path.
    pub(crate) fn file(&self, name: &str, bytes: &[u8]) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p.to_str().unwrap().to_string()
    }

    pub(crate) fn ingest(
        &self,
        inputs: &[String],
        dataset: &str,
        rows_per_part: u64,
    ) -> Result<IngestSummary, JobError> {
        let spec = IngestBinpackSpec {
            max_game_bytes: None,
            inputs: inputs.to_vec(),
            dataset: DatasetName::new(dataset).unwrap(),
            rows_per_part,
        };
        ingest_binpack(&self.ctx(), &JobId::new(), &spec)
    }

    /// Writes `bytes` as `<dataset>.binpack` and ingests it; panics on failure.
    pub(crate) fn ingest_bytes(
        &self,
        bytes: &[u8],
        dataset: &str,
        rows_per_part: u64,
    ) -> IngestSummary {
        let input = self.file(&format!("{dataset}.binpack"), bytes);
        self.ingest(&[input], dataset, rows_per_part).unwrap()
    }

    /// A lake path on disk.
    pub(crate) fn path(&self, key: &str) -> PathBuf {
        self.dir.path().join("lake").join(key)
    }

    /// Everything stored in the lake except job records.
    pub(crate) fn snapshot(&self) -> BTreeMap<String, Vec<u8>> {
        snapshot_dir(&self.dir.path().join("lake"))
    }
}
