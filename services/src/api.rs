//! The REST API: `fn router(state) -> Router`, no domain logic. Errors map to HTTP in
//! exactly one place, [`ApiError`].

pub use crate::error::ApiError;
pub use crate::extract::{ApiPath, ApiQuery};
use crate::queue::Queue;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::Method;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post, put};
use axum::{Json, Router};
use lakefish_jobs::Lake;
use lakefish_lake::records::{JobCursor, JobQuery, JobStore};
use lakefish_schemas::config::Config;
use lakefish_schemas::names::{RunId, ShuffleId};
use lakefish_schemas::{JobId, JobSpec, JobState, Source, raw_key};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;

#[derive(Clone)]
pub struct AppState {
    pub lake: Lake,
    pub jobs: JobStore,
    pub queue: Queue,
    /// `lakefish.toml` as loaded at start (auth tokens, pipelines, limits).
    pub config: Arc<Config>,
}

/// Largest accepted JSON body unless the config says otherwise.
pub const MAX_BODY_BYTES: usize = 1 << 20;
/// Largest accepted upload unless the config says otherwise (64 GiB).
pub const MAX_UPLOAD_BYTES: u64 = 64 << 30;

impl AppState {
    pub fn max_body(&self) -> usize {
        self.config.server.max_body_bytes.unwrap_or(MAX_BODY_BYTES)
    }

    /// Largest accepted upload, bytes (`server.max_upload_bytes`).
    pub fn max_upload(&self) -> u64 {
        self.config
            .server
            .max_upload_bytes
            .unwrap_or(MAX_UPLOAD_BYTES)
    }

    /// The local files work from this API may read (`[inputs] local_roots`).
    pub fn input_policy(&self) -> lakefish_lake::input::InputPolicy {
        lakefish_lake::input::InputPolicy::confined(&self.config.inputs.local_roots)
    }
}

/// A request or response body: JSON of a Rust type (its schema derived from the type), or
/// something else of a media type (pages, text, bytes).
#[derive(Clone, Copy)]
pub enum Body {
    Json(fn(&mut SchemaGenerator) -> Schema),
    Other(&'static str),
}

pub(crate) fn json<T: JsonSchema>() -> Body {
    Body::Json(|g| g.subschema_for::<T>())
}

const HTML: Body = Body::Other("text/html");

/// One route: the router is built from this table and `/v1/openapi.json` is generated from
/// it (bodies, statuses, parameters), so the description cannot drift from what is served.
pub struct Route {
    pub method: Method,
    pub path: &'static str,
    pub summary: &'static str,
    handler: MethodRouter<AppState>,
    /// The query string's type: each of its fields is one parameter.
    pub query: Option<fn(&mut SchemaGenerator) -> Schema>,
    pub request: Option<Body>,
    /// Success statuses and their bodies.
    pub ok: Vec<(StatusCode, Body)>,
    /// Error statuses besides 401/403 (added for routes that need a token).
    pub errors: Vec<StatusCode>,
    /// Dashboard pages show their errors as HTML (the token check still answers JSON).
    pub page: bool,
}

pub(crate) fn route(
    method: Method,
    path: &'static str,
    summary: &'static str,
    handler: MethodRouter<AppState>,
) -> Route {
    Route {
        method,
        path,
        summary,
        handler,
        query: None,
        request: None,
        ok: Vec::new(),
        errors: Vec::new(),
        page: false,
    }
}

impl Route {
    pub(crate) fn ok(mut self, status: StatusCode, body: Body) -> Self {
        self.ok.push((status, body));
        self
    }

    pub(crate) fn errors(mut self, codes: &[StatusCode]) -> Self {
        self.errors.extend_from_slice(codes);
        self
    }

    fn query<T: JsonSchema>(mut self) -> Self {
        self.query = Some(|g| g.subschema_for::<T>());
        self
    }

    pub(crate) fn request(mut self, body: Body) -> Self {
        self.request = Some(body);
        self
    }

    /// A dashboard page: HTML, 503 when the lake does not answer.
    pub(crate) fn page(self) -> Self {
        self.html_errors()
            .ok(StatusCode::OK, HTML)
            .errors(&[UNAVAILABLE])
    }

