//! `quantize`: a run's checkpoint to a `.nnue` file in the Stockfish integer scheme
//! (`lakefish_engine::nnue` documents it), checked against the float model on lake positions.
//!
//! Nothing is clipped: a value that does not fit its integer type is an error naming the
//! tensor, and so is a feature-transformer column whose worst-case sum could overflow the
//! int16 accumulator. The file and its report land in `runs/<run>/nets/`, the report last.

use crate::TrainError;
use crate::loader::{Batch, ChunkSource, parse_fen_board};
use crate::model::{BatchTensors, Model, ModelArch};
use crate::train::{Adam, LakeChunks, load_checkpoint, read_run, resolve, run_prefix};
use lakefish_engine::features::FeatureSetKind;
use lakefish_engine::nnue::{
    Activation, Dense, FT_SCALE, Network, OUTPUT_BIAS_SCALE, OUTPUT_WEIGHT_SCALE,
    SCRELU_OUTPUT_BIAS_SCALE, SCRELU_OUTPUT_WEIGHT_SCALE, WEIGHT_SCALE, arch_hash,
};
use lakefish_engine::scores;
use lakefish_engine::simd::Kernel;
use lakefish_engine::spec_net::SpecNet;
use lakefish_engine::stockfish_net::StockfishNet;
use lakefish_jobs::JobContext;
use lakefish_schemas::nets::quantized_keys;
use lakefish_schemas::{Progress, QuantizationError, QuantizeReport, QuantizeSpec};
use tch::Device;

/// Positions the bias correction averages over.
const CALIBRATION_POSITIONS: usize = 20_000;
/// Feature transformers with at most this many inputs get GPTQ rounding (its `inputs²`
/// matrix stays small); larger ones are rounded to nearest.
const FT_GPTQ_MAX_INPUTS: usize = 2048;

fn values(model: &Model, name: &str) -> Result<Vec<f32>, TrainError> {
    let t = model
        .param(name)
        .detach()
        .to_device(Device::Cpu)
        .flatten(0, -1);
    Ok(Vec::<f32>::try_from(t)?)
}

/// Rounds `values × scale` to integers in `min..=max`, or names the first that does not fit.
fn quantize_tensor(
    name: &str,
    values: &[f32],
    scale: f64,
    min: i64,
    max: i64,
) -> Result<Vec<i64>, TrainError> {
    values
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let q = (v as f64 * scale).round();
            if q.is_finite() && (min as f64..=max as f64).contains(&q) {
                Ok(q as i64)
            } else {
                Err(TrainError::Quantize {
                    tensor: name.to_string(),
                    reason: format!(
                        "value {v} at index {i} is {q} at scale {scale:.3}, outside {min}..={max}"
                    ),
                })
            }
        })
        .collect()
}

/// Mean input of every dense layer and how often each feature is active, over calibration
/// positions: what bias correction needs.
pub struct Calibration {
    /// Per dense layer, the mean of each input.
    pub mean_inputs: Vec<Vec<f64>>,
    /// Per dense layer, the inputs' second moments `E[x xᵀ]`, row-major.
    pub second_moments: Vec<Vec<f64>>,
    /// Per feature, the mean number of times it is active in one accumulator.
    pub feature_rate: Vec<f64>,
    /// `E[f fᵀ]` of the accumulators' feature vectors, for feature sets small enough
    /// (`inputs ≤ FT_GPTQ_MAX_INPUTS`).
    pub feature_moments: Option<Vec<f64>>,
}

