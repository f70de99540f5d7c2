//! `train`: a run over a shuffle's chunks, with checkpoints that resume exactly.
//!
//! Lake layout: `runs/<id>/run.json` (the record), `runs/<id>/checkpoints/step-NNNNNNNNN.ot`
//! (weights, Adam moments, position in the data), `runs/<id>/metrics.parquet`.
//!
//! Exact resume: batches come in an order fixed by the shuffle, the seed and the epoch
//! (`loader`), the optimizer state is checkpointed with the weights, and a checkpoint records
//! the epoch and batch it stopped at; a resumed run skips to there and continues identically.

use crate::TrainError;
pub use crate::adam::{Adam, AdamOptions};
use crate::loader::{Batch, ChunkSource, RowOptions, stream_batches};
use crate::model::{BatchTensors, Loss, Model, ModelArch, loss, target};
use crate::recipes::{Metrics, lambda_at, plateau_step};
use crate::sparse::SparseBags;
use arrow_array::RecordBatch;
use lakefish_engine::features::FeatureSetKind;
use lakefish_jobs::{JobContext, Lake};
use lakefish_schemas::netspec::{Inputs, NetSpec};
use lakefish_schemas::train::{FtUpdate, METRICS_FILE, RUN_FILE, TrainedNet, WeightInit};
use lakefish_schemas::{
    DeviceChoice, FeatureSet, JobId, LossName, Progress, RunRecord, ShuffleManifest, TrainSpec,
};
use std::io::Cursor;
use std::sync::Arc;
use std::time::Instant;
use tch::{Device, Tensor};

pub(crate) fn checkpoint_name(step: u64) -> String {
    format!("step-{step:09}.ot")
}

/// Reads shuffled chunks from the lake.
pub struct LakeChunks {
    pub ctx: JobContext,
    pub keys: Vec<String>,
}

impl ChunkSource for LakeChunks {
    fn chunks(&self) -> usize {
        self.keys.len()
    }
    fn name(&self, i: usize) -> String {
        self.keys[i].clone()
    }
    fn read(&self, i: usize, columns: &[&str]) -> Result<RecordBatch, TrainError> {
        let key = &self.keys[i];
        let bytes = self
            .ctx
            .block_on(self.ctx.lake.get(key))?
            .ok_or_else(|| TrainError::Data {
                chunk: key.clone(),
                reason: "missing from the lake".into(),
            })?;
        let bad = |e: String| TrainError::Data {
            chunk: key.clone(),
            reason: e,
        };
        lakefish_lake::parts::read_chunk(bytes, columns).map_err(bad)
    }
}

/// The resolved settings of a run.
pub(crate) struct Setup {
    pub(crate) features: FeatureSetKind,
    /// A description's inputs where the loader's `all768` indices are not them (king
    /// buckets, threats, combinations).
    pub(crate) remap: Option<crate::spec_model::InputRemap>,
    pub(crate) arch: ModelArch,
    loss: Loss,
    device: Device,
    /// The transformer's update touches only the rows a batch uses ([`crate::sparse`]).
    sparse_ft: bool,
    pub(crate) train: Vec<usize>,
    pub(crate) val: Vec<usize>,
    pub(crate) source: Arc<LakeChunks>,
}

impl Setup {
    /// The model's inputs from the loader's: a described net's family applied.
    pub(crate) fn remap(&self, b: &mut Batch) -> Result<(), TrainError> {
        match &self.remap {
            Some(r) => crate::spec_model::remap_batch(r, b).map_err(TrainError::Internal),
            None => Ok(()),
        }
    }
}

/// `--ft-update auto` updates the transformer sparsely on the CPU for feature sets wider
/// than this (halfkp, halfka_v2_hm), densely for all768.
pub const SPARSE_MIN_INPUTS: usize = 768;

/// `--ft-update auto` on the CPU trains a described net outside the fused step sparsely when
/// its inputs are wider than this (threats: 59,808 and more); narrower ones stay dense.
pub const SPARSE_MIN_SPEC_INPUTS: usize = 1 << 16;

/// The device a run trains on: `cpu`; `cuda` (an error saying why when CUDA cannot be used
/// here); `auto`, CUDA when it can be used and the CPU otherwise.
///
/// The CUDA backend is loaded whatever the name: libtorch answers "is there CUDA?" once per
/// process, so a CPU run asking first (its `manual_seed` does) would leave a later GPU run in
/// the same worker without its GPU.
pub fn select_device(choice: DeviceChoice) -> Result<Device, TrainError> {
    let backend = crate::cuda::load_backend();
    if choice == DeviceChoice::Cpu {
        return Ok(Device::Cpu);
    }
    let usable = backend.is_ok() && tch::Cuda::is_available();
    let why_not = match backend {
        Err(why) => format!("libtorch's CUDA backend is unavailable: {why}"),
        Ok(()) => "the CUDA backend loaded but sees no GPU".into(),
    };
    match (choice, usable) {
        (_, true) => Ok(Device::Cuda(0)),
        (DeviceChoice::Cuda, false) => Err(TrainError::Spec(format!("--device cuda: {why_not}"))),
        _ => {
            // Silent on machines without an NVIDIA driver (the CPU set-up never has the
            // backend's libraries); loud where a GPU sits unused.
            if std::path::Path::new("/proc/driver/nvidia/version").exists() {
                tracing::warn!(
                    "an NVIDIA driver is present but training runs on the CPU: {why_not} (make cuda installs torch's CUDA libraries)"
                );
            } else {
                tracing::debug!("training on the CPU: {why_not}");
            }
            Ok(Device::Cpu)
        }
    }
}

