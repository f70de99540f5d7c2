//! The dashboard's lists of what the lake holds (datasets, training runs, nets, SPRT tests):
//! newest first, a page at a time and filtered by the same functions as their `/v1` lists
//! ([`crate::lists`]), with a link to the next page.

use crate::api::AppState;
use crate::charts::escape;
use crate::dashboard::{Page, PageQuery, layout, net_link, run_link, when};
use crate::lists::{NetFilter, PageParams, RunFilter, SprtFilter};
use axum::extract::State;
use lakefish_schemas::SprtState;
use std::fmt::Write;

/// Items on a dashboard page unless `?limit=` says otherwise.
const PAGE: usize = 50;

fn paged(q: PageParams) -> PageParams {
    PageParams {
        limit: Some(q.limit.unwrap_or(PAGE)),
        ..q
    }
}

/// "Next page" with the filters kept, or nothing on the last page.
fn next_link(path: &str, filters: &[(&str, Option<&str>)], next: Option<String>) -> String {
    let Some(next) = next else {
        return String::new();
    };
    let mut pairs: Vec<(&str, &str)> = filters
        .iter()
        .filter_map(|(k, v)| v.filter(|v| !v.is_empty()).map(|v| (*k, v)))
        .collect();
    pairs.push(("after", &next));
    let query = serde_urlencoded::to_string(&pairs).unwrap_or_default();
    format!(
        r#"<p class="paging"><a href="{path}?{}">Next page</a></p>"#,
        escape(&query)
    )
}

pub(crate) async fn datasets(
    State(s): State<AppState>,
    PageQuery(q): PageQuery<PageParams>,
) -> Page {
    let limit = q.limit.map(|l| l.to_string());
    let (all, next) = crate::lists::dataset_page(&s, &paged(q)).await?;
    let mut b = String::from(
        "<table class=\"datasets\"><tr><th>dataset</th><th>source</th><th>rows</th><th>MiB</th><th>partitions</th><th>masks</th><th>made from</th><th>skipped ranges</th><th>created</th></tr>",
    );
    for d in &all {
        let _ = write!(
            b,
            r#"<tr><td><a href="{}">{}</a></td><td>{}</td><td class="num">{}</td><td class="num">{:.1}</td><td class="num">{}</td><td>{}</td><td>{}</td><td class="num">{}</td><td>{}</td></tr>"#,
            crate::dataset_page::href(d.source, &d.name),
            escape(d.name.as_str()),
            d.source,
            d.rows,
            d.bytes as f64 / (1 << 20) as f64,
            d.partitions,
            escape(&d.masks.join(", ")),
            escape(d.derived_from.as_deref().unwrap_or("")),
            d.skipped_ranges,
            when(&d.created)
        );
    }
    b.push_str("</table>");
    if all.is_empty() {
        b = "<p>No datasets yet. Ingest with <code>lakefish ingest</code>.</p>".into();
    }
    b.push_str(&next_link(
        "/ui/datasets",
        &[("limit", limit.as_deref())],
        next,
    ));
    Ok(layout("Datasets", "/ui/datasets", false, &b))
}

