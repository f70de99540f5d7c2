//! The optimizer: Adam with its moments as named tensors (checkpoints carry them), the
//! transformer's rows updated sparsely on the CPU ([`crate::sparse`]) or densely, and the
//! options bullet's AdamW brings (decoupled weight decay, clipping every weight, no bias
//! correction).

use crate::TrainError;
use crate::model::Model;
use crate::sparse::SparseBags;
use lakefish_schemas::TrainSpec;
use tch::Tensor;

/// Adam with its state as named tensors (so checkpoints carry it).
pub struct Adam {
    pub(crate) m: Vec<Tensor>,
    pub(crate) v: Vec<Tensor>,
    pub(crate) step: i64,
    /// Whether the feature transformer's rows are updated sparsely ([`crate::sparse`]):
    /// only the rows a batch touches, lazily. CPU only.
    pub(crate) sparse: bool,
    pub(crate) scratch: crate::sparse::Scratch,
    options: AdamOptions,
    /// Ranger instead of Adam: its settings and slow weights (filled at the first step, so a
    /// warm start's or a checkpoint's weights are what they start from).
    pub(crate) ranger: Option<(lakefish_schemas::train::Ranger, Vec<Tensor>)>,
}

/// How Adam steps beyond its moments: the train spec's `weight_decay`, `clip_weights` and
/// `bias_correction` (bullet's AdamW: 0.01, 1.98, off).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamOptions {
    pub weight_decay: f64,
    /// Every weight clamped to ±this after a step; infinite: no clamp beyond the layers'.
    pub clip: f64,
    pub bias_correction: bool,
}

impl Default for AdamOptions {
    fn default() -> Self {
        AdamOptions {
            weight_decay: 0.0,
            clip: f64::INFINITY,
            bias_correction: true,
        }
    }
}

impl AdamOptions {
    pub fn of_spec(spec: &TrainSpec) -> AdamOptions {
        AdamOptions {
            weight_decay: spec.weight_decay,
            clip: spec.clip_weights.unwrap_or(f64::INFINITY),
            bias_correction: spec.bias_correction(),
        }
    }
}

const BETA1: f64 = 0.9;
const BETA2: f64 = 0.999;
const EPS: f64 = 1e-8;

impl Adam {
    pub fn new(model: &Model) -> Adam {
        Adam {
            m: model.params.iter().map(|(_, p)| p.zeros_like()).collect(),
            v: model.params.iter().map(|(_, p)| p.zeros_like()).collect(),
            step: 0,
            sparse: false,
            scratch: Default::default(),
            options: AdamOptions::default(),
            ranger: None,
        }
    }

    /// Ranger with `settings` instead of Adam (dense only).
    pub fn ranger(model: &Model, settings: lakefish_schemas::train::Ranger) -> Adam {
        Adam {
            ranger: Some((
                settings,
                model.params.iter().map(|(_, p)| p.zeros_like()).collect(),
            )),
            ..Adam::new(model)
        }
    }

    /// The same optimizer stepping with `options`.
    pub fn with_options(self, options: AdamOptions) -> Adam {
        Adam { options, ..self }
    }

    /// Adam whose feature-transformer update touches only the rows each batch uses (lazy
    /// Adam, [`crate::sparse`]); the model's parameters must be on the CPU.
    pub fn sparse(model: &Model) -> Adam {
        Adam {
            sparse: true,
            ..Adam::new(model)
        }
    }

    /// Counts the step and gives its constants (bias corrections from the new count).
    pub(crate) fn next_step(&mut self, lr: f64) -> crate::sparse::AdamStep {
        self.step += 1;
        let o = self.options;
        let (c1, c2) = if o.bias_correction {
            (
                1.0 - BETA1.powi(self.step as i32),
                1.0 - BETA2.powi(self.step as i32),
            )
        } else {
            (1.0, 1.0)
        };
        crate::sparse::AdamStep {
            lr,
            beta1: BETA1,
            beta2: BETA2,
            eps: EPS,
            c1,
            c2,
            weight_decay: o.weight_decay,
            clip: o.clip,
        }
    }

