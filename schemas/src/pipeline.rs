//! Pipeline runs: one retraining cycle (ingest → masks → shuffle → train → quantize → register
//! → SPRT → promotion) as a record in `pipelines/<name>/runs/<run>.json`. Each step is an
//! ordinary job; the record lists them in order with what they produced.

use crate::{JobId, JobState};
use serde::{Deserialize, Serialize};

pub const PIPELINES_PREFIX: &str = "pipelines";

/// A step of a run. Stored as its snake_case name (`"datagen"`, ..., `"done"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PipelineStep {
    Datagen,
    Ingest,
    Mask,
    Shuffle,
    Train,
    Quantize,
    Register,
    Sprt,
    /// After the last step: the run has finished.
    Done,
}

impl PipelineStep {
    /// The steps of a run, in dependency order.
    pub const ORDER: [PipelineStep; 8] = [
        PipelineStep::Datagen,
        PipelineStep::Ingest,
        PipelineStep::Mask,
        PipelineStep::Shuffle,
        PipelineStep::Train,
        PipelineStep::Quantize,
        PipelineStep::Register,
        PipelineStep::Sprt,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PipelineStep::Datagen => "datagen",
            PipelineStep::Ingest => "ingest",
            PipelineStep::Mask => "mask",
            PipelineStep::Shuffle => "shuffle",
            PipelineStep::Train => "train",
            PipelineStep::Quantize => "quantize",
            PipelineStep::Register => "register",
            PipelineStep::Sprt => "sprt",
            PipelineStep::Done => "done",
        }
    }

    /// The step after this one (`Done` after the last).
    pub fn next(self) -> PipelineStep {
        let i = PipelineStep::ORDER.iter().position(|s| *s == self);
        i.and_then(|i| PipelineStep::ORDER.get(i + 1))
            .copied()
            .unwrap_or(PipelineStep::Done)
    }
}

impl std::fmt::Display for PipelineStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    Running,
    /// Every step finished; `promoted` says whether the new net became the best.
    Succeeded,
    /// A step failed; `error` says which and why. Later steps never started.
    Failed,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Succeeded => "succeeded",
            RunState::Failed => "failed",
        }
    }
}

/// One job of a step (a step may have several: one ingest per new raw file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepJob {
    pub step: PipelineStep,
    pub job: JobId,
    pub kind: String,
    /// What it works on (a raw file, a dataset, a run...).
    pub target: String,
    pub state: JobState,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PipelineRun {
    /// `<pipeline>-<UTC yyyymmddThhmmss>`.
    pub id: String,
    /// How many runs of this pipeline came before this one (0 for the first): seeds the
    /// round's self-play, so rounds differ and a lake's history replays the same way.
    #[serde(default)]
    pub round: u64,
    pub pipeline: String,
    /// `schedule` or `manual`.
    pub trigger: String,
    pub state: RunState,
    /// The step being worked on.
    pub step: PipelineStep,
    pub jobs: Vec<StepJob>,
    /// Datasets trained on, as `source/dataset`.
    pub datasets: Vec<String>,
    pub shuffle: Option<crate::names::ShuffleId>,
    pub train_run: Option<crate::names::RunId>,
    pub checkpoint: Option<u64>,
    pub net: Option<String>,
    /// The net the new one was tested against (`classical` before any promotion).
    pub base: Option<String>,
    pub sprt: Option<crate::names::SprtId>,
    pub sprt_state: Option<String>,
    pub promoted: bool,
    pub error: Option<String>,
    pub created: String,
    pub updated: String,
    pub finished: Option<String>,
}

pub fn run_key(pipeline: &str, run: &str) -> String {
    format!("{PIPELINES_PREFIX}/{pipeline}/runs/{run}.json")
}
