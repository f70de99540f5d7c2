//! The float model of a net its NetSpec describes (issue 37): parameters named and shaped by
//! [`NetSpec::tensors`], a forward pass that follows the description (factoriser, transformer
//! activation, layers per output bucket, the output bucket chosen by the number of men), and
//! the clipping that keeps every weight where its integer type can hold it.
//!
//! The output times the description's `eval_scale` is a score in the lake's unit, as
//! [`crate::model::OUTPUT_SCALE`] is for the fixed shapes.

use lakefish_engine::features::king_buckets::KingBuckets;
use lakefish_engine::spec_net::InputFamily;
use lakefish_schemas::netspec::{
    Dtype, Inputs, LayerActivation, NetSpec, OutputBuckets, THREAT_TENSOR, TransformerActivation,
};
use tch::{Device, Kind, Tensor};

use crate::loader::Batch;
use crate::model::BatchTensors;

/// Fresh parameters: the transformer uniform in ±1/sqrt(max_active) (its sums start in the
/// clipped range), its bias and the factoriser zero (the factoriser then learns what every
/// bucket shares), dense layers uniform in ±1/sqrt(fan-in) like torch's `Linear`. Seeded by
/// the caller.
pub fn new_params(spec: &NetSpec, max_active: i64, device: Device) -> Vec<(String, Tensor)> {
    // Drawn on the CPU whatever the device, so a seed gives the same net on CPU and CUDA.
    let uniform = |shape: &[i64], bound: f64| {
        ((Tensor::rand(shape, (Kind::Float, Device::Cpu)) * 2.0 - 1.0) * bound).to_device(device)
    };
    spec.tensors()
        .into_iter()
        .map(|t| {
            let shape: Vec<i64> = t.shape.iter().map(|&d| d as i64).collect();
            let value = match t.name.as_str() {
                "ft.weight" => uniform(&shape, 1.0 / (max_active as f64).sqrt()),
                "ft.bias" | "ft.factoriser" => Tensor::zeros(&shape, (Kind::Float, device)),
                name => {
                    // A bias has the fan-in of its weight.
                    let weight = name.replace(".bias", ".weight");
                    let fan_in = spec
                        .tensors()
                        .into_iter()
                        .find(|w| w.name == weight)
                        .map_or(1, |w| w.shape[1]);
                    uniform(&shape, 1.0 / (fan_in as f64).sqrt())
                }
            };
            (t.name, value.set_requires_grad(true))
        })
        .collect()
}

/// Men on the board of each row, from the stm perspective's features: those of the first
/// family with one feature per man (HalfKP has none for the kings, so two more).
fn men(spec: &NetSpec, b: &BatchTensors) -> Tensor {
    let offsets = b.stm_offsets.to_kind(Kind::Int64);
    let device = offsets.device();
    let total = Tensor::from_slice(&[b.stm_indices.size()[0]]).to_device(device);
    let ends = Tensor::cat(&[offsets.narrow(0, 1, offsets.size()[0] - 1), total], 0);
    let (lo, hi, extra) = spec
        .inputs
        .men_counted_by()
        .expect("validated: output buckets need a family that counts men");
    if spec.inputs.parts().len() == 1 {
        return ends - &offsets + extra as i64;
    }
    // Among combined families: a running count of the indices in that family's range.
    let idx = b.stm_indices.to_kind(Kind::Int64);
    let inside = idx.ge(lo as i64).logical_and(&idx.lt(hi as i64));
    let running = Tensor::cat(
        &[
            Tensor::zeros([1], (Kind::Int64, device)),
            inside.to_kind(Kind::Int64).cumsum(0, Kind::Int64),
        ],
        0,
    );
    running.index_select(0, &ends) - running.index_select(0, &offsets) + extra as i64
}