    /// A dashboard route (a page, a download, a form): its errors are pages too.
    pub(crate) fn html_errors(mut self) -> Self {
        self.page = true;
        self
    }
}

const OK: StatusCode = StatusCode::OK;
const CREATED: StatusCode = StatusCode::CREATED;
const ACCEPTED: StatusCode = StatusCode::ACCEPTED;
const BAD: StatusCode = StatusCode::BAD_REQUEST;
const NOT_FOUND: StatusCode = StatusCode::NOT_FOUND;
const CONFLICT: StatusCode = StatusCode::CONFLICT;
const TOO_LARGE: StatusCode = StatusCode::PAYLOAD_TOO_LARGE;
const UNAVAILABLE: StatusCode = StatusCode::SERVICE_UNAVAILABLE;

pub fn routes() -> Vec<Route> {
    use crate::bodies::*;
    use crate::dashboard as ui;
    use Method as M;
    let bytes = Body::Other("application/octet-stream");
    vec![
        route(
            M::GET,
            "/",
            "Dashboard: overview (HTML).",
            get(ui::overview),
        )
        .page(),
        route(
            M::GET,
            "/ui/jobs",
            "Dashboard: jobs with progress, filtered and paged as /v1/jobs (HTML).",
            get(crate::job_page::jobs),
        )
        .query::<ListJobs>()
        .page()
        .errors(&[BAD]),
        route(
            M::GET,
            "/ui/jobs/{id}",
            "Dashboard: one job, what it was asked and what it made (HTML).",
            get(crate::job_page::job),
        )
        .page()
        .errors(&[NOT_FOUND]),
        route(
            M::GET,
            "/ui/datasets",
            "Dashboard: datasets, newest first, a page at a time (?limit=&after=; HTML).",
            get(crate::list_pages::datasets),
        )
        .query::<crate::lists::PageParams>()
        .page()
        .errors(&[BAD]),
        route(
            M::GET,
            "/ui/runs",
            "Dashboard: training runs, newest first, a page at a time (HTML).",
            get(crate::list_pages::runs),
        )
        .query::<crate::lists::RunFilter>()
        .page()
        .errors(&[BAD]),
        route(
            M::GET,
            "/ui/runs/compare",
            "Dashboard: several runs' losses overlaid on log axes (?run=ID&run=ID, at most 8; HTML).",
            get(crate::list_pages::compare_runs),
        )
        .page()
        .errors(&[BAD, NOT_FOUND]),
        route(
            M::GET,
            "/ui/runs/{id}",
            "Dashboard: one run with its loss curves (HTML).",
            get(ui::run),
        )
        .page()
        .errors(&[NOT_FOUND]),
        route(
            M::GET,
            "/ui/nets",
            "Dashboard: registered nets, newest first, a page at a time, and the promotions (HTML).",
            get(crate::list_pages::nets),
        )
        .query::<crate::lists::NetFilter>()
        .page()
        .errors(&[BAD]),
        route(
            M::GET,
            "/ui/nets/{name}",
            "Dashboard: one net with its lineage (HTML); `best` is the best net.",
            get(ui::net),
        )
        .page()
        .errors(&[NOT_FOUND]),
        route(
            M::GET,
            "/ui/sprt",
            "Dashboard: SPRT tests filtered by state and side, a page at a time (HTML).",
            get(crate::list_pages::sprt_list),
        )
        .query::<crate::lists::SprtFilter>()
        .page()
        .errors(&[BAD]),
        route(
            M::GET,
            "/ui/sprt/{id}",
            "Dashboard: one SPRT test with its LLR trajectory (HTML).",
            get(ui::sprt),
        )
        .page()
        .errors(&[NOT_FOUND]),
        route(
            M::GET,
            "/ui/sprt/{id}/games/{n}",
            "Dashboard: game n (from 1) of an SPRT test's counted games, a PGN file.",
            get(ui::sprt_game),
        )
        .ok(OK, Body::Other("application/x-chess-pgn"))
        .errors(&[NOT_FOUND, UNAVAILABLE])
        .html_errors(),
        route(
            M::GET,
            "/ui/pipelines",
            "Dashboard: pipelines and their runs (HTML).",
            get(ui::pipelines),
        )
        .page(),
        route(
            M::GET,
            "/healthz",
            "Liveness: the lake and queue in use (no token needed).",
            get(healthz),
        )
        .ok(OK, json::<Health>()),
        route(
            M::GET,
            "/metrics",
            "Prometheus metrics computed from the lake.",
            get(metrics),
        )
        .ok(OK, Body::Other("text/plain"))
        .errors(&[UNAVAILABLE]),
        route(
            M::GET,
            "/v1/openapi.json",
            "This description.",
            get(openapi),
        )
        .ok(OK, json::<serde_json::Map<String, serde_json::Value>>()),
        route(
            M::POST,
            "/v1/jobs",
            "Submit a job: {kind, spec}; 202 with its id.",
            post(submit_job),
        )
        .request(json::<lakefish_schemas::job::SubmitRequest>())
        .ok(ACCEPTED, json::<Submitted>())
        .errors(&[BAD, TOO_LARGE, UNAVAILABLE]),
        route(
            M::GET,
            "/v1/jobs",
            "Job records, newest first by creation time, a page at a time (?state=&kind=&limit=&after=NEXT).",
            get(list_jobs),
        )
        .query::<ListJobs>()
        .ok(OK, json::<JobList>())
        .errors(&[BAD, UNAVAILABLE]),
        route(
            M::GET,
            "/v1/jobs/{id}",
            "One job record: state, progress, result, error.",
            get(get_job),
        )
        .ok(OK, json::<lakefish_schemas::JobRecord>())
        .errors(&[NOT_FOUND, UNAVAILABLE]),
        route(
            M::GET,
            "/v1/datasets",
            "Committed datasets with their masks, newest first, a page at a time (?limit=&after=NEXT); `writing` on the first page.",
            get(crate::lists::datasets),
        )
        .query::<crate::lists::PageParams>()
        .ok(OK, json::<DatasetList>())
        .errors(&[BAD, UNAVAILABLE]),
        route(
            M::PUT,
            "/v1/raw/{source}/{name}",
            "Stream an input file into raw/<source>/<name>.",
            put(upload_raw),
        )
        .query::<UploadQuery>()
        .request(bytes)
        .ok(CREATED, json::<RawUploaded>())
        .ok(OK, json::<RawUploaded>())
        .errors(&[BAD, NOT_FOUND, CONFLICT, TOO_LARGE, UNAVAILABLE]),
        route(
            M::PUT,
            "/v1/books/{name}",
            "Stream an opening book into raw/books/<name>.",
            put(upload_book),
        )
        .query::<UploadQuery>()
        .request(bytes)
        .ok(CREATED, json::<BookUploaded>())
        .ok(OK, json::<BookUploaded>())
        .errors(&[BAD, NOT_FOUND, CONFLICT, TOO_LARGE, UNAVAILABLE]),
        route(
            M::GET,
            "/v1/shuffles",
            "Committed shuffles, newest first, a page at a time (?limit=&after=NEXT).",
            get(crate::lists::shuffles),
        )
        .query::<crate::lists::PageParams>()
        .ok(OK, json::<ShuffleList>())
        .errors(&[BAD, UNAVAILABLE]),
        route(
            M::GET,
            "/v1/shuffles/{id}",
            "One shuffle's manifest.",
            get(shuffle),
        )
        .ok(OK, json::<lakefish_jobs::shuffle::ShuffleStatus>())
        .errors(&[NOT_FOUND, UNAVAILABLE]),
        route(
            M::GET,
            "/v1/runs",
            "Training runs, newest first, a page at a time (?shuffle=&limit=&after=NEXT).",
            get(crate::lists::runs),
        )
        .query::<crate::lists::RunFilter>()
        .ok(OK, json::<RunList>())
        .errors(&[BAD, UNAVAILABLE]),
        route(
            M::GET,
            "/v1/runs/{id}",
            "One run with its metrics rows.",
            get(run),
        )
        .ok(OK, json::<lakefish_jobs::nets::RunWithMetrics>())
        .errors(&[NOT_FOUND, UNAVAILABLE]),
        route(
            M::GET,
            "/v1/nets",
            "Registered nets, newest first, a page at a time (?dataset=&limit=&after=NEXT: `dataset` a `source/name` or a shuffle it was trained on), and the best one (null before any promotion).",
            get(crate::lists::nets),
        )
        .query::<crate::lists::NetFilter>()
        .ok(OK, json::<NetList>())
        .errors(&[BAD, UNAVAILABLE]),
        route(
            M::GET,
            "/v1/nets/{name}",
            "One net's manifest (name `best`: the best net's).",
            get(net),
        )
        .ok(OK, json::<lakefish_schemas::NetManifest>())
        .errors(&[NOT_FOUND, UNAVAILABLE]),
        route(
            M::GET,
            "/v1/nets/{name}/file",
            "The .nnue bytes, hash-checked (x-sha256); `best` works here too.",
            get(net_file),
        )
        .ok(OK, bytes)
        .errors(&[NOT_FOUND, UNAVAILABLE]),
        route(
            M::POST,
            "/v1/sprt",
            "Plan and queue an SPRT test; 202 with its id.",
            post(submit_sprt),
        )
        .request(json::<lakefish_schemas::SprtSpec>())
        .ok(ACCEPTED, json::<SprtSubmitted>())
        .errors(&[BAD, NOT_FOUND, TOO_LARGE, UNAVAILABLE]),
        route(
            M::GET,
            "/v1/sprt",
            "SPRT tests, newest first, a page at a time (?net=&state=&limit=&after=NEXT).",
            get(crate::lists::list_sprt),
        )
        .query::<crate::lists::SprtFilter>()
        .ok(OK, json::<SprtList>())
        .errors(&[BAD, UNAVAILABLE]),
        route(
            M::GET,
            "/v1/sprt/calc",
            "LLR, Elo and LOS from counts (?penta= or ?wdl=).",
            get(crate::sprt_api::sprt_calc),
        )
        .query::<crate::sprt_api::CalcQuery>()
        .ok(OK, json::<lakefish_jobs::sprt::Calc>())
        .errors(&[BAD]),
        route(
            M::GET,
            "/v1/sprt/{id}",
            "One SPRT test's status.",
            get(crate::sprt_api::get_sprt),
        )
        .ok(OK, json::<lakefish_schemas::SprtStatus>())
        .errors(&[NOT_FOUND, UNAVAILABLE]),
        route(
            M::GET,
            "/v1/sprt/{id}/pgn",
            "The counted games of a test.",
            get(crate::sprt_api::sprt_pgn),
        )
        .ok(OK, Body::Other("application/x-chess-pgn"))
        .errors(&[NOT_FOUND, UNAVAILABLE]),
        route(
            M::GET,
            "/v1/pipelines",
            "Configured pipelines, schedules and recent runs.",
            get(pipelines),
        )
        .ok(OK, json::<PipelineList>())
        .errors(&[UNAVAILABLE]),
        route(
            M::POST,
            "/v1/pipelines/{name}/run",
            "Start a pipeline run (202) or join the running one (200).",
            post(run_pipeline),
        )
        .ok(ACCEPTED, json::<PipelineStarted>())
        .ok(OK, json::<PipelineStarted>())
        .errors(&[NOT_FOUND, UNAVAILABLE]),
        route(
            M::GET,
            "/v1/pipelines/{name}/runs",
            "One pipeline's runs, newest first, a page at a time (?state=&limit=&after=NEXT).",
            get(crate::lists::pipeline_runs),
        )
        .query::<crate::lists::PipelineRunFilter>()
        .ok(OK, json::<crate::bodies::PipelineRunList>())
        .errors(&[BAD, NOT_FOUND, UNAVAILABLE]),
        route(
            M::GET,
            "/v1/pipelines/{name}/runs/{id}",
            "One pipeline run.",
            get(pipeline_run),
        )
        .ok(OK, json::<lakefish_schemas::pipeline::PipelineRun>())
        .errors(&[NOT_FOUND, UNAVAILABLE]),
    ]
    .into_iter()
    .chain(crate::engines_api::routes())
    .chain(crate::experiments_api::routes())
    .chain(crate::dataset_page::routes())
    .chain(crate::space_page::routes())
    .chain(crate::actions::routes())
    .chain(crate::ui_actions::routes())
    .collect()
}

pub fn router(state: AppState) -> Router {
    let mut r = Router::new();
    for rt in routes() {
        let handler = match rt.request {
            Some(Body::Json(_)) => rt.handler.layer(axum::middleware::from_fn_with_state(
                state.clone(),
                crate::guard::require_json,
            )),
            _ => rt.handler,
        };
        r = r.route(rt.path, handler);
    }
    // Outermost first: the host and origin check, then tokens, then the body's limits.
    r.fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::extract::DefaultBodyLimit::max(state.max_body()))
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
            state.config.server.body_timeout(),
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::auth::check,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::guard::check,
        ))
        .with_state(state)
}

