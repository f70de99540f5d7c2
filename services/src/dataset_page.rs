//! One dataset: `/ui/datasets/{source}/{name}` (what it holds, where it came from, its masks,
//! and its profile drawn as histograms, or a button that queues a `profile` job),
//! `/v1/datasets/{source}/{name}/profile` (the stored profile as JSON); one shuffle the same
//! way (`/ui/shuffles/{id}`, `/v1/shuffles/{id}/profile`); and data out: `/v1/exports/{id}`
//! and its file (an `export` job's parts, streamed in order).

use std::fmt::Write;

use axum::Json;
use axum::extract::State;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::StreamExt;
use lakefish_jobs::profile::Profile;
use lakefish_schemas::export::RowsOf;
use lakefish_schemas::names::ShuffleId;
use lakefish_schemas::{DatasetName, Source};

use crate::api::{ApiError, ApiPath, AppState, Route, json, route};
use crate::charts::{bar_chart, escape};
use crate::dashboard::{Page, layout, when};

pub(crate) fn routes() -> Vec<Route> {
    let (ok, missing, down) = (
        StatusCode::OK,
        StatusCode::NOT_FOUND,
        StatusCode::SERVICE_UNAVAILABLE,
    );
    vec![
        route(
            Method::GET,
            "/ui/datasets/{source}/{name}",
            "Dashboard: one dataset, its inputs, masks and profile (histograms of score, ply, men and result; HTML).",
            get(page),
        )
        .page()
        .errors(&[missing]),
        route(
            Method::GET,
            "/v1/datasets/{source}/{name}/profile",
            "A dataset's stored profile (404 until a `profile` job made it).",
            get(profile_json),
        )
        .ok(ok, json::<serde_json::Value>())
        .errors(&[missing, down]),
        route(
            Method::GET,
            "/ui/shuffles/{id}",
            "Dashboard: one shuffle, the datasets and mask it was made from, its chunks and profile (HTML).",
            get(shuffle_page),
        )
        .page()
        .errors(&[missing]),
        route(
            Method::GET,
            "/v1/shuffles/{id}/profile",
            "A shuffle's stored profile (404 until a `profile` job made it).",
            get(shuffle_profile_json),
        )
        .ok(ok, json::<serde_json::Value>())
        .errors(&[missing, down]),
        route(
            Method::GET,
            "/v1/exports/{id}",
            "An export (submitted as an `export` job): its manifest once every part is written, else 404 saying how far it got.",
            get(export_status),
        )
        .ok(ok, json::<lakefish_schemas::export::ExportManifest>())
        .errors(&[missing, down]),
        route(
            Method::GET,
            "/v1/exports/{id}/file",
            "A finished export's file: its parts streamed in order, as one file in its format.",
            get(export_file),
        )
        .ok(ok, crate::api::Body::Other("application/octet-stream"))
        .errors(&[missing, down]),
    ]
}

/// A finished export's manifest, or a 404 saying what there is.
async fn finished_export(
    s: &AppState,
    id: &str,
) -> Result<lakefish_schemas::export::ExportManifest, ApiError> {
    if !lakefish_schemas::export::is_export_id(id) {
        return Err(ApiError::NotFound(format!(
            "export {id:?}: ids are out- and 12 hex digits"
        )));
    }
    if let Some(m) = lakefish_jobs::export::read_export(&s.lake, id).await? {
        return Ok(m);
    }
    Err(ApiError::NotFound(
        match lakefish_jobs::export::read_export_plan(&s.lake, id).await? {
            Some(p) => format!(
                "export {id} is not finished: its {} parts are being written",
                p.parts.len()
            ),
            None => format!("no export {id}"),
        },
    ))
}

async fn export_status(
    State(s): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    Ok(Json(finished_export(&s, &id).await?).into_response())
}

async fn export_file(
    State(s): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let m = finished_export(&s, &id).await?;
    let lake = s.lake.clone();
    // One part in memory at a time, whatever the export's size.
    let parts = futures::stream::iter(m.files.clone()).then(move |key| {
        let lake = lake.clone();
        async move {
            match lake.get(&key).await {
                Ok(Some(b)) => Ok(b),
                Ok(None) => Err(std::io::Error::other(format!("{key} is missing"))),
                Err(e) => Err(std::io::Error::other(e.to_string())),
            }
        }
    });
    let of = match (&m.spec.dataset, &m.spec.shuffle) {
        (Some(d), _) => d.to_string(),
        (None, Some(sh)) => sh.to_string(),
        (None, None) => "export".into(),
    };
    let name = format!("{of}-{}.{}", m.id, m.spec.format.extension());
    let headers = [
        (
            axum::http::header::CONTENT_TYPE,
            "application/octet-stream".to_string(),
        ),
        (
            axum::http::header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"{name}\""),
        ),
        (
            axum::http::header::CONTENT_LENGTH,
            m.counts.bytes.to_string(),
        ),
    ];
    Ok((headers, axum::body::Body::from_stream(parts)).into_response())
}

