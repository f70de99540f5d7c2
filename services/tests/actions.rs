//! Actions in-process (cancel, stop, promote, the dashboard's login and forms) given garbage
//! and the wrong rights: each refused naming why, nothing changed.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use lakefish_schemas::config::{AuthConfig, Config, Scope, TokenConfig, token_sha256};
use lakefish_services::router;
use tower::ServiceExt;

mod common;
use common::{App, app};

fn with_tokens() -> Config {
    let token = |name: &str, scopes: Vec<Scope>| TokenConfig {
        name: name.into(),
        sha256: token_sha256(&format!("{name}-secret")),
        scopes,
    };
    Config {
        auth: AuthConfig {
            anonymous_read: true,
            tokens: vec![
                token("ana", vec![Scope::Read, Scope::Submit]),
                token("root", vec![Scope::Admin]),
            ],
        },
        ..Config::default()
    }
}

struct Answer {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: String,
}

impl Answer {
    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

async fn send(app: &App, method: &str, uri: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
    let mut req = Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = router(app.state.clone())
        .oneshot(req.body(Body::from(body.to_vec())).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

const JSON: (&str, &str) = ("content-type", "application/json");
const FORM: (&str, &str) = ("content-type", "application/x-www-form-urlencoded");

#[tokio::test]
async fn cancels_stops_and_promotions_refuse_garbage_by_name() {
    let app = app(Config::default()).await;
    for (uri, says) in [
        ("/v1/jobs/not-a-uuid/cancel", "not found"),
        (
            "/v1/jobs/01a22039-efc3-7440-8415-cf096080c6f7/cancel",
            "not found",
        ),
        ("/v1/sprt/%FF/stop", ""),
        ("/v1/sprt/sprt-000000000000/stop", "sprt test"),
    ] {
        let a = send(&app, "POST", uri, &[], b"").await;
        assert_eq!(a.status, StatusCode::NOT_FOUND, "{uri}: {}", a.body);
        assert!(
            a.json()["error"].as_str().unwrap().contains(says),
            "{uri}: {}",
            a.body
        );
    }
    for (body, status, says) in [
        (&br#"{"name": 5}"#[..], 400, "invalid promotion"),
        (br#"{"name": "nn-000000000000"}"#, 404, "not registered"),
        (br#"{"name": "../registry/best"}"#, 400, "net"),
        (
            br#"{"name": "nn-000000000000", "by": "me"}"#,
            400,
            "unknown field",
        ),
        (b"\xff\xfe", 400, "invalid promotion"),
    ] {
        let a = send(&app, "POST", "/v1/promotions", &[JSON], body).await;
        assert_eq!(a.status.as_u16(), status, "{}", a.body);
        assert!(
            a.json()["error"].as_str().unwrap().contains(says),
            "{}",
            a.body
        );
    }
    let a = send(&app, "GET", "/v1/promotions", &[], b"").await;
    assert_eq!(
        a.json()["promotions"],
        serde_json::json!([]),
        "nothing promoted"
    );
    assert!(
        lakefish_jobs::nets::read_best(&app.state.lake)
            .await
            .unwrap()
            .is_none()
    );

    // A queued job cancelled: at once, with who; a second cancel is a conflict.
    let a = send(
        &app,
        "POST",
        "/v1/jobs",
        &[JSON],
        br#"{"kind":"datagen","spec":{"net":"classical","dataset":"d","games":10}}"#,
    )
    .await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.body);
    let id = a.json()["id"].as_str().unwrap().to_string();
    let a = send(&app, "POST", &format!("/v1/jobs/{id}/cancel"), &[], b"").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    let rec = a.json();
    assert_eq!(rec["state"], "cancelled");
    assert_eq!(rec["cancel"]["by"], "anonymous");
    let a = send(&app, "POST", &format!("/v1/jobs/{id}/cancel"), &[], b"").await;
    assert_eq!(a.status, StatusCode::CONFLICT, "{}", a.body);
    assert!(a.body.contains("is cancelled"), "{}", a.body);
}

#[tokio::test]
async fn the_dashboard_login_and_forms_check_tokens_scopes_and_csrf() {
    let app = app(with_tokens()).await;
    // An unknown token is a 401 page with the form again; a known one is a cookie for the
    // dashboard only, and the browser goes where it asked, on this server only.
    let a = send(
        &app,
        "POST",
        "/ui/login",
        &[FORM],
        b"token=nope&next=/ui/jobs",
    )
    .await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
    assert!(a.body.contains("not one this server knows") && a.body.contains("name=\"token\""));
    assert!(a.headers.get(header::SET_COOKIE).is_none());
    let a = send(
        &app,
        "POST",
        "/ui/login",
        &[FORM],
        b"token=ana-secret&next=//evil.example/",
    )
    .await;
    assert_eq!(a.status, StatusCode::SEE_OTHER);
    assert_eq!(a.headers[header::LOCATION], "/");
    let cookie = a.headers[header::SET_COOKIE].to_str().unwrap().to_string();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let session = cookie.split(';').next().unwrap().to_string();
    let as_ana = [("cookie", session.as_str()), FORM];

    // The cookie counts on the dashboard, never on the API.
    let a = send(
        &app,
        "POST",
        "/v1/promotions",
        &[("cookie", session.as_str()), JSON],
        br#"{"name":"nn-000000000000"}"#,
    )
    .await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{}", a.body);

    // The forms a submitter sees carry a CSRF value; without it, or with another, a post is
    // refused before anything happens.
    let page = send(&app, "GET", "/ui/sprt/new", &as_ana, b"").await;
    assert_eq!(page.status, StatusCode::OK);
    let csrf = page
        .body
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("the form carries a CSRF value")
        .to_string();
    for body in [
        "new=best&base=best".to_string(),
        "new=best&base=best&csrf=0123".to_string(),
    ] {
        let a = send(&app, "POST", "/ui/sprt", &as_ana, body.as_bytes()).await;
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.body);
        assert!(
            a.body.contains("CSRF") && a.body.contains("<html"),
            "{}",
            a.body
        );
    }
    // Garbage in a form with the right value: a 400 page naming the field, nothing queued.
    for (body, says) in [
        (
            format!("csrf={csrf}&new=best&base=best&book=lake:raw/books/b.epd&nodes=x"),
            "nodes",
        ),
        (
            format!("csrf={csrf}&new=%FF&base=best&book=lake:raw/books/b.epd&nodes=10"),
            "new",
        ),
        (
            format!("csrf={csrf}&base=best&book=lake:raw/books/b.epd&nodes=10"),
            "new",
        ),
    ] {
        let a = send(&app, "POST", "/ui/sprt", &as_ana, body.as_bytes()).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{body}: {}", a.body);
        assert!(a.body.contains(says), "{body}: {}", a.body);
    }
    let big = format!("csrf={csrf}&reason={}", "x".repeat(20_000));
    let a = send(&app, "POST", "/ui/sprt", &as_ana, big.as_bytes()).await;
    assert_eq!(a.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", a.body);
    assert!(app.state.jobs.list(None, 10).await.unwrap().is_empty());

    // A promotion needs admin: the submitter's own valid value does not make it one.
    let body = format!("csrf={csrf}&name=nn-000000000000");
    let a = send(&app, "POST", "/ui/promotions", &as_ana, body.as_bytes()).await;
    assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.body);
    assert!(a.body.contains("admin"), "{}", a.body);
    // A page read without a token goes to the login form when reads need one; here they
    // do not, and the anonymous visitor sees no form at all.
    let a = send(&app, "GET", "/ui/sprt/new", &[], b"").await;
    assert!(a.body.contains("needs a token") && !a.body.contains("name=\"csrf\""));
    let a = send(&app, "POST", "/ui/jobs/x/cancel", &[FORM], b"csrf=abc").await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{}", a.body);
    assert!(a.body.contains("/ui/login"), "{}", a.body);
}

#[tokio::test]
async fn a_page_read_without_a_token_leads_to_the_login() {
    let mut config = with_tokens();
    config.auth.anonymous_read = false;
    let app = app(config).await;
    let a = send(&app, "GET", "/ui/jobs?state=running", &[], b"").await;
    assert_eq!(a.status, StatusCode::SEE_OTHER);
    assert_eq!(
        a.headers[header::LOCATION],
        "/ui/login?next=%2Fui%2Fjobs%3Fstate%3Drunning"
    );
    // The login page itself is open; the API still answers JSON.
    let a = send(&app, "GET", "/ui/login?next=/ui/jobs", &[], b"").await;
    assert_eq!(a.status, StatusCode::OK);
    let a = send(&app, "GET", "/v1/jobs", &[], b"").await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
    assert!(a.json()["error"].is_string());
}

/// A dataset's page: 404 for what names no dataset; for a committed one, its inputs and a
/// button that queues a `profile` job (CSRF-checked like every form); once the profile is
/// made, its histograms and the same profile as JSON.
#[tokio::test]
async fn a_dataset_page_queues_and_then_draws_its_profile() {
    use lakefish_schemas::{DatasetName, JobSpec, ProfileSpec, Source};
    let app = app(Config::default()).await;
    for uri in [
        "/ui/datasets/nope/d",
        "/ui/datasets/bullet/d",
        "/v1/datasets/bullet/d/profile",
        "/ui/datasets/bullet/..%2Fd",
    ] {
        let a = send(&app, "GET", uri, &[], b"").await;
        assert_eq!(a.status, StatusCode::NOT_FOUND, "{uri}: {}", a.body);
    }
    let run = |spec| run_here(&app, spec);
    bullet_dataset(&app).await;

    let page = send(&app, "GET", "/ui/datasets/bullet/d", &[], b"").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("Not profiled yet") && page.body.contains("raw/bullet/d.txt"));
    let csrf = csrf_of(&page.body);
    let form = format!("csrf={csrf}");
    let a = send(&app, "POST", "/ui/datasets/bullet/d/profile", &[FORM], b"").await;
    assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.body);
    let a = send(
        &app,
        "POST",
        "/ui/datasets/bullet/e/profile",
        &[FORM],
        form.as_bytes(),
    )
    .await;
    assert_eq!(a.status, StatusCode::NOT_FOUND, "{}", a.body);
    let a = send(
        &app,
        "POST",
        "/ui/datasets/bullet/d/profile",
        &[FORM],
        form.as_bytes(),
    )
    .await;
    assert_eq!(a.status, StatusCode::SEE_OTHER, "{}", a.body);
    let job = a.headers[header::LOCATION]
        .to_str()
        .unwrap()
        .replace("/ui/jobs/", "");
    let rec = send(&app, "GET", &format!("/v1/jobs/{job}"), &[], b"").await;
    assert_eq!(rec.json()["kind"], "profile", "{}", rec.body);

    // What a worker does with it.
    run(JobSpec::Profile(ProfileSpec {
        dataset: Some(DatasetName::new("d").unwrap()),
        source: Source::Bullet,
        shuffle: None,
    }))
    .await
    .unwrap()
    .unwrap();
    let page = send(&app, "GET", "/ui/datasets/bullet/d", &[], b"").await;
    assert!(page.body.contains("Men on the board") && page.body.contains("Profile again"));
    assert!(page.body.contains("2 rows: 100.0% scored"), "{}", page.body);
    let p = send(&app, "GET", "/v1/datasets/bullet/d/profile", &[], b"").await;
    assert_eq!(p.status, StatusCode::OK);
    assert_eq!(
        (p.json()["rows"].as_u64(), p.json()["men"]["3"].as_u64()),
        (Some(2), Some(2))
    );

    // The space it takes: the dataset and its profile, each an item of its kind.
    let u = send(&app, "GET", "/v1/space", &[], b"").await.json();
    let item = |kind: &str| {
        u["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["kind"] == kind && i["name"] == "bullet/d")
            .cloned()
            .unwrap_or_default()
    };
    assert!(item("datasets")["bytes"].as_u64() > Some(0), "{u}");
    assert_eq!(item("profiles")["objects"], 1, "{u}");
    let page = send(&app, "GET", "/ui/space", &[], b"").await;
    assert!(
        page.body
            .contains(r#"<a href="/ui/datasets/bullet/d">bullet/d</a>"#),
        "{}",
        page.body
    );

    // Removed with --force under a registered net's lineage: the API lists the tombstone and
    // the net's page says what was removed, when and by whom.
    let q = serde_json::json!({"positions": 1, "mean_abs_cp": 0.0, "p99_abs_cp": 0.0, "max_abs_cp": 0.0, "mean_abs_internal": 0.0, "p99_abs_internal": 0.0});
    let net = serde_json::json!({
        "name": "nn-00000000000a.nnue", "sha256": "00", "bytes": 1, "features": "all768", "arch": "32x2-8",
        "arch_hash": "0", "description": "", "run": "run-00000000000a", "checkpoint": "step-000000020.ot",
        "step": 20, "shuffle": "sh-000000000001", "datasets": ["bullet/d"], "mask": "quiet", "parent": null,
        "quantization": q, "created": "2026-11-28T00:00:00Z"
    });
    app.state
        .lake
        .put(
            "nets/nn-00000000000a.json",
            serde_json::to_vec(&net).unwrap(),
        )
        .await
        .unwrap();
    let target = lakefish_jobs::remove::RmTarget::parse("dataset", "bullet/d").unwrap();
    let plan = lakefish_jobs::remove::plan(&app.state.lake, &app.state.jobs, &target)
        .await
        .unwrap();
    // The profile job the form queued has no worker here: it still reads the dataset.
    assert_eq!(plan.dependents.len(), 2, "{plan:?}");
    let e = lakefish_jobs::remove::apply(
        &app.state.lake,
        &app.state.jobs,
        &target,
        &plan,
        true,
        "ana",
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("in use by queued job") && e.contains("(profile)"),
        "{e}"
    );
    let id = lakefish_schemas::JobId::parse(&job).unwrap();
    lakefish_jobs::runner::cancel_job(&app.state.jobs, &id, "ana")
        .await
        .unwrap();
    let plan = lakefish_jobs::remove::plan(&app.state.lake, &app.state.jobs, &target)
        .await
        .unwrap();
    assert_eq!(plan.dependents.len(), 1, "{plan:?}");
    lakefish_jobs::remove::apply(
        &app.state.lake,
        &app.state.jobs,
        &target,
        &plan,
        true,
        "ana",
    )
    .await
    .unwrap();
    let t = send(&app, "GET", "/v1/tombstones", &[], b"").await.json();
    assert_eq!(
        (t[0]["name"].as_str(), t[0]["by"].as_str()),
        (Some("bullet/d"), Some("ana")),
        "{t}"
    );
    let page = send(&app, "GET", "/ui/nets/nn-00000000000a.nnue", &[], b"").await;
    assert!(
        page.body
            .contains("Removed since: dataset bullet/d (deleted ")
            && page.body.contains(" by ana)"),
        "{}",
        page.body
    );
    let gone = send(&app, "GET", "/ui/datasets/bullet/d", &[], b"").await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
}

/// An export job's file is its parts streamed in order; an unknown or malformed id is a 404
/// naming it.
#[tokio::test]
async fn an_export_is_downloaded_whole() {
    use lakefish_schemas::export::{ExportFormat, ExportSpec};
    use lakefish_schemas::{DatasetName, JobSpec, Source};
    let app = app(Config::default()).await;
    let run = |spec| run_here(&app, spec);
    let lines = bullet_dataset(&app).await;
    let m = run(JobSpec::Export(ExportSpec {
        dataset: Some(DatasetName::new("d").unwrap()),
        source: Source::Bullet,
        mask: None,
        shuffle: None,
        format: ExportFormat::BulletText,
    }))
    .await
    .unwrap()
    .unwrap();
    let id = m["id"].as_str().unwrap().to_string();
    let a = send(&app, "GET", &format!("/v1/exports/{id}"), &[], b"").await;
    assert_eq!(a.json()["counts"]["rows_written"], 2, "{}", a.body);
    let f = send(&app, "GET", &format!("/v1/exports/{id}/file"), &[], b"").await;
    assert_eq!(f.status, StatusCode::OK);
    assert_eq!(f.body, lines, "the bullet text it came from");
    assert!(
        f.headers[header::CONTENT_DISPOSITION]
            .to_str()
            .unwrap()
            .contains(".txt")
    );
    for (uri, says) in [
        ("/v1/exports/out-000000000000", "no export out-000000000000"),
        (
            "/v1/exports/..%2Fnets/file",
            "ids are out- and 12 hex digits",
        ),
        (
            "/v1/exports/OUT-00000000000A/file",
            "ids are out- and 12 hex digits",
        ),
    ] {
        let a = send(&app, "GET", uri, &[], b"").await;
        assert_eq!(a.status, StatusCode::NOT_FOUND, "{uri}");
        assert!(a.body.contains(says), "{uri}: {}", a.body);
    }
}

/// A shuffle's page: 404 for what names no shuffle; for a committed one, the datasets it
/// was made from and a button that queues a `profile` job of it (CSRF-checked); once
/// profiled, its histograms and the profile as JSON.
#[tokio::test]
async fn a_shuffle_page_queues_and_then_draws_its_profile() {
    use lakefish_schemas::{JobSpec, ProfileSpec, Source};
    let app = app(Config::default()).await;
    bullet_dataset(&app).await;
    let mask = JobSpec::from_request(
        br#"{"kind":"mask","spec":{"dataset":"d","source":"bullet","definition":{"name":"all","rules":[{"rule":"all"}]}}}"#,
    )
    .unwrap();
    run_here(&app, mask).await.unwrap().unwrap();
    let shuffle = JobSpec::from_request(
        br#"{"kind":"shuffle","spec":{"datasets":["d"],"source":"bullet","mask":"all","chunks":1,"seed":1}}"#,
    )
    .unwrap();
    let m = run_here(&app, shuffle).await.unwrap().unwrap();
    let id = m["id"].as_str().expect("the shuffle's id").to_string();
    for uri in [
        "/ui/shuffles/sh-000000000000".to_string(),
        "/ui/shuffles/..%2Fx".to_string(),
        format!("/v1/shuffles/{id}/profile"),
    ] {
        let a = send(&app, "GET", &uri, &[], b"").await;
        assert_eq!(a.status, StatusCode::NOT_FOUND, "{uri}: {}", a.body);
    }
    let page = send(&app, "GET", &format!("/ui/shuffles/{id}"), &[], b"").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(
        page.body.contains("Not profiled yet")
            && page
                .body
                .contains(r#"<a href="/ui/datasets/bullet/d">bullet/d</a>"#),
        "{}",
        page.body
    );
    let csrf = csrf_of(&page.body);
    let form = format!("csrf={csrf}");
    let action = format!("/ui/shuffles/{id}/profile");
    let a = send(&app, "POST", &action, &[FORM], b"").await;
    assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.body);
    let a = send(
        &app,
        "POST",
        "/ui/shuffles/sh-000000000000/profile",
        &[FORM],
        form.as_bytes(),
    )
    .await;
    assert_eq!(a.status, StatusCode::NOT_FOUND, "{}", a.body);
    let a = send(&app, "POST", &action, &[FORM], form.as_bytes()).await;
    assert_eq!(a.status, StatusCode::SEE_OTHER, "{}", a.body);
    let job = a.headers[header::LOCATION]
        .to_str()
        .unwrap()
        .replace("/ui/jobs/", "");
    let rec = send(&app, "GET", &format!("/v1/jobs/{job}"), &[], b"").await;
    assert_eq!(
        (
            rec.json()["kind"].as_str(),
            rec.json()["spec"]["spec"]["shuffle"].as_str()
        ),
        (Some("profile"), Some(id.as_str())),
        "{}",
        rec.body
    );
    run_here(
        &app,
        JobSpec::Profile(ProfileSpec {
            dataset: None,
            source: Source::Binpack,
            shuffle: Some(lakefish_schemas::names::ShuffleId::new(&id).unwrap()),
        }),
    )
    .await
    .unwrap()
    .unwrap();
    let page = send(&app, "GET", &format!("/ui/shuffles/{id}"), &[], b"").await;
    assert!(
        page.body.contains("Men on the board") && page.body.contains("2 rows: 100.0% scored"),
        "{}",
        page.body
    );
    let p = send(&app, "GET", &format!("/v1/shuffles/{id}/profile"), &[], b"").await;
    assert_eq!(p.status, StatusCode::OK);
    assert_eq!(
        (p.json()["rows"].as_u64(), p.json()["shuffle"].as_str()),
        (Some(2), Some(id.as_str()))
    );
}

/// A job run in this process against the app's lake, as a worker would run it.
fn run_here(
    app: &App,
    spec: lakefish_schemas::JobSpec,
) -> tokio::task::JoinHandle<Result<serde_json::Value, lakefish_jobs::JobError>> {
    let ctx =
        lakefish_jobs::JobContext::new(app.state.lake.clone(), tokio::runtime::Handle::current());
    tokio::task::spawn_blocking(move || {
        lakefish_jobs::runner::run_spec(&ctx, &lakefish_schemas::JobId::new(), &spec)
    })
}

/// Two positions in bullet's text, ingested as `bullet/d`; returns the text.
async fn bullet_dataset(app: &App) -> &'static str {
    use lakefish_schemas::{DatasetName, IngestSpec, JobSpec};
    let lines =
        "8/8/8/8/8/8/4P3/K6k w - - 0 30 | 120 | 1.0\n8/8/8/8/8/8/4P3/K6k b - - 0 30 | -40 | 0.5\n";
    app.state
        .lake
        .put("raw/bullet/d.txt", lines.as_bytes().to_vec())
        .await
        .unwrap();
    run_here(
        app,
        JobSpec::IngestBullet(IngestSpec {
            inputs: vec!["lake:raw/bullet/d.txt".into()],
            dataset: DatasetName::new("d").unwrap(),
            rows_per_part: 1000,
            max_game_bytes: None,
        }),
    )
    .await
    .unwrap()
    .unwrap();
    lines
}

/// The CSRF value a page's button form carries.
fn csrf_of(body: &str) -> String {
    body.split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("the button's form carries a CSRF value")
        .to_string()
}
