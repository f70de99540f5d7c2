//! `lakefish train`'s arguments and how they become a train spec (a resume takes the run's
//! settings unless given), and the net descriptions and saved layouts other commands read.

use anyhow::Context;
use lakefish_schemas::{MaskDefinition, MaskName, MaskRule};

#[derive(clap::Args)]
pub(crate) struct TrainArgs {
    /// The shuffle to train on (sh-...).
    #[arg(long)]
    pub shuffle: lakefish_schemas::names::ShuffleId,
    /// Feature set: all768, halfkp or halfka_v2_hm.
    #[arg(long, default_value = "all768")]
    pub features: String,
    /// Layer sizes: feature transformer WIDTHx2, then hidden layers (256x2-32-32, clipped
    /// ReLU, the Stockfish scheme); or WIDTHx2:screlu, the transformer's squared clipped
    /// output straight into the output (no hidden layers; fastest in search).
    #[arg(long, default_value = lakefish_schemas::train::defaults::ARCH)]
    pub arch: String,
    /// Positions per training step.
    #[arg(long, default_value_t = lakefish_schemas::train::defaults::BATCH_SIZE)]
    pub batch_size: u32,
    /// Passes over the shuffle's training chunks (with --superbatch: superbatches).
    #[arg(long, default_value_t = lakefish_schemas::train::defaults::EPOCHS)]
    pub epochs: u32,
    /// Bullet's unit: train --epochs superbatches of this many batches each, streaming
    /// through the shuffle pass after pass whatever its size; validation, checkpoints,
    /// --lr-decay and the plateau rule come after each superbatch (bullet: 6104 batches).
    #[arg(long, value_name = "BATCHES")]
    pub superbatch: Option<u64>,
    /// Stop after this many steps in total.
    #[arg(long)]
    pub max_steps: Option<u64>,
    /// Adam learning rate at the start.
    #[arg(long, default_value_t = lakefish_schemas::train::defaults::LR)]
    pub lr: f64,
    /// Learning rate factor applied after every epoch.
    #[arg(long, default_value_t = lakefish_schemas::train::defaults::LR_DECAY)]
    pub lr_decay: f64,
    /// The learning rate step by step, as JSON, instead of --lr and --lr-decay: constant
    /// {"kind":"constant","value":V}, linear {"kind":"linear","start":A,"end":B[,"steps":N]},
    /// step drops {"kind":"step","start":A,"gamma":G,"every":N}, exponential
    /// {"kind":"exponential","start":A,"gamma":G}, cosine {"kind":"cosine","start":A,"end":B
    /// [,"steps":N]}, a linear warm-up {"kind":"warmup","steps":N,"then":SCHEDULE}, or
    /// {"kind":"sequence","parts":[{"steps":N,"schedule":SCHEDULE},...]}. Steps count
    /// optimizer steps; a length left out is the run's planned steps (epochs × steps per
    /// epoch, or --max-steps if fewer: resuming with another --max-steps changes it).
    #[arg(long, value_parser = schedule_arg)]
    pub lr_schedule: Option<lakefish_schemas::schedule::Schedule>,
    /// λ step by step, as JSON (the kinds of --lr-schedule, values 0 to 1), instead of
    /// --lambda-start and --lambda-end.
    #[arg(long, value_parser = schedule_arg)]
    pub lambda_schedule: Option<lakefish_schemas::schedule::Schedule>,
    /// Plateau ("newbob"), as JSON {"factor":F[,"patience":N][,"threshold":T]}: after N
    /// epochs (1) whose validation loss did not fall below the best × (1 − T) (T 0), the
    /// learning rate is multiplied by F and the weights go back to the best epoch's.
    #[arg(long, value_parser = plateau_arg)]
    pub plateau: Option<lakefish_schemas::train::Plateau>,
    /// elmo (cross-entropy), mse (|Δ|^2) or power (|Δ|^2.6), on win probabilities.
    #[arg(long, default_value = "elmo")]
    pub loss: String,
    /// The exponent of --loss power (default 2.6).
    #[arg(long)]
    pub loss_power: Option<f64>,
    /// The sigmoid scale of the net's output, when it differs from --scale (which then
    /// scales only the data's scores): seed 004's output scale.
    #[arg(long)]
    pub prediction_scale: Option<f64>,
    /// Sigmoid scale of scores (internal units).
    #[arg(long, default_value_t = lakefish_schemas::train::defaults::SCALE)]
    pub scale: f64,
    /// Weight of the score against the game result in the target at the first epoch (it
    /// moves linearly to --lambda-end by the last).
    #[arg(long, default_value_t = lakefish_schemas::train::defaults::LAMBDA)]
    pub lambda_start: f64,
    /// λ at the last epoch (interpolated linearly from --lambda-start).
    #[arg(long, default_value_t = lakefish_schemas::train::defaults::LAMBDA)]
    pub lambda_end: f64,
    /// The shuffle's last N chunks are held out for the validation loss.
    #[arg(long, default_value_t = lakefish_schemas::train::defaults::VAL_CHUNKS)]
    pub val_chunks: u32,
    /// Checkpoint every N steps (0: at every epoch end only).
    #[arg(long, default_value_t = 0)]
    pub checkpoint_every: u64,
    /// Seeds the weight initialization and the chunk order of every epoch (exact resume needs the same).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// auto, cpu or cuda.
    #[arg(long, default_value = "auto")]
    pub device: String,
    /// The feature transformer's update: auto (sparse on the CPU wherever it runs, else
    /// dense; with --defaults 1 sparse only for halfkp and halfka_v2_hm), sparse (only the rows
    /// a batch uses, lazy Adam; CPU only; 1.2-1.6x faster than dense, and 3-4x for SCReLU nets
    /// without hidden layers, whose whole step it then runs in its own code; a described net
    /// takes it only in that shape) or dense (Adam over every weight).
    #[arg(long, default_value = "auto")]
    pub ft_update: String,
    /// The optimizer: adam, or ranger (RAdam + Lookahead, nnue-pytorch's settings: alpha
    /// 0.5, k 6, beta1 0.9, beta2 0.999, eps 1e-7, threshold 5), or ranger with some of
    /// them, e.g. `ranger:k=5,eps=1e-8`. Ranger trains the transformer densely.
    #[arg(long, value_name = "OPTIMIZER")]
    pub optimizer: Option<String>,
    /// AdamW's decoupled weight decay: each step multiplies the weights it updates by
    /// 1 − lr·D first (bullet's AdamW: 0.01). 0 is plain Adam.
    #[arg(long, default_value_t = 0.0, value_name = "D")]
    pub weight_decay: f64,
    /// Clamp every weight and bias to ±C after each step (bullet: 1.98); layers keep their
    /// tighter quantization limits.
    #[arg(long, value_name = "C")]
    pub clip_weights: Option<f64>,
    /// Adam with bias correction of its moments, as torch's Adam (the default with
    /// --defaults 1). Without it, as bullet's AdamW, its steps over the first thousand are
    /// about 3× larger.
    #[arg(long, conflicts_with = "no_bias_correction")]
    pub bias_correction: bool,
    /// Adam without bias correction (the default; kept for scripts that name it).
    #[arg(long)]
    pub no_bias_correction: bool,
    /// How a new run's weights start: bullet (the default: normal, standard deviation
    /// √(2/fan-in), biases zero, as bullet's) or uniform (the transformer in ±1/√(active
    /// features), layers in ±1/√fan-in like torch; the default with --defaults 1).
    #[arg(long, value_name = "INIT")]
    pub weight_init: Option<String>,
    /// The generation of defaults for what is not given: 2 (since 2026-11-27: no bias
    /// correction, bullet's start, the sparse update on the CPU wherever it runs; an SPRT at
    /// 8+0.08 accepted it over 1 at +82.8 ± 48.3 Elo, docs/BENCHMARKS.md) or 1 (before:
    /// bias correction, the uniform start, sparse only for halfkp and halfka_v2_hm), to
    /// repeat an older run. Unset: 2 for a new run; a resumed run keeps its own.
    #[arg(long, value_name = "N")]
    pub defaults: Option<u32>,
    /// Continue this run from its last checkpoint (same settings; more steps or epochs).
    #[arg(long)]
    pub resume: Option<lakefish_schemas::names::RunId>,
    /// Warm start: a new run from the weights of another run's checkpoint, RUN:STEP (same
    /// features and architecture).
    #[arg(long)]
    pub init_from: Option<String>,
    /// Augmentation: odd epochs (the 2nd, 4th, ...) see every position mirrored left to
    /// right (files a↔h).
    #[arg(long)]
    pub mirror: bool,
    /// Augmentation: this fraction of the positions (0 to 1; seed 003's mirror_percentage as
    /// a fraction), drawn anew every epoch from --seed, is seen mirrored left to right.
    #[arg(long, conflicts_with = "mirror")]
    pub mirror_fraction: Option<f64>,
    /// The net as a NetSpec file (TOML or JSON; examples in infra/nets/, docs/NETSPEC.md)
    /// instead of --features and --arch, or a preset's name as FEATURES:ARCH
    /// (all768:256x2:screlu, halfka_v2_hm:stockfish-15.1) when no such file exists.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["features", "arch"])]
    pub net_spec: Option<std::path::PathBuf>,
    /// Filter the chunks' rows at load time by rules that need no draw (quiet, all,
    /// early-skip=N, simple-eval-skip=N; as `lakefish mask --rule`); default quiet when a
    /// --filter-* flag is given. Random rules (random-skip, wld, piece-count) are masks.
    #[arg(long = "filter-rule", value_name = "RULE")]
    pub filter_rules: Vec<String>,
    /// Filter the chunks' rows at load time: quiet rows from this ply on.
    #[arg(long)]
    pub filter_min_ply: Option<u16>,
    /// Filter the chunks' rows at load time: quiet rows with |score| at most this.
    #[arg(long)]
    pub filter_max_abs_score: Option<u16>,
    /// CPU threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
}

