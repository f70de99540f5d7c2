//! The dashboard's forms: log in (a token becomes a cookie), create an SPRT, stop a test,
//! cancel a job, promote or roll back the best net, run a pipeline. Each posts to a route
//! under `/ui` that needs the same scope as its API route ([`crate::auth::needed_scope`]),
//! checks the form's CSRF value ([`crate::session`]), calls the same domain function as the
//! API, and answers with a redirect to the page that shows the outcome (303), or an error page.

use crate::api::{ApiError, AppState, Body, Route, route};
use crate::charts::escape;
use crate::dashboard::{Page, PageError, PagePath, PageQuery, layout};
use crate::session::{self, Viewer};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use std::fmt::Write;

/// The largest form body taken (a form here is a few short fields).
const MAX_FORM_BYTES: usize = 16 * 1024;

pub(crate) fn routes() -> Vec<Route> {
    use Method as M;
    let see_other = StatusCode::SEE_OTHER;
    let html = || Body::Other("text/html");
    let form = || Body::Other("application/x-www-form-urlencoded");
    let errs = [
        StatusCode::BAD_REQUEST,
        StatusCode::NOT_FOUND,
        StatusCode::CONFLICT,
        StatusCode::SERVICE_UNAVAILABLE,
    ];
    let action = |path, summary, handler| {
        route(M::POST, path, summary, handler)
            .request(form())
            .ok(see_other, html())
            .errors(&errs)
            .html_errors()
    };
    vec![
        route(
            M::GET,
            "/ui/login",
            "Dashboard: the login form (a token becomes a cookie for the dashboard only).",
            get(login_page),
        )
        .page(),
        route(
            M::POST,
            "/ui/login",
            "Dashboard: log in with a token (form field `token`); sets an HttpOnly, SameSite=Strict cookie and redirects to `next`.",
            post(login),
        )
        .request(form())
        .ok(see_other, html())
        .ok(StatusCode::OK, html())
        .errors(&[StatusCode::BAD_REQUEST, StatusCode::UNAUTHORIZED])
        .html_errors(),
        route(
            M::POST,
            "/ui/logout",
            "Dashboard: forget the login cookie.",
            post(logout),
        )
        .request(form())
        .ok(see_other, html())
        .html_errors(),
        route(
            M::GET,
            "/ui/sprt/new",
            "Dashboard: the form that creates an SPRT (HTML).",
            get(new_sprt_page),
        )
        .page(),
        action(
            "/ui/sprt",
            "Dashboard form: create an SPRT (fields as POST /v1/sprt; CSRF).",
            post(create_sprt),
        ),
        route(
            M::GET,
            "/ui/gauntlet/new",
            "Dashboard: the form that queues a gauntlet (HTML).",
            get(new_gauntlet_page),
        )
        .page(),
        action(
            "/ui/gauntlet",
            "Dashboard form: queue a gauntlet (fields as a `gauntlet` job's spec; CSRF).",
            post(create_gauntlet),
        ),
        action(
            "/ui/sprt/{id}/stop",
            "Dashboard form: stop a running SPRT (CSRF).",
            post(stop_sprt),
        ),
        action(
            "/ui/datasets/{source}/{name}/profile",
            "Dashboard form: queue a `profile` job for a committed dataset (CSRF).",
            post(profile_dataset),
        ),
        action(
            "/ui/shuffles/{id}/profile",
            "Dashboard form: queue a `profile` job for a committed shuffle (CSRF).",
            post(profile_shuffle),
        ),
        action(
            "/ui/jobs/{id}/cancel",
            "Dashboard form: cancel a queued or running job (CSRF).",
            post(cancel_job),
        ),
        action(
            "/ui/promotions",
            "Dashboard form: make a registered net the best, or roll back to an earlier one (admin; fields `name`, `reason`; CSRF).",
            post(promote),
        ),
        action(
            "/ui/pipelines/{name}/run",
            "Dashboard form: start a pipeline run (admin; CSRF).",
            post(run_pipeline),
        ),
    ]
}

/// A form's body as read, or why it could not be (too large, cut off): a page either way.
type FormBody = Result<Bytes, axum::extract::rejection::BytesRejection>;