pub use crate::openapi::openapi_document;

async fn openapi() -> Json<serde_json::Value> {
    Json(openapi_document())
}

async fn healthz(State(s): State<AppState>) -> Json<crate::bodies::Health> {
    Json(crate::bodies::Health {
        status: "ok",
        lake: s.lake.describe().to_string(),
        queue: s.queue.describe(),
    })
}

async fn metrics(State(s): State<AppState>) -> Result<Response, ApiError> {
    let text = lakefish_jobs::metrics::prometheus(&s.lake, &s.jobs).await?;
    let ct = [(
        axum::http::header::CONTENT_TYPE,
        "text/plain; version=0.0.4; charset=utf-8",
    )];
    Ok((ct, text).into_response())
}

/// Every configured pipeline with its schedule, next start and latest runs.
async fn pipelines(State(s): State<AppState>) -> Result<Response, ApiError> {
    let mut out = Vec::new();
    for (name, p) in &s.config.pipelines {
        let runs = lakefish_jobs::pipeline::list_runs(&s.lake, name, 10).await?;
        out.push(crate::bodies::PipelineSummary {
            name: name.clone(),
            schedule: p.schedule.clone(),
            next_run: p.schedule.as_deref().and_then(crate::scheduler::next_time),
            runs,
        });
    }
    Ok(Json(crate::bodies::PipelineList { pipelines: out }).into_response())
}