/// The source and dataset a path names; anything else names nothing (404).
pub(crate) fn parse(source: &str, name: &str) -> Result<(Source, DatasetName), ApiError> {
    let source = Source::parse(source)
        .ok_or_else(|| ApiError::NotFound(format!("source {source:?}: {}", Source::CHOICES)))?;
    let name = DatasetName::new(name).map_err(|e| ApiError::NotFound(e.to_string()))?;
    Ok((source, name))
}

/// Where a dataset's page is.
pub(crate) fn href(source: Source, name: &DatasetName) -> String {
    format!("/ui/datasets/{source}/{name}")
}

/// Where a shuffle's page is.
pub(crate) fn shuffle_href(id: &str) -> String {
    format!("/ui/shuffles/{id}")
}

/// A whole dataset, as profiles name it.
fn whole(source: Source, dataset: &DatasetName) -> RowsOf {
    RowsOf::Dataset {
        source,
        dataset: dataset.clone(),
        mask: None,
    }
}

/// The shuffle id a path names; anything else names nothing (404).
pub(crate) fn parse_shuffle(id: &str) -> Result<ShuffleId, ApiError> {
    ShuffleId::new(id).map_err(|e| ApiError::NotFound(e.to_string()))
}

async fn shuffle_profile_json(
    State(s): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let id = parse_shuffle(&id)?;
    match lakefish_jobs::profile::read_profile(&s.lake, &RowsOf::Shuffle(id.clone())).await? {
        Some(p) => Ok(Json(p).into_response()),
        None => Err(ApiError::NotFound(format!(
            "shuffle {id} has no profile: queue a `profile` job"
        ))),
    }
}

async fn shuffle_page(State(s): State<AppState>, path: Result<ApiPath<String>, ApiError>) -> Page {
    let ApiPath(id) = path?;
    let id = parse_shuffle(&id)?;
    let Some(m) = lakefish_jobs::shuffle::read_shuffle_manifest(&s.lake, &id).await? else {
        return Err(ApiError::NotFound(format!("no committed shuffle {id}")).into());
    };
    let datasets: Vec<String> = m
        .datasets
        .iter()
        .map(|d| (m.source, d.clone()))
        .chain(m.extra.iter().map(|r| (r.source, r.dataset.clone())))
        .map(|(source, d)| {
            format!(
                r#"<a href="{}">{source}/{}</a>"#,
                href(source, &d),
                escape(d.as_str())
            )
        })
        .collect();
    let mut b = String::new();
    let _ = write!(
        b,
        r#"<table class="kv"><tr><th>made from</th><td>{}</td></tr><tr><th>mask</th><td>{}</td></tr><tr><th>rows</th><td class="num">{} of {} input rows</td></tr><tr><th>size</th><td class="num">{:.1} MiB in {} chunks</td></tr><tr><th>seed</th><td class="num">{}</td></tr><tr><th>made</th><td>{}</td></tr><tr><th>runs on it</th><td><a href="/ui/runs?shuffle={id}">the runs list</a></td></tr></table>"#,
        datasets.join(", "),
        escape(m.mask.as_str()),
        m.rows,
        m.input_rows,
        m.bytes as f64 / (1 << 20) as f64,
        m.chunks.len(),
        m.seed,
        when(&m.created),
    );
    b.push_str("<h2>Profile</h2>");
    let action = format!("{}/profile", shuffle_href(id.as_str()));
    match lakefish_jobs::profile::read_profile(&s.lake, &RowsOf::Shuffle(id.clone())).await? {
        Some(p) => {
            profile_section(&mut b, &p);
            b.push_str(&crate::ui_actions::button(&action, "Profile again", &[]));
        }
        None => {
            b.push_str("<p>Not profiled yet: a <code>profile</code> job reads every chunk once and stores the histograms beside them.</p>");
            b.push_str(&crate::ui_actions::button(
                &action,
                "Profile this shuffle",
                &[],
            ));
        }
    }
    Ok(layout(&format!("Shuffle {id}"), "/ui/runs", false, &b))
}

async fn profile_json(
    State(s): State<AppState>,
    ApiPath((source, name)): ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    let (source, name) = parse(&source, &name)?;
    match lakefish_jobs::profile::read_profile(&s.lake, &whole(source, &name)).await? {
        Some(p) => Ok(Json(p).into_response()),
        None => Err(ApiError::NotFound(format!(
            "{source}/{name} has no profile: queue a `profile` job"
        ))),
    }
}