impl From<axum::extract::rejection::BytesRejection> for PageError {
    fn from(e: axum::extract::rejection::BytesRejection) -> Self {
        PageError(match e.status() {
            StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::TooLarge(format!("a form of at most {MAX_FORM_BYTES} bytes"))
            }
            _ => ApiError::BadRequest(format!("the form could not be read: {}", e.body_text())),
        })
    }
}

/// A posted form's fields, its CSRF value checked against the viewer's.
struct Form(Vec<(String, String)>);

impl Form {
    fn parse(body: &Bytes, csrf: bool) -> Result<Form, PageError> {
        if body.len() > MAX_FORM_BYTES {
            return Err(
                ApiError::TooLarge(format!("a form of at most {MAX_FORM_BYTES} bytes")).into(),
            );
        }
        let fields: Vec<(String, String)> = serde_urlencoded::from_bytes(body)
            .map_err(|e| ApiError::BadRequest(format!("the form could not be read: {e}")))?;
        let form = Form(fields);
        if csrf {
            session::viewer().check_csrf(form.get(session::CSRF_FIELD))?;
        }
        Ok(form)
    }

    /// A field's value, trimmed; empty means not given.
    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// A job spec's fields from the form: `text` as given, `numbers` checked as numbers.
    fn spec(
        &self,
        text: &[&str],
        numbers: &[&str],
    ) -> Result<serde_json::Map<String, serde_json::Value>, PageError> {
        let mut spec = serde_json::Map::new();
        for f in text {
            if let Some(v) = self.get(f) {
                spec.insert((*f).into(), v.into());
            }
        }
        for f in numbers {
            if let Some(v) = self.number(f)? {
                spec.insert((*f).into(), v);
            }
        }
        Ok(spec)
    }

    fn number(&self, name: &str) -> Result<Option<serde_json::Value>, PageError> {
        let Some(v) = self.get(name) else {
            return Ok(None);
        };
        let n: f64 = v
            .parse()
            .ok()
            .filter(|n: &f64| n.is_finite())
            .ok_or_else(|| ApiError::BadRequest(format!("{name}: {v:?} is not a number")))?;
        Ok(Some(if n.fract() == 0.0 && n.abs() < 9e15 {
            serde_json::json!(n as i64)
        } else {
            serde_json::json!(n)
        }))
    }
}

/// A form post's answer: see the page that shows what it did.
fn see(to: &str) -> Response {
    Redirect::to(to).into_response()
}

/// A button that posts to `path` with `fields`, shown only to a viewer allowed to use it.
pub(crate) fn button(path: &str, label: &str, fields: &[(&str, &str)]) -> String {
    let v = session::viewer();
    let allowed = match crate::auth::needed_scope(&Method::POST, path) {
        Some(scope) => v.can(scope),
        None => true,
    };
    if !allowed {
        return String::new();
    }
    let mut hidden = v.csrf_input();
    for (k, val) in fields {
        let _ = write!(
            hidden,
            r#"<input type="hidden" name="{}" value="{}">"#,
            escape(k),
            escape(val)
        );
    }
    format!(
        r#"<form method="post" action="{}" class="act">{hidden}<button type="submit">{}</button></form>"#,
        escape(path),
        escape(label)
    )
}

/// The login state in the navigation bar.
pub(crate) fn nav_login() -> String {
    let v = session::viewer();
    if v.logged_in() {
        format!(
            r#"<span class="who">{} <form method="post" action="/ui/logout" class="act"><button type="submit">Log out</button></form></span>"#,
            escape(&v.name)
        )
    } else if v.auth_enabled() {
        r#"<span class="who"><a href="/ui/login">Log in</a></span>"#.into()
    } else {
        String::new()
    }
}

#[derive(serde::Deserialize)]
struct Next {
    next: Option<String>,
}

/// Where a login may send the browser: a path on this server, never another site.
fn local_path(next: Option<&str>) -> String {
    match next {
        // No `//host`, no backslash, and no control character (a browser drops tabs and
        // newlines from a URL, so `/\t/host` would become `//host`).
        Some(n)
            if n.starts_with('/')
                && !n.starts_with("//")
                && !n.contains('\\')
                && !n.chars().any(char::is_control) =>
        {
            n.to_string()
        }
        _ => "/".into(),
    }
}

