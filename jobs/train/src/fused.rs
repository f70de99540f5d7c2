//! One training step of a SCReLU net without hidden layers — bullet's simple net,
//! `(inputs → l1)×2 → 1` — in our own code on the CPU: forward, loss, backward and Adam fused
//! over the batch's rows, as bullet's CPU backend does it.
//!
//! On this net libtorch's per-op path (the bag, clamp, square, the output's gemv and their
//! backward over `[batch, 2·l1]` temporaries) was half of a sparse step
//! (docs/BENCHMARKS.md). Here each row's accumulators are built, clamped, squared and dotted
//! with the output weights, and its gradient is scattered into the transformer's per-part sums
//! at once, without any `[batch, 2·l1]` tensor. Rows are summed in [`PARTS`] fixed runs added
//! in order, and every dot product keeps eight lanes summed in a fixed order, so a step's
//! result does not depend on the thread count or the vector width, and resume stays
//! bit-exact. The update is the sparse path's lazy Adam ([`crate::sparse`]).

use crate::adam::Adam;
use crate::model::{Activation, BatchTensors, Loss, Model, ModelArch};
use crate::sparse::{PARTS, RowConstants, Rows, WithMoments, adam_row, adam_touched, sum_parts};
use lakefish_schemas::netspec::Inputs;
use rayon::prelude::*;
use tch::{Kind, Tensor};

/// Weights above which the fused step is not used: each of its [`PARTS`] keeps a gradient sum
/// as large as the transformer's weight (32 MiB each here).
const MAX_WEIGHTS: usize = lakefish_schemas::netspec::SPARSE_MAX_TRANSFORMER_WEIGHTS;

/// The net the fused step trains: the parameters' positions in the model and how a row picks
/// its output bucket.
struct Net {
    ft_w: usize,
    ft_b: usize,
    /// `ft.factoriser` (`[768, width]`): its row `f mod 768` is added to every input `f`.
    factoriser: Option<usize>,
    out_w: usize,
    out_b: usize,
    /// Output buckets (1: none); a row's is `(clamp(men, 2, 32) − 2) / men_per_bucket`, the
    /// men counted from its side-to-move features, `+ extra_men` (HalfKP has no king features).
    buckets: usize,
    men_per_bucket: usize,
    extra_men: usize,
}

impl Net {
    /// The fused step's view of `model`, when it is a SCReLU transformer straight into one
    /// output per bucket (no hidden layers, no PSQT): lakefish's `:screlu` nets without hidden
    /// layers, and described nets of that shape with any inputs, a factoriser, and output
    /// buckets by material count (bullet's progression nets 1 to 3).
    fn of(model: &Model) -> Option<Net> {
        let at = |name: &str| model.params.iter().position(|(n, _)| n == name);
        let shape = Shape::of(&model.arch)?;
        if model.params[at(shape.names[0])?].1.numel() > MAX_WEIGHTS {
            return None;
        }
        let names = shape.names;
        Some(Net {
            ft_w: at(names[0])?,
            ft_b: at(names[1])?,
            factoriser: if shape.factoriser {
                Some(at("ft.factoriser")?)
            } else {
                None
            },
            out_w: at(names[2])?,
            out_b: at(names[3])?,
            buckets: shape.buckets,
            men_per_bucket: 32usize.div_ceil(shape.buckets),
            extra_men: shape.extra_men,
        })
    }

    fn bucket(&self, stm_features: usize) -> usize {
        if self.buckets == 1 {
            return 0;
        }
        let men = (stm_features + self.extra_men).clamp(2, 32);
        ((men - 2) / self.men_per_bucket).min(self.buckets - 1)
    }
}