impl Calibration {
    pub fn measure(model: &Model, batch: &Batch) -> Result<Calibration, TrainError> {
        let t = BatchTensors::new(batch, Device::Cpu);
        let n = batch.len().max(1) as f64;
        let (mut mean_inputs, mut second_moments) = (Vec::new(), Vec::new());
        for x in tch::no_grad(|| model.dense_inputs(&t)) {
            let x = x.detach().to_kind(tch::Kind::Double);
            mean_inputs.push(Vec::<f64>::try_from(x.mean_dim(
                0,
                false,
                tch::Kind::Double,
            ))?);
            let h = x.tr().matmul(&x) / n;
            second_moments.push(Vec::<f64>::try_from(h.flatten(0, -1))?);
        }
        let mut feature_rate = vec![0.0; model.inputs as usize];
        let accumulators = 2.0 * batch.len().max(1) as f64;
        for &f in batch.stm_indices.iter().chain(&batch.nstm_indices) {
            feature_rate[f as usize] += 1.0 / accumulators;
        }
        let inputs = model.inputs as usize;
        let feature_moments = (inputs <= FT_GPTQ_MAX_INPUTS).then(|| {
            let mut h = vec![0.0; inputs * inputs];
            for (idx, off) in [
                (&batch.stm_indices, &batch.stm_offsets),
                (&batch.nstm_indices, &batch.nstm_offsets),
            ] {
                for (r, &start) in off.iter().enumerate() {
                    let end = off.get(r + 1).map_or(idx.len(), |&e| e as usize);
                    let active = &idx[start as usize..end];
                    for &a in active {
                        for &b in active {
                            h[a as usize * inputs + b as usize] += 1.0 / accumulators;
                        }
                    }
                }
            }
            h
        });
        Ok(Calibration {
            mean_inputs,
            second_moments,
            feature_rate,
            feature_moments,
        })
    }
}

/// Adds to each bias the mean shift that rounding the weights causes on calibration data,
/// so the integer layer is right on average (bias correction, Nagel et al. 2019).
/// `weights` is `[outputs, inputs]` here, or `[inputs, outputs]` with `transposed`.
fn correct_bias(
    bias: &mut [f32],
    weights: &[f32],
    quantized: &[i64],
    scale: f64,
    mean_input: &[f64],
    transposed: bool,
) {
    let outputs = bias.len();
    let inputs = mean_input.len();
    for (o, b) in bias.iter_mut().enumerate() {
        let shift: f64 = (0..inputs)
            .map(|i| {
                let k = if transposed {
                    i * outputs + o
                } else {
                    o * inputs + i
                };
                (weights[k] as f64 - quantized[k] as f64 / scale) * mean_input[i]
            })
            .sum();
        *b += shift as f32;
    }
}

/// Lower Cholesky factor of a symmetric positive-definite `n × n` matrix, `None` if it is not.
fn cholesky(a: &[f64], n: usize) -> Option<Vec<f64>> {
    let mut l = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let s: f64 = (0..j).map(|k| l[i * n + k] * l[j * n + k]).sum();
            if i == j {
                let d = a[i * n + i] - s;
                if d <= 0.0 || !d.is_finite() {
                    return None;
                }
                l[i * n + i] = d.sqrt();
            } else {
                l[i * n + j] = (a[i * n + j] - s) / l[j * n + j];
            }
        }
    }
    Some(l)
}

/// Integer weights of a dense layer chosen together rather than rounded one by one: GPTQ
/// (Frantar et al. 2022). Weights are rounded input by input, and each rounding error is
/// pushed onto the inputs not yet rounded in proportion to how the calibration inputs
/// co-vary, which keeps the layer's outputs close to the float ones on real positions.
/// `h` is `E[x xᵀ]` of the layer's inputs. `None` when `h` is degenerate.
fn gptq(
    weights: &[f32],
    inputs: usize,
    scale: f64,
    (min, max): (f64, f64),
    h: &[f64],
) -> Option<Vec<i64>> {
    let n = inputs;
    // Dampen: dead inputs (always 0) would make h singular.
    let mean_diag = (0..n).map(|i| h[i * n + i]).sum::<f64>() / n as f64;
    let damp = 0.01 * mean_diag.max(1e-12);
    let mut a = h.to_vec();
    for i in 0..n {
        a[i * n + i] += damp;
    }
    // h⁻¹ = L⁻ᵀ L⁻¹, then its upper Cholesky factor U (h⁻¹ = Uᵀ U).
    let l = cholesky(&a, n)?;
    let mut linv = vec![0.0; n * n];
    for i in 0..n {
        linv[i * n + i] = 1.0 / l[i * n + i];
        for j in 0..i {
            let s: f64 = (j..i).map(|k| l[i * n + k] * linv[k * n + j]).sum();
            linv[i * n + j] = -s / l[i * n + i];
        }
    }
    let mut hinv = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let s: f64 = (i..n).map(|k| linv[k * n + i] * linv[k * n + j]).sum();
            hinv[i * n + j] = s;
            hinv[j * n + i] = s;
        }
    }
    let l2 = cholesky(&hinv, n)?;
    let u = |j: usize, k: usize| l2[k * n + j];
    let outputs = weights.len() / n;
    let mut out = Vec::with_capacity(weights.len());
    for o in 0..outputs {
        let mut w: Vec<f64> = weights[o * n..(o + 1) * n]
            .iter()
            .map(|&v| v as f64)
            .collect();
        for j in 0..n {
            let q = (w[j] * scale).round().clamp(min, max);
            let err = (w[j] - q / scale) / u(j, j);
            for (k, wk) in w.iter_mut().enumerate().skip(j + 1) {
                *wk -= err * u(j, k);
            }
            out.push(q as i64);
        }
    }
    Some(out)
}

