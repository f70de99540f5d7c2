//! Stockfish 15.1's network as a float model for training, and its quantization into the
//! file Stockfish loads (`lakefish_engine::stockfish_net`).
//!
//! The float model computes what the integer network computes, in units where 1.0 at the
//! output is 600 internal units (the scale the other models train at):
//! - `ft`: HalfKAv2_hm → 1,024 per perspective; `psqt`: → 8 per perspective, no bias.
//! - Per perspective, side to move first: `clamp(a, 0, 1) · clamp(b, 0, 1) · 127/128` over the
//!   two halves (the integer net's `a·b/128` at 1.0 = 127).
//! - `l1`: 1,024 → 8 × 16 and the piece-count bucket's 16 kept; outputs 0..15 become
//!   `clamp([x² · 127/128, x], 0, 1)` (30 values), output 15 skips to the end.
//! - `l2`: 30 → 8 × 32, the bucket's 32 clamped to 0..1; `out`: 32 → 8 × 1, the bucket's.
//! - Output: `out + skip + (psqt[us] − psqt[them]) / 2` at the bucket.
//!
//! Quantization (Stockfish's scales): transformer ×127 (int16), PSQT ×9,600 (int32), hidden
//! weights ×64 (int8) with biases ×64·127, output weights ×9,600/127 (int8) with bias ×9,600.

use crate::TrainError;
use crate::model::{BatchTensors, Model};
use lakefish_engine::stockfish_net::{BUCKETS, HALF, LayerStack, StockfishNet};
use tch::{Device, Kind, Tensor};

/// `train --arch` value for this architecture (features must be `halfka_v2_hm`).
pub const ARCH: &str = "stockfish-15.1";
const L1: i64 = 16;
const L2: i64 = 32;
/// Integer scales.
const FT_SCALE: f64 = 127.0;
const HIDDEN_SCALE: f64 = 64.0;
const OUTPUT_SCALE: f64 = 600.0 * 16.0;
/// Largest weights the int8 layers represent.
pub const MAX_HIDDEN_WEIGHT: f64 = 127.0 / HIDDEN_SCALE;
pub const MAX_OUTPUT_WEIGHT: f64 = 127.0 * FT_SCALE / OUTPUT_SCALE;

/// Fresh parameters: uniform in ±1/sqrt(fan-in) like torch's `Linear`, every layer stack
/// starting from the same values, and PSQT weights that start as material (lakefish's piece
/// values: pawn 1, knight 3.2, bishop 3.3, rook 5, queen 9.5 pawns of 208 internal units).
pub fn new_params(inputs: i64, max_active: i64, device: Device) -> Vec<(String, Tensor)> {
    let opts = (Kind::Float, device);
    // Drawn on the CPU whatever the device, so a seed gives the same net on CPU and CUDA.
    let uniform = |shape: &[i64], bound: f64| {
        ((Tensor::rand(shape, (Kind::Float, Device::Cpu)) * 2.0 - 1.0) * bound).to_device(device)
    };
    let stacked = |out: i64, fan_in: i64| {
        let b = 1.0 / (fan_in as f64).sqrt();
        let w = uniform(&[out, fan_in], b).repeat([BUCKETS as i64, 1]);
        let bias = uniform(&[out], b).repeat([BUCKETS as i64]);
        (w, bias)
    };
    let (l1w, l1b) = stacked(L1, HALF as i64);
    let (l2w, l2b) = stacked(L2, 2 * (L1 - 1));
    let (ow, ob) = stacked(1, L2);
    vec![
        (
            "ft.weight".into(),
            uniform(&[inputs, HALF as i64], 1.0 / (max_active as f64).sqrt()),
        ),
        ("ft.bias".into(), Tensor::zeros([HALF as i64], opts)),
        ("psqt.weight".into(), material_psqt(inputs, device)),
        ("l1.weight".into(), l1w),
        ("l1.bias".into(), l1b),
        ("l2.weight".into(), l2w),
        ("l2.bias".into(), l2b),
        ("out.weight".into(), ow.view([BUCKETS as i64, L2])),
        ("out.bias".into(), ob),
    ]
}

/// PSQT weights `[inputs, 8]` worth each piece's material for its owner (kings 0).
fn material_psqt(inputs: i64, device: Device) -> Tensor {
    const PAWNS: [f64; 5] = [1.0, 3.2, 3.3, 5.0, 9.5];
    let per_input: Vec<f32> = (0..inputs)
        .map(|f| {
            // HalfKAv2_hm: 704 per king bucket, 64 per plane, plane = 2·role + them.
            let plane = (f % 704) / 64;
            if plane >= 10 {
                return 0.0;
            }
            let value = PAWNS[plane as usize / 2] * 208.0 / 600.0;
            (if plane % 2 == 0 { value } else { -value }) as f32
        })
        .collect();
    Tensor::from_slice(&per_input)
        .view([inputs, 1])
        .repeat([1, BUCKETS as i64])
        .to_device(device)
}

