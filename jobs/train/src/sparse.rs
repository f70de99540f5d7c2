//! The feature transformer's backward pass and Adam step on the CPU, touching only the rows a
//! batch uses.
//!
//! A batch of 16,384 positions uses ~30 features per perspective, so libtorch's dense path
//! (`embedding_bag` backward into a zeroed `[inputs, l1]` gradient, then Adam over every
//! weight) spends most of a halfkp step (41,024 × 256 weights) on rows no position touched.
//! Here the forward pass takes the transformer's outputs as leaves of the autograd graph
//! ([`SparseBags`]); after `backward` their gradients are summed per feature (a counting sort
//! groups each feature's occurrences) and Adam updates just those rows, fused in one pass
//! over them.
//!
//! The update is "lazy" Adam, as `torch.optim.SparseAdam` computes it: the moments of rows a
//! batch did not touch are not decayed and those rows do not move. Dense Adam would still move
//! them by their momentum; docs/BENCHMARKS.md compares the validation loss of both. The
//! per-feature sums run in a fixed order (rows ascending, side to move first), so a step's
//! result does not depend on the thread count and resume stays bit-exact.

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
    let bag = |w: &Tensor| {
        Tensor::embedding_bag::<Tensor>(w, indices, offsets, false, 0, false, None, false).0
    };
    let Some(sparse) = sparse else {
        return bag(weight);
    };
    let out = tch::no_grad(|| bag(weight)).set_requires_grad(true);
    sparse.bags.push(SparseBag {
        param: param.to_string(),
        leaf: out.shallow_clone(),
        indices: indices.shallow_clone(),
        offsets: offsets.shallow_clone(),
    });
    out
}

/// Adam's constants for one step: `lr`, the betas, epsilon and the bias corrections.
#[derive(Debug, Clone, Copy)]
pub struct AdamStep {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    /// `1 − β1^t` and `1 − β2^t`.
    pub c1: f64,
    pub c2: f64,
}

/// Reusable buffers of the counting sort (kept between steps: no allocation per step).
#[derive(Default)]
pub struct Scratch {
    starts: Vec<u32>,
    entries: Vec<u32>,
}

/// Features a task of the parallel update owns (rows of the weight, `m` and `v`).
const FEATURES_PER_TASK: usize = 64;

