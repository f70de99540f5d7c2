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
        let indices = Vec::<i32>::try_from(&bag.indices).map_err(|e| e.to_string())?;
        let offsets = Vec::<i32>::try_from(&bag.offsets).map_err(|e| e.to_string())?;
        // Every index belongs to exactly one row, and each row has a gradient row.
        if offsets.first().is_some_and(|&o| o != 0) || g.size()[0] != offsets.len() as i64 {
            return Err(format!(
                "{} offsets starting at {:?} for a gradient of {:?}",
                offsets.len(),
                offsets.first(),
                g.size()
            ));
        }
        grads.push(g.contiguous());
        bag_indices.push((indices, offsets));
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
        tch::manual_seed(3);
        let w0 = Tensor::randn([6, 3], (Kind::Float, tch::Device::Cpu));
        let (indices, offsets, coeffs) = batch();

        // Dense: libtorch's backward, then Adam's first step over every weight.
        let wd = w0.copy().set_requires_grad(true);
        let out =
            Tensor::embedding_bag::<Tensor>(&wd, &indices, &offsets, false, 0, false, None, false)
                .0;
        (out * &coeffs).sum(Kind::Float).backward();
        let g = wd.grad();
        let s = step(1);
        let m = &g * (1.0 - s.beta1);
        let v = &g * &g * (1.0 - s.beta2);
        let want = w0.copy() - (m.copy() * (s.lr / s.c1)) / (v.sqrt() / s.c2.sqrt() + s.eps);

        // Sparse: the same batch through a recorded bag.
        let ws = w0.copy();
        let mut bags = SparseBags::default();
        let out = bag(Some(&mut bags), "ft.weight", &ws, &indices, &offsets);
        (out * &coeffs).sum(Kind::Float).backward();
        let (ms, vs) = (ws.zeros_like(), ws.zeros_like());
        let refs: Vec<&SparseBag> = bags.bags.iter().collect();
        sparse_adam(&refs, &ws, &ms, &vs, s, &mut Scratch::default()).unwrap();

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
        assert!(ws.narrow(0, 4, 2).equal(&w0.narrow(0, 4, 2)));
        assert_eq!(
            ms.narrow(0, 4, 2).abs().sum(Kind::Float).double_value(&[]),
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
            };
            let e = sparse_adam(&[&b], &w, &m, &v, step(1), &mut Scratch::default()).unwrap_err();
            assert!(
                e.contains(&format!("feature index {bad} outside 0..4")),
                "{e}"
            );
            assert_eq!(w.abs().sum(Kind::Float).double_value(&[]), 0.0);
        }
        // Offsets that skip indices, run past them or go backwards are refused too.
        for (indices, offsets) in [
            (&[0i32][..], &[3i32][..]),
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
            };
            let got = sparse_adam(&[&b], &w, &m, &v, step(1), &mut Scratch::default());
            assert!(got.is_err(), "{indices:?} {offsets:?}");
        }
        assert_eq!(w.abs().sum(Kind::Float).double_value(&[]), 0.0);
    }
}
