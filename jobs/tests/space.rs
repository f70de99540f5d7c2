//! `lakefish du` and `gc` (issue 45): the lake's space by kind and item agrees with a walk of the
//! directory the lake lives in; `gc` removes old checkpoints and nothing anything needs.

use lakefish_ingest::binpack::synthetic_binpack;
use lakefish_jobs::space::{SpaceKind, usage};
use lakefish_schemas::{DatasetName, JobId, MaskDefinition, MaskSpec, Source};

mod common;
use common::LakeFixture;

#[test]
fn space_by_kind_and_item_agrees_with_the_files() {
    let fx = LakeFixture::new();
    fx.ingest_bytes(&synthetic_binpack(40, 1), "a", 1_000);
    fx.ingest_bytes(&synthetic_binpack(80, 2), "b", 1_000);
    let spec = MaskSpec {
        dataset: DatasetName::new("b").unwrap(),
        source: Source::Binpack,
        definition: MaskDefinition::quiet(),
    };
    lakefish_jobs::masks::mask_dataset(&fx.ctx(), &JobId::new(), &spec).unwrap();
    let u = fx.rt.block_on(usage(&fx.lake)).unwrap();

    // Every file of the lake (job records included), walked here.
    let root = fx.path("");
    let mut files: Vec<(String, u64)> = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if !p.to_string_lossy().contains('#') {
                let key = p.strip_prefix(&root).unwrap().display().to_string();
                files.push((key, std::fs::metadata(&p).unwrap().len()));
            }
        }
    }
    assert_eq!(u.objects as usize, files.len());
    assert_eq!(u.bytes, files.iter().map(|(_, n)| n).sum::<u64>());
    let of = |prefix: &str| -> u64 {
        files
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(_, n)| n)
            .sum()
    };
    let kind = |k: SpaceKind| u.kinds.iter().find(|t| t.kind == k).unwrap().clone();
    assert_eq!(kind(SpaceKind::Datasets).bytes, of("positions/"));
    assert_eq!(kind(SpaceKind::Datasets).items, 2);
    assert_eq!(kind(SpaceKind::Masks).bytes, of("masks/"));
    let b = u.items.iter().find(|i| i.name == "binpack/b").unwrap();
    assert_eq!(b.bytes, of("positions/source=binpack/dataset=b/"));
    assert!(
        b.bytes
            > u.items
                .iter()
                .find(|i| i.name == "binpack/a")
                .unwrap()
                .bytes
    );
    assert!(
        u.items.windows(2).all(|w| w[0].bytes >= w[1].bytes),
        "largest first"
    );
}

/// A finished run with six checkpoints, one a registered net came from; an unfinished run;
/// a finished run a queued job names.
#[test]
fn gc_removes_only_what_nothing_needs() {
    use lakefish_jobs::gc::{GcPolicy, apply, plan};
    use lakefish_lake::records::JobStore;
    let fx = LakeFixture::new();
    let jobs = JobStore::new(fx.lake.clone());
    let run_json = |id: &str, checkpoints: &[u64], finished: bool| {
        let mut spec = serde_json::json!({"shuffle": "sh-000000000001", "arch": "32x2-8"});
        spec["features"] = "all768".into();
        serde_json::json!({
            "id": id, "spec": spec, "device": "cpu", "step": checkpoints.last().copied().unwrap_or(0),
            "epoch": 1, "checkpoints": checkpoints.iter().map(|s| format!("step-{s:09}.ot")).collect::<Vec<_>>(),
            "train_positions": 1, "val_positions": 1, "val_loss": [], "material_val_loss": null,
            "finished": finished, "resumed_at": [], "created": "2026-11-28T00:00:00Z", "updated": "2026-11-28T00:00:00Z"
        })
    };
    let put = |key: &str, bytes: Vec<u8>| fx.rt.block_on(fx.lake.put(key, bytes)).unwrap();
    let steps = [10, 20, 30, 40, 50, 60];
    for (id, finished) in [
        ("run-00000000000a", true),
        ("run-00000000000b", false),
        ("run-00000000000c", true),
    ] {
        put(
            &format!("runs/{id}/run.json"),
            serde_json::to_vec(&run_json(id, &steps, finished)).unwrap(),
        );
        for s in steps {
            put(
                &format!("runs/{id}/checkpoints/step-{s:09}.ot"),
                vec![7; 1000],
            );
        }
    }
    register_net(&fx, "sh-000000000001", &[], "");
    let quantize = lakefish_schemas::JobSpec::from_request(
        br#"{"kind":"quantize","spec":{"run":"run-00000000000c"}}"#,
    )
    .unwrap();
    let rec = JobStore::new_record(JobId::new(), quantize);
    fx.rt.block_on(jobs.put(&rec)).unwrap();

    let policy = GcPolicy {
        keep_checkpoints: 2,
        unused_shuffle_days: None,
    };
    let p = fx.rt.block_on(plan(&fx.lake, &jobs, policy)).unwrap();
    assert_eq!(p.remove.len(), 1, "{p:?}");
    let r = &p.remove[0];
    assert_eq!(r.item, "run-00000000000a");
    let gone: Vec<&str> = r
        .keys
        .iter()
        .map(|k| k.rsplit('/').next().unwrap())
        .collect();
    assert_eq!(
        gone,
        [
            "step-000000010.ot",
            "step-000000030.ot",
            "step-000000040.ot"
        ]
    );
    assert_eq!((p.bytes, p.objects), (3000, 3));
    let why: Vec<(&str, &str)> = p
        .kept
        .iter()
        .map(|k| (k.item.as_str(), k.why.as_str()))
        .collect();
    assert!(
        why.contains(&(
            "run-00000000000b",
            "not finished: a resume needs its checkpoints"
        )),
        "{why:?}"
    );
    assert!(
        why.contains(&("run-00000000000c", "a queued or running job names it")),
        "{why:?}"
    );

    // A plan alone removes nothing; applied, exactly what it listed, and the record follows.
    let before = fx.rt.block_on(usage(&fx.lake)).unwrap();
    let record_len = || {
        std::fs::metadata(fx.path("runs/run-00000000000a/run.json"))
            .unwrap()
            .len() as i64
    };
    let record_before = record_len();
    let done = fx.rt.block_on(apply(&fx.lake, &jobs, &p, "test")).unwrap();
    assert_eq!((done.removed_bytes, done.removed_objects), (3000, 3));
    // du before and after: the runs' kind lost the three checkpoints (its record changed size).
    let after = fx.rt.block_on(usage(&fx.lake)).unwrap();
    let runs = |u: &lakefish_jobs::space::SpaceUsage| {
        let k = u.kinds.iter().find(|k| k.kind == SpaceKind::Runs).unwrap();
        (k.bytes as i64, k.objects)
    };
    let (b0, o0) = runs(&before);
    let (b1, o1) = runs(&after);
    assert_eq!(o0 - o1, 3);
    assert_eq!(b0 - b1, 3000 + record_before - record_len());
    let rec = fx
        .rt
        .block_on(lakefish_jobs::nets::read_run(
            &fx.lake,
            &lakefish_schemas::names::RunId::new("run-00000000000a").unwrap(),
        ))
        .unwrap()
        .unwrap();
    assert_eq!(
        rec.checkpoints,
        [
            "step-000000020.ot",
            "step-000000050.ot",
            "step-000000060.ot"
        ]
    );
    for c in &rec.checkpoints {
        assert!(
            fx.path(&format!("runs/run-00000000000a/checkpoints/{c}"))
                .exists()
        );
    }
    // Nothing left to do.
    let again = fx.rt.block_on(plan(&fx.lake, &jobs, policy)).unwrap();
    assert!(again.remove.is_empty(), "{again:?}");
}

