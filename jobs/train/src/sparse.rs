//! The feature transformer's backward pass and Adam step on the CPU, touching only the rows a
//! batch uses.
//!
//! A batch of 16,384 positions uses ~30 features per perspective, so libtorch's dense path
//! (`embedding_bag` backward into a zeroed `[inputs, l1]` gradient, then Adam over every
//! weight) spends most of a halfkp step (41,024 × 256 weights) on rows no position touched.
//! Here the forward pass takes the transformer's outputs as leaves of the autograd graph
//! ([`SparseBags`]); after `backward` their gradients are summed per feature and Adam updates
//! just those rows, fused in one pass over them. A small weight (all768) takes the sums by
//! scattering each gradient row into a few cache-resident per-part sums, as bullet's CPU
//! backend does; a wide one (halfkp) by a counting sort that groups each feature's
//! occurrences, then gathering them.
//!
//! The update is "lazy" Adam, as `torch.optim.SparseAdam` computes it: the moments of rows a
//! batch did not touch are not decayed and those rows do not move. Dense Adam would still move
//! them by their momentum; docs/BENCHMARKS.md compares the validation loss of both. The
//! per-feature sums run in a fixed order (rows ascending, side to move first; the scatter's
//! parts in order), so a step's result does not depend on the thread count and resume stays
//! bit-exact.

use rayon::prelude::*;
use tch::{Kind, Tensor};

/// The transformer outputs of one step whose gradient [`sparse_adam`] takes: for each bag,
/// the parameter it read, the leaf tensor (`[rows, width]`) and the batch's indices and
/// offsets (int32, as [`crate::model::BatchTensors`] holds them).
#[derive(Default)]
pub struct SparseBags {
    pub bags: Vec<SparseBag>,
}

pub struct SparseBag {
    pub param: String,
    pub leaf: Tensor,
    pub indices: Tensor,
    pub offsets: Tensor,
    /// When set, the leaf is `clamp(bag + bias, 0, 1)` of this bias parameter: its gradient
    /// passes only where the leaf is strictly inside (0, 1), and sums into the bias's too.
    /// (libtorch's clamp also passes it at exactly 0 and 1, which a sum of floats all but
    /// never hits.)
    pub bias: Option<String>,
}

impl SparseBags {
    /// `clamp(embedding_bag(weight) + bias, 0, 1)` as one leaf, recorded with both parameters
    /// for the sparse update, which applies the clamp's and the bias's backward itself.
    pub fn clamped_bag(
        &mut self,
        (param, weight): (&str, &Tensor),
        (bias_name, bias): (&str, &Tensor),
        indices: &Tensor,
        offsets: &Tensor,
    ) -> Tensor {
        let out = tch::no_grad(|| {
            let mut out = sum_bag(weight, indices, offsets);
            let _ = out.g_add_(bias).clamp_(0.0, 1.0);
            out
        });
        self.record(param, out, indices, offsets, Some(bias_name))
    }

    /// `out` as a fresh leaf that requires a gradient, recorded for the sparse update.
    fn record(
        &mut self,
        param: &str,
        out: Tensor,
        indices: &Tensor,
        offsets: &Tensor,
        bias: Option<&str>,
    ) -> Tensor {
        let out = out.set_requires_grad(true);
        self.bags.push(SparseBag {
            param: param.to_string(),
            leaf: out.shallow_clone(),
            indices: indices.shallow_clone(),
            offsets: offsets.shallow_clone(),
            bias: bias.map(str::to_string),
        });
        out
    }
}

/// `embedding_bag` in sum mode: each row's features' weight rows added up.
fn sum_bag(weight: &Tensor, indices: &Tensor, offsets: &Tensor) -> Tensor {
    Tensor::embedding_bag::<Tensor>(weight, indices, offsets, false, 0, false, None, false).0
}

/// `embedding_bag` (sum) of `weight` (the parameter `param`). With `sparse`, without a
/// gradient path to the weight: a fresh leaf that requires a gradient, recorded so the step
/// can take that gradient itself. Without, libtorch's own (dense) backward.
pub fn bag(
    sparse: Option<&mut SparseBags>,
    param: &str,
    weight: &Tensor,
    indices: &Tensor,
    offsets: &Tensor,
) -> Tensor {
    match sparse {
        None => sum_bag(weight, indices, offsets),
        Some(sparse) => {
            let out = tch::no_grad(|| sum_bag(weight, indices, offsets));
            sparse.record(param, out, indices, offsets, None)
        }
    }
}

