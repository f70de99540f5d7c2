//! `lakefish bench train`: the loader alone (chunks → ready batches) and training steps of
//! all768 256x2-32-32 at batch 16384 on the CPU or a CUDA GPU, over the same shuffled chunks,
//! same run; and the plain PyTorch loop on the same batches and device.

use lakefish_engine::features::FeatureSetKind;
use lakefish_jobs::{JobContext, Lake};
use lakefish_train::TrainError;
use lakefish_train::loader::ChunkSource;
use lakefish_train::loader::{Batch, RowOptions, stream_batches};
use lakefish_train::model::{Arch, BatchTensors, Loss, Model};
use lakefish_train::train::{Adam, LakeChunks, train_step};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;
use tch::Device;

/// About how many positions each loader timing covers (the chunks read over again as needed).
const LOADER_POSITIONS: usize = 4_000_000;

#[derive(Debug, Clone, serde::Serialize)]
pub struct TrainBench {
    pub file: String,
    pub threads: usize,
    pub batch_size: usize,
    pub arch: String,
    /// Where the training steps ran (`Cpu`, `Cuda(0)`).
    pub device: String,
    pub pytorch_version: Option<String>,
    /// One entry per feature set, all over the same chunks in this run.
    pub features: Vec<FeatureBench>,
}

/// The loaders, the trainer and the reference for one feature set.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FeatureBench {
    pub features: String,
    pub positions: u64,
    /// The old loader on the same chunks in the old layout (FEN text parsed every time), one
    /// thread: positions/s.
    pub old_loader_positions_per_s_per_core: f64,
    /// Loader alone on packed boards, one thread: positions per second.
    pub loader_positions_per_s_per_core: f64,
    /// new / old, one thread each (target: at least 5).
    pub loader_new_to_old: f64,
    /// Loader alone, all threads.
    pub loader_positions_per_s: f64,
    /// Reading the new loader's columns of every chunk alone, one thread (rows in batches
    /// over the time).
    pub chunk_read_positions_per_s: f64,
    /// Forward, loss, backward, Adam and clipping, batches already in memory (on the device),
    /// as the trainer runs them there: on the CPU with the sparse transformer update.
    pub trainer_positions_per_s: f64,
    /// The same with dense Adam through libtorch's own backward (the GPU's path).
    pub dense_trainer_positions_per_s: f64,
    /// With the sparse transformer update (CPU only), whichever the trainer picks.
    pub sparse_trainer_positions_per_s: Option<f64>,
    /// loader per core / trainer (target: at least 10).
    pub loader_to_trainer: f64,
    /// The plain PyTorch loop (`infra/bench/torch_reference.py`) on the same batches, same
    /// torch, same threads; `None` when no Python with torch was given.
    pub pytorch_positions_per_s: Option<f64>,
    /// trainer / PyTorch (target: at least 1).
    pub trainer_to_pytorch: Option<f64>,
}

/// A chunk batch in the layout chunks had before packed boards: `fen` text in `board`'s place.
fn fen_layout(batch: &arrow_array::RecordBatch) -> Result<arrow_array::RecordBatch, String> {
    let fens = lakefish_train::loader::chunk_fens(batch)?;
    let schema = lakefish_schemas::positions::schema();
    let columns = schema
        .fields()
        .iter()
        .map(|f| match f.name().as_str() {
            "fen" => Ok(Arc::new(arrow_array::StringArray::from(fens.clone())) as _),
            name => batch
                .column_by_name(name)
                .cloned()
                .ok_or_else(|| format!("column {name} missing")),
        })
        .collect::<Result<Vec<arrow_array::ArrayRef>, String>>()?;
    arrow_array::RecordBatch::try_new(schema, columns).map_err(|e| e.to_string())
}

/// Where the PyTorch reference runs: a Python with torch 2.11 and the script.
pub struct TorchReference {
    pub python: std::path::PathBuf,
    pub script: std::path::PathBuf,
}

/// Writes batches in the layout `torch_reference.py` reads.
fn write_batches(path: &std::path::Path, batches: &[Batch]) -> std::io::Result<()> {
    let mut out = Vec::new();
    for b in batches {
        for n in [b.len(), b.stm_indices.len(), b.nstm_indices.len()] {
            out.extend_from_slice(&(n as u64).to_le_bytes());
        }
        for v in [
            &b.stm_indices,
            &b.stm_offsets,
            &b.nstm_indices,
            &b.nstm_offsets,
        ] {
            v.iter()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes()));
        }
        for v in [&b.score, &b.result] {
            v.iter()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes()));
        }
    }
    std::fs::write(path, out)
}

