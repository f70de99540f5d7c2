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
use lakefish_schemas::{JobId, JobRecord};
use std::fmt::Write;

/// `/ui/jobs?state=&kind=&limit=&after=`: the job list as `/v1/jobs` pages it. Without a
/// kind, the tasks lakefish queues itself (an SPRT's batches, a shuffle's deals and piles)
/// are left out and counted, one link away.
pub(crate) async fn jobs(
    State(s): State<AppState>,
    crate::dashboard::PageQuery(q): crate::dashboard::PageQuery<crate::api::ListJobs>,
) -> Page {
    let (state, kind) = (q.state.clone(), q.kind.clone());
    let query = crate::api::job_query(q)?;
    let page = s.jobs.page(&query).await?;
    let (internal, shown): (Vec<JobRecord>, Vec<JobRecord>) = page
        .jobs
        .into_iter()
        .partition(|j| query.kind.is_none() && j.kind.is_internal());
    let busy = shown.iter().chain(&internal).any(|j| !j.state.is_final());
    let mut body = jobs_filter(state.as_deref(), kind.as_deref());
    if shown.is_empty() && internal.is_empty() {
        body.push_str("<p>No jobs here. Submit one with <code>lakefish submit</code> or <code>POST /v1/jobs</code>.</p>");
    } else {
        body.push_str(&jobs_table(&shown));
    }
    if !internal.is_empty() {
        let mut kinds: Vec<&str> = internal.iter().map(|j| j.kind.as_str()).collect();
        kinds.sort();
        kinds.dedup();
        let links: Vec<String> = kinds
            .iter()
            .map(|k| {
                let n = internal.iter().filter(|j| j.kind.as_str() == *k).count();
                format!(r#"<a href="/ui/jobs?kind={k}">{n} {k}</a>"#)
            })
            .collect();
        let _ = write!(
            body,
            "<p class=\"internal\">Also on this page, queued by lakefish itself: {}.</p>",
            links.join(", ")
        );
    }
    if let Some(next) = page.next {
        let mut link = format!("/ui/jobs?after={}&limit={}", next.encode(), query.limit);
        for (k, v) in [("state", &state), ("kind", &kind)] {
            if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
                let _ = write!(link, "&{k}={v}");
            }
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
            &["queued", "running", "succeeded", "failed"],
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
    if let Some(e) = &rec.error {
        let _ = write!(b, "<h3>Error</h3><p class=\"error\">{}</p>", escape(e));
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

/// Links to the pages of what a job's result names: its run, net, SPRT test.
fn made_links(result: &serde_json::Value) -> Vec<String> {
    let text = |k: &str| result.get(k).and_then(|v| v.as_str());
    let mut out = Vec::new();
    if let Some(run) = text("run").or(text("id")).filter(|r| r.starts_with("run-")) {
        out.push(format!("run {}", run_link(run)));
    }
    if let Some(net) = text("net")
        .or(text("name"))
        .filter(|n| n.starts_with("nn-"))
    {
        out.push(format!("net {}", net_link(net)));
    }
    if let Some(sprt) = text("sprt").filter(|t| t.starts_with("sprt-")) {
        out.push(format!(
            r#"SPRT <a href="/ui/sprt/{i}">{i}</a>"#,
            i = escape(sprt)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::made_links;

    #[test]
    fn a_result_links_what_it_names_and_escapes_it() {
        let r = serde_json::json!({"run": "run-0123456789ab", "net": "nn-<b>.nnue", "sprt": "sprt-x\"y"});
        let links = made_links(&r);
        assert_eq!(links.len(), 3, "{links:?}");
        assert!(links[0].contains(r#"href="/ui/runs/run-0123456789ab""#));
        assert!(links[1].contains("nn-&lt;b&gt;.nnue") && !links[1].contains("<b>"));
        assert!(links[2].contains("sprt-x&quot;y"), "{}", links[2]);
        // Nothing it names, or names that are not ids: no links.
        assert!(
            made_links(&serde_json::json!({"rows": 3, "run": 7, "net": "classical"})).is_empty()
        );
    }
}
