//! Training runs: the spec of a `train` job and the run record kept in
//! `runs/<id>/run.json` beside its checkpoints and metrics.

use serde::{Deserialize, Serialize};

pub const RUN_FILE: &str = "run.json";
pub const METRICS_FILE: &str = "metrics.parquet";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrainSpec {
    /// The shuffle to train on (`sh-...`); its last `val_chunks` chunks are held out.
    pub shuffle: crate::names::ShuffleId,
    #[serde(default)]
    pub features: FeatureSet,
    /// `256x2-32-32`: feature transformer width, then hidden layers (clipped ReLU); or
    /// `256x2:screlu`: the squared clipped transformer straight into the output.
    #[serde(default = "d_arch")]
    pub arch: String,
    #[serde(default = "d_batch")]
    pub batch_size: u32,
    /// Passes over the shuffle's training chunks; with `superbatch`, superbatches.
    #[serde(default = "d_epochs")]
    pub epochs: u32,
    /// Bullet's unit: when set, training runs `epochs` superbatches of this many batches
    /// each, streaming through the shuffle's chunks pass after pass whatever its size (each
    /// pass in its own order), with validation, the plateau rule, per-epoch schedules and a
    /// checkpoint after each superbatch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superbatch: Option<u64>,
    /// Stop after this many steps in total (optional).
    #[serde(default)]
    pub max_steps: Option<u64>,
    #[serde(default = "d_lr")]
    pub lr: f64,
    /// Learning rate multiplied by this after every epoch.
    #[serde(default = "d_lr_decay")]
    pub lr_decay: f64,
    /// The learning rate step by step instead of `lr` and `lr_decay` (which are then
    /// ignored; `lr_decay` must stay 1): constant, linear, step, exponential, cosine, warmup,
    /// sequence ([`crate::schedule::Schedule`]), e.g. `{"kind": "warmup", "steps": 100,
    /// "then": {"kind": "cosine", "start": 0.001, "end": 0.00003}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lr_schedule: Option<Box<crate::schedule::Schedule>>,
    #[serde(default)]
    pub loss: LossName,
    /// The exponent of the `power` loss, |Δ|^p (nnue-pytorch trains Stockfish's nets with 2.6,
    /// the default; 2 is `mse`). Only with `loss = power`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_power: Option<f64>,
    /// The sigmoid scale of the net's output (its prediction), when it differs from `scale`
    /// (seed 004's output scale; `scale` then scales only the data's scores).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prediction_scale: Option<f64>,
    /// Sigmoid scale of scores in internal units.
    #[serde(default = "d_scale")]
    pub scale: f64,
    /// Weight of the score in the target (1 − λ on the game result), from start to end.
    #[serde(default = "d_one")]
    pub lambda_start: f64,
    #[serde(default = "d_one")]
    pub lambda_end: f64,
    /// λ step by step instead of `lambda_start` → `lambda_end` over the epochs (which must
    /// then stay 1): the same kinds as `lr_schedule`, values between 0 and 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lambda_schedule: Option<Box<crate::schedule::Schedule>>,
    #[serde(default = "d_one_u32")]
    pub val_chunks: u32,
    /// Checkpoint every this many steps (0: at the end of each epoch only).
    #[serde(default)]
    pub checkpoint_every: u64,
    #[serde(default)]
    pub seed: u64,
    #[serde(default)]
    pub device: DeviceChoice,
    /// How the feature transformer's weights are updated: `auto` (with `defaults` 2: sparse on
    /// the CPU wherever it can run, else dense; with 1: sparse on the CPU for halfkp and
    /// halfka_v2_hm, else dense), `sparse` (only the rows a batch uses, lazy Adam; CPU only; a
    /// described net in the fused step when `NetSpec::sparse_update` takes it, else in the
    /// general one) or `dense` (Adam over every weight, libtorch's backward).
    #[serde(default, skip_serializing_if = "FtUpdate::is_auto")]
    pub ft_update: FtUpdate,
    /// The optimizer: Adam (unset) or Ranger (RAdam + Lookahead, as nnue-pytorch trained with
    /// it until 2023). Ranger updates every weight each step, so it trains densely.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimizer: Option<Box<Optimizer>>,
    /// AdamW's decoupled weight decay: every step each weight the step updates is first
    /// multiplied by `1 − lr · weight_decay` (bullet's AdamW uses 0.01). 0: plain Adam.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub weight_decay: f64,
    /// After every step, clamp every weight and bias to ±this (bullet clips to ±1.98); the
    /// output and hidden layers keep their tighter quantization limits. None: only those.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clip_weights: Option<f64>,
    /// Adam's bias correction of its moments (torch's Adam: on). Off, the first steps are
    /// about 3× larger: what bullet's AdamW does. Unset: as `defaults` says (2: off, 1: on);
    /// read it through [`TrainSpec::bias_correction`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bias_correction: Option<bool>,
    /// How fresh weights start: `uniform` or `bullet` (see [`WeightInit`]). Unset: as
    /// `defaults` says (2: bullet, 1: uniform); read it through [`TrainSpec::weight_init`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_init: Option<WeightInit>,
    /// Which generation of the trainer's defaults fills in what this spec leaves unset:
    /// 2 (the default since 2026-11-27: bullet's Adam without bias correction, bullet's start,
    /// the sparse update on the CPU wherever it runs) or 1 (before: Adam with bias
    /// correction, the uniform start, the sparse update only for halfkp and halfka_v2_hm).
    /// Unset: a new run takes today's generation ([`defaults::GENERATION`]) and a resume the
    /// run's own. Written into every run record, so a run reads back as it was trained; a
    /// record from before this field is generation 1. Read it through
    /// [`TrainSpec::generation`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defaults: Option<u32>,
    /// Continue this run from its last checkpoint instead of starting a new one.
    #[serde(default)]
    pub resume: Option<crate::names::RunId>,
    /// A mask definition applied to the chunks' rows at load time (its rules that need no
    /// draw or histogram: quiet, all, early-skip, simple-eval-skip; plus its optional ply and
    /// score limits), for training on a subset without a new shuffle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<Box<crate::MaskDefinition>>,
    /// Augmentation: every odd epoch (the second, fourth, ...) sees each position mirrored
    /// left to right (files a↔h), so the net learns both wings from one game.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mirror: bool,
    /// Augmentation as seed 003's `mirror_percentage`: this fraction of the positions (0 to
    /// 1), drawn anew every epoch from `seed`, is seen mirrored left to right. Not with
    /// `mirror`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror_fraction: Option<f64>,
    /// Warm start: a new run begins from the weights (not the optimizer state) of this
    /// checkpoint of another run, which must have the same features and architecture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_from: Option<InitFrom>,
    /// Plateau ("newbob", seed 003): after `patience` epochs in a row whose validation loss
    /// did not improve on the best by `threshold` (relative), the learning rate is multiplied
    /// by `factor` and the weights go back to the best epoch's checkpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plateau: Option<Plateau>,
    /// The net as a description ([`crate::netspec::NetSpec`]) instead of `features` and
    /// `arch` (which then stay unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net: Option<crate::netspec::NetSpec>,
}