fn login_form(next: &str, message: &str) -> String {
    format!(
        r#"{message}<form method="post" action="/ui/login" class="stack"><label>Token <input type="password" name="token" autocomplete="current-password" size="50" autofocus></label><input type="hidden" name="next" value="{}"><button type="submit">Log in</button></form><p>A token comes from <code>lakefish token new</code>; its scopes decide what the dashboard lets you do (read, submit: tests and cancels, admin: promotions and pipelines). The cookie counts on the dashboard only; the API still takes the token as <code>Authorization: Bearer</code>.</p>"#,
        escape(next)
    )
}

async fn login_page(State(s): State<AppState>, PageQuery(q): PageQuery<Next>) -> Page {
    let next = local_path(q.next.as_deref());
    let v = session::viewer();
    let body = if !s.config.auth.enabled() {
        "<p>This server has no tokens configured, so everyone who reaches it may act: there is nothing to log in with. Configure <code>[[auth.tokens]]</code> (<code>lakefish token new</code>) before others can reach it.</p>".to_string()
    } else if v.logged_in() {
        format!(
            r#"<p>Logged in as <b>{}</b>.</p><form method="post" action="/ui/logout" class="act"><button type="submit">Log out</button></form>"#,
            escape(&v.name)
        )
    } else {
        login_form(&next, "")
    };
    Ok(layout("Log in", "", false, &body))
}

async fn login(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    body: FormBody,
) -> Result<Response, PageError> {
    let form = Form::parse(&body?, false)?;
    let next = local_path(form.get("next"));
    let token = form.get("token").unwrap_or("");
    if !s.config.auth.enabled() {
        return Ok(see(&next));
    }
    if s.config.auth.find(token).is_none() {
        let page = layout(
            "Log in",
            "",
            false,
            &login_form(
                &next,
                r#"<p class="error">That token is not one this server knows.</p>"#,
            ),
        );
        return Ok((StatusCode::UNAUTHORIZED, page).into_response());
    }
    let mut r = see(&next);
    // Behind a proxy that ends TLS, the cookie is for https only.
    let https = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("https"));
    let cookie = session::set_cookie(Some(token), https);
    r.headers_mut()
        .insert(header::SET_COOKIE, cookie.parse().map_err(|_| bad_token())?);
    Ok(r)
}

fn bad_token() -> PageError {
    ApiError::BadRequest("a token is printable ASCII without spaces or ';'".into()).into()
}

async fn logout() -> Response {
    let mut r = see("/");
    let cookie = session::set_cookie(None, false);
    r.headers_mut()
        .insert(header::SET_COOKIE, cookie.parse().expect("static cookie"));
    r
}

/// Queues a `profile` job for a committed dataset and shows the job.
async fn profile_dataset(
    State(s): State<AppState>,
    path: Result<crate::api::ApiPath<(String, String)>, ApiError>,
    body: FormBody,
) -> Result<Response, PageError> {
    Form::parse(&body?, true)?;
    let crate::api::ApiPath((source, name)) = path?;
    let (source, dataset) = crate::dataset_page::parse(&source, &name)?;
    if lakefish_lake::datasets::read_manifest(&s.lake, source, &dataset)
        .await?
        .is_none()
    {
        return Err(ApiError::NotFound(format!("no committed dataset {source}/{dataset}")).into());
    }
    let spec = lakefish_schemas::JobSpec::Profile(lakefish_schemas::ProfileSpec {
        dataset: Some(dataset),
        source,
        shuffle: None,
    });
    let (id, _) = crate::api::admit(&s, &spec).await?;
    Ok(see(&format!("/ui/jobs/{id}")))
}

