//! The NNUE model in libtorch: a feature transformer shared by both perspectives (side to
//! move first in the concatenation), then dense layers with clipped ReLU, one output.
//!
//! Parameters are plain tensors (not a `VarStore`) so that checkpoints hold exactly what
//! exact resume needs: weights, Adam moments and the step, by name.

use crate::TrainError;
use crate::loader::Batch;
use tch::{Device, Kind, Tensor};

/// Network shape from strings like `256x2-32-32`: feature transformer width 256 (the `x2` is
/// the two perspectives), then hidden layers of 32 and 32, then one output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arch {
    pub l1: i64,
    pub hidden: Vec<i64>,
}

impl Arch {
    pub fn parse(s: &str) -> Result<Arch, TrainError> {
        let bad = |why: &str| TrainError::Arch {
            arch: s.to_string(),
            reason: why.to_string(),
        };
        let mut parts = s.split('-');
        let first = parts.next().unwrap_or("");
        let l1 = first
            .strip_suffix("x2")
            .ok_or_else(|| bad("the first layer must be written WIDTHx2, like 256x2"))?;
        let l1: i64 = l1.parse().map_err(|_| bad("the width is not a number"))?;
        let hidden = parts
            .map(|p| {
                p.parse::<i64>()
                    .map_err(|_| bad("a hidden layer size is not a number"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if !(1..=4096).contains(&l1) || hidden.iter().any(|h| !(1..=1024).contains(h)) {
            return Err(bad(
                "layer sizes must be 1..=4096 (first) and 1..=1024 (hidden)",
            ));
        }
        Ok(Arch { l1, hidden })
    }

    /// Input and output widths of each dense layer, the output layer last.
    pub fn dense(&self) -> Vec<(i64, i64)> {
        let mut widths = vec![2 * self.l1];
        widths.extend(&self.hidden);
        widths.push(1);
        widths.windows(2).map(|w| (w[0], w[1])).collect()
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x2", self.l1)?;
        for h in &self.hidden {
            write!(f, "-{h}")?;
        }
        Ok(())
    }
}

/// Largest magnitude a dense weight may take: the quantizer stores them as int8 × 64.
pub const MAX_DENSE_WEIGHT: f64 = 127.0 / 64.0;
/// The network's output times this is a score in internal units (nnue-pytorch's nnue2score).
pub const OUTPUT_SCALE: f64 = 600.0;

pub struct Model {
    pub arch: Arch,
    pub inputs: i64,
    /// `(name, tensor)`; `ft.weight` is `[inputs, l1]`, dense weights are `[out, in]`.
    pub params: Vec<(String, Tensor)>,
}

impl Model {
    /// Fresh weights, uniform in ±1/sqrt(fan-in) like torch's `Linear`; seeded by the caller.
    pub fn new(arch: &Arch, inputs: i64, max_active: i64, device: Device) -> Model {
        let uniform = |shape: &[i64], bound: f64| {
            (Tensor::rand(shape, (Kind::Float, device)) * 2.0 - 1.0) * bound
        };
        // The transformer sums ~max_active rows: scale so its outputs start in the CReLU range.
        let ft_bound = 1.0 / (max_active as f64).sqrt();
        let mut params = vec![
            (
                "ft.weight".to_string(),
                uniform(&[inputs, arch.l1], ft_bound),
            ),
            (
                "ft.bias".to_string(),
                Tensor::zeros([arch.l1], (Kind::Float, device)),
            ),
        ];
        for (i, (fan_in, out)) in arch.dense().into_iter().enumerate() {
            let b = 1.0 / (fan_in as f64).sqrt();
            params.push((format!("l{i}.weight"), uniform(&[out, fan_in], b)));
            params.push((format!("l{i}.bias"), uniform(&[out], b)));
        }
        let params = params
            .into_iter()
            .map(|(n, t)| (n, t.set_requires_grad(true)))
            .collect();
        Model {
            arch: arch.clone(),
            inputs,
            params,
        }
    }

    pub fn param(&self, name: &str) -> &Tensor {
        &self
            .params
            .iter()
            .find(|(n, _)| n == name)
            .expect("known parameter")
            .1
    }

    /// Network output (`[batch, 1]`); times [`OUTPUT_SCALE`] it is a score in internal units.
    pub fn forward(&self, b: &BatchTensors) -> Tensor {
        let w = self.param("ft.weight");
        let bias = self.param("ft.bias");
        let bag = |idx: &Tensor, off: &Tensor| {
            Tensor::embedding_bag::<Tensor>(w, idx, off, false, 0, false, None, false).0 + bias
        };
        let stm = bag(&b.stm_indices, &b.stm_offsets);
        let nstm = bag(&b.nstm_indices, &b.nstm_offsets);
        let mut x = Tensor::cat(&[stm, nstm], 1).clamp(0.0, 1.0);
        let layers = self.arch.dense().len();
        for i in 0..layers {
            let w = self.param(&format!("l{i}.weight"));
            let bias = self.param(&format!("l{i}.bias"));
            x = x.linear(w, Some(bias));
            if i + 1 < layers {
                x = x.clamp(0.0, 1.0);
            }
        }
        x
    }

    /// Keeps dense weights where the quantizer can represent them.
    pub fn clip(&self) {
        tch::no_grad(|| {
            for (name, t) in &self.params {
                if name.starts_with('l') && name.ends_with(".weight") {
                    let _ = t
                        .shallow_clone()
                        .clamp_(-MAX_DENSE_WEIGHT, MAX_DENSE_WEIGHT);
                }
            }
        });
    }
}

/// A [`Batch`] moved to a device.
pub struct BatchTensors {
    pub stm_indices: Tensor,
    pub stm_offsets: Tensor,
    pub nstm_indices: Tensor,
    pub nstm_offsets: Tensor,
    pub score: Tensor,
    pub result: Tensor,
}

impl BatchTensors {
    pub fn new(b: &Batch, device: Device) -> BatchTensors {
        let t = |v: &[i64]| Tensor::from_slice(v).to_device(device);
        let f = |v: &[f32]| Tensor::from_slice(v).to_device(device).unsqueeze(1);
        BatchTensors {
            stm_indices: t(&b.stm_indices),
            stm_offsets: t(&b.stm_offsets),
            nstm_indices: t(&b.nstm_indices),
            nstm_offsets: t(&b.nstm_offsets),
            score: f(&b.score),
            result: f(&b.result),
        }
    }
}

/// Training objectives from the literature, selected by name.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Loss {
    /// Cross-entropy between sigmoid(net/scale) and the blended target (the ELMO/Stockfish
    /// loss), minus the target's own entropy so a perfect prediction scores 0.
    Elmo,
    /// |sigmoid(net/scale) − target|^power: power 2 is the MSE win-probability blend,
    /// 2.6 the power loss nnue-pytorch trains Stockfish's nets with.
    Power(f64),
}

/// Win-probability target: λ·sigmoid(score/scale) + (1 − λ)·result.
pub fn target(score: &Tensor, result: &Tensor, lambda: f64, scale: f64) -> Tensor {
    (score / scale).sigmoid() * lambda + result * (1.0 - lambda)
}

/// Mean loss of predicted scores (internal units) against the target.
pub fn loss(kind: Loss, predicted: &Tensor, target: &Tensor, scale: f64) -> Tensor {
    let q = predicted / scale;
    match kind {
        Loss::Elmo => {
            let eps = 1e-12;
            let t = target;
            let ce = -(t * q.sigmoid().clamp(eps, 1.0).log()
                + (t.ones_like() - t) * (-q.sigmoid() + 1.0).clamp(eps, 1.0).log());
            let h = -(t * t.clamp(eps, 1.0).log()
                + (t.ones_like() - t) * (t.ones_like() - t).clamp(eps, 1.0).log());
            (ce - h).mean(Kind::Float)
        }
        Loss::Power(p) => (q.sigmoid() - target)
            .abs()
            .pow_tensor_scalar(p)
            .mean(Kind::Float),
    }
}