fn pipeline_config(s: &AppState, name: &str) -> Result<(), ApiError> {
    if s.config.pipelines.contains_key(name) {
        Ok(())
    } else {
        Err(ApiError::NotFound(format!(
            "no pipeline {name:?} in the config (configured: {})",
            s.config
                .pipelines
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        )))
    }
}

/// Starts a run now (202), or answers with the run already in progress (200).
async fn run_pipeline(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Response, ApiError> {
    pipeline_config(&s, &name)?;
    let (run, started) = lakefish_jobs::pipeline::start_run(&s.lake, &name, "manual").await?;
    let status = if started {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    let url = format!("/v1/pipelines/{name}/runs/{}", run.id);
    Ok((
        status,
        Json(crate::bodies::PipelineStarted { run, started, url }),
    )
        .into_response())
}

async fn pipeline_run(
    State(s): State<AppState>,
    ApiPath((name, id)): ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    pipeline_config(&s, &name)?;
    let id: lakefish_schemas::names::PipelineRunId = id
        .parse()
        .map_err(|e: lakefish_schemas::NameError| ApiError::NotFound(e.to_string()))?;
    let run = lakefish_jobs::pipeline::read_run(&s.lake, &name, &id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("pipeline {name} has no run {id}")))?;
    Ok(Json(run).into_response())
}

/// A known path with a method it does not serve: JSON like every other error.
async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed("method not allowed on this path (see /v1/openapi.json)".into())
}