/// Queues a `profile` job for a committed shuffle and shows the job.
async fn profile_shuffle(
    State(s): State<AppState>,
    path: Result<crate::api::ApiPath<String>, ApiError>,
    body: FormBody,
) -> Result<Response, PageError> {
    Form::parse(&body?, true)?;
    let crate::api::ApiPath(id) = path?;
    let id = crate::dataset_page::parse_shuffle(&id)?;
    let Some(m) = lakefish_jobs::shuffle::read_shuffle_manifest(&s.lake, &id).await? else {
        return Err(ApiError::NotFound(format!("no committed shuffle {id}")).into());
    };
    let spec = lakefish_schemas::JobSpec::Profile(lakefish_schemas::ProfileSpec {
        dataset: None,
        source: m.source,
        shuffle: Some(id),
    });
    let (id, _) = crate::api::admit(&s, &spec).await?;
    Ok(see(&format!("/ui/jobs/{id}")))
}

async fn cancel_job(
    State(s): State<AppState>,
    PagePath(id): PagePath,
    body: FormBody,
) -> Result<Response, PageError> {
    Form::parse(&body?, true)?;
    let job = lakefish_schemas::JobId::parse(&id)
        .ok_or_else(|| ApiError::NotFound(format!("job {id:?} not found (ids are UUIDs)")))?;
    lakefish_jobs::runner::cancel_job(&s.jobs, &job, &session::viewer().name).await?;
    Ok(see(&format!("/ui/jobs/{job}")))
}

async fn stop_sprt(
    State(s): State<AppState>,
    PagePath(id): PagePath,
    body: FormBody,
) -> Result<Response, PageError> {
    Form::parse(&body?, true)?;
    let id: lakefish_schemas::names::SprtId = crate::api::path_id(&id, "sprt test")?;
    lakefish_jobs::sprt::stop(&s.lake, &id, &session::viewer().name).await?;
    Ok(see(&format!("/ui/sprt/{id}")))
}

async fn promote(State(s): State<AppState>, body: FormBody) -> Result<Response, PageError> {
    let form = Form::parse(&body?, true)?;
    let name = form
        .get("name")
        .ok_or_else(|| ApiError::BadRequest("name: which net to make the best".into()))?;
    let req = lakefish_schemas::nets::PromoteRequest {
        name: name.to_string(),
        reason: form.get("reason").map(str::to_string),
    };
    crate::actions::promote_net(&s, &req).await?;
    Ok(see("/ui/nets"))
}

async fn run_pipeline(
    State(s): State<AppState>,
    PagePath(name): PagePath,
    body: FormBody,
) -> Result<Response, PageError> {
    Form::parse(&body?, true)?;
    if !s.config.pipelines.contains_key(&name) {
        return Err(ApiError::NotFound(format!("no pipeline named {name:?} is configured")).into());
    }
    let trigger = format!("manual ({})", session::viewer().name);
    let (run, _) = lakefish_jobs::pipeline::start_run(&s.lake, &name, &trigger).await?;
    Ok(see(&format!("/ui/pipelines#run-{}", run.id)))
}

/// The SPRT fields the form sends as they are (text) and as numbers.
const TEXT_FIELDS: [&str; 5] = ["new", "base", "book", "tc", "model"];
const NUMBER_FIELDS: [&str; 7] = [
    "nodes",
    "elo0",
    "elo1",
    "alpha",
    "beta",
    "max_pairs",
    "batch_pairs",
];

async fn create_sprt(State(s): State<AppState>, body: FormBody) -> Result<Response, PageError> {
    let form = Form::parse(&body?, true)?;
    let spec = form.spec(&TEXT_FIELDS, &NUMBER_FIELDS)?;
    let done = crate::api::queue_sprt(&s, serde_json::Value::Object(spec)).await?;
    Ok(see(&format!("/ui/sprt/{}", done.id)))
}

