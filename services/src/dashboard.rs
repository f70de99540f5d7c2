//! The dashboard: server-rendered HTML pages over the same lake queries the JSON API uses.
//! No JavaScript; charts are inline SVG ([`crate::charts`]). Pages that show work in progress
//! reload themselves every few seconds.

use crate::api::{ApiError, AppState};
use crate::charts::{Level, Series, escape, line_chart};
use axum::extract::State;
use axum::response::{Html, IntoResponse, Response};
use lakefish_lake::catalog::{CatalogKind, CatalogQuery};
use lakefish_schemas::{JobRecord, JobState, SprtState, SprtStatus};
use std::fmt::Write;

/// An [`ApiError`] shown as a page rather than JSON.
#[derive(Debug)]
pub struct PageError(pub(crate) ApiError);

impl<E: Into<ApiError>> From<E> for PageError {
    fn from(e: E) -> Self {
        PageError(e.into())
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let (status, message) = self.0.status_and_message();
        let title = status.canonical_reason().unwrap_or("Error");
        let body = format!(
            r#"<h1>{status}</h1><p class="error">{}</p><p><a href="/">Back to the overview</a></p>"#,
            escape(&message)
        );
        (status, layout(title, "", false, &body)).into_response()
    }
}

pub(crate) type Page = Result<Html<String>, PageError>;

/// A refusal before any handler ran (host, origin, token): a page on dashboard routes,
/// JSON elsewhere.
pub(crate) fn refusal(path: &str, e: ApiError) -> Response {
    if crate::session::is_dashboard(path) {
        PageError(e).into_response()
    } else {
        e.into_response()
    }
}

/// A page's path parameter; one that cannot be decoded is a 404 page.
pub struct PagePath(pub(crate) String);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for PagePath {
    type Rejection = PageError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, PageError> {
        let crate::api::ApiPath(p) = crate::api::ApiPath::from_request_parts(parts, state).await?;
        Ok(PagePath(p))
    }
}

