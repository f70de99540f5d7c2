//! Training on a real (local) lake: exact resume, quality against a material-only predictor,
//! and bad input (missing shuffle, bad architecture, a malformed FEN in a chunk).

use lakefish_schemas::JobId;
use lakefish_train::train::{epoch_order, read_run, run_prefix, train};

mod common;
use common::{Fixture, fixture, spec};

fn last_checkpoint(
    fx: &Fixture,
    run: &lakefish_schemas::names::RunId,
) -> Vec<(String, tch::Tensor)> {
    let rec = fx
        .rt
        .block_on(read_run(&fx.ctx.lake, run))
        .unwrap()
        .unwrap();
    let key = format!(
        "{}/checkpoints/{}",
        run_prefix(run),
        rec.checkpoints.last().unwrap()
    );
    let bytes = fx.rt.block_on(fx.ctx.lake.get(&key)).unwrap().unwrap();
    tch::Tensor::load_multi_from_stream(std::io::Cursor::new(bytes.to_vec())).unwrap()
}

#[test]
fn two_n_steps_equal_n_steps_then_resume_for_n_more() {
    let fx = fixture(4);
    let n = 7;
    let mut straight = spec(&fx.shuffle);
    straight.max_steps = Some(2 * n);
    let a = train(&fx.ctx, &JobId::new(), &straight).unwrap();
    assert_eq!(a.step, 2 * n);

    let mut first = spec(&fx.shuffle);
    first.max_steps = Some(n);
    let b = train(&fx.ctx, &JobId::new(), &first).unwrap();
    assert_eq!(b.step, n);
    let mut resumed = first.clone();
    resumed.max_steps = Some(2 * n);
    resumed.resume = Some(b.id.clone());
    // Another --device spelling is accepted on resume (a run may move between a GPU and the
    // CPU). "auto" is the CPU on a machine without CUDA, so the result is still bit-exact.
    let cuda = lakefish_train::cuda::load_backend().is_ok() && tch::Cuda::is_available();
    if !cuda {
        resumed.device = lakefish_schemas::DeviceChoice::Auto;
    }
    let b = train(&fx.ctx, &JobId::new(), &resumed).unwrap();
    assert_eq!(b.step, 2 * n);
    assert_eq!(b.spec.device, resumed.device);

    let wa = last_checkpoint(&fx, &a.id);
    let wb = last_checkpoint(&fx, &b.id);
    assert_eq!(wa.len(), wb.len());
    for ((na, ta), (nb, tb)) in wa.iter().zip(&wb) {
        assert_eq!(na, nb);
        assert!(ta.equal(tb), "tensor {na} differs after resume");
    }
    // And training changed the weights at all.
    let fresh = {
        let mut s = spec(&fx.shuffle);
        s.max_steps = Some(1);
        train(&fx.ctx, &JobId::new(), &s).unwrap()
    };
    let wf = last_checkpoint(&fx, &fresh.id);
    assert!(!wf[0].1.equal(&wa[0].1));
}

/// Mirror augmentation (odd epochs flipped left to right) on a SCReLU net: two epochs
/// straight equal one epoch then a resume into the second, and the mirrored epoch trains
/// on something else than the plain one would.
#[test]
fn mirrored_epochs_resume_exactly_and_change_what_is_learned() {
    let fx = fixture(4);
    let mut straight = spec(&fx.shuffle);
    straight.arch = "32x2:screlu".into();
    straight.mirror = true;
    straight.epochs = 2;
    let a = train(&fx.ctx, &JobId::new(), &straight).unwrap();
    assert_eq!(a.epoch, 2);

    let mut first = straight.clone();
    first.epochs = 1;
    let b = train(&fx.ctx, &JobId::new(), &first).unwrap();
    let mut resumed = straight.clone();
    resumed.resume = Some(b.id.clone());
    let b = train(&fx.ctx, &JobId::new(), &resumed).unwrap();
    assert_eq!(b.step, a.step);
    let (wa, wb) = (last_checkpoint(&fx, &a.id), last_checkpoint(&fx, &b.id));
    for ((na, ta), (_, tb)) in wa.iter().zip(&wb) {
        assert!(ta.equal(tb), "tensor {na} differs after resume");
    }

    let mut plain = straight.clone();
    plain.mirror = false;
    let c = train(&fx.ctx, &JobId::new(), &plain).unwrap();
    let wc = last_checkpoint(&fx, &c.id);
    let ft = |w: &[(String, tch::Tensor)]| {
        w.iter()
            .find(|(n, _)| n == "ft.weight")
            .unwrap()
            .1
            .shallow_clone()
    };
    assert!(!ft(&wa).equal(&ft(&wc)), "mirroring changed nothing");
}

#[test]
fn a_trained_net_beats_material_on_the_held_out_chunk() {
    let fx = fixture(8);
    let mut s = spec(&fx.shuffle);
    s.arch = "64x2-16".into();
    s.epochs = 3;
    s.lr = 3e-3;
    let run = train(&fx.ctx, &JobId::new(), &s).unwrap();
    let val = *run.val_loss.last().unwrap();
    let material = run.material_val_loss.unwrap();
    eprintln!("validation loss {val:.5}, material-only predictor {material:.5}");
    assert!(val < 0.8 * material, "net {val} vs material {material}");
    assert!(
        run.val_loss.first().unwrap() > &val,
        "loss fell: {:?}",
        run.val_loss
    );
}

