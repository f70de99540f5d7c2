//! The lists of what the lake holds (`/v1/datasets`, `/shuffles`, `/runs`, `/nets`, `/sprt`,
//! `/pipelines/{name}/runs`):
//! newest first, a page at a time, from the metastore's catalogue when there is one and cut
//! the same way from the lake's own lists otherwise (`lakefish_jobs::catalog::page`).

use crate::api::{ApiError, AppState};
use crate::extract::ApiQuery;
use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use lakefish_jobs::catalog;
use lakefish_lake::catalog::{CatalogCursor, CatalogKind, CatalogQuery};
use lakefish_lake::datasets::list_datasets;
use schemars::JsonSchema;
use serde::Deserialize;

/// Committed datasets, and the ones being written (`writing`: each claim with its job,
/// owner and expiry; `stale` ones were left by a writer that is gone).
pub(crate) async fn datasets(
    State(s): State<AppState>,
    ApiQuery(q): ApiQuery<PageParams>,
) -> Result<Response, ApiError> {
    let query = q.query(CatalogKind::Dataset)?;
    let page = catalog::page(&s.lake, &query, list_datasets(&s.lake), |d| {
        (d.created.clone(), format!("{}/{}", d.source, d.name))
    })
    .await?;
    let writing = if query.after.is_none() {
        lakefish_lake::datasets::list_claims(&s.lake).await?
    } else {
        Vec::new()
    };
    Ok(Json(crate::bodies::DatasetList {
        datasets: page.items,
        writing,
        next: page.next.map(|c| c.encode()),
    })
    .into_response())
}

/// `?limit=&after=` of a list of the catalogue.
#[derive(Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct PageParams {
    /// Items on a page, 1 to 1000 (default 100).
    limit: Option<usize>,
    /// The `next` of the previous page: the page after it.
    after: Option<String>,
}

impl PageParams {
    fn query(&self, kind: CatalogKind) -> Result<CatalogQuery, ApiError> {
        page_query(kind, self.limit, self.after.as_deref())
    }
}

fn page_query(
    kind: CatalogKind,
    limit: Option<usize>,
    after: Option<&str>,
) -> Result<CatalogQuery, ApiError> {
    let mut query = CatalogQuery::all(kind);
    query.limit = limit.unwrap_or(100).clamp(1, 1000);
    query.after = after
        .map(CatalogCursor::parse)
        .transpose()
        .map_err(ApiError::BadRequest)?;
    Ok(query)
}

pub(crate) async fn shuffles(
    State(s): State<AppState>,
    ApiQuery(q): ApiQuery<PageParams>,
) -> Result<Response, ApiError> {
    let query = q.query(CatalogKind::Shuffle)?;
    let scan = lakefish_jobs::shuffle::list_shuffles(&s.lake);
    let page = catalog::page(&s.lake, &query, scan, |m| {
        (m.created.clone(), m.id.to_string())
    })
    .await?;
    Ok(Json(crate::bodies::ShuffleList {
        shuffles: page.items,
        next: page.next.map(|c| c.encode()),
    })
    .into_response())
}

pub(crate) async fn runs(
    State(s): State<AppState>,
    ApiQuery(q): ApiQuery<PageParams>,
) -> Result<Response, ApiError> {
    let query = q.query(CatalogKind::Run)?;
    let scan = lakefish_jobs::nets::list_runs(&s.lake);
    let page = catalog::page(&s.lake, &query, scan, |r| {
        (r.created.clone(), r.id.to_string())
    })
    .await?;
    Ok(Json(crate::bodies::RunList {
        runs: page.items,
        next: page.next.map(|c| c.encode()),
    })
    .into_response())
}

pub(crate) async fn nets(
    State(s): State<AppState>,
    ApiQuery(q): ApiQuery<PageParams>,
) -> Result<Response, ApiError> {
    let query = q.query(CatalogKind::Net)?;
    let scan = lakefish_jobs::nets::list_nets(&s.lake);
    let page = catalog::page(&s.lake, &query, scan, |m| {
        (m.created.clone(), m.name.clone())
    })
    .await?;
    let best = lakefish_jobs::nets::read_best(&s.lake).await?;
    Ok(Json(crate::bodies::NetList {
        nets: page.items,
        best,
        next: page.next.map(|c| c.encode()),
    })
    .into_response())
}

#[derive(Deserialize, JsonSchema)]
pub(crate) struct SprtFilter {
    /// Tests with this net on either side.
    net: Option<String>,
    /// running, accepted, rejected or inconclusive.
    state: Option<String>,
    /// Tests on a page, 1 to 1000 (default 100).
    limit: Option<usize>,
    /// The `next` of the previous page: the page after it.
    after: Option<String>,
}

pub(crate) async fn list_sprt(
    State(s): State<AppState>,
    ApiQuery(q): ApiQuery<SprtFilter>,
) -> Result<Response, ApiError> {
    let state = match q.state.as_deref() {
        None => None,
        Some(v) => Some(lakefish_schemas::SprtState::parse(v).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "state {v:?}: expected running, accepted, rejected or inconclusive"
            ))
        })?),
    };
    let net = q.net.as_deref().map(lakefish_jobs::sprt::evaluation_filter);
    let mut query = page_query(CatalogKind::Sprt, q.limit, q.after.as_deref())?;
    query.state = state.map(|s| s.as_str().to_string());
    query.link = net.clone();
    let scan = lakefish_jobs::sprt::list(&s.lake, net.as_deref(), state);
    let page = catalog::page(&s.lake, &query, scan, |t| {
        (t.created.clone(), t.id.to_string())
    })
    .await?;
    Ok(Json(crate::bodies::SprtList {
        tests: page.items,
        next: page.next.map(|c| c.encode()),
    })
    .into_response())
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PipelineRunFilter {
    /// running, succeeded or failed.
    state: Option<String>,
    /// Runs on a page, 1 to 1000 (default 100).
    limit: Option<usize>,
    /// The `next` of the previous page: the page after it.
    after: Option<String>,
}

/// One pipeline's runs, newest first, a page at a time, optionally in one state.
pub(crate) async fn pipeline_runs(
    State(s): State<AppState>,
    crate::extract::ApiPath(name): crate::extract::ApiPath<String>,
    ApiQuery(q): ApiQuery<PipelineRunFilter>,
) -> Result<Response, ApiError> {
    if !s.config.pipelines.contains_key(&name) {
        return Err(ApiError::NotFound(format!(
            "no pipeline {name:?} is configured"
        )));
    }
    let state = match q.state.as_deref() {
        None | Some("running" | "succeeded" | "failed") => q.state.clone(),
        Some(v) => {
            return Err(ApiError::BadRequest(format!(
                "state {v:?}: expected running, succeeded or failed"
            )));
        }
    };
    let mut query = page_query(CatalogKind::PipelineRun, q.limit, q.after.as_deref())?;
    query.state = state.clone();
    query.link = Some(name.clone());
    let scan = async {
        let mut runs = lakefish_jobs::pipeline::list_runs(&s.lake, &name, usize::MAX).await?;
        runs.retain(|r| state.as_deref().is_none_or(|st| r.state.as_str() == st));
        Ok(runs)
    };
    let page = catalog::page(
        &s.lake,
        &query,
        scan,
        |r: &lakefish_schemas::pipeline::PipelineRun| {
            (r.created.clone(), format!("{}/{}", r.pipeline, r.id))
        },
    )
    .await?;
    Ok(Json(crate::bodies::PipelineRunList {
        runs: page.items,
        next: page.next.map(|c| c.encode()),
    })
    .into_response())
}