/// `rm`: each dependent refuses by name (a shuffle made from a dataset, a registered net and
/// the best net, a queued job even with --force); a forced removal takes the item, its
/// masks and profile, and leaves a tombstone naming what still pointed at it.
#[test]
fn rm_refuses_what_lineage_or_work_needs_and_leaves_tombstones() {
    use lakefish_jobs::remove::{RmTarget, apply, plan, tombstones};
    use lakefish_lake::records::JobStore;
    use lakefish_schemas::{MaskName, ShuffleSpec};
    let fx = LakeFixture::new();
    let jobs = JobStore::new(fx.lake.clone());
    fx.ingest_bytes(&synthetic_binpack(40, 1), "a", 1_000);
    fx.ingest_bytes(&synthetic_binpack(40, 2), "b", 1_000);
    for d in ["a", "b"] {
        let spec = MaskSpec {
            dataset: DatasetName::new(d).unwrap(),
            source: Source::Binpack,
            definition: MaskDefinition::quiet(),
        };
        lakefish_jobs::masks::mask_dataset(&fx.ctx(), &JobId::new(), &spec).unwrap();
    }
    lakefish_jobs::profile::profile(
        &fx.ctx(),
        &lakefish_schemas::export::RowsOf::Dataset {
            source: Source::Binpack,
            dataset: DatasetName::new("a").unwrap(),
            mask: None,
        },
    )
    .unwrap();
    let sh = lakefish_jobs::shuffle::shuffle_here(
        &fx.ctx(),
        &ShuffleSpec {
            datasets: vec![DatasetName::new("a").unwrap()],
            source: Source::Binpack,
            mask: MaskName::new("quiet").unwrap(),
            chunks: 2,
            seed: 1,
            extra: Vec::new(),
        },
    )
    .unwrap();
    register_net(&fx, sh.id.as_str(), &["binpack/a"], "quiet");
    let promotion = lakefish_jobs::nets::Promotion {
        reason: "test".into(),
        by: "test".into(),
        measured: None,
    };
    fx.rt
        .block_on(lakefish_jobs::nets::set_best(
            &fx.lake,
            "nn-00000000000a",
            promotion,
        ))
        .unwrap();

    let target = |k: &str, n: &str| RmTarget::parse(k, n).unwrap();
    let p = fx
        .rt
        .block_on(plan(&fx.lake, &jobs, &target("dataset", "a")))
        .unwrap();
    let deps: Vec<&str> = p.dependents.iter().map(|d| d.what.as_str()).collect();
    assert!(
        deps.contains(&format!("shuffle {}", sh.id).as_str()),
        "{deps:?}"
    );
    assert!(
        deps.contains(&"registered net nn-00000000000a.nnue (the best net)"),
        "{deps:?}"
    );
    let e = fx
        .rt
        .block_on(apply(
            &fx.lake,
            &jobs,
            &target("dataset", "a"),
            &p,
            false,
            "t",
        ))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("needed by shuffle") && e.contains("--force"),
        "{e}"
    );
    let p = fx
        .rt
        .block_on(plan(&fx.lake, &jobs, &target("shuffle", sh.id.as_str())))
        .unwrap();
    let e = fx
        .rt
        .block_on(apply(
            &fx.lake,
            &jobs,
            &target("shuffle", sh.id.as_str()),
            &p,
            false,
            "t",
        ))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("registered net nn-00000000000a.nnue (the best net)"),
        "{e}"
    );

    // A queued job that reads it: refused even with --force.
    let mask_b = lakefish_schemas::JobSpec::from_request(
        br#"{"kind":"mask","spec":{"dataset":"b","definition":{"name":"q2"}}}"#,
    )
    .unwrap();
    let rec = JobStore::new_record(JobId::new(), mask_b);
    fx.rt.block_on(jobs.put(&rec)).unwrap();
    let p = fx
        .rt
        .block_on(plan(&fx.lake, &jobs, &target("dataset", "binpack/b")))
        .unwrap();
    assert!(
        p.dependents
            .iter()
            .any(|d| d.blocking && d.what.starts_with("queued job")),
        "{p:?}"
    );
    let e = fx
        .rt
        .block_on(apply(
            &fx.lake,
            &jobs,
            &target("dataset", "b"),
            &p,
            true,
            "t",
        ))
        .unwrap_err()
        .to_string();
    assert!(e.contains("in use by queued job"), "{e}");
    assert!(
        fx.path("positions/source=binpack/dataset=b/_manifest.json")
            .exists()
    );

    // Forced: the dataset, its masks and profile go; the tombstone names who still pointed.
    let p = fx
        .rt
        .block_on(plan(&fx.lake, &jobs, &target("dataset", "a")))
        .unwrap();
    let before = fx.rt.block_on(usage(&fx.lake)).unwrap();
    let stone = fx
        .rt
        .block_on(apply(
            &fx.lake,
            &jobs,
            &target("dataset", "a"),
            &p,
            true,
            "ana",
        ))
        .unwrap();
    assert_eq!(
        (stone.by.as_str(), stone.objects as usize),
        ("ana", p.keys.len())
    );
    assert!(stone.dependents.iter().any(|d| d.contains("best net")));
    assert!(!fx.path("positions/source=binpack/dataset=a").exists());
    assert!(!fx.path("masks/quiet/source=binpack/dataset=a").exists());
    assert!(!fx.path("profiles/source=binpack/dataset=a").exists());
    assert!(
        fx.path("masks/quiet/source=binpack/dataset=b").exists(),
        "b's mask stays"
    );
    let after = fx.rt.block_on(usage(&fx.lake)).unwrap();
    let stone_bytes = std::fs::metadata(fx.path("tombstones/dataset/binpack/a.json"))
        .unwrap()
        .len();
    assert_eq!(before.bytes - after.bytes + stone_bytes, stone.bytes);
    let listed = fx.rt.block_on(tombstones(&fx.lake)).unwrap();
    assert_eq!(listed, [stone]);
    // Gone: a second removal says when and by whom.
    let e = fx
        .rt
        .block_on(plan(&fx.lake, &jobs, &target("dataset", "a")))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("binpack/a: removed ") && e.contains(" by ana"),
        "{e}"
    );
    // Work that names a dataset only through a plan: a shuffle planned and not committed,
    // and a queued pass of it.
    fx.ingest_bytes(&synthetic_binpack(40, 3), "c", 1_000);
    let spec = MaskSpec {
        dataset: DatasetName::new("c").unwrap(),
        source: Source::Binpack,
        definition: MaskDefinition::quiet(),
    };
    lakefish_jobs::masks::mask_dataset(&fx.ctx(), &JobId::new(), &spec).unwrap();
    let planned = lakefish_jobs::shuffle::start(
        &fx.ctx(),
        &ShuffleSpec {
            datasets: vec![DatasetName::new("c").unwrap()],
            source: Source::Binpack,
            mask: MaskName::new("quiet").unwrap(),
            chunks: 2,
            seed: 1,
            extra: Vec::new(),
        },
    )
    .unwrap();
    let deal = lakefish_schemas::JobSpec::ShuffleDeal(lakefish_schemas::ShuffleTask {
        shuffle: planned.id.clone(),
        index: 0,
    });
    fx.rt
        .block_on(jobs.put(&JobStore::new_record(JobId::new(), deal)))
        .unwrap();
    let p = fx
        .rt
        .block_on(plan(&fx.lake, &jobs, &target("dataset", "c")))
        .unwrap();
    let blocking: Vec<&str> = p
        .dependents
        .iter()
        .filter(|d| d.blocking)
        .map(|d| d.what.as_str())
        .collect();
    assert!(
        blocking.iter().any(|w| w.ends_with("(shuffle_deal)")),
        "{blocking:?}"
    );
    assert!(
        blocking.contains(&format!("shuffle {} (planned, not committed)", planned.id).as_str()),
        "{blocking:?}"
    );
    // Made again, a dataset's old tombstone no longer marks a net's lineage.
    let net: lakefish_schemas::NetManifest =
        serde_json::from_slice(&std::fs::read(fx.path("nets/nn-00000000000a.json")).unwrap())
            .unwrap();
    assert_eq!(
        fx.rt
            .block_on(lakefish_jobs::remove::lineage_tombstones(&fx.lake, &net))
            .unwrap()
            .len(),
        1
    );
    fx.ingest_bytes(&synthetic_binpack(40, 1), "a", 1_000);
    assert!(
        fx.rt
            .block_on(lakefish_jobs::remove::lineage_tombstones(&fx.lake, &net))
            .unwrap()
            .is_empty()
    );
    assert!(
        RmTarget::parse("datasets", "a")
            .unwrap_err()
            .contains("unknown kind")
    );
    assert!(
        RmTarget::parse("checkpoint", "run-00000000000a")
            .unwrap_err()
            .contains("RUN/STEP")
    );
}