/// What of an architecture the fused step needs to know.
struct Shape {
    /// The transformer's weight and bias, the output's weight and bias.
    names: [&'static str; 4],
    factoriser: bool,
    buckets: usize,
    extra_men: usize,
}

impl Shape {
    /// A SCReLU transformer straight into one output per bucket (no hidden layers, no PSQT):
    /// lakefish's `:screlu` nets without hidden layers, and described nets of that shape
    /// (`NetSpec::sparse_update`: any inputs, a factoriser, output buckets by material count;
    /// bullet's progression nets 1 to 3).
    fn of(arch: &ModelArch) -> Option<Shape> {
        match arch {
            ModelArch::Lakefish(a) if a.activation == Activation::Screlu && a.hidden.is_empty() => {
                Some(Shape {
                    names: ["ft.weight", "ft.bias", "l0.weight", "l0.bias"],
                    factoriser: false,
                    buckets: 1,
                    extra_men: 0,
                })
            }
            ModelArch::Spec(spec) if spec.sparse_update().is_ok() => Some(Shape {
                names: ["ft.weight", "ft.bias", "out.weight", "out.bias"],
                factoriser: spec.factoriser(),
                buckets: (spec.output_buckets.count() as usize).max(1),
                extra_men: if matches!(spec.inputs, Inputs::Halfkp {}) {
                    2
                } else {
                    0
                },
            }),
            _ => None,
        }
    }
}

/// Whether [`step`] trains this model with this optimizer: the sparse update (so the CPU) of
/// a net of a [`Shape`] it takes, within [`MAX_WEIGHTS`].
pub fn applies(model: &Model, adam: &Adam) -> bool {
    adam.sparse && Net::of(model).is_some()
}

/// A contiguous CPU tensor of `kind` as a slice (`T` its element type).
fn view<'a, T>(t: &'a Tensor, kind: Kind, what: &str) -> Result<&'a [T], String> {
    if t.kind() != kind || !t.is_contiguous() || t.device() != tch::Device::Cpu {
        return Err(format!(
            "{what}: a contiguous {kind:?} CPU tensor, not {:?} on {:?}",
            t.kind(),
            t.device()
        ));
    }
    let n = t.numel();
    if n == 0 {
        return Ok(&[]);
    }
    // SAFETY: a contiguous CPU tensor of `n` elements of `kind` (checked above, `T` its
    // element type at every call), alive as long as the borrow of `t`.
    Ok(unsafe { std::slice::from_raw_parts(t.data_ptr() as *const T, n) })
}

/// A part's sums over its rows: the gradients of every parameter but the transformer's
/// weight (which goes to the scratch's per-part buffers) and the loss.
struct PartSums {
    bias: Vec<f32>,
    /// `[768, width]` when the net has a factoriser, else empty.
    factoriser: Vec<f32>,
    /// `[buckets, 2·width]` and `[buckets]`.
    out_w: Vec<f32>,
    out_b: Vec<f32>,
    loss: f64,
}

#[inline(always)]
fn add(dst: &mut [f32], src: &[f32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d += s;
    }
}

/// Σ c²·w in eight lanes added in a fixed order, so the sum does not depend on how wide the
/// vector unit is.
#[inline(always)]
fn dot_squared(c: &[f32], w: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (body, tail) = (c.len() / 8 * 8, c.len() % 8);
    for (c, w) in c[..body].chunks_exact(8).zip(w[..body].chunks_exact(8)) {
        for i in 0..8 {
            lanes[i] += c[i] * c[i] * w[i];
        }
    }
    for i in 0..tail {
        lanes[i] += c[body + i] * c[body + i] * w[body + i];
    }
    lanes.iter().sum()
}

/// A row's loss and its derivative by the scaled output `q` (the prediction over `scale`),
/// as [`crate::model::loss`] computes it for one row.
#[inline(always)]
fn row_loss(kind: Loss, q: f32, target: f32) -> (f32, f32) {
    let s = 1.0 / (1.0 + (-q).exp());
    match kind {
        Loss::Power(p) => {
            let d = s - target;
            let p = p as f32;
            let loss = d.abs().powf(p);
            // d|d|^p/dd = p·|d|^(p−1)·sign(d); 0 where d is 0.
            let grad = if d == 0.0 {
                0.0
            } else {
                p * d.abs().powf(p - 1.0) * d.signum() * s * (1.0 - s)
            };
            (loss, grad)
        }
        Loss::Elmo => {
            // −(t·log s + (1−t)·log(1−s)) minus the target's entropy; the logs' arguments
            // clamped at 1e-12 as there, where the gradient then stops.
            let eps = 1e-12f32;
            let t = target;
            let loss = entropy_pair(t, t, eps) - entropy_pair(t, s, eps);
            let mut grad = 0.0;
            if s >= eps {
                grad -= t * (1.0 - s);
            }
            if 1.0 - s >= eps {
                grad += (1.0 - t) * s;
            }
            (loss, grad)
        }
    }
}