async fn not_found() -> ApiError {
    ApiError::NotFound("no such route (see the README for the /v1 API)".into())
}

async fn submit_job(
    State(s): State<AppState>,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(|e| body_error(&s, e))?;
    let spec = JobSpec::from_request(&body).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let (id, _) = admit(&s, &spec).await?;
    let body = crate::bodies::Submitted {
        url: format!("/v1/jobs/{id}"),
        id,
        state: JobState::Queued,
    };
    Ok((StatusCode::ACCEPTED, Json(body)).into_response())
}

/// A job through the door: its inputs, engines and spec checked (a 4xx naming the field, with
/// nothing recorded or queued), an SPRT planned, then recorded and queued by the one
/// [`crate::queue::submit`] rule (503 when the queue does not take it; nothing stays).
pub(crate) async fn admit(
    s: &AppState,
    spec: &JobSpec,
) -> Result<(JobId, Option<lakefish_schemas::SprtPlan>), ApiError> {
    check_inputs(s, spec)?;
    lakefish_jobs::admission::check(&s.lake, spec).await?;
    let plan = match spec {
        JobSpec::Sprt(sprt) => {
            let ctx =
                lakefish_jobs::JobContext::new(s.lake.clone(), tokio::runtime::Handle::current())
                    .with_hooks(lakefish_jobs::Hooks {
                        inputs: s.input_policy(),
                        mode: lakefish_jobs::Mode::Queued {
                            submitter: s.queue.submitter(s.jobs.clone()),
                            records: s.jobs.clone(),
                        },
                        ..Default::default()
                    });
            let sprt = sprt.clone();
            Some(
                tokio::task::spawn_blocking(move || lakefish_jobs::sprt::plan(&ctx, &sprt))
                    .await
                    .map_err(|e| ApiError::Internal(e.to_string()))??,
            )
        }
        JobSpec::Experiment(e) => {
            let ctx =
                lakefish_jobs::JobContext::new(s.lake.clone(), tokio::runtime::Handle::current())
                    .with_hooks(lakefish_jobs::Hooks {
                        inputs: s.input_policy(),
                        ..Default::default()
                    });
            let e = e.clone();
            tokio::task::spawn_blocking(move || lakefish_jobs::experiment::check_rating(&ctx, &e))
                .await
                .map_err(|e| ApiError::Internal(e.to_string()))??;
            None
        }
        _ => None,
    };
    let id = JobId::new();
    crate::queue::submit(&s.jobs, &s.queue, &id, spec).await?;
    Ok((id, plan))
}