/// Adam's constants for one step: `lr`, the betas, epsilon and the bias corrections.
#[derive(Debug, Clone, Copy)]
pub struct AdamStep {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    /// `1 − β1^t` and `1 − β2^t` (1 and 1 without bias correction).
    pub c1: f64,
    pub c2: f64,
    /// AdamW's decoupled weight decay: each updated weight is first multiplied by
    /// `1 − lr · weight_decay`.
    pub weight_decay: f64,
    /// Updated weights are clamped to ±this (infinite: not at all).
    pub clip: f64,
}

/// Reusable buffers of a step (kept between steps: no allocation per step).
#[derive(Default)]
pub struct Scratch {
    pub(crate) starts: Vec<u32>,
    entries: Vec<u32>,
    grads: Vec<f32>,
    /// The scatter's per-part gradient sums (small weights only).
    pub(crate) parts: Vec<Vec<f32>>,
}

/// Weights (`inputs × width`) up to which the gradient is scattered into per-part sums
/// instead of gathered per feature: 4 MB of f32 per part, so a part's sum stays in cache.
const SCATTER_MAX_WEIGHTS: usize = 1 << 20;
/// Rows narrower than this (Stockfish's 8-wide PSQT) keep the gather: little to gain, and
/// their sums stay in the order the preset goldens were made with.
const SCATTER_MIN_WIDTH: usize = 32;
/// The fixed number of row runs the scatter sums separately (threads take whole runs).
pub(crate) const PARTS: usize = 8;

/// Features a task of the parallel update owns (rows of the weight, `m` and `v`).
const FEATURES_PER_TASK: usize = 64;

/// A parameter with its Adam moments, all the same shape, contiguous f32 on the CPU.
pub struct WithMoments<'a> {
    pub param: &'a Tensor,
    pub m: &'a Tensor,
    pub v: &'a Tensor,
}

impl<'a> WithMoments<'a> {
    /// The three as mutable slices, checked to be `len` contiguous f32 on the CPU. Takes
    /// `self`, so each parameter's slices are made once per update.
    pub(crate) fn slices(self, len: usize) -> Result<[&'a mut [f32]; 3], String> {
        let size = self.param.size();
        for t in [self.param, self.m, self.v] {
            let numel: i64 = t.size().iter().product();
            if t.size() != size
                || numel as usize != len
                || t.kind() != Kind::Float
                || !t.is_contiguous()
                || t.device() != tch::Device::Cpu
            {
                return Err(format!(
                    "sparse Adam wants contiguous f32 CPU tensors of {len} values, got {:?} {:?}",
                    t.size(),
                    t.kind()
                ));
            }
        }
        // SAFETY: three distinct tensors (a parameter and its two moments), each a contiguous
        // f32 CPU buffer of `len` values (checked above), touched by nothing else during the
        // optimizer step.
        Ok([self.param, self.m, self.v]
            .map(|t| unsafe { std::slice::from_raw_parts_mut(t.data_ptr() as *mut f32, len) }))
    }
}

/// Adam on one row, as torch.optim.Adam computes it: m ← lerp(m, g, 1−β1),
/// v ← lerp(v, g², 1−β2), w ← w − (lr/c1)·m / (√v/√c2 + ε).
#[inline(always)]
pub(crate) fn adam_row(w: &mut [f32], m: &mut [f32], v: &mut [f32], g: &[f32], k: &RowConstants) {
    for (((w, m), v), &g) in w.iter_mut().zip(m.iter_mut()).zip(v.iter_mut()).zip(g) {
        *m += k.b1 * (g - *m);
        *v += k.b2 * (g * g - *v);
        let stepped = *w * k.decay - k.step_size * *m / (v.sqrt() / k.sqrt_c2 + k.eps);
        *w = stepped.clamp(-k.clip, k.clip);
    }
}

