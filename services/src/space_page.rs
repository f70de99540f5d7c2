//! Space: `GET /v1/space` and `/ui/space`, what the lake holds by kind and its largest items
//! (`lakefish_jobs::space`), and `GET /v1/tombstones`, what `lakefish rm` removed.

use std::fmt::Write;

use axum::Json;
use axum::extract::State;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use lakefish_jobs::space::{SpaceKind, SpaceUsage};

use crate::api::{ApiError, AppState, Route, json, route};
use crate::charts::escape;
use crate::dashboard::{Page, layout};

/// Items the page lists (the JSON has every one).
const SHOWN: usize = 50;

pub(crate) fn routes() -> Vec<Route> {
    vec![
        route(
            Method::GET,
            "/ui/space",
            "Dashboard: the lake's space by kind and its largest items (HTML).",
            get(page),
        )
        .page(),
        route(
            Method::GET,
            "/v1/space",
            "The lake's space: bytes and objects per kind (raw, datasets, masks, profiles, shuffles, runs, nets, sprt, experiments, other) and per item, largest first.",
            get(usage),
        )
        .ok(StatusCode::OK, json::<SpaceUsage>())
        .errors(&[StatusCode::SERVICE_UNAVAILABLE]),
        route(
            Method::GET,
            "/v1/tombstones",
            "What `lakefish rm` removed, newest first: kind, name, when, by whom, bytes, and what still named it.",
            get(tombstones),
        )
        .ok(StatusCode::OK, json::<Vec<lakefish_jobs::remove::Tombstone>>())
        .errors(&[StatusCode::SERVICE_UNAVAILABLE]),
    ]
}

async fn usage(State(s): State<AppState>) -> Result<Response, ApiError> {
    Ok(Json(lakefish_jobs::space::usage(&s.lake).await?).into_response())
}

async fn tombstones(State(s): State<AppState>) -> Result<Response, ApiError> {
    Ok(Json(lakefish_jobs::remove::tombstones(&s.lake).await?).into_response())
}

/// The server's retention, as a clause.
fn retention(s: &AppState) -> String {
    match &s.config.retention {
        Some(r) => format!(
            "; the server collects every {} h, keeping {} checkpoints per run{}",
            r.every_hours,
            r.keep_checkpoints,
            r.unused_shuffle_days
                .map(|d| format!(" and shuffles used in the last {d} days"))
                .unwrap_or_default()
        ),
        None => {
            "; the server collects nothing by itself (no <code>[retention]</code> in its config)"
                .into()
        }
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / (1 << 20) as f64)
}

/// Where an item's own page is, when it has one.
fn item_link(kind: SpaceKind, name: &str) -> String {
    let href = match kind {
        SpaceKind::Datasets => Some(format!("/ui/datasets/{name}")),
        SpaceKind::Runs => Some(format!("/ui/runs/{name}")),
        SpaceKind::Shuffles => Some(crate::dataset_page::shuffle_href(name)),
        SpaceKind::Sprt => Some(format!("/ui/sprt/{name}")),
        SpaceKind::Experiments => Some(format!("/ui/experiments/{name}")),
        _ => None,
    };
    if kind == SpaceKind::Nets {
        return crate::dashboard::net_link(&format!("{name}.nnue"));
    }
    match href {
        Some(h) => format!(r#"<a href="{}">{}</a>"#, escape(&h), escape(name)),
        None => escape(name),
    }
}

async fn page(State(s): State<AppState>) -> Page {
    let u = lakefish_jobs::space::usage(&s.lake).await?;
    let mut b = format!(
        "<p>{} MiB in {} objects ({}).</p>",
        mib(u.bytes),
        u.objects,
        if u.from == "catalogue" {
            "datasets, masks, profiles, shuffles, runs and tests as the catalogue measured them when each was indexed, the rest listed; <code>lakefish du --scan</code> lists every object, including what is still being written"
        } else {
            "from a listing of every object"
        }
    );
    match lakefish_jobs::gc::last(&s.lake).await? {
        Some(g) => {
            let _ = write!(
                b,
                "<p>Last collection (<code>lakefish gc</code>): {} by {}, {} MiB in {} objects removed{}.</p>",
                crate::dashboard::when(&g.at),
                escape(&g.by),
                mib(g.removed_bytes),
                g.removed_objects,
                retention(&s)
            );
            if !g.lines.is_empty() {
                b.push_str("<details><summary>What it did</summary><ul>");
                for l in g.lines.iter().take(200) {
                    let _ = write!(b, "<li>{}</li>", escape(l));
                }
                b.push_str("</ul></details>");
            }
        }
        None => {
            let _ = write!(b, "<p>No collection yet{}.</p>", retention(&s));
        }
    }
    b.push_str(
        "<table><tr><th>kind</th><th>MiB</th><th>share</th><th>objects</th><th>items</th></tr>",
    );
    for k in &u.kinds {
        let _ = write!(
            b,
            r#"<tr><td>{}</td><td class="num">{}</td><td class="num">{:.1}%</td><td class="num">{}</td><td class="num">{}</td></tr>"#,
            k.kind.as_str(),
            mib(k.bytes),
            100.0 * k.bytes as f64 / u.bytes.max(1) as f64,
            k.objects,
            k.items
        );
    }
    let _ = write!(
        b,
        "</table><h2>Largest items</h2><table><tr><th>kind</th><th>item</th><th>MiB</th><th>objects</th></tr>"
    );
    for i in u.items.iter().take(SHOWN) {
        let _ = write!(
            b,
            r#"<tr><td>{}</td><td>{}</td><td class="num">{}</td><td class="num">{}</td></tr>"#,
            i.kind.as_str(),
            item_link(i.kind, &i.name),
            mib(i.bytes),
            i.objects
        );
    }
    b.push_str("</table>");
    if u.items.len() > SHOWN {
        let _ = write!(
            b,
            "<p>{} more in <code>/v1/space</code> and <code>lakefish du --json</code>.</p>",
            u.items.len() - SHOWN
        );
    }
    Ok(layout("Space", "/ui/space", false, &b))
}