/// Declares a closed set of names stored as strings: the enum, its names, parsing with an
/// error that lists them, and serde as those names (JSON and run records stay as before).
macro_rules! named_enum {
    ($(#[$meta:meta])* $name:ident, $what:literal,
     { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, schemars::JsonSchema)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant,)+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// By name; an unknown name is an error listing the known ones.
            pub fn parse(name: &str) -> Result<$name, String> {
                Self::ALL.iter().copied().find(|v| v.as_str() == name).ok_or_else(|| {
                    let known: Vec<&str> = Self::ALL.iter().map(|v| v.as_str()).collect();
                    format!(concat!($what, " {:?} is unknown ({})"), name, known.join(", "))
                })
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

named_enum!(
    /// The input features of a net.
    FeatureSet, "features", {
        #[default]
        All768 = "all768",
        HalfKp = "halfkp",
        HalfKaV2Hm = "halfka_v2_hm",
    }
);

named_enum!(
    /// The training loss: `elmo` (cross-entropy), `mse` (power 2) or `power` (|Δ|^2.6).
    LossName, "loss", {
        #[default]
        Elmo = "elmo",
        Mse = "mse",
        Power = "power",
    }
);

named_enum!(
    /// Where training runs: `auto` (a CUDA GPU when one can be used, else the CPU), `cpu`,
    /// `cuda`.
    DeviceChoice, "device", {
        #[default]
        Auto = "auto",
        Cpu = "cpu",
        Cuda = "cuda",
    }
);

named_enum!(
    /// The feature transformer's update: `auto` (sparse on the CPU for halfkp
    /// and halfka_v2_hm, else dense),
    /// `sparse` (rows a batch uses only, lazy Adam; CPU only), `dense` (every weight).
    FtUpdate, "ft_update", {
        #[default]
        Auto = "auto",
        Sparse = "sparse",
        Dense = "dense",
    }
);

named_enum!(
    /// How a new run's weights start: `uniform` (the transformer in ±1/√(active features),
    /// its bias zero, dense layers in ±1/√fan-in like torch's `Linear`) or `bullet` (every
    /// weight normal with standard deviation √(2/fan-in), the transformer's fan-in its
    /// input count, every bias and a factoriser zero: bullet's `new_affine`).
    WeightInit, "weight_init", {
        #[default]
        Uniform = "uniform",
        Bullet = "bullet",
    }
);

impl WeightInit {
    pub fn is_uniform(&self) -> bool {
        *self == WeightInit::Uniform
    }
}

impl FtUpdate {
    pub fn is_auto(&self) -> bool {
        *self == FtUpdate::Auto
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InitFrom {
    pub run: crate::names::RunId,
    pub step: u64,
}

/// The defaults of a train spec, named once: serde fills them in a payload, the CLI shows
/// and uses the same values.
pub mod defaults {
    pub const ARCH: &str = "256x2-32-32";
    pub const BATCH_SIZE: u32 = 16384;
    pub const EPOCHS: u32 = 1;
    pub const LR: f64 = 1e-3;
    pub const LR_DECAY: f64 = 1.0;
    pub const LAMBDA: f64 = 1.0;
    pub const VAL_CHUNKS: u32 = 1;
    pub const SCALE: f64 = 361.0;
    /// The generation of defaults a spec gets when it does not name one
    /// ([`super::TrainSpec::defaults`]); 1 is the one before.
    pub const GENERATION: u32 = 2;
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}
fn d_arch() -> String {
    defaults::ARCH.into()
}
fn d_batch() -> u32 {
    defaults::BATCH_SIZE
}
fn d_epochs() -> u32 {
    defaults::EPOCHS
}
fn d_lr() -> f64 {
    defaults::LR
}
fn d_one() -> f64 {
    defaults::LAMBDA
}
fn d_lr_decay() -> f64 {
    defaults::LR_DECAY
}
fn d_one_u32() -> u32 {
    defaults::VAL_CHUNKS
}
fn d_scale() -> f64 {
    defaults::SCALE
}

impl TrainSpec {
    /// The net as today's trainer knows it, `(features, arch)`: the fields themselves, or the
    /// preset `net` describes. A description that is no preset is an error naming `net`.
    pub fn preset(&self) -> Result<(FeatureSet, String), String> {
        let Some(net) = &self.net else {
            return Ok((self.features, self.arch.clone()));
        };
        let (features, arch) = net.as_preset().ok_or_else(|| {
            format!(
                "net.{} (this lakefish trains the nets of its presets so far)",
                net.why_not_preset().unwrap_or_default()
            )
        })?;
        let features = FeatureSet::parse(features).map_err(|e| format!("net: {e}"))?;
        Ok((features, arch))
    }

    /// What this run trains: a preset (today's fixed shapes, their own model, format and
    /// kernels) or a net its description gives (`net` that is no preset), refused naming
    /// the field where the engine could not evaluate it.
    pub fn trained_net(&self) -> Result<TrainedNet, String> {
        match &self.net {
            Some(net) if net.as_preset().is_none() => {
                net.validate()
                    .and_then(|()| net.engine_limits())
                    .and_then(|()| net.trainer_limits())
                    .map_err(|e| format!("net.{e}"))?;
                Ok(TrainedNet::Described(net.clone()))
            }
            _ => self
                .preset()
                .map(|(features, arch)| TrainedNet::Preset(features, arch)),
        }
    }

    /// `(features, arch)` for lists: the preset's names, or what a description is called.
    pub fn net_label(&self) -> (String, String) {
        match (self.preset(), &self.net) {
            (Ok((f, a)), _) => (f.as_str().to_string(), a),
            (Err(_), Some(net)) => (
                "netspec".into(),
                net.name.clone().unwrap_or_else(|| "(unnamed)".into()),
            ),
            (Err(_), None) => (self.features.as_str().into(), self.arch.clone()),
        }
    }

    /// The generation of defaults: as set, else today's (a resume is resolved against its
    /// run first, [`TrainSpec::resolved`]).
    pub fn generation(&self) -> u32 {
        self.defaults.unwrap_or(defaults::GENERATION)
    }

    /// Whether Adam corrects its moments' bias: as set, else as `defaults` says.
    /// Ranger's settings when the spec asks for it (else Adam).
    pub fn ranger(&self) -> Option<&Ranger> {
        match self.optimizer.as_deref() {
            Some(Optimizer::Ranger(r)) => Some(r),
            _ => None,
        }
    }

    pub fn bias_correction(&self) -> bool {
        self.bias_correction.unwrap_or(self.generation() < 2)
    }

    /// How a new run's weights start: as set, else as `defaults` says.
    pub fn weight_init(&self) -> WeightInit {
        self.weight_init.unwrap_or(if self.generation() < 2 {
            WeightInit::Uniform
        } else {
            WeightInit::Bullet
        })
    }

    /// The spec with every setting its generation fills in written out: `defaults` (the
    /// given `generation` when unset: today's for a new run, the run's for a resume), bias
    /// correction and the start. Two specs that train alike resolve equal, however they
    /// were written.
    pub fn resolved(&self, generation: u32) -> TrainSpec {
        let mut s = self.clone();
        s.defaults = Some(self.defaults.unwrap_or(generation));
        s.bias_correction = Some(s.bias_correction());
        s.weight_init = Some(s.weight_init());
        s
    }

    /// The sigmoid scale of the net's output: `prediction_scale`, else `scale`.
    pub fn prediction_scale(&self) -> f64 {
        self.prediction_scale.unwrap_or(self.scale)
    }

    pub fn validate(&self) -> Result<(), String> {
        if let Some(g) = self.defaults
            && !(1..=defaults::GENERATION).contains(&g)
        {
            return Err(format!(
                "defaults must be 1 or 2 (the trainer's defaults before and since 2026-11-27), not {g}"
            ));
        }
        if self.batch_size == 0 || self.epochs == 0 {
            return Err("batch_size and epochs must be at least 1".into());
        }
        if let Some(r) = self.ranger() {
            r.validate()?;
            if self.ft_update == FtUpdate::Sparse {
                return Err(
                    "ft_update sparse: Ranger updates every weight each step (its lookahead \
                     moves them all), so it trains densely (use auto or dense)"
                        .into(),
                );
            }
        }
        if self.superbatch == Some(0) {
            return Err("superbatch must be at least 1 batch (bullet uses 6104 of 16384)".into());
        }
        if let Some(f) = &self.filter {
            f.validate().map_err(|e| format!("filter.{e}"))?;
            if !f.applies_per_row() {
                return Err(
                    "filter.rules: random-skip, wld and piece-count draw by a row's place in its \
                     dataset (piece-count needs the whole dataset's histogram): make them a mask \
                     (`lakefish mask NAME --rule ...`) and shuffle with it (`--mask NAME`)"
                        .into(),
                );
            }
        }
        if !(self.lr > 0.0 && self.lr.is_finite() && self.scale > 0.0) {
            return Err("lr and scale must be positive".into());
        }
        if !(0.0..1.0).contains(&self.weight_decay) {
            return Err(format!(
                "weight_decay must be at least 0 and below 1 (bullet uses 0.01), not {}",
                self.weight_decay
            ));
        }
        if let Some(c) = self.clip_weights
            && !(c > 0.0 && c.is_finite())
        {
            return Err(format!(
                "clip_weights must be a positive number (bullet uses 1.98), not {c}"
            ));
        }
        for (name, l) in [
            ("lambda_start", self.lambda_start),
            ("lambda_end", self.lambda_end),
        ] {
            if !(0.0..=1.0).contains(&l) {
                return Err(format!("{name} must be between 0 and 1"));
            }
        }
        if let Some(p) = self.loss_power {
            if self.loss != LossName::Power {
                return Err(format!(
                    "loss_power is the exponent of loss power; this spec's loss is {}",
                    self.loss.as_str()
                ));
            }
            if !(p.is_finite() && (1.0..=8.0).contains(&p)) {
                return Err(format!("loss_power must be between 1 and 8, not {p}"));
            }
        }
        if let Some(p) = self.prediction_scale
            && !(p > 0.0 && p.is_finite())
        {
            return Err(format!("prediction_scale must be positive, not {p}"));
        }
        if let Some(p) = &self.plateau {
            if !(p.factor > 0.0 && p.factor < 1.0) {
                return Err(format!(
                    "plateau.factor must be between 0 and 1 (exclusive), not {}",
                    p.factor
                ));
            }
            if p.patience == 0 {
                return Err("plateau.patience must be at least 1".into());
            }
            if !(0.0..1.0).contains(&p.threshold) {
                return Err(format!(
                    "plateau.threshold must be at least 0 and below 1, not {}",
                    p.threshold
                ));
            }
        }
        if let Some(f) = self.mirror_fraction {
            if !(0.0..=1.0).contains(&f) {
                return Err(format!("mirror_fraction must be between 0 and 1, not {f}"));
            }
            if self.mirror {
                return Err(
                    "mirror_fraction and mirror are two ways to mirror: give one of them".into(),
                );
            }
        }
        if let Some(s) = &self.lr_schedule {
            s.validate("lr_schedule", 0.0..=1.0)?;
            if self.lr_decay != defaults::LR_DECAY {
                return Err(
                    "lr_schedule replaces lr_decay: leave lr_decay out (or 1) when giving it"
                        .into(),
                );
            }
        }
        if let Some(s) = &self.lambda_schedule {
            s.validate("lambda_schedule", 0.0..=1.0)?;
            if self.lambda_start != 1.0 || self.lambda_end != 1.0 {
                return Err(
                    "lambda_schedule replaces lambda_start and lambda_end: leave them out when giving it"
                        .into(),
                );
            }
        }
        if let Some(net) = &self.net {
            net.validate().map_err(|e| format!("net.{e}"))?;
            if self.features != FeatureSet::default() || self.arch != defaults::ARCH {
                return Err(
                    "net: describes the whole net; leave features and arch out when giving it"
                        .into(),
                );
            }
        }
        if self.init_from.is_some() && self.resume.is_some() {
            return Err("init_from starts a new run; it cannot be combined with resume".into());
        }
        Ok(())
    }
}

/// `runs/<id>/run.json`: what a run is and how far it got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunRecord {
    pub id: crate::names::RunId,
    /// A spec stored without `defaults` was trained before defaults had generations: 1.
    #[serde(deserialize_with = "stored_spec")]
    pub spec: TrainSpec,
    pub device: String,
    pub step: u64,
    pub epoch: u32,
    /// Checkpoint file names under `runs/<id>/checkpoints/`, oldest first.
    pub checkpoints: Vec<String>,
    pub train_positions: u64,
    pub val_positions: u64,
    /// Validation loss after each finished epoch.
    pub val_loss: Vec<f64>,
    /// The same loss for a material-only predictor on the validation chunks.
    pub material_val_loss: Option<f64>,
    pub finished: bool,
    /// Why the last attempt stopped, when it failed (cleared when training goes on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Steps at which training went on from a checkpoint: a job re-delivered after its worker
    /// died, or an explicit `resume`.
    #[serde(default)]
    pub resumed_at: Vec<u64>,
    /// Where the plateau rule stands (with `plateau`): kept with every checkpoint, so a
    /// resumed run goes on with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plateau: Option<PlateauState>,
    pub created: String,
    pub updated: String,
}

/// A spec's optimizer: `{"kind": "adam"}` (as unset) or `{"kind": "ranger", ...}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Optimizer {
    Adam {},
    Ranger(Ranger),
}

/// Ranger (Wright's 2019 optimizer: RAdam's rectified steps with Lookahead's slow weights),
/// with nnue-pytorch's settings as defaults. Every step, per weight: the moments
/// `m ← β1·m + (1−β1)·g`, `v ← β2·v + (1−β2)·g²`; with `ρ∞ = 2/(1−β2) − 1` and
/// `ρt = ρ∞ − 2t·β2^t/(1−β2^t)`: when `ρt > threshold`,
/// `w ← w − lr·r/(1−β1^t) · m/(√v + ε)` with `r = √((1−β2^t)(ρt−4)(ρt−2)ρ∞ / ((ρ∞−4)(ρ∞−2)ρt))`,
/// else `w ← w − lr/(1−β1^t) · m`; every `k` steps the slow weights move `alpha` of the way
/// to the fast ones, `s ← s + alpha·(w − s)`, and the fast ones restart from them, `w ← s`.
/// Weight decay and clipping as for Adam; `bias_correction` does not apply (RAdam rectifies).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Ranger {
    #[serde(default = "d_ranger_alpha")]
    pub alpha: f64,
    #[serde(default = "d_ranger_k")]
    pub k: u32,
    #[serde(default = "d_ranger_beta1")]
    pub beta1: f64,
    #[serde(default = "d_ranger_beta2")]
    pub beta2: f64,
    #[serde(default = "d_ranger_eps")]
    pub eps: f64,
    /// RAdam's threshold on ρt below which a step is plain momentum (5).
    #[serde(default = "d_ranger_threshold")]
    pub threshold: f64,
}

fn d_ranger_alpha() -> f64 {
    0.5
}
fn d_ranger_k() -> u32 {
    6
}
fn d_ranger_beta1() -> f64 {
    0.9
}
fn d_ranger_beta2() -> f64 {
    0.999
}
fn d_ranger_eps() -> f64 {
    1e-7
}
fn d_ranger_threshold() -> f64 {
    5.0
}

impl Default for Ranger {
    fn default() -> Self {
        Ranger {
            alpha: d_ranger_alpha(),
            k: d_ranger_k(),
            beta1: d_ranger_beta1(),
            beta2: d_ranger_beta2(),
            eps: d_ranger_eps(),
            threshold: d_ranger_threshold(),
        }
    }
}

impl Ranger {
    pub fn validate(&self) -> Result<(), String> {
        let r = self;
        if !(0.0..=1.0).contains(&r.alpha) || r.k == 0 {
            return Err(format!(
                "optimizer.alpha must be in [0, 1] and optimizer.k at least 1 (alpha {}, k {})",
                r.alpha, r.k
            ));
        }
        if !(0.0..1.0).contains(&r.beta1) || !(0.0..1.0).contains(&r.beta2) {
            return Err(format!(
                "optimizer.beta1 and optimizer.beta2 must be in [0, 1) ({}, {})",
                r.beta1, r.beta2
            ));
        }
        if !(r.eps > 0.0 && r.eps.is_finite() && r.threshold.is_finite()) {
            return Err(format!(
                "optimizer.eps must be positive and optimizer.threshold finite ({}, {})",
                r.eps, r.threshold
            ));
        }
        Ok(())
    }
}

/// The plateau rule of a spec (see [`TrainSpec::plateau`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Plateau {
    /// The learning rate is multiplied by this at each cut (0 to 1, exclusive).
    pub factor: f64,
    /// Epochs without improvement before a cut (at least 1).
    #[serde(default = "d_one_u32")]
    pub patience: u32,
    /// The relative improvement that counts: the loss must fall below best × (1 − this).
    #[serde(default)]
    pub threshold: f64,
}

/// How a run's plateau rule stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlateauState {
    /// The best validation loss so far, and the checkpoint that had it.
    pub best_loss: f64,
    pub best_checkpoint: String,
    /// What the learning rate is multiplied by now (1 before any cut).
    pub lr_factor: f64,
    /// Epochs since the best one.
    pub waited: u32,
    /// Cuts so far.
    pub cuts: u32,
}
/// A run record's spec: one written before `defaults` existed was trained with generation 1,
/// whatever today's generation is.
fn stored_spec<'de, D: serde::Deserializer<'de>>(d: D) -> Result<TrainSpec, D::Error> {
    let mut v = serde_json::Value::deserialize(d)?;
    if let Some(fields) = v.as_object_mut() {
        fields
            .entry("defaults")
            .or_insert_with(|| serde_json::Value::from(1u32));
    }
    serde_json::from_value(v).map_err(serde::de::Error::custom)
}