/// Shuffles unused for the configured days go (a tombstone left for the runs that used
/// them), unless a registered net's lineage names them; the collection is recorded.
#[test]
fn gc_drops_unused_shuffles_unless_a_net_needs_them() {
    use lakefish_jobs::gc::{GcPolicy, collect, last};
    use lakefish_lake::records::JobStore;
    use lakefish_schemas::{MaskName, ShuffleSpec};
    let fx = LakeFixture::new();
    let jobs = JobStore::new(fx.lake.clone());
    fx.ingest_bytes(&synthetic_binpack(40, 1), "a", 1_000);
    let spec = MaskSpec {
        dataset: DatasetName::new("a").unwrap(),
        source: Source::Binpack,
        definition: MaskDefinition::quiet(),
    };
    lakefish_jobs::masks::mask_dataset(&fx.ctx(), &JobId::new(), &spec).unwrap();
    let shuffle = |seed| {
        lakefish_jobs::shuffle::shuffle_here(
            &fx.ctx(),
            &ShuffleSpec {
                datasets: vec![DatasetName::new("a").unwrap()],
                source: Source::Binpack,
                mask: MaskName::new("quiet").unwrap(),
                chunks: 2,
                seed,
                extra: Vec::new(),
            },
        )
        .unwrap()
        .id
    };
    let (used, unused) = (shuffle(1), shuffle(2));
    register_net(&fx, used.as_str(), &["binpack/a"], "quiet");
    let policy = GcPolicy {
        keep_checkpoints: 2,
        unused_shuffle_days: Some(0),
    };
    assert!(fx.rt.block_on(last(&fx.lake)).unwrap().is_none());
    // An unfinished run on the unused shuffle, idle since January: it could be resumed.
    let run = |finished: bool| {
        serde_json::json!({
            "id": "run-00000000000b", "spec": {"shuffle": unused.to_string(), "features": "all768", "arch": "32x2-8"},
            "device": "cpu", "step": 10, "epoch": 0, "checkpoints": ["step-000000010.ot"],
            "train_positions": 1, "val_positions": 1, "val_loss": [], "material_val_loss": null,
            "finished": finished, "resumed_at": [], "created": "2026-01-01T00:00:00Z", "updated": "2026-01-01T00:00:00Z"
        })
    };
    let put_run = |finished| {
        fx.rt
            .block_on(fx.lake.put(
                "runs/run-00000000000b/run.json",
                serde_json::to_vec(&run(finished)).unwrap(),
            ))
            .unwrap()
    };
    put_run(false);
    let rec = fx
        .rt
        .block_on(collect(&fx.lake, &jobs, policy, "scheduler"))
        .unwrap();
    assert!(
        fx.path(&format!("shuffled/{unused}/_manifest.json"))
            .exists()
    );
    assert!(
        rec.lines
            .iter()
            .any(|l| l.contains("run run-00000000000b on it is not finished")),
        "{:?}",
        rec.lines
    );
    put_run(true);
    let rec = fx
        .rt
        .block_on(collect(&fx.lake, &jobs, policy, "scheduler"))
        .unwrap();
    let left = fx
        .rt
        .block_on(fx.lake.list(&format!("shuffled/{unused}")))
        .unwrap();
    assert!(left.is_empty(), "{left:?} {:?}", rec.lines);
    assert!(fx.path(&format!("shuffled/{used}/_manifest.json")).exists());
    assert!(rec.removed_objects > 2, "{rec:?}");
    assert!(
        rec.lines.iter().any(|l| l.starts_with(&format!(
            "{used}: kept, unused for 0 days but needed by registered net"
        ))),
        "{:?}",
        rec.lines
    );
    let stone = fx
        .rt
        .block_on(lakefish_jobs::remove::tombstone(
            &fx.lake,
            "shuffle",
            unused.as_str(),
        ))
        .unwrap()
        .unwrap();
    assert_eq!(stone.by, "scheduler");
    assert_eq!(fx.rt.block_on(last(&fx.lake)).unwrap(), Some(rec));
}

