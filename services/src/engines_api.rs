//! `/v1/engines`: the engine registry over HTTP. Registering and removing need the `admin`
//! scope: a registered command runs on every worker, which is code execution by design.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use lakefish_schemas::engines::{BUILTIN_ENGINE, EngineSpec};

use crate::api::{ApiError, ApiPath, AppState, Route, json, route};

/// `GET /v1/engines`.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct EngineList {
    /// lakefish's own engine, always there, played in-process: `lakefish`.
    pub builtin: &'static str,
    /// Registered engines, by name.
    pub engines: Vec<EngineSpec>,
}

/// `DELETE /v1/engines/{name}`.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct EngineRemoved {
    pub name: String,
    pub removed: bool,
}

pub(crate) fn routes() -> Vec<Route> {
    use axum::http::Method as M;
    let (ok, created) = (StatusCode::OK, StatusCode::CREATED);
    let (bad, missing, conflict) = (
        StatusCode::BAD_REQUEST,
        StatusCode::NOT_FOUND,
        StatusCode::CONFLICT,
    );
    let down = StatusCode::SERVICE_UNAVAILABLE;
    vec![
        route(
            M::GET,
            "/v1/engines",
            "Registered engines (lakefish's own is built in).",
            get(list),
        )
        .ok(ok, json::<EngineList>())
        .errors(&[down]),
        route(
            M::POST,
            "/v1/engines",
            "Register an engine (admin: workers will run its command; off without tokens unless server.admin_without_tokens). The engine's `uci` answer is read here when its program is on this machine, and `allow` (the options sides may set) checked against it. 201, or 200 when the same spec is there.",
            post(add),
        )
        .request(json::<EngineSpec>())
        .ok(created, json::<EngineSpec>())
        .ok(ok, json::<EngineSpec>())
        .errors(&[bad, missing, conflict, down]),
        route(
            M::GET,
            "/v1/engines/{name}",
            "One registered engine.",
            get(show),
        )
        .ok(ok, json::<EngineSpec>())
        .errors(&[missing, down]),
        route(
            M::DELETE,
            "/v1/engines/{name}",
            "Remove an engine's registration (admin); tests that used it keep their records.",
            delete(remove),
        )
        .ok(ok, json::<EngineRemoved>())
        .errors(&[missing, down]),
    ]
}

async fn list(State(s): State<AppState>) -> Result<Json<EngineList>, ApiError> {
    Ok(Json(EngineList {
        builtin: BUILTIN_ENGINE,
        engines: lakefish_jobs::engines::list(&s.lake).await?,
    }))
}

async fn show(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<EngineSpec>, ApiError> {
    lakefish_jobs::engines::get(&s.lake, &name)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::NotFound(format!("engine {name} is not registered")))
}

async fn add(
    State(s): State<AppState>,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(|e| crate::api::body_error(&s, e))?;
    let spec: EngineSpec = crate::api::strict_json(&body, "engine")?;
    let (stored, created) = lakefish_jobs::engines::register(&s.lake, &spec).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(stored)).into_response())
}

async fn remove(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<EngineRemoved>, ApiError> {
    // A name that can never be registered is simply not there, as for GET.
    let unknown = || ApiError::NotFound(format!("engine {name} is not registered"));
    if lakefish_schemas::engines::check_engine_name(&name).is_err() {
        return Err(unknown());
    }
    if !lakefish_jobs::engines::remove(&s.lake, &name).await? {
        return Err(ApiError::NotFound(format!(
            "engine {name} is not registered"
        )));
    }
    Ok(Json(EngineRemoved {
        name,
        removed: true,
    }))
}
