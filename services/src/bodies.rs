//! The JSON bodies the API answers with that are not stored types of their own (lists,
//! acknowledgements, errors). Each derives its JSON Schema, which `/v1/openapi.json` shows;
//! the field names are the API's, relied on by the CLI, the dashboard and scripts.

use lakefish_lake::datasets::{ClaimSummary, DatasetSummary};
use lakefish_schemas::nets::BestNet;
use lakefish_schemas::pipeline::PipelineRun;
use lakefish_schemas::{
    JobId, JobRecord, JobState, NetManifest, RunRecord, ShuffleManifest, SprtStatus,
};
use schemars::JsonSchema;
use serde::Serialize;

/// Every error, 4xx and 5xx: what went wrong, for a person.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ErrorBody {
    pub error: String,
}

/// `GET /healthz`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Health {
    /// Always `ok`: the process answers.
    pub status: &'static str,
    /// The lake in use (`file:///...`, `s3://...`, `memory`).
    pub lake: String,
    /// The queue in use (credentials redacted).
    pub queue: String,
}

/// `POST /v1/jobs`: the job is recorded and queued.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Submitted {
    pub id: JobId,
    pub state: JobState,
    /// Where to follow it: `/v1/jobs/<id>`.
    pub url: String,
}

/// `GET /v1/jobs`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct JobList {
    /// Newest first by creation time.
    pub jobs: Vec<JobRecord>,
    /// Pass as `?after=` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// `GET /v1/datasets`: committed datasets, and the ones being written.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DatasetList {
    pub datasets: Vec<DatasetSummary>,
    /// Claims of datasets not committed yet; `stale` ones were left by a writer that is gone.
    pub writing: Vec<ClaimSummary>,
    /// Pass as `?after=` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// `PUT /v1/raw/{source}/{name}`: 201 stored, 200 the same bytes were already there.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RawUploaded {
    pub key: String,
    /// What an ingest spec names as input: `lake:<key>`.
    pub input: String,
    pub bytes: u64,
    pub sha256: String,
    /// False when the same bytes were already stored under the name (nothing written).
    pub created: bool,
}

/// `PUT /v1/books/{name}`: as [`RawUploaded`], naming the book for SPRT specs.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BookUploaded {
    pub key: String,
    /// What an SPRT spec names as book: `lake:<key>`.
    pub book: String,
    pub bytes: u64,
    pub sha256: String,
    pub created: bool,
}

/// `GET /v1/shuffles`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ShuffleList {
    pub shuffles: Vec<ShuffleManifest>,
    /// Pass as `?after=` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// `GET /v1/runs`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunList {
    pub runs: Vec<RunRecord>,
    /// Pass as `?after=` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// `GET /v1/nets`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct NetList {
    pub nets: Vec<NetManifest>,
    /// Null until a net is promoted.
    pub best: Option<BestNet>,
    /// Pass as `?after=` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// `POST /v1/sprt`: the test is planned and queued.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SprtSubmitted {
    /// The test's id (`/v1/sprt/<id>`).
    pub id: lakefish_schemas::names::SprtId,
    /// The job running it.
    pub job: JobId,
    /// The nets as resolved (`best` becomes a name).
    pub new: String,
    pub base: String,
    pub url: String,
}

/// `GET /v1/sprt`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SprtList {
    pub tests: Vec<SprtStatus>,
    /// Pass as `?after=` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// `GET /v1/pipelines/{name}/runs`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PipelineRunList {
    pub runs: Vec<lakefish_schemas::pipeline::PipelineRun>,
    /// Pass as `?after=` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// One configured pipeline in `GET /v1/pipelines`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PipelineSummary {
    pub name: String,
    /// Its cron expression, if it runs on a schedule.
    pub schedule: Option<String>,
    /// The next scheduled start (RFC 3339).
    pub next_run: Option<String>,
    /// The latest runs, newest first.
    pub runs: Vec<PipelineRun>,
}

/// `GET /v1/pipelines`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PipelineList {
    pub pipelines: Vec<PipelineSummary>,
}

/// `POST /v1/pipelines/{name}/run`: 202 a run started, 200 the running one joined.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PipelineStarted {
    pub run: PipelineRun,
    pub started: bool,
    pub url: String,
}
