//! Quantize and register on a real (local) lake: the integer net against the float model on
//! at least 10,000 lake positions, the `.nnue` round trip, the registry's content addressing
//! and idempotence, and the errors for values that do not fit or damaged files.

mod common;

use common::{fixture, spec};
use lakefish_engine::nnue::Network;
use lakefish_jobs::nets::{fetch_net, list_nets, read_net, register};
use lakefish_schemas::nets::{net_keys, quantized_keys};
use lakefish_schemas::{JobId, QuantizeSpec, RegisterSpec};
use lakefish_train::model::{Arch, Model, ModelArch};
use lakefish_train::quantize::{quantize, quantize_model};
use lakefish_train::train::train;

/// A SCReLU net (`:screlu`, the transformer squared straight into the output) trains,
/// quantizes within the same targets under its own scheme, and reads back as what it is.
/// Two epochs of `arch` on a six-chunk fixture, as the quantize tests train their nets.
fn trained(fx: &common::Fixture, arch: &str) -> lakefish_schemas::RunRecord {
    let mut s = spec(&fx.shuffle);
    s.arch = arch.into();
    s.epochs = 2;
    s.lr = 3e-3;
    train(&fx.ctx, &JobId::new(), &s).unwrap()
}

#[test]
fn a_screlu_net_trains_and_quantizes_within_targets() {
    let fx = fixture(6);
    let run = trained(&fx, "64x2:screlu");
    assert!(
        run.val_loss.iter().all(|v| v.is_finite()),
        "{:?}",
        run.val_loss
    );
    let report = quantize(&fx.ctx, &QuantizeSpec::new(&run.id)).unwrap();
    let e = &report.error;
    assert_eq!(e.positions, 10_000);
    assert!(e.mean_abs_cp <= 3.0 && e.p99_abs_cp <= 15.0, "{e:?}");
    assert!(e.max_abs_cp > 0.0);
    let (nnue_key, _) = quantized_keys(&run.id, run.step);
    let bytes = fx.rt.block_on(fx.ctx.lake.get(&nnue_key)).unwrap().unwrap();
    let net = Network::from_bytes(&bytes).unwrap();
    assert_eq!(net.arch.to_string(), "64x2:screlu");
    // Output weights stay where a·w fits an i16 lane.
    assert!(net.layers[0].weights.iter().all(|&w| w > i8::MIN));
}