async fn page(
    State(s): State<AppState>,
    path: Result<ApiPath<(String, String)>, ApiError>,
) -> Page {
    let ApiPath((source, name)) = path?;
    let (source, name) = parse(&source, &name)?;
    let Some(d) = lakefish_lake::datasets::dataset_summary(&s.lake, source, &name).await? else {
        return Err(ApiError::NotFound(format!("no committed dataset {source}/{name}")).into());
    };
    let m = lakefish_lake::datasets::read_manifest(&s.lake, source, &name)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no committed dataset {source}/{name}")))?;
    let mut b = String::new();
    let _ = write!(
        b,
        r#"<table class="kv"><tr><th>source</th><td>{source}</td></tr><tr><th>rows</th><td class="num">{}</td></tr><tr><th>size</th><td class="num">{:.1} MiB in {} parts</td></tr><tr><th>masks</th><td>{}</td></tr><tr><th>made from</th><td>{}</td></tr><tr><th>written by</th><td><a href="/ui/jobs/{job}">{job}</a>, {}</td></tr></table>"#,
        d.rows,
        d.bytes as f64 / (1 << 20) as f64,
        m.parts.len(),
        if d.masks.is_empty() {
            "none (<code>lakefish mask</code>)".to_string()
        } else {
            escape(&d.masks.join(", "))
        },
        escape(d.derived_from.as_deref().unwrap_or("its inputs, below")),
        when(&d.created),
        job = escape(&d.job_id),
    );
    b.push_str(
        "<h2>Inputs</h2><table><tr><th>input</th><th>bytes</th><th>rows</th><th>skipped</th></tr>",
    );
    for i in &m.inputs {
        let skipped: Vec<String> = i.skipped.iter().take(5).map(|r| r.to_string()).collect();
        let more = i.skipped.len().saturating_sub(5);
        let _ = write!(
            b,
            r#"<tr><td>{}</td><td class="num">{}</td><td class="num">{}</td><td>{}{}</td></tr>"#,
            escape(&i.input),
            i.bytes,
            i.rows,
            escape(&skipped.join("; ")),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        );
    }
    b.push_str("</table><h2>Profile</h2>");
    let action = format!("{}/profile", href(source, &name));
    match lakefish_jobs::profile::read_profile(&s.lake, &whole(source, &name)).await? {
        Some(p) => {
            profile_section(&mut b, &p);
            b.push_str(&crate::ui_actions::button(&action, "Profile again", &[]));
        }
        None => {
            b.push_str("<p>Not profiled yet: a <code>profile</code> job reads every row once and stores the histograms beside the data.</p>");
            b.push_str(&crate::ui_actions::button(
                &action,
                "Profile this dataset",
                &[],
            ));
        }
    }
    Ok(layout(
        &format!("Dataset {source}/{name}"),
        "/ui/datasets",
        false,
        &b,
    ))
}

fn profile_section(b: &mut String, p: &Profile) {
    let pct = |n: u64, of: u64| 100.0 * n as f64 / of.max(1) as f64;
    let _ = write!(
        b,
        r#"<p>{} rows: {:.1}% scored, {:.1}% with a result, {:.1}% repeat an earlier row's position, {:.1}% of the scored rows with a result have a score and result that disagree (Stockfish's win-rate model, more than half a point apart).</p><div class="charts">"#,
        p.rows,
        pct(p.scored, p.rows),
        pct(p.with_result, p.rows),
        pct(p.repeated, p.rows),
        pct(
            p.disagreeing,
            if p.scored_with_result > 0 {
                p.scored_with_result
            } else {
                p.scored.min(p.with_result)
            }
        ),
    );
    b.push_str(&bar_chart(
        "Score (internal units, side to move)",
        "score bucket (by 100)",
        &p.score
            .iter()
            .map(|(k, n)| (k.to_string(), *n))
            .collect::<Vec<_>>(),
    ));
    b.push_str(&bar_chart(
        "Ply",
        "ply (by 10)",
        &p.ply
            .iter()
            .map(|(k, n)| (k.to_string(), *n))
            .collect::<Vec<_>>(),
    ));
    b.push_str(&bar_chart(
        "Men on the board",
        "men",
        &p.men
            .iter()
            .map(|(k, n)| (k.to_string(), *n))
            .collect::<Vec<_>>(),
    ));
    b.push_str(&bar_chart(
        "Result (side to move)",
        "result",
        &p.result
            .iter()
            .map(|(k, n)| {
                let label = match k {
                    1 => "win",
                    0 => "draw",
                    _ => "loss",
                };
                (label.to_string(), *n)
            })
            .collect::<Vec<_>>(),
    ));
    b.push_str("</div>");
}
