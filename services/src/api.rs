//! The REST API: `fn router(state) -> Router`, no domain logic. Errors map to HTTP in
//! exactly one place, [`ApiError`].

pub use crate::error::ApiError;
use crate::queue::Queue;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::Method;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post, put};
use axum::{Json, Router};
use lakefish_jobs::Lake;
use lakefish_lake::datasets::list_datasets;
use lakefish_lake::records::JobStore;
use lakefish_schemas::config::Config;
use lakefish_schemas::{JobId, JobSpec, JobState, QueuedJob, Source, raw_key};
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

/// One route: the router is built from this table and `/v1/openapi.json` is generated from
/// it, so the description cannot drift from what is served.
pub struct Route {
    pub method: Method,
    pub path: &'static str,
    pub summary: &'static str,
    handler: MethodRouter<AppState>,
}

fn route(
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
    }
}

pub fn routes() -> Vec<Route> {
    use crate::dashboard as ui;
    use Method as M;
    vec![
        route(
            M::GET,
            "/",
            "Dashboard: overview (HTML).",
            get(ui::overview),
        ),
        route(
            M::GET,
            "/ui/jobs",
            "Dashboard: jobs with progress (HTML).",
            get(ui::jobs),
        ),
        route(
            M::GET,
            "/ui/datasets",
            "Dashboard: datasets (HTML).",
            get(ui::datasets),
        ),
        route(
            M::GET,
            "/ui/runs",
            "Dashboard: training runs (HTML).",
            get(ui::runs),
        ),
        route(
            M::GET,
            "/ui/runs/{id}",
            "Dashboard: one run with its loss curves (HTML).",
            get(ui::run),
        ),
        route(
            M::GET,
            "/ui/nets",
            "Dashboard: registered nets (HTML).",
            get(ui::nets),
        ),
        route(
            M::GET,
            "/ui/nets/{name}",
            "Dashboard: one net with its lineage (HTML).",
            get(ui::net),
        ),
        route(
            M::GET,
            "/ui/sprt",
            "Dashboard: SPRT tests (HTML).",
            get(ui::sprt_list),
        ),
        route(
            M::GET,
            "/ui/sprt/{id}",
            "Dashboard: one SPRT test with its LLR trajectory (HTML).",
            get(ui::sprt),
        ),
        route(
            M::GET,
            "/ui/pipelines",
            "Dashboard: pipelines and their runs (HTML).",
            get(ui::pipelines),
        ),
        route(
            M::GET,
            "/healthz",
            "Liveness: the lake and queue in use (no token needed).",
            get(healthz),
        ),
        route(
            M::GET,
            "/metrics",
            "Prometheus metrics computed from the lake.",
            get(metrics),
        ),
        route(
            M::GET,
            "/v1/openapi.json",
            "This description.",
            get(openapi),
        ),
        route(
            M::POST,
            "/v1/jobs",
            "Submit a job: {kind, spec}; 202 with its id.",
            post(submit_job),
        ),
        route(
            M::GET,
            "/v1/jobs",
            "Job records, newest first (?state=&limit=).",
            get(list_jobs),
        ),
        route(
            M::GET,
            "/v1/jobs/{id}",
            "One job record: state, progress, result, error.",
            get(get_job),
        ),
        route(
            M::GET,
            "/v1/datasets",
            "Committed datasets with their masks.",
            get(datasets),
        ),
        route(
            M::PUT,
            "/v1/raw/{source}/{name}",
            "Stream an input file into raw/<source>/<name>.",
            put(upload_raw),
        ),
        route(
            M::PUT,
            "/v1/books/{name}",
            "Stream an opening book into raw/books/<name>.",
            put(upload_book),
        ),
        route(M::GET, "/v1/shuffles", "Committed shuffles.", get(shuffles)),
        route(
            M::GET,
            "/v1/shuffles/{id}",
            "One shuffle's manifest.",
            get(shuffle),
        ),
        route(M::GET, "/v1/runs", "Training runs.", get(runs)),
        route(
            M::GET,
            "/v1/runs/{id}",
            "One run with its metrics rows.",
            get(run),
        ),
        route(
            M::GET,
            "/v1/nets",
            "Registered nets, and the best one (null before any promotion).",
            get(nets),
        ),
        route(
            M::GET,
            "/v1/nets/{name}",
            "One net's manifest (name `best`: the best net's).",
            get(net),
        ),
        route(
            M::GET,
            "/v1/nets/{name}/file",
            "The .nnue bytes, hash-checked (x-sha256); `best` works here too.",
            get(net_file),
        ),
        route(
            M::POST,
            "/v1/sprt",
            "Plan and queue an SPRT test; 202 with its id.",
            post(submit_sprt),
        ),
        route(
            M::GET,
            "/v1/sprt",
            "SPRT tests, newest first (?net=&state=).",
            get(list_sprt),
        ),
        route(
            M::GET,
            "/v1/sprt/calc",
            "LLR, Elo and LOS from counts (?penta= or ?wdl=).",
            get(sprt_calc),
        ),
        route(
            M::GET,
            "/v1/sprt/{id}",
            "One SPRT test's status.",
            get(get_sprt),
        ),
        route(
            M::GET,
            "/v1/sprt/{id}/pgn",
            "The counted games of a test.",
            get(sprt_pgn),
        ),
        route(
            M::GET,
            "/v1/pipelines",
            "Configured pipelines, schedules and recent runs.",
            get(pipelines),
        ),
        route(
            M::POST,
            "/v1/pipelines/{name}/run",
            "Start a pipeline run (202) or join the running one (200).",
            post(run_pipeline),
        ),
        route(
            M::GET,
            "/v1/pipelines/{name}/runs/{id}",
            "One pipeline run.",
            get(pipeline_run),
        ),
    ]
}