impl TrainArgs {
    pub(crate) fn spec(&self) -> anyhow::Result<lakefish_schemas::TrainSpec> {
        let spec = lakefish_schemas::TrainSpec {
            shuffle: self.shuffle.clone(),
            features: lakefish_schemas::FeatureSet::parse(&self.features)
                .map_err(anyhow::Error::msg)?,
            arch: self.arch.clone(),
            batch_size: self.batch_size,
            epochs: self.epochs,
            superbatch: self.superbatch,
            max_steps: self.max_steps,
            lr: self.lr,
            lr_decay: self.lr_decay,
            lr_schedule: self.lr_schedule.clone().map(Box::new),
            lambda_schedule: self.lambda_schedule.clone().map(Box::new),
            plateau: self.plateau.clone(),
            loss: lakefish_schemas::LossName::parse(&self.loss).map_err(anyhow::Error::msg)?,
            loss_power: self.loss_power,
            scale: self.scale,
            prediction_scale: self.prediction_scale,
            lambda_start: self.lambda_start,
            lambda_end: self.lambda_end,
            val_chunks: self.val_chunks,
            checkpoint_every: self.checkpoint_every,
            seed: self.seed,
            device: lakefish_schemas::DeviceChoice::parse(&self.device)
                .map_err(anyhow::Error::msg)?,
            ft_update: lakefish_schemas::train::FtUpdate::parse(&self.ft_update)
                .map_err(anyhow::Error::msg)?,
            optimizer: match &self.optimizer {
                None => None,
                Some(o) => parse_optimizer(o)?
                    .map(|r| Box::new(lakefish_schemas::train::Optimizer::Ranger(r))),
            },
            weight_decay: self.weight_decay,
            clip_weights: self.clip_weights,
            bias_correction: match (self.bias_correction, self.no_bias_correction) {
                (true, _) => Some(true),
                (_, true) => Some(false),
                _ => None,
            },
            weight_init: self
                .weight_init
                .as_deref()
                .map(lakefish_schemas::train::WeightInit::parse)
                .transpose()
                .map_err(anyhow::Error::msg)?,
            defaults: self.defaults,
            resume: self.resume.clone(),
            init_from: match &self.init_from {
                None => None,
                Some(s) => {
                    let (run, step) = s
                        .split_once(':')
                        .context("--init-from is RUN:STEP, e.g. run-0123456789ab:204")?;
                    Some(lakefish_schemas::train::InitFrom {
                        run: run.parse().context("--init-from RUN:STEP")?,
                        step: step
                            .parse()
                            .context("--init-from RUN:STEP: STEP is a number")?,
                    })
                }
            },
            mirror: self.mirror,
            mirror_fraction: self.mirror_fraction,
            filter: match (
                self.filter_rules.is_empty(),
                self.filter_min_ply.is_some() || self.filter_max_abs_score.is_some(),
            ) {
                (true, false) => None,
                _ => Some(Box::new(MaskDefinition {
                    name: MaskName::new("train-filter").expect("a valid name"),
                    rules: match self.filter_rules.is_empty() {
                        true => vec![MaskRule::Quiet],
                        false => self
                            .filter_rules
                            .iter()
                            .map(|r| {
                                MaskRule::parse(r)
                                    .map_err(|e| anyhow::anyhow!("--filter-rule {r}: {e}"))
                            })
                            .collect::<anyhow::Result<_>>()?,
                    },
                    min_ply: self.filter_min_ply,
                    max_abs_score: self.filter_max_abs_score,
                    seed: 0,
                })),
            },
            net: match &self.net_spec {
                None => None,
                Some(path) => Some(read_net_spec("--net-spec", &path.to_string_lossy())?),
            },
        };
        spec.validate().map_err(anyhow::Error::msg)?;
        Ok(spec)
    }
}