#[test]
fn bad_inputs_fail_clearly_and_keep_the_last_good_checkpoint() {
    let fx = fixture(3);
    let err = train(&fx.ctx, &JobId::new(), &spec("sh-000000000000")).unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");
    let mut bad = spec(&fx.shuffle);
    bad.arch = "256-32".into();
    let err = train(&fx.ctx, &JobId::new(), &bad).unwrap_err();
    assert!(err.to_string().contains("256-32"), "{err}");
    // --device cuda where CUDA cannot be used says why, before anything is written; auto
    // falls back to the CPU.
    if lakefish_train::cuda::load_backend().is_err() || !tch::Cuda::is_available() {
        let mut gpu = spec(&fx.shuffle);
        gpu.device = lakefish_schemas::DeviceChoice::Cuda;
        let err = train(&fx.ctx, &JobId::new(), &gpu).unwrap_err().to_string();
        assert!(err.contains("--device cuda: "), "{err}");
        assert!(
            err.contains("libtorch_cuda.so") || err.contains("no GPU"),
            "{err}"
        );
        let runs = fx
            .rt
            .block_on(lakefish_jobs::nets::list_runs(&fx.ctx.lake))
            .unwrap();
        assert!(runs.is_empty(), "{runs:?}");
        assert_eq!(
            lakefish_train::train::select_device(lakefish_schemas::DeviceChoice::Auto).unwrap(),
            tch::Device::Cpu
        );
    }

    // Spoil the second training chunk of epoch 0 with an unreadable FEN in its last row.
    let m = fx.shuffle_manifest();
    let order = epoch_order(&[0, 1], 11, 0);
    let key = format!("shuffled/{}/{}", fx.shuffle, m.chunks[order[1]].name);
    // Written back in the layout before packed boards, which training still reads.
    let mut rows = lakefish_jobs::chunks::chunk_rows_as_text(
        &fx.ctx,
        &fx.shuffle,
        order[1] as u32,
        usize::MAX,
    )
    .unwrap();
    rows.last_mut().unwrap().fen =
        "rnbqkbnr/pppppppp/9/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1".into();
    let mut chunk = lakefish_lake::parts::PositionColumns::default();
    for r in &rows {
        chunk.fen_bytes.extend_from_slice(r.fen.as_bytes());
        chunk.fen_ends.push(chunk.fen_bytes.len() as u32);
        chunk.move_bytes.extend_from_slice(r.mv.as_bytes());
        chunk.move_ends.push(chunk.move_bytes.len() as u32);
        chunk.score.push(r.score.unwrap_or(32002));
        chunk.result.push(r.result.unwrap_or(i8::MIN));
        chunk.ply.push(r.ply);
        chunk.game_id.push(r.game_id);
    }
    let batch = lakefish_lake::parts::batch_from_chunks(&[chunk]);
    let encoded = lakefish_lake::parts::encode_parquet(&batch, &key).unwrap();
    fx.rt.block_on(fx.ctx.lake.put(&key, encoded)).unwrap();

    let mut s = spec(&fx.shuffle);
    s.checkpoint_every = 2;
    s.batch_size = 512;
    let job = JobId::new();
    let err = train(&fx.ctx, &job, &s).unwrap_err().to_string();
    assert!(err.contains(&key) && err.contains("row"), "{err}");
    let runs = fx
        .rt
        .block_on(lakefish_jobs::nets::list_runs(&fx.ctx.lake))
        .unwrap();
    let run = runs
        .iter()
        .find(|r| !r.finished)
        .expect("the failed run's record");
    assert!(
        !run.checkpoints.is_empty(),
        "checkpoints before the bad chunk are kept"
    );
    // The run says why it stopped instead of looking as if it were still training (issue
    // 35, item 4).
    assert_eq!(run.state(), "failed");
    assert!(
        run.error.as_deref().unwrap().contains(&key),
        "{:?}",
        run.error
    );
    for c in &run.checkpoints {
        let key = format!("{}/checkpoints/{c}", run_prefix(&run.id));
        assert!(fx.rt.block_on(fx.ctx.lake.get(&key)).unwrap().is_some());
    }
}

#[test]
fn checkpoints_of_another_architecture_or_damaged_ones_are_refused() {
    let fx = fixture(3);
    let mut small = spec(&fx.shuffle);
    small.max_steps = Some(2);
    let a = train(&fx.ctx, &JobId::new(), &small).unwrap();
    let mut wide = small.clone();
    wide.arch = "48x2-8".into();
    let b = train(&fx.ctx, &JobId::new(), &wide).unwrap();
    let key_of = |run: &lakefish_schemas::RunRecord| {
        format!(
            "{}/checkpoints/{}",
            run_prefix(&run.id),
            run.checkpoints.last().unwrap()
        )
    };
    let a_bytes = fx
        .rt
        .block_on(fx.ctx.lake.get(&key_of(&a)))
        .unwrap()
        .unwrap();
    let b_key = key_of(&b);
    let b_bytes = fx.rt.block_on(fx.ctx.lake.get(&b_key)).unwrap().unwrap();
    let mut resume = wide.clone();
    resume.max_steps = Some(4);
    resume.resume = Some(b.id.clone());

    // Run b's last checkpoint replaced by one of run a (32x2-8): the tensor that does not fit
    // is named, and nothing is trained.
    fx.rt
        .block_on(fx.ctx.lake.put(&b_key, a_bytes.to_vec()))
        .unwrap();
    let err = train(&fx.ctx, &JobId::new(), &resume)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("ft.weight") && err.contains("another architecture"),
        "{err}"
    );

    // A truncated checkpoint.
    fx.rt
        .block_on(
            fx.ctx
                .lake
                .put(&b_key, b_bytes[..b_bytes.len() / 2].to_vec()),
        )
        .unwrap();
    let err = train(&fx.ctx, &JobId::new(), &resume)
        .unwrap_err()
        .to_string();
    assert!(err.contains(&b_key), "{err}");
    let rec = fx
        .rt
        .block_on(read_run(&fx.ctx.lake, &b.id))
        .unwrap()
        .unwrap();
    assert_eq!(rec.step, 2, "the refused resumes did not move the run");

    // Resuming with other settings is refused too.
    let mut other = resume.clone();
    other.lr = 0.5;
    let err = train(&fx.ctx, &JobId::new(), &other)
        .unwrap_err()
        .to_string();
    assert!(err.contains("other settings"), "{err}");
    // The refusal names the setting, both ways.
    assert!(err.contains("lr 0.5 (the run: "), "{err}");
}