/// Can this process train on a CUDA GPU? `Err` says why not. What a worker checks at start
/// to take GPU-only jobs (`lakefish worker --gpu`).
pub fn cuda_usable() -> Result<(), String> {
    crate::cuda::load_backend()
        .map_err(|why| format!("libtorch's CUDA backend is unavailable: {why}"))?;
    if tch::Cuda::is_available() {
        Ok(())
    } else {
        Err("the CUDA backend loaded but sees no GPU".into())
    }
}

/// The engine's feature set for the name a spec gives.
pub fn feature_set(name: FeatureSet) -> FeatureSetKind {
    match name {
        FeatureSet::All768 => FeatureSetKind::All768,
        FeatureSet::HalfKp => FeatureSetKind::HalfKp,
        FeatureSet::HalfKaV2Hm => FeatureSetKind::HalfKaV2Hm,
    }
}

/// Whether the transformer takes the sparse update: as asked, or for `auto` as the spec's
/// generation of defaults says; sparse where it cannot run is an error naming why.
fn sparse_ft(
    update: FtUpdate,
    defaults: u32,
    arch: &ModelArch,
    features: FeatureSetKind,
    device: Device,
) -> Result<bool, TrainError> {
    Ok(match (update, device) {
        // Generation 2: sparse on the CPU wherever it runs (faster on every preset, 2-4x with
        // the fused step; docs/BENCHMARKS.md, issue 39).
        // Described nets: the fused step where their shape allows; else sparse only for
        // inputs wider than SPARSE_MIN_SPEC_INPUTS (threats), where libtorch's dense backward
        // costs ~80 ns per transformer weight each step (docs/BENCHMARKS.md, issue 43).
        (FtUpdate::Auto, d) if defaults >= 2 => {
            d == Device::Cpu
                && match &arch {
                    ModelArch::Spec(net) => {
                        net.sparse_update().is_ok() || net.inputs.count() > SPARSE_MIN_SPEC_INPUTS
                    }
                    _ => true,
                }
        }
        // Generation 1: sparse on the CPU for the wide sets only. all768 measured faster
        // sparse too, but with bias-corrected Adam its little nets trained on little data (the
        // nightly pipeline's test) came out weaker with lazy Adam (docs/BENCHMARKS.md,
        // "Sparse on the CPU").
        (FtUpdate::Auto, _) if matches!(arch, ModelArch::Spec(_)) => false,
        (FtUpdate::Auto, d) => d == Device::Cpu && features.inputs() > SPARSE_MIN_INPUTS,
        // A described net trains sparsely in the fused step where its shape allows, else in
        // the general one (the transformer's rows sparse, every other tensor dense).
        (FtUpdate::Sparse, Device::Cpu) => true,
        (FtUpdate::Sparse, d) => {
            return Err(TrainError::Spec(format!(
                "--ft-update sparse runs on the CPU only; this run trains on {d:?} (use auto or dense)"
            )));
        }
        (FtUpdate::Dense, _) => false,
    })
}