/// `--optimizer`: `adam` (None), `ranger`, or `ranger:KEY=VALUE,...` over Ranger's fields.
fn parse_optimizer(arg: &str) -> anyhow::Result<Option<lakefish_schemas::train::Ranger>> {
    let (name, settings) = arg.split_once(':').unwrap_or((arg, ""));
    match name {
        "adam" if settings.is_empty() => return Ok(None),
        "ranger" => {}
        _ => anyhow::bail!("--optimizer {arg}: adam, ranger or ranger:KEY=VALUE,..."),
    }
    let mut fields = serde_json::json!({});
    for kv in settings.split(',').filter(|s| !s.is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .with_context(|| format!("--optimizer {arg}: {kv:?} is not KEY=VALUE"))?;
        let v: f64 = v
            .parse()
            .with_context(|| format!("--optimizer {arg}: {k}={v:?} is not a number"))?;
        fields[k.trim()] = match k.trim() {
            "k" if v >= 1.0 && v.fract() == 0.0 => serde_json::json!(v as u64),
            "k" => anyhow::bail!("--optimizer {arg}: k is a whole number of steps, at least 1"),
            _ => serde_json::json!(v),
        };
    }
    let r: lakefish_schemas::train::Ranger =
        serde_json::from_value(fields).map_err(|e| anyhow::anyhow!("--optimizer {arg}: {e}"))?;
    r.validate()
        .map_err(|e| anyhow::anyhow!("--optimizer {arg}: {e}"))?;
    Ok(Some(r))
}