/// Each row's output bucket (`[batch]`, int64), by the description's rule.
pub fn buckets(spec: &NetSpec, b: &BatchTensors) -> Tensor {
    let men = men(spec, b).clamp(2, 32);
    match spec.output_buckets {
        OutputBuckets::None => men.zeros_like(),
        OutputBuckets::MaterialCount { count } => {
            (men - 2).floor_divide_scalar(32u32.div_ceil(count) as i64)
        }
        OutputBuckets::StockfishLayerStacks => (men - 1).floor_divide_scalar(4),
    }
}

fn param<'a>(params: &'a [(String, Tensor)], name: &str) -> &'a Tensor {
    &params
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("the description's parameter {name}"))
        .1
}

/// The net's output (`[batch, 1]`); times `eval_scale` a score in internal units. With
/// `sparse`, the transformer's bags are recorded there for the trainer's own sparse update
/// ([`crate::sparse`]) instead of taking libtorch's dense backward.
pub fn forward(
    spec: &NetSpec,
    params: &[(String, Tensor)],
    b: &BatchTensors,
    mut sparse: Option<&mut crate::sparse::SparseBags>,
) -> Tensor {
    let w = param(params, "ft.weight");
    let bias = param(params, "ft.bias");
    let factoriser = spec.factoriser().then(|| param(params, "ft.factoriser"));
    let mut halves = Vec::with_capacity(2);
    for (idx, off) in [
        (&b.stm_indices, &b.stm_offsets),
        (&b.nstm_indices, &b.nstm_offsets),
    ] {
        let mut acc = crate::sparse::bag(sparse.as_deref_mut(), "ft.weight", w, idx, off) + bias;
        if let Some(f) = factoriser {
            // The shared piece-square weight: every bucket's input `i` is `i mod 768` there.
            let plain = idx.remainder(768);
            acc += crate::sparse::bag(sparse.as_deref_mut(), "ft.factoriser", f, &plain, off);
        }
        halves.push(match spec.transformer.activation {
            TransformerActivation::Crelu => acc.clamp(0.0, 1.0),
            TransformerActivation::Screlu => acc.clamp(0.0, 1.0).square(),
            TransformerActivation::PairwiseCrelu => {
                let h = spec.transformer.width as i64 / 2;
                acc.narrow(1, 0, h).clamp(0.0, 1.0) * acc.narrow(1, h, h).clamp(0.0, 1.0)
            }
        });
    }
    let mut x = Tensor::cat(&halves, 1);
    let count = spec.output_buckets.count() as i64;
    let bucket = (count > 1).then(|| buckets(spec, b));
    // Rows `bucket · width ..` of a per-bucket layer's output: the chosen bucket's.
    let select = |y: Tensor, width: i64| match &bucket {
        Some(k) => {
            let n = y.size()[0];
            let index = (k * width).unsqueeze(1) + Tensor::arange(width, (Kind::Int64, y.device()));
            y.view([n, count * width]).gather(1, &index, false)
        }
        None => y,
    };
    for (i, layer) in spec.layers.iter().enumerate() {
        let y = x.linear(
            param(params, &format!("l{}.weight", i + 1)),
            Some(param(params, &format!("l{}.bias", i + 1))),
        );
        let width = layer.width as i64;
        let y = if layer.per_bucket {
            select(y, width)
        } else {
            y
        };
        x = match layer.activation {
            LayerActivation::Crelu => y.clamp(0.0, 1.0),
            LayerActivation::Screlu => y.clamp(0.0, 1.0).square(),
            LayerActivation::SquareAndCreluSkipLast => {
                unreachable!("Stockfish's layer stacks train as the stockfish-15.1 preset")
            }
        };
    }
    let y = x.linear(param(params, "out.weight"), Some(param(params, "out.bias")));
    select(y, 1)
}