pub fn router(state: AppState) -> Router {
    let mut r = Router::new();
    for rt in routes() {
        r = r.route(rt.path, rt.handler);
    }
    r.fallback(not_found)
        .layer(axum::extract::DefaultBodyLimit::max(state.max_body()))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::auth::check,
        ))
        .with_state(state)
}

/// OpenAPI 3.1 from the route table: paths, methods, path parameters and the scope each
/// route needs (the same function the auth middleware asks).
pub fn openapi_document() -> serde_json::Value {
    let mut paths = serde_json::Map::new();
    for rt in routes() {
        let params: Vec<serde_json::Value> = rt
            .path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}'))
            .map(|name| json!({ "name": name, "in": "path", "required": true, "schema": { "type": "string" } }))
            .collect();
        let scope = crate::auth::needed_scope(&rt.method, rt.path);
        let mut op = json!({
            "summary": rt.summary,
            "operationId": format!("{} {}", rt.method, rt.path),
            "responses": {
                "200": { "description": "OK (202 Accepted for queued work, 201 Created for uploads)" },
                "400": { "description": "Bad request; {\"error\"} says what is wrong" },
                "401": { "description": "No or unknown token (when tokens are configured)" },
                "403": { "description": "The token lacks the scope" },
                "404": { "description": "Not found" }
            },
            "x-lakefish-scope": scope.map(|s| s.as_str()),
        });
        if !params.is_empty() {
            op["parameters"] = serde_json::Value::Array(params);
        }
        if scope.is_some() {
            op["security"] = json!([{ "bearer": [] }]);
        }
        let entry = paths
            .entry(rt.path.to_string())
            .or_insert_with(|| json!({}));
        entry[rt.method.as_str().to_ascii_lowercase()] = op;
    }
    json!({
        "openapi": "3.1.0",
        "info": { "title": "lakefish", "version": env!("CARGO_PKG_VERSION"),
                  "description": "NNUE training data lake and job service. See the README for the job specs." },
        "components": { "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } } },
        "paths": paths,
    })
}

async fn openapi() -> Json<serde_json::Value> {
    Json(openapi_document())
}

async fn healthz(State(s): State<AppState>) -> Json<serde_json::Value> {
    Json(json!({ "status": "ok", "lake": s.lake.describe(), "queue": s.queue.describe() }))
}

async fn metrics(State(s): State<AppState>) -> Result<Response, ApiError> {
    let text = lakefish_jobs::metrics::prometheus(&s.lake).await?;
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
        out.push(json!({
            "name": name,
            "schedule": p.schedule,
            "next_run": p.schedule.as_deref().and_then(crate::scheduler::next_time),
            "runs": runs,
        }));
    }
    Ok(Json(json!({ "pipelines": out })).into_response())
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
    Path(name): Path<String>,
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
        Json(json!({ "run": run, "started": started, "url": url })),
    )
        .into_response())
}