/// The integer network of a float model; with calibration data, biases absorb the mean
/// rounding error of the weights feeding them.
pub fn quantize_model(
    model: &Model,
    features: FeatureSetKind,
    description: String,
    calibration: Option<&Calibration>,
) -> Result<Network, TrainError> {
    let arch = model.arch.lakefish()?;
    let l1 = arch.l1;
    let ft_scale = arch.ft_scale();
    let i16_range = (i16::MIN as i64, i16::MAX as i64);
    let ft_w = values(model, "ft.weight")?;
    let mut ft_weights = quantize_tensor("ft.weight", &ft_w, ft_scale, i16_range.0, i16_range.1)?;
    let mut ft_b = values(model, "ft.bias")?;
    if let Some(c) = calibration {
        if let Some(h) = &c.feature_moments {
            // GPTQ works on rows of [outputs, inputs]; the transformer is stored transposed.
            let inputs = ft_w.len() / l1;
            let rows: Vec<f32> = (0..l1)
                .flat_map(|j| (0..inputs).map(move |f| (j, f)))
                .map(|(j, f)| ft_w[f * l1 + j])
                .collect();
            let range = (i16_range.0 as f64, i16_range.1 as f64);
            if let Some(q) = gptq(&rows, inputs, ft_scale, range, h) {
                for j in 0..l1 {
                    for f in 0..inputs {
                        ft_weights[f * l1 + j] = q[j * inputs + f];
                    }
                }
            }
        }
        correct_bias(
            &mut ft_b,
            &ft_w,
            &ft_weights,
            ft_scale,
            &c.feature_rate,
            true,
        );
    }
    let ft_bias = quantize_tensor("ft.bias", &ft_b, ft_scale, i16_range.0, i16_range.1)?;
    check_accumulator_range(&ft_bias, &ft_weights, l1, features.max_active())?;
    let dense = arch.dense();
    let mut layers = Vec::with_capacity(dense.len());
    for (i, &(inputs, outputs)) in dense.iter().enumerate() {
        let output = i + 1 == dense.len();
        let (w_scale, b_scale) = if output && arch.activation == Activation::Screlu {
            (SCRELU_OUTPUT_WEIGHT_SCALE, SCRELU_OUTPUT_BIAS_SCALE)
        } else if output {
            (OUTPUT_WEIGHT_SCALE, OUTPUT_BIAS_SCALE)
        } else {
            (WEIGHT_SCALE, WEIGHT_SCALE * FT_SCALE)
        };
        let w_name = format!("l{i}.weight");
        let b_name = format!("l{i}.bias");
        let w = values(model, &w_name)?;
        let mut weights = quantize_tensor(&w_name, &w, w_scale, -128, 127)?;
        let mut b = values(model, &b_name)?;
        if let Some(c) = calibration {
            if let Some(better) = gptq(&w, inputs, w_scale, (-128.0, 127.0), &c.second_moments[i]) {
                weights = better;
            }
            correct_bias(&mut b, &w, &weights, w_scale, &c.mean_inputs[i], false);
        }
        let bias = quantize_tensor(&b_name, &b, b_scale, i32::MIN as i64, i32::MAX as i64)?;
        layers.push(Dense {
            inputs,
            outputs,
            bias: bias.into_iter().map(|v| v as i32).collect(),
            weights: weights.into_iter().map(|v| v as i8).collect(),
        });
    }
    Network::new(
        features,
        arch.clone(),
        description,
        ft_bias.into_iter().map(|v| v as i16).collect(),
        ft_weights.into_iter().map(|v| v as i16).collect(),
        layers,
    )
    .map_err(|e| TrainError::Internal(e.to_string()))
}