/// Keeps every weight that is stored as an integer where its type can hold it at its factor
/// (the transformer: the accumulators' i16 lanes; a factoriser is merged into the transformer,
/// so the two together must fit: each is kept to half).
pub fn clip(spec: &NetSpec, params: &[(String, Tensor)]) {
    tch::no_grad(|| {
        for (name, t) in params {
            let quant = match name.as_str() {
                "ft.factoriser" => spec.default_quant("ft.weight"),
                n => spec.default_quant(n),
            };
            let Some(q) = quant else { continue };
            if q.dtype == Dtype::F32 || name.ends_with(".bias") {
                continue;
            }
            let mut max = q.dtype.max() / q.factor;
            if spec.factoriser() && name.starts_with("ft.") {
                max /= 2.0;
            }
            if name == "out.weight" && screlu_kernel(spec) {
                // The engine's SCReLU dot multiplies in i16 lanes: weights within ±127 stored.
                max = max.min(127.0 / q.factor);
            }
            let _ = t.shallow_clone().clamp_(-max, max);
            // Threat rows are stored as their own type (i8 by default): kept where it holds.
            if name == "ft.weight"
                && let (Some((at, rows)), Some(tq)) =
                    (spec.inputs.threat_rows(), spec.default_quant(THREAT_TENSOR))
            {
                let max = max.min(tq.dtype.max() / tq.factor);
                let _ = t.narrow(0, at as i64, rows as i64).clamp_(-max, max);
            }
        }
    });
}

/// Whether the engine evaluates this net's output with the presets' SCReLU kernel when its
/// output weights stay within ±127 stored: a SCReLU transformer at factor 255 straight into
/// the output (see `lakefish_engine::spec_net`).
fn screlu_kernel(spec: &NetSpec) -> bool {
    spec.transformer.activation == TransformerActivation::Screlu
        && spec.layers.is_empty()
        && spec.default_quant("ft.weight").map(|q| q.factor) == Some(255.0)
}

/// How the loader's `all768` indices become a description's inputs: the loader takes
/// `all768` for every family but HalfKP and HalfKAv2_hm on their own (their own sets).
pub enum InputRemap {
    /// A king-bucket layout: each row's own king picks the bucket and the mirror.
    KingBuckets(Box<KingBuckets>),
    /// Threats and combinations: each perspective's board is rebuilt from its indices and
    /// the family's features taken from it, as the engine takes them.
    Relisted(InputFamily),
}

/// The remap a description's inputs need (`None`: the loader's indices are its inputs).
pub fn input_remap(spec: &NetSpec) -> Result<Option<InputRemap>, String> {
    match &spec.inputs {
        Inputs::KingBuckets { layout, mirror, .. } => KingBuckets::new(layout, *mirror)
            .map(|kb| Some(InputRemap::KingBuckets(Box::new(kb))))
            .map_err(|e| format!("inputs.layout: {e}")),
        Inputs::Threats {}
        | Inputs::Axes {}
        | Inputs::Mobility {}
        | Inputs::PairwiseAxes {}
        | Inputs::Combined { .. } => {
            // An `all768` list is the board seen from its perspective: ranks flipped for
            // Black, colours relative (HalfKP, which reads Black's view otherwise, is refused
            // in a combination: `NetSpec::trainer_limits`).
            InputFamily::of(&spec.inputs)
                .map(|f| Some(InputRemap::Relisted(f)))
                .map_err(|e| e.to_string())
        }
        _ => Ok(None),
    }
}

/// A batch of `all768` indices in the description's inputs.
pub fn remap_batch(remap: &InputRemap, b: &mut Batch) -> Result<(), String> {
    match remap {
        InputRemap::KingBuckets(kb) => remap_king_buckets(kb, b),
        InputRemap::Relisted(family) => relist(family, b),
    }
}

fn remap_king_buckets(kb: &KingBuckets, b: &mut Batch) -> Result<(), String> {
    let rows = b.len();
    for (indices, offsets, perspective) in [
        (&mut b.stm_indices, &b.stm_offsets, "side to move"),
        (&mut b.nstm_indices, &b.nstm_offsets, "other side"),
    ] {
        for r in 0..rows {
            let start = offsets[r] as usize;
            let end = offsets.get(r + 1).map_or(indices.len(), |&e| e as usize);
            // The colour only names the error: the indices are already relative.
            kb.remap_all768(shakmaty::Color::White, &mut indices[start..end])
                .map_err(|_| format!("row {r}: no king of the {perspective} among its inputs"))?;
        }
    }
    Ok(())
}

