use crate::input::InputPolicy;
use crate::records::JobStore;
use crate::{JobError, Lake};
use lakefish_schemas::Progress;
use lakefish_schemas::{JobId, JobSpec};
use std::sync::Arc;

/// Where a job reports how far it got. The CLI draws a bar; workers copy it into the job
/// record. Implementations must be cheap: jobs call this often, from any thread.
pub trait ProgressSink: Send + Sync {
    fn report(&self, progress: &Progress);
}

/// Discards progress.
pub struct NoProgress;

impl ProgressSink for NoProgress {
    fn report(&self, _: &Progress) {}
}

/// Queues further jobs from inside a job (a shuffle fans out its passes this way). Given by
/// queue workers; absent in-process, where a job does all its work itself.
pub trait JobSubmitter: Send + Sync {
    /// Queues `spec` under `id` unless a job with that id already succeeded. Blocking.
    fn submit(&self, id: JobId, spec: JobSpec) -> Result<(), JobError>;
}

/// Runs `train` and `quantize` jobs (both need the float model). Lives in `lakefish-train`
/// (the only crate linking libtorch); workers that have it pass it in, others refuse these
/// jobs with a reason.
pub trait Trainer: Send + Sync {
    fn train(
        &self,
        ctx: &JobContext,
        id: &JobId,
        spec: &lakefish_schemas::TrainSpec,
    ) -> Result<serde_json::Value, JobError>;

    fn quantize(
        &self,
        ctx: &JobContext,
        spec: &lakefish_schemas::QuantizeSpec,
    ) -> Result<serde_json::Value, JobError>;
}

/// How a process runs jobs, decided once where it starts (no `Option` switches modes).
#[derive(Clone, Default)]
pub enum Mode {
    /// Everything in this process (the CLI): a shuffle deals and piles itself, an SPRT plays
    /// every pair, and the records a job reads (a pipeline's, a fan-out's) are the lake's.
    #[default]
    InProcess,
    /// Part of a queued deployment (workers, the scheduler, the API): a job fans its tasks
    /// out through `submitter`, and every job record is read from and written to `records`,
    /// the deployment's one store (the metastore).
    Queued {
        submitter: Arc<dyn JobSubmitter>,
        records: JobStore,
    },
}

/// What a process lends the jobs it runs, and the local files they may read.
#[derive(Clone, Default)]
pub struct Hooks {
    pub mode: Mode,
    pub trainer: Option<Arc<dyn Trainer>>,
    pub inputs: InputPolicy,
}

/// Everything a job needs from the outside world, passed explicitly.
///
/// Jobs are synchronous, CPU-heavy code run on their own threads; they reach the (async)
/// lake through `rt`, never blocking an async worker thread.
#[derive(Clone)]
pub struct JobContext {
    pub lake: Lake,
    pub rt: tokio::runtime::Handle,
    pub progress: Arc<dyn ProgressSink>,
    /// CPU threads the job may use.
    pub threads: usize,
    pub mode: Mode,
    pub trainer: Option<Arc<dyn Trainer>>,
    /// Which local files the job may open (`Input::open` checks).
    pub inputs: InputPolicy,
    /// The job records of the deployment (a fanned-out job reads its tasks' records): the
    /// queued mode's store, else the lake's.
    pub jobs: JobStore,
    /// Set when a user cancels the job: long loops ask [`JobContext::check_cancelled`].
    pub cancel: Arc<std::sync::atomic::AtomicBool>,
}

impl JobContext {
    pub fn new(lake: Lake, rt: tokio::runtime::Handle) -> Self {
        JobContext {
            jobs: JobStore::new(lake.clone()),
            lake,
            rt,
            progress: Arc::new(NoProgress),
            threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            mode: Mode::InProcess,
            trainer: None,
            inputs: InputPolicy::Unconfined,
            cancel: Arc::default(),
        }
    }

    /// `Err(Cancelled)` once a user cancelled the job: called where a long job reports
    /// progress, so it stops within one report of the request.
    pub fn check_cancelled(&self) -> Result<(), JobError> {
        if self.cancel.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(JobError::Cancelled("cancelled on request".into()));
        }
        Ok(())
    }

    pub fn with_hooks(mut self, hooks: Hooks) -> Self {
        if let Mode::Queued { records, .. } = &hooks.mode {
            self.jobs = records.clone();
        }
        self.mode = hooks.mode;
        self.trainer = hooks.trainer;
        self.inputs = hooks.inputs;
        self
    }

    /// The queue to fan tasks out to: in the queued mode only (`what` names the job that
    /// needs it, for the error in-process).
    pub fn submitter(&self, what: &str) -> Result<&Arc<dyn JobSubmitter>, JobError> {
        match &self.mode {
            Mode::Queued { submitter, .. } => Ok(submitter),
            Mode::InProcess => Err(JobError::Internal(format!(
                "{what} runs only through a queue"
            ))),
        }
    }

    /// Whether jobs fan out over a queue (true) or do all their work here.
    pub fn is_queued(&self) -> bool {
        matches!(self.mode, Mode::Queued { .. })
    }

    pub fn with_progress(mut self, progress: Arc<dyn ProgressSink>) -> Self {
        self.progress = progress;
        self
    }

    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self
    }

    /// Runs a lake operation from job (non-async) code.
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }
}