pub(crate) fn resolve(
    ctx: &JobContext,
    spec: &TrainSpec,
) -> Result<(Setup, ShuffleManifest), TrainError> {
    // The checks the API made at the door, made again: a queue can be written by others.
    lakefish_jobs::admission::check_train(spec)?;
    let (features, arch, remap) = match spec.trained_net().map_err(TrainError::Spec)? {
        TrainedNet::Preset(features, arch) => {
            (feature_set(features), ModelArch::parse(&arch)?, None)
        }
        TrainedNet::Described(net) => {
            let remap = crate::spec_model::input_remap(&net)
                .map_err(|e| TrainError::Spec(format!("net.{e}")))?;
            let features = match net.inputs {
                Inputs::Halfkp {} => FeatureSetKind::HalfKp,
                Inputs::HalfkaV2Hm {} => FeatureSetKind::HalfKaV2Hm,
                // The others: all768 from the loader, remapped per batch.
                Inputs::PieceSquare {}
                | Inputs::KingBuckets { .. }
                | Inputs::Threats {}
                | Inputs::Axes {}
                | Inputs::Mobility {}
                | Inputs::PairwiseAxes {}
                | Inputs::Combined { .. } => FeatureSetKind::All768,
            };
            (features, ModelArch::Spec(Box::new(net)), remap)
        }
    };
    let loss = match spec.loss {
        LossName::Elmo => Loss::Elmo,
        LossName::Mse => Loss::Power(2.0),
        LossName::Power => Loss::Power(spec.loss_power.unwrap_or(2.6)),
    };
    let device = select_device(spec.device)?;
    // Ranger updates every weight each step (validated: not with `sparse`).
    let sparse_ft = spec.ranger().is_none()
        && sparse_ft(spec.ft_update, spec.generation(), &arch, features, device)?;
    let manifest = ctx
        .block_on(lakefish_jobs::shuffle::read_shuffle_manifest(
            &ctx.lake,
            &spec.shuffle,
        ))?
        .ok_or_else(|| {
            TrainError::Spec(format!(
                "shuffle {} does not exist (no committed manifest)",
                spec.shuffle
            ))
        })?;
    let n = manifest.chunks.len();
    let val = spec.val_chunks as usize;
    if n <= val {
        return Err(TrainError::Spec(format!(
            "shuffle {} has {n} chunks: at least {} are needed to hold {val} out for validation",
            spec.shuffle,
            val + 1
        )));
    }
    let keys = manifest
        .chunks
        .iter()
        .map(|c| {
            format!(
                "{}/{}",
                lakefish_jobs::shuffle::shuffle_prefix(&manifest.id),
                c.name
            )
        })
        .collect();
    let source = Arc::new(LakeChunks {
        ctx: ctx.clone(),
        keys,
    });
    Ok((
        Setup {
            features,
            remap,
            arch,
            loss,
            device,
            sparse_ft,
            train: (0..n - val).collect(),
            val: (n - val..n).collect(),
            source,
        },
        manifest,
    ))
}

/// Chunk order of an epoch: the training chunks permuted by (seed, epoch).
pub fn epoch_order(train: &[usize], seed: u64, epoch: u32) -> Vec<usize> {
    let mut order = train.to_vec();
    let mut rng = lakefish_engine::random_games::SplitMix(seed ^ ((epoch as u64) << 32) ^ 0x7EA1);
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    order
}

/// One optimizer step on a batch: forward, loss, backward, Adam, clipping. Returns the loss.
pub fn train_step(
    model: &Model,
    adam: &mut Adam,
    batch: &BatchTensors,
    kind: Loss,
    lambda: f64,
    sigmoid: impl Into<crate::model::Sigmoid>,
    lr: f64,
) -> Result<Tensor, TrainError> {
    let sigmoid = sigmoid.into();
    for (_, p) in &model.params {
        let mut g = p.grad();
        if g.defined() {
            let _ = g.zero_();
        }
    }
    if crate::fused::applies(model, adam) {
        let args = crate::fused::StepArgs {
            kind,
            lambda,
            scale: sigmoid.target,
            prediction_scale: sigmoid.prediction,
            lr,
            baseline: false,
        };
        let l = crate::fused::step(model, adam, batch, args)
            .map_err(|e| TrainError::Internal(format!("fused step: {e}")))?;
        model.clip();
        return Ok(Tensor::from(l));
    }
    let tgt = target(&batch.score, &batch.result, lambda, sigmoid.target);
    let mut bags = SparseBags::default();
    let out = model.forward_with(batch, adam.sparse.then_some(&mut bags));
    let l = loss(
        kind,
        &(out * model.arch.output_scale()),
        &tgt,
        sigmoid.prediction,
    );
    l.backward();
    adam.update(model, lr, &bags)?;
    model.clip();
    // The loss stays on the device: reading it here would make the CPU wait for every step
    // to finish on a GPU; the training loop reads the sum every metrics row.
    Ok(l.detach())
}

/// libtorch's thread count set for a while, `restore` again when dropped (also on an error).
/// Fused steps run with one: libtorch's idle OpenMP threads would spin on their cores.
pub struct TorchThreads(usize);

impl TorchThreads {
    pub fn set(n: usize, restore: usize) -> TorchThreads {
        tch::set_num_threads(n as i32);
        TorchThreads(restore)
    }
}

impl Drop for TorchThreads {
    fn drop(&mut self) {
        tch::set_num_threads(self.0 as i32);
    }
}

/// Where a run stands in its data, saved in every checkpoint.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Position {
    step: u64,
    /// The epoch, or the superbatch.
    epoch: u32,
    /// Batches of this epoch (superbatch) already trained.
    batch: u64,
    /// The pass over the data, and its batches already trained: the epoch and its batch
    /// without superbatches.
    pass: u32,
    pass_batch: u64,
}

/// Name of the checkpoint tensor that holds the net's description (UTF-8 JSON of its NetSpec):
/// a checkpoint says what net it is without the run record beside it.
pub const NETSPEC_TENSOR: &str = "netspec";