/// Proves no reachable position overflows an int16 accumulator: for every column, the bias
/// plus the `max_active` largest weights in magnitude stays within i16.
pub(crate) fn check_accumulator_range(
    bias: &[i64],
    weights: &[i64],
    l1: usize,
    max_active: usize,
) -> Result<(), TrainError> {
    let inputs = weights.len() / l1;
    let mut column = Vec::with_capacity(inputs);
    for (j, b) in bias.iter().enumerate() {
        column.clear();
        column.extend((0..inputs).map(|f| weights[f * l1 + j].abs()));
        let k = max_active.min(inputs);
        if k < inputs {
            column.select_nth_unstable_by(k, |a, b| b.cmp(a));
        }
        let worst = b.abs() + column[..k].iter().sum::<i64>();
        if worst > i16::MAX as i64 {
            return Err(TrainError::Quantize {
                tensor: "ft.weight".into(),
                reason: format!(
                    "column {j}: bias plus the {k} largest weights reach {worst}, beyond the int16 accumulator"
                ),
            });
        }
    }
    Ok(())
}

/// Positions to compare on: features of both perspectives and the win-rate model's
/// material count, from the FEN column of lake chunks.
struct Probe {
    batch: Batch,
    material: Vec<i32>,
}

fn probe_positions(
    source: &LakeChunks,
    order: &[usize],
    features: FeatureSetKind,
    limit: usize,
) -> Result<Probe, TrainError> {
    let mut probe = Probe {
        batch: Batch::default(),
        material: Vec::new(),
    };
    let (mut stm, mut nstm) = (Vec::new(), Vec::new());
    for &i in order {
        let chunk = source.read(i, &[lakefish_schemas::positions::COL_BOARD])?;
        let name = source.keys[i].clone();
        let fens = crate::loader::chunk_fens(&chunk).map_err(|reason| TrainError::Data {
            chunk: name.clone(),
            reason,
        })?;
        for (row, text) in fens.iter().enumerate() {
            if probe.material.len() == limit {
                return Ok(probe);
            }
            let bad = |reason: String| TrainError::Data {
                chunk: name.clone(),
                reason: format!("row {row}: FEN {text:?}: {reason}"),
            };
            let (board, turn) = parse_fen_board(text).map_err(bad)?;
            stm.clear();
            nstm.clear();
            features
                .active_features(&board, turn, &mut stm)
                .map_err(|e| bad(e.to_string()))?;
            features
                .active_features(&board, turn.other(), &mut nstm)
                .map_err(|e| bad(e.to_string()))?;
            probe.batch.push_features(&stm, &nstm);
            probe.material.push(scores::material(&board));
        }
    }
    Ok(probe)
}

/// Mean, 99th percentile and maximum of absolute differences.
fn summarize(mut v: Vec<f64>) -> (f64, f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    v.sort_by(f64::total_cmp);
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let p99 = v[((v.len() as f64 * 0.99).ceil() as usize).clamp(1, v.len()) - 1];
    (mean, p99, *v.last().unwrap())
}

/// Float model vs integer network on the probe positions.
/// The integer net's evaluation of one position from its two feature lists (side to move
/// first), in internal units.
type IntegerEval = Box<dyn Fn(&[u32], &[u32]) -> f64>;