/// The bucket of each position: `(pieces − 1) / 4`, pieces being the side to move's active
/// features (HalfKAv2_hm has one per piece, kings included).
fn buckets(b: &BatchTensors) -> Tensor {
    let total = b.stm_indices.size()[0];
    // Offsets come as int32 (the batch layout); gather wants int64.
    let starts = b.stm_offsets.to_kind(tch::Kind::Int64);
    let ends = Tensor::cat(
        &[
            starts.narrow(0, 1, starts.size()[0] - 1),
            Tensor::from_slice(&[total]).to_device(starts.device()),
        ],
        0,
    );
    (ends - starts - 1)
        .clamp(0, 4 * BUCKETS as i64 - 1)
        .floor_divide_scalar(4)
}

/// The bucket's `width` values out of `[batch, 8 · width]`.
fn pick(x: &Tensor, bucket: &Tensor, width: i64) -> Tensor {
    let n = x.size()[0];
    let idx = bucket.view([n, 1, 1]).expand([n, 1, width], false);
    x.view([n, BUCKETS as i64, width])
        .gather(1, &idx, false)
        .view([n, width])
}

/// Network output `[batch, 1]`; times 600 it is internal units, side to move.
/// With `sparse`, the transformer's and the PSQT's bags are recorded there for the trainer's
/// sparse update ([`crate::sparse`]).
pub fn forward(
    model: &Model,
    b: &BatchTensors,
    mut sparse: Option<&mut crate::sparse::SparseBags>,
) -> Tensor {
    let param = |name: &str| model.param(name);
    let mut bag = |name: &str, idx: &Tensor, off: &Tensor| {
        crate::sparse::bag(sparse.as_deref_mut(), name, param(name), idx, off)
    };
    let bias = param("ft.bias");
    let pairwise = |a: Tensor| {
        let a = a.clamp(0.0, 1.0);
        a.narrow(1, 0, HALF as i64 / 2)
            * a.narrow(1, HALF as i64 / 2, HALF as i64 / 2)
            * (127.0 / 128.0)
    };
    let us = pairwise(bag("ft.weight", &b.stm_indices, &b.stm_offsets) + bias);
    let them = pairwise(bag("ft.weight", &b.nstm_indices, &b.nstm_offsets) + bias);
    let x = Tensor::cat(&[us, them], 1);
    let bucket = buckets(b);

    let l1 = pick(
        &x.linear(param("l1.weight"), Some(param("l1.bias"))),
        &bucket,
        L1,
    );
    let hidden = l1.narrow(1, 0, L1 - 1);
    let skip = l1.narrow(1, L1 - 1, 1);
    let hidden = Tensor::cat(&[hidden.square() * (127.0 / 128.0), hidden], 1).clamp(0.0, 1.0);
    let l2 = pick(
        &hidden.linear(param("l2.weight"), Some(param("l2.bias"))),
        &bucket,
        L2,
    )
    .clamp(0.0, 1.0);
    let out = pick(
        &l2.linear(param("out.weight"), Some(param("out.bias"))),
        &bucket,
        1,
    );
    let p_us = pick(
        &bag("psqt.weight", &b.stm_indices, &b.stm_offsets),
        &bucket,
        1,
    );
    let p_them = pick(
        &bag("psqt.weight", &b.nstm_indices, &b.nstm_offsets),
        &bucket,
        1,
    );
    out + skip + (p_us - p_them) / 2.0
}

/// Keeps the int8 layers' weights where quantization can represent them.
pub fn clip(params: &[(String, Tensor)]) {
    tch::no_grad(|| {
        for (name, t) in params {
            let max = match name.as_str() {
                "l1.weight" | "l2.weight" => MAX_HIDDEN_WEIGHT,
                "out.weight" => MAX_OUTPUT_WEIGHT,
                _ => continue,
            };
            let _ = t.shallow_clone().clamp_(-max, max);
        }
    });
}

