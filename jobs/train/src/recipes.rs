//! The recipe of a run around its steps: what an epoch mirrors, its λ, the plateau rule
//! after its validation, and the metrics rows written with every checkpoint.

use crate::TrainError;
use crate::adam::Adam;
use crate::model::Model;
use crate::train::{MetricsRow, checkpoint_name, load_checkpoint};
use arrow_array::RecordBatch;
use lakefish_jobs::JobContext;
use lakefish_schemas::{RunRecord, TrainSpec};
use std::sync::Arc;

/// The plateau rule after an epoch's validation (before its checkpoint, which then holds
/// what the rule decided): a new best is noted; `patience` epochs without one cut the rate
/// and load the best checkpoint's weights and optimizer state.
#[allow(clippy::too_many_arguments)]
pub(crate) fn plateau_step(
    ctx: &JobContext,
    rule: &lakefish_schemas::train::Plateau,
    record: &mut RunRecord,
    val: f64,
    step: u64,
    prefix: &str,
    model: &Model,
    adam: &mut Adam,
    device: tch::Device,
) -> Result<(), TrainError> {
    let state = record
        .plateau
        .get_or_insert_with(|| lakefish_schemas::train::PlateauState {
            best_loss: f64::INFINITY,
            best_checkpoint: String::new(),
            lr_factor: 1.0,
            waited: 0,
            cuts: 0,
        });
    if state.best_checkpoint.is_empty() || val < state.best_loss * (1.0 - rule.threshold) {
        // This epoch's checkpoint, written next, is the best.
        state.best_loss = val;
        state.best_checkpoint = checkpoint_name(step);
        state.waited = 0;
        return Ok(());
    }
    state.waited += 1;
    if state.waited < rule.patience {
        return Ok(());
    }
    let key = format!("{prefix}/checkpoints/{}", state.best_checkpoint);
    let bytes = ctx
        .block_on(ctx.lake.get(&key))?
        .ok_or_else(|| TrainError::Checkpoint {
            key: key.clone(),
            reason: "the plateau rule's best checkpoint is missing".into(),
        })?;
    // Its weights and optimizer state; the run's own position goes on.
    load_checkpoint(&bytes, &key, model, adam, device)?;
    state.lr_factor *= rule.factor;
    state.waited = 0;
    state.cuts += 1;
    tracing::info!(
        run = %record.id,
        step,
        lr_factor = state.lr_factor,
        back_to = %key,
        "plateau: learning rate cut, weights from the best epoch"
    );
    Ok(())
}

/// Which positions an epoch sees mirrored: all of them on odd epochs with `mirror`; else a
/// random `mirror_fraction` of them, drawn anew each epoch from the run's seed.
pub(crate) fn mirror_of(spec: &TrainSpec, epoch: u32) -> crate::loader::Mirror {
    use crate::loader::Mirror;
    match (spec.mirror, spec.mirror_fraction) {
        (true, _) if epoch % 2 == 1 => Mirror::All,
        (false, Some(fraction)) if fraction > 0.0 => Mirror::Fraction {
            fraction,
            seed: spec.seed ^ ((epoch as u64) << 40) ^ 0x4D49_5252,
        },
        _ => Mirror::None,
    }
}

pub(crate) fn lambda_at(spec: &TrainSpec, epoch: u32) -> f64 {
    if spec.epochs <= 1 {
        return spec.lambda_start;
    }
    let t = epoch as f64 / (spec.epochs - 1) as f64;
    spec.lambda_start + (spec.lambda_end - spec.lambda_start) * t
}

/// A run's metrics rows ([`MetricsRow`]), rewritten whole at every checkpoint.
pub(crate) struct Metrics {
    pub(crate) rows: Vec<MetricsRow>,
}