#[test]
fn a_trained_net_quantizes_within_targets_and_registers_once() {
    let fx = fixture(6);
    let run = trained(&fx, "64x2-16-16");

    let report = quantize(&fx.ctx, &QuantizeSpec::new(&run.id)).unwrap();
    let e = &report.error;
    eprintln!(
        "{} positions: mean |Δ| {:.3} cp, p99 {:.3} cp, max {:.3} cp; internal mean {:.3}, p99 {:.3}",
        e.positions,
        e.mean_abs_cp,
        e.p99_abs_cp,
        e.max_abs_cp,
        e.mean_abs_internal,
        e.p99_abs_internal
    );
    assert_eq!(e.positions, 10_000);
    assert!(e.mean_abs_cp <= 3.0 && e.p99_abs_cp <= 15.0, "{e:?}");
    // The comparison is not vacuous: the net's outputs differ from the float model's a bit.
    assert!(e.max_abs_cp > 0.0);

    let (nnue_key, _) = quantized_keys(&run.id, run.step);
    let bytes = fx.rt.block_on(fx.ctx.lake.get(&nnue_key)).unwrap().unwrap();
    let net = Network::from_bytes(&bytes).unwrap();
    assert_eq!(net.arch.to_string(), "64x2-16-16");
    assert_eq!(net.features.name(), "all768");
    assert!(
        net.description.contains(run.id.as_str()),
        "{}",
        net.description
    );
    assert_eq!(net.to_bytes(), bytes.to_vec());

    // Quantizing again writes the same bytes.
    let again = quantize(&fx.ctx, &QuantizeSpec::new(&run.id)).unwrap();
    assert_eq!(again.sha256, report.sha256);

    let reg = RegisterSpec {
        run: run.id.clone(),
        checkpoint: None,
        parent: None,
    };
    let m = register(&fx.ctx, &reg).unwrap();
    assert_eq!(m.name, format!("nn-{}.nnue", &report.sha256[..12]));
    assert_eq!(m.run, run.id);
    assert_eq!(m.shuffle, fx.shuffle);
    // The manifest records the net as a description, the one its features and arch name.
    let net = m.net.clone().expect("a description in the manifest");
    assert_eq!(net.as_preset(), Some(("all768", m.arch.clone())));
    assert_eq!(m.datasets, vec!["binpack/train".to_string()]);
    // (JSON keeps these to within an ulp.)
    assert_eq!(m.quantization.positions, again.error.positions);
    assert!((m.quantization.p99_abs_cp - again.error.p99_abs_cp).abs() < 1e-9);
    assert!((m.quantization.mean_abs_cp - again.error.mean_abs_cp).abs() < 1e-9);
    // Registering the same bytes again is a no-op: the first manifest stands.
    std::thread::sleep(std::time::Duration::from_millis(5));
    let m2 = register(&fx.ctx, &reg).unwrap();
    assert_eq!(m2, m);
    let all = fx.rt.block_on(list_nets(&fx.ctx.lake)).unwrap();
    assert_eq!(all, vec![m.clone()]);
    let (got, file) = fx.rt.block_on(fetch_net(&fx.ctx.lake, &m.name)).unwrap();
    assert_eq!(got, m);
    assert_eq!(file, bytes);

    // A child names its parent; an unknown parent is refused.
    let bad_parent = RegisterSpec {
        parent: Some("nn-000000000000".into()),
        ..reg.clone()
    };
    let e = register(&fx.ctx, &bad_parent).unwrap_err().to_string();
    assert!(
        e.contains("parent net nn-000000000000.nnue is not registered"),
        "{e}"
    );

    // A damaged quantized file is refused by register, and the registry stays as it was.
    let mut damaged = bytes.to_vec();
    damaged[60] ^= 0x01;
    fx.rt.block_on(fx.ctx.lake.put(&nnue_key, damaged)).unwrap();
    let e = register(&fx.ctx, &reg).unwrap_err().to_string();
    assert!(e.contains(&nnue_key) && e.contains("sha256"), "{e}");
    assert_eq!(
        fx.rt.block_on(list_nets(&fx.ctx.lake)).unwrap(),
        vec![m.clone()]
    );

    // A damaged registry file is caught on fetch, naming the key.
    let (file_key, _) = net_keys(&m.name);
    let mut damaged = bytes.to_vec();
    damaged[100] ^= 0x40;
    fx.rt.block_on(fx.ctx.lake.put(&file_key, damaged)).unwrap();
    let e = fx
        .rt
        .block_on(fetch_net(&fx.ctx.lake, &m.name))
        .unwrap_err()
        .to_string();
    assert!(e.contains(&file_key) && e.contains("sha256"), "{e}");
    assert!(
        fx.rt
            .block_on(read_net(&fx.ctx.lake, "nn-ffffffffffff"))
            .unwrap()
            .is_none()
    );
}

#[test]
fn king_relative_feature_sets_quantize_too() {
    let fx = fixture(4);
    for features in ["halfkp", "halfka_v2_hm"] {
        let mut s = spec(&fx.shuffle);
        s.features = lakefish_schemas::FeatureSet::parse(features).unwrap();
        s.arch = "16x2-8".into();
        s.max_steps = Some(20);
        s.lr = 3e-3;
        let run = train(&fx.ctx, &JobId::new(), &s).unwrap();
        let mut q = QuantizeSpec::new(&run.id);
        q.positions = 3000;
        let report = quantize(&fx.ctx, &q).unwrap();
        eprintln!("{features}: {:?}", report.error);
        assert_eq!(report.features, features);
        assert!(report.error.positions > 0);
        assert!(report.error.mean_abs_cp <= 3.0, "{:?}", report.error);
    }
}

