//! A job delivered twice, or re-delivered after its worker died mid-way, leaves the lake
//! exactly as one clean run does.

use lakefish_ingest::binpack::synthetic_binpack;
use lakefish_jobs::Lake;
use lakefish_jobs::runner::run_queued_job;
use lakefish_lake::records::JobStore;
use lakefish_schemas::{DatasetName, IngestBinpackSpec, JobId, JobSpec, JobState, QueuedJob};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

/// A queue that takes nothing (these jobs fan nothing out).
struct NoQueue;

impl lakefish_jobs::JobSubmitter for NoQueue {
    fn submit(&self, _: JobId, _: JobSpec) -> Result<(), lakefish_jobs::JobError> {
        Err(lakefish_jobs::JobError::Internal("no queue here".into()))
    }
}

/// A worker's hooks: the queued mode, with the lake's records as the deployment's store.
fn queued(lake: &Lake) -> lakefish_jobs::Hooks {
    lakefish_jobs::Hooks {
        mode: lakefish_jobs::Mode::Queued {
            submitter: Arc::new(NoQueue),
            records: JobStore::new(lake.clone()),
        },
        ..Default::default()
    }
}

mod common;

fn assert_same(a: &BTreeMap<String, Vec<u8>>, b: &BTreeMap<String, Vec<u8>>) {
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (k, v) in a {
        assert!(v == &b[k], "{k} differs");
    }
}