/// A NetSpec from a file (TOML or JSON), or, when no such file exists, a shipped one by name
/// (infra/nets/: bullet-*, buckets-512, halfka-256, threats-halfka-256) or a preset's name as
/// FEATURES:ARCH; errors start with `flag`.
pub(crate) fn read_net_spec(
    flag: &str,
    arg: &str,
) -> anyhow::Result<lakefish_schemas::netspec::NetSpec> {
    let path = std::path::Path::new(arg);
    let shipped = || {
        lakefish_schemas::layout::SHIPPED_NETS
            .iter()
            .chain(lakefish_schemas::netspec::EXAMPLE_NETS)
    };
    if !path.exists()
        && let Some((_, text)) = shipped().find(|(n, _)| *n == arg)
    {
        return lakefish_schemas::netspec::NetSpec::parse(text)
            .map_err(|e| anyhow::anyhow!("{flag} {arg}: {e}"));
    }
    if !path.exists()
        && let Some((features, arch)) = arg.split_once(':')
    {
        return lakefish_schemas::netspec::NetSpec::preset(features, arch).map_err(|e| {
            anyhow::anyhow!(
                "{flag} {arg}: no such file, and not a preset name (FEATURES:ARCH): {e}"
            )
        });
    }
    if !path.exists() {
        anyhow::bail!(
            "{flag} {arg}: no such file, not a shipped net ({}), nor a preset name FEATURES:ARCH",
            shipped().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
        );
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("{flag}: reading {arg}"))?;
    lakefish_schemas::netspec::NetSpec::parse(&text)
        .map_err(|e| anyhow::anyhow!("{flag} {arg}: {e}"))
}

