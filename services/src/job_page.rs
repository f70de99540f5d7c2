//! The dashboard's job pages: the list (`/ui/jobs`, filtered and paged as `/v1/jobs`) and one
//! job (`/ui/jobs/{id}`: what it was asked, how far it got, what it made, with links to the
//! pages of what it names). The list links to a job's page, not to JSON.

use crate::api::{ApiError, AppState};
use crate::charts::escape;
use crate::dashboard::{
    Page, PagePath, job_target, jobs_table, layout, net_link, opt_when, progress_bar, run_link,
    state_badge, when,
};
use axum::extract::State;
use lakefish_schemas::JobId;
use std::fmt::Write;

/// `/ui/jobs?state=&kind=&limit=&after=`: the job list as `/v1/jobs` pages it. Without a
/// kind, the tasks lakefish queues itself (an SPRT's batches, a shuffle's deals and piles)
/// are left out and counted, one link away.
pub(crate) async fn jobs(
    State(s): State<AppState>,
    crate::dashboard::PageQuery(q): crate::dashboard::PageQuery<crate::api::ListJobs>,
) -> Page {
    let (state, kind) = (q.state.clone(), q.kind.clone());
    let mut query = crate::api::job_query(q)?;
    // Without a kind chosen, the page holds what people submitted; the tasks lakefish queued
    // for them are counted below, a link away.
    query.submitted_only = query.kind.is_none();
    let page = s.jobs.page(&query).await?;
    let shown = page.jobs;
    let busy = shown.iter().any(|j| !j.state.is_final());
    let mut body = jobs_filter(state.as_deref(), kind.as_deref());
    if shown.is_empty() {
        body.push_str("<p>No jobs here. Submit one with <code>lakefish submit</code> or <code>POST /v1/jobs</code>.</p>");
    } else {
        body.push_str(&jobs_table(&shown));
    }
    if query.submitted_only {
        let mut counts: std::collections::BTreeMap<&str, u64> = Default::default();
        for t in s.jobs.tally().await? {
            if t.kind.is_internal() && query.state.is_none_or(|st| st == t.state) {
                *counts.entry(t.kind.as_str()).or_default() += t.count;
            }
        }
        // The state chosen stays chosen (the value parsed as a state: a plain word).
        let also = query
            .state
            .map(|st| format!("&amp;state={}", st.as_str()))
            .unwrap_or_default();
        let links: Vec<String> = counts
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| format!(r#"<a href="/ui/jobs?kind={k}{also}">{n} {k}</a>"#))
            .collect();
        if !links.is_empty() {
            let _ = write!(
                body,
                "<p class=\"internal\">Not listed: the tasks lakefish queued itself, {}.</p>",
                links.join(", ")
            );
        }
    }
    if let Some(next) = page.next {
        // Built from the parsed filters, not the query's text: plain words only.
        let mut link = format!("/ui/jobs?after={}&limit={}", next.encode(), query.limit);
        if let Some(st) = query.state {
            let _ = write!(link, "&state={}", st.as_str());
        }
        if let Some(k) = query.kind {
            let _ = write!(link, "&kind={}", k.as_str());
        }
        let _ = write!(
            body,
            r#"<p><a id="next" href="{}">Next page</a></p>"#,
            escape(&link)
        );
    }
    Ok(layout("Jobs", "/ui/jobs", busy, &body))
}

/// A form that filters the list by state and kind (a plain GET: no JavaScript).
fn jobs_filter(state: Option<&str>, kind: Option<&str>) -> String {
    let options = |name: &str, all: &[&str], chosen: Option<&str>| {
        let mut o = format!(r#"<select name="{name}"><option value="">any {name}</option>"#);
        for v in all {
            let sel = if chosen == Some(*v) { " selected" } else { "" };
            let _ = write!(o, r#"<option value="{v}"{sel}>{v}</option>"#);
        }
        o.push_str("</select>");
        o
    };
    let kinds: Vec<&str> = lakefish_schemas::JobKind::ALL
        .iter()
        .map(|k| k.as_str())
        .collect();
    format!(
        r#"<form method="get" action="/ui/jobs" class="filter">{} {} <button type="submit">Show</button></form>"#,
        options(
            "state",
            &["queued", "running", "succeeded", "failed", "cancelled"],
            state
        ),
        options("kind", &kinds, kind)
    )
}

pub(crate) async fn job(State(s): State<AppState>, PagePath(id): PagePath) -> Page {
    let unknown = || ApiError::NotFound(format!("job {id:?} not found (ids are UUIDs)"));
    let jid = JobId::parse(&id).ok_or_else(unknown)?;
    let rec = s.jobs.get(&jid).await?.ok_or_else(unknown)?;
    let p = &rec.progress;
    let rows = [
        ("kind", escape(rec.kind.as_str())),
        ("target", job_target(&rec)),
        ("state", state_badge(rec.state.as_str())),
        (
            "progress",
            format!(
                "{} {}",
                escape(&p.stage),
                progress_bar(p.done, p.total, &p.unit)
            ),
        ),
        ("attempts", rec.attempts.to_string()),
        ("worker", escape(rec.worker.as_deref().unwrap_or("-"))),
        ("created", when(&rec.created)),
        ("started", opt_when(&rec.started)),
        ("finished", opt_when(&rec.finished)),
    ];
    let mut b = String::from("<table class=\"conditions\">");
    for (k, v) in rows {
        let _ = write!(b, "<tr><th>{k}</th><td>{v}</td></tr>");
    }
    b.push_str("</table>");
    if let Some(c) = rec.cancel.as_ref().filter(|_| !rec.state.is_final()) {
        let _ = write!(
            b,
            "<p>Cancel requested by {} at {}: the job stops at its next progress report.</p>",
            escape(&c.by),
            when(&c.at)
        );
    } else if !rec.state.is_final() && !rec.kind.is_internal() {
        b.push_str(&crate::ui_actions::button(
            &format!("/ui/jobs/{}/cancel", rec.id),
            "Cancel this job",
            &[],
        ));
    }
    if let Some(e) = &rec.error {
        let head = if rec.state == lakefish_schemas::JobState::Cancelled {
            "Cancelled"
        } else {
            "Error"
        };
        let _ = write!(b, "<h3>{head}</h3><p class=\"error\">{}</p>", escape(e));
    }
    if let Some(r) = &rec.result {
        let made = made_links(r);
        if !made.is_empty() {
            let _ = write!(b, "<h3>Made</h3><p>{}</p>", made.join(" · "));
        }
        let _ = write!(
            b,
            "<h3>Result</h3><pre>{}</pre>",
            escape(&serde_json::to_string_pretty(r).unwrap_or_default())
        );
    }
    let spec = serde_json::to_string_pretty(&rec.spec).unwrap_or_default();
    let _ = write!(
        b,
        r#"<h3>Asked</h3><pre>{}</pre><p><a href="/v1/jobs/{id}">JSON</a> · <a href="/ui/jobs">all jobs</a></p>"#,
        escape(&spec),
        id = rec.id
    );
    Ok(layout(
        &format!("Job {} ({})", rec.id, rec.kind.as_str()),
        "/ui/jobs",
        !rec.state.is_final(),
        &b,
    ))
}

/// Links to the pages of what a job's result names: its run, net, SPRT test. Only values
/// that parse as such ids become links (a link cannot lead anywhere else).
fn made_links(result: &serde_json::Value) -> Vec<String> {
    use lakefish_schemas::names::{RunId, SprtId};
    let text = |k: &str| result.get(k).and_then(|v| v.as_str());
    let first = |keys: &[&str], valid: &dyn Fn(&str) -> bool| {
        keys.iter().filter_map(|k| text(k)).find(|v| valid(v))
    };
    let mut out = Vec::new();
    if let Some(run) = first(&["run", "id"], &|v| {
        v.starts_with("run-") && RunId::new(v).is_ok()
    }) {
        out.push(format!("run {}", run_link(run)));
    }
    if let Some(net) = first(&["net", "name"], &|v| {
        lakefish_schemas::nets::net_name(v).is_ok()
    }) {
        out.push(format!("net {}", net_link(net)));
    }
    // An SPRT job's result names its test as `sprt`; a status written in-process as `id`.
    if let Some(sprt) = first(&["sprt", "id"], &|v| {
        v.starts_with("sprt-") && SprtId::new(v).is_ok()
    }) {
        out.push(format!(
            r#"SPRT <a href="/ui/sprt/{i}">{i}</a>"#,
            i = escape(sprt)
        ));
    }
    // A gauntlet's levels, each a test of its own.
    for level in result
        .get("levels")
        .and_then(|l| l.as_array())
        .into_iter()
        .flatten()
    {
        if let Some(sprt) = level.get("sprt").and_then(|v| v.as_str())
            && sprt.starts_with("sprt-")
            && SprtId::new(sprt).is_ok()
        {
            let elo = level.get("uci_elo").and_then(|v| v.as_u64()).unwrap_or(0);
            out.push(format!(
                r#"UCI_Elo {elo}: <a href="/ui/sprt/{i}">{i}</a>"#,
                i = escape(sprt)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::made_links;

    #[test]
    fn a_result_links_what_it_names_and_escapes_it() {
        let r = serde_json::json!({"run": "run-0123456789ab", "net": "nn-0123456789ab.nnue", "sprt": "sprt-0123456789ab"});
        let links = made_links(&r);
        assert_eq!(links.len(), 3, "{links:?}");
        assert!(links[0].contains(r#"href="/ui/runs/run-0123456789ab""#));
        assert!(
            links[1].contains(r#"href="/ui/nets/nn-0123456789ab.nnue""#),
            "{}",
            links[1]
        );
        assert!(
            links[2].contains(r#"href="/ui/sprt/sprt-0123456789ab""#),
            "{}",
            links[2]
        );
        // Values that only look like ids (another route, markup) make no links.
        let r = serde_json::json!({"run": "run-x/../../v1/jobs", "net": "nn-<b>.nnue", "sprt": "sprt-x\"y"});
        assert!(made_links(&r).is_empty(), "{:?}", made_links(&r));
        // A status written in-process names its test as `id`.
        let links = made_links(&serde_json::json!({"id": "sprt-0123456789ab"}));
        assert_eq!(links.len(), 1, "{links:?}");
        // Nothing it names, or names that are not ids: no links.
        assert!(
            made_links(&serde_json::json!({"rows": 3, "run": 7, "net": "classical"})).is_empty()
        );
    }
}