pub(crate) async fn runs(State(s): State<AppState>, PageQuery(q): PageQuery<RunFilter>) -> Page {
    let limit = q.limit.map(|l| l.to_string());
    let q = RunFilter {
        limit: Some(q.limit.unwrap_or(PAGE)),
        ..q
    };
    let (all, next) = crate::lists::run_page(&s, &q).await?;
    let mut b = text_filter(
        "/ui/runs",
        "shuffle",
        q.shuffle.as_deref(),
        "a shuffle (sh-...)",
    );
    b.push_str(
        "<form method=\"get\" action=\"/ui/runs/compare\"><table class=\"runs\"><tr><th></th><th>run</th><th>shuffle</th><th>features / arch</th><th>device</th><th>epoch</th><th>step</th><th>val loss</th><th>state</th><th>updated</th></tr>",
    );
    for r in &all {
        let _ = write!(
            b,
            r#"<tr><td><input type="checkbox" name="run" value="{}"></td><td>{}</td><td>{}</td><td>{} {}</td><td>{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td>{}</td><td>{}</td></tr>"#,
            escape(&r.id),
            run_link(&r.id),
            crate::dashboard::shuffle_link(r.spec.shuffle.as_str()),
            escape(&r.spec.net_label().0),
            escape(&r.spec.net_label().1),
            escape(&r.device),
            r.epoch,
            r.step,
            r.val_loss
                .last()
                .map(|v| format!("{v:.5}"))
                .unwrap_or_default(),
            match &r.error {
                Some(e) if !r.finished => format!(
                    "<span class=\"error\" title=\"{}\">failed</span>",
                    escape(e)
                ),
                _ => r.state().to_string(),
            },
            when(&r.updated)
        );
    }
    b.push_str(r#"</table><p><button type="submit">Compare the runs ticked</button></p></form>"#);
    if all.is_empty() {
        b.push_str("<p>No training runs here.</p>");
    }
    b.push_str(&next_link(
        "/ui/runs",
        &[
            ("shuffle", q.shuffle.as_deref()),
            ("limit", limit.as_deref()),
        ],
        next,
    ));
    Ok(layout("Training runs", "/ui/runs", false, &b))
}

pub(crate) async fn nets(State(s): State<AppState>, PageQuery(q): PageQuery<NetFilter>) -> Page {
    let first_page = q.after.as_deref().is_none_or(str::is_empty);
    let limit = q.limit.map(|l| l.to_string());
    let q = NetFilter {
        limit: Some(q.limit.unwrap_or(PAGE)),
        ..q
    };
    let (all, next) = crate::lists::net_page(&s, &q).await?;
    let best = lakefish_jobs::nets::read_best(&s.lake)
        .await?
        .map(|b| b.name);
    let mut b = text_filter(
        "/ui/nets",
        "dataset",
        q.dataset.as_deref(),
        "a dataset (source/name) or shuffle",
    );
    b.push_str(
        "<table class=\"nets\"><tr><th>net</th><th>features / arch</th><th>run</th><th>parent</th><th>quantization error (mean cp)</th><th>created</th></tr>",
    );
    for n in &all {
        let star = if best.as_deref() == Some(n.name.as_str()) {
            " <b>(best)</b>".to_string()
        } else {
            crate::ui_actions::button("/ui/promotions", "Make best", &[("name", &n.name)])
        };
        // An imported net was never quantized here: no error to show.
        let error = if n.external {
            "imported".to_string()
        } else {
            format!("{:.2}", n.quantization.mean_abs_cp)
        };
        let _ = write!(
            b,
            r#"<tr><td>{}{star}</td><td>{} {}</td><td>{}</td><td>{}</td><td class="num">{error}</td><td>{}</td></tr>"#,
            net_link(&n.name),
            escape(&n.features),
            escape(&n.arch),
            run_link(&n.run),
            n.parent.as_deref().map(net_link).unwrap_or_default(),
            when(&n.created)
        );
    }
    b.push_str("</table>");
    if all.is_empty() {
        b.push_str("<p>No nets here.</p>");
    }
    b.push_str(&next_link(
        "/ui/nets",
        &[
            ("dataset", q.dataset.as_deref()),
            ("limit", limit.as_deref()),
        ],
        next,
    ));
    if first_page {
        b.push_str(&crate::ui_actions::promotions(&s).await?);
    }
    Ok(layout("Nets", "/ui/nets", false, &b))
}

pub(crate) async fn sprt_list(
    State(s): State<AppState>,
    PageQuery(q): PageQuery<SprtFilter>,
) -> Page {
    let limit = q.limit.map(|l| l.to_string());
    let q = SprtFilter {
        limit: Some(q.limit.unwrap_or(PAGE)),
        ..q
    };
    let (tests, next) = crate::lists::sprt_page(&s, &q).await?;
    let busy = tests.iter().any(|t| t.state == SprtState::Running);
    let mut body = String::new();
    if crate::session::viewer().can(lakefish_schemas::config::Scope::Submit) {
        body.push_str(
            r#"<p><a href="/ui/sprt/new">New test</a> · <a href="/ui/gauntlet/new">New gauntlet</a></p>"#,
        );
    }
    body.push_str(&sprt_filter(q.state.as_deref(), q.net.as_deref()));
    if tests.is_empty() {
        body.push_str("<p>No SPRT tests here.</p>");
    } else {
        body.push_str(&crate::dashboard::sprt_table(&tests));
    }
    body.push_str(&next_link(
        "/ui/sprt",
        &[
            ("state", q.state.as_deref()),
            ("net", q.net.as_deref()),
            ("limit", limit.as_deref()),
        ],
        next,
    ));
    Ok(layout("SPRT tests", "/ui/sprt", busy, &body))
}

/// Colours of overlaid runs, in order.
pub(crate) const COLOURS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2a9d3a", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2",
];