/// A saved layout from a file (TOML or JSON), or one lakefish ships (infra/layouts/) by its
/// name when no such file exists; errors start with `flag`.
pub(crate) fn read_layout(
    flag: &str,
    arg: &str,
) -> anyhow::Result<lakefish_schemas::layout::Layout> {
    use lakefish_schemas::layout::{Layout, SHIPPED};
    let path = std::path::Path::new(arg);
    let text = if path.exists() {
        std::fs::read_to_string(path).with_context(|| format!("{flag}: reading {arg}"))?
    } else if let Some((_, text)) = SHIPPED.iter().find(|(n, _)| *n == arg) {
        text.to_string()
    } else {
        anyhow::bail!(
            "{flag} {arg}: no such file, and not a shipped layout ({})",
            SHIPPED
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    Layout::parse(&text).map_err(|e| anyhow::anyhow!("{flag} {arg}: {e}"))
}

/// The settings `train --resume RUN` takes from the run unless given: (flag ids, spec key).
/// The net is one setting, given as --features/--arch or as --net-spec: any of them given,
/// none is taken from the run.
const NET_FLAGS: &[&str] = &["features", "arch", "net_spec"];
const RESUMED_SETTINGS: &[(&[&str], &str)] = &[
    (NET_FLAGS, "features"),
    (NET_FLAGS, "arch"),
    (NET_FLAGS, "net"),
    (&["batch_size"], "batch_size"),
    (&["superbatch"], "superbatch"),
    (&["lr"], "lr"),
    (&["lr_decay"], "lr_decay"),
    (&["lr_schedule"], "lr_schedule"),
    (&["lambda_schedule"], "lambda_schedule"),
    (&["plateau"], "plateau"),
    (&["loss"], "loss"),
    (&["loss_power"], "loss_power"),
    (&["scale"], "scale"),
    (&["prediction_scale"], "prediction_scale"),
    (&["lambda_start"], "lambda_start"),
    (&["lambda_end"], "lambda_end"),
    (&["val_chunks"], "val_chunks"),
    (&["checkpoint_every"], "checkpoint_every"),
    (&["seed"], "seed"),
    (&["ft_update"], "ft_update"),
    (&["optimizer"], "optimizer"),
    (&["weight_decay"], "weight_decay"),
    (&["clip_weights"], "clip_weights"),
    (
        &["bias_correction", "no_bias_correction"],
        "bias_correction",
    ),
    (&["weight_init"], "weight_init"),
    (&["defaults"], "defaults"),
    (&["mirror"], "mirror"),
    (&["mirror_fraction"], "mirror_fraction"),
    (&["init_from"], "init_from"),
    (
        &["filter_rules", "filter_min_ply", "filter_max_abs_score"],
        "filter",
    ),
];

impl TrainArgs {
    /// The spec of `train --resume RUN`: every setting not given on the command line (`given`
    /// says which flags were) is the run's, so `--resume RUN --epochs 20` goes on with the
    /// run as it was; one given differently is refused by the trainer, naming it.
    pub(crate) fn resumed_spec(
        &self,
        run: &lakefish_schemas::TrainSpec,
        given: impl Fn(&str) -> bool,
    ) -> anyhow::Result<lakefish_schemas::TrainSpec> {
        let mut spec = serde_json::to_value(self.spec()?)?;
        let run = serde_json::to_value(run)?;
        let (Some(spec_fields), Some(run_fields)) = (spec.as_object_mut(), run.as_object()) else {
            anyhow::bail!("a training spec is a JSON object");
        };
        for (flags, key) in RESUMED_SETTINGS {
            if flags.iter().any(|f| given(f)) {
                continue;
            }
            match run_fields.get(*key) {
                Some(v) => spec_fields.insert(key.to_string(), v.clone()),
                None => spec_fields.remove(*key),
            };
        }
        let spec: lakefish_schemas::TrainSpec = serde_json::from_value(spec)?;
        spec.validate().map_err(anyhow::Error::msg)?;
        Ok(spec)
    }
}

/// A schedule given on the command line as JSON.
fn schedule_arg(s: &str) -> Result<lakefish_schemas::schedule::Schedule, String> {
    serde_json::from_str(s).map_err(|e| format!("not a schedule ({e}); see --help for the kinds"))
}

/// A plateau rule given on the command line as JSON.
fn plateau_arg(s: &str) -> Result<lakefish_schemas::train::Plateau, String> {
    serde_json::from_str(s).map_err(|e| {
        format!("not a plateau rule ({e}): {{\"factor\":0.5,\"patience\":1,\"threshold\":0.001}}")
    })
}