/// The board an `all768` list describes, seen from its perspective as White.
fn board_of_all768(indices: &[i32]) -> Result<shakmaty::Board, String> {
    let mut board = shakmaty::Board::empty();
    for &i in indices {
        if !(0..768).contains(&i) {
            return Err(format!("all768 index {i} is beyond 767"));
        }
        let colour = if i < 384 {
            shakmaty::Color::White
        } else {
            shakmaty::Color::Black
        };
        let role = shakmaty::Role::ALL[(i as usize % 384) / 64];
        board.set_piece_at(shakmaty::Square::new(i as u32 % 64), role.of(colour));
    }
    Ok(board)
}

/// Replaces each perspective's `all768` list by `family`'s features of the same board.
fn relist(family: &InputFamily, b: &mut Batch) -> Result<(), String> {
    use rayon::prelude::*;
    let rows = b.len();
    for (indices, offsets, perspective) in [
        (&mut b.stm_indices, &mut b.stm_offsets, "side to move"),
        (&mut b.nstm_indices, &mut b.nstm_offsets, "other side"),
    ] {
        // Rows in pieces over the cores, each piece's lists stitched in order after.
        let piece = rows
            .div_ceil(rayon::current_num_threads().max(1) * 4)
            .max(64);
        // Per piece of rows: their features, one after the other, and each row's count.
        type Lists = Result<(Vec<i32>, Vec<i32>), String>;
        let lists: Vec<Lists> = (0..rows)
            .step_by(piece)
            .collect::<Vec<_>>()
            .into_par_iter()
            .map(|first| {
                let (mut out, mut lens) = (Vec::new(), Vec::new());
                let mut scratch = Vec::with_capacity(family.max_active());
                for r in first..(first + piece).min(rows) {
                    let start = offsets[r] as usize;
                    let end = offsets.get(r + 1).map_or(indices.len(), |&e| e as usize);
                    let board = board_of_all768(&indices[start..end])
                        .map_err(|e| format!("row {r}, {perspective}: {e}"))?;
                    scratch.clear();
                    family
                        .active(&board, shakmaty::Color::White, &mut scratch)
                        .map_err(|e| format!("row {r}, {perspective}: {e}"))?;
                    lens.push(scratch.len() as i32);
                    out.extend(scratch.iter().map(|&f| f as i32));
                }
                Ok((out, lens))
            })
            .collect();
        indices.clear();
        offsets.clear();
        for piece in lists {
            let (out, lens) = piece?;
            let mut at = indices.len() as i32;
            for len in lens {
                offsets.push(at);
                at += len;
            }
            indices.extend(out);
        }
    }
    Ok(())
}