    pub(crate) fn update(
        &mut self,
        model: &Model,
        lr: f64,
        bags: &SparseBags,
    ) -> Result<(), TrainError> {
        if self.ranger.is_some() {
            return self.ranger_update(model, lr);
        }
        let step = self.next_step(lr);
        let (o, c1, c2) = (self.options, step.c1, step.c2);
        let with_moments = |i: usize| crate::sparse::WithMoments {
            param: &model.params[i].1,
            m: &self.m[i],
            v: &self.v[i],
        };
        for (i, (name, _)) in model.params.iter().enumerate() {
            let of_param: Vec<_> = bags.bags.iter().filter(|b| &b.param == name).collect();
            let Some(first) = of_param.first() else {
                continue;
            };
            let bias = match &first.bias {
                Some(b) => Some(
                    model
                        .params
                        .iter()
                        .position(|(n, _)| n == b)
                        .map(with_moments)
                        .ok_or_else(|| TrainError::Internal(format!("no parameter {b}")))?,
                ),
                None => None,
            };
            crate::sparse::sparse_adam(&of_param, with_moments(i), bias, step, &mut self.scratch)
                .map_err(|e| TrainError::Internal(format!("sparse update of {name}: {e}")))?;
        }
        tch::no_grad(|| {
            for (i, (_, p)) in model.params.iter().enumerate() {
                let g = p.grad();
                if !g.defined() {
                    continue;
                }
                // In place, as torch.optim.Adam computes it, with two temporaries instead of
                // nine: m ← lerp(m, g, 1−β1), v ← lerp(v, g², 1−β2),
                // p ← p − (lr/c1)·m / (√v/√c2 + ε).
                let _ = self.m[i].lerp_(&g, 1.0 - BETA1);
                let _ = self.v[i].lerp_(&(&g * &g), 1.0 - BETA2);
                let mut denom = self.v[i].sqrt();
                let _ = denom
                    .g_div_scalar_(c2.sqrt())
                    .g_add_scalar_(EPS)
                    .g_div_scalar_(-lr / c1);
                let mut p = p.shallow_clone();
                // AdamW: the decay is decoupled, applied to the weight before the step.
                if o.weight_decay != 0.0 {
                    let _ = p.g_mul_scalar_(1.0 - lr * o.weight_decay);
                }
                let _ = p.addcdiv_(&self.m[i], &denom);
                if o.clip.is_finite() {
                    let _ = p.clamp_(-o.clip, o.clip);
                }
            }
        });
        Ok(())
    }

    /// One Ranger step over every weight with a gradient (see [`lakefish_schemas::train::Ranger`]).
    fn ranger_update(&mut self, model: &Model, lr: f64) -> Result<(), TrainError> {
        let o = self.options;
        self.step += 1;
        let t = self.step;
        let (r, slow) = self.ranger.as_ref().expect("a Ranger optimizer");
        if t == 1 {
            // Every weight's slow copy starts from it, gradient or not this step.
            tch::no_grad(|| {
                for ((_, p), s) in model.params.iter().zip(slow) {
                    s.shallow_clone().copy_(p);
                }
            });
        }
        tch::no_grad(|| {
            for (i, (_, p)) in model.params.iter().enumerate() {
                let g = p.grad();
                if !g.defined() {
                    continue;
                }
                let state = RangerState {
                    m: &self.m[i],
                    v: &self.v[i],
                    slow: &slow[i],
                };
                ranger_tensor_step(p, &g, state, r, t, lr, o);
            }
        });
        Ok(())
    }
}

/// One weight tensor's Ranger state.
pub struct RangerState<'a> {
    pub m: &'a Tensor,
    pub v: &'a Tensor,
    pub slow: &'a Tensor,
}

/// Ranger's step `t` (counting from 1) of weight `p` with gradient `g`, in place.
pub fn ranger_tensor_step(
    p: &Tensor,
    g: &Tensor,
    state: RangerState,
    r: &lakefish_schemas::train::Ranger,
    t: i64,
    lr: f64,
    o: AdamOptions,
) {
    let (rectified, step_size) = radam_step_size(r, t);
    let (mut p, mut m, mut v, mut slow) = (
        p.shallow_clone(),
        state.m.shallow_clone(),
        state.v.shallow_clone(),
        state.slow.shallow_clone(),
    );
    tch::no_grad(|| {
        if t == 1 {
            slow.copy_(&p);
        }
        let _ = m.lerp_(g, 1.0 - r.beta1);
        let _ = v.lerp_(&(g * g), 1.0 - r.beta2);
        if o.weight_decay != 0.0 {
            let _ = p.g_mul_scalar_(1.0 - lr * o.weight_decay);
        }
        if rectified {
            let mut denom = v.sqrt();
            let _ = denom.g_add_scalar_(r.eps).g_div_scalar_(-lr * step_size);
            let _ = p.addcdiv_(&m, &denom);
        } else {
            let _ = p.g_add_(&(&m * (-lr * step_size)));
        }
        if o.clip.is_finite() {
            let _ = p.clamp_(-o.clip, o.clip);
        }
        if t % r.k as i64 == 0 {
            // Lookahead: the slow weights move toward the fast ones, which restart there.
            let _ = slow.lerp_(&p, r.alpha);
            p.copy_(&slow);
        }
    });
}

/// RAdam's step at count `t`: whether it is rectified (ρt above the threshold) and its size
/// before the learning rate.
pub fn radam_step_size(r: &lakefish_schemas::train::Ranger, t: i64) -> (bool, f64) {
    let b2t = r.beta2.powi(t as i32);
    let rho_inf = 2.0 / (1.0 - r.beta2) - 1.0;
    let rho = rho_inf - 2.0 * t as f64 * b2t / (1.0 - b2t);
    let c1 = 1.0 - r.beta1.powi(t as i32);
    if rho > r.threshold {
        let rect = ((1.0 - b2t) * (rho - 4.0) / (rho_inf - 4.0) * (rho - 2.0) / rho * rho_inf
            / (rho_inf - 2.0))
            .sqrt();
        (true, rect / c1)
    } else {
        (false, 1.0 / c1)
    }
}