#[test]
fn unrepresentable_values_and_missing_steps_are_named() {
    // The error a model gets when `tensor` is filled with `value` before quantizing.
    let refused = |tensor: &str, value: f64| {
        let arch = ModelArch::Lakefish(Arch::parse("8x2-4").unwrap());
        let model = Model::new(&arch, 768, 32, tch::Device::Cpu);
        tch::no_grad(|| {
            let _ = model.param(tensor).shallow_clone().fill_(value);
        });
        quantize_model(
            &model,
            lakefish_engine::features::FeatureSetKind::All768,
            String::new(),
            None,
        )
        .unwrap_err()
        .to_string()
    };
    let e = refused("l0.weight", 3.0);
    assert!(
        e.contains("tensor l0.weight") && e.contains("nothing was written"),
        "{e}"
    );
    // An accumulator that could overflow int16 is refused, not wrapped.
    let e = refused("ft.weight", 20.0);
    assert!(e.contains("ft.weight") && e.contains("int16"), "{e}");

    let fx = fixture(3);
    let e = quantize(
        &fx.ctx,
        &QuantizeSpec::new(&"run-nosuchrun".parse().unwrap()),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("run-nosuchrun does not exist"), "{e}");
    let mut s = spec(&fx.shuffle);
    s.max_steps = Some(2);
    let run = train(&fx.ctx, &JobId::new(), &s).unwrap();
    let mut q = QuantizeSpec::new(&run.id);
    q.checkpoint = Some(999);
    let e = quantize(&fx.ctx, &q).unwrap_err().to_string();
    assert!(e.contains("no checkpoint at step 999"), "{e}");
    // Registering before quantizing says what to run.
    let e = register(
        &fx.ctx,
        &RegisterSpec {
            run: run.id.clone(),
            checkpoint: None,
            parent: None,
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("lakefish quantize --run"), "{e}");
}

/// Stockfish's format has fixed scales: a weight beyond them, or a transformer whose
/// accumulator could overflow int16, is an error naming the tensor, never clipped.
#[test]
fn stockfish_quantization_refuses_what_does_not_fit() {
    let refused = |tensor: &str, value: f64| {
        let model = Model::new(&ModelArch::Stockfish, 22_528, 32, tch::Device::Cpu);
        tch::no_grad(|| {
            let _ = model.param(tensor).shallow_clone().fill_(value);
        });
        lakefish_train::stockfish_model::quantize(&model, "test")
            .unwrap_err()
            .to_string()
    };
    let e = refused("l1.weight", 3.0);
    assert!(
        e.contains("tensor l1.weight") && e.contains("nothing was written"),
        "{e}"
    );
    let e = refused("out.weight", 2.0);
    assert!(e.contains("tensor out.weight"), "{e}");
    let e = refused("ft.weight", 20.0);
    assert!(e.contains("ft.weight") && e.contains("int16"), "{e}");
    // A fresh model fits, and its file reads back as what was written.
    let model = Model::new(&ModelArch::Stockfish, 22_528, 32, tch::Device::Cpu);
    let net = lakefish_train::stockfish_model::quantize(&model, "fresh").unwrap();
    let bytes = net.to_bytes().unwrap();
    assert!(lakefish_engine::stockfish_net::StockfishNet::from_bytes(&bytes).unwrap() == net);
}

/// bullet's four progression nets (`infra/nets/bullet-*.toml`, transformers narrowed to 64
/// so the test stays short) each train, beat the material-only baseline on held-out chunks,
/// quantize as their descriptions say within the usual float-vs-integer limits, read back
/// whole and register with their description; the king-bucketed one resumes exactly.
#[test]
fn bullet_progression_nets_train_quantize_and_register() {
    use lakefish_engine::spec_net::SpecNet;
    use lakefish_schemas::netspec::NetSpec;
    let fx = fixture(6);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../infra/nets");
    for name in [
        "bullet-1-simple",
        "bullet-2-output-buckets",
        "bullet-3-input-buckets",
        "bullet-4-multi-layer",
    ] {
        let text = std::fs::read_to_string(dir.join(format!("{name}.toml"))).unwrap();
        let mut net = NetSpec::parse(&text).unwrap();
        net.transformer.width = 64;
        let mut s = spec(&fx.shuffle);
        s.net = Some(net.clone());
        s.epochs = 2;
        s.lr = 3e-3;
        let run = train(&fx.ctx, &JobId::new(), &s).unwrap();
        let (val, material) = (
            run.val_loss.last().copied().unwrap(),
            run.material_val_loss.unwrap(),
        );
        assert!(
            val < material,
            "{name}: val {val} against material {material}"
        );
        assert!(run.step > 200, "{name}: {} steps", run.step);

        let report = quantize(&fx.ctx, &QuantizeSpec::new(&run.id)).unwrap();
        let e = &report.error;
        eprintln!("{name}: val {val:.5} (material {material:.5}), quantized: {e:?}");
        assert!(
            e.mean_abs_cp <= 3.0 && e.p99_abs_cp <= 15.0,
            "{name}: {e:?}"
        );
        assert!(e.max_abs_cp > 0.0, "{name}: the check compared something");
        assert_eq!(report.features, "netspec");
        let (nnue_key, _) = quantized_keys(&run.id, run.step);
        let bytes = fx.rt.block_on(fx.ctx.lake.get(&nnue_key)).unwrap().unwrap();
        let int = SpecNet::from_bytes(&bytes).unwrap();
        assert_eq!(int.spec, net, "{name}: the file carries its description");

        let m = register(
            &fx.ctx,
            &RegisterSpec {
                run: run.id.clone(),
                checkpoint: None,
                parent: None,
            },
        )
        .unwrap();
        assert_eq!(m.net.as_ref(), Some(&net), "{name}");
        assert_eq!(m.features, "netspec");
        assert_eq!(m.arch, net.name.clone().unwrap());

        in_bullets_layout(&fx, name, &m, &bytes);

        // It plays: a short node-limited SPRT in lakefish's engine against material only.
        plays_against_material(&fx, name, &m.name);

        if name == "bullet-3-input-buckets" {
            let straight = {
                let mut s = s.clone();
                s.max_steps = Some(40);
                train(&fx.ctx, &JobId::new(), &s).unwrap()
            };
            let mut first = s.clone();
            first.max_steps = Some(20);
            let b = train(&fx.ctx, &JobId::new(), &first).unwrap();
            let mut resumed = first.clone();
            resumed.max_steps = Some(40);
            resumed.resume = Some(b.id.clone());
            let b = train(&fx.ctx, &JobId::new(), &resumed).unwrap();
            assert_eq!(b.step, 40);
            let load = |run: &lakefish_schemas::names::RunId| {
                let rec = fx
                    .rt
                    .block_on(lakefish_train::train::read_run(&fx.ctx.lake, run))
                    .unwrap()
                    .unwrap();
                let key = format!(
                    "{}/checkpoints/{}",
                    lakefish_train::train::run_prefix(run),
                    rec.checkpoints.last().unwrap()
                );
                let bytes = fx.rt.block_on(fx.ctx.lake.get(&key)).unwrap().unwrap();
                tch::Tensor::load_multi_from_stream(std::io::Cursor::new(bytes.to_vec())).unwrap()
            };
            let (wa, wb) = (load(&straight.id), load(&b.id));
            assert!(wa.iter().any(|(n, _)| n == "ft.factoriser"));
            // The checkpoint carries the net's description.
            let (_, described) = wa
                .iter()
                .find(|(n, _)| n == lakefish_train::train::NETSPEC_TENSOR)
                .expect("a description in the checkpoint");
            let text = String::from_utf8(Vec::<u8>::try_from(described).unwrap()).unwrap();
            assert_eq!(NetSpec::parse(&text).unwrap(), net);
            for ((na, ta), (nb, tb)) in wa.iter().zip(&wb) {
                assert_eq!(na, nb);
                assert!(ta.equal(tb), "{name}: {na} differs after resume");
            }
        }
    }
}

/// Nets with threat inputs (issue 43): threats beside piece-square inputs on the fused
/// sparse step, and threats beside HalfKAv2_hm with a hidden layer on the general sparse
/// one (`auto` picks it for inputs this wide), each
/// train below the material baseline, quantize within the usual float-vs-integer limits,
/// register with their description and play in lakefish's engine.
#[test]
fn threat_nets_train_quantize_register_and_play() {
    use lakefish_engine::spec_net::{InputFamily, SpecNet};
    use lakefish_schemas::netspec::NetSpec;
    let fx = fixture(6);
    for (name, inputs, rest) in [
        (
            "threats+all768",
            "[[inputs.parts]]\nfamily = \"threats\"\n[[inputs.parts]]\nfamily = \"piece_square\"",
            "[transformer]\nwidth = 32\nactivation = \"screlu\"\n",
        ),
        (
            "threats+halfka",
            "[[inputs.parts]]\nfamily = \"threats\"\n[[inputs.parts]]\nfamily = \"halfka_v2_hm\"",
            "[transformer]\nwidth = 32\n[[layers]]\nwidth = 8\nactivation = \"crelu\"\n",
        ),
    ] {
        let net = NetSpec::parse(&format!(
            "version = 1\nname = \"{name}\"\n[inputs]\nfamily = \"combined\"\n{inputs}\n{rest}\
             [quantization]\neval_scale = 600.0\n"
        ))
        .unwrap();
        let mut s = spec(&fx.shuffle);
        s.net = Some(net.clone());
        s.epochs = 2;
        s.lr = 3e-3;
        if name == "threats+halfka" {
            // The general sparse step (a hidden layer): one epoch keeps the test short.
            s.epochs = 1;
        }
        let run = train(&fx.ctx, &JobId::new(), &s).unwrap();
        let (val, material) = (
            run.val_loss.last().copied().unwrap(),
            run.material_val_loss.unwrap(),
        );
        assert!(
            val < material,
            "{name}: val {val} against material {material}"
        );

        let report = quantize(&fx.ctx, &QuantizeSpec::new(&run.id)).unwrap();
        let e = &report.error;
        eprintln!("{name}: val {val:.5} (material {material:.5}), quantized: {e:?}");
        assert!(
            e.mean_abs_cp <= 3.0 && e.p99_abs_cp <= 15.0,
            "{name}: {e:?}"
        );
        assert!(e.max_abs_cp > 0.0, "{name}: the check compared something");
        let (nnue_key, _) = quantized_keys(&run.id, run.step);
        let bytes = fx.rt.block_on(fx.ctx.lake.get(&nnue_key)).unwrap().unwrap();
        let int = SpecNet::from_bytes(&bytes).unwrap();
        assert_eq!(int.spec, net, "{name}: the file carries its description");
        assert!(matches!(int.family, InputFamily::Combined(_)));
        // Threat rows stored apart as i8 (Stockfish's type), the other rows as i16.
        let stored: Vec<(String, Vec<usize>, lakefish_schemas::netspec::Dtype)> = int
            .tensors()
            .into_iter()
            .map(|(n, shape, v)| (n, shape, v.dtype()))
            .take(2)
            .collect();
        use lakefish_schemas::netspec::Dtype;
        let other = net.inputs.count() - 59_808;
        assert_eq!(
            stored,
            [
                ("ft.weight".to_string(), vec![other, 32], Dtype::I16),
                ("ft.threats".to_string(), vec![59_808, 32], Dtype::I8)
            ],
            "{name}"
        );

        let m = register(
            &fx.ctx,
            &RegisterSpec {
                run: run.id.clone(),
                checkpoint: None,
                parent: None,
            },
        )
        .unwrap();
        assert_eq!(m.net.as_ref(), Some(&net), "{name}");

        plays_against_material(&fx, name, &m.name);
    }
}

/// A short node-limited SPRT of registered net `net` against material only in lakefish's
/// engine: four games, no incident.
fn plays_against_material(fx: &common::Fixture, name: &str, net: &str) {
    let book = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -\n\
                rnbqkbnr/pppppppp/8/8/3P4/8/PPP1PPPP/RNBQKBNR b KQkq -\n";
    fx.rt
        .block_on(
            fx.ctx
                .lake
                .put("raw/books/two.epd", book.as_bytes().to_vec()),
        )
        .unwrap();
    let sprt: lakefish_schemas::SprtSpec = serde_json::from_value(serde_json::json!({
        "new": net, "base": "material", "book": "lake:raw/books/two.epd",
        "nodes": 300, "batch_pairs": 2, "max_pairs": 2, "elo0": 0.0, "elo1": 50.0
    }))
    .unwrap();
    let played = lakefish_jobs::sprt::run_here(&fx.ctx, &sprt).unwrap();
    assert_eq!(played.games, 4, "{name}: {played:?}");
    assert_eq!(played.wins + played.draws + played.losses, 4);
    assert_eq!(
        played.new_incidents,
        Default::default(),
        "{name}: {played:?}"
    );
}

/// A registered net in bullet's layout (`infra/layouts/NAME.toml`): lakefish's engine and an
/// independent evaluator (tests/py/layout_eval.py: numpy, reading only the layout, the NetSpec
/// and the file) give equal integers on 1,000 lake positions; export → import → export gives
/// the same bytes; a file cut short is refused with nothing registered.
fn in_bullets_layout(
    fx: &common::Fixture,
    name: &str,
    m: &lakefish_schemas::NetManifest,
    registered: &[u8],
) {
    use lakefish_jobs::foreign_nets::{evaluate_fen, export_layout, import_layout};
    use lakefish_schemas::layout::Layout;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let layout_path = root.join(format!("infra/layouts/{name}.toml"));
    let layout = Layout::parse(&std::fs::read_to_string(&layout_path).unwrap()).unwrap();
    let file = export_layout(m, registered, &layout).unwrap();
    assert_eq!(file.len() % 64, 0, "{name}: bullet pads to 64 bytes");

    let manifest = fx.shuffle_manifest();
    let key = format!(
        "{}/{}",
        lakefish_jobs::shuffle::shuffle_prefix(&manifest.id),
        manifest.chunks[0].name
    );
    let chunk = fx.rt.block_on(fx.ctx.lake.get(&key)).unwrap().unwrap();
    let batch =
        lakefish_lake::parts::read_chunk(chunk, &[lakefish_schemas::positions::COL_BOARD]).unwrap();
    let fens: Vec<String> = lakefish_train::loader::chunk_fens(&batch)
        .unwrap()
        .into_iter()
        .take(1000)
        .collect();
    assert_eq!(fens.len(), 1000);
    let net = lakefish_engine::eval::Evaluator::from_net_bytes(registered).unwrap();
    let ours: Vec<i64> = fens
        .iter()
        .map(|fen| {
            let white = evaluate_fen(&net, fen).unwrap().white as i64;
            if fen.split(' ').nth(1) == Some("b") {
                -white
            } else {
                white
            }
        })
        .collect();

    let dir = tempfile::tempdir().unwrap();
    let (spec_path, net_path) = (
        dir.path().join("net.json"),
        dir.path().join("quantised.bin"),
    );
    std::fs::write(
        &spec_path,
        serde_json::to_string(m.net.as_ref().unwrap()).unwrap(),
    )
    .unwrap();
    std::fs::write(&net_path, &file).unwrap();
    let mut child = std::process::Command::new(root.join(".venv/bin/python"))
        .arg(root.join("tests/py/layout_eval.py"))
        .args([&layout_path, &spec_path, &net_path])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the project venv's python (make test installs it)");
    let mut stdin = child.stdin.take().unwrap();
    let text = fens.join("\n");
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        stdin.write_all(text.as_bytes()).unwrap();
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs: Vec<i64> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(theirs.len(), 1000);
    let differ: Vec<_> = (0..1000).filter(|&i| ours[i] != theirs[i]).collect();
    assert!(
        differ.is_empty(),
        "{name}: {} of 1,000 differ, first {:?}: lakefish {} numpy {}",
        differ.len(),
        fens[differ[0]],
        ours[differ[0]],
        theirs[differ[0]]
    );
    // The evaluations say something: not all equal.
    assert!(
        ours.iter().any(|&v| v != ours[0]),
        "{name}: {:?}",
        &ours[..5]
    );

    let spec = m.net.clone().unwrap();
    let before = fx.rt.block_on(list_nets(&fx.ctx.lake)).unwrap().len();
    let cut = &file[..file.len() - 64];
    let err = fx
        .rt
        .block_on(import_layout(&fx.ctx.lake, cut, &layout, spec.clone()))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&format!("the file has {} bytes", cut.len())),
        "{name}: {err}"
    );
    assert_eq!(
        fx.rt.block_on(list_nets(&fx.ctx.lake)).unwrap().len(),
        before
    );

    let imported = fx
        .rt
        .block_on(import_layout(&fx.ctx.lake, &file, &layout, spec))
        .unwrap();
    assert!(imported.external);
    let (_, again) = fx
        .rt
        .block_on(fetch_net(&fx.ctx.lake, &imported.name))
        .unwrap();
    assert_eq!(
        export_layout(&imported, &again, &layout).unwrap(),
        file,
        "{name}"
    );

    // lakefish's own .nnue is a layout too: it writes the registered file, and a file in it
    // names its own net, so importing it needs no NetSpec and finds the same net.
    let (_, own) = lakefish_schemas::layout::SHIPPED
        .iter()
        .find(|(n, _)| *n == "lakefish")
        .unwrap();
    let own = Layout::parse(own).unwrap();
    let as_nnue = export_layout(m, registered, &own).unwrap();
    assert!(
        as_nnue == registered,
        "{name}: the lakefish layout writes other bytes"
    );
    let spec = lakefish_jobs::foreign_nets::layout_net(&as_nnue, &own, None).unwrap();
    let same = fx
        .rt
        .block_on(import_layout(&fx.ctx.lake, &as_nnue, &own, spec))
        .unwrap();
    assert_eq!(same.name, m.name, "{name}");
    assert!(!same.external, "{name}: the trained net's record stays");
}