/// A JSON body read strictly: malformed JSON, a key given twice or a value of the wrong
/// shape are 400s naming what is wrong (`what`: the thing the body describes).
pub(crate) fn strict_json<T: serde::de::DeserializeOwned>(
    body: &[u8],
    what: &str,
) -> Result<T, ApiError> {
    lakefish_schemas::json::check_no_duplicate_keys(body)
        .map_err(|e| ApiError::BadRequest(format!("invalid {what}: {e}")))?;
    serde_json::from_slice(body).map_err(|e| ApiError::BadRequest(format!("invalid {what}: {e}")))
}

/// A JSON body that could not be read: too large (413) or malformed (400).
pub(crate) fn body_error(s: &AppState, e: axum::extract::rejection::BytesRejection) -> ApiError {
    match e.status() {
        StatusCode::PAYLOAD_TOO_LARGE => {
            ApiError::TooLarge(format!("request body larger than {} bytes", s.max_body()))
        }
        _ => ApiError::BadRequest(e.body_text()),
    }
}

/// Refuses, before anything is recorded or queued, a job that would open a local file outside
/// `[inputs] local_roots` (workers check again when they open it).
fn check_inputs(s: &AppState, spec: &JobSpec) -> Result<(), ApiError> {
    let policy = s.input_policy();
    for input in spec.inputs() {
        policy
            .check(input)
            .map_err(|why| ApiError::BadRequest(format!("input {input:?}: {why}")))?;
    }
    Ok(())
}

fn parse_id(id: &str) -> Result<JobId, ApiError> {
    JobId::parse(id)
        .ok_or_else(|| ApiError::NotFound(format!("job {id:?} not found (ids are UUIDs)")))
}