/// Adam on the rows of every feature the batch touched (`starts[f] < starts[f + 1]`), in
/// parallel over runs of features; `total(f, acc)` writes feature f's gradient sum to `acc`.
pub(crate) fn adam_touched(
    [w, m, v]: [&mut [f32]; 3],
    width: usize,
    starts: &[u32],
    k: &RowConstants,
    total: impl Fn(usize, &mut [f32]) + Sync,
) {
    let chunk = FEATURES_PER_TASK * width;
    w.par_chunks_mut(chunk)
        .zip(m.par_chunks_mut(chunk))
        .zip(v.par_chunks_mut(chunk))
        .enumerate()
        .for_each(|(task, ((w, m), v))| {
            let mut acc = vec![0f32; width];
            let first = task * FEATURES_PER_TASK;
            for (i, ((w, m), v)) in w
                .chunks_exact_mut(width)
                .zip(m.chunks_exact_mut(width))
                .zip(v.chunks_exact_mut(width))
                .enumerate()
            {
                let f = first + i;
                if starts[f] == starts[f + 1] {
                    continue;
                }
                total(f, &mut acc);
                adam_row(w, m, v, &acc, k);
            }
        });
}

pub(crate) struct RowConstants {
    b1: f32,
    b2: f32,
    sqrt_c2: f32,
    eps: f32,
    step_size: f32,
    /// `1 − lr · weight_decay`.
    decay: f32,
    clip: f32,
}

impl RowConstants {
    pub(crate) fn of(step: AdamStep) -> RowConstants {
        RowConstants {
            b1: (1.0 - step.beta1) as f32,
            b2: (1.0 - step.beta2) as f32,
            sqrt_c2: step.c2.sqrt() as f32,
            eps: step.eps as f32,
            step_size: (step.lr / step.c1) as f32,
            decay: (1.0 - step.lr * step.weight_decay) as f32,
            clip: step.clip as f32,
        }
    }
}

/// One bag's rows, checked before anything is written: offsets start at 0 and ascend within
/// the indices, every index lies in `0..inputs`. Row `r` is `indices[offsets[r]..offsets[r +
/// 1]]`, the last one to the end.
pub(crate) struct Rows<'a> {
    indices: &'a [i32],
    offsets: &'a [i32],
}

impl<'a> Rows<'a> {
    /// The bag, checked, each index counted into `counts[f]`.
    pub(crate) fn new(
        indices: &'a [i32],
        offsets: &'a [i32],
        inputs: usize,
        counts: &mut [u32],
    ) -> Result<Rows<'a>, String> {
        let mut last = 0i32;
        for (r, &o) in offsets.iter().enumerate() {
            if (r == 0 && o != 0) || o < last || o as usize > indices.len() {
                return Err(format!(
                    "offset {o} of row {r} does not fit {} indices",
                    indices.len()
                ));
            }
            last = o;
        }
        if offsets.is_empty() && !indices.is_empty() {
            return Err(format!("{} indices but no rows", indices.len()));
        }
        for &f in indices {
            let f = usize::try_from(f)
                .ok()
                .filter(|&f| f < inputs)
                .ok_or_else(|| format!("feature index {f} outside 0..{inputs}"))?;
            counts[f] += 1;
        }
        Ok(Rows { indices, offsets })
    }

    pub(crate) fn len(&self) -> usize {
        self.offsets.len()
    }

    pub(crate) fn row(&self, r: usize) -> &'a [i32] {
        let from = self.offsets[r] as usize;
        let to = self
            .offsets
            .get(r + 1)
            .map_or(self.indices.len(), |&o| o as usize);
        &self.indices[from..to]
    }
}

/// Feature `f`'s row of several per-part sums (`[features, acc.len()]` each), added in part
/// order into `acc`: the order is fixed, so a step does not depend on the thread count.
pub(crate) fn sum_parts<'p>(acc: &mut [f32], f: usize, parts: impl IntoIterator<Item = &'p [f32]>) {
    let w = acc.len();
    acc.fill(0.0);
    for part in parts {
        for (a, s) in acc.iter_mut().zip(&part[f * w..][..w]) {
            *a += s;
        }
    }
}