#[test]
fn the_same_job_delivered_again_continues_its_run() {
    let fx = fixture(3);
    let mut s = spec(&fx.shuffle);
    s.max_steps = Some(3);
    s.checkpoint_every = 1;
    let job = JobId::new();
    let first = train(&fx.ctx, &job, &s).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    let again = train(&fx.ctx, &job, &s).unwrap();
    assert_eq!(again.id, first.id);
    assert_eq!(
        again.created, first.created,
        "the run record was continued, not replaced"
    );
    assert_eq!((again.step, &again.checkpoints), (3, &first.checkpoints));
}

/// A load-time filter (a mask definition) trains on exactly the rows it keeps: with batch
/// 1024 and one epoch, the run takes floor(kept training rows / 1024) steps, counted here
/// independently from the chunks.
#[test]
fn a_load_time_filter_trains_on_the_rows_it_keeps() {
    let fx = fixture(4);
    let manifest = fx.shuffle_manifest();
    let min_ply = 40;
    let mut kept = 0u64;
    let train_chunks = &manifest.chunks[..manifest.chunks.len() - 1];
    for index in 0..train_chunks.len() {
        let rows = lakefish_jobs::chunks::chunk_rows_as_text(
            &fx.ctx,
            &fx.shuffle,
            index as u32,
            usize::MAX,
        )
        .unwrap();
        kept += rows
            .iter()
            .filter(|r| r.score.is_some() && r.result.is_some() && r.ply >= min_ply)
            .count() as u64;
    }
    let mut s = spec(&fx.shuffle);
    s.filter = Some(Box::new(lakefish_schemas::MaskDefinition {
        name: lakefish_schemas::MaskName::new("late").unwrap(),
        min_ply: Some(min_ply),
        max_abs_score: None,
        ..lakefish_schemas::MaskDefinition::quiet()
    }));
    let filtered = train(&fx.ctx, &JobId::new(), &s).unwrap();
    let all = train(&fx.ctx, &JobId::new(), &spec(&fx.shuffle)).unwrap();
    eprintln!(
        "kept {kept} rows: {} steps filtered, {} unfiltered",
        filtered.step, all.step
    );
    assert_eq!(filtered.step, kept / 1024);
    assert!(filtered.step < all.step);
    assert_eq!(
        filtered.spec.filter, s.filter,
        "the run record keeps the filter"
    );
}

/// Stockfish 15.1's architecture trains like the others: 2n steps straight equal n steps
/// then a resume for n more, bit for bit, with a finite validation loss; it takes only the
/// feature set Stockfish reads, and says so.
#[test]
fn stockfish_s_architecture_trains_and_resumes_exactly() {
    use lakefish_schemas::train::FeatureSet;
    let fx = fixture(4);
    let sf = |steps: u64, resume: Option<lakefish_schemas::names::RunId>| {
        let mut s = spec(&fx.shuffle);
        s.features = FeatureSet::HalfKaV2Hm;
        s.arch = "stockfish-15.1".into();
        s.max_steps = Some(steps);
        s.resume = resume;
        s
    };
    let a = train(&fx.ctx, &JobId::new(), &sf(6, None)).unwrap();
    assert_eq!(a.step, 6);
    assert!(a.val_loss.iter().all(|v| v.is_finite()), "{:?}", a.val_loss);
    let b = train(&fx.ctx, &JobId::new(), &sf(3, None)).unwrap();
    let b = train(&fx.ctx, &JobId::new(), &sf(6, Some(b.id))).unwrap();
    let (wa, wb) = (last_checkpoint(&fx, &a.id), last_checkpoint(&fx, &b.id));
    assert_eq!(wa.len(), wb.len());
    for ((na, ta), (nb, tb)) in wa.iter().zip(&wb) {
        assert_eq!(na, nb);
        assert!(ta.equal(tb), "tensor {na} differs after resume");
    }
    assert!(wa.iter().any(|(n, _)| n.contains("psqt.weight")));

    let mut wrong = sf(1, None);
    wrong.features = FeatureSet::All768;
    let e = train(&fx.ctx, &JobId::new(), &wrong)
        .unwrap_err()
        .to_string();
    assert!(e.contains("halfka_v2_hm"), "{e}");
}

