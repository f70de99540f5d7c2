//! `/v1/experiments`: experiments' status and tables (submitted as `experiment` jobs through
//! `POST /v1/jobs`; the scheduler advances them).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use lakefish_schemas::experiment::{ExperimentId, ExperimentStatus};

use crate::api::{ApiError, ApiPath, AppState, Route, json, route};

/// `GET /v1/experiments`.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct ExperimentList {
    /// Newest first.
    pub experiments: Vec<ExperimentStatus>,
}

pub(crate) fn routes() -> Vec<Route> {
    use axum::http::Method as M;
    let ok = StatusCode::OK;
    let (missing, down) = (StatusCode::NOT_FOUND, StatusCode::SERVICE_UNAVAILABLE);
    vec![
        route(
            M::GET,
            "/ui/experiments",
            "Dashboard: experiments (HTML).",
            get(crate::experiment_page::list),
        )
        .page(),
        route(
            M::GET,
            "/ui/experiments/{id}",
            "Dashboard: one experiment's table, Elo chart and training curves (HTML).",
            get(crate::experiment_page::one),
        )
        .page()
        .errors(&[missing]),
        route(
            M::GET,
            "/v1/experiments",
            "Experiments, newest first (submit one as an `experiment` job).",
            get(list),
        )
        .ok(ok, json::<ExperimentList>())
        .errors(&[down]),
        route(
            M::GET,
            "/v1/experiments/{id}",
            "One experiment: its state, cells, pairings' counts and, once rated, the table.",
            get(one),
        )
        .ok(ok, json::<ExperimentStatus>())
        .errors(&[missing, down]),
        route(
            M::GET,
            "/v1/experiments/{id}/table.csv",
            "The rated table as CSV (404 until the experiment is rated).",
            get(csv),
        )
        .ok(ok, crate::api::Body::Other("text/csv"))
        .errors(&[missing, down]),
    ]
}

fn parse(id: &str) -> Result<ExperimentId, ApiError> {
    ExperimentId::new(id).map_err(|e| ApiError::NotFound(e.to_string()))
}

async fn list(State(s): State<AppState>) -> Result<Response, ApiError> {
    let experiments = lakefish_jobs::experiment::list(&s.lake).await?;
    Ok(Json(ExperimentList { experiments }).into_response())
}

async fn one(
    State(s): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let id = parse(&id)?;
    let status = lakefish_jobs::experiment::status(&s.lake, &id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("experiment {id}")))?;
    Ok(Json(status).into_response())
}

async fn csv(
    State(s): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let id = parse(&id)?;
    let bytes = s
        .lake
        .get(&lakefish_jobs::experiment::csv_key(&id))
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("experiment {id} has no table yet")))?;
    Ok((
        [(axum::http::header::CONTENT_TYPE, "text/csv; charset=utf-8")],
        bytes,
    )
        .into_response())
}
