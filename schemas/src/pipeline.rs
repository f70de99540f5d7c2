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

/// When a step of a run began and ended (RFC 3339). A step is begun once: a server restarted
/// in the middle of it goes on with the same entry, so a run's time is the sum of its steps
/// across restarts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepTime {
    pub step: PipelineStep,
    pub started: String,
    /// When it ended (succeeded, or failed the run); none while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<String>,
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
    /// Each step begun so far, in order, with its start and end.
    #[serde(default)]
    pub steps: Vec<StepTime>,
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

impl StepTime {
    /// How long the step took, or has taken until `now` while it runs; none when a time
    /// does not parse.
    pub fn seconds(&self, now: &str) -> Option<f64> {
        seconds_between(&self.started, self.finished.as_deref().unwrap_or(now))
    }
}

/// Seconds from one RFC 3339 time to another; none when either does not parse.
pub fn seconds_between(start: &str, end: &str) -> Option<f64> {
    let t = |s: &str| chrono::DateTime::parse_from_rfc3339(s).ok();
    Some((t(end)? - t(start)?).num_milliseconds() as f64 / 1000.0)
}

/// `75` → `1 min 15 s`: a step's or a run's duration as people read it.
pub fn duration_text(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

impl PipelineRun {
    /// Notes that the run works on its current step from `now`, unless it began already.
    pub fn begin_step(&mut self, now: &str) {
        if self.steps.last().is_none_or(|t| t.step != self.step) {
            self.steps.push(StepTime {
                step: self.step,
                started: now.to_string(),
                finished: None,
            });
        }
    }

    /// Notes that the current step ended at `now`.
    pub fn end_step(&mut self, now: &str) {
        self.begin_step(now);
        if let Some(t) = self.steps.last_mut() {
            t.finished.get_or_insert_with(|| now.to_string());
        }
    }
}

pub fn run_key(pipeline: &str, run: &str) -> String {
    format!("{PIPELINES_PREFIX}/{pipeline}/runs/{run}.json")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A step is begun once, however often the run is advanced (or its server restarted)
    /// while it runs, and ended once.
    #[test]
    fn a_step_is_timed_once_across_advances() {
        let mut run: PipelineRun = serde_json::from_value(serde_json::json!({
            "id": "p-20261127T000000", "pipeline": "p", "trigger": "manual",
            "state": "running", "step": "ingest", "jobs": [], "datasets": [],
            "shuffle": null, "train_run": null, "checkpoint": null, "net": null, "base": null,
            "sprt": null, "sprt_state": null, "promoted": false, "error": null,
            "created": "t0", "updated": "t0", "finished": null
        }))
        .unwrap();
        assert!(
            run.steps.is_empty(),
            "a run written before step times has none"
        );
        run.begin_step("t1");
        run.begin_step("t2");
        run.end_step("t3");
        run.end_step("t4");
        run.step = run.step.next();
        run.begin_step("t5");
        assert_eq!(
            run.steps,
            [
                StepTime {
                    step: PipelineStep::Ingest,
                    started: "t1".into(),
                    finished: Some("t3".into())
                },
                StepTime {
                    step: PipelineStep::Mask,
                    started: "t5".into(),
                    finished: None
                }
            ]
        );
        let back: PipelineRun =
            serde_json::from_str(&serde_json::to_string(&run).unwrap()).unwrap();
        assert_eq!(back, run);
    }
}