/// halfkp on the CPU takes the sparse transformer update by default: it resumes bit for bit,
/// learns (finite validation loss that falls below the first), and differs from dense Adam
/// (`--ft-update dense`), which moves rows a batch did not use by their momentum.
#[test]
fn the_sparse_transformer_update_resumes_exactly_and_differs_from_dense() {
    use lakefish_schemas::train::{FeatureSet, FtUpdate};
    let fx = fixture(4);
    let run = |steps: u64, update: FtUpdate, resume: Option<lakefish_schemas::names::RunId>| {
        let mut s = spec(&fx.shuffle);
        s.features = FeatureSet::HalfKp;
        s.max_steps = Some(steps);
        s.ft_update = update;
        s.resume = resume;
        train(&fx.ctx, &JobId::new(), &s).unwrap()
    };
    let a = run(8, FtUpdate::Auto, None);
    assert!(a.val_loss.iter().all(|v| v.is_finite()), "{:?}", a.val_loss);
    let b = run(4, FtUpdate::Sparse, None);
    let b = run(8, FtUpdate::Sparse, Some(b.id));
    let (wa, wb) = (last_checkpoint(&fx, &a.id), last_checkpoint(&fx, &b.id));
    for ((na, ta), (_, tb)) in wa.iter().zip(&wb) {
        assert!(
            ta.equal(tb),
            "tensor {na} differs after resume (auto is sparse here)"
        );
    }
    let dense = run(8, FtUpdate::Dense, None);
    let wd = last_checkpoint(&fx, &dense.id);
    let ft = |w: &[(String, tch::Tensor)]| {
        w.iter()
            .find(|(n, _)| n == "ft.weight")
            .map(|(_, t)| t.shallow_clone())
            .unwrap()
    };
    assert!(
        !ft(&wa).equal(&ft(&wd)),
        "sparse and dense made the same transformer"
    );
    // The dense layers see the same kind of update either way: both runs learned.
    assert!(dense.val_loss.iter().all(|v| v.is_finite()));
}

/// bullet's optimizer and start as options (`weight_decay`, `clip_weights`, no
/// `bias_correction`, `weight_init = "bullet"`), sparse and dense: each resumes bit for bit,
/// keeps every weight inside the clip (which binds), and learns; the bullet start draws
/// weights with the standard deviation √(2/fan-in) and zero biases.
#[test]
fn bullet_s_adamw_and_start_resume_exactly_and_clip_every_weight() {
    use lakefish_schemas::train::{FtUpdate, WeightInit};
    use lakefish_train::model::{Arch, Model, ModelArch};
    let fx = fixture(4);
    let clip = 0.25;
    let mut val_losses = Vec::new();
    for update in [FtUpdate::Sparse, FtUpdate::Dense] {
        let run = |steps: Option<u64>, resume: Option<lakefish_schemas::names::RunId>| {
            let mut s = spec(&fx.shuffle);
            s.arch = "32x2:screlu".into();
            s.max_steps = steps;
            s.ft_update = update;
            s.weight_decay = 0.01;
            s.clip_weights = Some(clip);
            s.bias_correction = Some(false);
            s.weight_init = Some(WeightInit::Bullet);
            s.lr = 0.01;
            s.resume = resume;
            train(&fx.ctx, &JobId::new(), &s).unwrap()
        };
        // A whole epoch, validated at its end.
        let epoch = run(None, None);
        let val = *epoch.val_loss.last().unwrap();
        assert!(val.is_finite() && val < epoch.material_val_loss.unwrap());
        val_losses.push(val);
        let straight = run(Some(8), None);
        let half = run(Some(4), None);
        let resumed = run(Some(8), Some(half.id));
        let (wa, wb) = (
            last_checkpoint(&fx, &straight.id),
            last_checkpoint(&fx, &resumed.id),
        );
        let mut at_clip = 0;
        for ((na, ta), (_, tb)) in wa.iter().zip(&wb) {
            assert!(ta.equal(tb), "{update:?}: {na} differs after resume");
            if ta.kind() == tch::Kind::Float && !na.starts_with("adam.") {
                let max = ta.abs().max().double_value(&[]);
                assert!(max <= clip + 1e-7, "{update:?}: {na} reaches {max}");
                at_clip += usize::from(max >= clip - 1e-7);
            }
        }
        assert!(at_clip > 0, "{update:?}: the clip never bound");
    }
    // The sparse path computes SCReLU's output per perspective (no concatenation); lazy and
    // dense Adam then learn nearly the same.
    let (sparse, dense) = (val_losses[0], val_losses[1]);
    assert!(
        (sparse / dense - 1.0).abs() < 0.05,
        "sparse {sparse}, dense {dense}"
    );

    tch::manual_seed(5);
    let arch = ModelArch::Lakefish(Arch::parse("256x2-32-32").unwrap());
    let model = Model::new(&arch, 768, 32, tch::Device::Cpu).with_bullet_init();
    for (name, t) in &model.params {
        let want = match name.as_str() {
            "ft.weight" => (2.0f64 / 768.0).sqrt(),
            "l0.weight" => (2.0f64 / 512.0).sqrt(),
            "l1.weight" => (2.0f64 / 32.0).sqrt(),
            // 32 values: drawn, but too few to estimate their spread.
            "l2.weight" => {
                assert!(t.abs().min().double_value(&[]) > 0.0);
                continue;
            }
            _ => {
                assert_eq!(
                    t.abs().sum(tch::Kind::Float).double_value(&[]),
                    0.0,
                    "{name}"
                );
                continue;
            }
        };
        let sd = t.std(true).double_value(&[]);
        assert!(
            (sd / want - 1.0).abs() < 0.15,
            "{name}: sd {sd}, want {want}"
        );
    }
}