/// Options for a side: the registered nets (newest first), `best`, the hand-written
/// evaluation, and registered engines; any side the API takes may be typed in instead.
async fn side_options(s: &AppState) -> Result<String, ApiError> {
    let mut out =
        String::from(r#"<option value="best"></option><option value="classical"></option>"#);
    for n in lakefish_jobs::nets::list_nets(&s.lake)
        .await?
        .iter()
        .take(50)
    {
        let _ = write!(out, r#"<option value="{}"></option>"#, escape(&n.name));
    }
    for e in lakefish_jobs::engines::list(&s.lake).await? {
        let _ = write!(out, r#"<option value="{}"></option>"#, escape(&e.name));
    }
    Ok(out)
}

async fn new_sprt_page(State(s): State<AppState>) -> Page {
    let v: Viewer = session::viewer();
    if !v.can(lakefish_schemas::config::Scope::Submit) {
        let body = r#"<p>Creating a test needs a token with the submit scope: <a href="/ui/login?next=/ui/sprt/new">log in</a>.</p>"#;
        return Ok(layout("New SPRT", "/ui/sprt", false, body));
    }
    let sides = side_options(&s).await?;
    let books = book_options(&s).await?;
    let body = format!(
        r#"<form method="post" action="/ui/sprt" class="stack">{csrf}
<datalist id="sides">{sides}</datalist>
<label>New <input name="new" list="sides" required size="40" placeholder="nn-....nnue, best, classical, or ENGINE[+NET][,OPTION=VALUE]"></label>
<label>Base <input name="base" list="sides" required size="40" value="best"></label>
<label>Book <select name="book">{books}</select></label>
<fieldset><legend>Limit (one of)</legend>
<label>Time control <input name="tc" size="10" placeholder="8+0.08"></label>
<label>Nodes per move <input name="nodes" size="10" placeholder="5000"></label></fieldset>
<fieldset><legend>Bounds</legend>
<label>elo0 <input name="elo0" size="6" value="0"></label>
<label>elo1 <input name="elo1" size="6" value="2"></label>
<label>Model <select name="model"><option value="normalized">normalized (fishtest)</option><option value="logistic">logistic</option></select></label>
<label>α <input name="alpha" size="6" value="0.05"></label>
<label>β <input name="beta" size="6" value="0.05"></label></fieldset>
<label>At most (pairs) <input name="max_pairs" size="8" value="20000"></label>
<label>Pairs per batch <input name="batch_pairs" size="6" value="8"></label>
<button type="submit">Start the test</button></form>
<p>The same checks as <code>POST /v1/sprt</code> and <code>lakefish sprt --api</code>: a side or value the API would refuse is refused here, naming the field.</p>"#,
        csrf = v.csrf_input(),
    );
    Ok(layout("New SPRT", "/ui/sprt", false, &body))
}

/// The best net's history on the nets page: who promoted what, when and why, the Elo its
/// test measured, and a roll-back button on each earlier best.
pub(crate) async fn promotions(s: &AppState) -> Result<String, ApiError> {
    let history = lakefish_jobs::nets::best_history(&s.lake).await?;
    let current = lakefish_jobs::nets::read_best(&s.lake)
        .await?
        .map(|b| b.name);
    if history.is_empty() {
        return Ok("<h2>Promotions</h2><p>No net has been promoted yet: the hand-written evaluation is the one to beat.</p>".into());
    }
    let mut t = String::from(
        "<h2>Promotions</h2><table class=\"promotions\"><tr><th>since</th><th>best</th><th>replaced</th><th>Elo (its test)</th><th>by</th><th>why</th><th></th></tr>",
    );
    for (i, b) in history.iter().enumerate() {
        let elo = match (b.elo, b.elo_error, &b.sprt) {
            (Some(e), Some(err), Some(id)) => format!(
                r#"{e:+.1} ± {err:.1} (<a href="/ui/sprt/{id}">{id}</a>)"#,
                id = escape(id)
            ),
            (_, _, Some(id)) => format!(r#"<a href="/ui/sprt/{id}">{id}</a>"#, id = escape(id)),
            _ => String::new(),
        };
        let is_current = current.as_deref() == Some(b.name.as_str());
        let first_of_current = history.iter().position(|h| h.name == b.name) == Some(i);
        let action = if is_current && first_of_current {
            "<b>now</b>".to_string()
        } else if is_current {
            String::new()
        } else {
            let reason = format!("roll back to {}", b.name);
            button(
                "/ui/promotions",
                "Roll back to this",
                &[("name", &b.name), ("reason", &reason)],
            )
        };
        let _ = write!(
            t,
            r#"<tr><td>{}</td><td>{}</td><td>{}</td><td class="num">{elo}</td><td>{}</td><td>{}</td><td>{action}</td></tr>"#,
            crate::dashboard::when(&b.since),
            crate::dashboard::net_link(&b.name),
            b.previous
                .as_deref()
                .map(crate::dashboard::net_link)
                .unwrap_or_else(|| "classical".into()),
            escape(b.by.as_deref().unwrap_or("?")),
            escape(&b.reason),
        );
    }
    t.push_str("</table>");
    t.push_str(&elo_history(&history));
    Ok(t)
}

/// The best net's Elo over its promotions, relative to the hand-written evaluation: each
/// promotion adds the Elo its test measured against the net it replaced; a roll-back (or a
/// promotion by hand, unmeasured) returns to that net's known level, or keeps the level.
pub(crate) fn elo_history(newest_first: &[lakefish_schemas::nets::BestNet]) -> String {
    let mut level: std::collections::HashMap<&str, f64> = std::collections::HashMap::new();
    let mut now = 0.0;
    let mut points = Vec::new();
    let mut errors = Vec::new();
    for (i, b) in newest_first.iter().rev().enumerate() {
        // Measured against the side its test played (the best when the test began); by
        // hand, against the net it replaced; nothing before it: the hand-written evaluation.
        let before = match b.against.as_deref().or(b.previous.as_deref()) {
            Some(p) => level
                .get(p)
                .copied()
                .unwrap_or(if p == "classical" { 0.0 } else { now }),
            None => 0.0,
        };
        now = match (b.elo, level.get(b.name.as_str())) {
            (Some(e), _) => before + e,
            (None, Some(&known)) => known,
            (None, None) => before,
        };
        level.insert(&b.name, now);
        points.push((i as f64 + 1.0, now));
        if let (Some(e), Some(err)) = (b.elo, b.elo_error) {
            errors.push(format!("{} {e:+.1} ± {err:.1}", b.name));
        }
    }
    let chart = crate::charts::line_chart(
        "Elo of the best net over its promotions (hand-written evaluation = 0)",
        "promotion",
        "Elo",
        &[crate::charts::Series {
            name: "best",
            color: "#2a9d3a",
            points,
        }],
        &[],
    );
    format!(
        "<h2>Elo history</h2>{chart}<p class=\"note\">Each step is the Elo its SPRT measured against the net it replaced ({}).</p>",
        if errors.is_empty() {
            "no promotion was measured yet".to_string()
        } else {
            escape(&errors.join("; "))
        }
    )
}

/// The gauntlet fields the form sends as text, and as numbers.
const GAUNTLET_TEXT: [&str; 4] = ["engine", "against", "book", "tc"];
const GAUNTLET_NUMBERS: [&str; 3] = ["pairs", "nodes", "seed"];

async fn create_gauntlet(State(s): State<AppState>, body: FormBody) -> Result<Response, PageError> {
    let form = Form::parse(&body?, true)?;
    let mut spec = form.spec(&GAUNTLET_TEXT, &GAUNTLET_NUMBERS)?;
    // `1350, 1600 2000`: UCI_Elo levels, comma- or space-separated.
    let mut levels = Vec::new();
    for v in form
        .get("levels")
        .unwrap_or("")
        .split([',', ' '])
        .filter(|v| !v.is_empty())
    {
        let n: u32 = v
            .parse()
            .map_err(|_| ApiError::BadRequest(format!("levels: {v:?} is not a UCI_Elo")))?;
        levels.push(n);
    }
    spec.insert("levels".into(), levels.into());
    let body = serde_json::json!({"kind": "gauntlet", "spec": spec});
    let spec = lakefish_schemas::JobSpec::from_request(body.to_string().as_bytes())
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let (id, _) = crate::api::admit(&s, &spec).await?;
    Ok(see(&format!("/ui/jobs/{id}")))
}

async fn new_gauntlet_page(State(s): State<AppState>) -> Page {
    let v = session::viewer();
    if !v.can(lakefish_schemas::config::Scope::Submit) {
        let body = r#"<p>Queueing a gauntlet needs a token with the submit scope: <a href="/ui/login?next=/ui/gauntlet/new">log in</a>.</p>"#;
        return Ok(layout("New gauntlet", "/ui/sprt", false, body));
    }
    let sides = side_options(&s).await?;
    let mut engines = String::new();
    for e in lakefish_jobs::engines::list(&s.lake).await? {
        let _ = write!(
            engines,
            r#"<option value="{n}">{n}</option>"#,
            n = escape(&e.name)
        );
    }
    if engines.is_empty() {
        engines =
            r#"<option value="">(no engine registered: lakefish engines add)</option>"#.into();
    }
    let body = format!(
        r#"<form method="post" action="/ui/gauntlet" class="stack">{csrf}
<datalist id="sides">{sides}</datalist>
<label>Side <input name="engine" list="sides" required size="40" value="best"></label>
<label>Against <select name="against">{engines}</select> at these <code>UCI_Elo</code> levels <input name="levels" size="24" placeholder="1350, 1600, 2000" required></label>
<label>Book <select name="book">{books}</select></label>
<fieldset><legend>Limit (one of)</legend>
<label>Time control <input name="tc" size="10" placeholder="8+0.08"></label>
<label>Nodes per move <input name="nodes" size="10" placeholder="5000"></label></fieldset>
<label>Pairs per level <input name="pairs" size="6" value="20"></label>
<label>Seed <input name="seed" size="6" value="0"></label>
<button type="submit">Queue the gauntlet</button></form>
<p>One fixed-length match per level, each stored as a test with its games; the rating is fitted on the reference's scale. The same checks as <code>POST /v1/jobs</code> with kind <code>gauntlet</code>.</p>"#,
        csrf = v.csrf_input(),
        books = book_options(&s).await?,
    );
    Ok(layout("New gauntlet", "/ui/sprt", false, &body))
}

/// The uploaded books, as form options (`lake:raw/books/...`).
async fn book_options(s: &AppState) -> Result<String, ApiError> {
    let mut books = String::new();
    for m in s.lake.list("raw/books").await? {
        let key = m.location.to_string();
        let _ = write!(
            books,
            r#"<option value="lake:{k}">{k}</option>"#,
            k = escape(&key)
        );
    }
    if books.is_empty() {
        books =
            r#"<option value="">(no book uploaded: lakefish upload --book FILE)</option>"#.into();
    }
    Ok(books)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_elo_history_adds_measured_steps_and_returns_on_a_roll_back() {
        let b = |name: &str, previous: Option<&str>, elo: Option<f64>| {
            lakefish_schemas::nets::BestNet {
                number: 0,
                name: name.into(),
                since: String::new(),
                reason: String::new(),
                by: None,
                previous: previous.map(str::to_string),
                sprt: None,
                against: None,
                elo,
                elo_error: elo.map(|_| 5.0),
            }
        };
        // Oldest last: A (+30 over classical), B (+10 over A), back to A, C (+4 over A).
        let history = [
            b("C", Some("A"), Some(4.0)),
            b("A", Some("B"), None),
            b("B", Some("A"), Some(10.0)),
            b("A", None, Some(30.0)),
        ];
        let svg = elo_history(&history);
        let titles: Vec<&str> = svg
            .split("<title>best: ")
            .skip(1)
            .map(|s| s.split('<').next().unwrap())
            .collect();
        assert_eq!(titles, ["1, 30", "2, 40", "3, 30", "4, 34"], "{svg}");
    }

    #[test]
    fn a_login_never_sends_the_browser_elsewhere() {
        assert_eq!(
            local_path(Some("/ui/jobs?state=running")),
            "/ui/jobs?state=running"
        );
        for bad in [
            "//evil.example",
            "https://evil.example",
            "/\\evil",
            "/\t/evil.example",
            "/\u{0}x",
            "",
            "ui",
        ] {
            assert_eq!(local_path(Some(bad)), "/", "{bad}");
        }
        assert_eq!(local_path(None), "/");
    }

    #[test]
    fn form_numbers_are_checked_by_field() {
        let f = Form(vec![
            ("elo1".into(), "2.5".into()),
            ("nodes".into(), "600".into()),
            ("alpha".into(), "x".into()),
        ]);
        assert_eq!(f.number("elo1").unwrap(), Some(serde_json::json!(2.5)));
        assert_eq!(f.number("nodes").unwrap(), Some(serde_json::json!(600)));
        assert_eq!(f.number("beta").unwrap(), None);
        let PageError(e) = f.number("alpha").unwrap_err();
        assert!(e.status_and_message().1.contains("alpha"));
    }
}