/// Presets are today's nets: trained at the same seed for the same steps, each preset's
/// weights (per tensor: count, sum and sum of magnitudes) and the integer evaluations of a few
/// positions by its quantized net equal what the code before nets-as-data made
/// (`tests/data/golden/`, written with LAKEFISH_WRITE_GOLDEN=1 on the shared sample and on
/// generated games: first as hashes at eb4a898, which 2a700c8 matched on the machine of its
/// CI; now as sums, by 2a700c8 and by its successor alike on session 34's). The floats come
/// from libtorch's CPU kernels, which pick their instructions by the CPU, so bit-exact weights
/// differ from one machine kind to the next: the sums are compared to 1e-4 of the magnitudes
/// (a changed formula moves them by far more), the evaluations exactly.
#[test]
fn presets_train_and_quantize_as_before_nets_as_data() {
    let fx = fixture(6);
    let fens = [
        "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1",
        "r1bq1rk1/pp2bppp/2n1pn2/3p4/2PP4/2N1PN2/PP3PPP/R2QKB1R w KQ - 0 9",
        "8/5k2/8/3K4/8/8/2R5/8 w - - 0 1",
    ];
    let mut lines = Vec::new();
    for (features, arch) in [
        ("all768", "32x2-8"),
        ("all768", "32x2:screlu"),
        ("halfkp", "32x2-8"),
        ("halfka_v2_hm", "stockfish-15.1"),
    ] {
        let mut s = spec(&fx.shuffle);
        s.features = lakefish_schemas::FeatureSet::parse(features).unwrap();
        s.arch = arch.into();
        s.max_steps = Some(20);
        // The goldens were trained with the first generation of defaults.
        s.defaults = Some(1);
        let run = train(&fx.ctx, &JobId::new(), &s).unwrap();
        let rec = fx
            .rt
            .block_on(lakefish_train::train::read_run(&fx.ctx.lake, &run.id))
            .unwrap()
            .unwrap();
        let key = format!(
            "{}/checkpoints/{}",
            lakefish_train::train::run_prefix(&run.id),
            rec.checkpoints.last().unwrap()
        );
        let ckpt = fx.rt.block_on(fx.ctx.lake.get(&key)).unwrap().unwrap();
        let mut tensors =
            tch::Tensor::load_multi_from_stream(std::io::Cursor::new(ckpt.to_vec())).unwrap();
        tensors.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, t) in tensors {
            if name.starts_with("adam.") || name == "position" || name == "netspec" {
                continue;
            }
            let v = Vec::<f32>::try_from(t.flatten(0, -1)).unwrap();
            let sum: f64 = v.iter().map(|&x| x as f64).sum();
            let abs: f64 = v.iter().map(|&x| (x as f64).abs()).sum();
            lines.push(format!(
                "{features} {arch} tensor {name} n {} sum {sum:.9e} abs {abs:.9e}",
                v.len()
            ));
        }
        let mut q = QuantizeSpec::new(&run.id);
        q.positions = 1000;
        q.max_mean_cp = 1e9;
        q.max_p99_cp = 1e9;
        quantize(&fx.ctx, &q).unwrap();
        let (nnue_key, _) = quantized_keys(&run.id, run.step);
        let bytes = fx.rt.block_on(fx.ctx.lake.get(&nnue_key)).unwrap().unwrap();
        let evaluator = lakefish_engine::eval::Evaluator::from_net_bytes(&bytes).unwrap();
        let evals: Vec<String> = fens
            .iter()
            .map(|f| {
                lakefish_jobs::foreign_nets::evaluate_fen(&evaluator, f)
                    .unwrap()
                    .white
                    .to_string()
            })
            .collect();
        lines.push(format!("{features} {arch} evals {}", evals.join(",")));
    }
    let data = if lakefish_testkit::shared_data("binpack/small.binpack").is_some() {
        "shared"
    } else {
        "generated"
    };
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../../tests/data/golden/presets-{data}.txt"));
    let got = lines.join("\n") + "\n";
    if std::env::var_os("LAKEFISH_WRITE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap();
    let (got, want): (Vec<&str>, Vec<&str>) = (got.lines().collect(), want.lines().collect());
    assert_eq!(
        got.len(),
        want.len(),
        "presets drifted from {}",
        path.display()
    );
    for (g, w) in got.iter().zip(&want) {
        assert!(
            same_up_to_rounding(g, w),
            "presets drifted from {}:\n got  {g}\n want {w}",
            path.display()
        );
    }
}