fn save_checkpoint(
    model: &Model,
    adam: &Adam,
    at: Position,
    netspec: &[u8],
) -> Result<Vec<u8>, TrainError> {
    let mut named: Vec<(String, Tensor)> = model
        .params
        .iter()
        .map(|(n, t)| (n.clone(), t.detach().to_device(Device::Cpu)))
        .collect();
    for (i, (n, _)) in model.params.iter().enumerate() {
        named.push((format!("adam.m.{n}"), adam.m[i].to_device(Device::Cpu)));
        named.push((format!("adam.v.{n}"), adam.v[i].to_device(Device::Cpu)));
        if let Some((_, slow)) = &adam.ranger {
            named.push((format!("ranger.slow.{n}"), slow[i].to_device(Device::Cpu)));
        }
    }
    let meta = [
        at.step as i64,
        at.epoch as i64,
        at.batch as i64,
        adam.step,
        at.pass as i64,
        at.pass_batch as i64,
    ];
    named.push(("position".into(), Tensor::from_slice(&meta)));
    named.push((NETSPEC_TENSOR.into(), Tensor::from_slice(netspec)));
    let mut out = Vec::new();
    Tensor::save_multi_to_stream(&named, &mut out)?;
    Ok(out)
}

/// Loads a checkpoint into a model of the same architecture; an error naming the tensor that
/// does not fit otherwise.
pub(crate) fn load_checkpoint(
    bytes: &[u8],
    key: &str,
    model: &Model,
    adam: &mut Adam,
    device: Device,
) -> Result<Position, TrainError> {
    load_tensors(bytes, key, model, Some(adam), device)
}

/// The weights of a checkpoint only (a warm start): the optimizer and position start afresh.
pub(crate) fn load_weights(
    bytes: &[u8],
    key: &str,
    model: &Model,
    device: Device,
) -> Result<(), TrainError> {
    load_tensors(bytes, key, model, None, device).map(drop)
}

fn load_tensors(
    bytes: &[u8],
    key: &str,
    model: &Model,
    adam: Option<&mut Adam>,
    device: Device,
) -> Result<Position, TrainError> {
    let bad = |reason: String| TrainError::Checkpoint {
        key: key.to_string(),
        reason,
    };
    let tensors = Tensor::load_multi_from_stream_with_device(Cursor::new(bytes), device)
        .map_err(|e| bad(e.to_string()))?;
    let get = |name: &str| {
        tensors
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t)
            .ok_or_else(|| bad(format!("no tensor {name}")))
    };
    tch::no_grad(|| -> Result<(), TrainError> {
        for (i, (name, p)) in model.params.iter().enumerate() {
            let mut pairs = vec![(get(name)?, p)];
            if let Some(adam) = adam.as_deref() {
                pairs.push((get(&format!("adam.m.{name}"))?, &adam.m[i]));
                pairs.push((get(&format!("adam.v.{name}"))?, &adam.v[i]));
                if let Some((_, slow)) = &adam.ranger {
                    pairs.push((get(&format!("ranger.slow.{name}"))?, &slow[i]));
                }
            }
            for (t, dst) in pairs {
                if t.size() != dst.size() {
                    return Err(bad(format!(
                        "tensor {name} has shape {:?}, this architecture needs {:?} (a checkpoint of another architecture?)",
                        t.size(),
                        dst.size()
                    )));
                }
                dst.shallow_clone().copy_(t);
            }
        }
        Ok(())
    })?;
    let pos = get("position")?;
    let v: Vec<i64> =
        Vec::<i64>::try_from(pos.to_device(Device::Cpu)).map_err(|e| bad(e.to_string()))?;
    // Four values before superbatches (the pass was the epoch), six since.
    if v.len() != 4 && v.len() != 6 {
        return Err(bad("position tensor has the wrong length".into()));
    }
    if let Some(adam) = adam {
        adam.step = v[3];
    }
    Ok(Position {
        step: v[0] as u64,
        epoch: v[1] as u32,
        batch: v[2] as u64,
        pass: v.get(4).map_or(v[1] as u32, |&p| p as u32),
        pass_batch: v.get(5).map_or(v[2] as u64, |&b| b as u64),
    })
}

/// Writes a run's `run.json`, then its catalogue entry.
async fn put_run_record(lake: &Lake, prefix: &str, record: &RunRecord) -> Result<(), TrainError> {
    let bytes =
        serde_json::to_vec_pretty(record).map_err(|e| TrainError::Internal(e.to_string()))?;
    lake.put(&format!("{prefix}/{RUN_FILE}"), bytes).await?;
    lakefish_jobs::nets::index_run(lake, record).await?;
    Ok(())
}

/// `runs/<id>/run.json`, read the one way every crate reads it.
pub use lakefish_jobs::nets::{MetricsRow, read_metrics, read_run, run_prefix};

