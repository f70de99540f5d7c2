//! The SPRT routes that read: a test's status, its games as PGN, and the calculator.

use crate::api::{ApiError, AppState, path_id};
use crate::extract::{ApiPath, ApiQuery};
use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use lakefish_schemas::names::SprtId;
use schemars::JsonSchema;
use serde::Deserialize;

pub(crate) async fn get_sprt(
    State(s): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let id: SprtId = path_id(&id, "sprt test")?;
    let st = lakefish_jobs::sprt::status(&s.lake, &id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("sprt test {id} not found")))?;
    Ok(Json(st).into_response())
}

pub(crate) async fn sprt_pgn(
    State(s): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let id: SprtId = path_id(&id, "sprt test")?;
    let pgn = lakefish_jobs::sprt::pgn(&s.lake, &id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("sprt test {id} not found")))?;
    let file = format!("attachment; filename=\"{id}.pgn\"");
    Ok((
        [
            (axum::http::header::CONTENT_TYPE, "application/x-chess-pgn"),
            (axum::http::header::CONTENT_DISPOSITION, file.as_str()),
        ],
        pgn,
    )
        .into_response())
}

#[derive(Deserialize, JsonSchema)]
pub(crate) struct CalcQuery {
    /// Pentanomial pair counts LL,LD,DD,WD,WW.
    #[schemars(regex(pattern = r"^[0-9]+(,[0-9]+){4}$"))]
    penta: Option<String>,
    /// Game counts W,D,L.
    #[schemars(regex(pattern = r"^[0-9]+,[0-9]+,[0-9]+$"))]
    wdl: Option<String>,
    #[serde(default)]
    elo0: f64,
    /// Must be above `elo0`.
    #[serde(default = "two")]
    elo1: f64,
    /// `normalized` or `logistic`.
    #[serde(default = "normalized")]
    model: String,
    /// Error rates, each in (0, 1), together below 1.
    #[serde(default = "five_percent")]
    #[schemars(range(min = 0.0, max = 1.0))]
    alpha: f64,
    #[serde(default = "five_percent")]
    #[schemars(range(min = 0.0, max = 1.0))]
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

pub(crate) async fn sprt_calc(ApiQuery(q): ApiQuery<CalcQuery>) -> Result<Response, ApiError> {
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