/// t·log(s) + (1−t)·log(1−s), the logs' arguments clamped at `eps`.
#[inline(always)]
fn entropy_pair(t: f32, s: f32, eps: f32) -> f32 {
    t * s.clamp(eps, 1.0).ln() + (1.0 - t) * (1.0 - s).clamp(eps, 1.0).ln()
}

/// What a step minimizes and how far it moves: the loss, the target's λ and sigmoid scale,
/// the learning rate.
#[derive(Debug, Clone, Copy)]
pub struct StepArgs {
    pub kind: Loss,
    pub lambda: f64,
    /// The sigmoid scale of the data's scores (the target's).
    pub scale: f64,
    /// The sigmoid scale of the net's output (the prediction's).
    pub prediction_scale: f64,
    pub lr: f64,
    /// Only the instructions every x86-64 CPU has, even where AVX2 is there: for the test
    /// that both paths give the same bits.
    pub baseline: bool,
}

/// One optimizer step on `batch` (forward, loss, backward, lazy Adam on the transformer's
/// touched rows, Adam on the rest); returns the batch's mean loss. The caller clips the
/// output layer as after any step. Anything malformed in the batch is an error before a
/// weight is written.
pub fn step(
    model: &Model,
    adam: &mut Adam,
    batch: &BatchTensors,
    args: StepArgs,
) -> Result<f32, String> {
    let StepArgs {
        kind,
        lambda,
        scale,
        prediction_scale,
        lr,
        baseline,
    } = args;
    let net =
        Net::of(model).ok_or_else(|| format!("a {} net is not one step fuses", model.arch))?;
    let size = model.params[net.ft_w].1.size();
    let (inputs, h) = (size[0] as usize, size[1] as usize);
    let plain = if net.factoriser.is_some() { 768 } else { 0 };
    let output_scale = model.arch.output_scale();

    let starts = &mut adam.scratch.starts;
    starts.clear();
    starts.resize(inputs + 1, 0);
    let (stm, nstm, score, result) = {
        let counts = &mut starts[1..];
        let bag = |indices, offsets, counts: &mut [u32]| {
            let indices: &[i32] = view(indices, Kind::Int, "indices")?;
            let offsets: &[i32] = view(offsets, Kind::Int, "offsets")?;
            Rows::new(indices, offsets, inputs, counts)
        };
        let stm = bag(&batch.stm_indices, &batch.stm_offsets, counts)?;
        let nstm = bag(&batch.nstm_indices, &batch.nstm_offsets, counts)?;
        let score: &[f32] = view(&batch.score, Kind::Float, "score")?;
        let result: &[f32] = view(&batch.result, Kind::Float, "result")?;
        (stm, nstm, score, result)
    };
    let rows = stm.len();
    if nstm.len() != rows || score.len() != rows || result.len() != rows {
        return Err(format!(
            "a batch of {rows} rows has {} other-side rows, {} scores and {} results",
            nstm.len(),
            score.len(),
            result.len()
        ));
    }
    // The factoriser's rows a batch touched: those of any input they are shared by.
    let mut plain_starts = vec![0u32; plain + 1];
    if plain > 0 {
        for f in 0..inputs {
            plain_starts[f % plain + 1] += starts[f + 1];
        }
        for f in 0..plain {
            plain_starts[f + 1] += plain_starts[f];
        }
    }
    for f in 0..inputs {
        starts[f + 1] += starts[f];
    }

    let (buckets, out_len) = (net.buckets, 2 * h);
    let parts = &mut adam.scratch.parts;
    parts.resize_with(PARTS, Vec::new);
    let sums: Vec<PartSums> = {
        let p = |i: usize| view::<f32>(&model.params[i].1, Kind::Float, &model.params[i].0);
        let (w, fb, ow, ob) = (p(net.ft_w)?, p(net.ft_b)?, p(net.out_w)?, p(net.out_b)?);
        let fw = match net.factoriser {
            Some(i) => p(i)?,
            None => &[],
        };
        if w.len() != inputs * h
            || fb.len() != h
            || fw.len() != plain * h
            || ow.len() != buckets * out_len
            || ob.len() != buckets
        {
            return Err(format!(
                "parameters of sizes {}, {}, {}, {}, {} do not make ({inputs} → {h})×2 → {buckets}",
                w.len(),
                fb.len(),
                fw.len(),
                ow.len(),
                ob.len()
            ));
        }
        let per_part = rows.div_ceil(PARTS).max(1);
        // d(mean loss)/d(output) = dq/B · output_scale/prediction_scale.
        let to_out = (output_scale / prediction_scale / rows.max(1) as f64) as f32;
        let (q_of_out, lambda, inv_scale) = (
            (output_scale / prediction_scale) as f32,
            lambda as f32,
            (1.0 / scale) as f32,
        );
        let rows_in = PartRows {
            net: &net,
            stm: &stm,
            nstm: &nstm,
            score,
            result,
            w,
            fb,
            fw,
            ow,
            ob,
            plain,
            h,
            inputs,
            per_part,
            to_out,
            q_of_out,
            lambda,
            inv_scale,
            kind,
            baseline,
        };
        parts
            .par_iter_mut()
            .enumerate()
            .map(|(p, ft_sum)| rows_in.sums(p, ft_sum))
            .collect()
    };

    let k = RowConstants::of(adam.next_step(lr));
    let with_moments = |i: usize| WithMoments {
        param: &model.params[i].1,
        m: &adam.m[i],
        v: &adam.v[i],
    };
    let parts: &[Vec<f32>] = &adam.scratch.parts;
    let [w, m, v] = with_moments(net.ft_w).slices(inputs * h)?;
    adam_touched([w, m, v], h, &adam.scratch.starts, &k, |f, acc| {
        sum_parts(acc, f, parts.iter().map(Vec::as_slice))
    });
    if let Some(i) = net.factoriser {
        let [w, m, v] = with_moments(i).slices(plain * h)?;
        adam_touched([w, m, v], h, &plain_starts, &k, |f, acc| {
            sum_parts(acc, f, sums.iter().map(|s| s.factoriser.as_slice()))
        });
    }
    let total = |of: &dyn Fn(&PartSums) -> &[f32], len: usize| {
        let mut acc = vec![0f32; len];
        for s in &sums {
            add(&mut acc, of(s));
        }
        acc
    };
    let [w, m, v] = with_moments(net.ft_b).slices(h)?;
    adam_row(w, m, v, &total(&|s| &s.bias, h), &k);
    // Output buckets no row of the batch chose keep their weights (lazy, as the transformer).
    let out_w = total(&|s| &s.out_w, buckets * out_len);
    let out_b = total(&|s| &s.out_b, buckets);
    let [w, m, v] = with_moments(net.out_w).slices(buckets * out_len)?;
    let [bw, bm, bv] = with_moments(net.out_b).slices(buckets)?;
    let chosen = bucket_counts(&net, &stm);
    for b in (0..buckets).filter(|&b| chosen[b] > 0) {
        let r = b * out_len..(b + 1) * out_len;
        adam_row(
            &mut w[r.clone()],
            &mut m[r.clone()],
            &mut v[r.clone()],
            &out_w[r],
            &k,
        );
        adam_row(
            &mut bw[b..=b],
            &mut bm[b..=b],
            &mut bv[b..=b],
            &out_b[b..=b],
            &k,
        );
    }
    let loss: f64 = sums.iter().map(|s| s.loss).sum();
    Ok((loss / rows.max(1) as f64) as f32)
}