impl RunRecord {
    /// `finished`, `failed` (its last attempt stopped with `error`) or `running`.
    pub fn state(&self) -> &'static str {
        match (self.finished, &self.error) {
            (true, _) => "finished",
            (false, Some(_)) => "failed",
            (false, None) => "running",
        }
    }
}

/// What a training run trains ([`TrainSpec::trained_net`]).
#[derive(Debug, Clone, PartialEq)]
pub enum TrainedNet {
    /// Today's fixed shapes, by name: `(features, arch)`.
    Preset(FeatureSet, String),
    /// A net its description gives.
    Described(crate::netspec::NetSpec),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra: serde_json::Value) -> Result<TrainSpec, String> {
        let mut v = serde_json::json!({ "shuffle": "sh-0123456789ab" });
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    /// A net given as a description: a preset's trains as the preset; one that is no preset
    /// is refused naming `net`, as is a description beside `features` or `arch`.
    #[test]
    fn a_net_description_is_a_preset_or_refused_by_name() {
        let presets = [
            ("all768", "256x2-32-32"),
            ("halfkp", "512x2:screlu"),
            ("halfka_v2_hm", "stockfish-15.1"),
        ];
        for (features, arch) in presets {
            let net = crate::netspec::NetSpec::preset(features, arch).unwrap();
            assert_eq!(net.as_preset(), Some((features, arch.to_string())));
            let s = spec(serde_json::json!({ "net": net })).unwrap();
            s.validate().unwrap();
            let (f, a) = s.preset().unwrap();
            assert_eq!((f.as_str(), a.as_str()), (features, arch));
        }
        let mut bucketed = crate::netspec::NetSpec::preset("all768", "64x2:screlu").unwrap();
        bucketed.output_buckets = crate::netspec::OutputBuckets::MaterialCount { count: 8 };
        assert_eq!(bucketed.as_preset(), None);
        let s = spec(serde_json::json!({ "net": bucketed })).unwrap();
        s.validate().unwrap();
        assert!(
            s.preset().unwrap_err().starts_with("net.output_buckets: "),
            "{:?}",
            s.preset()
        );
        let both = spec(serde_json::json!({ "net": bucketed, "arch": "128x2" })).unwrap();
        assert!(both.validate().unwrap_err().starts_with("net: "));
        bucketed.transformer.width = 0;
        let bad = spec(serde_json::json!({ "net": bucketed })).unwrap();
        assert!(
            bad.validate()
                .unwrap_err()
                .starts_with("net.transformer.width: "),
            "{:?}",
            bad.validate()
        );
    }

    /// bullet's optimizer options: absent from a plain spec unless set, round-trip, and
    /// out-of-range values refused naming the field.
    #[test]
    fn optimizer_options_default_away_and_refuse_garbage() {
        let plain = spec(serde_json::json!({})).unwrap();
        let text = serde_json::to_string(&plain).unwrap();
        for key in [
            "weight_decay",
            "clip_weights",
            "bias_correction",
            "weight_init",
        ] {
            assert!(!text.contains(key), "{key} written by default: {text}");
        }
        assert!(!text.contains("defaults"), "{text}");
        assert_eq!(plain.generation(), 2);
        assert!(!plain.bias_correction() && plain.weight_decay == 0.0);
        assert_eq!(plain.weight_init(), WeightInit::Bullet);
        let torch = spec(serde_json::json!({
            "bias_correction": true, "weight_init": "uniform"
        }))
        .unwrap();
        assert!(torch.bias_correction());
        assert_eq!(torch.weight_init(), WeightInit::Uniform);
        let bullet = spec(serde_json::json!({
            "weight_decay": 0.01, "clip_weights": 1.98, "bias_correction": false,
            "weight_init": "bullet"
        }))
        .unwrap();
        bullet.validate().unwrap();
        let back: TrainSpec =
            serde_json::from_str(&serde_json::to_string(&bullet).unwrap()).unwrap();
        assert_eq!(back, bullet);
        for (bad, field) in [
            (serde_json::json!({ "weight_decay": -0.1 }), "weight_decay"),
            (serde_json::json!({ "weight_decay": 1.0 }), "weight_decay"),
            (serde_json::json!({ "clip_weights": 0.0 }), "clip_weights"),
            (serde_json::json!({ "clip_weights": -2.0 }), "clip_weights"),
            (serde_json::json!({ "defaults": 0 }), "defaults"),
            (serde_json::json!({ "defaults": 3 }), "defaults"),
        ] {
            let e = spec(bad.clone()).unwrap().validate().unwrap_err();
            assert!(e.starts_with(field), "{bad}: {e}");
        }
        for garbage in [
            serde_json::json!("2"),
            serde_json::json!(-1),
            serde_json::json!(2.5),
        ] {
            let e = spec(serde_json::json!({ "defaults": garbage })).unwrap_err();
            assert!(e.contains("invalid"), "{garbage}: {e}");
        }
        let e = spec(serde_json::json!({ "weight_init": "xavier" })).unwrap_err();
        assert!(e.contains("expected `uniform` or `bullet`"), "{e}");
        assert_eq!(
            WeightInit::parse("xavier").unwrap_err(),
            "weight_init \"xavier\" is unknown (uniform, bullet)"
        );
    }

    /// Specs that train alike resolve equal, however they are written; an unset generation
    /// takes the one given (a resume: the run's).
    #[test]
    fn specs_that_train_alike_resolve_equal() {
        let plain = spec(serde_json::json!({})).unwrap();
        let spelled = spec(serde_json::json!({
            "defaults": 2, "bias_correction": false, "weight_init": "bullet"
        }))
        .unwrap();
        assert_ne!(plain, spelled);
        assert_eq!(plain.resolved(2), spelled.resolved(1));
        assert_ne!(plain.resolved(1), spelled.resolved(1));
        let old = plain.resolved(1);
        assert_eq!(
            (old.defaults, old.bias_correction, old.weight_init),
            (Some(1), Some(true), Some(WeightInit::Uniform))
        );
        let torch = spec(serde_json::json!({ "bias_correction": true }))
            .unwrap()
            .resolved(2);
        assert_eq!(
            (torch.bias_correction, torch.weight_init),
            (Some(true), Some(WeightInit::Bullet))
        );
        assert_eq!(torch.resolved(1), torch);
    }

    /// A run record written before defaults had generations reads back as trained: with
    /// generation 1 (bias correction, the uniform start), whatever today's defaults are; a
    /// record written now keeps its generation and explicit choices.
    #[test]
    fn a_stored_run_keeps_the_defaults_it_was_trained_with() {
        let record = |spec: serde_json::Value| {
            serde_json::json!({
                "id": "run-0123456789ab", "spec": spec, "device": "Cpu", "step": 10,
                "epoch": 0, "checkpoints": [], "train_positions": 0, "val_positions": 0,
                "val_loss": [], "material_val_loss": null, "finished": true,
                "created": "2026-11-01T00:00:00Z", "updated": "2026-11-01T00:00:00Z"
            })
        };
        let old: RunRecord =
            serde_json::from_value(record(serde_json::json!({ "shuffle": "sh-0123456789ab" })))
                .unwrap();
        assert_eq!(old.spec.defaults, Some(1));
        assert!(old.spec.bias_correction());
        assert_eq!(old.spec.weight_init(), WeightInit::Uniform);
        // Written again (a resume updates the record), it says so explicitly.
        let again: RunRecord = serde_json::from_value(serde_json::to_value(&old).unwrap()).unwrap();
        assert_eq!(again, old);
        // The trainer writes a new run's spec resolved: its generation is on record.
        let new_run = RunRecord {
            spec: spec(serde_json::json!({}))
                .unwrap()
                .resolved(defaults::GENERATION),
            ..old.clone()
        };
        let back: RunRecord =
            serde_json::from_str(&serde_json::to_string(&new_run).unwrap()).unwrap();
        assert_eq!(back.spec.defaults, Some(2));
        assert!(!back.spec.bias_correction());
        assert_eq!(back.spec.weight_init(), WeightInit::Bullet);
        // A stored spec that is no object is refused, not defaulted.
        let e = serde_json::from_value::<RunRecord>(record(serde_json::json!("sh-0123456789ab")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid type"), "{e}");
    }

    /// The feature-transformer update from a job payload: known names only, `auto` by
    /// default and left out of the stored spec (records from before it read the same).
    #[test]
    fn ft_update_takes_its_names_and_refuses_garbage() {
        let plain = spec(serde_json::json!({})).unwrap();
        assert_eq!(plain.ft_update, FtUpdate::Auto);
        assert!(
            !serde_json::to_string(&plain).unwrap().contains("ft_update"),
            "auto is not written"
        );
        let sparse = spec(serde_json::json!({ "ft_update": "sparse" })).unwrap();
        assert_eq!(sparse.ft_update, FtUpdate::Sparse);
        let back: TrainSpec =
            serde_json::from_str(&serde_json::to_string(&sparse).unwrap()).unwrap();
        assert_eq!(back, sparse);
        // A wrong name is refused with the names that exist.
        for name in ["fast", "", "Sparse"] {
            let e = spec(serde_json::json!({ "ft_update": name })).unwrap_err();
            assert!(
                e.contains("expected one of `auto`, `sparse`, `dense`"),
                "{name:?}: {e}"
            );
        }
        // A wrong type is refused too (serde's own message, as for every field).
        for garbage in [
            serde_json::json!(42),
            serde_json::json!(null),
            serde_json::json!([]),
        ] {
            let e = spec(serde_json::json!({ "ft_update": garbage })).unwrap_err();
            assert!(e.contains("invalid type"), "{garbage}: {e}");
        }
        let e = FtUpdate::parse("fast").unwrap_err();
        assert!(e.contains("auto, sparse, dense"), "{e}");
    }
}