/// A described net on the sparse update (bullet's king- and output-bucketed net with its
/// factoriser, 32 wide, in the fused step): resumes bit for bit and learns.
#[test]
fn a_bucketed_described_net_on_the_sparse_update_resumes_exactly() {
    use lakefish_schemas::netspec::NetSpec;
    use lakefish_schemas::train::FtUpdate;
    let fx = fixture(4);
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../infra/nets/bullet-3-input-buckets.toml"),
    )
    .unwrap();
    let mut net = NetSpec::parse(&text).unwrap();
    net.transformer.width = 32;
    let run = |steps: Option<u64>, resume: Option<lakefish_schemas::names::RunId>| {
        let mut s = spec(&fx.shuffle);
        s.net = Some(net.clone());
        s.ft_update = FtUpdate::Sparse;
        s.lr = 3e-3;
        s.max_steps = steps;
        s.resume = resume;
        train(&fx.ctx, &JobId::new(), &s).unwrap()
    };
    let epoch = run(None, None);
    let val = *epoch.val_loss.last().unwrap();
    assert!(val < epoch.material_val_loss.unwrap(), "val {val}");
    let straight = run(Some(8), None);
    let half = run(Some(4), None);
    let resumed = run(Some(8), Some(half.id));
    assert_eq!(resumed.step, 8);
    let (wa, wb) = (
        last_checkpoint(&fx, &straight.id),
        last_checkpoint(&fx, &resumed.id),
    );
    assert_eq!(wa.len(), wb.len());
    for ((na, ta), (_, tb)) in wa.iter().zip(&wb) {
        assert!(ta.equal(tb), "{na} differs after resume");
    }
}

/// A run trained before defaults had generations resumes from a spec that leaves them out
/// or writes them out alike, and is refused another generation; a job whose run id is
/// taken by a run of other settings leaves that run as it is (issue 39).
#[test]
fn an_old_run_resumes_as_trained_and_a_run_is_never_trained_over() {
    let fx = fixture(3);
    let mut s = spec(&fx.shuffle);
    s.max_steps = Some(2);
    s.defaults = Some(1);
    let run = train(&fx.ctx, &JobId::new(), &s).unwrap();
    // Its record as a build before generations wrote it: no defaults, no explicit choices.
    let key = format!("{}/run.json", run_prefix(&run.id));
    let mut old = serde_json::to_value(&run).unwrap();
    for field in ["defaults", "bias_correction", "weight_init"] {
        old["spec"].as_object_mut().unwrap().remove(field);
    }
    fx.rt
        .block_on(fx.ctx.lake.put(&key, serde_json::to_vec(&old).unwrap()))
        .unwrap();
    let mut resume = spec(&fx.shuffle);
    resume.resume = Some(run.id.clone());
    resume.max_steps = Some(3);
    assert_eq!(resume.defaults, None);
    let after = train(&fx.ctx, &JobId::new(), &resume).unwrap();
    assert_eq!((after.step, after.spec.generation()), (3, 1));
    assert!(after.spec.bias_correction());
    // The same settings written out are the same settings.
    let mut spelled = resume.clone();
    spelled.max_steps = Some(4);
    spelled.bias_correction = Some(true);
    spelled.weight_init = Some(lakefish_schemas::train::WeightInit::Uniform);
    assert_eq!(train(&fx.ctx, &JobId::new(), &spelled).unwrap().step, 4);
    // Another generation is other settings.
    let mut newer = resume.clone();
    newer.max_steps = Some(5);
    newer.defaults = Some(2);
    let err = train(&fx.ctx, &JobId::new(), &newer)
        .unwrap_err()
        .to_string();
    assert!(err.contains("defaults 2 (the run: 1)"), "{err}");

    // A job whose run exists with other settings is refused, and the run is untouched.
    let job = JobId::new();
    let mut mine = spec(&fx.shuffle);
    mine.max_steps = Some(2);
    let first = train(&fx.ctx, &job, &mine).unwrap();
    let mut other = mine.clone();
    other.lr *= 2.0;
    let err = train(&fx.ctx, &job, &other).unwrap_err().to_string();
    assert!(
        err.contains("already exists") && err.contains("left as it is"),
        "{err}"
    );
    let kept = fx
        .rt
        .block_on(read_run(&fx.ctx.lake, &first.id))
        .unwrap()
        .unwrap();
    assert_eq!(kept, first);
}