/// Sums each touched feature's gradient over the bags that read `weight` (`[inputs, width]`)
/// and applies lazy Adam to those rows of the weight and its moments; with `bias` (the bags
/// are clamped, [`SparseBags::clamped_bag`]) the masked gradient's column sums update the
/// bias with plain Adam. An index outside `0..inputs` or offsets that do not fit the indices
/// are an error, before anything is written.
pub fn sparse_adam(
    bags: &[&SparseBag],
    weight: WithMoments,
    bias: Option<WithMoments>,
    step: AdamStep,
    scratch: &mut Scratch,
) -> Result<(), String> {
    let size = weight.param.size();
    if size.len() != 2 {
        return Err(format!(
            "a transformer weight is [inputs, width], not {size:?}"
        ));
    }
    let (inputs, width) = (size[0] as usize, size[1] as usize);
    let Scratch {
        starts,
        entries,
        grads,
        parts,
    } = scratch;

    // Every bag's indices and offsets, checked; the leaves' gradients side by side in
    // `grads` (entry `k` of the sort is row `k` there), masked where a clamp cut them.
    let mut bag_indices = Vec::with_capacity(bags.len());
    let mut rows_total = 0usize;
    for bag in bags {
        let indices = Vec::<i32>::try_from(&bag.indices).map_err(|e| e.to_string())?;
        let offsets = Vec::<i32>::try_from(&bag.offsets).map_err(|e| e.to_string())?;
        rows_total += offsets.len();
        bag_indices.push((indices, offsets));
    }
    grads.clear();
    grads.resize(rows_total * width, 0.0);
    let mut at = 0usize;
    for (bag, (_, offsets)) in bags.iter().zip(&bag_indices) {
        let g = bag.leaf.grad();
        if !g.defined() {
            return Ok(()); // the loss did not depend on this step's transformer output
        }
        let want = [offsets.len() as i64, width as i64];
        if g.size() != want || g.kind() != Kind::Float || bag.leaf.size() != want {
            return Err(format!(
                "gradient of shape {:?}, expected {want:?}",
                g.size()
            ));
        }
        // The leaf's gradient is a column slice of the concatenated perspectives' gradient:
        // read its rows where they are instead of copying it contiguous first.
        let g = if g.stride()[1] == 1 && g.stride()[0] >= width as i64 {
            g
        } else {
            g.contiguous()
        };
        let rows = offsets.len();
        if rows == 0 {
            continue; // an empty tensor's data pointer may be null: nothing to read
        }
        let y = bag.leaf.contiguous();
        let row_stride = g.stride()[0] as usize;
        let n = rows * width;
        let span = (rows - 1) * row_stride + width;
        // SAFETY: `g` is an f32 CPU tensor whose `rows` rows of `width` values start
        // `row_stride` apart (its strides, checked above), `y` a contiguous f32 CPU tensor of
        // `n` values; both alive until the end of this block.
        let (g, y) = unsafe {
            (
                std::slice::from_raw_parts(g.data_ptr() as *const f32, span),
                std::slice::from_raw_parts(y.data_ptr() as *const f32, n),
            )
        };
        let out = &mut grads[at..at + n];
        for r in 0..rows {
            let (out, g, y) = (
                &mut out[r * width..][..width],
                &g[r * row_stride..][..width],
                &y[r * width..][..width],
            );
            if bag.bias.is_some() {
                for ((o, &g), &y) in out.iter_mut().zip(g).zip(y) {
                    *o = if y > 0.0 && y < 1.0 { g } else { 0.0 };
                }
            } else {
                out.copy_from_slice(g);
            }
        }
        at += n;
    }
    let g: &[f32] = grads;

    // Each row's features, checked: `rows[k]` is gradient row k's slice of its bag's indices;
    // how often each feature occurs: `starts[f]..starts[f + 1]`.
    starts.clear();
    starts.resize(inputs + 1, 0);
    let mut rows: Vec<&[i32]> = Vec::with_capacity(rows_total);
    let mut total = 0usize;
    for (indices, offsets) in &bag_indices {
        let bag = Rows::new(indices, offsets, inputs, &mut starts[1..])?;
        rows.extend((0..bag.len()).map(|r| bag.row(r)));
        total += indices.len();
    }
    for f in 0..inputs {
        starts[f + 1] += starts[f];
    }
    let bias = match bias {
        Some(b) => Some(b.slices(width)?),
        None => None,
    };
    let [w, m, v] = weight.slices(inputs * width)?;

    let k = RowConstants::of(step);
    if inputs * width <= SCATTER_MAX_WEIGHTS && width >= SCATTER_MIN_WIDTH {
        // A small weight (all768): each of PARTS fixed runs of rows adds its gradient rows
        // into its own cache-resident `[inputs, width]` sum, reading the gradient in order;
        // a feature's total is then the parts' sums added in part order. The order depends
        // on the batch alone, not on the threads.
        parts.resize_with(PARTS, Vec::new);
        let per_part = rows.len().div_ceil(PARTS).max(1);
        parts.par_iter_mut().enumerate().for_each(|(p, sum)| {
            sum.clear();
            sum.resize(inputs * width, 0.0);
            let first = (p * per_part).min(rows.len());
            let last = ((p + 1) * per_part).min(rows.len());
            for (r, row) in rows[first..last].iter().enumerate() {
                let src = &g[(first + r) * width..][..width];
                for &f in *row {
                    let dst = &mut sum[f as usize * width..][..width];
                    for (d, s) in dst.iter_mut().zip(src) {
                        *d += s;
                    }
                }
            }
        });
        let parts: &[Vec<f32>] = parts;
        adam_touched([w, m, v], width, starts, &k, |f, acc| {
            sum_parts(acc, f, parts.iter().map(Vec::as_slice))
        });
    } else {
        // A wide weight (halfkp, halfka): a counting sort of every occurrence by feature,
        // `entries[starts[f]..starts[f + 1]]` the gradient rows that read feature f,
        // ascending; each touched feature gathers its rows (sums over PARTS buffers of
        // every input would not fit any cache).
        entries.clear();
        entries.resize(total, 0);
        let mut next: Vec<u32> = starts[..inputs].to_vec();
        for (r, row) in rows.iter().enumerate() {
            for &f in *row {
                let slot = &mut next[f as usize];
                entries[*slot as usize] = r as u32;
                *slot += 1;
            }
        }
        let entries: &[u32] = entries;
        adam_touched([w, m, v], width, starts, &k, |f, acc| {
            acc.fill(0.0);
            for &r in &entries[starts[f] as usize..starts[f + 1] as usize] {
                for (a, s) in acc.iter_mut().zip(&g[r as usize * width..][..width]) {
                    *a += s;
                }
            }
        });
    }
    if let Some([bw, bm, bv]) = bias {
        // Column sums of the masked gradient, in row order.
        let mut acc = vec![0f32; width];
        for row in g.chunks_exact(width) {
            for (a, s) in acc.iter_mut().zip(row) {
                *a += s;
            }
        }
        adam_row(bw, bm, bv, &acc, &k);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(t: i32) -> AdamStep {
        let (beta1, beta2) = (0.9, 0.999);
        AdamStep {
            lr: 1e-2,
            beta1,
            beta2,
            eps: 1e-8,
            c1: 1.0 - f64::powi(beta1, t),
            c2: 1.0 - f64::powi(beta2, t),
            weight_decay: 0.0,
            clip: f64::INFINITY,
        }
    }

    /// Three bags over a 6-row weight: rows 0..=3 used, 4 and 5 never.
    fn batch() -> (Tensor, Tensor, Tensor) {
        let indices = Tensor::from_slice(&[0i32, 2, 3, 1, 2, 0, 3]);
        let offsets = Tensor::from_slice(&[0i32, 3, 5]);
        let coeffs =
            Tensor::from_slice(&[0.5f32, -1.0, 2.0, 0.25, 1.5, -0.75, 3.0, 1.0, -2.0]).view([3, 3]);
        (indices, offsets, coeffs)
    }

    #[test]
    fn touched_rows_get_dense_adam_and_untouched_rows_stay() {
        // The scatter (a small weight), and the per-feature gather (a weight too large for
        // it, or rows too narrow): the same update.
        touched_rows_get(step(1), 6, 32);
        touched_rows_get(step(1), (SCATTER_MAX_WEIGHTS / 32 + 1) as i64, 32);
        touched_rows_get(step(1), 6, 3);
    }

    /// bullet's AdamW: no bias correction, decoupled decay, every weight clipped (±0.5 here,
    /// so the clip binds on these normal weights).
    #[test]
    fn touched_rows_get_adamw_with_clipping() {
        let s = AdamStep {
            c1: 1.0,
            c2: 1.0,
            weight_decay: 0.1,
            clip: 0.5,
            ..step(1)
        };
        touched_rows_get(s, 6, 32);
        touched_rows_get(s, (SCATTER_MAX_WEIGHTS / 32 + 1) as i64, 32);
        touched_rows_get(s, 6, 3);
    }

    /// One step on [`batch`] over a `[inputs, width]` weight against Adam's formula.
    fn touched_rows_get(s: AdamStep, inputs: i64, width: i64) {
        tch::manual_seed(3);
        let w0 = Tensor::randn([inputs, width], (Kind::Float, tch::Device::Cpu));
        let (indices, offsets, coeffs) = batch();
        let coeffs = if width == 3 {
            coeffs
        } else {
            Tensor::randn([3, width], (Kind::Float, tch::Device::Cpu))
        };

        // Dense: libtorch's backward, then Adam's first step over every weight.
        let wd = w0.copy().set_requires_grad(true);
        let out =
            Tensor::embedding_bag::<Tensor>(&wd, &indices, &offsets, false, 0, false, None, false)
                .0;
        (out * &coeffs).sum(Kind::Float).backward();
        let g = wd.grad();
        let m = &g * (1.0 - s.beta1);
        let v = &g * &g * (1.0 - s.beta2);
        let want = (w0.copy() * (1.0 - s.lr * s.weight_decay)
            - (m.copy() * (s.lr / s.c1)) / (v.sqrt() / s.c2.sqrt() + s.eps))
            .clamp(-s.clip, s.clip);

        // Sparse: the same batch through a recorded bag.
        let ws = w0.copy();
        let mut bags = SparseBags::default();
        let out = bag(Some(&mut bags), "ft.weight", &ws, &indices, &offsets);
        (out * &coeffs).sum(Kind::Float).backward();
        let (ms, vs) = (ws.zeros_like(), ws.zeros_like());
        let refs: Vec<&SparseBag> = bags.bags.iter().collect();
        let weight = WithMoments {
            param: &ws,
            m: &ms,
            v: &vs,
        };
        sparse_adam(&refs, weight, None, s, &mut Scratch::default()).unwrap();

        let used = want.narrow(0, 0, 4);
        assert!(
            ws.narrow(0, 0, 4).allclose(&used, 1e-6, 1e-6, false),
            "{ws} vs {want}"
        );
        assert!(
            ms.narrow(0, 0, 4)
                .allclose(&m.narrow(0, 0, 4), 1e-6, 1e-7, false)
        );
        assert!(
            vs.narrow(0, 0, 4)
                .allclose(&v.narrow(0, 0, 4), 1e-6, 1e-9, false)
        );
        // Rows 4 and 5 were in no bag: not moved, moments untouched.
        assert!(
            ws.narrow(0, 4, inputs - 4)
                .equal(&w0.narrow(0, 4, inputs - 4))
        );
        assert_eq!(
            ms.narrow(0, 4, inputs - 4)
                .abs()
                .sum(Kind::Float)
                .double_value(&[]),
            0.0
        );
        // And the step really moved the used rows.
        assert!(!ws.narrow(0, 0, 4).equal(&w0.narrow(0, 0, 4)));
    }

    #[test]
    fn indices_outside_the_weight_are_an_error_not_a_write() {
        let w = Tensor::zeros([4, 2], (Kind::Float, tch::Device::Cpu));
        let (m, v) = (w.zeros_like(), w.zeros_like());
        let leaf = Tensor::ones([1, 2], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
        (&leaf * 2.0).sum(Kind::Float).backward();
        for bad in [4i32, -1, i32::MAX] {
            let b = SparseBag {
                param: "ft.weight".into(),
                leaf: leaf.shallow_clone(),
                indices: Tensor::from_slice(&[0i32, bad]),
                offsets: Tensor::from_slice(&[0i32]),
                bias: None,
            };
            let weight = WithMoments {
                param: &w,
                m: &m,
                v: &v,
            };
            let e = sparse_adam(&[&b], weight, None, step(1), &mut Scratch::default()).unwrap_err();
            assert!(
                e.contains(&format!("feature index {bad} outside 0..4")),
                "{e}"
            );
            assert_eq!(w.abs().sum(Kind::Float).double_value(&[]), 0.0);
        }
        // Offsets that skip indices, run past them or go backwards, or indices without
        // rows, are refused too.
        for (indices, offsets) in [
            (&[0i32][..], &[3i32][..]),
            (&[0, 1], &[]),
            (&[0, 1], &[1]),
            (&[0, 1, 2], &[0, 2, 1]),
        ] {
            let leaf = Tensor::ones([offsets.len() as i64, 2], (Kind::Float, tch::Device::Cpu))
                .set_requires_grad(true);
            leaf.sum(Kind::Float).backward();
            let b = SparseBag {
                param: "ft.weight".into(),
                leaf,
                indices: Tensor::from_slice(indices),
                offsets: Tensor::from_slice(offsets),
                bias: None,
            };
            let weight = WithMoments {
                param: &w,
                m: &m,
                v: &v,
            };
            let got = sparse_adam(&[&b], weight, None, step(1), &mut Scratch::default());
            assert!(got.is_err(), "{indices:?} {offsets:?}");
        }
        assert_eq!(w.abs().sum(Kind::Float).double_value(&[]), 0.0);
    }

    /// The clamped bag with its bias: the same step as libtorch's `clamp(bag + bias)` with
    /// dense Adam, for the touched rows and the bias.
    #[test]
    fn a_clamped_bag_with_bias_steps_as_libtorch_s_clamp_and_dense_adam() {
        tch::manual_seed(5);
        let w0 = Tensor::rand([6, 3], (Kind::Float, tch::Device::Cpu)) * 0.6 - 0.2;
        let b0 = Tensor::from_slice(&[0.1f32, -0.3, 0.4]);
        let (indices, offsets, coeffs) = batch();
        let s = step(1);

        let (wd, bd) = (
            w0.copy().set_requires_grad(true),
            b0.copy().set_requires_grad(true),
        );
        let out = (Tensor::embedding_bag::<Tensor>(
            &wd, &indices, &offsets, false, 0, false, None, false,
        )
        .0 + &bd)
            .clamp(0.0, 1.0);
        // Some entries are clamped, some not: the mask matters.
        let inside = out
            .gt(0.0)
            .logical_and(&out.lt(1.0))
            .sum(Kind::Int64)
            .int64_value(&[]);
        assert!(inside > 0 && inside < 9, "{out}");
        (out * &coeffs).sum(Kind::Float).backward();
        let dense = |p: &Tensor, g: &Tensor| {
            let m = g * (1.0 - s.beta1);
            let v = g * g * (1.0 - s.beta2);
            p - (m * (s.lr / s.c1)) / (v.sqrt() / s.c2.sqrt() + s.eps)
        };
        let (want_w, want_b) = (dense(&w0, &wd.grad()), dense(&b0, &bd.grad()));

        let (ws, bs) = (w0.copy(), b0.copy());
        let mut bags = SparseBags::default();
        let out = bags.clamped_bag(("ft.weight", &ws), ("ft.bias", &bs), &indices, &offsets);
        (out * &coeffs).sum(Kind::Float).backward();
        let (wm, wv, bm, bv) = (
            ws.zeros_like(),
            ws.zeros_like(),
            bs.zeros_like(),
            bs.zeros_like(),
        );
        let refs: Vec<&SparseBag> = bags.bags.iter().collect();
        sparse_adam(
            &refs,
            WithMoments {
                param: &ws,
                m: &wm,
                v: &wv,
            },
            Some(WithMoments {
                param: &bs,
                m: &bm,
                v: &bv,
            }),
            s,
            &mut Scratch::default(),
        )
        .unwrap();
        // Rows with a zero gradient (every bag reading them clamped) move in neither: dense
        // Adam's first step of a zero gradient is zero too.
        assert!(
            ws.narrow(0, 0, 4)
                .allclose(&want_w.narrow(0, 0, 4), 1e-6, 1e-6, false),
            "{ws} vs {want_w}"
        );
        assert!(bs.allclose(&want_b, 1e-6, 1e-6, false), "{bs} vs {want_b}");
        assert!(!bs.equal(&b0));
    }
}