/// The lake's files (job records aside), with the one field allowed to differ between runs
/// (the manifest's commit time) blanked.
fn files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = common::snapshot_dir(root);
    for (key, bytes) in out.iter_mut() {
        if key.ends_with("_manifest.json") {
            let mut v: serde_json::Value = serde_json::from_slice(bytes).unwrap();
            v["created"] = serde_json::Value::Null;
            *bytes = serde_json::to_vec(&v).unwrap();
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn redelivery_after_a_dead_worker_equals_one_clean_run() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.binpack");
    std::fs::write(
        &input,
        [synthetic_binpack(30, 1), synthetic_binpack(30, 2)].concat(),
    )
    .unwrap();
    let job = QueuedJob::new(
        JobId::new(),
        &JobSpec::IngestBinpack(IngestBinpackSpec {
            max_game_bytes: None,
            inputs: vec![input.to_str().unwrap().into()],
            dataset: DatasetName::new("d").unwrap(),
            rows_per_part: 500,
        }),
    );

    // Reference: one clean run.
    let clean_root = dir.path().join("clean");
    let clean = Lake::open(clean_root.to_str().unwrap(), &HashMap::new()).unwrap();
    run_queued_job(clean.clone(), job.clone(), "w1", 2, false, queued(&clean))
        .await
        .unwrap();

    // A worker died mid-job: its record says running, a part is half there (as a different,
    // truncated object) and a part from some other attempt lingers; no manifest.
    let crashed_root = dir.path().join("crashed");
    let crashed = Lake::open(crashed_root.to_str().unwrap(), &HashMap::new()).unwrap();
    let store = JobStore::new(crashed.clone());
    let mut rec = JobStore::new_record(job.id.clone(), job.spec().unwrap());
    rec.state = JobState::Running;
    rec.attempts = 1;
    store.put(&rec).await.unwrap();
    let prefix = "positions/source=binpack/dataset=d";
    let first_part = std::fs::read(clean_root.join(prefix).join("part-00000.parquet")).unwrap();
    crashed
        .put(
            &format!("{prefix}/part-00000.parquet"),
            first_part[..first_part.len() / 2].to_vec(),
        )
        .await
        .unwrap();
    crashed
        .put(&format!("{prefix}/part-00099.parquet"), b"stale".to_vec())
        .await
        .unwrap();

    run_queued_job(
        crashed.clone(),
        job.clone(),
        "w2",
        2,
        false,
        queued(&crashed),
    )
    .await
    .unwrap();
    let rec = store.get(&job.id).await.unwrap().unwrap();
    assert_eq!((rec.state, rec.attempts), (JobState::Succeeded, 2));
    assert_same(&files(&crashed_root), &files(&clean_root));

    // Delivered yet again after success: nothing runs, nothing changes.
    let before = files(&crashed_root);
    run_queued_job(
        crashed.clone(),
        job.clone(),
        "w3",
        2,
        false,
        queued(&crashed),
    )
    .await
    .unwrap();
    assert_same(&files(&crashed_root), &before);
    assert_eq!(store.get(&job.id).await.unwrap().unwrap().attempts, 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_job_records_why_and_touches_no_data() {
    let dir = tempfile::tempdir().unwrap();
    let lake = Lake::open(dir.path().join("lake").to_str().unwrap(), &HashMap::new()).unwrap();
    let garbage = dir.path().join("garbage.binpack");
    std::fs::write(&garbage, vec![0xAB; 10_000]).unwrap();
    let job = QueuedJob::new(
        JobId::new(),
        &JobSpec::IngestBinpack(IngestBinpackSpec {
            max_game_bytes: None,
            inputs: vec![garbage.to_str().unwrap().into()],
            dataset: DatasetName::new("g").unwrap(),
            rows_per_part: 500,
        }),
    );
    let err = run_queued_job(lake.clone(), job.clone(), "w", 1, true, queued(&lake))
        .await
        .unwrap_err();
    assert!(!err.is_transient(), "bad input is not retried: {err}");
    let rec = JobStore::new(lake.clone())
        .get(&job.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.state, JobState::Failed);
    let why = rec.error.unwrap();
    assert!(
        why.contains("garbage.binpack") && why.contains("byte offset 0"),
        "{why}"
    );
    assert!(lake.list("positions").await.unwrap().is_empty());
}

/// A queue can be written by other clients than the API, so a worker checks `[inputs]
/// local_roots` again when it opens a file: a queued job naming a file outside them fails
/// for good (not retried), naming the rule, and nothing of the file reaches its record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_refuse_local_files_outside_their_roots() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("data");
    std::fs::create_dir(&root).unwrap();
    let outside = dir.path().join("secret.binpack");
    std::fs::write(&outside, synthetic_binpack(3, 1)).unwrap();
    let inside = root.join("ok.binpack");
    std::fs::write(&inside, synthetic_binpack(3, 1)).unwrap();
    let lake = Lake::open(dir.path().join("lake").to_str().unwrap(), &HashMap::new()).unwrap();
    let hooks = || lakefish_jobs::Hooks {
        inputs: lakefish_lake::input::InputPolicy::confined(&[root.to_str().unwrap().to_string()]),
        ..queued(&lake)
    };
    let job = |input: &Path, dataset: &str| {
        let spec = JobSpec::IngestBinpack(IngestBinpackSpec {
            max_game_bytes: None,
            inputs: vec![input.to_str().unwrap().to_string()],
            dataset: DatasetName::new(dataset).unwrap(),
            rows_per_part: 1_000_000,
        });
        QueuedJob::new(JobId::new(), &spec)
    };
    let refused = job(&outside, "outside");
    let err = run_queued_job(lake.clone(), refused.clone(), "w", 2, true, hooks())
        .await
        .unwrap_err();
    assert!(!err.is_transient(), "{err}");
    let rec = JobStore::new(lake.clone())
        .get(&refused.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.state, JobState::Failed);
    assert!(
        rec.error
            .as_deref()
            .unwrap()
            .contains("[inputs] local_roots"),
        "{rec:?}"
    );
    assert!(lake.list("positions").await.unwrap().is_empty());

    let accepted = job(&inside, "inside");
    run_queued_job(lake.clone(), accepted, "w", 2, true, hooks())
        .await
        .unwrap();
    assert!(!lake.list("positions").await.unwrap().is_empty());
}

/// A queued job needs the queue's record store: a process that gives none is refused before
/// anything runs, instead of keeping records in the lake where nobody reads them (issue 36).
#[tokio::test(flavor = "multi_thread")]
async fn a_queued_job_without_a_record_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let lake = Lake::open(dir.path().join("lake").to_str().unwrap(), &HashMap::new()).unwrap();
    let job = QueuedJob::new(
        JobId::new(),
        &JobSpec::IngestBinpack(IngestBinpackSpec {
            max_game_bytes: None,
            inputs: vec!["lake:raw/binpack/x.binpack".into()],
            dataset: DatasetName::new("x").unwrap(),
            rows_per_part: 500,
        }),
    );
    let err = run_queued_job(lake.clone(), job, "w", 1, true, Default::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("Mode::Queued"), "{err}");
    assert!(
        lake.list("jobs").await.unwrap().is_empty(),
        "a record was kept"
    );
}