/// Several runs' losses on shared log axes (`?run=A&run=B...`, at most eight), with each
/// run's final validation loss beside the material-only line of its validation positions.
pub(crate) async fn compare_runs(
    State(s): State<AppState>,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
) -> Page {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query.as_deref().unwrap_or(""))
        .map_err(|e| {
        crate::api::ApiError::BadRequest(format!("the query could not be read: {e}"))
    })?;
    let mut ids: Vec<lakefish_schemas::names::RunId> = Vec::new();
    for (k, v) in &pairs {
        if k != "run" {
            return Err(crate::api::ApiError::BadRequest(format!(
                "unknown parameter {k:?}: give runs as ?run=ID&run=ID"
            ))
            .into());
        }
        let id = v
            .parse()
            .map_err(|_| crate::api::ApiError::BadRequest(format!("run {v:?} is not a run id")))?;
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    if ids.len() > COLOURS.len() {
        return Err(crate::api::ApiError::BadRequest(format!(
            "at most {} runs at once ({} given)",
            COLOURS.len(),
            ids.len()
        ))
        .into());
    }
    let mut runs = Vec::new();
    for id in &ids {
        let r = lakefish_jobs::nets::run_with_metrics(&s.lake, id)
            .await?
            .ok_or_else(|| {
                crate::api::ApiError::NotFound(format!("training run {id} not found"))
            })?;
        runs.push(r);
    }
    let series = |pick: fn(&lakefish_jobs::nets::MetricsPoint) -> Option<f64>| {
        runs.iter()
            .zip(COLOURS)
            .map(|(r, color)| crate::charts::Series {
                name: r.run.id.as_str(),
                color,
                points: r
                    .metrics
                    .iter()
                    .filter_map(|m| Some((m.step as f64, pick(m)?)))
                    .collect(),
            })
            .collect::<Vec<_>>()
    };
    let mut b = String::new();
    if runs.is_empty() {
        b.push_str(r#"<p>Tick runs on the <a href="/ui/runs">runs page</a> to compare them.</p>"#);
    }
    b.push_str(&crate::charts::log_chart(
        "Validation loss",
        "step",
        "loss",
        &series(|m| m.val_loss),
        &[],
    ));
    b.push_str(&crate::charts::log_chart(
        "Training loss",
        "step",
        "loss",
        &series(|m| Some(m.train_loss)),
        &[],
    ));
    b.push_str("<table class=\"compare\"><tr><th>run</th><th>features / arch</th><th>step</th><th>last val loss</th><th>material-only val loss</th></tr>");
    for (r, color) in runs.iter().zip(COLOURS) {
        let r = &r.run;
        let _ = write!(
            b,
            r#"<tr><td><span style="color:{color}">■</span> {}</td><td>{} {}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td></tr>"#,
            run_link(&r.id),
            escape(&r.spec.net_label().0),
            escape(&r.spec.net_label().1),
            r.step,
            r.val_loss
                .last()
                .map(|v| format!("{v:.5}"))
                .unwrap_or_default(),
            r.material_val_loss
                .map(|v| format!("{v:.5}"))
                .unwrap_or_default(),
        );
    }
    b.push_str("</table>");
    Ok(layout("Runs compared", "/ui/runs", false, &b))
}

/// A list's filter by one text field (a GET form).
fn text_filter(path: &str, name: &str, value: Option<&str>, hint: &str) -> String {
    format!(
        r#"<form method="get" action="{path}" class="filter"><input name="{name}" size="34" placeholder="{}" value="{}"> <button type="submit">Filter</button></form>"#,
        escape(hint),
        escape(value.unwrap_or(""))
    )
}

/// The SPRT list's filter: a state and a net or engine side (a GET form).
fn sprt_filter(state: Option<&str>, net: Option<&str>) -> String {
    let mut o = String::from(r#"<option value="">any state</option>"#);
    for st in [
        SprtState::Running,
        SprtState::Accepted,
        SprtState::Rejected,
        SprtState::Inconclusive,
        SprtState::Stopped,
    ] {
        let v = st.as_str();
        let sel = if state == Some(v) { " selected" } else { "" };
        let _ = write!(o, r#"<option value="{v}"{sel}>{v}</option>"#);
    }
    format!(
        r#"<form method="get" action="/ui/sprt" class="filter"><select name="state">{o}</select> <input name="net" size="30" placeholder="a net or engine side" value="{}"> <button type="submit">Filter</button></form>"#,
        escape(net.unwrap_or("")),
    )
}

#[cfg(test)]
mod tests {
    use super::next_link;

    #[test]
    fn the_next_page_keeps_the_filters_and_escapes_them() {
        assert_eq!(next_link("/ui/sprt", &[], None), "");
        let l = next_link(
            "/ui/sprt",
            &[
                ("state", Some("running")),
                ("net", Some("a&b")),
                ("x", None),
            ],
            Some("c1".into()),
        );
        assert!(
            l.contains(r#"href="/ui/sprt?state=running&amp;net=a%26b&amp;after=c1""#),
            "{l}"
        );
    }
}