/// A learning-rate schedule (a warm-up into a cosine) and a λ schedule (linear) are what the
/// run's metrics record at every row, each equal to its formula written out here; and a run
/// with schedules resumes exactly (a schedule is a function of the step).
#[test]
fn schedules_follow_their_formulas_and_resume_exactly() {
    let fx = fixture(4);
    let mut s = spec(&fx.shuffle);
    s.max_steps = Some(40);
    s.lr_schedule = Some(
        serde_json::from_value(serde_json::json!({
            "kind": "warmup", "steps": 10,
            "then": {"kind": "cosine", "start": 0.002, "end": 0.0002, "steps": 30}
        }))
        .unwrap(),
    );
    s.lambda_schedule = Some(
        serde_json::from_value(serde_json::json!(
            {"kind": "linear", "start": 1.0, "end": 0.5, "steps": 40}
        ))
        .unwrap(),
    );
    s.validate().unwrap();
    let run = train(&fx.ctx, &JobId::new(), &s).unwrap();
    let bytes = fx
        .rt
        .block_on(
            fx.ctx
                .lake
                .get(&format!("{}/metrics.parquet", run_prefix(&run.id))),
        )
        .unwrap()
        .unwrap();
    let rows = lakefish_train::train::read_metrics(&bytes).unwrap();
    assert_eq!(rows.len(), 4, "a row every 10 steps");
    // The row at step s was written after step s-1 (counting from 0) ran with these values.
    let lr = |i: f64| {
        if i < 10.0 {
            0.002 * (i + 1.0) / 10.0
        } else {
            0.0002 + 0.0018 * 0.5 * (1.0 + (std::f64::consts::PI * (i - 10.0) / 30.0).cos())
        }
    };
    for r in &rows {
        let i = (r.step - 1) as f64;
        assert!(
            (r.lr - lr(i)).abs() < 1e-15,
            "step {}: lr {} vs {}",
            r.step,
            r.lr,
            lr(i)
        );
        let want = 1.0 - 0.5 * i / 40.0;
        assert!((r.lambda.unwrap() - want).abs() < 1e-15, "step {}", r.step);
    }

    resumes_exactly(&fx, &s, 6);
}

/// `s` trained 2n steps straight equals `s` trained n steps and resumed for n more, tensor
/// for tensor; the straight run's weights.
fn resumes_exactly(
    fx: &Fixture,
    s: &lakefish_schemas::TrainSpec,
    n: u64,
) -> Vec<(String, tch::Tensor)> {
    let mut straight = s.clone();
    straight.max_steps = Some(2 * n);
    let a = train(&fx.ctx, &JobId::new(), &straight).unwrap();
    let mut first = s.clone();
    first.max_steps = Some(n);
    let b = train(&fx.ctx, &JobId::new(), &first).unwrap();
    let mut resumed = first.clone();
    resumed.max_steps = Some(2 * n);
    resumed.resume = Some(b.id.clone());
    let b = train(&fx.ctx, &JobId::new(), &resumed).unwrap();
    let wa = last_checkpoint(fx, &a.id);
    for ((na, ta), (_, tb)) in wa.iter().zip(&last_checkpoint(fx, &b.id)) {
        assert!(ta.equal(tb), "tensor {na} differs after resume");
    }
    wa
}

/// Half the positions mirrored at random (seed 003's `mirror_percentage`): a run resumes
/// exactly (the choice is a function of the seed, the chunk and the row), and it learns
/// something else than the same run unmirrored.
#[test]
fn a_random_half_mirrored_resumes_exactly_and_changes_what_is_learned() {
    let fx = fixture(4);
    let mut s = spec(&fx.shuffle);
    s.mirror_fraction = Some(0.5);
    s.validate().unwrap();
    let wa = resumes_exactly(&fx, &s, 5);
    let mut plain = s.clone();
    plain.max_steps = Some(10);
    plain.mirror_fraction = None;
    let c = train(&fx.ctx, &JobId::new(), &plain).unwrap();
    let wc = last_checkpoint(&fx, &c.id);
    assert!(!wa[0].1.equal(&wc[0].1), "mirroring changed nothing");
    // Both ways at once are refused, naming them.
    let mut both = s.clone();
    both.mirror = true;
    assert!(
        both.validate()
            .unwrap_err()
            .contains("mirror_fraction and mirror")
    );
}

/// The power loss's exponent reaches the trainer: power with exponent 2 trains exactly as mse,
/// and the default 2.6 trains otherwise. An exponent without the power loss is refused.
#[test]
fn the_power_loss_takes_its_exponent() {
    let fx = fixture(4);
    let run = |loss: &str, power: Option<f64>| {
        let mut s = spec(&fx.shuffle);
        s.max_steps = Some(4);
        s.loss = lakefish_schemas::LossName::parse(loss).unwrap();
        s.loss_power = power;
        s.validate().unwrap();
        let r = train(&fx.ctx, &JobId::new(), &s).unwrap();
        last_checkpoint(&fx, &r.id)
    };
    let (mse, two, default) = (
        run("mse", None),
        run("power", Some(2.0)),
        run("power", None),
    );
    assert!(mse[0].1.equal(&two[0].1), "power 2 is mse");
    assert!(!mse[0].1.equal(&default[0].1), "2.6 trains otherwise");
    let mut s = spec(&fx.shuffle);
    s.loss_power = Some(2.0);
    assert!(s.validate().unwrap_err().contains("loss_power"));
}