async fn get_job(
    State(s): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let rec = s
        .jobs
        .get(&id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("job {id} not found")))?;
    Ok(Json(rec).into_response())
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListJobs {
    /// queued, running, succeeded, failed or cancelled (empty: any).
    pub(crate) state: Option<String>,
    /// A job kind (ingest_pgn, train, sprt_batch, ...; empty: any).
    pub(crate) kind: Option<String>,
    /// Records on a page, 1 to 1000 (default 100).
    pub(crate) limit: Option<usize>,
    /// The `next` of the previous page: the page after it.
    pub(crate) after: Option<String>,
}

async fn list_jobs(
    State(s): State<AppState>,
    ApiQuery(q): ApiQuery<ListJobs>,
) -> Result<Response, ApiError> {
    let page = s.jobs.page(&job_query(q)?).await?;
    Ok(Json(crate::bodies::JobList {
        jobs: page.jobs,
        next: page.next.map(|c| c.encode()),
    })
    .into_response())
}

/// A job list's query checked: known state and kind, a cursor that parses, 1 to 1000 records
/// (100 unless asked). An empty state or kind (a form's "any") filters nothing.
pub(crate) fn job_query(q: ListJobs) -> Result<JobQuery, ApiError> {
    let state = match q.state.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(st) => Some(JobState::parse(st).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "unknown state {st:?} (use one of queued, running, succeeded, failed, cancelled)"
            ))
        })?),
    };
    let kind = match q.kind.filter(|k| !k.is_empty()) {
        Some(k) => Some(lakefish_schemas::JobKind::parse(&k).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "unknown job kind {k:?} (known: {})",
                lakefish_schemas::JobKind::ALL
                    .iter()
                    .map(|k| k.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?),
        None => None,
    };
    let after = q
        .after
        .as_deref()
        .map(JobCursor::parse)
        .transpose()
        .map_err(ApiError::BadRequest)?;
    Ok(JobQuery {
        state,
        kind,
        after,
        limit: q.limit.unwrap_or(100).clamp(1, 1000),
        submitted_only: false,
    })
}

/// `?replace=true` on an upload: store other bytes under a name that is taken.
#[derive(serde::Deserialize, Default, JsonSchema)]
struct UploadQuery {
    #[serde(default)]
    replace: bool,
}

/// Streams an upload into `key` under the lake's rule for raw objects
/// ([`Lake::put_immutable`]): at most `server.max_upload_bytes` (413 above, nothing stored),
/// the same bytes again are a 200, other bytes a 409 unless `replace`.
async fn upload(
    s: &AppState,
    key: &str,
    headers: &axum::http::HeaderMap,
    body: axum::body::Body,
    replace: bool,
) -> Result<lakefish_lake::lake::Stored, ApiError> {
    let declared = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let stream = body.into_data_stream();
    Ok(s.lake
        .put_immutable(key, stream, declared, s.max_upload(), replace)
        .await?)
}

/// The answer to an upload: 201 when stored, 200 when the same bytes were already there.
fn uploaded(key: &str, book: bool, up: lakefish_lake::lake::Stored) -> Response {
    let status = if up.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let lake_name = format!("{}{key}", lakefish_lake::input::LAKE_PREFIX);
    let key = key.to_string();
    let (bytes, sha256, created) = (up.bytes, up.sha256_hex(), up.created);
    if book {
        let body = crate::bodies::BookUploaded {
            key,
            book: lake_name,
            bytes,
            sha256,
            created,
        };
        (status, Json(body)).into_response()
    } else {
        let body = crate::bodies::RawUploaded {
            key,
            input: lake_name,
            bytes,
            sha256,
            created,
        };
        (status, Json(body)).into_response()
    }
}