fn run_reference(
    r: &TorchReference,
    batches_file: &std::path::Path,
    arch: &str,
    inputs: usize,
    steps: usize,
    threads: usize,
    device: Device,
) -> Result<(f64, String), TrainError> {
    let out = std::process::Command::new(&r.python)
        .arg(&r.script)
        .arg(batches_file)
        .args(["--arch", arch, "--inputs", &inputs.to_string()])
        .args([
            "--steps",
            &steps.to_string(),
            "--threads",
            &threads.to_string(),
            "--device",
            if device.is_cuda() { "cuda" } else { "cpu" },
        ])
        .output()
        .map_err(|e| TrainError::Spec(format!("cannot run {}: {e}", r.python.display())))?;
    if !out.status.success() {
        return Err(TrainError::Spec(format!(
            "the PyTorch reference failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| TrainError::Internal(format!("reference output: {e}")))?;
    let rate = v["positions_per_s"]
        .as_f64()
        .ok_or_else(|| TrainError::Internal("reference printed no rate".into()))?;
    Ok((rate, v["torch"].as_str().unwrap_or("?").to_string()))
}

/// Shuffles the quiet rows of `file` into a scratch lake (untimed), then for each feature set:
/// the old loader (FEN text) and the new (packed boards) on one thread, the new on all
/// threads, `steps` training steps of 256x2-32-32 at batch 16384 on `device`, and the plain
/// PyTorch loop on the same batches where `reference` is given.
pub fn bench_train(
    rt: &tokio::runtime::Handle,
    file: &str,
    feature_sets: &[FeatureSetKind],
    threads: usize,
    steps: usize,
    device: Device,
    reference: Option<&TorchReference>,
) -> Result<TrainBench, TrainError> {
    let dir = std::env::temp_dir().join(format!("lakefish-bench-train-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = (|| {
        let lake = Lake::open(dir.to_str().unwrap_or_default(), &HashMap::new())?;
        let ctx = JobContext::new(lake, rt.clone()).with_threads(threads);
        let m = lakefish_jobs::shuffle::quiet_shuffle(&ctx, file, "bench", 16, 1)?;
        let keys: Vec<String> = m
            .chunks
            .iter()
            .map(|c| {
                format!(
                    "{}/{}",
                    lakefish_jobs::shuffle::shuffle_prefix(&m.id),
                    c.name
                )
            })
            .collect();
        // The same chunks as shuffles wrote them before packed boards (FEN text, no
        // `board`), for the old loader: it reads these, the new one the packed ones.
        let mut old_keys = Vec::new();
        for key in &keys {
            let bytes = rt
                .block_on(ctx.lake.get(key))?
                .ok_or_else(|| TrainError::Internal(format!("{key} vanished")))?;
            let batch = lakefish_lake::parts::read_chunk(bytes, &[])
                .map_err(|e| TrainError::Internal(format!("{key}: {e}")))?;
            let old_key = format!("{key}.fen.parquet");
            let old =
                fen_layout(&batch).map_err(|e| TrainError::Internal(format!("{key}: {e}")))?;
            let encoded = lakefish_lake::parts::encode_parquet(&old, &old_key)?;
            rt.block_on(ctx.lake.put(&old_key, encoded))?;
            old_keys.push(old_key);
        }
        let sources = [
            Arc::new(LakeChunks {
                ctx: ctx.clone(),
                keys: old_keys,
            }),
            Arc::new(LakeChunks {
                ctx: ctx.clone(),
                keys,
            }),
        ];
        let source = sources[1].clone();
        let batch_size = 16384;
        let order: Vec<usize> = (0..m.chunks.len()).collect();
        let arch = lakefish_train::model::ModelArch::Lakefish(Arch::parse("256x2-32-32")?);
        let mut report = TrainBench {
            file: file.to_string(),
            threads,
            batch_size,
            arch: arch.to_string(),
            device: format!("{device:?}"),
            pytorch_version: None,
            features: Vec::new(),
        };
        // The loaders are timed over the chunks as many times over as make a few million
        // positions: a small sample file alone would time the stream's start more than its
        // rate.
        let rows: usize = m.chunks.iter().map(|c| c.rows as usize).sum();
        let passes = (LOADER_POSITIONS / rows.max(1)).clamp(1, 64);
        let repeated: Vec<usize> = order.repeat(passes);
        for &features in feature_sets {
            let stream = |t: usize, old_chunks: bool, order: &[usize]| {
                stream_batches(
                    sources[usize::from(!old_chunks)].clone(),
                    order.to_vec(),
                    features,
                    RowOptions::default(),
                    batch_size,
                    0,
                    t,
                )
            };
            // Timed as training consumes batches: each handed back once used.
            // Positions per second, over `passes` passes.
            let time_loader = |t: usize, old_chunks: bool| -> Result<f64, TrainError> {
                let start = Instant::now();
                let mut batches = stream(t, old_chunks, &repeated);
                let mut positions = 0usize;
                while let Some(b) = batches.next() {
                    let b = b?;
                    positions += b.len();
                    batches.give_back(std::hint::black_box(b));
                }
                Ok(positions as f64 / start.elapsed().as_secs_f64())
            };
            // Old and new alternate, twice each, the better of each kept: this machine's
            // speed drifts within a run.
            let (mut loader_old, mut loader_new) = (0f64, 0f64);
            for _ in 0..2 {
                loader_old = loader_old.max(time_loader(1, true)?);
                loader_new = loader_new.max(time_loader(1, false)?);
            }
            let loader_all = time_loader(threads, false)?;
            // The chunk reads alone (Parquet decode of the columns the new loader takes), one
            // thread: the loader's reader threads run beside its decoding, so this bounds it.
            let start = Instant::now();
            let columns = lakefish_train::loader::loader_columns(false);
            for &i in &order {
                std::hint::black_box(source.read(i, &columns)?);
            }
            let read_only = start.elapsed().as_secs_f64();
            // Once more, kept (untimed), for the trainer steps and the reference; the old
            // loader's batches must be the same.
            let batches = stream(threads, false, &order).collect::<Result<Vec<Batch>, _>>()?;
            let positions = (batches.len() * batch_size) as u64;
            if batches.is_empty() {
                return Err(TrainError::Spec(format!(
                    "{file} gives fewer than {batch_size} quiet positions"
                )));
            }
            if stream(threads, true, &order).collect::<Result<Vec<Batch>, _>>()? != batches {
                return Err(TrainError::Internal(format!(
                    "{features}: the old and the new loader made different batches"
                )));
            }

            tch::set_num_threads(threads as i32);
            lakefish_train::keep_tensors_in_heap();
            tch::manual_seed(1);
            let model = Model::new(
                &arch,
                features.inputs() as i64,
                features.max_active() as i64,
                device,
            );
            let tensors: Vec<BatchTensors> = batches
                .iter()
                .map(|b| BatchTensors::new(b, device))
                .collect();
            // A GPU runs the steps asynchronously: wait for the queued ones before reading
            // the clock.
            let sync = || {
                if let Device::Cuda(i) = device {
                    tch::Cuda::synchronize(i as i64);
                }
            };
            // Dense Adam through libtorch's backward, and (on the CPU, where the trainer
            // uses it) the sparse transformer update; the better of two rounds each,
            // alternated.
            let time_steps = |adam: &mut Adam| -> Result<f64, TrainError> {
                let _ = train_step(&model, adam, &tensors[0], Loss::Elmo, 1.0, 361.0, 1e-3)?; // warm-up
                sync();
                let start = Instant::now();
                for i in 0..steps {
                    let _ = train_step(
                        &model,
                        adam,
                        &tensors[i % tensors.len()],
                        Loss::Elmo,
                        1.0,
                        361.0,
                        1e-3,
                    )?;
                }
                sync();
                Ok((steps * batch_size) as f64 / start.elapsed().as_secs_f64())
            };
            let (mut dense, mut sparse) = (0f64, None::<f64>);
            let (mut dense_adam, mut sparse_adam) = (Adam::new(&model), Adam::sparse(&model));
            for _ in 0..2 {
                dense = dense.max(time_steps(&mut dense_adam)?);
                if device == Device::Cpu {
                    // As the trainer runs fused steps: libtorch on one thread meanwhile.
                    let _one = lakefish_train::fused::applies(&model, &sparse_adam)
                        .then(|| lakefish_train::train::TorchThreads::set(1, threads));
                    let rate = time_steps(&mut sparse_adam)?;
                    sparse = Some(sparse.map_or(rate, |s: f64| s.max(rate)));
                }
            }
            // As `--ft-update auto` trains: sparse on the CPU for the wide feature sets.
            let trainer = match sparse {
                Some(s) if features.inputs() > lakefish_train::train::SPARSE_MIN_INPUTS => s,
                _ => dense,
            };
            drop(tensors);
            let pytorch = match reference {
                Some(r) => {
                    let path = dir.join("batches.bin");
                    write_batches(&path, &batches)
                        .map_err(|e| TrainError::Internal(format!("{}: {e}", path.display())))?;
                    let got = run_reference(
                        r,
                        &path,
                        &arch.to_string(),
                        features.inputs(),
                        steps,
                        threads,
                        device,
                    )?;
                    let _ = std::fs::remove_file(&path);
                    Some(got)
                }
                None => None,
            };

            report.pytorch_version = pytorch.as_ref().map(|p| p.1.clone());
            report.features.push(FeatureBench {
                features: features.to_string(),
                positions,
                old_loader_positions_per_s_per_core: loader_old,
                loader_positions_per_s_per_core: loader_new,
                loader_new_to_old: loader_new / loader_old,
                loader_positions_per_s: loader_all,
                chunk_read_positions_per_s: positions as f64 / read_only,
                trainer_positions_per_s: trainer,
                dense_trainer_positions_per_s: dense,
                sparse_trainer_positions_per_s: sparse,
                loader_to_trainer: loader_new / trainer,
                pytorch_positions_per_s: pytorch.as_ref().map(|p| p.0),
                trainer_to_pytorch: pytorch.as_ref().map(|p| trainer / p.0),
            });
        }
        Ok(report)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    out
}