fn compare(
    model: &Model,
    int_eval: &IntegerEval,
    probe: &Probe,
) -> Result<QuantizationError, TrainError> {
    let b = &probe.batch;
    let n = probe.material.len();
    let t = BatchTensors::new(b, Device::Cpu);
    let float: Vec<f32> = tch::no_grad(|| {
        let out = model.forward(&t) * model.arch.output_scale();
        Vec::<f32>::try_from(out.flatten(0, -1))
    })?;
    let ends = |offsets: &[i32], indices: &[i32], i: usize| {
        let start = offsets[i] as usize;
        let end = offsets.get(i + 1).map_or(indices.len(), |&e| e as usize);
        indices[start..end]
            .iter()
            .map(|&f| f as u32)
            .collect::<Vec<u32>>()
    };
    let (mut internal, mut cp) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for (i, (&f, &material)) in float.iter().zip(&probe.material).enumerate() {
        let int = int_eval(
            &ends(&b.stm_offsets, &b.stm_indices, i),
            &ends(&b.nstm_offsets, &b.nstm_indices, i),
        );
        let diff = (int - f as f64).abs();
        let (a, _) = scores::win_rate_params(material);
        internal.push(diff);
        cp.push(diff * 100.0 / a);
    }
    let (mean_abs_cp, p99_abs_cp, max_abs_cp) = summarize(cp);
    let (mean_abs_internal, p99_abs_internal, _) = summarize(internal);
    Ok(QuantizationError {
        positions: n as u64,
        mean_abs_cp,
        p99_abs_cp,
        max_abs_cp,
        mean_abs_internal,
        p99_abs_internal,
    })
}

fn stage(ctx: &JobContext, stage: &str, done: u64) {
    ctx.progress.report(&Progress {
        stage: stage.to_string(),
        done,
        total: Some(3),
        unit: "steps".into(),
        rows: 0,
    });
}