/// What a part's rows read: the batch, the weights and the step's constants.
struct PartRows<'a> {
    net: &'a Net,
    stm: &'a Rows<'a>,
    nstm: &'a Rows<'a>,
    score: &'a [f32],
    result: &'a [f32],
    w: &'a [f32],
    fb: &'a [f32],
    fw: &'a [f32],
    ow: &'a [f32],
    ob: &'a [f32],
    plain: usize,
    h: usize,
    inputs: usize,
    per_part: usize,
    to_out: f32,
    q_of_out: f32,
    lambda: f32,
    inv_scale: f32,
    kind: Loss,
    baseline: bool,
}

impl PartRows<'_> {
    /// Part `p`'s rows: forward, loss and backward, the transformer's gradient into `ft_sum`.
    /// With AVX2 where the CPU has it: the same operations in the same order on wider
    /// vectors (no fused multiply-add), so the bits do not change.
    fn sums(&self, p: usize, ft_sum: &mut Vec<f32>) -> PartSums {
        #[cfg(target_arch = "x86_64")]
        if !self.baseline && std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { self.sums_avx2(p, ft_sum) };
        }
        self.sums_any(p, ft_sum)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn sums_avx2(&self, p: usize, ft_sum: &mut Vec<f32>) -> PartSums {
        self.sums_any(p, ft_sum)
    }

    #[inline(always)]
    fn sums_any(&self, p: usize, ft_sum: &mut Vec<f32>) -> PartSums {
        let PartRows {
            net,
            stm,
            nstm,
            score,
            result,
            w,
            fb,
            fw,
            ow,
            ob,
            plain,
            h,
            inputs,
            per_part,
            to_out,
            q_of_out,
            lambda,
            inv_scale,
            kind,
            baseline: _,
        } = *self;
        let (buckets, out_len) = (net.buckets, 2 * h);
        let rows = stm.len();
        ft_sum.clear();
        ft_sum.resize(inputs * h, 0.0);
        let mut sums = PartSums {
            bias: vec![0.0; h],
            factoriser: vec![0.0; plain * h],
            out_w: vec![0.0; buckets * out_len],
            out_b: vec![0.0; buckets],
            loss: 0.0,
        };
        let mut acc = [vec![0f32; h], vec![0f32; h]];
        let first = (p * per_part).min(rows);
        let last = ((p + 1) * per_part).min(rows);
        for r in first..last {
            let features = [stm.row(r), nstm.row(r)];
            let k = net.bucket(features[0].len());
            let ow = &ow[k * out_len..][..out_len];
            let mut out = ob[k];
            for (side, acc) in acc.iter_mut().enumerate() {
                acc.copy_from_slice(fb);
                for &f in features[side] {
                    add(acc, &w[f as usize * h..][..h]);
                    if plain > 0 {
                        add(acc, &fw[f as usize % plain * h..][..h]);
                    }
                }
                for a in acc.iter_mut() {
                    *a = a.clamp(0.0, 1.0);
                }
                out += dot_squared(acc, &ow[side * h..][..h]);
            }
            let target =
                lambda / (1.0 + (-score[r] * inv_scale).exp()) + (1.0 - lambda) * result[r];
            let (loss, dq) = row_loss(kind, out * q_of_out, target);
            sums.loss += loss as f64;
            let d_out = dq * to_out;
            sums.out_b[k] += d_out;
            let out_g = &mut sums.out_w[k * out_len..][..out_len];
            for (side, c) in acc.iter_mut().enumerate() {
                let owp = &ow[side * h..][..h];
                for (g, &c) in out_g[side * h..][..h].iter_mut().zip(&*c) {
                    *g += d_out * c * c;
                }
                // The clamp passes the gradient only strictly inside (0, 1).
                for (c, &w) in c.iter_mut().zip(owp) {
                    *c = if *c > 0.0 && *c < 1.0 {
                        2.0 * *c * (d_out * w)
                    } else {
                        0.0
                    };
                }
                add(&mut sums.bias, c);
                for &f in features[side] {
                    add(&mut ft_sum[f as usize * h..][..h], c);
                    if plain > 0 {
                        add(&mut sums.factoriser[f as usize % plain * h..][..h], c);
                    }
                }
            }
        }
        sums
    }
}