impl Metrics {
    pub(crate) fn encode(&self) -> Result<Vec<u8>, TrainError> {
        use arrow_array::{Float64Array, UInt32Array, UInt64Array};
        use arrow_schema::{DataType, Field, Schema};
        let schema = Arc::new(Schema::new(vec![
            Field::new("step", DataType::UInt64, false),
            Field::new("epoch", DataType::UInt32, false),
            Field::new("train_loss", DataType::Float64, false),
            Field::new("val_loss", DataType::Float64, true),
            Field::new("lr", DataType::Float64, false),
            Field::new("positions_per_s", DataType::Float64, false),
            Field::new("lambda", DataType::Float64, true),
        ]));
        let r = &self.rows;
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(UInt64Array::from_iter_values(r.iter().map(|x| x.step))),
                Arc::new(UInt32Array::from_iter_values(r.iter().map(|x| x.epoch))),
                Arc::new(Float64Array::from_iter_values(
                    r.iter().map(|x| x.train_loss),
                )),
                Arc::new(r.iter().map(|x| x.val_loss).collect::<Float64Array>()),
                Arc::new(Float64Array::from_iter_values(r.iter().map(|x| x.lr))),
                Arc::new(Float64Array::from_iter_values(
                    r.iter().map(|x| x.positions_per_s),
                )),
                Arc::new(r.iter().map(|x| x.lambda).collect::<Float64Array>()),
            ],
        )
        .map_err(|e| TrainError::Internal(e.to_string()))?;
        let mut out = Vec::new();
        let mut w = parquet::arrow::ArrowWriter::try_new(&mut out, schema, None)
            .map_err(|e| TrainError::Internal(e.to_string()))?;
        w.write(&batch)
            .map_err(|e| TrainError::Internal(e.to_string()))?;
        w.close().map_err(|e| TrainError::Internal(e.to_string()))?;
        Ok(out)
    }
}

/// The batches of a run's data, pass after pass over the training chunks: each pass in the
/// order [`crate::train::epoch_order`] gives it, mirrored as [`mirror_of`] says for it. An
/// epoch is one pass (`cycle` false: the cursor ends with it); a superbatch takes a fixed
/// number of batches and may span passes (`cycle` true).
pub(crate) struct DataCursor<'a> {
    setup: &'a crate::train::Setup,
    spec: &'a TrainSpec,
    threads: usize,
    cycle: bool,
    /// The pass, and its batches already handed out.
    pub(crate) pass: u32,
    pub(crate) batch: u64,
    stream: Option<crate::loader::BatchStream>,
}

impl<'a> DataCursor<'a> {
    pub(crate) fn new(
        setup: &'a crate::train::Setup,
        spec: &'a TrainSpec,
        threads: usize,
        (pass, batch): (u32, u64),
    ) -> Self {
        DataCursor {
            setup,
            spec,
            threads,
            cycle: spec.superbatch.is_some(),
            pass,
            batch,
            stream: None,
        }
    }

    /// Goes to batch `batch` of pass `pass` (an epoch's start, or a resume's place).
    pub(crate) fn seek(&mut self, pass: u32, batch: u64) {
        if (self.pass, self.batch) != (pass, batch) || self.stream.is_none() {
            (self.pass, self.batch, self.stream) = (pass, batch, None);
        }
    }

    fn open(&self) -> crate::loader::BatchStream {
        let order = crate::train::epoch_order(&self.setup.train, self.spec.seed, self.pass);
        crate::loader::stream_batches(
            self.setup.source.clone(),
            order,
            self.setup.features,
            crate::loader::RowOptions {
                filter: self.spec.filter.as_deref().cloned(),
                mirror: mirror_of(self.spec, self.pass),
                // Training steps do not use it.
                material: false,
                partial_last: false,
            },
            self.spec.batch_size as usize,
            self.batch as usize,
            self.threads,
        )
    }

    /// The next batch; `None` at the end of a pass unless cycling.
    pub(crate) fn next_batch(&mut self) -> Option<Result<crate::loader::Batch, TrainError>> {
        loop {
            if self.stream.is_none() {
                self.stream = Some(self.open());
            }
            match self.stream.as_mut().and_then(Iterator::next) {
                Some(b) => {
                    self.batch += 1;
                    return Some(b);
                }
                None if !self.cycle => return None,
                None if self.batch == 0 => return Some(Err(too_few_rows(self.spec))),
                None => {
                    self.pass += 1;
                    self.batch = 0;
                    self.stream = None;
                }
            }
        }
    }

    /// Returns a used batch to the loader.
    pub(crate) fn give_back(&self, b: crate::loader::Batch) {
        if let Some(s) = &self.stream {
            s.give_back(b);
        }
    }
}

pub(crate) fn too_few_rows(spec: &TrainSpec) -> TrainError {
    TrainError::Spec(format!(
        "the training chunks hold fewer usable rows than one batch ({}): give a smaller batch \
         size, or train on a larger shuffle",
        spec.batch_size
    ))
}