async fn pipeline_run(
    State(s): State<AppState>,
    Path((name, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    pipeline_config(&s, &name)?;
    lakefish_schemas::names::check_segment("run id", &id, 128)
        .map_err(|e| ApiError::NotFound(e.to_string()))?;
    let run = lakefish_jobs::pipeline::read_run(&s.lake, &name, &id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("pipeline {name} has no run {id}")))?;
    Ok(Json(run).into_response())
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
    check_inputs(&s, &spec)?;
    let id = JobId::new();
    let record = JobStore::new_record(id.clone(), spec.clone());
    s.jobs.put(&record).await?;
    let job = QueuedJob::new(id.clone(), &spec);
    if let Err(e) = s.queue.push(job).await {
        let mut failed = record.clone();
        failed.state = JobState::Failed;
        failed.error = Some(format!("could not enqueue: {e}"));
        let _ = s.jobs.put(&failed).await;
        return Err(ApiError::Unavailable(format!("queue unavailable: {e}")));
    }
    let body = json!({ "id": id, "state": "queued", "url": format!("/v1/jobs/{id}") });
    Ok((StatusCode::ACCEPTED, Json(body)).into_response())
}

/// A JSON body that could not be read: too large (413) or malformed (400).
fn body_error(s: &AppState, e: axum::extract::rejection::BytesRejection) -> ApiError {
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

async fn get_job(State(s): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let rec = s
        .jobs
        .get(&id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("job {id} not found")))?;
    Ok(Json(rec).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListJobs {
    state: Option<String>,
    limit: Option<usize>,
}

async fn list_jobs(
    State(s): State<AppState>,
    query: Result<Query<ListJobs>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let state = match q.state.as_deref() {
        None => None,
        Some(st) => Some(JobState::parse(st).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "unknown state {st:?} (use one of queued, running, succeeded, failed)"
            ))
        })?),
    };
    let limit = q.limit.unwrap_or(100).clamp(1, 10_000);
    let jobs = s.jobs.list(state, limit).await?;
    Ok(Json(json!({ "jobs": jobs })).into_response())
}

/// Committed datasets, and the ones being written (`writing`: each claim with its job,
/// owner and expiry; `stale` ones were left by a writer that is gone).
async fn datasets(State(s): State<AppState>) -> Result<Response, ApiError> {
    let datasets = list_datasets(&s.lake).await?;
    let writing = lakefish_lake::datasets::list_claims(&s.lake).await?;
    Ok(Json(json!({ "datasets": datasets, "writing": writing })).into_response())
}

/// `?replace=true` on an upload: store other bytes under a name that is taken.
#[derive(serde::Deserialize, Default)]
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
fn uploaded(key: &str, field: &str, up: lakefish_lake::lake::Stored) -> Response {
    let status = if up.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let body = json!({
        "key": key,
        field: format!("{}{key}", lakefish_lake::input::LAKE_PREFIX),
        "bytes": up.bytes,
        "sha256": up.sha256_hex(),
        "created": up.created,
    });
    (status, Json(body)).into_response()
}

/// Streams an input file into `raw/<source>/<name>` (constant memory, any size), so workers on
/// other machines can read it as `lake:raw/<source>/<name>`.
async fn upload_raw(
    State(s): State<AppState>,
    Path((source, name)): Path<(String, String)>,
    query: Result<Query<UploadQuery>, axum::extract::rejection::QueryRejection>,
    headers: axum::http::HeaderMap,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    let src = Source::parse(&source).ok_or_else(|| {
        ApiError::BadRequest(format!(
            "unknown source {source:?} (binpack, lichess, selfplay)"
        ))
    })?;
    let key = raw_key(src, &name).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let Query(q) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let up = upload(&s, &key, &headers, body, q.replace).await?;
    Ok(uploaded(&key, "input", up))
}

/// Stores an opening book as `raw/books/<name>`; SPRT specs name it `lake:raw/books/<name>`.
async fn upload_book(
    State(s): State<AppState>,
    Path(name): Path<String>,
    query: Result<Query<UploadQuery>, axum::extract::rejection::QueryRejection>,
    headers: axum::http::HeaderMap,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    let key = lakefish_schemas::names::book_key(&name)
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let Query(q) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let up = upload(&s, &key, &headers, body, q.replace).await?;
    Ok(uploaded(&key, "book", up))
}

async fn shuffles(State(s): State<AppState>) -> Result<Response, ApiError> {
    let all = lakefish_jobs::shuffle::list_shuffles(&s.lake).await?;
    Ok(Json(json!({ "shuffles": all })).into_response())
}

async fn shuffle(State(s): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let unknown = || ApiError::NotFound(format!("shuffle {id:?} not found"));
    lakefish_schemas::names::check_segment("shuffle", &id, 64).map_err(|_| unknown())?;
    let status = lakefish_jobs::shuffle::shuffle_status(&s.lake, &id)
        .await?
        .ok_or_else(unknown)?;
    Ok(Json(status).into_response())
}

async fn runs(State(s): State<AppState>) -> Result<Response, ApiError> {
    let all = lakefish_jobs::nets::list_runs(&s.lake).await?;
    Ok(Json(json!({ "runs": all })).into_response())
}

