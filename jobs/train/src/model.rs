//! The NNUE model in libtorch: a feature transformer shared by both perspectives (side to
//! move first in the concatenation), then dense layers with clipped ReLU, one output.
//!
//! Parameters are plain tensors (not a `VarStore`) so that checkpoints hold exactly what
//! exact resume needs: weights, Adam moments and the step, by name.

use crate::loader::Batch;
use crate::sparse::SparseBags;
use tch::{Device, Kind, Tensor};

pub use lakefish_engine::nnue::{
    Activation, Arch, MAX_HIDDEN_WEIGHT, MAX_OUTPUT_WEIGHT, MAX_SCRELU_OUTPUT_WEIGHT, OUTPUT_SCALE,
};

/// What a model is: one of lakefish's own architectures, Stockfish 15.1's
/// ([`crate::stockfish_model`]), or a net its description gives ([`crate::spec_model`]).
#[derive(Debug, Clone, PartialEq)]
pub enum ModelArch {
    Lakefish(Arch),
    Stockfish,
    Spec(Box<lakefish_schemas::netspec::NetSpec>),
}

impl ModelArch {
    /// `stockfish-15.1`, or a lakefish architecture (`256x2-32-32`, `256x2:screlu`...).
    pub fn parse(s: &str) -> Result<ModelArch, lakefish_engine::nnue::ArchError> {
        if s == crate::stockfish_model::ARCH {
            return Ok(ModelArch::Stockfish);
        }
        Arch::parse(s).map(ModelArch::Lakefish)
    }

    /// The lakefish architecture, or a message for code that only handles those.
    pub fn lakefish(&self) -> Result<&Arch, crate::TrainError> {
        match self {
            ModelArch::Lakefish(a) => Ok(a),
            ModelArch::Stockfish => Err(crate::TrainError::Spec(format!(
                "{} nets are quantized into Stockfish's format, not lakefish's",
                crate::stockfish_model::ARCH
            ))),
            ModelArch::Spec(_) => Err(crate::TrainError::Spec(
                "a described net is quantized as its description says".into(),
            )),
        }
    }

    /// What the model's output is multiplied by to give a score in internal units.
    pub fn output_scale(&self) -> f64 {
        match self {
            ModelArch::Spec(spec) => spec.quantization.eval_scale,
            _ => OUTPUT_SCALE,
        }
    }
}

impl std::fmt::Display for ModelArch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelArch::Lakefish(a) => write!(f, "{a}"),
            ModelArch::Stockfish => f.write_str(crate::stockfish_model::ARCH),
            ModelArch::Spec(spec) => match &spec.name {
                Some(name) => write!(f, "netspec {name:?}"),
                None => f.write_str("netspec"),
            },
        }
    }
}

pub struct Model {
    pub arch: ModelArch,
    pub inputs: i64,
    /// `(name, tensor)`; `ft.weight` is `[inputs, l1]`, dense weights are `[out, in]`.
    pub params: Vec<(String, Tensor)>,
}

impl Model {
    /// Every parameter drawn again as bullet's `new_affine` draws it: weights normal with
    /// standard deviation √(2/fan-in) (the transformer's fan-in its input count, `[inputs,
    /// width]`; a dense layer's `[out, fan_in]`), biases and a factoriser zero; a PSQT keeps
    /// its material start.
    /// Seeded by the caller.
    pub fn with_bullet_init(self) -> Model {
        tch::no_grad(|| {
            for (name, p) in &self.params {
                let size = p.size();
                let mut p = p.shallow_clone();
                if name.starts_with("psqt.") {
                    // Stockfish's PSQT starts at material values, as bullet has no PSQT.
                    continue;
                }
                if name.ends_with(".bias") || name == "ft.factoriser" || size.len() != 2 {
                    let _ = p.zero_();
                    continue;
                }
                let fan_in = if name.starts_with("ft.") {
                    size[0]
                } else {
                    size[1]
                };
                let sd = (2.0 / fan_in as f64).sqrt();
                p.copy_(&(Tensor::randn(&size, (Kind::Float, Device::Cpu)) * sd));
            }
        });
        self
    }