/// Validation loss over the held-out chunks, plus the material-only baseline's.
fn validate(
    setup: &Setup,
    model: &Model,
    spec: &TrainSpec,
    lambda: f64,
    threads: usize,
) -> Result<(f64, f64, u64), TrainError> {
    let mut batches = stream_batches(
        setup.source.clone(),
        setup.val.clone(),
        setup.features,
        RowOptions {
            filter: spec.filter.as_deref().cloned(),
            mirror: crate::loader::Mirror::None,
            material: true,
            partial_last: true,
        },
        spec.batch_size.min(4096) as usize,
        0,
        threads,
    );
    let (mut total, mut material, mut n) = (0.0, 0.0, 0u64);
    while let Some(b) = batches.next() {
        let mut b = b?;
        setup.remap(&mut b)?;
        let t = BatchTensors::new(&b, setup.device);
        let target = target(&t.score, &t.result, lambda, spec.scale);
        let rows = b.len() as f64;
        let l = tch::no_grad(|| {
            let pred = model.forward(&t) * model.arch.output_scale();
            loss(setup.loss, &pred, &target, spec.prediction_scale()).double_value(&[])
        });
        let m = material_tensor(&b, setup.device);
        let ml = loss(setup.loss, &m, &target, spec.prediction_scale()).double_value(&[]);
        total += l * rows;
        material += ml * rows;
        n += b.len() as u64;
        batches.give_back(b);
    }
    if n == 0 {
        return Err(TrainError::Spec(
            "the validation chunks hold no usable rows".into(),
        ));
    }
    Ok((total / n as f64, material / n as f64, n))
}

/// The material-only predictor: each row's material balance (see `loader::material`).
fn material_tensor(b: &Batch, device: Device) -> Tensor {
    Tensor::from_slice(&b.material)
        .to_device(device)
        .unsqueeze(1)
}

