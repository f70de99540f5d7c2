//! What users do besides submitting work, over the API: cancel a job, stop an SPRT, promote
//! a net or roll `best` back. Each records who asked (the token's name) and when; the
//! dashboard's forms ([`crate::ui_actions`]) call the same domain functions.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use lakefish_schemas::nets::{BestNet, PromoteRequest};

use crate::api::{ApiError, ApiPath, AppState, Route, json, route};

/// `GET /v1/promotions`.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct PromotionList {
    /// Every promotion and roll-back, newest first; the first is the best net now.
    pub promotions: Vec<BestNet>,
}

pub(crate) fn routes() -> Vec<Route> {
    use axum::http::Method as M;
    let ok = StatusCode::OK;
    let (bad, missing, conflict, down) = (
        StatusCode::BAD_REQUEST,
        StatusCode::NOT_FOUND,
        StatusCode::CONFLICT,
        StatusCode::SERVICE_UNAVAILABLE,
    );
    vec![
        route(
            M::POST,
            "/v1/jobs/{id}/cancel",
            "Cancel a queued job (it never starts) or a running one (train, datagen, mask, gauntlet and in-process shuffles and SPRTs stop at their next progress report and end `cancelled`; other kinds finish, their record noting the request); who and when are recorded. 409 for a finished job or a task lakefish queued itself.",
            post(cancel_job),
        )
        .ok(ok, json::<lakefish_schemas::JobRecord>())
        .errors(&[missing, conflict, down]),
        route(
            M::POST,
            "/v1/sprt/{id}/stop",
            "Stop a running SPRT: its games so far become the result (state `stopped`, with who and when). 409 for a test that ended.",
            post(stop_sprt),
        )
        .ok(ok, json::<lakefish_schemas::SprtStatus>())
        .errors(&[missing, conflict, down]),
        route(
            M::GET,
            "/v1/promotions",
            "The best net's history: every promotion and roll-back, newest first, with who, when and why.",
            get(promotions),
        )
        .ok(ok, json::<PromotionList>())
        .errors(&[down]),
        route(
            M::POST,
            "/v1/promotions",
            "Make a registered net the best (admin): a promotion by hand, or a roll-back to an earlier best. Recorded with who, when and why.",
            post(promote),
        )
        .request(json::<PromoteRequest>())
        .ok(ok, json::<BestNet>())
        .errors(&[bad, missing, conflict, down]),
    ]
}

async fn cancel_job(
    State(s): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<lakefish_schemas::JobRecord>, ApiError> {
    let id = lakefish_schemas::JobId::parse(&id)
        .ok_or_else(|| ApiError::NotFound(format!("job {id:?} not found (ids are UUIDs)")))?;
    let by = crate::session::viewer().name;
    Ok(Json(
        lakefish_jobs::runner::cancel_job(&s.jobs, &id, &by).await?,
    ))
}

async fn stop_sprt(
    State(s): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<lakefish_schemas::SprtStatus>, ApiError> {
    let id: lakefish_schemas::names::SprtId = crate::api::path_id(&id, "sprt test")?;
    let by = crate::session::viewer().name;
    Ok(Json(lakefish_jobs::sprt::stop(&s.lake, &id, &by).await?))
}

async fn promotions(State(s): State<AppState>) -> Result<Json<PromotionList>, ApiError> {
    Ok(Json(PromotionList {
        promotions: lakefish_jobs::nets::best_history(&s.lake).await?,
    }))
}

async fn promote(
    State(s): State<AppState>,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(|e| crate::api::body_error(&s, e))?;
    let req: PromoteRequest = crate::api::strict_json(&body, "promotion")?;
    let best = promote_net(&s, &req).await?;
    Ok(Json(best).into_response())
}

/// The one promotion both the API and the dashboard's form call.
pub(crate) async fn promote_net(s: &AppState, req: &PromoteRequest) -> Result<BestNet, ApiError> {
    let reason = req
        .reason
        .clone()
        .map(|r| r.trim().chars().take(500).collect::<String>())
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| "promoted by hand".into());
    let why = lakefish_jobs::nets::Promotion {
        reason,
        by: crate::session::viewer().name,
        measured: None,
    };
    Ok(lakefish_jobs::nets::set_best(&s.lake, &req.name, why).await?)
}