/// Sums each touched feature's gradient over the bags that read `weight` and applies lazy
/// Adam to those rows of `weight`, `m` and `v` (all `[inputs, width]`, contiguous f32 on the
/// CPU). An index outside `0..inputs` is an error, not a write out of bounds.
pub fn sparse_adam(
    bags: &[&SparseBag],
    weight: &Tensor,
    m: &Tensor,
    v: &Tensor,
    step: AdamStep,
    scratch: &mut Scratch,
) -> Result<(), String> {
    let size = weight.size();
    let (inputs, width) = (size[0] as usize, size[1] as usize);
    for t in [weight, m, v] {
        if t.size() != size
            || t.kind() != Kind::Float
            || !t.is_contiguous()
            || t.device() != tch::Device::Cpu
        {
            return Err(format!(
                "sparse Adam wants contiguous f32 CPU tensors of {size:?}"
            ));
        }
    }
    // The leaves' gradients, side by side: entry `k` of the sort is row `k` of `grads`.
    let mut grads = Vec::with_capacity(bags.len());
    let mut bag_indices = Vec::with_capacity(bags.len());
    for bag in bags {
        let g = bag.leaf.grad();
        if !g.defined() {
            return Ok(()); // the loss did not depend on this step's transformer output
        }
        grads.push(g.contiguous());
        bag_indices.push((
            Vec::<i32>::try_from(&bag.indices).map_err(|e| e.to_string())?,
            Vec::<i32>::try_from(&bag.offsets).map_err(|e| e.to_string())?,
        ));
    }
    let grads = Tensor::cat(&grads, 0);
    if grads.size() != [grads.size()[0], width as i64] || grads.kind() != Kind::Float {
        return Err(format!(
            "gradient of shape {:?}, expected [_, {width}]",
            grads.size()
        ));
    }
    // SAFETY: `grads` is a contiguous f32 CPU tensor we own for the rest of this function.
    let g: &[f32] =
        unsafe { std::slice::from_raw_parts(grads.data_ptr() as *const f32, grads.numel()) };

    // Counting sort of every occurrence by feature: `entries[starts[f]..starts[f + 1]]` are
    // the gradient rows that read feature f, ascending.
    let Scratch { starts, entries } = scratch;
    starts.clear();
    starts.resize(inputs + 1, 0);
    let mut total = 0usize;
    for (indices, _) in &bag_indices {
        for &f in indices {
            let f = usize::try_from(f)
                .ok()
                .filter(|&f| f < inputs)
                .ok_or_else(|| format!("feature index {f} outside 0..{inputs}"))?;
            starts[f + 1] += 1;
        }
        total += indices.len();
    }
    for f in 0..inputs {
        starts[f + 1] += starts[f];
    }
    entries.clear();
    entries.resize(total, 0);
    let mut next: Vec<u32> = starts[..inputs].to_vec();
    let mut row_base = 0u32;
    for (indices, offsets) in &bag_indices {
        let rows = offsets.len();
        for r in 0..rows {
            let from = offsets[r] as usize;
            let to = offsets.get(r + 1).map_or(indices.len(), |&o| o as usize);
            let bag = indices
                .get(from..to)
                .ok_or_else(|| format!("offsets {from}..{to} outside {} indices", indices.len()))?;
            for &f in bag {
                let slot = &mut next[f as usize];
                entries[*slot as usize] = row_base + r as u32;
                *slot += 1;
            }
        }
        row_base += rows as u32;
    }

    // SAFETY: the three tensors are contiguous f32 CPU tensors of `inputs × width` (checked
    // above), distinct parameters, and nothing else touches them during the optimizer step.
    let (w, m, v) = unsafe {
        (
            std::slice::from_raw_parts_mut(weight.data_ptr() as *mut f32, inputs * width),
            std::slice::from_raw_parts_mut(m.data_ptr() as *mut f32, inputs * width),
            std::slice::from_raw_parts_mut(v.data_ptr() as *mut f32, inputs * width),
        )
    };
    // As torch.optim.Adam computes it: m ← lerp(m, g, 1−β1), v ← lerp(v, g², 1−β2),
    // w ← w − (lr/c1)·m / (√v/√c2 + ε).
    let (b1, b2) = ((1.0 - step.beta1) as f32, (1.0 - step.beta2) as f32);
    let sqrt_c2 = step.c2.sqrt() as f32;
    let eps = step.eps as f32;
    let step_size = (step.lr / step.c1) as f32;
    let chunk = FEATURES_PER_TASK * width;
    w.par_chunks_mut(chunk)
        .zip(m.par_chunks_mut(chunk))
        .zip(v.par_chunks_mut(chunk))
        .enumerate()
        .for_each(|(task, ((w, m), v))| {
            let mut acc = vec![0f32; width];
            let first = task * FEATURES_PER_TASK;
            for (k, ((w, m), v)) in w
                .chunks_exact_mut(width)
                .zip(m.chunks_exact_mut(width))
                .zip(v.chunks_exact_mut(width))
                .enumerate()
            {
                let f = first + k;
                let rows = &entries[starts[f] as usize..starts[f + 1] as usize];
                if rows.is_empty() {
                    continue;
                }
                acc.fill(0.0);
                for &r in rows {
                    let src = &g[r as usize * width..][..width];
                    for (a, s) in acc.iter_mut().zip(src) {
                        *a += s;
                    }
                }
                for (((w, m), v), &g) in w.iter_mut().zip(m.iter_mut()).zip(v.iter_mut()).zip(&acc)
                {
                    *m += b1 * (g - *m);
                    *v += b2 * (g * g - *v);
                    *w -= step_size * *m / (v.sqrt() / sqrt_c2 + eps);
                }
            }
        });
    Ok(())
}
