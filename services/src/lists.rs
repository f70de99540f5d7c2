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
    let (datasets, next) = dataset_page(&s, &q).await?;
    let writing = if q.after.is_none() {
        lakefish_lake::datasets::list_claims(&s.lake).await?
    } else {
        Vec::new()
    };
    Ok(Json(crate::bodies::DatasetList {
        datasets,
        writing,
        next,
    })
    .into_response())
}

/// A page of items and the cursor of the next one (none on the last page).
pub(crate) type Paged<T> = (Vec<T>, Option<String>);

/// One page of committed datasets: what `/v1/datasets` and `/ui/datasets` show.
pub(crate) async fn dataset_page(
    s: &AppState,
    q: &PageParams,
) -> Result<Paged<lakefish_lake::datasets::DatasetSummary>, ApiError> {
    let query = q.query(CatalogKind::Dataset)?;
    let page = catalog::page(&s.lake, &query, list_datasets(&s.lake), |d| {
        (d.created.clone(), format!("{}/{}", d.source, d.name))
    })
    .await?;
    Ok((page.items, page.next.map(|c| c.encode())))
}

/// `?limit=&after=` of a list of the catalogue.
#[derive(Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct PageParams {
    /// Items on a page, 1 to 1000 (default 100).
    pub(crate) limit: Option<usize>,
    /// The `next` of the previous page: the page after it.
    pub(crate) after: Option<String>,
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
        .filter(|a| !a.is_empty())
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
    ApiQuery(q): ApiQuery<RunFilter>,
) -> Result<Response, ApiError> {
    let (runs, next) = run_page(&s, &q).await?;
    Ok(Json(crate::bodies::RunList { runs, next }).into_response())
}

/// `?shuffle=&limit=&after=` of the runs list.
#[derive(Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunFilter {
    /// Runs trained on this shuffle (`sh-...`; empty: any).
    pub(crate) shuffle: Option<String>,
    /// Runs on a page, 1 to 1000 (default 100).
    pub(crate) limit: Option<usize>,
    /// The `next` of the previous page: the page after it.
    pub(crate) after: Option<String>,
}

/// `?dataset=&limit=&after=` of the nets list.
#[derive(Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct NetFilter {
    /// Nets trained on this dataset (`source/name`, as a net's `datasets` say) or shuffle
    /// (`sh-...`; empty: any).
    pub(crate) dataset: Option<String>,
    /// Nets on a page, 1 to 1000 (default 100).
    pub(crate) limit: Option<usize>,
    /// The `next` of the previous page: the page after it.
    pub(crate) after: Option<String>,
}

fn given(v: &Option<String>) -> Option<String> {
    v.as_deref()
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}

/// One page of training runs: what `/v1/runs` and `/ui/runs` show.
pub(crate) async fn run_page(
    s: &AppState,
    q: &RunFilter,
) -> Result<Paged<lakefish_schemas::RunRecord>, ApiError> {
    let mut query = page_query(CatalogKind::Run, q.limit, q.after.as_deref())?;
    let shuffle = given(&q.shuffle);
    query.link = shuffle.clone();
    let scan = async {
        let mut runs = lakefish_jobs::nets::list_runs(&s.lake).await?;
        runs.retain(|r| shuffle.as_deref().is_none_or(|sh| r.spec.shuffle == sh));
        Ok(runs)
    };
    let page = catalog::page(&s.lake, &query, scan, |r| {
        (r.created.clone(), r.id.to_string())
    })
    .await?;
    Ok((page.items, page.next.map(|c| c.encode())))
}

pub(crate) async fn nets(
    State(s): State<AppState>,
    ApiQuery(q): ApiQuery<NetFilter>,
) -> Result<Response, ApiError> {
    let (nets, next) = net_page(&s, &q).await?;
    let best = lakefish_jobs::nets::read_best(&s.lake).await?;
    Ok(Json(crate::bodies::NetList { nets, best, next }).into_response())
}

/// One page of registered nets: what `/v1/nets` and `/ui/nets` show.
pub(crate) async fn net_page(
    s: &AppState,
    q: &NetFilter,
) -> Result<Paged<lakefish_schemas::NetManifest>, ApiError> {
    let mut query = page_query(CatalogKind::Net, q.limit, q.after.as_deref())?;
    let dataset = given(&q.dataset);
    query.link = dataset.clone();
    let scan = async {
        let mut nets = lakefish_jobs::nets::list_nets(&s.lake).await?;
        nets.retain(|m| {
            dataset
                .as_deref()
                .is_none_or(|d| m.shuffle == d || m.datasets.iter().any(|x| x == d))
        });
        Ok(nets)
    };
    let page = catalog::page(&s.lake, &query, scan, |m| {
        (m.created.clone(), m.name.clone())
    })
    .await?;
    Ok((page.items, page.next.map(|c| c.encode())))
}

#[derive(Deserialize, JsonSchema, Default)]
pub(crate) struct SprtFilter {
    /// Tests with this net (or engine side) on either side (empty: any).
    pub(crate) net: Option<String>,
    /// running, accepted, rejected, inconclusive or stopped (empty: any).
    pub(crate) state: Option<String>,
    /// Tests on a page, 1 to 1000 (default 100).
    pub(crate) limit: Option<usize>,
    /// The `next` of the previous page: the page after it.
    pub(crate) after: Option<String>,
}

pub(crate) async fn list_sprt(
    State(s): State<AppState>,
    ApiQuery(q): ApiQuery<SprtFilter>,
) -> Result<Response, ApiError> {
    let (tests, next) = sprt_page(&s, &q).await?;
    Ok(Json(crate::bodies::SprtList { tests, next }).into_response())
}

/// One page of SPRT tests, filtered: what `/v1/sprt` and `/ui/sprt` show.
pub(crate) async fn sprt_page(
    s: &AppState,
    q: &SprtFilter,
) -> Result<Paged<lakefish_schemas::SprtStatus>, ApiError> {
    let state = match q.state.as_deref().filter(|v| !v.is_empty()) {
        None => None,
        Some(v) => Some(lakefish_schemas::SprtState::parse(v).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "state {v:?}: expected running, accepted, rejected, inconclusive or stopped"
            ))
        })?),
    };
    let net = q
        .net
        .as_deref()
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(lakefish_jobs::sprt::evaluation_filter);
    let mut query = page_query(CatalogKind::Sprt, q.limit, q.after.as_deref())?;
    query.state = state.map(|s| s.as_str().to_string());
    query.link = net.clone();
    let scan = lakefish_jobs::sprt::list(&s.lake, net.as_deref(), state);
    let page = catalog::page(&s.lake, &query, scan, |t| {
        (t.created.clone(), t.id.to_string())
    })
    .await?;
    Ok((page.items, page.next.map(|c| c.encode())))
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