/// The settings in which `asked` differs from the run's `was`: "lr_decay 1 (the run: 0.99)".
fn spec_differences(was: &TrainSpec, asked: &TrainSpec) -> String {
    let (Ok(serde_json::Value::Object(was)), Ok(serde_json::Value::Object(asked))) =
        (serde_json::to_value(was), serde_json::to_value(asked))
    else {
        return "unreadable".into();
    };
    let shown = |v: Option<&serde_json::Value>| v.map_or("none".to_string(), |v| v.to_string());
    let mut keys: Vec<&String> = was.keys().chain(asked.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| was.get(*k) != asked.get(*k))
        .map(|k| {
            format!(
                "{k} {} (the run: {})",
                shown(asked.get(k)),
                shown(was.get(k))
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn train(ctx: &JobContext, job: &JobId, spec: &TrainSpec) -> Result<RunRecord, TrainError> {
    let now = lakefish_lake::records::now;
    // The run to resume (same settings except the step budget and device), or a new one;
    // every setting written out, a resume's unset generation of defaults being its run's.
    let (id, existing, spec) = match &spec.resume {
        Some(id) => {
            let rec = ctx
                .block_on(read_run(&ctx.lake, id))?
                .ok_or_else(|| TrainError::Spec(format!("run {id} does not exist")))?;
            let asked = spec.resolved(rec.spec.generation());
            let mut same = rec.spec.resolved(rec.spec.generation());
            same.max_steps = asked.max_steps;
            same.epochs = asked.epochs;
            same.resume = asked.resume.clone();
            // A run may move between a GPU and the CPU (bit-exact only on the same device).
            same.device = asked.device;
            if same != asked {
                return Err(TrainError::Spec(format!(
                    "run {id} was trained with other settings ({}); resume it with the same ones",
                    spec_differences(&same, &asked)
                )));
            }
            (id.clone(), Some(rec), asked)
        }
        None => {
            // The job id's last 12 hex digits are random (UUIDv7). The same job delivered
            // again (its worker died) finds its run and goes on from the last checkpoint.
            let chars: Vec<char> = job.as_str().chars().collect();
            let tail: String = chars[chars.len().saturating_sub(12)..].iter().collect();
            let id = lakefish_schemas::names::RunId::new(&format!("run-{tail}"))
                .map_err(|e| TrainError::Spec(format!("job id {job}: {e}")))?;
            let asked = spec.resolved(lakefish_schemas::train::defaults::GENERATION);
            let rec = ctx.block_on(read_run(&ctx.lake, &id))?;
            // Never train over a run that is not this job's: its checkpoints stay as they are.
            if let Some(rec) = &rec {
                let was = rec.spec.resolved(rec.spec.generation());
                if was != asked {
                    return Err(TrainError::Spec(format!(
                        "run {id} already exists with other settings ({}); it is left as it is",
                        spec_differences(&was, &asked)
                    )));
                }
            }
            (id, rec, asked)
        }
    };
    let (setup, manifest) = resolve(ctx, &spec)?;
    let threads = ctx.threads.max(1);
    tch::set_num_threads(threads as i32);
    crate::keep_tensors_in_heap();
    let record = match existing {
        Some(mut rec) => {
            if spec.resume.is_some() {
                rec.spec.max_steps = spec.max_steps;
                rec.spec.epochs = spec.epochs;
                rec.spec.device = spec.device;
                rec.device = format!("{:?}", setup.device);
            }
            rec.finished = false;
            rec
        }
        None => RunRecord {
            id: id.clone(),
            spec: spec.clone(),
            device: format!("{:?}", setup.device),
            step: 0,
            epoch: 0,
            checkpoints: Vec::new(),
            train_positions: setup.train.iter().map(|&i| manifest.chunks[i].rows).sum(),
            val_positions: 0,
            val_loss: Vec::new(),
            material_val_loss: None,
            finished: false,
            error: None,
            resumed_at: Vec::new(),
            plateau: None,
            created: now(),
            updated: now(),
        },
    };
    continue_run(ctx, &spec, setup, id, record)
}

/// Trains run `id` from its last checkpoint (or from scratch) until its step or epoch budget.
fn continue_run(
    ctx: &JobContext,
    spec: &TrainSpec,
    setup: Setup,
    id: lakefish_schemas::names::RunId,
    mut record: RunRecord,
) -> Result<RunRecord, TrainError> {
    match train_run(ctx, spec, setup, &id, &mut record) {
        Ok(()) => Ok(record),
        // Storage that did not answer: the queue tries again, and the run is not failed.
        Err(TrainError::Job(j)) if j.is_transient() => Err(TrainError::Job(j)),
        Err(e) => {
            // The run says why it stopped (a resume clears it), instead of looking as if it
            // were still training; a transient error is retried first.
            record.error = Some(e.to_string());
            record.updated = lakefish_lake::records::now();
            if let Err(w) = ctx.block_on(put_run_record(&ctx.lake, &run_prefix(&id), &record)) {
                tracing::warn!(run = %id, "could not record the run's error: {w}");
            }
            Err(e)
        }
    }
}

fn train_run(
    ctx: &JobContext,
    spec: &TrainSpec,
    setup: Setup,
    id: &str,
    record: &mut RunRecord,
) -> Result<(), TrainError> {
    let threads = ctx.threads.max(1);
    let now = lakefish_lake::records::now;
    let prefix = run_prefix(id);
    let model = crate::seeded(spec.seed as i64, || {
        let model = Model::new(
            &setup.arch,
            setup.features.inputs() as i64,
            setup.features.max_active() as i64,
            setup.device,
        );
        match spec.weight_init() {
            WeightInit::Uniform => model,
            WeightInit::Bullet => model.with_bullet_init(),
        }
    });
    let mut adam = match (spec.ranger(), setup.sparse_ft) {
        (Some(r), _) => Adam::ranger(&model, r.clone()),
        (None, true) => Adam::sparse(&model),
        (None, false) => Adam::new(&model),
    }
    .with_options(AdamOptions::of_spec(spec));
    let mut at = Position {
        step: 0,
        epoch: 0,
        batch: 0,
        pass: 0,
        pass_batch: 0,
    };
    if let Some(last) = record.checkpoints.last() {
        let key = format!("{prefix}/checkpoints/{last}");
        let bytes = ctx
            .block_on(ctx.lake.get(&key))?
            .ok_or_else(|| TrainError::Checkpoint {
                key: key.clone(),
                reason: "missing".into(),
            })?;
        at = load_checkpoint(&bytes, &key, &model, &mut adam, setup.device)?;
        tracing::info!(run = %id, step = at.step, checkpoint = %last, "training goes on from its last checkpoint");
        record.resumed_at.push(at.step);
    } else if let Some(init) = &spec.init_from {
        let key = format!(
            "{}/checkpoints/{}",
            run_prefix(&init.run),
            checkpoint_name(init.step)
        );
        let bytes = ctx
            .block_on(ctx.lake.get(&key))?
            .ok_or_else(|| TrainError::Checkpoint {
                key: key.clone(),
                reason: "missing (the warm start's checkpoint)".into(),
            })?;
        load_weights(&bytes, &key, &model, setup.device)?;
    }
    let mut metrics = Metrics { rows: Vec::new() };
    if at.step > 0
        && let Ok(Some(b)) = ctx.block_on(ctx.lake.get(&format!("{prefix}/{METRICS_FILE}")))
    {
        metrics.rows = read_metrics(&b).unwrap_or_default();
        metrics.rows.retain(|r| r.step <= at.step);
    }
    record.error = None;
    ctx.block_on(put_run_record(&ctx.lake, &prefix, record))?;

    let max_steps = spec.max_steps.unwrap_or(u64::MAX);
    // The steps all epochs take (fewer when a load-time filter drops rows): progress shows a
    // fraction, not an unknown total.
    let per_epoch = spec
        .superbatch
        .unwrap_or(record.train_positions / spec.batch_size.max(1) as u64);
    let planned_steps = (per_epoch * spec.epochs as u64).min(max_steps);
    let started = Instant::now();
    // Since the last metrics row: start, steps, summed loss (on the device), positions.
    let new_window = || (Instant::now(), 0u64, None::<Tensor>, 0u64);
    let mut window = new_window();
    // The description every checkpoint carries: the run's NetSpec, or its preset's.
    let netspec = match spec.trained_net().map_err(TrainError::Spec)? {
        TrainedNet::Described(net) => Some(net),
        TrainedNet::Preset(features, arch) => NetSpec::preset(features.as_str(), &arch).ok(),
    }
    .map(|n| serde_json::to_vec(&n))
    .transpose()
    .map_err(|e| TrainError::Internal(format!("the net's description: {e}")))?
    .unwrap_or_default();
    let mut spent = Spent::default();
    let checkpoint = |model: &Model,
                      adam: &Adam,
                      at: Position,
                      record: &mut RunRecord,
                      metrics: &Metrics|
     -> Result<(), TrainError> {
        let name = checkpoint_name(at.step);
        let bytes = save_checkpoint(model, adam, at, &netspec)?;
        ctx.block_on(ctx.lake.put(&format!("{prefix}/checkpoints/{name}"), bytes))?;
        if record.checkpoints.last() != Some(&name) {
            record.checkpoints.push(name);
        }
        record.step = at.step;
        record.epoch = at.epoch;
        record.updated = now();
        ctx.block_on(
            ctx.lake
                .put(&format!("{prefix}/{METRICS_FILE}"), metrics.encode()?),
        )?;
        ctx.block_on(put_run_record(&ctx.lake, &prefix, record))
    };
    // One cursor for the whole run: superbatches go on where the last one stopped, without
    // reading their pass again up to there.
    let mut batches =
        crate::recipes::DataCursor::new(&setup, spec, threads, (at.pass, at.pass_batch));
    while at.epoch < spec.epochs && at.step < max_steps {
        let epoch_lr = spec.lr * spec.lr_decay.powi(at.epoch as i32);
        // The plateau rule's cuts so far scale whatever the rate would be.
        let cut = record.plateau.as_ref().map_or(1.0, |p| p.lr_factor);
        let epoch_lambda = lambda_at(spec, at.epoch);
        if spec.superbatch.is_none() {
            batches.seek(at.pass, at.pass_batch);
        }
        let mut epoch_done = true;
        // The fused step runs on rayon's threads. libtorch's OpenMP threads, woken by any
        // small parallel op, would spin between steps on the same cores (a quarter of the
        // CPU time of a step on 2 cores): libtorch stays on one thread until validation.
        let one_thread =
            crate::fused::applies(&model, &adam).then(|| TorchThreads::set(1, threads));
        loop {
            if spec.superbatch.is_some_and(|n| at.batch >= n) {
                break;
            }
            let waited = Instant::now();
            let Some(b) = batches.next_batch() else {
                break;
            };
            spent.loader += waited.elapsed();
            // After the end of a pass is seen: a budget that ends with an epoch closes it.
            if at.step >= max_steps {
                epoch_done = false;
                break;
            }
            let mut b = b?;
            setup.remap(&mut b)?;
            let uploaded = Instant::now();
            let t = BatchTensors::new(&b, setup.device);
            window.3 += b.len() as u64;
            batches.give_back(b);
            spent.upload += uploaded.elapsed();
            let stepped = Instant::now();
            // A schedule is a function of the step (the same after a resume).
            let lr = cut
                * spec
                    .lr_schedule
                    .as_ref()
                    .map_or(epoch_lr, |s| s.at(at.step, planned_steps));
            let lambda = spec
                .lambda_schedule
                .as_ref()
                .map_or(epoch_lambda, |s| s.at(at.step, planned_steps));
            let sigmoid = crate::model::Sigmoid {
                target: spec.scale,
                prediction: spec.prediction_scale(),
            };
            let lv = train_step(&model, &mut adam, &t, setup.loss, lambda, sigmoid, lr)?
                .to_kind(tch::Kind::Double);
            spent.step += stepped.elapsed();
            at.step += 1;
            at.batch += 1;
            (at.pass, at.pass_batch) = (batches.pass, batches.batch);
            window.1 += 1;
            window.2 = Some(match window.2.take() {
                Some(sum) => sum + lv,
                None => lv,
            });
            if at.step.is_multiple_of(10) || at.step == max_steps {
                let synced = Instant::now();
                let mean_loss =
                    window.2.as_ref().map_or(0.0, |t| t.double_value(&[])) / window.1 as f64;
                spent.sync += synced.elapsed();
                let secs = window.0.elapsed().as_secs_f64().max(1e-9);
                metrics.rows.push(MetricsRow {
                    step: at.step,
                    epoch: at.epoch,
                    train_loss: mean_loss,
                    val_loss: None,
                    lr,
                    positions_per_s: window.3 as f64 / secs,
                    lambda: Some(lambda),
                });
                ctx.progress.report(&Progress {
                    stage: format!(
                        "train {id}: {} {} step {} loss {:.5}",
                        if spec.superbatch.is_some() {
                            "superbatch"
                        } else {
                            "epoch"
                        },
                        at.epoch + 1,
                        at.step,
                        mean_loss
                    ),
                    done: at.step,
                    total: Some(planned_steps),
                    unit: "steps".into(),
                    rows: (window.3 as f64 / secs) as u64,
                });
                ctx.check_cancelled()?;
                window = new_window();
            }
            if spec.checkpoint_every > 0 && at.step.is_multiple_of(spec.checkpoint_every) {
                checkpoint(&model, &adam, at, record, &metrics)?;
            }
        }
        drop(one_thread);
        if !epoch_done {
            // Stopped inside an epoch: the last checkpoint resumes from this batch.
            break;
        }
        if at.batch == 0 {
            return Err(crate::recipes::too_few_rows(spec));
        }
        let lambda = spec
            .lambda_schedule
            .as_ref()
            .map_or(epoch_lambda, |s| s.at(at.step, planned_steps));
        let (val, material, n) = validate(&setup, &model, spec, lambda, threads)?;
        record.val_loss.push(val);
        record.material_val_loss = Some(material);
        record.val_positions = n;
        if let Some(last) = metrics.rows.last_mut() {
            last.val_loss = Some(val);
        }
        if let Some(rule) = &spec.plateau {
            plateau_step(
                ctx,
                rule,
                record,
                val,
                at.step,
                &prefix,
                &model,
                &mut adam,
                setup.device,
            )?;
        }
        tracing::info!(
            run = %id,
            epoch = at.epoch + 1,
            val_loss = val,
            material_val_loss = material,
            secs = started.elapsed().as_secs_f64(),
            loader_wait_s = spent.loader.as_secs_f64(),
            upload_s = spent.upload.as_secs_f64(),
            step_s = spent.step.as_secs_f64(),
            loss_sync_s = spent.sync.as_secs_f64(),
            "epoch finished"
        );
        at.epoch += 1;
        at.batch = 0;
        if spec.superbatch.is_none() {
            // The next epoch is the next pass, from its start.
            (at.pass, at.pass_batch) = (at.epoch, 0);
        }
        checkpoint(&model, &adam, at, record, &metrics)?;
    }
    if record.checkpoints.last() != Some(&checkpoint_name(at.step)) {
        checkpoint(&model, &adam, at, record, &metrics)?;
    }
    record.finished = true;
    record.updated = now();
    ctx.block_on(put_run_record(&ctx.lake, &prefix, record))?;
    // The last word: every step done, with the validation loss (progress reports come every
    // few steps, so the last one may be short of the end).
    ctx.progress.report(&Progress {
        stage: format!(
            "train {id}: finished, {} epochs, {} steps, val loss {}",
            at.epoch,
            at.step,
            record
                .val_loss
                .last()
                .map_or("-".into(), |v| format!("{v:.5}"))
        ),
        done: at.step,
        total: Some(at.step),
        unit: "steps".into(),
        rows: 0,
    });
    let secs = started.elapsed().as_secs_f64();
    tracing::info!(
        run = %id,
        steps = at.step,
        secs,
        loader_wait_s = spent.loader.as_secs_f64(),
        upload_s = spent.upload.as_secs_f64(),
        step_s = spent.step.as_secs_f64(),
        loss_sync_s = spent.sync.as_secs_f64(),
        "training finished"
    );
    Ok(())
}

/// Where a run's wall time went, logged when it finishes so a slow run shows what to aim at:
/// waiting for the loader's next batch, moving it to the device, queueing (CPU: running) the
/// step, and reading the loss back (on a GPU, where the CPU waits for queued steps).
#[derive(Default)]
struct Spent {
    loader: std::time::Duration,
    upload: std::time::Duration,
    step: std::time::Duration,
    sync: std::time::Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `auto` by generation: 2 takes the sparse update on the CPU for every preset and every
    /// description the fused step trains; 1 only for the wide feature sets; neither on CUDA.
    #[test]
    fn auto_takes_the_sparse_update_as_the_generation_of_defaults_says() {
        let cuda = Device::Cuda(0);
        let screlu = ModelArch::parse("256x2:screlu").unwrap();
        let hidden = ModelArch::parse("256x2-32-32").unwrap();
        let described = |file: &str| {
            ModelArch::Spec(Box::new(
                lakefish_schemas::netspec::NetSpec::parse(file).unwrap(),
            ))
        };
        let buckets = described(include_str!(
            "../../../infra/nets/bullet-3-input-buckets.toml"
        ));
        let layered = described(include_str!(
            "../../../infra/nets/bullet-4-multi-layer.toml"
        ));
        let all768 = FeatureSetKind::All768;
        let auto = |g, arch: &ModelArch, f, d| sparse_ft(FtUpdate::Auto, g, arch, f, d).unwrap();
        for arch in [&screlu, &hidden, &buckets] {
            assert!(auto(2, arch, all768, Device::Cpu));
            assert!(!auto(2, arch, all768, cuda));
            assert!(!auto(1, arch, all768, Device::Cpu));
        }
        assert!(
            !auto(2, &layered, all768, Device::Cpu),
            "no fused step for it"
        );
        assert!(auto(1, &hidden, FeatureSetKind::HalfKp, Device::Cpu));
        assert!(!auto(1, &hidden, FeatureSetKind::HalfKp, cuda));
        assert!(!sparse_ft(FtUpdate::Dense, 2, &screlu, all768, Device::Cpu).unwrap());
        // Asked for, sparse trains it in the general step.
        assert!(sparse_ft(FtUpdate::Sparse, 2, &layered, all768, Device::Cpu).unwrap());
        let e = sparse_ft(FtUpdate::Sparse, 2, &screlu, all768, cuda)
            .unwrap_err()
            .to_string();
        assert!(e.contains("CPU only"), "{e}");
    }
}