/// Plateau ("newbob"): with a threshold no epoch can meet, every epoch after the first cuts
/// the rate (the third epoch trains at half the rate; the rule ends at a quarter) and goes
/// back to the first epoch's
/// weights (its checkpoint and the second's hold the same tensors); the rule's state rides in
/// the run record, so the run resumes exactly.
#[test]
fn a_plateau_cuts_the_rate_goes_back_to_the_best_and_resumes_exactly() {
    let fx = fixture(4);
    let mut s = spec(&fx.shuffle);
    s.epochs = 3;
    s.plateau = Some(lakefish_schemas::train::Plateau {
        factor: 0.5,
        patience: 1,
        threshold: 0.99,
    });
    s.validate().unwrap();
    let run = train(&fx.ctx, &JobId::new(), &s).unwrap();
    let state = run.plateau.clone().unwrap();
    assert_eq!((state.cuts, state.lr_factor), (2, 0.25), "{state:?}");
    assert_eq!(state.best_checkpoint, run.checkpoints[0]);
    let bytes = fx
        .rt
        .block_on(
            fx.ctx
                .lake
                .get(&format!("{}/metrics.parquet", run_prefix(&run.id))),
        )
        .unwrap()
        .unwrap();
    let rows = lakefish_train::train::read_metrics(&bytes).unwrap();
    for r in &rows {
        // Cut after the second epoch's validation, and again after the third's.
        let want = s.lr * [1.0, 1.0, 0.5][r.epoch as usize];
        assert_eq!(r.lr, want, "epoch {}", r.epoch);
    }
    // The second epoch's checkpoint holds the first's weights and optimizer state.
    let tensors = |name: &str| {
        let key = format!("{}/checkpoints/{name}", run_prefix(&run.id));
        let b = fx.rt.block_on(fx.ctx.lake.get(&key)).unwrap().unwrap();
        tch::Tensor::load_multi_from_stream(std::io::Cursor::new(b.to_vec())).unwrap()
    };
    let (first, second) = (tensors(&run.checkpoints[0]), tensors(&run.checkpoints[1]));
    for ((n, a), (_, b)) in first.iter().zip(&second) {
        if n != "position" {
            assert!(a.equal(b), "{n}");
        }
    }
    // Two epochs, then a resume into the third: the same as three straight.
    let mut two = s.clone();
    two.epochs = 2;
    let b = train(&fx.ctx, &JobId::new(), &two).unwrap();
    let mut resumed = s.clone();
    resumed.resume = Some(b.id.clone());
    let b = train(&fx.ctx, &JobId::new(), &resumed).unwrap();
    assert_eq!(b.plateau, run.plateau);
    for ((n, a), (_, bt)) in last_checkpoint(&fx, &run.id)
        .iter()
        .zip(&last_checkpoint(&fx, &b.id))
    {
        assert!(a.equal(bt), "tensor {n} differs after resume");
    }
}

/// Superbatches (bullet's unit): a superbatch as long as a pass trains what an epoch trains,
/// tensor for tensor; longer ones run on through the next pass, validate and checkpoint after
/// each superbatch, and resume exactly across both boundaries.
#[test]
fn superbatches_span_passes_and_resume_exactly() {
    let fx = fixture(4);
    let mut epochs = spec(&fx.shuffle);
    epochs.epochs = 2;
    let by_epoch = train(&fx.ctx, &JobId::new(), &epochs).unwrap();
    let per_pass = by_epoch.step / 2;
    assert!(per_pass >= 4, "{per_pass} batches a pass");
    let mut same = epochs.clone();
    same.superbatch = Some(per_pass);
    same.validate().unwrap();
    let by_superbatch = train(&fx.ctx, &JobId::new(), &same).unwrap();
    assert_eq!(by_superbatch.step, by_epoch.step);
    assert_eq!(by_superbatch.val_loss, by_epoch.val_loss);
    let (wa, wb) = (
        last_checkpoint(&fx, &by_epoch.id),
        last_checkpoint(&fx, &by_superbatch.id),
    );
    // The same weights and optimizer state (the position says pass 1's end, not pass 2's
    // start: the same place in the data).
    for ((na, ta), (_, tb)) in wa.iter().zip(&wb).filter(|((n, _), _)| n != "position") {
        assert!(
            ta.equal(tb),
            "tensor {na}: a pass-long superbatch is not an epoch"
        );
    }

    // Longer than a pass: three superbatches run through 3·n batches of four passes' data.
    let n = per_pass + per_pass / 2 + 1;
    let mut long = spec(&fx.shuffle);
    long.epochs = 3;
    long.superbatch = Some(n);
    let run = train(&fx.ctx, &JobId::new(), &long).unwrap();
    assert_eq!((run.step, run.epoch), (3 * n, 3));
    assert_eq!(run.val_loss.len(), 3, "validation after each superbatch");
    for k in 1..=3 {
        let name = format!("step-{:09}.ot", k * n);
        assert!(
            run.checkpoints.contains(&name),
            "{name} in {:?}",
            run.checkpoints
        );
    }
    // Stopped inside the second superbatch (and inside a pass), resumed: the same weights.
    resumes_exactly(&fx, &long, n + 2);
    let mut zero = long.clone();
    zero.superbatch = Some(0);
    assert!(zero.validate().unwrap_err().contains("superbatch"));
}