/// The integer net of a described model: the factoriser merged into every bucket's
/// transformer rows, then each tensor stored as its quantization says (type, factor,
/// rounding). A value its type cannot hold is an error naming the tensor.
pub fn quantize(
    spec: &NetSpec,
    params: &[(String, Tensor)],
    comment: String,
) -> Result<lakefish_engine::spec_net::SpecNet, crate::TrainError> {
    use lakefish_engine::spec_net::{SpecNet, Values};
    use lakefish_schemas::netspec::Rounding;
    let values = |name: &str| -> Result<Vec<f32>, crate::TrainError> {
        let t = param(params, name)
            .detach()
            .to_device(Device::Cpu)
            .flatten(0, -1);
        Ok(Vec::<f32>::try_from(t)?)
    };
    let width = spec.transformer.width as usize;
    let threats = spec.inputs.threat_rows();
    let mut tensors = Vec::new();
    for t in spec.file_tensors() {
        let mut v = match (t.name.as_str(), threats) {
            // Threat rows are a file tensor of their own; ft.weight keeps the others.
            (THREAT_TENSOR, Some((at, rows))) => {
                values("ft.weight")?[at * width..(at + rows) * width].to_vec()
            }
            ("ft.weight", Some((at, rows))) => {
                let mut all = values("ft.weight")?;
                all.drain(at * width..(at + rows) * width);
                all
            }
            (name, _) => values(name)?,
        };
        if t.name == "ft.weight" && spec.factoriser() {
            let f = values("ft.factoriser")?;
            for (row, chunk) in v.chunks_mut(width).enumerate() {
                let shared = &f[(row % 768) * width..][..width];
                chunk.iter_mut().zip(shared).for_each(|(w, s)| *w += s);
            }
        }
        let q = spec
            .default_quant(&t.name)
            .expect("every tensor of the description has a quantization");
        let stored = |i: usize, x: f32| -> Result<f64, crate::TrainError> {
            let scaled = x as f64 * q.factor;
            let r = match q.rounding {
                Rounding::Round => scaled.round(),
                Rounding::Trunc => scaled.trunc(),
            };
            if r.is_finite() && r.abs() <= q.dtype.max() {
                Ok(r)
            } else {
                Err(crate::TrainError::Quantize {
                    tensor: t.name.clone(),
                    reason: format!(
                        "value {x} at index {i} is {r} at factor {}, beyond {:?}",
                        q.factor, q.dtype
                    ),
                })
            }
        };
        let ints = || -> Result<Vec<f64>, crate::TrainError> {
            v.iter().enumerate().map(|(i, &x)| stored(i, x)).collect()
        };
        let stored = match q.dtype {
            Dtype::I8 => Values::I8(ints()?.into_iter().map(|x| x as i8).collect()),
            Dtype::I16 => Values::I16(ints()?.into_iter().map(|x| x as i16).collect()),
            Dtype::I32 => Values::I32(ints()?.into_iter().map(|x| x as i32).collect()),
            Dtype::F32 => {
                let f: Vec<f32> = v.iter().map(|&x| (x as f64 * q.factor) as f32).collect();
                if let Some(i) = f.iter().position(|x| !x.is_finite()) {
                    return Err(crate::TrainError::Quantize {
                        tensor: t.name.clone(),
                        reason: format!("value {} at index {i} is not a finite number", v[i]),
                    });
                }
                Values::F32(f)
            }
        };
        tensors.push((t.name, stored));
    }
    let net = SpecNet::new(spec.clone(), comment, tensors)
        .map_err(|e| crate::TrainError::Internal(format!("the quantized net: {e}")))?;
    // No position may overflow an i16 accumulator: all of a perspective's features come
    // from one king bucket's block of 768 rows (else from the whole set), at most
    // `max_active` of them.
    let block = match spec.inputs {
        Inputs::KingBuckets { .. } => 768 * width,
        _ => net.ft_weights.len(),
    };
    let bias: Vec<i64> = net.ft_bias.iter().map(|&x| x as i64).collect();
    for rows in net.ft_weights.chunks(block) {
        let rows: Vec<i64> = rows.iter().map(|&x| x as i64).collect();
        crate::quantize::check_accumulator_range(&bias, &rows, width, spec.inputs.max_active())?;
    }
    Ok(net)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The loader's `all768` lists, relisted, are the family's own features of the same
    /// board from the same side (what the engine evaluates), for both perspectives, along
    /// random games, with Black to move as often as White.
    #[test]
    fn relisted_inputs_are_the_engine_s_features() {
        use lakefish_engine::features::FeatureSetKind;
        use shakmaty::{Chess, Color, Position};
        let families = [
            "family = \"threats\"",
            "family = \"combined\"\n[[inputs.parts]]\nfamily = \"threats\"\n[[inputs.parts]]\nfamily = \"halfka_v2_hm\"",
            "family = \"combined\"\n[[inputs.parts]]\nfamily = \"piece_square\"\n[[inputs.parts]]\nfamily = \"threats\"",
            "family = \"combined\"\n[[inputs.parts]]\nfamily = \"axes\"\n[[inputs.parts]]\nfamily = \"mobility\"\n[[inputs.parts]]\nfamily = \"pairwise_axes\"",
            "family = \"combined\"\n[[inputs.parts]]\nfamily = \"king_buckets\"\nmirror = true\n\
             layout = [0, 1, 2, 3, 4, 4, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7, 8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9]\n\
             [[inputs.parts]]\nfamily = \"threats\"",
        ];
        for text in families {
            let spec = NetSpec::parse(&format!(
                "version = 1\n[inputs]\n{text}\n[transformer]\nwidth = 8\n[quantization]\neval_scale = 400.0\n"
            ))
            .unwrap();
            let Some(remap) = input_remap(&spec).unwrap() else {
                panic!("{text}: relisted")
            };
            let family = InputFamily::of(&spec.inputs).unwrap();
            let mut rng = lakefish_engine::random_games::SplitMix(17);
            let (mut batch, mut want) = (Batch::default(), Vec::new());
            let mut pos = Chess::default();
            for _ in 0..600 {
                let moves = pos.legal_moves();
                if moves.is_empty() {
                    pos = Chess::default();
                    continue;
                }
                pos.play_unchecked(moves[rng.below(moves.len() as u64) as usize]);
                let turn = pos.turn();
                let (mut stm, mut nstm) = (Vec::new(), Vec::new());
                FeatureSetKind::All768
                    .active_features(pos.board(), turn, &mut stm)
                    .unwrap();
                FeatureSetKind::All768
                    .active_features(pos.board(), turn.other(), &mut nstm)
                    .unwrap();
                batch.push_features(&stm, &nstm);
                let of = |c: Color| {
                    let mut f = Vec::new();
                    family.active(pos.board(), c, &mut f).unwrap();
                    f.sort_unstable();
                    f
                };
                want.push((of(turn), of(turn.other())));
            }
            remap_batch(&remap, &mut batch).unwrap();
            let row = |idx: &[i32], off: &[i32], r: usize| {
                let end = off.get(r + 1).map_or(idx.len(), |&e| e as usize);
                let mut f: Vec<u32> = idx[off[r] as usize..end]
                    .iter()
                    .map(|&i| i as u32)
                    .collect();
                f.sort_unstable();
                f
            };
            let mut threats = 0;
            for (r, (stm, nstm)) in want.iter().enumerate() {
                assert_eq!(
                    &row(&batch.stm_indices, &batch.stm_offsets, r),
                    stm,
                    "{text}: row {r}"
                );
                assert_eq!(
                    &row(&batch.nstm_indices, &batch.nstm_offsets, r),
                    nstm,
                    "{text}: row {r}"
                );
                threats += stm.len();
            }
            assert!(threats > 600 * 5, "{text}: {threats} features");
        }
    }

    /// A transformer column whose 32 largest weights would overflow an i16 accumulator is
    /// refused when quantized, naming the tensor, though every weight alone fits i16.
    #[test]
    fn an_accumulator_that_could_overflow_is_refused() {
        let spec = NetSpec::parse(
            "version = 1\n[inputs]\nfamily = \"piece_square\"\n[transformer]\nwidth = 8\n\
             activation = \"screlu\"\n[quantization]\neval_scale = 400.0\n",
        )
        .unwrap();
        let params = new_params(&spec, 32, Device::Cpu);
        let fine = quantize(&spec, &params, String::new());
        assert!(fine.is_ok(), "{:?}", fine.err());
        tch::no_grad(|| {
            // 100 at factor 255 is 25,500: one fits, two do not.
            let _ = param(&params, "ft.weight").narrow(1, 3, 1).fill_(100.0);
        });
        let err = quantize(&spec, &params, String::new())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("ft.weight") && err.contains("column 3"),
            "{err}"
        );
    }
}