/// How many rows chose each output bucket.
fn bucket_counts(net: &Net, stm: &Rows) -> Vec<usize> {
    let mut n = vec![0; net.buckets];
    for r in 0..stm.len() {
        n[net.bucket(stm.row(r).len())] += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Arch;
    use crate::train::train_step;

    /// `rows` positions of 1 to 30 features each (repeats allowed, as a bag sums them).
    fn batch(rows: usize, seed: u64) -> BatchTensors {
        batch_of(rows, seed, 768)
    }

    fn batch_of(rows: usize, seed: u64, inputs: u64) -> BatchTensors {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut bag = || {
            let (mut indices, mut offsets) = (Vec::new(), Vec::new());
            for _ in 0..rows {
                offsets.push(indices.len() as i32);
                for _ in 0..1 + next(30) {
                    indices.push(next(inputs) as i32);
                }
            }
            (Tensor::from_slice(&indices), Tensor::from_slice(&offsets))
        };
        let ((si, so), (ni, no)) = (bag(), bag());
        let score: Vec<f32> = (0..rows).map(|_| next(2001) as f32 - 1000.0).collect();
        let result: Vec<f32> = (0..rows).map(|_| next(3) as f32 / 2.0).collect();
        BatchTensors {
            stm_indices: si,
            stm_offsets: so,
            nstm_indices: ni,
            nstm_offsets: no,
            score: Tensor::from_slice(&score).unsqueeze(1),
            result: Tensor::from_slice(&result).unsqueeze(1),
        }
    }

    fn model(seed: i64) -> Model {
        tch::manual_seed(seed);
        let arch = ModelArch::Lakefish(Arch::parse("32x2:screlu").unwrap());
        Model::new(&arch, 768, 30, tch::Device::Cpu)
    }

    /// bullet's `3_input_buckets` shape, 32 wide: ten mirrored king buckets with a
    /// factoriser, 8 output buckets by material.
    fn bucketed(seed: i64) -> Model {
        let spec = lakefish_schemas::netspec::NetSpec::parse(
            "version = 1\n[inputs]\nfamily = \"king_buckets\"\nmirror = true\nfactoriser = true\n\
             layout = [0,1,2,3, 4,4,5,5, 6,6,6,6, 7,7,7,7, 8,8,8,8, 8,8,8,8, 9,9,9,9, 9,9,9,9]\n\
             [transformer]\nwidth = 32\nactivation = \"screlu\"\n\
             [output_buckets]\nrule = \"material_count\"\ncount = 8\n\
             [quantization]\neval_scale = 400.0\n",
        )
        .unwrap();
        tch::manual_seed(seed);
        let arch = ModelArch::Spec(Box::new(spec));
        let m = Model::new(&arch, 7680, 30, tch::Device::Cpu);
        // A factoriser starts at zero; give it values so its part of the forward pass counts.
        tch::no_grad(|| {
            let mut f = m.param("ft.factoriser").shallow_clone();
            f.copy_(&(Tensor::rand_like(&f) * 0.2 - 0.1));
        });
        m
    }

    /// The same weights in fresh tensors (the global seed is shared with tests running
    /// beside this one, so a model is drawn once and copied).
    fn copy(m: &Model) -> Model {
        Model {
            arch: m.arch.clone(),
            inputs: m.inputs,
            params: m
                .params
                .iter()
                .map(|(n, t)| (n.clone(), t.detach().copy().set_requires_grad(true)))
                .collect(),
        }
    }

    fn same(a: &Model, b: &Model) -> bool {
        a.params
            .iter()
            .zip(&b.params)
            .all(|((_, x), (_, y))| x.equal(y))
    }

    /// After one step Adam's first moment is 0.1 × the gradient: the fused step's equals
    /// libtorch autograd's (dense update) for every parameter, and so does the loss; for
    /// lakefish's simple net and for bullet's king- and output-bucketed one with its factoriser.
    #[test]
    fn one_step_s_loss_and_gradients_equal_libtorch_s() {
        for (net, inputs) in [("32x2:screlu", 768), ("bucketed", 7680)] {
            for kind in [Loss::Power(2.0), Loss::Power(2.6), Loss::Elmo] {
                let fused_model = if inputs == 768 { model(3) } else { bucketed(3) };
                let torch_model = copy(&fused_model);
                let b = batch_of(300, 7, inputs);
                let mut fused_adam = Adam::sparse(&fused_model);
                assert!(applies(&fused_model, &fused_adam));
                let mut torch_adam = Adam::new(&torch_model);
                assert!(!applies(&torch_model, &torch_adam));
                // The two sigmoid scales apart (seed 004's input and output scales).
                let sigmoid = crate::model::Sigmoid {
                    target: 361.0,
                    prediction: 290.0,
                };
                let step = |m: &Model, a: &mut Adam| {
                    train_step(m, a, &b, kind, 0.6, sigmoid, 1e-3)
                        .unwrap()
                        .double_value(&[])
                };
                let (lf, lt) = (
                    step(&fused_model, &mut fused_adam),
                    step(&torch_model, &mut torch_adam),
                );
                assert!(
                    (lf / lt - 1.0).abs() < 1e-5,
                    "{net} {kind:?}: loss {lf} vs {lt}"
                );
                for (i, (name, _)) in fused_model.params.iter().enumerate() {
                    let (mf, mt) = (&fused_adam.m[i], &torch_adam.m[i]);
                    let scale = mt.abs().max().double_value(&[]);
                    let diff = (mf - mt).abs().max().double_value(&[]);
                    assert!(scale > 0.0, "{net} {kind:?}: {name} got no gradient");
                    assert!(
                        diff <= 1e-4 * scale,
                        "{net} {kind:?}: {name} gradient differs by {diff} (largest {scale})"
                    );
                }
            }
        }
    }

    /// The same steps on one thread and on three give the same bits (the parts are fixed).
    #[test]
    fn steps_do_not_depend_on_the_thread_count() {
        let start = model(4);
        let run = |threads: usize| {
            let m = copy(&start);
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(move || {
                let mut adam = Adam::sparse(&m);
                for s in 0..3 {
                    let b = batch(257, s);
                    let _ =
                        train_step(&m, &mut adam, &b, Loss::Power(2.0), 1.0, 361.0, 1e-2).unwrap();
                }
                m
            })
        };
        let (one, three) = (run(1), run(3));
        assert!(same(&one, &three));
        assert!(!same(&one, &start), "the steps changed nothing");
    }

    /// The AVX2 copy of the per-row pass and the baseline one give the same bits, on the
    /// simple net and on a bucketed one with a factoriser, for every loss.
    #[test]
    fn the_avx2_and_the_baseline_pass_give_the_same_bits() {
        for start in [model(6), bucketed(7)] {
            for kind in [Loss::Power(2.0), Loss::Power(2.5), Loss::Elmo] {
                let run = |baseline: bool| {
                    let m = copy(&start);
                    let mut adam = Adam::sparse(&m);
                    let mut losses = Vec::new();
                    for s in 0..3 {
                        let b = batch_of(300, s, m.inputs as u64);
                        let args = StepArgs {
                            kind,
                            lambda: 0.8,
                            scale: 361.0,
                            prediction_scale: 361.0,
                            lr: 1e-2,
                            baseline,
                        };
                        losses.push(step(&m, &mut adam, &b, args).unwrap().to_bits());
                    }
                    (m, losses)
                };
                let ((wide, wl), (plain, pl)) = (run(false), run(true));
                assert_eq!(wl, pl, "{kind:?}: losses");
                assert!(same(&wide, &plain), "{kind:?}: weights");
                assert!(!same(&wide, &start), "the steps changed nothing");
            }
        }
    }

    /// A feature outside the transformer, offsets that do not fit, or sides of different
    /// lengths: an error naming it, and no weight written.
    #[test]
    fn a_malformed_batch_is_an_error_before_any_write() {
        let m = model(5);
        let before = copy(&m);
        let mut adam = Adam::sparse(&m);
        type Damage = Box<dyn Fn(&mut BatchTensors)>;
        let cases: [(&str, Damage); 4] = [
            (
                "feature index 768 outside 0..768",
                Box::new(|b| b.nstm_indices = b.nstm_indices.fill(768)),
            ),
            (
                "feature index -1 outside",
                Box::new(|b| b.stm_indices = b.stm_indices.fill(-1)),
            ),
            (
                "does not fit",
                Box::new(|b| b.stm_offsets = b.stm_offsets.flip([0])),
            ),
            (
                "other-side rows",
                Box::new(|b| b.nstm_offsets = b.nstm_offsets.narrow(0, 0, 3)),
            ),
        ];
        for (want, damage) in cases {
            let mut b = batch(20, 1);
            damage(&mut b);
            let args = StepArgs {
                kind: Loss::Elmo,
                lambda: 1.0,
                scale: 361.0,
                prediction_scale: 361.0,
                lr: 1e-3,
                baseline: false,
            };
            let err = step(&m, &mut adam, &b, args).unwrap_err();
            assert!(err.contains(want), "{err}");
            assert!(same(&m, &before), "{want}: weights written");
        }
    }
}