/// Ranger's steps equal a numpy reference written from RAdam's and Lookahead's papers
/// (tests/py/ranger_reference.py): plain-momentum steps before ρt passes the threshold,
/// rectified ones after, the lookahead every k steps, with weight decay.
#[test]
fn ranger_steps_equal_a_numpy_reference() {
    use lakefish_train::adam::{AdamOptions, RangerState, ranger_tensor_step};
    let r = lakefish_schemas::train::Ranger {
        k: 5,
        ..Default::default()
    };
    let settings = serde_json::json!({
        "seed": 3, "n": 7, "steps": 17, "beta1": r.beta1, "beta2": r.beta2, "eps": r.eps,
        "lr": 0.01, "weight_decay": 0.02, "alpha": r.alpha, "k": r.k, "threshold": r.threshold,
    });
    let python = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/py/ranger_reference.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .arg(settings.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let vec = |v: &serde_json::Value| -> Vec<f64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    let p = tch::Tensor::from_slice(&vec(&want["p0"]));
    let (m, v, slow) = (p.zeros_like(), p.zeros_like(), p.zeros_like());
    let options = AdamOptions {
        weight_decay: 0.02,
        ..Default::default()
    };
    let (mut rectified, mut plain) = (0, 0);
    for (t, (g, after)) in want["grads"]
        .as_array()
        .unwrap()
        .iter()
        .zip(want["steps"].as_array().unwrap())
        .enumerate()
    {
        let t = t as i64 + 1;
        let g = tch::Tensor::from_slice(&vec(g));
        let state = RangerState {
            m: &m,
            v: &v,
            slow: &slow,
        };
        ranger_tensor_step(&p, &g, state, &r, t, 0.01, options);
        match lakefish_train::adam::radam_step_size(&r, t).0 {
            true => rectified += 1,
            false => plain += 1,
        }
        let got = Vec::<f64>::try_from(&p).unwrap();
        for (a, b) in got.iter().zip(vec(after)) {
            assert!((a - b).abs() < 1e-12, "step {t}: {a} vs numpy {b}");
        }
    }
    assert!(
        rectified > 5 && plain > 2,
        "both kinds of step: {rectified} {plain}"
    );
}

/// Ranger trains, resumes exactly (its slow weights ride in the checkpoint), and learns
/// something else than Adam; with the sparse update it is refused, naming the field.
#[test]
fn ranger_resumes_exactly_and_differs_from_adam() {
    let fx = fixture(4);
    let mut s = spec(&fx.shuffle);
    s.optimizer = Some(Box::new(lakefish_schemas::train::Optimizer::Ranger(
        lakefish_schemas::train::Ranger {
            k: 4,
            ..Default::default()
        },
    )));
    s.validate().unwrap();
    let wa = resumes_exactly(&fx, &s, 7);
    assert!(
        wa.iter().any(|(n, _)| n.starts_with("ranger.slow.")),
        "slow weights saved"
    );
    let mut adam = s.clone();
    adam.optimizer = None;
    adam.max_steps = Some(14);
    let b = train(&fx.ctx, &JobId::new(), &adam).unwrap();
    let wb = last_checkpoint(&fx, &b.id);
    assert!(!wa[0].1.equal(&wb[0].1), "Ranger trained as Adam did");
    let mut sparse = s.clone();
    sparse.ft_update = lakefish_schemas::train::FtUpdate::Sparse;
    assert!(
        sparse
            .validate()
            .unwrap_err()
            .contains("ft_update sparse: Ranger")
    );
}

/// Removed under a training (issue 45): the shuffle goes as `rm --force` removes it (its
/// manifest first, then the chunks) while the trainer is at its first steps of four epochs
/// (every epoch reads the chunks again). The trainer fails naming the chunk it could not
/// read, never training on half of one, and the run says why it stopped.
#[test]
fn a_shuffle_removed_under_a_training_fails_it_clearly() {
    use std::sync::atomic::{AtomicBool, Ordering};
    struct RemoveOnFirstStep {
        root: std::path::PathBuf,
        shuffle: String,
        done: AtomicBool,
    }
    impl lakefish_jobs::ProgressSink for RemoveOnFirstStep {
        fn report(&self, p: &lakefish_schemas::Progress) {
            if p.stage.contains(" step ") && !self.done.swap(true, Ordering::SeqCst) {
                let dir = self.root.join("shuffled").join(&self.shuffle);
                std::fs::remove_file(dir.join("_manifest.json")).unwrap();
                std::fs::remove_dir_all(&dir).unwrap();
            }
        }
    }
    let fx = fixture(3);
    let sink = std::sync::Arc::new(RemoveOnFirstStep {
        root: fx._dir.path().join("lake"),
        shuffle: fx.shuffle.to_string(),
        done: AtomicBool::new(false),
    });
    let ctx = fx.ctx.clone().with_progress(sink.clone());
    let mut s = spec(&fx.shuffle);
    s.epochs = 4;
    s.batch_size = 256;
    s.checkpoint_every = 2;
    let job = JobId::new();
    let out = train(&ctx, &job, &s);
    assert!(sink.done.load(Ordering::SeqCst), "the shuffle was removed");
    let runs = fx
        .rt
        .block_on(lakefish_jobs::nets::list_runs(&fx.ctx.lake))
        .unwrap();
    assert_eq!(runs.len(), 1);
    let e = out.unwrap_err().to_string();
    assert!(
        e.contains(&format!("shuffled/{}/chunk-", fx.shuffle)) && e.contains("missing"),
        "the error names the missing chunk: {e}"
    );
    assert_eq!(runs[0].state(), "failed");
    assert!(
        runs[0]
            .error
            .as_deref()
            .is_some_and(|r| r.contains("missing")),
        "{:?}",
        runs[0].error
    );
    for c in &runs[0].checkpoints {
        let key = format!("{}/checkpoints/{c}", run_prefix(&runs[0].id));
        assert!(fx.rt.block_on(fx.ctx.lake.get(&key)).unwrap().is_some());
    }
}