/// Streams an input file into `raw/<source>/<name>` (constant memory, any size), so workers on
/// other machines can read it as `lake:raw/<source>/<name>`.
async fn upload_raw(
    State(s): State<AppState>,
    ApiPath((source, name)): ApiPath<(String, String)>,
    ApiQuery(q): ApiQuery<UploadQuery>,
    headers: axum::http::HeaderMap,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    let src = Source::parse(&source).ok_or_else(|| {
        ApiError::BadRequest(format!(
            "unknown source {source:?} (binpack, lichess, selfplay)"
        ))
    })?;
    let key = raw_key(src, &name).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let up = upload(&s, &key, &headers, body, q.replace).await?;
    Ok(uploaded(&key, false, up))
}

/// Stores an opening book as `raw/books/<name>`; SPRT specs name it `lake:raw/books/<name>`.
async fn upload_book(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<UploadQuery>,
    headers: axum::http::HeaderMap,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    let key = lakefish_schemas::names::book_key(&name)
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let up = upload(&s, &key, &headers, body, q.replace).await?;
    Ok(uploaded(&key, true, up))
}

async fn shuffle(
    State(s): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let unknown = || ApiError::NotFound(format!("shuffle {id:?} not found"));
    let id: ShuffleId = path_id(&id, "shuffle")?;
    let status = lakefish_jobs::shuffle::shuffle_status(&s.lake, &id)
        .await?
        .ok_or_else(unknown)?;
    Ok(Json(status).into_response())
}

async fn run(
    State(s): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let unknown = || ApiError::NotFound(format!("run {id:?} not found"));
    let id: RunId = path_id(&id, "run")?;
    let v = lakefish_jobs::nets::run_with_metrics(&s.lake, &id)
        .await?
        .ok_or_else(unknown)?;
    Ok(Json(v).into_response())
}

async fn net(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Response, ApiError> {
    let name = lakefish_jobs::nets::resolve_net_name(&s.lake, &name).await?;
    let m = lakefish_jobs::nets::read_net(&s.lake, &name)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("net {name} is not registered")))?;
    Ok(Json(m).into_response())
}

/// The net's bytes, checked against its manifest before they are sent; the sha256 also goes
/// out as a header so clients can check what arrived.
async fn net_file(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Response, ApiError> {
    let name = lakefish_jobs::nets::resolve_net_name(&s.lake, &name).await?;
    if lakefish_jobs::nets::read_net(&s.lake, &name)
        .await?
        .is_none()
    {
        return Err(ApiError::NotFound(format!("net {name} is not registered")));
    }
    let (m, bytes) = lakefish_jobs::nets::fetch_net(&s.lake, &name).await?;
    let headers = [
        (
            axum::http::header::CONTENT_TYPE,
            "application/octet-stream".to_string(),
        ),
        (
            axum::http::header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"{}\"", m.name),
        ),
    ];
    Ok((headers, [("x-sha256", m.sha256)], bytes).into_response())
}

/// Plans the test right away (so a bad book or net is a 400 naming it), then queues it.
async fn submit_sprt(
    State(s): State<AppState>,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(|e| body_error(&s, e))?;
    let value: serde_json::Value = strict_json(&body, "SPRT spec")?;
    let body = queue_sprt(&s, value).await?;
    Ok((StatusCode::ACCEPTED, Json(body)).into_response())
}

/// Checks, plans and queues an SPRT given as JSON: the API's body or the dashboard's form.
pub(crate) async fn queue_sprt(
    s: &AppState,
    value: serde_json::Value,
) -> Result<crate::bodies::SprtSubmitted, ApiError> {
    let wrapped = serde_json::to_vec(&json!({"kind": "sprt", "spec": value})).expect("json");
    let spec = JobSpec::from_request(&wrapped).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let (id, plan) = admit(s, &spec).await?;
    let plan = plan.expect("an SPRT is planned at the door");
    Ok(crate::bodies::SprtSubmitted {
        url: format!("/v1/sprt/{}", plan.id),
        id: plan.id,
        job: id,
        new: plan.new.name,
        base: plan.base.name,
    })
}

/// An id from a path: one that cannot be an id names nothing (404, like an unknown one).
pub(crate) fn path_id<T: std::str::FromStr>(id: &str, what: &str) -> Result<T, ApiError> {
    id.parse()
        .map_err(|_| ApiError::NotFound(format!("{what} {id:?} not found")))
}