/// A registered net's manifest, `nn-00000000000a` from step 20 of `run-00000000000a`, whose
/// lineage names `shuffle`, `datasets` and `mask` (no file: lineage is what these tests read).
fn register_net(fx: &LakeFixture, shuffle: &str, datasets: &[&str], mask: &str) {
    let q = serde_json::json!({"positions": 1, "mean_abs_cp": 0.0, "p99_abs_cp": 0.0, "max_abs_cp": 0.0, "mean_abs_internal": 0.0, "p99_abs_internal": 0.0});
    let net = serde_json::json!({
        "name": "nn-00000000000a.nnue", "sha256": "00", "bytes": 1, "features": "all768", "arch": "32x2-8",
        "arch_hash": "0", "description": "", "run": "run-00000000000a", "checkpoint": "step-000000020.ot",
        "step": 20, "shuffle": shuffle, "datasets": datasets, "mask": mask, "parent": null,
        "quantization": q, "created": "2026-11-28T00:00:00Z"
    });
    fx.rt
        .block_on(fx.lake.put(
            "nets/nn-00000000000a.json",
            serde_json::to_vec(&net).unwrap(),
        ))
        .unwrap();
}

/// What ingests left that never committed: real parts with their manifest gone and their
/// writer's claim past its lease go; a live claim, a claim a queued job's dataset names,
/// and a claim taken afresh between the plan and the act stay; committed datasets stay.
#[test]
fn gc_removes_what_failed_ingests_left_past_their_lease() {
    use lakefish_jobs::gc::{GcPolicy, RemovalKind, apply, plan};
    use lakefish_lake::datasets::WriterClaim;
    use lakefish_lake::records::JobStore;
    let fx = LakeFixture::new();
    let jobs = JobStore::new(fx.lake.clone());
    let put = |key: &str, bytes: Vec<u8>| fx.rt.block_on(fx.lake.put(key, bytes)).unwrap();
    let claim = |expires: &str| {
        let mut c = WriterClaim::new("0190000000000000000000000000000a", "t");
        c.expires = expires.into();
        serde_json::to_vec(&c).unwrap()
    };
    let later = (chrono::Utc::now() + chrono::Duration::minutes(5)).to_rfc3339();
    for (i, (name, expires)) in [
        ("crashed", Some("2026-01-01T00:00:00Z")),
        ("busy", Some(later.as_str())),
        ("named", Some("2026-01-01T00:00:00Z")),
        ("raced", Some("2026-01-01T00:00:00Z")),
        ("fine", None),
        ("leftover", None),
    ]
    .into_iter()
    .enumerate()
    {
        fx.ingest_bytes(&synthetic_binpack(40, i as u64 + 1), name, 1_000);
        if let Some(expires) = expires {
            // A writer that died before its commit: its parts, its claim, no manifest.
            let dir = format!("positions/source=binpack/dataset={name}");
            std::fs::remove_file(fx.path(&format!("{dir}/_manifest.json"))).unwrap();
            put(&format!("{dir}/_writer"), claim(expires));
        }
    }
    // A writer that died after its commit, before releasing its claim.
    put(
        "positions/source=binpack/dataset=leftover/_writer",
        claim("2026-01-01T00:00:00Z"),
    );
    let mask = lakefish_schemas::JobSpec::from_request(
        br#"{"kind":"mask","spec":{"dataset":"named","definition":{"name":"q"}}}"#,
    )
    .unwrap();
    fx.rt
        .block_on(jobs.put(&JobStore::new_record(JobId::new(), mask)))
        .unwrap();
    let files = |name: &str| {
        std::fs::read_dir(fx.path(&format!("positions/source=binpack/dataset={name}")))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    let crashed_files = files("crashed");
    assert!(crashed_files >= 2, "parts and the claim: {crashed_files}");

    let p = fx
        .rt
        .block_on(plan(&fx.lake, &jobs, GcPolicy::default()))
        .unwrap();
    let removed: Vec<(&str, RemovalKind)> =
        p.remove.iter().map(|r| (r.item.as_str(), r.kind)).collect();
    assert_eq!(
        removed,
        [
            ("binpack/crashed", RemovalKind::FailedIngest),
            ("binpack/leftover", RemovalKind::LeftoverClaim),
            ("binpack/raced", RemovalKind::FailedIngest)
        ]
    );
    assert_eq!(
        p.remove[1].keys,
        ["positions/source=binpack/dataset=leftover/_writer"]
    );
    assert_eq!(p.remove[0].keys.len(), crashed_files);
    assert!(p.remove[0].why.contains("never committed"), "{p:?}");
    assert!(
        p.kept
            .iter()
            .any(|k| k.item == "binpack/named" && k.why == "a queued or running job names it"),
        "{:?}",
        p.kept
    );
    // Between the plan and the act, a writer takes "raced" over afresh.
    put(
        "positions/source=binpack/dataset=raced/_writer",
        claim(&later),
    );
    let done = fx.rt.block_on(apply(&fx.lake, &jobs, &p, "test")).unwrap();
    assert_eq!(done.removed_objects as usize, crashed_files + 1);
    assert_eq!(done.removed_bytes, p.remove[0].bytes + p.remove[1].bytes);
    assert!(
        !fx.path("positions/source=binpack/dataset=leftover/_writer")
            .exists()
    );
    assert!(
        fx.path("positions/source=binpack/dataset=leftover/_manifest.json")
            .exists()
    );
    assert_eq!(
        done.skipped
            .iter()
            .map(|k| k.item.as_str())
            .collect::<Vec<_>>(),
        ["binpack/raced"]
    );
    assert_eq!(files("crashed"), 0);
    for name in ["busy", "named", "raced"] {
        assert!(files(name) >= 2, "{name} kept");
    }
    assert!(
        fx.path("positions/source=binpack/dataset=fine/_manifest.json")
            .exists()
    );
    // An ingest into "crashed" now starts from nothing and commits.
    fx.ingest_bytes(&synthetic_binpack(40, 1), "crashed", 1_000);
    assert!(
        fx.path("positions/source=binpack/dataset=crashed/_manifest.json")
            .exists()
    );
}

/// `rm` under work at it: a running pipeline run that trains on a dataset, a run that may be
/// training (unfinished, written lately, as a local `lakefish train` leaves it) refuse
/// even `--force`; a shuffle started after the removal was planned refuses it at the act;
/// and a shuffle whose input goes anyway, past every check, fails naming the missing part
/// and commits nothing.
#[test]
fn rm_under_a_pipeline_or_a_training_is_refused_and_a_racing_shuffle_fails_clearly() {
    use lakefish_jobs::remove::{RmTarget, apply, plan};
    use lakefish_lake::records::JobStore;
    use lakefish_schemas::{MaskName, ShuffleSpec};
    let fx = LakeFixture::new();
    let jobs = JobStore::new(fx.lake.clone());
    let put = |key: &str, v: serde_json::Value| {
        fx.rt
            .block_on(fx.lake.put(key, serde_json::to_vec(&v).unwrap()))
            .unwrap()
    };
    let target = |k: &str, n: &str| RmTarget::parse(k, n).unwrap();
    let blocking = |t: &RmTarget| -> Vec<String> {
        let p = fx.rt.block_on(plan(&fx.lake, &jobs, t)).unwrap();
        p.dependents
            .iter()
            .filter(|d| d.blocking)
            .map(|d| d.what.clone())
            .collect()
    };
    for (i, name) in ["p", "r"].into_iter().enumerate() {
        // Two binpack chunks: at least two parts.
        let bytes = [
            synthetic_binpack(60, i as u64 + 7),
            synthetic_binpack(60, i as u64 + 9),
        ]
        .concat();
        fx.ingest_bytes(&bytes, name, 1_000);
        let spec = MaskSpec {
            dataset: DatasetName::new(name).unwrap(),
            source: Source::Binpack,
            definition: MaskDefinition::quiet(),
        };
        lakefish_jobs::masks::mask_dataset(&fx.ctx(), &JobId::new(), &spec).unwrap();
    }
    let shuffle_of = |name: &str| ShuffleSpec {
        datasets: vec![DatasetName::new(name).unwrap()],
        source: Source::Binpack,
        mask: MaskName::new("quiet").unwrap(),
        chunks: 2,
        seed: 1,
        extra: Vec::new(),
    };

    // A running pipeline run that names the dataset as SOURCE/NAME.
    let now = lakefish_lake::records::now();
    let mut run = serde_json::json!({
        "id": "nightly-20261128T000000", "round": 0, "pipeline": "nightly", "trigger": "manual",
        "state": "running", "step": "train", "steps": [], "jobs": [], "datasets": ["binpack/p"],
        "shuffle": null, "train_run": null, "checkpoint": null, "net": null, "base": null,
        "sprt": null, "sprt_state": null, "promoted": false, "error": null,
        "created": now, "updated": now, "finished": null
    });
    let key = lakefish_schemas::pipeline::run_key("nightly", "nightly-20261128T000000");
    put(&key, run.clone());
    let t = target("dataset", "p");
    assert_eq!(
        blocking(&t),
        ["running pipeline run nightly-20261128T000000"]
    );
    let p = fx.rt.block_on(plan(&fx.lake, &jobs, &t)).unwrap();
    let e = fx
        .rt
        .block_on(apply(&fx.lake, &jobs, &t, &p, true, "t"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("in use by running pipeline run nightly-20261128T000000"),
        "{e}"
    );
    run["state"] = "failed".into();
    put(&key, run);
    assert!(blocking(&t).is_empty());

    // A run on a shuffle of it, unfinished and written a moment ago: it may be training.
    let sh = lakefish_jobs::shuffle::shuffle_here(&fx.ctx(), &shuffle_of("p")).unwrap();
    let mut spec = serde_json::json!({"shuffle": sh.id.to_string(), "arch": "32x2-8"});
    spec["features"] = "all768".into();
    put(
        "runs/run-00000000000d/run.json",
        serde_json::json!({
            "id": "run-00000000000d", "spec": spec, "device": "cpu", "step": 10, "epoch": 0,
            "checkpoints": ["step-000000010.ot"], "train_positions": 1, "val_positions": 1,
            "val_loss": [], "material_val_loss": null, "finished": false, "resumed_at": [],
            "created": now, "updated": now
        }),
    );
    let training = "run-00000000000d on it is not finished and was written in the last 30 minutes (it may be training)";
    for (t, want) in [
        (target("shuffle", sh.id.as_str()), training.to_string()),
        (
            target("run", "run-00000000000d"),
            "run run-00000000000d is not finished and was written in the last 30 minutes (it may be training)".into(),
        ),
        (
            target("checkpoint", "run-00000000000d/10"),
            "run run-00000000000d is not finished and was written in the last 30 minutes (it may be training)".into(),
        ),
    ] {
        let b = blocking(&t);
        assert!(b.iter().any(|w| w.ends_with(&want)), "{t:?}: {b:?}");
        let p = fx.rt.block_on(plan(&fx.lake, &jobs, &t)).unwrap();
        let e = fx
            .rt
            .block_on(apply(&fx.lake, &jobs, &t, &p, true, "t"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("in use by") && e.contains(&want), "{e}");
    }
    assert!(
        fx.path(&format!("shuffled/{}/_manifest.json", sh.id))
            .exists()
    );
    // Failed (its record says why), it is not training: no longer at work on the shuffle.
    let mut failed: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fx.path("runs/run-00000000000d/run.json")).unwrap())
            .unwrap();
    failed["error"] = "chunk missing".into();
    put("runs/run-00000000000d/run.json", failed);
    assert!(
        blocking(&target("shuffle", sh.id.as_str())).is_empty(),
        "a failed run does not block"
    );

    // The race: the removal of "r" is planned (nothing needs it), then a shuffle of it starts.
    let t = target("dataset", "r");
    let p = fx.rt.block_on(plan(&fx.lake, &jobs, &t)).unwrap();
    assert!(p.dependents.is_empty(), "{p:?}");
    let started = lakefish_jobs::shuffle::start(&fx.ctx(), &shuffle_of("r")).unwrap();
    assert!(started.parts.len() >= 2, "{} parts", started.parts.len());
    let e = fx
        .rt
        .block_on(apply(&fx.lake, &jobs, &t, &p, true, "t"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!(
            "shuffle {} (planned, not committed), started since the plan",
            started.id
        )),
        "{e}"
    );
    assert!(
        fx.path("positions/source=binpack/dataset=r/_manifest.json")
            .exists()
    );
    // Past every check (another process removing the files by hand, say), the shuffle
    // reading them fails naming what went missing, and never commits.
    lakefish_jobs::shuffle::deal_part(&fx.ctx(), &started, 0).unwrap();
    for key in &p.keys {
        fx.rt.block_on(fx.lake.delete(key)).unwrap();
    }
    let e = lakefish_jobs::shuffle::deal_part(&fx.ctx(), &started, 1)
        .unwrap_err()
        .to_string();
    let part = format!(
        "positions/source=binpack/dataset=r/{}",
        started.parts[1].name
    );
    assert!(e.contains(&part) && e.contains("missing"), "{e}");
    assert!(
        lakefish_jobs::shuffle::commit(&fx.ctx(), &started).is_err(),
        "a shuffle with a pass not done does not commit"
    );
    assert!(
        !fx.path(&format!("shuffled/{}/_manifest.json", started.id))
            .exists()
    );
}

/// `du` from the catalogue: each item measured as it is indexed (ingest, mask, profile,
/// shuffle, run records), the rest of the lake listed; equal to a listing of every object
/// at each step (after gc and rm too), and blind to what nothing indexed (a stray part:
/// the listing counts it, the catalogue does not).
#[test]
fn du_from_the_catalogue_equals_a_listing() {
    use lakefish_jobs::space::usage_by_listing;
    use lakefish_lake::records::JobStore;
    use lakefish_schemas::{MaskName, ShuffleSpec};
    let (fx, plain) = with_catalogue();
    let jobs = JobStore::new(plain.clone());
    let same = |fx: &LakeFixture, step: &str| {
        let a = fx.rt.block_on(usage(&fx.lake)).unwrap();
        let b = fx.rt.block_on(usage_by_listing(&plain)).unwrap();
        assert_eq!((a.from.as_str(), b.from.as_str()), ("catalogue", "listing"));
        assert_eq!(a.items, b.items, "{step}");
        assert_eq!(a.kinds, b.kinds, "{step}");
        a
    };
    for (name, seed) in [("a", 1u64), ("b", 2)] {
        fx.ingest_bytes(&synthetic_binpack(40, seed), name, 1_000);
    }
    same(&fx, "ingested");
    for name in ["a", "b"] {
        let m = MaskSpec {
            dataset: DatasetName::new(name).unwrap(),
            source: Source::Binpack,
            definition: MaskDefinition::quiet(),
        };
        lakefish_jobs::masks::mask_dataset(&fx.ctx(), &JobId::new(), &m).unwrap();
    }
    let a = lakefish_schemas::export::RowsOf::Dataset {
        source: Source::Binpack,
        dataset: DatasetName::new("a").unwrap(),
        mask: None,
    };
    lakefish_jobs::profile::profile(&fx.ctx(), &a).unwrap();
    fx.rt
        .block_on(fx.lake.put("raw/binpack/x.binpack", vec![1; 300]))
        .unwrap();
    let sh = lakefish_jobs::shuffle::shuffle_here(
        &fx.ctx(),
        &ShuffleSpec {
            datasets: vec![DatasetName::new("a").unwrap()],
            source: Source::Binpack,
            mask: MaskName::new("quiet").unwrap(),
            chunks: 2,
            seed: 1,
            extra: Vec::new(),
        },
    )
    .unwrap();
    lakefish_jobs::profile::profile(
        &fx.ctx(),
        &lakefish_schemas::export::RowsOf::Shuffle(sh.id.clone()),
    )
    .unwrap();
    // A finished run with four checkpoints, recorded and indexed as training does.
    let mut spec = serde_json::json!({"shuffle": sh.id.to_string(), "arch": "32x2-8"});
    spec["features"] = "all768".into();
    let run: lakefish_schemas::RunRecord = serde_json::from_value(serde_json::json!({
        "id": "run-00000000000a", "spec": spec, "device": "cpu", "step": 40, "epoch": 1,
        "checkpoints": ["step-000000010.ot", "step-000000020.ot", "step-000000030.ot", "step-000000040.ot"],
        "train_positions": 1, "val_positions": 1, "val_loss": [], "material_val_loss": null,
        "finished": true, "resumed_at": [], "created": "2026-11-28T00:00:00Z", "updated": "2026-11-28T00:00:00Z"
    }))
    .unwrap();
    for s in [10, 20, 30, 40] {
        fx.rt
            .block_on(fx.lake.put(
                &format!("runs/run-00000000000a/checkpoints/step-{s:09}.ot"),
                vec![7; 500],
            ))
            .unwrap();
    }
    fx.rt
        .block_on(fx.lake.put(
            "runs/run-00000000000a/run.json",
            serde_json::to_vec(&run).unwrap(),
        ))
        .unwrap();
    fx.rt
        .block_on(lakefish_jobs::nets::index_run(&fx.lake, &run))
        .unwrap();
    let before = same(&fx, "masked, profiled, shuffled, trained");
    for kind in [
        SpaceKind::Datasets,
        SpaceKind::Masks,
        SpaceKind::Profiles,
        SpaceKind::Shuffles,
        SpaceKind::Runs,
        SpaceKind::Raw,
    ] {
        assert!(before.kinds.iter().any(|k| k.kind == kind), "{kind:?}");
    }

    // gc (pass-1 files, old checkpoints) and rm keep the measurements true.
    let policy = lakefish_jobs::gc::GcPolicy {
        keep_checkpoints: 1,
        unused_shuffle_days: None,
    };
    let p = fx
        .rt
        .block_on(lakefish_jobs::gc::plan(&fx.lake, &jobs, policy))
        .unwrap();
    assert!(p.objects >= 3, "{p:?}");
    fx.rt
        .block_on(lakefish_jobs::gc::apply(&fx.lake, &jobs, &p, "t"))
        .unwrap();
    let after = same(&fx, "after gc");
    // (Bytes differ by the run's record too, written again without the removed names.)
    assert_eq!(before.objects - after.objects, p.objects);
    let target = lakefish_jobs::remove::RmTarget::parse("dataset", "b").unwrap();
    let rm = fx
        .rt
        .block_on(lakefish_jobs::remove::plan(&fx.lake, &jobs, &target))
        .unwrap();
    fx.rt
        .block_on(lakefish_jobs::remove::apply(
            &fx.lake, &jobs, &target, &rm, false, "t",
        ))
        .unwrap();
    same(&fx, "after rm");
    // A measurement racing the removal (a profile finishing after it) adds nothing.
    fx.rt
        .block_on(lakefish_lake::space::measure(
            &fx.lake,
            lakefish_lake::catalog::CatalogKind::Dataset,
            "binpack/b",
        ))
        .unwrap();
    same(&fx, "a measurement after rm");

    // A catalogue made before items were measured (its space entries gone): du measures
    // the items it lacks once, and agrees again.
    let catalog = fx.lake.catalog().unwrap();
    let entries = fx
        .rt
        .block_on(catalog.all(lakefish_lake::catalog::CatalogQuery::all(
            lakefish_lake::catalog::CatalogKind::Space,
        )))
        .unwrap();
    assert!(!entries.is_empty());
    for e in entries {
        fx.rt
            .block_on(
                catalog
                    .0
                    .remove(lakefish_lake::catalog::CatalogKind::Space, &e.name),
            )
            .unwrap();
    }
    same(&fx, "an old catalogue");

    // A part nothing indexed: the listing sees it, the catalogue does not.
    fx.rt
        .block_on(fx.lake.put(
            "positions/source=binpack/dataset=zz/part-00000.parquet",
            vec![0; 100],
        ))
        .unwrap();
    let listed = fx.rt.block_on(usage_by_listing(&plain)).unwrap();
    let read = fx.rt.block_on(usage(&fx.lake)).unwrap();
    assert_eq!(listed.bytes - read.bytes, 100);
    assert!(listed.items.iter().any(|i| i.name == "binpack/zz"));
    assert!(!read.items.iter().any(|i| i.name == "binpack/zz"));
}

/// `rm mask`: refused by a shuffle made through it (a forced removal leaves a tombstone)
/// and by a queued job that names the dataset and the mask, never by one naming another
/// dataset; removed, the dataset's entry no longer lists it and du follows.
#[test]
fn rm_mask_keeps_what_shuffles_and_jobs_need() {
    use lakefish_jobs::remove::{RmTarget, apply, plan};
    use lakefish_jobs::space::usage_by_listing;
    use lakefish_lake::records::JobStore;
    use lakefish_schemas::{MaskName, ShuffleSpec};
    let (fx, plain) = with_catalogue();
    let jobs = JobStore::new(plain.clone());
    fx.ingest_bytes(&synthetic_binpack(40, 1), "a", 1_000);
    fx.ingest_bytes(&synthetic_binpack(40, 2), "b", 1_000);
    for (dataset, mask) in [("a", "quiet"), ("a", "q2"), ("b", "q2")] {
        let mut definition = MaskDefinition::quiet();
        definition.name = MaskName::new(mask).unwrap();
        let m = MaskSpec {
            dataset: DatasetName::new(dataset).unwrap(),
            source: Source::Binpack,
            definition,
        };
        lakefish_jobs::masks::mask_dataset(&fx.ctx(), &JobId::new(), &m).unwrap();
    }
    let sh = lakefish_jobs::shuffle::shuffle_here(
        &fx.ctx(),
        &ShuffleSpec {
            datasets: vec![DatasetName::new("a").unwrap()],
            source: Source::Binpack,
            mask: MaskName::new("quiet").unwrap(),
            chunks: 2,
            seed: 1,
            extra: Vec::new(),
        },
    )
    .unwrap();
    let target = |n: &str| RmTarget::parse("mask", n).unwrap();
    let p = fx
        .rt
        .block_on(plan(&fx.lake, &jobs, &target("quiet@a")))
        .unwrap();
    assert_eq!(
        p.dependents
            .iter()
            .map(|d| d.what.as_str())
            .collect::<Vec<_>>(),
        [format!("shuffle {} (made through it)", sh.id)]
    );
    let e = fx
        .rt
        .block_on(apply(&fx.lake, &jobs, &target("quiet@a"), &p, false, "t"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("needed by shuffle") && e.contains("--force"),
        "{e}"
    );
    // A queued shuffle of b through q2 blocks q2 of b, not q2 of a.
    let queued = lakefish_schemas::JobSpec::from_request(
        br#"{"kind":"shuffle","spec":{"datasets":["b"],"mask":"q2","chunks":2,"seed":1}}"#,
    )
    .unwrap();
    fx.rt
        .block_on(jobs.put(&JobStore::new_record(JobId::new(), queued)))
        .unwrap();
    let blocked = fx
        .rt
        .block_on(plan(&fx.lake, &jobs, &target("q2@binpack/b")))
        .unwrap();
    assert!(
        blocked
            .dependents
            .iter()
            .any(|d| d.blocking && d.what.ends_with("(shuffle)")),
        "{blocked:?}"
    );
    let free = fx
        .rt
        .block_on(plan(&fx.lake, &jobs, &target("q2@a")))
        .unwrap();
    assert!(free.dependents.is_empty(), "{free:?}");
    fx.rt
        .block_on(apply(&fx.lake, &jobs, &target("q2@a"), &free, false, "t"))
        .unwrap();
    assert!(!fx.path("masks/q2/source=binpack/dataset=a").exists());
    assert!(fx.path("masks/q2/source=binpack/dataset=b").exists());
    let listed = fx
        .rt
        .block_on(lakefish_lake::datasets::list_datasets(&fx.lake))
        .unwrap();
    let a = listed.iter().find(|d| d.name.as_str() == "a").unwrap();
    assert_eq!(a.masks, ["quiet"]);
    // Forced past the shuffle: a tombstone, and du from the catalogue still a listing's.
    let p = fx
        .rt
        .block_on(plan(&fx.lake, &jobs, &target("quiet@a")))
        .unwrap();
    let stone = fx
        .rt
        .block_on(apply(&fx.lake, &jobs, &target("quiet@a"), &p, true, "ana"))
        .unwrap();
    assert_eq!(
        (stone.kind.as_str(), stone.name.as_str()),
        ("mask", "quiet@binpack/a")
    );
    let a = fx.rt.block_on(usage(&fx.lake)).unwrap();
    let b = fx.rt.block_on(usage_by_listing(&plain)).unwrap();
    assert_eq!(a.items, b.items);
    assert!(
        !a.items
            .iter()
            .any(|i| i.kind == SpaceKind::Masks && i.name.ends_with("binpack/a"))
    );
    for bad in ["quiet", "quiet@", "@a", "quiet@nope/a"] {
        assert!(RmTarget::parse("mask", bad).is_err(), "{bad}");
    }
}

/// A lake fixture whose lake carries a SQLite catalogue, and the same lake without it.
fn with_catalogue() -> (LakeFixture, lakefish_lake::Lake) {
    let mut fx = LakeFixture::new();
    let plain = fx.lake.clone();
    let spec = lakefish_metastore::MetastoreSpec::Sqlite(
        fx.dir.path().join("meta.sqlite").display().to_string(),
    );
    let store = fx
        .rt
        .block_on(lakefish_metastore::SqlRecords::open(&spec))
        .unwrap();
    fx.lake = plain
        .clone()
        .with_catalog(lakefish_lake::catalog::CatalogHandle(std::sync::Arc::new(
            store,
        )));
    (fx, plain)
}