async fn run(State(s): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let unknown = || ApiError::NotFound(format!("run {id:?} not found"));
    lakefish_schemas::names::check_segment("run", &id, 64).map_err(|_| unknown())?;
    let v = lakefish_jobs::nets::run_with_metrics(&s.lake, &id)
        .await?
        .ok_or_else(unknown)?;
    Ok(Json(v).into_response())
}

async fn nets(State(s): State<AppState>) -> Result<Response, ApiError> {
    let all = lakefish_jobs::nets::list_nets(&s.lake).await?;
    let best = lakefish_jobs::nets::read_best(&s.lake).await?;
    Ok(Json(json!({ "nets": all, "best": best })).into_response())
}

async fn net(State(s): State<AppState>, Path(name): Path<String>) -> Result<Response, ApiError> {
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
    Path(name): Path<String>,
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
    let value: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::BadRequest(format!("invalid JSON: {e}")))?;
    let wrapped = serde_json::to_vec(&json!({"kind": "sprt", "spec": value})).expect("json");
    let spec = JobSpec::from_request(&wrapped).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let JobSpec::Sprt(sprt) = &spec else {
        unreachable!("decoded as sprt")
    };
    check_inputs(&s, &spec)?;
    let ctx = lakefish_jobs::JobContext::new(s.lake.clone(), tokio::runtime::Handle::current())
        .with_hooks(lakefish_jobs::Hooks {
            inputs: s.input_policy(),
            ..Default::default()
        });
    let sprt = sprt.clone();
    let plan = tokio::task::spawn_blocking(move || lakefish_jobs::sprt::plan(&ctx, &sprt))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))??;
    let id = JobId::new();
    let record = JobStore::new_record(id.clone(), spec.clone());
    s.jobs.put(&record).await?;
    s.queue
        .push(QueuedJob::new(id.clone(), &spec))
        .await
        .map_err(|e| ApiError::Unavailable(format!("queue unavailable: {e}")))?;
    let body = json!({
        "id": plan.id, "job": id, "new": plan.new.name, "base": plan.base.name,
        "url": format!("/v1/sprt/{}", plan.id),
    });
    Ok((StatusCode::ACCEPTED, Json(body)).into_response())
}

fn sprt_id(id: &str) -> Result<(), ApiError> {
    lakefish_schemas::names::check_segment("sprt", id, 64)
        .map_err(|_| ApiError::NotFound(format!("sprt test {id:?} not found")))
}

async fn get_sprt(State(s): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    sprt_id(&id)?;
    let st = lakefish_jobs::sprt::status(&s.lake, &id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("sprt test {id} not found")))?;
    Ok(Json(st).into_response())
}

async fn sprt_pgn(State(s): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    sprt_id(&id)?;
    let pgn = lakefish_jobs::sprt::pgn(&s.lake, &id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("sprt test {id} not found")))?;
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/x-chess-pgn")],
        pgn,
    )
        .into_response())
}

#[derive(Deserialize)]
struct SprtFilter {
    net: Option<String>,
    state: Option<String>,
}

async fn list_sprt(
    State(s): State<AppState>,
    Query(q): Query<SprtFilter>,
) -> Result<Response, ApiError> {
    let state = match q.state.as_deref() {
        None => None,
        Some(v) => Some(lakefish_schemas::SprtState::parse(v).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "state {v:?}: expected running, accepted, rejected or inconclusive"
            ))
        })?),
    };
    let all = lakefish_jobs::sprt::list(&s.lake, q.net.as_deref(), state).await?;
    Ok(Json(json!({ "tests": all })).into_response())
}

#[derive(Deserialize)]
struct CalcQuery {
    penta: Option<String>,
    wdl: Option<String>,
    #[serde(default)]
    elo0: f64,
    #[serde(default = "two")]
    elo1: f64,
    #[serde(default = "normalized")]
    model: String,
    #[serde(default = "five_percent")]
    alpha: f64,
    #[serde(default = "five_percent")]
    beta: f64,
}

fn two() -> f64 {
    2.0
}
fn normalized() -> String {
    "normalized".into()
}
fn five_percent() -> f64 {
    0.05
}

async fn sprt_calc(
    query: Result<Query<CalcQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let (kind, counts) = match (&q.penta, &q.wdl) {
        (Some(p), None) => ("penta", p),
        (None, Some(w)) => ("wdl", w),
        _ => {
            return Err(ApiError::BadRequest(
                "give exactly one of penta=LL,LD,DD,WD,WW and wdl=W,D,L".into(),
            ));
        }
    };
    let c = lakefish_jobs::sprt::calc(kind, counts, q.elo0, q.elo1, &q.model, q.alpha, q.beta)
        .map_err(ApiError::BadRequest)?;
    Ok(Json(c).into_response())
}