/// Two golden lines agree: words equal, but for the numbers after `sum` and `abs`, which may
/// differ by 1e-4 of the magnitudes (`abs`).
fn same_up_to_rounding(got: &str, want: &str) -> bool {
    let (g, w): (Vec<&str>, Vec<&str>) = (got.split(' ').collect(), want.split(' ').collect());
    if g.len() != w.len() {
        return false;
    }
    let abs = w
        .iter()
        .position(|&x| x == "abs")
        .and_then(|i| w.get(i + 1)?.parse::<f64>().ok())
        .unwrap_or(0.0);
    g.iter().zip(&w).enumerate().all(|(i, (a, b))| {
        let number = i > 0 && matches!(w[i - 1], "sum" | "abs");
        match (number, a.parse::<f64>(), b.parse::<f64>()) {
            (true, Ok(x), Ok(y)) => (x - y).abs() <= 1e-4 * abs + 1e-6,
            _ => a == b,
        }
    })
}

/// An experiment (issue 44) in this process: two axes (width × λ), tiny nets trained on a
/// small generated dataset, node-limited games against material as the anchor. Every cell is
/// trained, quantized, registered and rated; the table is stored as CSV and Markdown; an
/// experiment stopped after its first cell goes on without training that cell again, and the
/// whole document run again redoes nothing.
#[test]
fn an_experiment_trains_rates_and_resumes() {
    use lakefish_schemas::experiment::{ExperimentSpec, ExperimentState};
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let lake = lakefish_jobs::Lake::open(
        dir.path().join("lake").to_str().unwrap(),
        &Default::default(),
    )
    .unwrap();
    let ctx = lakefish_jobs::JobContext::new(lake, rt.handle().clone())
        .with_threads(2)
        .with_hooks(lakefish_jobs::Hooks {
            trainer: Some(std::sync::Arc::new(lakefish_train::LakefishTrainer)),
            ..Default::default()
        });
    let games = dir.path().join("games.binpack");
    std::fs::write(&games, lakefish_ingest::binpack::synthetic_binpack(400, 5)).unwrap();
    let shuffle = lakefish_jobs::shuffle::quiet_shuffle(&ctx, games.to_str().unwrap(), "exp", 3, 3)
        .unwrap()
        .id;
    let book = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -\n\
                rnbqkbnr/pppppppp/8/8/3P4/8/PPP1PPPP/RNBQKBNR b KQkq -\n";
    rt.block_on(ctx.lake.put("raw/books/two.epd", book.as_bytes().to_vec()))
        .unwrap();
    // Mates in one: any net's search finds them in 300 nodes.
    let mates = "6k1/5ppp/8/8/8/8/8/R5K1 w - - bm Ra8#;\n\
                 r1bqkbnr/pppp1ppp/2n5/4p2Q/2B1P3/8/PPPP1PPP/RNB1K1NR w KQkq - bm Qxf7#;\n";
    rt.block_on(
        ctx.lake
            .put("raw/puzzles/mates.epd", mates.as_bytes().to_vec()),
    )
    .unwrap();
    let doc = format!(
        r#"{{"base": {{"shuffle": "{shuffle}", "arch": "32x2-8", "batch_size": 1024,
                      "device": "cpu", "seed": 11, "lr": 0.003}},
            "axes": [{{"field": "arch", "values": ["32x2-8", "16x2-8"]}},
                     {{"field": "lambda_start", "values": [1.0, 0.5]}}],
            "rating": {{"book": "lake:raw/books/two.epd", "nodes": 200, "pairs": 1,
                        "anchor": "material"}},
            "puzzles": {{"file": "lake:raw/puzzles/mates.epd", "nodes": 300}}}}"#
    );
    let (spec, cells) = ExperimentSpec::parse(&doc).unwrap();
    assert_eq!(cells.len(), 4);
    // Stopped after one cell: that cell is recorded, nothing else.
    let plan = lakefish_jobs::experiment::plan(&ctx, &spec).unwrap();
    let first = lakefish_jobs::experiment::run_cell(&ctx, &plan, 0).unwrap();
    let read_run = |id| {
        rt.block_on(lakefish_jobs::nets::read_run(&ctx.lake, id))
            .unwrap()
            .unwrap()
    };
    let run_before = read_run(&first.run);
    let status = lakefish_jobs::experiment::run_here(&ctx, &spec).unwrap();
    assert_eq!(
        run_before.updated,
        read_run(&first.run).updated,
        "cell 0 was trained again"
    );
    assert_eq!(status.state, ExperimentState::Succeeded, "{status:?}");
    // Four nets and the anchor, every pair played: 10 pairings of 2 games.
    assert_eq!(status.players.len(), 5);
    assert_eq!(status.anchor, 4);
    assert_eq!(status.pairings.len(), 10);
    assert!(
        status
            .pairings
            .iter()
            .all(|p| p.done && p.wins + p.draws + p.losses == 2)
    );
    let nets: std::collections::BTreeSet<&str> = status
        .table
        .iter()
        .filter_map(|r| r.cell.as_ref().map(|c| c.net.as_str()))
        .collect();
    assert_eq!(nets.len(), 4, "each cell registered its own net");
    for row in &status.table[..4] {
        let c = row.cell.as_ref().unwrap();
        assert!(
            c.val_loss.unwrap() < c.material_val_loss.unwrap(),
            "{row:?}"
        );
        assert!(c.nodes_per_s > 0.0);
        let accuracy = c.move_accuracy.unwrap();
        assert!(accuracy > 0.0 && accuracy < 1.0, "{row:?}");
        assert_eq!(c.puzzle_accuracy, Some(1.0), "{row:?}");
        assert_eq!(row.games, 8);
    }
    let anchor = &status.table[4];
    assert_eq!(
        (anchor.player.as_str(), anchor.plays.as_str()),
        ("anchor", "material")
    );
    if status.note.is_none() {
        assert_eq!(anchor.elo, Some(0.0));
        assert!(status.table[..4].iter().all(|r| r.elo_error.unwrap() > 0.0));
    }
    let stored = |key: String| {
        let bytes = rt.block_on(ctx.lake.get(&key)).unwrap().unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    };
    let csv = stored(lakefish_jobs::experiment::csv_key(&status.id));
    assert_eq!(csv.lines().count(), 6, "{csv}");
    assert!(csv.contains("\"arch=32x2-8, lambda_start=1.0\""), "{csv}");
    assert!(stored(lakefish_jobs::experiment::markdown_key(&status.id)).contains("node-limited"));
    // The same document again: the stored status, nothing played or trained.
    let again = lakefish_jobs::experiment::run_here(&ctx, &spec).unwrap();
    assert_eq!(again.pairings, status.pairings);
    assert_eq!(
        lakefish_jobs::experiment::table_csv(&again),
        lakefish_jobs::experiment::table_csv(&status)
    );
}
