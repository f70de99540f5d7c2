//! What users do to the lake besides submitting work: promotions racing each other keep the
//! pointer and its history in agreement; an ended SPRT is not listed as running again by a
//! late count; cancels are refused where they would break a chain.

use lakefish_jobs::nets::{Promotion, best_history, read_best, set_best};
use lakefish_lake::records::JobStore;
use lakefish_schemas::{JobId, JobSpec, JobState, SprtState, SprtStatus};

mod common;
use common::LakeFixture;

/// A registered net's manifest, written by hand (no file: promotions read only manifests).
fn register(fx: &LakeFixture, name: &str) {
    let manifest = serde_json::json!({
        "name": name, "sha256": "0".repeat(64), "bytes": 1, "features": "all768",
        "arch": "32x2-8", "arch_hash": "x", "description": "", "run": "run-000000000001",
        "checkpoint": "step-000000001.ot", "step": 1, "shuffle": "sh-1", "datasets": [],
        "mask": "", "parent": null, "created": "2026-11-28T00:00:00Z",
        "quantization": {"positions": 1, "mean_abs_cp": 0.0, "p99_abs_cp": 0.0,
            "max_abs_cp": 0.0, "mean_abs_internal": 0.0, "p99_abs_internal": 0.0}
    });
    let (_, key) = lakefish_schemas::nets::net_keys(name);
    fx.rt
        .block_on(fx.lake.put(&key, serde_json::to_vec(&manifest).unwrap()))
        .unwrap();
}

#[test]
fn promotions_at_once_leave_the_pointer_and_the_history_in_agreement() {
    let fx = LakeFixture::new();
    let nets = [
        "nn-00000000000a.nnue",
        "nn-00000000000b.nnue",
        "nn-00000000000c.nnue",
    ];
    for n in nets {
        register(&fx, n);
    }
    let promoted = fx.rt.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..12 {
            let lake = fx.lake.clone();
            let name = nets[i % 3].to_string();
            tasks.push(tokio::spawn(async move {
                let why = Promotion {
                    reason: format!("try {i}"),
                    by: "test".into(),
                    measured: None,
                };
                set_best(&lake, &name, why).await
            }));
        }
        let mut ok = 0;
        for t in tasks {
            match t.await.unwrap() {
                Ok(_) => ok += 1,
                Err(lakefish_jobs::JobError::Conflict(m)) => assert!(m.contains("already"), "{m}"),
                Err(e) => panic!("{e}"),
            }
        }
        ok
    });
    let history = fx.rt.block_on(best_history(&fx.lake)).unwrap();
    let best = fx.rt.block_on(read_best(&fx.lake)).unwrap().unwrap();
    assert_eq!(
        history.len(),
        promoted,
        "one record per promotion that landed"
    );
    assert_eq!(
        history[0].name, best.name,
        "the newest record is the pointer"
    );
    let numbers: Vec<u64> = history.iter().map(|b| b.number).collect();
    let want: Vec<u64> = (1..=promoted as u64).rev().collect();
    assert_eq!(numbers, want, "numbered in the order they landed");
    // Each record replaced the one before it.
    for w in history.windows(2) {
        assert_eq!(w[0].previous.as_deref(), Some(w[1].name.as_str()), "{w:?}");
        assert_ne!(w[0].name, w[1].name);
    }
    assert_eq!(history.last().unwrap().previous, None);
    // The best again is a conflict that changes nothing.
    let again = fx
        .rt
        .block_on(set_best(&fx.lake, &best.name, Promotion::default()));
    assert!(matches!(again, Err(lakefish_jobs::JobError::Conflict(_))));
    assert_eq!(
        fx.rt.block_on(best_history(&fx.lake)).unwrap().len(),
        promoted
    );
}

fn status(state: &str, batches: u64) -> SprtStatus {
    serde_json::from_value(serde_json::json!({
        "id": "sprt-000000000001", "state": state,
        "new": {"name": "nn-00000000000a.nnue", "requested": "nn-00000000000a.nnue"},
        "base": {"name": "classical", "requested": "classical"},
        "elo0": 0.0, "elo1": 2.0, "model": "normalized", "llr": 0.1, "lower": -2.9,
        "upper": 2.9, "wins": 1, "draws": 0, "losses": 1, "penta": [0, 0, 1, 0, 0],
        "games": 2 * batches, "batches": batches, "llr_history": [], "elo": null,
        "spec": {"new": "a", "base": "classical", "book": "lake:raw/books/b.epd",
                 "batch_pairs": 1, "max_pairs": 100},
        "created": "2026-11-26T00:00:00Z"
    }))
    .unwrap()
}

#[test]
fn a_stopped_test_stays_stopped_in_the_lists_whatever_a_late_batch_counted() {
    let mut fx = LakeFixture::new();
    let spec = lakefish_metastore::MetastoreSpec::Sqlite(
        fx.dir.path().join("meta.sqlite").display().to_string(),
    );
    let store = fx
        .rt
        .block_on(lakefish_metastore::SqlRecords::open(&spec))
        .unwrap();
    fx.lake = fx
        .lake
        .clone()
        .with_catalog(lakefish_lake::catalog::CatalogHandle(std::sync::Arc::new(
            store,
        )));
    let index = |s: &SprtStatus| {
        fx.rt
            .block_on(lakefish_jobs::sprt::index_status(&fx.lake, s))
            .unwrap()
    };
    // Stopped after 2 batches; a batch that had counted 5 indexes `running` afterwards.
    index(&status("stopped", 2));
    index(&status("running", 5));
    let list = |state| {
        fx.rt
            .block_on(lakefish_jobs::sprt::list(&fx.lake, None, state))
            .unwrap()
    };
    let all = list(None);
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].state, SprtState::Stopped);
    assert!(list(Some(SprtState::Running)).is_empty());
}

#[test]
fn lakefish_s_own_tasks_and_finished_jobs_cannot_be_cancelled() {
    let fx = LakeFixture::new();
    let store = JobStore::new(fx.lake.clone());
    let batch: JobSpec = serde_json::from_value(serde_json::json!({
        "kind": "sprt_batch", "spec": {"sprt": "sprt-000000000001", "index": 0}
    }))
    .unwrap();
    let id = JobId::new();
    fx.rt
        .block_on(store.put(&JobStore::new_record(id.clone(), batch)))
        .unwrap();
    let err = fx
        .rt
        .block_on(lakefish_jobs::runner::cancel_job(&store, &id, "someone"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("stop what it serves"), "{err}");
    let rec = fx.rt.block_on(store.get(&id)).unwrap().unwrap();
    assert_eq!((rec.state, rec.cancel), (JobState::Queued, None));

    // A running job's request survives the worker's next progress write.
    let datagen: JobSpec = serde_json::from_value(serde_json::json!({
        "kind": "datagen", "spec": {"net": "classical", "dataset": "d", "games": 1}
    }))
    .unwrap();
    let id = JobId::new();
    let mut running = JobStore::new_record(id.clone(), datagen);
    running.state = JobState::Running;
    running.attempts = 1;
    fx.rt.block_on(store.put(&running)).unwrap();
    let asked = fx
        .rt
        .block_on(lakefish_jobs::runner::cancel_job(&store, &id, "ana"))
        .unwrap();
    assert_eq!(asked.state, JobState::Running);
    running.progress.done = 3;
    let stored = fx
        .rt
        .block_on(store.put_unless_succeeded(&running))
        .unwrap();
    assert_eq!(stored.progress.done, 3);
    assert_eq!(stored.cancel.map(|c| c.by).as_deref(), Some("ana"));
}