/// A page's query string; one that does not fit is a 400 page (not JSON: the route is a page).
pub struct PageQuery<T>(pub T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned + Send> axum::extract::FromRequestParts<S>
    for PageQuery<T>
{
    type Rejection = PageError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, PageError> {
        let crate::api::ApiQuery(q) =
            crate::api::ApiQuery::from_request_parts(parts, state).await?;
        Ok(PageQuery(q))
    }
}

const STYLE: &str = r#"
body{font-family:system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
nav{background:#1d3557;padding:10px 20px}nav a{color:#f1faee;margin-right:18px;text-decoration:none}
nav a.on{font-weight:bold;text-decoration:underline}nav .brand{font-weight:bold;margin-right:30px}
main{padding:16px 24px}h1{font-size:22px}h2{font-size:17px;margin-top:28px}
table{border-collapse:collapse;background:#fff;font-size:13px}td,th{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eef}td.num{text-align:right;font-variant-numeric:tabular-nums}
.state{padding:1px 6px;border-radius:3px;color:#fff;font-size:12px}
.queued{background:#888}.running{background:#1f77b4}.succeeded,.accepted{background:#2a9d3a}
.failed,.rejected{background:#c0392b}.inconclusive{background:#b8860b}
.bar{width:140px;height:10px;background:#ddd;display:inline-block;margin-right:6px}.bar span{display:block;height:100%;background:#1f77b4}
.cards{display:flex;gap:12px;flex-wrap:wrap}.card{background:#fff;border:1px solid #ddd;padding:10px 14px;min-width:120px}
.card b{display:block;font-size:22px}.error{color:#c0392b;white-space:pre-wrap}.deleted{color:#c0392b}code{font-size:12px}
.chart{border:1px solid #ddd;margin:8px 0}.warn{color:#8a5a00;border-bottom:1px dotted #8a5a00}
form.act{display:inline;margin:0 4px}nav .who{float:right;color:#f1faee}nav .who a{margin:0}
.stack label{display:block;margin:6px 0}.stack fieldset{margin:8px 0;border:1px solid #ddd}.stopped,.cancelled{background:#6c3483}
"#;

const NAV: [(&str, &str); 9] = [
    ("/", "Overview"),
    ("/ui/jobs", "Jobs"),
    ("/ui/datasets", "Datasets"),
    ("/ui/runs", "Training"),
    ("/ui/nets", "Nets"),
    ("/ui/sprt", "SPRT"),
    ("/ui/pipelines", "Pipelines"),
    ("/ui/experiments", "Experiments"),
    ("/ui/space", "Space"),
];

pub(crate) fn layout(title: &str, active: &str, refresh: bool, body: &str) -> Html<String> {
    let mut nav = String::from(r#"<span class="brand"><a href="/">lakefish</a></span>"#);
    for (href, name) in NAV {
        let class = if href == active { r#" class="on""# } else { "" };
        let _ = write!(nav, r#"<a href="{href}"{class}>{name}</a>"#);
    }
    let meta = if refresh {
        r#"<meta http-equiv="refresh" content="5">"#
    } else {
        ""
    };
    nav.push_str(&crate::ui_actions::nav_login());
    Html(format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8">{meta}<title>{t} · lakefish</title><style>{STYLE}</style></head><body><nav>{nav}</nav><main><h1>{t}</h1>{body}</main></body></html>"#,
        t = escape(title)
    ))
}

pub(crate) fn state_badge(state: &str) -> String {
    format!(r#"<span class="state {s}">{s}</span>"#, s = escape(state))
}

/// RFC 3339 timestamps shown to the second, without the offset noise.
pub(crate) fn when(t: &str) -> String {
    escape(t.get(..19).unwrap_or(t)).replace('T', " ")
}

pub(crate) fn opt_when(t: &Option<String>) -> String {
    t.as_deref().map(when).unwrap_or_default()
}

fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

pub(crate) fn progress_bar(done: u64, total: Option<u64>, unit: &str) -> String {
    match total {
        Some(t) if t > 0 => {
            let pct = (done as f64 / t as f64 * 100.0).clamp(0.0, 100.0);
            format!(
                r#"<span class="bar" title="{pct:.0}%"><span style="width:{pct:.1}%"></span></span>{done}/{t} {}"#,
                escape(unit)
            )
        }
        _ if done > 0 => format!("{done} {}", escape(unit)),
        _ => String::new(),
    }
}

/// What a job works on, from the fields its spec names (dataset, run, net...).
pub(crate) fn job_target(rec: &JobRecord) -> String {
    let v = serde_json::to_value(&rec.spec).unwrap_or_default();
    let spec = v.get("spec").unwrap_or(&v);
    let mut parts = Vec::new();
    for key in [
        "dataset", "datasets", "shuffle", "run", "new", "base", "net", "engine", "against",
    ] {
        match spec.get(key) {
            Some(serde_json::Value::String(s)) => parts.push(format!("{key}={s}")),
            Some(serde_json::Value::Array(a)) if !a.is_empty() => {
                let names: Vec<String> = a
                    .iter()
                    .map(|x| x.as_str().map(str::to_string).unwrap_or(x.to_string()))
                    .collect();
                parts.push(format!("{key}={}", names.join(",")));
            }
            _ => {}
        }
    }
    escape(&parts.join(" "))
}

pub(crate) fn jobs_table(jobs: &[JobRecord]) -> String {
    let mut t = String::from(
        "<table class=\"jobs\"><tr><th>job</th><th>kind</th><th>target</th><th>state</th><th>progress</th><th>rows</th><th>worker</th><th>created</th><th>finished</th><th>error</th></tr>",
    );
    for j in jobs {
        let _ = write!(
            t,
            r#"<tr><td><a href="/ui/jobs/{id}"><code>{sid}</code></a></td><td>{kind}</td><td>{target}</td><td>{state}</td><td>{stage} {bar}</td><td class="num">{rows}</td><td>{worker}</td><td>{created}</td><td>{finished}</td><td class="error">{error}</td></tr>"#,
            id = j.id,
            sid = short(j.id.as_str()),
            kind = escape(j.kind.as_str()),
            target = job_target(j),
            state = state_badge(j.state.as_str()),
            stage = escape(&j.progress.stage),
            bar = progress_bar(j.progress.done, j.progress.total, &j.progress.unit),
            rows = j.progress.rows,
            worker = escape(j.worker.as_deref().unwrap_or("")),
            created = when(&j.created),
            finished = opt_when(&j.finished),
            error = escape(j.error.as_deref().unwrap_or("")),
        );
    }
    t.push_str("</table>");
    t
}

pub(crate) fn sprt_table(tests: &[SprtStatus]) -> String {
    let mut t = String::from(
        "<table class=\"sprt\"><tr><th>test</th><th>new</th><th>base</th><th>played at</th><th>state</th><th>games</th><th>W/D/L</th><th>Elo</th><th>LLR</th><th>bounds</th><th>created</th></tr>",
    );
    for s in tests {
        let elo = s
            .elo
            .as_ref()
            .map(|e| format!("{:+.1} ± {:.1}", e.elo, e.elo_error))
            .unwrap_or_default();
        let _ = write!(
            t,
            r#"<tr><td><a href="/ui/sprt/{id}">{id}</a></td><td>{new}</td><td>{base}</td><td>{conditions}</td><td>{state}</td><td class="num">{games}</td><td class="num">{w}/{d}/{l}</td><td class="num">{elo}</td><td class="num">{llr:.2}</td><td class="num">[{lo:.2}, {hi:.2}]</td><td>{created}</td></tr>"#,
            id = escape(&s.id),
            new = net_link(&s.new.name),
            base = net_link(&s.base.name),
            conditions = conditions_label(&s.spec),
            state = state_badge(s.state.as_str()),
            games = s.games,
            w = s.wins,
            d = s.draws,
            l = s.losses,
            llr = s.llr,
            lo = s.lower,
            hi = s.upper,
            created = when(&s.created),
        );
    }
    t.push_str("</table>");
    t
}

/// Where a test's games were played: the time control, or the node limit marked as saying
/// nothing about strength on the clock.
fn conditions_label(spec: &lakefish_schemas::SprtSpec) -> String {
    if spec.on_the_clock() {
        escape(&spec.conditions())
    } else {
        format!(
            r#"<span class="warn" title="a node-limited test: a net that halves the search speed still wins it">{}</span>"#,
            escape(&spec.conditions())
        )
    }
}

/// Registered nets link to their page; `classical` and the like are plain text.
/// Games each side lost by a fault, per engine (fastchess's match-integrity counts).
fn integrity_table(st: &SprtStatus) -> String {
    let mut t = String::from(
        "<h3>Match integrity</h3><table class=\"integrity\"><tr><th>side</th><th>engine</th><th>illegal moves</th><th>time forfeits</th><th>crashes</th><th>stalls</th><th>unresponsive</th></tr>",
    );
    for (label, side, i) in [
        ("new", &st.new, &st.new_incidents),
        ("base", &st.base, &st.base_incidents),
    ] {
        let engine = side
            .engine
            .as_deref()
            .unwrap_or(lakefish_schemas::engines::BUILTIN_ENGINE);
        t.push_str(&format!(
            r#"<tr><td>{label}</td><td>{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td></tr>"#,
            escape(engine),
            i.illegal_moves,
            i.time_forfeits,
            i.crashes,
            i.stalls,
            i.unresponsive
        ));
    }
    t.push_str("</table>");
    t
}

/// What a test was played under: time control or nodes, book, bounds, error rates, batches.
fn sprt_conditions(st: &SprtStatus) -> String {
    let s = &st.spec;
    let rows = [
        ("played at", conditions_label(s)),
        ("book", escape(&s.book)),
        (
            "bounds",
            format!("[{}, {}] Elo, {} model", s.elo0, s.elo1, escape(&s.model)),
        ),
        ("α / β", format!("{} / {}", s.alpha, s.beta)),
        (
            "pairs",
            format!(
                "{} a batch, at most {}, {} batch(es) at once",
                s.batch_pairs, s.max_pairs, s.concurrency
            ),
        ),
        ("seed", s.seed.to_string()),
        ("created", when(&st.created)),
        ("finished", opt_when(&st.finished)),
        (
            "duration",
            st.finished
                .as_deref()
                .and_then(|f| lakefish_schemas::pipeline::seconds_between(&st.created, f))
                .map(lakefish_schemas::pipeline::duration_text)
                .unwrap_or_default(),
        ),
        (
            "stopped by",
            st.stopped
                .as_ref()
                .map(|r| format!("{} at {}", escape(&r.by), when(&r.at)))
                .unwrap_or_default(),
        ),
    ];
    let mut t = String::from("<h3>Conditions</h3><table class=\"conditions\">");
    for (k, v) in rows.into_iter().filter(|(_, v)| !v.is_empty()) {
        let _ = write!(t, "<tr><th>{k}</th><td>{v}</td></tr>");
    }
    t.push_str("</table>");
    t
}

/// Every counted game: its round, sides, result, how it ended and its length, each with its
/// PGN to download.
/// Games listed on a test's page.
const GAMES_SHOWN: usize = 200;

fn games_table(id: &str, games: &[lakefish_jobs::sprt::GameRow]) -> String {
    if games.is_empty() {
        return "<h3>Games</h3><p>No games counted yet.</p>".into();
    }
    // A long test's page lists its newest games; every game stays a download away.
    let first = games.len().saturating_sub(GAMES_SHOWN);
    let shown = if first > 0 {
        format!(", the newest {GAMES_SHOWN} listed")
    } else {
        String::new()
    };
    let mut t = format!(
        r#"<h3>Games</h3><p>{} games{shown} · <a href="/v1/sprt/{id}/pgn" download>all as PGN</a></p><table class="games"><tr><th>#</th><th>round</th><th>white</th><th>black</th><th>result</th><th>ended by</th><th>plies</th><th>PGN</th></tr>"#,
        games.len(),
        id = escape(id)
    );
    for (i, g) in games.iter().enumerate().skip(first).rev() {
        let _ = write!(
            t,
            r#"<tr><td class="num">{n}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class="num">{}</td><td><a href="/ui/sprt/{id}/games/{n}" download>PGN</a></td></tr>"#,
            escape(&g.round),
            escape(&g.white),
            escape(&g.black),
            escape(&g.result),
            if g.termination.is_empty() {
                "the board".to_string()
            } else {
                escape(&g.termination)
            },
            g.plies.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
            n = i + 1,
            id = escape(id)
        );
    }
    t.push_str("</table>");
    t
}

/// `GET /ui/sprt/{id}/games/{n}`: game n (from 1) of a test's counted games as a PGN file.
pub async fn sprt_game(
    State(s): State<AppState>,
    path: Result<crate::api::ApiPath<(String, String)>, ApiError>,
) -> Result<Response, PageError> {
    let crate::api::ApiPath((id, n)) = path?;
    let unknown = || ApiError::NotFound(format!("no game {n:?} in sprt test {id:?}"));
    let sid: lakefish_schemas::names::SprtId = id.parse().map_err(|_| unknown())?;
    let index: usize = n.parse().ok().filter(|&i| i >= 1).ok_or_else(unknown)?;
    let pgn = lakefish_jobs::sprt::pgn(&s.lake, &sid)
        .await?
        .ok_or_else(unknown)?;
    let game = lakefish_jobs::sprt::games_of(&pgn)
        .into_iter()
        .nth(index - 1)
        .ok_or_else(unknown)?;
    let headers = [
        (
            axum::http::header::CONTENT_TYPE,
            "application/x-chess-pgn".to_string(),
        ),
        (
            axum::http::header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"{sid}-game-{index}.pgn\""),
        ),
    ];
    Ok((headers, game.text).into_response())
}

/// A run's steps with how long each took (a running one: so far), and their sum.
fn step_times(run: &lakefish_schemas::pipeline::PipelineRun, now: &str) -> String {
    use lakefish_schemas::pipeline::duration_text;
    let mut total = 0.0;
    let mut parts = Vec::new();
    for t in &run.steps {
        let secs = t.seconds(now).unwrap_or(0.0);
        total += secs;
        parts.push(format!(
            "{} {}{}",
            escape(t.step.as_str()),
            duration_text(secs),
            if t.finished.is_none() { "…" } else { "" }
        ));
    }
    if parts.is_empty() {
        return String::new();
    }
    format!("{} <b>= {}</b>", parts.join(" · "), duration_text(total))
}

pub(crate) fn net_link(name: &str) -> String {
    if name.starts_with("nn-") {
        format!(r#"<a href="/ui/nets/{n}">{n}</a>"#, n = escape(name))
    } else {
        escape(name)
    }
}

pub(crate) fn run_link(id: &str) -> String {
    format!(r#"<a href="/ui/runs/{i}">{i}</a>"#, i = escape(id))
}

pub(crate) fn shuffle_link(id: &str) -> String {
    format!(
        r#"<a href="{}"><code>{}</code></a>"#,
        escape(&crate::dataset_page::shuffle_href(id)),
        escape(id)
    )
}

pub async fn overview(State(s): State<AppState>) -> Page {
    let tally = s.jobs.tally().await?;
    let jobs = s.jobs.list(None, 10).await?;
    let datasets = lakefish_lake::datasets::list_datasets(&s.lake).await?;
    // Counts from the catalogue's aggregate when there is one; the lake's lists otherwise.
    let (runs, nets, tests_count) = match s.lake.catalog() {
        Some(catalog) => {
            let counts = catalog.0.counts().await?;
            let of = |k: CatalogKind| {
                counts
                    .iter()
                    .find(|(kind, _)| *kind == k)
                    .map_or(0, |(_, n)| *n as usize)
            };
            (
                of(CatalogKind::Run),
                of(CatalogKind::Net),
                of(CatalogKind::Sprt),
            )
        }
        None => (
            lakefish_jobs::nets::list_runs(&s.lake).await?.len(),
            lakefish_jobs::nets::list_nets(&s.lake).await?.len(),
            lakefish_jobs::sprt::list(&s.lake, None, None).await?.len(),
        ),
    };
    let mut recent = CatalogQuery::all(CatalogKind::Sprt);
    recent.limit = 5;
    let tests = lakefish_jobs::catalog::page(
        &s.lake,
        &recent,
        lakefish_jobs::sprt::list(&s.lake, None, None),
        |t| (t.created.clone(), t.id.to_string()),
    )
    .await?
    .items;
    let best = lakefish_jobs::nets::read_best(&s.lake).await?;
    let mut b = String::from(r#"<div class="cards">"#);
    for st in JobState::ALL {
        let n: u64 = tally
            .iter()
            .filter(|t| t.state == st)
            .map(|t| t.count)
            .sum();
        let _ = write!(
            b,
            r#"<div class="card">jobs {}<b>{n}</b></div>"#,
            st.as_str()
        );
    }
    let rows: u64 = datasets.iter().map(|d| d.rows).sum();
    let _ = write!(
        b,
        r#"<div class="card">datasets<b>{}</b>{rows} rows</div><div class="card">training runs<b>{runs}</b></div><div class="card">nets<b>{nets}</b></div><div class="card">SPRT tests<b>{tests_count}</b></div></div>"#,
        datasets.len(),
    );
    match &best {
        Some(bn) => {
            let _ = write!(
                b,
                r#"<p id="best">Best net: {} since {} ({})</p>"#,
                net_link(&bn.name),
                when(&bn.since),
                escape(&bn.reason)
            );
        }
        None => b.push_str(
            r#"<p id="best">No best net yet: SPRTs play against the hand-written evaluation.</p>"#,
        ),
    }
    b.push_str("<h2>Recent jobs</h2>");
    b.push_str(&jobs_table(&jobs));
    if !tests.is_empty() {
        b.push_str("<h2>Recent SPRT tests</h2>");
        b.push_str(&sprt_table(&tests));
    }
    let busy = tally.iter().any(|t| !t.state.is_final() && t.count > 0);
    Ok(layout("Overview", "/", busy, &b))
}

pub async fn run(State(s): State<AppState>, PagePath(id): PagePath) -> Page {
    let unknown = || ApiError::NotFound(format!("training run {id:?} not found"));
    let id: lakefish_schemas::names::RunId = id.parse().map_err(|_| unknown())?;
    let lakefish_jobs::nets::RunWithMetrics { run: r, metrics } =
        lakefish_jobs::nets::run_with_metrics(&s.lake, &id)
            .await?
            .ok_or_else(unknown)?;
    let series = |pick: fn(&lakefish_jobs::nets::MetricsPoint) -> Option<f64>| -> Vec<(f64, f64)> {
        metrics
            .iter()
            .filter_map(|m| Some((m.step as f64, pick(m)?)))
            .collect()
    };
    let mut levels = Vec::new();
    if let Some(m) = r.material_val_loss {
        levels.push(Level {
            label: "material-only val loss",
            y: m,
            color: "#999",
        });
    }
    let chart = crate::charts::log_chart(
        "Training and validation loss",
        "step",
        "loss",
        &[
            Series {
                name: "train loss",
                color: "#1f77b4",
                points: series(|m| Some(m.train_loss)),
            },
            Series {
                name: "validation loss",
                color: "#d62728",
                points: series(|m| m.val_loss),
            },
        ],
        &levels,
    );
    let speed = line_chart(
        "Training speed",
        "step",
        "positions/s",
        &[Series {
            name: "positions/s",
            color: "#2a9d3a",
            points: series(|m| Some(m.positions_per_s)),
        }],
        &[],
    );
    let mut b = format!(
        r#"<p>Shuffle {}, {} {}, device {}, epoch {}, step {}, {} training and {} validation positions; {}.</p>"#,
        shuffle_link(r.spec.shuffle.as_str()),
        escape(&r.spec.net_label().0),
        escape(&r.spec.net_label().1),
        escape(&r.device),
        r.epoch,
        r.step,
        r.train_positions,
        r.val_positions,
        match (&r.error, r.finished) {
            (Some(e), false) => format!("failed: <span class=\"error\">{}</span>", escape(e)),
            _ => r.state().to_string(),
        }
    );
    if let Some(init) = &r.spec.init_from {
        let _ = write!(
            b,
            "<p>Warm start from run {} step {}.</p>",
            run_link(&init.run),
            init.step
        );
    }
    b.push_str(&chart);
    b.push_str(&speed);
    // Each checkpoint with the nets registered from it.
    let nets = lakefish_jobs::nets::list_nets(&s.lake).await?;
    let mut cps = String::from(
        "<table class=\"checkpoints\"><tr><th>checkpoint</th><th>nets made from it</th></tr>",
    );
    for cp in &r.checkpoints {
        let made: Vec<String> = nets
            .iter()
            .filter(|n| n.run == id.as_str() && &n.checkpoint == cp)
            .map(|n| net_link(&n.name))
            .collect();
        let _ = write!(
            cps,
            "<tr><td>{}</td><td>{}</td></tr>",
            escape(cp),
            made.join(", ")
        );
    }
    cps.push_str("</table>");
    let _ = write!(
        b,
        r#"<h2>Checkpoints</h2>{cps}<p><a href="/ui/runs/compare?run={id}">Compare with other runs</a></p><h2>Spec</h2><pre>{}</pre>"#,
        escape(&serde_json::to_string_pretty(&r.spec).unwrap_or_default())
    );
    Ok(layout(
        &format!("Training run {id}"),
        "/ui/runs",
        !r.finished,
        &b,
    ))
}

pub async fn net(State(s): State<AppState>, PagePath(name): PagePath) -> Page {
    // `best` resolves as in the API: the best net's page (a 404 before any promotion).
    let name = lakefish_jobs::nets::resolve_net_name(&s.lake, &name).await?;
    let m = lakefish_jobs::nets::read_net(&s.lake, &name)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("net {name} is not registered")))?;
    // Lineage: the parent chain up to the first net (bounded, in case of a cycle), and the
    // nets trained from this one.
    let mut chain = vec![m.name.clone()];
    let mut parent = m.parent.clone();
    while let Some(p) = parent.filter(|_| chain.len() < 50) {
        if chain.contains(&p) {
            break;
        }
        chain.push(p.clone());
        parent = match lakefish_jobs::nets::read_net(&s.lake, &p).await? {
            Some(pm) => pm.parent,
            None => None,
        };
    }
    let all = lakefish_jobs::nets::list_nets(&s.lake).await?;
    let children: Vec<String> = all
        .iter()
        .filter(|n| n.parent.as_deref() == Some(m.name.as_str()))
        .map(|n| net_link(&n.name))
        .collect();
    let tests = lakefish_jobs::sprt::list(&s.lake, Some(&m.name), None).await?;
    let mut b = format!(
        r#"<p>{} {}, {} bytes, sha256 <code>{}</code>. <a href="/v1/nets/{n}/file">Download</a></p><p>Trained in run {} (checkpoint {}, step {}) on shuffle {} of {} with mask {}.</p><p>Quantization error on {} positions: mean {:.2} cp, max {:.2} cp.</p>"#,
        escape(&m.features),
        escape(&m.arch),
        m.bytes,
        escape(&m.sha256),
        run_link(&m.run),
        escape(&m.checkpoint),
        m.step,
        shuffle_link(&m.shuffle),
        escape(&m.datasets.join(", ")),
        escape(&m.mask),
        m.quantization.positions,
        m.quantization.mean_abs_cp,
        m.quantization.max_abs_cp,
        n = escape(&m.name),
    );
    let removed = lakefish_jobs::remove::lineage_tombstones(&s.lake, &m).await?;
    if !removed.is_empty() {
        let list: Vec<String> = removed
            .iter()
            .map(|t| {
                format!(
                    "{} {} (deleted {} by {})",
                    escape(&t.kind),
                    escape(&t.name),
                    when(&t.deleted),
                    escape(&t.by)
                )
            })
            .collect();
        let _ = write!(
            b,
            r#"<p class="deleted">Removed since: {}.</p>"#,
            list.join("; ")
        );
    }
    let lineage: Vec<String> = chain.iter().map(|n| net_link(n)).collect();
    let _ = write!(
        b,
        r#"<h2>Lineage</h2><p class="lineage">{}</p><p>Children: {}</p>"#,
        lineage.join(" ← "),
        if children.is_empty() {
            "none".into()
        } else {
            children.join(", ")
        }
    );
    b.push_str("<h2>SPRT tests</h2>");
    b.push_str(&sprt_table(&tests));
    Ok(layout(&format!("Net {}", m.name), "/ui/nets", false, &b))
}

pub async fn sprt(State(s): State<AppState>, PagePath(id): PagePath) -> Page {
    let unknown = || ApiError::NotFound(format!("sprt test {id:?} not found"));
    let id: lakefish_schemas::names::SprtId = id.parse().map_err(|_| unknown())?;
    let (st, pgn) = lakefish_jobs::sprt::status_and_pgn(&s.lake, &id)
        .await?
        .ok_or_else(unknown)?;
    // LLR after each counted batch, against games played so far.
    let per_batch = st.games as f64 / st.batches.max(1) as f64;
    let mut points = vec![(0.0, 0.0)];
    points.extend(
        st.llr_history
            .iter()
            .enumerate()
            .map(|(i, llr)| ((i + 1) as f64 * per_batch, *llr)),
    );
    let upper = format!("accept H1 {:.2}", st.upper);
    let lower = format!("accept H0 {:.2}", st.lower);
    let chart = line_chart(
        &format!(
            "LLR ({} model, elo0 {}, elo1 {})",
            st.model, st.elo0, st.elo1
        ),
        "games",
        "LLR",
        &[Series {
            name: "LLR",
            color: "#1f77b4",
            points,
        }],
        &[
            Level {
                label: &upper,
                y: st.upper,
                color: "#2a9d3a",
            },
            Level {
                label: &lower,
                y: st.lower,
                color: "#c0392b",
            },
        ],
    );
    let elo = st
        .elo
        .as_ref()
        .map(|e| {
            format!(
                "Elo {:+.1} ± {:.1} (95%), normalized Elo {:+.1} ± {:.1}, LOS {:.1}%",
                e.elo,
                e.elo_error,
                e.nelo,
                e.nelo_error,
                e.los * 100.0
            )
        })
        .unwrap_or_else(|| "no games counted yet".into());
    let p = st.penta;
    let games = lakefish_jobs::sprt::games_of(&pgn);
    let stop = if st.state == SprtState::Running {
        crate::ui_actions::button(&format!("/ui/sprt/{}/stop", st.id), "Stop this test", &[])
    } else {
        String::new()
    };
    let b = format!(
        r#"<p>{} vs {}, played at {}: {} {stop} &nbsp; LLR <b>{:.3}</b> in [{:.3}, {:.3}] after {} games ({} batches).</p><p>W/D/L {}/{}/{} &nbsp; pentanomial [{}, {}, {}, {}, {}]</p><p>{}</p>{chart}{conditions}{integrity}{games}<p><a href="/v1/sprt/{id}">JSON</a></p>"#,
        net_link(&st.new.name),
        net_link(&st.base.name),
        conditions_label(&st.spec),
        state_badge(st.state.as_str()),
        st.llr,
        st.lower,
        st.upper,
        st.games,
        st.batches,
        st.wins,
        st.draws,
        st.losses,
        p[0],
        p[1],
        p[2],
        p[3],
        p[4],
        escape(&elo),
        id = escape(&st.id),
        conditions = sprt_conditions(&st),
        integrity = integrity_table(&st),
        games = games_table(&st.id, &games),
    );
    Ok(layout(
        &format!("SPRT {}", st.id),
        "/ui/sprt",
        st.state == SprtState::Running,
        &b,
    ))
}

pub async fn pipelines(State(s): State<AppState>) -> Page {
    let mut b = String::new();
    let mut busy = false;
    if s.config.pipelines.is_empty() {
        b.push_str(
            "<p>No pipelines configured (see <code>[pipelines.NAME]</code> in lakefish.toml).</p>",
        );
    }
    for (name, p) in &s.config.pipelines {
        let runs = lakefish_jobs::pipeline::list_runs(&s.lake, name, 20).await?;
        let next = p
            .schedule
            .as_deref()
            .and_then(crate::scheduler::next_time)
            .unwrap_or_else(|| "runs only when triggered".into());
        let gate = p
            .sprt_spec("best", "best")
            .map(|spec| conditions_label(&spec))
            .unwrap_or_else(|e| escape(&e));
        let _ = write!(
            b,
            r#"<h2>{}</h2><p>Schedule: <code>{}</code>; next: {}. Promotion gate: an SPRT played at {gate}. {}</p>"#,
            escape(name),
            escape(p.schedule.as_deref().unwrap_or("none")),
            escape(&next),
            crate::ui_actions::button(&format!("/ui/pipelines/{name}/run"), "Run now", &[]),
        );
        if runs.is_empty() {
            b.push_str("<p>No runs yet.</p>");
            continue;
        }
        b.push_str("<table class=\"pipeline-runs\"><tr><th>run</th><th>trigger</th><th>state</th><th>step</th><th>net</th><th>SPRT</th><th>promoted</th><th>started</th><th>finished</th><th>steps (time each)</th><th>error</th></tr>");
        let now = lakefish_lake::records::now();
        for r in &runs {
            busy |= r.finished.is_none();
            let sprt = match (&r.sprt, &r.sprt_state) {
                (Some(id), st) => format!(
                    r#"<a href="/ui/sprt/{i}">{i}</a> {}"#,
                    st.as_deref().map(state_badge).unwrap_or_default(),
                    i = escape(id)
                ),
                _ => String::new(),
            };
            let state = serde_json::to_value(r.state)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let _ = write!(
                b,
                r#"<tr><td><a href="/v1/pipelines/{p}/runs/{i}">{i}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{sprt}</td><td>{}</td><td>{}</td><td>{}</td><td class="steps">{}</td><td class="error">{}</td></tr>"#,
                escape(&r.trigger),
                state_badge(&state),
                escape(r.step.as_str()),
                r.net.as_deref().map(net_link).unwrap_or_default(),
                if r.promoted { "yes" } else { "no" },
                when(&r.created),
                opt_when(&r.finished),
                step_times(r, &now),
                escape(r.error.as_deref().unwrap_or("")),
                p = escape(name),
                i = escape(&r.id),
            );
        }
        b.push_str("</table>");
    }
    Ok(layout("Pipelines", "/ui/pipelines", busy, &b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_bar_shows_fraction_and_clamps() {
        let b = progress_bar(50, Some(200), "rows");
        assert!(
            b.contains("width:25.0%") && b.contains("50/200 rows"),
            "{b}"
        );
        assert!(progress_bar(300, Some(200), "rows").contains("width:100.0%"));
        assert_eq!(progress_bar(0, None, "rows"), "");
        assert_eq!(progress_bar(7, None, "bytes"), "7 bytes");
    }

    #[test]
    fn only_registered_names_link_and_text_is_escaped() {
        assert!(net_link("nn-0123456789ab.nnue").starts_with("<a href=\"/ui/nets/"));
        assert_eq!(net_link("classical"), "classical");
        assert_eq!(net_link("<x>"), "&lt;x&gt;");
        assert_eq!(when("2026-11-23T11:19:42.123456Z"), "2026-11-23 11:19:42");
    }

    #[test]
    fn step_times_add_up_and_a_running_step_counts_until_now() {
        use lakefish_schemas::pipeline::duration_text;
        assert_eq!(duration_text(75.4), "1 min 15 s");
        assert_eq!(duration_text(7261.0), "2 h 1 min");
        assert_eq!(duration_text(-3.0), "0 s");
        let mut run: lakefish_schemas::pipeline::PipelineRun =
            serde_json::from_value(serde_json::json!({
                "id": "p-20261127T000000", "pipeline": "p", "trigger": "manual",
                "state": "running", "step": "ingest", "jobs": [], "datasets": [],
                "shuffle": null, "train_run": null, "checkpoint": null, "net": null,
                "base": null, "sprt": null, "sprt_state": null, "promoted": false,
                "error": null, "created": "t", "updated": "t", "finished": null
            }))
            .unwrap();
        assert_eq!(step_times(&run, "2026-11-27T00:00:00Z"), "");
        run.begin_step("2026-11-27T00:00:00Z");
        run.end_step("2026-11-27T00:00:12.500Z");
        run.step = run.step.next();
        run.begin_step("2026-11-27T00:00:13Z");
        assert_eq!(
            step_times(&run, "2026-11-27T00:01:13Z"),
            "ingest 13 s · mask 1 min 0 s… <b>= 1 min 13 s</b>"
        );
    }
}