    /// Fresh weights, uniform in ±1/sqrt(fan-in) like torch's `Linear`; seeded by the caller.
    pub fn new(arch: &ModelArch, inputs: i64, max_active: i64, device: Device) -> Model {
        let arch = match arch {
            ModelArch::Lakefish(a) => a,
            ModelArch::Spec(spec) => {
                return Model {
                    arch: ModelArch::Spec(spec.clone()),
                    inputs: spec.inputs.count() as i64,
                    params: crate::spec_model::new_params(spec, max_active, device),
                };
            }
            ModelArch::Stockfish => {
                let params = crate::stockfish_model::new_params(inputs, max_active, device)
                    .into_iter()
                    .map(|(n, t)| (n, t.set_requires_grad(true)))
                    .collect();
                return Model {
                    arch: ModelArch::Stockfish,
                    inputs,
                    params,
                };
            }
        };
        // Drawn on the CPU whatever the device, so a seed gives the same net on CPU and CUDA.
        let uniform = |shape: &[i64], bound: f64| {
            ((Tensor::rand(shape, (Kind::Float, Device::Cpu)) * 2.0 - 1.0) * bound)
                .to_device(device)
        };
        // The transformer sums ~max_active rows: scale so its outputs start in the CReLU range.
        let ft_bound = 1.0 / (max_active as f64).sqrt();
        let mut params = vec![
            (
                "ft.weight".to_string(),
                uniform(&[inputs, arch.l1 as i64], ft_bound),
            ),
            (
                "ft.bias".to_string(),
                Tensor::zeros([arch.l1 as i64], (Kind::Float, device)),
            ),
        ];
        for (i, (fan_in, out)) in arch.dense().into_iter().enumerate() {
            let b = 1.0 / (fan_in as f64).sqrt();
            let (out, fan_in) = (out as i64, fan_in as i64);
            params.push((format!("l{i}.weight"), uniform(&[out, fan_in], b)));
            params.push((format!("l{i}.bias"), uniform(&[out], b)));
        }
        let params = params
            .into_iter()
            .map(|(n, t)| (n, t.set_requires_grad(true)))
            .collect();
        Model {
            arch: ModelArch::Lakefish(arch.clone()),
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
        self.forward_with(b, None)
    }

    /// [`Model::forward`]; with `sparse`, the feature transformer's bags are taken without a
    /// gradient path to its weights and recorded there, for the trainer's own sparse update
    /// ([`crate::sparse`]).
    pub fn forward_with(&self, b: &BatchTensors, sparse: Option<&mut SparseBags>) -> Tensor {
        match &self.arch {
            ModelArch::Stockfish => return crate::stockfish_model::forward(self, b, sparse),
            ModelArch::Spec(spec) => {
                return crate::spec_model::forward(spec, &self.params, b, sparse);
            }
            ModelArch::Lakefish(_) => {}
        }
        let mut inputs = self.dense_inputs_with(b, sparse);
        let last = inputs.len() - 1;
        let x = inputs.pop().expect("an output layer");
        x.linear(
            self.param(&format!("l{last}.weight")),
            Some(self.param(&format!("l{last}.bias"))),
        )
    }

    /// The input of every dense layer (the feature transformer's output first), after the
    /// clipped ReLU (squared for SCReLU nets): what the quantizer calibrates biases with.
    /// Lakefish architectures only.
    pub fn dense_inputs(&self, b: &BatchTensors) -> Vec<Tensor> {
        self.dense_inputs_with(b, None)
    }

    fn dense_inputs_with(&self, b: &BatchTensors, sparse: Option<&mut SparseBags>) -> Vec<Tensor> {
        let ModelArch::Lakefish(arch) = &self.arch else {
            panic!("dense_inputs of a {} model", self.arch);
        };
        let w = self.param("ft.weight");
        let bias = self.param("ft.bias");
        let clipped = match sparse {
            // Bias and clamp inside the sparse update: libtorch's clamp backward (a scalar
            // `where` over [batch, 2·l1]) was the largest single cost of a sparse step.
            Some(s) => {
                let mut bag = |idx: &Tensor, off: &Tensor| {
                    s.clamped_bag(("ft.weight", w), ("ft.bias", bias), idx, off)
                };
                let stm = bag(&b.stm_indices, &b.stm_offsets);
                let nstm = bag(&b.nstm_indices, &b.nstm_offsets);
                Tensor::cat(&[stm, nstm], 1)
            }
            None => {
                let bag = |idx: &Tensor, off: &Tensor| {
                    crate::sparse::bag(None, "ft.weight", w, idx, off) + bias
                };
                let stm = bag(&b.stm_indices, &b.stm_offsets);
                let nstm = bag(&b.nstm_indices, &b.nstm_offsets);
                Tensor::cat(&[stm, nstm], 1).clamp(0.0, 1.0)
            }
        };
        let mut inputs = vec![match arch.activation {
            Activation::Crelu => clipped,
            Activation::Screlu => clipped.square(),
        }];
        for i in 0..arch.dense().len() - 1 {
            let w = self.param(&format!("l{i}.weight"));
            let bias = self.param(&format!("l{i}.bias"));
            let x = inputs[i].linear(w, Some(bias)).clamp(0.0, 1.0);
            inputs.push(x);
        }
        inputs
    }

    /// Keeps dense weights where the quantizer can represent them (int8 at the layer's
    /// scale, see `lakefish_engine::nnue`).
    pub fn clip(&self) {
        let arch = match &self.arch {
            ModelArch::Lakefish(a) => a,
            ModelArch::Stockfish => return crate::stockfish_model::clip(&self.params),
            ModelArch::Spec(spec) => return crate::spec_model::clip(spec, &self.params),
        };
        let output = format!("l{}.weight", arch.dense().len() - 1);
        tch::no_grad(|| {
            for (name, t) in &self.params {
                if name.starts_with('l') && name.ends_with(".weight") {
                    let max = if *name == output && arch.activation == Activation::Screlu {
                        MAX_SCRELU_OUTPUT_WEIGHT
                    } else if *name == output {
                        MAX_OUTPUT_WEIGHT
                    } else {
                        MAX_HIDDEN_WEIGHT
                    };
                    let _ = t.shallow_clone().clamp_(-max, max);
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
        // To a GPU: through pinned host memory (libtorch's caching host allocator reuses the
        // blocks) and without blocking, so the CPU goes on to the next batch while the copy
        // and the previous step run; the copy is queued on the step's stream, so it cannot
        // overtake the step reading it. The CPU path is the plain tensor.
        let move_to = |t: Tensor| {
            if device.is_cuda() {
                t.pin_memory(device)
                    .to_device_(device, t.kind(), true, false)
            } else {
                t
            }
        };
        let t = |v: &[i32]| move_to(Tensor::from_slice(v));
        let f = |v: &[f32]| move_to(Tensor::from_slice(v)).unsqueeze(1);
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

/// The two sigmoid scales of a loss (seed 004 writes them apart): the data's scores become
/// win probabilities over `target`, the net's output over `prediction`. One number is both.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sigmoid {
    pub target: f64,
    pub prediction: f64,
}

impl From<f64> for Sigmoid {
    fn from(scale: f64) -> Sigmoid {
        Sigmoid {
            target: scale,
            prediction: scale,
        }
    }
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