/// Quantizes a run's checkpoint, checks it, and writes `runs/<run>/nets/step-N.nnue` and
/// its report. Running it again writes the same bytes.
pub fn quantize(ctx: &JobContext, spec: &QuantizeSpec) -> Result<QuantizeReport, TrainError> {
    let run = ctx
        .block_on(read_run(&ctx.lake, &spec.run))?
        .ok_or_else(|| TrainError::Spec(format!("run {} does not exist", spec.run)))?;
    let (checkpoint, step) = lakefish_jobs::nets::pick_checkpoint(&run, spec.checkpoint)?;
    let mut train_spec = run.spec.clone();
    train_spec.device = lakefish_schemas::DeviceChoice::Cpu;
    let (setup, shuffle) = resolve(ctx, &train_spec)?;
    let features = setup.features;
    stage(ctx, "load checkpoint", 0);
    let model = Model::new(
        &setup.arch,
        features.inputs() as i64,
        features.max_active() as i64,
        Device::Cpu,
    );
    let features_name = match &setup.arch {
        ModelArch::Spec(_) => "netspec",
        _ => features.name(),
    };
    let mut adam = Adam::new(&model);
    let key = format!("{}/checkpoints/{checkpoint}", run_prefix(&run.id));
    let bytes = ctx
        .block_on(ctx.lake.get(&key))?
        .ok_or_else(|| TrainError::Checkpoint {
            key: key.clone(),
            reason: "listed in the run record but missing from the lake".into(),
        })?;
    load_checkpoint(&bytes, &key, &model, &mut adam, Device::Cpu)?;

    stage(ctx, "quantize", 1);
    let description = format!(
        "lakefish net {features_name} {arch}: run {run} checkpoint {checkpoint} (step {step}), shuffle {shuffle}",
        arch = setup.arch,
        run = run.id,
        shuffle = shuffle.id,
    );
    let (file, int_eval): (Vec<u8>, IntegerEval) = match &setup.arch {
        ModelArch::Lakefish(_) => {
            // Calibrate on training chunks from the front; check on held-out chunks first,
            // then training chunks from the end, so the two sets overlap only in tiny lakes.
            let calibration =
                probe_positions(&setup.source, &setup.train, features, CALIBRATION_POSITIONS)?;
            let calibration = Calibration::measure(&model, &calibration.batch)?;
            let net = quantize_model(&model, features, description, Some(&calibration))?;
            let file = net.to_bytes();
            if Network::from_bytes(&file).as_ref() != Ok(&net) {
                return Err(TrainError::Internal(
                    "the .nnue file does not read back as the network written".into(),
                ));
            }
            let eval = move |stm: &[u32], nstm: &[u32]| {
                net.propagate(&net.accumulate(stm), &net.accumulate(nstm)) as f64
            };
            (file, Box::new(eval))
        }
        ModelArch::Stockfish => {
            let net = crate::stockfish_model::quantize(&model, &description)?;
            let file = net
                .to_bytes()
                .map_err(|e| TrainError::Internal(e.to_string()))?;
            if StockfishNet::from_bytes(&file).as_ref() != Ok(&net) {
                return Err(TrainError::Internal(
                    "the Stockfish-format file does not read back as the network written".into(),
                ));
            }
            let eval = move |stm: &[u32], nstm: &[u32]| {
                net.evaluate_features(Kernel::Scalar, stm, nstm) as f64
            };
            (file, Box::new(eval))
        }
        ModelArch::Spec(spec) => {
            let net = crate::spec_model::quantize(spec, &model.params, description)?;
            let file = net.to_bytes();
            if SpecNet::from_bytes(&file).as_ref() != Ok(&net) {
                return Err(TrainError::Internal(
                    "the .nnue file does not read back as the described net written".into(),
                ));
            }
            // Men on the board from a feature list: those of the first family with one
            // feature per man (HalfKP has none for the two kings). Threats alone count none:
            // such a net has no output buckets (validated), so any count picks the same.
            let (lo, hi, extra) = spec.inputs.men_counted_by().unwrap_or((0, 0, 2));
            let eval = move |stm: &[u32], nstm: &[u32]| {
                let range = lo as u32..hi as u32;
                let men = stm.iter().filter(|f| range.contains(f)).count() as u32 + extra as u32;
                net.evaluate(
                    Kernel::Scalar,
                    &net.accumulate(stm),
                    &net.accumulate(nstm),
                    men,
                ) as f64
            };
            (file, Box::new(eval))
        }
    };

    stage(ctx, "compare with the float model", 2);
    let order: Vec<usize> = setup
        .val
        .iter()
        .chain(setup.train.iter().rev())
        .copied()
        .collect();
    let mut probe = probe_positions(&setup.source, &order, features, spec.positions as usize)?;
    setup.remap(&mut probe.batch)?;
    if probe.material.is_empty() {
        return Err(TrainError::Spec(format!(
            "shuffle {} has no positions to check the quantized net on",
            shuffle.id
        )));
    }
    let error = compare(&model, &int_eval, &probe)?;
    if error.mean_abs_cp > spec.max_mean_cp || error.p99_abs_cp > spec.max_p99_cp {
        return Err(TrainError::Spec(format!(
            "the quantized net is too far from the float model on {} positions: mean |Δ| {:.2} cp (limit {}), p99 {:.2} cp (limit {}); nothing was written (the limits are --max-mean-cp and --max-p99-cp, max_mean_cp and max_p99_cp in a spec)",
            error.positions, error.mean_abs_cp, spec.max_mean_cp, error.p99_abs_cp, spec.max_p99_cp
        )));
    }
    let (nnue_key, report_key) = quantized_keys(&run.id, step);
    let report = QuantizeReport {
        run: run.id.to_string(),
        checkpoint,
        step,
        file: nnue_key.clone(),
        sha256: lakefish_jobs::nets::sha256_hex(&file),
        bytes: file.len() as u64,
        features: features_name.to_string(),
        arch: setup.arch.to_string(),
        arch_hash: match &setup.arch {
            ModelArch::Lakefish(arch) => format!("{:#010x}", arch_hash(features, arch)),
            ModelArch::Stockfish => format!("{:#010x}", lakefish_engine::stockfish_net::FILE_HASH),
            // A described net's file carries its description, checked whole when read.
            ModelArch::Spec(_) => "netspec".to_string(),
        },
        error,
        created: lakefish_lake::records::now(),
    };
    ctx.block_on(ctx.lake.put(&nnue_key, file))?;
    let json =
        serde_json::to_vec_pretty(&report).map_err(|e| TrainError::Internal(e.to_string()))?;
    ctx.block_on(ctx.lake.put(&report_key, json))?;
    // The run's space grew by the file and its report.
    ctx.block_on(lakefish_lake::space::measure(
        &ctx.lake,
        lakefish_lake::catalog::CatalogKind::Run,
        run.id.as_str(),
    ))?;
    stage(ctx, "done", 3);
    Ok(report)
}