/// A tensor's values times `scale`, rounded; an error naming the tensor when one does not fit
/// in `[min, max]` (never clipped silently).
fn scaled(t: &Tensor, name: &str, scale: f64, min: f64, max: f64) -> Result<Vec<i64>, TrainError> {
    let v: Vec<f64> = Vec::<f64>::try_from(
        (t.to_device(Device::Cpu).to_kind(Kind::Double) * scale)
            .round()
            .flatten(0, -1),
    )?;
    if let Some((i, x)) = v
        .iter()
        .enumerate()
        .find(|(_, x)| !(min..=max).contains(*x))
    {
        return Err(TrainError::Quantize {
            tensor: name.to_string(),
            reason: format!(
                "value {} at {i} is {x} after scaling by {scale}, outside {min}..={max}",
                x / scale
            ),
        });
    }
    Ok(v.into_iter().map(|x| x as i64).collect())
}

/// The integer network of a float model's parameters, in Stockfish 15.1's format.
pub fn quantize(model: &Model, description: &str) -> Result<StockfishNet, TrainError> {
    let param = |name: &str| model.param(name);
    let i16s = |name: &str, scale: f64| -> Result<Vec<i16>, TrainError> {
        Ok(scaled(param(name), name, scale, -32767.0, 32767.0)?
            .into_iter()
            .map(|x| x as i16)
            .collect())
    };
    let i32s = |name: &str, scale: f64| -> Result<Vec<i32>, TrainError> {
        let lim = i32::MAX as f64 / 2.0;
        Ok(scaled(param(name), name, scale, -lim, lim)?
            .into_iter()
            .map(|x| x as i32)
            .collect())
    };
    let i8s = |name: &str, scale: f64| -> Result<Vec<i8>, TrainError> {
        Ok(scaled(param(name), name, scale, -127.0, 127.0)?
            .into_iter()
            .map(|x| x as i8)
            .collect())
    };
    let l1w = i8s("l1.weight", HIDDEN_SCALE)?;
    let l1b = i32s("l1.bias", HIDDEN_SCALE * FT_SCALE)?;
    let l2w = i8s("l2.weight", HIDDEN_SCALE)?;
    let l2b = i32s("l2.bias", HIDDEN_SCALE * FT_SCALE)?;
    let ow = i8s("out.weight", OUTPUT_SCALE / FT_SCALE)?;
    let ob = i32s("out.bias", OUTPUT_SCALE)?;
    let (l1, l2, in2) = (L1 as usize, L2 as usize, 2 * (L1 as usize - 1));
    let stacks = (0..BUCKETS)
        .map(|s| {
            // l2's rows are 30 wide in the model and 32 (zero-padded) in the file.
            let mut fc1 = Vec::with_capacity(l2 * 32);
            for row in l2w[s * l2 * in2..(s + 1) * l2 * in2].chunks(in2) {
                fc1.extend_from_slice(row);
                fc1.extend_from_slice(&[0, 0]);
            }
            LayerStack::new(
                (
                    l1b[s * l1..(s + 1) * l1].to_vec(),
                    l1w[s * l1 * HALF..(s + 1) * l1 * HALF].to_vec(),
                ),
                (l2b[s * l2..(s + 1) * l2].to_vec(), fc1),
                (ob[s], ow[s * l2..(s + 1) * l2].to_vec()),
            )
        })
        .collect();
    let ft_bias = i16s("ft.bias", FT_SCALE)?;
    let ft_weights = i16s("ft.weight", FT_SCALE)?;
    // An accumulator sums the bias and at most 32 rows: each lane must stay within int16
    // whatever the position (Stockfish's adds would wrap).
    let mut widest = vec![0i64; HALF];
    for row in ft_weights.chunks(HALF) {
        for (m, &w) in widest.iter_mut().zip(row) {
            *m = (*m).max((w as i64).abs());
        }
    }
    for (j, (&b, &m)) in ft_bias.iter().zip(&widest).enumerate() {
        if (b as i64).abs() + 32 * m > i16::MAX as i64 {
            return Err(TrainError::Quantize {
                tensor: "ft.weight".into(),
                reason: format!(
                    "lane {j}: bias {b} and 32 rows of up to {m} could overflow the int16 accumulator"
                ),
            });
        }
    }
    let psqt_weights = i32s("psqt.weight", OUTPUT_SCALE)?;
    // The same for the PSQT sums (int32, no bias).
    for b in 0..BUCKETS {
        let widest = psqt_weights
            .iter()
            .skip(b)
            .step_by(BUCKETS)
            .map(|&w| (w as i64).abs())
            .max()
            .unwrap_or(0);
        if 32 * widest > i32::MAX as i64 {
            return Err(TrainError::Quantize {
                tensor: "psqt.weight".into(),
                reason: format!(
                    "bucket {b}: 32 rows of up to {widest} could overflow the int32 PSQT sum"
                ),
            });
        }
    }
    Ok(StockfishNet {
        description: description.as_bytes().to_vec(),
        ft_bias,
        ft_weights: ft_weights.into(),
        psqt_weights,
        stacks,
    })
}
