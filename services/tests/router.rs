//! The HTTP app in-process: `router(state)` answered with `oneshot`, on an in-memory lake and
//! a SQLite queue in a scratch directory. No process, no port: the handlers, the one error
//! mapping and the token check, fast.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use lakefish_schemas::config::{AuthConfig, Config, Scope, TokenConfig, token_sha256};
use lakefish_services::router;
use tower::ServiceExt;

mod common;
use common::{App, app};

/// Sends one request; returns the status, the `WWW-Authenticate` header and the body as JSON
/// (null when it is not JSON).
async fn send(
    app: &App,
    method: &str,
    uri: &str,
    body: &str,
    token: Option<&str>,
) -> (StatusCode, Option<String>, serde_json::Value) {
    let mut req = Request::builder().method(method).uri(uri);
    if method == "POST" {
        req = req.header(header::CONTENT_TYPE, "application/json");
    }
    if let Some(t) = token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let resp = router(app.state.clone())
        .oneshot(req.body(Body::from(body.to_string())).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let challenge = resp
        .headers()
        .get(header::WWW_AUTHENTICATE)
        .map(|v| v.to_str().unwrap().to_string());
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
    (status, challenge, json)
}

#[tokio::test]
async fn jobs_are_validated_recorded_and_listed() {
    let app = app(Config::default()).await;
    let (status, _, health) = send(&app, "GET", "/healthz", "", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(health["lake"], "memory");

    // Garbage is a 400 naming what is wrong, and nothing is recorded.
    for (body, says) in [
        ("not json", "not valid JSON"),
        (r#"{"kind":"nope","spec":{}}"#, "unknown job kind \"nope\""),
        (r#"{"kind":"shuffle_pile","spec":{}}"#, "unknown job kind"),
        (
            r#"{"kind":"train","spec":{"shuffle":"sh-1","features":"halfkx"}}"#,
            "halfkx",
        ),
        (
            r#"{"kind":"train","spec":{"shuffle":"sh-1","device":"tpu"}}"#,
            "tpu",
        ),
    ] {
        let (status, _, err) = send(&app, "POST", "/v1/jobs", body, None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        let msg = err["error"].as_str().unwrap();
        assert!(msg.contains(says), "{body}: {msg}");
    }
    let (_, _, listed) = send(&app, "GET", "/v1/jobs", "", None).await;
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 0);

    // A valid job is recorded as queued and can be looked up.
    let body = r#"{"kind":"mask","spec":{"dataset":"d1","definition":{"name":"quiet"}}}"#;
    let (status, _, queued) = send(&app, "POST", "/v1/jobs", body, None).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let id = queued["id"].as_str().unwrap();
    let (status, _, rec) = send(&app, "GET", &format!("/v1/jobs/{id}"), "", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (rec["state"].as_str(), rec["kind"].as_str()),
        (Some("queued"), Some("mask"))
    );
    let (_, _, listed) = send(&app, "GET", "/v1/jobs", "", None).await;
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 1);

    // Unknown ids and runs are 404s; a bad filter is a 400.
    let (status, _, _) = send(&app, "GET", "/v1/jobs/not-a-uuid", "", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, runs) = send(&app, "GET", "/v1/runs", "", None).await;
    assert_eq!(
        (status, runs["runs"].as_array().map(Vec::len)),
        (StatusCode::OK, Some(0))
    );
    let (status, _, _) = send(&app, "GET", "/v1/runs/r-1", "", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = send(&app, "GET", "/v1/jobs?state=sleeping", "", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // Garbage paging and filters are 400s naming the parameter; the record stays listed.
    for (query, says) in [
        ("after=yesterday", "cursor"),
        ("after=2026-11-25T00:00:00.000Z_..%2F..%2Fetc", "cursor"),
        ("kind=nope", "unknown job kind"),
        ("limit=many", "limit"),
    ] {
        let (status, _, err) = send(&app, "GET", &format!("/v1/jobs?{query}"), "", None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}");
        let msg = err["error"].as_str().unwrap_or_default();
        assert!(msg.contains(says), "{query}: {msg}");
    }
    // A well-formed cursor past everything is an empty last page.
    let (status, _, page) = send(
        &app,
        "GET",
        "/v1/jobs?kind=mask&limit=1&after=2000-01-01T00:00:00.000Z_01a211d5-d62f-7748-9bf5-32e25def4c0d",
        "",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(page["jobs"].as_array().unwrap().len(), 0);
    assert!(page.get("next").is_none());
    let (_, _, listed) = send(&app, "GET", "/v1/jobs?kind=mask&limit=1", "", None).await;
    assert_eq!(listed["jobs"][0]["id"], id);
}

#[tokio::test]
async fn tokens_and_scopes_are_checked_before_any_handler() {
    let config = Config {
        auth: AuthConfig {
            anonymous_read: false,
            tokens: vec![TokenConfig {
                name: "reader".into(),
                sha256: token_sha256("lf_read"),
                scopes: vec![Scope::Read],
            }],
        },
        ..Config::default()
    };
    let app = app(config).await;
    // Health checks stay open.
    let (status, _, _) = send(&app, "GET", "/healthz", "", None).await;
    assert_eq!(status, StatusCode::OK);
    // No token or an unknown one: 401 with a bearer challenge.
    for token in [None, Some("lf_guess")] {
        let (status, challenge, err) = send(&app, "GET", "/v1/jobs", "", token).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{token:?}");
        assert_eq!(challenge.as_deref(), Some("Bearer realm=\"lakefish\""));
        assert!(err["error"].is_string());
    }
    // The read token reads, but may not submit: 403 naming the scope, nothing recorded.
    let (status, _, _) = send(&app, "GET", "/v1/jobs", "", Some("lf_read")).await;
    assert_eq!(status, StatusCode::OK);
    let body = r#"{"kind":"mask","spec":{"dataset":"d1","definition":{"name":"quiet"}}}"#;
    let (status, _, err) = send(&app, "POST", "/v1/jobs", body, Some("lf_read")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        err["error"].as_str().unwrap().contains("\"submit\""),
        "{err}"
    );
    let (_, _, listed) = send(&app, "GET", "/v1/jobs", "", Some("lf_read")).await;
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 0);
}

/// The two reproductions of the hardening issue: a book or an input naming any file the
/// server can read. Both are refused at submission, naming the rule and nothing of the
/// file, and nothing is recorded or queued.
#[tokio::test]
async fn local_files_outside_the_configured_roots_are_refused_at_submission() {
    let data = tempfile::tempdir().unwrap();
    let allowed = data.path().join("games.pgn");
    std::fs::write(&allowed, "[Event \"x\"]\n\n1. e4 e5 *\n").unwrap();
    let mut config = Config::default();
    config.inputs.local_roots = vec![data.path().to_str().unwrap().to_string()];
    let app = app(config).await;

    let sprt = r#"{"new":"classical","base":"material","book":"/etc/passwd"}"#;
    let (status, _, err) = send(&app, "POST", "/v1/sprt", sprt, None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let msg = err["error"].as_str().unwrap();
    assert!(msg.contains("[inputs] local_roots"), "{msg}");
    assert!(!msg.contains("root:"), "the file leaked: {msg}");

    for input in [
        "/etc/shadow",
        "/etc/passwd",
        "../../etc/passwd",
        "games.pgn",
    ] {
        let body =
            serde_json::json!({"kind": "ingest_pgn", "spec": {"inputs": [input], "dataset": "d"}});
        let (status, _, err) = send(&app, "POST", "/v1/jobs", &body.to_string(), None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{input}");
        let msg = err["error"].as_str().unwrap();
        assert!(msg.contains("[inputs] local_roots"), "{input}: {msg}");
    }
    let (_, _, listed) = send(&app, "GET", "/v1/jobs", "", None).await;
    assert_eq!(
        listed["jobs"].as_array().unwrap().len(),
        0,
        "nothing queued"
    );

    // A file under a configured root, and lake objects, are accepted.
    for input in [allowed.to_str().unwrap(), "lake:raw/lichess/games.pgn"] {
        let body =
            serde_json::json!({"kind": "ingest_pgn", "spec": {"inputs": [input], "dataset": "d"}});
        let (status, _, _) = send(&app, "POST", "/v1/jobs", &body.to_string(), None).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{input}");
    }
}

/// Uploads above `server.max_upload_bytes` are a 413 whether the length is declared or
/// not, and leave nothing in the lake.
#[tokio::test]
async fn uploads_above_the_cap_are_refused_and_leave_nothing() {
    let mut config = Config::default();
    config.server.max_upload_bytes = Some(10);
    let app = app(config).await;
    let (status, _, _) = send(
        &app,
        "PUT",
        "/v1/raw/binpack/small.binpack",
        "0123456789",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    for (uri, declared) in [
        ("/v1/raw/binpack/big.binpack", true),
        ("/v1/raw/binpack/chunked.binpack", false),
        ("/v1/books/big.epd", true),
    ] {
        let body = "01234567890";
        let mut req = Request::builder().method("PUT").uri(uri);
        let body = if declared {
            req = req.header(header::CONTENT_LENGTH, body.len());
            Body::from(body)
        } else {
            // A stream without a length, as a chunked upload arrives.
            Body::from_stream(futures::stream::iter([
                Ok::<_, std::io::Error>(bytes::Bytes::from_static(b"012345")),
                Ok(bytes::Bytes::from_static(b"67890")),
            ]))
        };
        let resp = router(app.state.clone())
            .oneshot(req.body(body).unwrap())
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE, "{uri}");
    }
    let stored: Vec<String> = app
        .state
        .lake
        .list("raw")
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.location.to_string())
        .collect();
    assert_eq!(stored, vec!["raw/binpack/small.binpack".to_string()]);
}

/// A raw object is immutable: the same bytes again change nothing (200), other bytes are a
/// 409 that stores nothing (declared lengths refused before reading), and `?replace=true`
/// stores a new version that ingests see as another input.
#[tokio::test]
async fn raw_objects_are_immutable_unless_replaced() {
    let app = app(Config::default()).await;
    let lake = app.state.lake.clone();
    let uri = "/v1/raw/binpack/a.binpack";
    let (status, _, first) = send(&app, "PUT", uri, "first bytes", None).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert_eq!(first["created"], true);
    let (_, v1) = lake.head("raw/binpack/a.binpack").await.unwrap().unwrap();
    let (status, _, again) = send(&app, "PUT", uri, "first bytes", None).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(
        (again["created"].clone(), again["sha256"].clone()),
        (false.into(), first["sha256"].clone())
    );
    for other in ["other bytes", "first bytez", "longer than the first"] {
        let (status, _, e) = send(&app, "PUT", uri, other, None).await;
        assert_eq!(status, StatusCode::CONFLICT, "{other}: {e}");
        assert!(e["error"].as_str().unwrap().contains("replace=true"), "{e}");
    }
    // Also as a chunked stream without a declared length.
    let req = Request::builder()
        .method("PUT")
        .uri(uri)
        .body(Body::from_stream(futures::stream::iter([
            Ok::<_, std::io::Error>(bytes::Bytes::from_static(b"first byt")),
            Ok(bytes::Bytes::from_static(b"eZ")),
        ])));
    let resp = router(app.state.clone())
        .oneshot(req.unwrap())
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CONFLICT);
    assert_eq!(
        lake.get("raw/binpack/a.binpack").await.unwrap().unwrap(),
        "first bytes"
    );
    assert_eq!(
        lake.head("raw/binpack/a.binpack").await.unwrap().unwrap().1,
        v1,
        "untouched"
    );

    let (status, _, e) = send(&app, "PUT", &format!("{uri}?replace=maybe"), "x", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{e}");
    let (status, _, replaced) =
        send(&app, "PUT", &format!("{uri}?replace=true"), "second", None).await;
    assert_eq!(status, StatusCode::CREATED, "{replaced}");
    assert_eq!(
        lake.get("raw/binpack/a.binpack").await.unwrap().unwrap(),
        "second"
    );
    assert_ne!(
        lake.head("raw/binpack/a.binpack").await.unwrap().unwrap().1,
        v1,
        "a new version"
    );
    // Books follow the same rule.
    let (status, _, _) = send(
        &app,
        "PUT",
        "/v1/books/b.epd",
        "8/8/8/8/8/8/8/K1k5 w - -",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _, _) = send(&app, "PUT", "/v1/books/b.epd", "other", None).await;
    assert_eq!(status, StatusCode::CONFLICT);
}

/// JSON bodies above `server.max_body_bytes` are 413 on every route that takes one.
#[tokio::test]
async fn oversized_json_bodies_are_413() {
    let mut config = Config::default();
    config.server.max_body_bytes = Some(64);
    let app = app(config).await;
    let big = format!(
        r#"{{"new":"classical","base":"material","book":"{}"}}"#,
        "x".repeat(100)
    );
    for uri in ["/v1/jobs", "/v1/sprt"] {
        let (status, _, err) = send(&app, "POST", uri, &big, None).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{uri}: {err}");
    }
}

/// The document describes every body by a schema derived from its type: each operation has
/// a success response with content, its errors are `{"error"}`, every `$ref` resolves inside
/// `components/schemas`, and submissions list only the kinds clients may submit.
#[test]
fn the_openapi_document_describes_bodies_and_statuses() {
    let doc = lakefish_services::api::openapi_document();
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    fn refs(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                if let Some(r) = m.get("$ref").and_then(|r| r.as_str()) {
                    out.push(r.to_string());
                }
                m.values().for_each(|c| refs(c, out));
            }
            serde_json::Value::Array(a) => a.iter().for_each(|c| refs(c, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(!all.is_empty());
    for r in &all {
        let name = r
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("{r} points outside components/schemas"));
        assert!(schemas.contains_key(name), "{r} does not resolve");
    }
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for (method, op) in ops.as_object().unwrap() {
            let responses = op["responses"].as_object().unwrap();
            // A dashboard form's success is the redirect to the page that shows it.
            let form = op["requestBody"]["content"]
                .get("application/x-www-form-urlencoded")
                .is_some();
            let ok: Vec<_> = responses
                .keys()
                .filter(|s| s.starts_with('2') || (form && s.as_str() == "303"))
                .collect();
            assert!(!ok.is_empty(), "{method} {path}: no success status");
            for (status, r) in responses {
                assert!(
                    status.starts_with('3')
                        || r["content"].as_object().is_some_and(|c| !c.is_empty()),
                    "{method} {path} {status}: no content"
                );
            }
            let dashboard = path == "/" || path.starts_with("/ui/");
            if dashboard && op["x-lakefish-scope"].is_string() {
                assert!(
                    responses["401"]["content"]["text/html"].is_object(),
                    "{method} {path}: a dashboard refusal is a page"
                );
            } else if op["x-lakefish-scope"].is_string() {
                assert_eq!(
                    responses["401"]["content"]["application/json"]["schema"]["$ref"],
                    "#/components/schemas/ErrorBody",
                    "{method} {path}"
                );
            }
        }
    }
    let submit = &doc["paths"]["/v1/jobs"]["post"];
    assert_eq!(
        submit["requestBody"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/SubmitRequestInput"
    );
    assert!(submit["responses"]["202"].is_object());
    let kinds: Vec<&str> = schemas["SubmitRequestInput"]["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["properties"]["kind"]["const"].as_str())
        .collect();
    assert!(
        kinds.contains(&"ingest_binpack") && kinds.contains(&"sprt"),
        "{kinds:?}"
    );
    assert!(!kinds.contains(&"shuffle_deal"), "{kinds:?}");
    // Query strings are parameters with the types of their fields.
    let params = doc["paths"]["/v1/jobs"]["get"]["parameters"]
        .as_array()
        .unwrap();
    let limit = params.iter().find(|p| p["name"] == "limit").unwrap();
    assert_eq!(limit["in"], "query");
    assert_eq!(limit["schema"]["type"], "integer");
}

/// Errors of the router itself (an undecodable path parameter, a method a path does not
/// serve) are JSON like the handlers' errors.
#[tokio::test]
async fn undecodable_path_parameters_and_wrong_methods_answer_json() {
    let app = app(Config::default()).await;
    let (status, _, body) = send(&app, "GET", "/v1/jobs/%FF", "", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body["error"].is_string(), "{body}");
    let (status, _, body) = send(&app, "DELETE", "/v1/jobs", "", None).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(body["error"].is_string(), "{body}");
}

/// The engine registry: anyone with `read` lists it, only `admin` changes it (a registered
/// command runs on every worker), and bad specs are refused naming the field.
#[tokio::test]
async fn engines_are_registered_by_admins_only_and_checked() {
    let token = |name: &str, secret: &str, scopes: Vec<Scope>| TokenConfig {
        name: name.into(),
        sha256: token_sha256(secret),
        scopes,
    };
    let config = Config {
        auth: AuthConfig {
            anonymous_read: false,
            tokens: vec![
                token("submitter", "lf_sub", vec![Scope::Read, Scope::Submit]),
                token("admin", "lf_admin", vec![Scope::Admin]),
            ],
        },
        ..Config::default()
    };
    let app = app(config).await;
    let sf = r#"{"name":"stockfish","command":"/usr/games/stockfish","options":{"Threads":"1"}}"#;
    let (status, _, err) = send(&app, "POST", "/v1/engines", sf, Some("lf_sub")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{err}");
    assert!(
        err["error"].as_str().unwrap().contains("\"admin\""),
        "{err}"
    );
    let (status, _, body) = send(&app, "POST", "/v1/engines", sf, Some("lf_admin")).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["net_option"], "EvalFile");
    let (status, _, _) = send(&app, "POST", "/v1/engines", sf, Some("lf_admin")).await;
    assert_eq!(status, StatusCode::OK, "the same spec again");
    let other = sf.replace("\"1\"", "\"2\"");
    let (status, _, err) = send(&app, "POST", "/v1/engines", &other, Some("lf_admin")).await;
    assert_eq!(status, StatusCode::CONFLICT, "{err}");
    for (bad, says) in [
        (r#"{"name":"lakefish","command":"/bin/x"}"#, "own engine"),
        (r#"{"name":"nn-x","command":"/bin/x"}"#, "read as a net"),
        (r#"{"name":"x","command":"x"}"#, "absolute path"),
        (
            r#"{"name":"x","command":"/bin/x","cmd":1}"#,
            "unknown field",
        ),
        (
            r#"{"name":"x","command":"/bin/x","options":{"A\nquit":"1"}}"#,
            "printable",
        ),
        (r#"{"name":"x","command":"lake:engines/bin/00"}"#, "hex"),
        ("{not json", "invalid engine"),
    ] {
        let (status, _, err) = send(&app, "POST", "/v1/engines", bad, Some("lf_admin")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {err}");
        let msg = err["error"].as_str().unwrap();
        assert!(msg.contains(says), "{bad}: {msg}");
    }
    let (status, _, listed) = send(&app, "GET", "/v1/engines", "", Some("lf_sub")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(listed["builtin"], "lakefish");
    assert_eq!(listed["engines"].as_array().unwrap().len(), 1, "{listed}");
    let (status, _, one) = send(&app, "GET", "/v1/engines/stockfish", "", Some("lf_sub")).await;
    assert_eq!(
        (status, one["options"]["Threads"].as_str()),
        (StatusCode::OK, Some("1"))
    );
    let (status, _, _) = send(&app, "GET", "/v1/engines/..%2Fx", "", Some("lf_sub")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = send(&app, "DELETE", "/v1/engines/stockfish", "", Some("lf_sub")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, gone) = send(
        &app,
        "DELETE",
        "/v1/engines/stockfish",
        "",
        Some("lf_admin"),
    )
    .await;
    assert_eq!(
        (status, gone["removed"].as_bool()),
        (StatusCode::OK, Some(true))
    );
    let (status, _, _) = send(
        &app,
        "DELETE",
        "/v1/engines/stockfish",
        "",
        Some("lf_admin"),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // What sides may set is checked against the options Stockfish announces in its `uci`
    // answer: a path-valued option, a misspelled one, a range beyond the engine's, or more
    // threads than the registration's own are refused naming it.
    for (allow, says) in [
        (r#"{"Debug Log File":{}}"#, "never set a string option"),
        (r#"{"Thraeds":{}}"#, "no UCI option \"Thraeds\""),
        (r#"{"UCI_Elo":{"min":0,"max":99999}}"#, "1350..2850"),
        (r#"{"Threads":{"min":1,"max":8}}"#, "Threads=1"),
        (
            r#"{"UCI_LimitStrength":{"values":["maybe"]}}"#,
            "not one of",
        ),
    ] {
        let spec = format!(
            r#"{{"name":"sf-allow","command":"/usr/games/stockfish","options":{{"Threads":"1"}},"allow":{allow}}}"#
        );
        let (status, _, err) = send(&app, "POST", "/v1/engines", &spec, Some("lf_admin")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{allow}: {err}");
        let msg = err["error"].as_str().unwrap();
        assert!(msg.contains(says), "{allow}: {msg}");
    }
    let sf_allow = r#"{"name":"sf","command":"/usr/games/stockfish","options":{"Threads":"1"},"allow":{"Skill Level":{},"UCI_Elo":{"min":1500,"max":2000},"UCI_LimitStrength":{}}}"#;
    let (status, _, sf) = send(&app, "POST", "/v1/engines", sf_allow, Some("lf_admin")).await;
    assert_eq!(status, StatusCode::CREATED, "{sf}");
    assert_eq!(
        sf["allow"]["Skill Level"],
        serde_json::json!({"min": 0, "max": 20})
    );
    assert_eq!(
        sf["allow"]["UCI_LimitStrength"]["values"],
        serde_json::json!(["true", "false"])
    );
    assert!(sf["uci_options"].as_array().unwrap().len() > 10, "{sf}");
    for (side, want, says) in [
        (
            "sf,Debug Log File=/tmp/x",
            StatusCode::FORBIDDEN,
            "Debug Log File",
        ),
        ("sf,Threads=64", StatusCode::FORBIDDEN, "Threads"),
        ("sf,UCI_Elo=2500", StatusCode::FORBIDDEN, "1500..2000"),
        ("sf,EvalFile=/etc/passwd", StatusCode::FORBIDDEN, "EvalFile"),
        (
            "sf,Thraeds=1",
            StatusCode::BAD_REQUEST,
            "no such UCI option",
        ),
    ] {
        let body =
            format!(r#"{{"new":"{side}","base":"classical","book":"lake:raw/books/b.epd"}}"#);
        let (status, _, err) = send(&app, "POST", "/v1/sprt", &body, Some("lf_sub")).await;
        assert_eq!(status, want, "{side}: {err}");
        assert!(
            err["error"].as_str().unwrap().contains(says),
            "{side}: {err}"
        );
        let job = format!(
            r#"{{"kind":"datagen","spec":{{"net":"classical","dataset":"d","games":1,"engine":"{side}"}}}}"#
        );
        let (status, _, err) = send(&app, "POST", "/v1/jobs", &job, Some("lf_sub")).await;
        assert_eq!(status, want, "datagen {side}: {err}");
    }
    let (_, _, jobs) = send(&app, "GET", "/v1/jobs", "", Some("lf_sub")).await;
    assert_eq!(
        jobs["jobs"].as_array().unwrap().len(),
        0,
        "nothing recorded: {jobs}"
    );
    // An SPRT side naming an engine that is not registered is a 400 saying so.
    let sprt =
        r#"{"new":"stockfish+best,Threads=1","base":"classical","book":"lake:raw/books/b.epd"}"#;
    let (status, _, err) = send(&app, "POST", "/v1/sprt", sprt, Some("lf_sub")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    assert!(
        err["error"].as_str().unwrap().contains("not registered"),
        "{err}"
    );
}

/// Sends a request with the given headers (no others); returns the status and the body.
async fn send_with(
    app: &App,
    method: &str,
    uri: &str,
    body: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, serde_json::Value) {
    let mut req = Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = router(app.state.clone())
        .oneshot(req.body(Body::from(body.to_string())).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null),
    )
}

/// What a web page can send without asking (a form post, `text/plain`, no body type) never
/// reaches a JSON handler; a request from another origin, or under a host name the server
/// does not answer to (DNS rebinding), changes nothing; without tokens the routes that run
/// code on workers are off unless the operator turns them on. Nothing is recorded.
#[tokio::test]
async fn a_web_page_cannot_drive_the_api() {
    let app = app(Config::default()).await;
    let engine = r#"{"name":"sh","command":"/bin/sh","args":["-c","id > /tmp/pwned; echo uciok"]}"#;
    let job = r#"{"kind":"mask","spec":{"dataset":"d","name":"quiet"}}"#;
    for ct in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "",
    ] {
        let mut headers = vec![("host", "127.0.0.1:8080")];
        if !ct.is_empty() {
            headers.push(("content-type", ct));
        }
        for (uri, body) in [
            ("/v1/jobs", job),
            ("/v1/engines", engine),
            ("/v1/sprt", "{}"),
        ] {
            let (status, err) = send_with(&app, "POST", uri, body, &headers).await;
            // The engine route is off without tokens, before its body is read.
            let want = if uri == "/v1/engines" {
                StatusCode::FORBIDDEN
            } else {
                StatusCode::UNSUPPORTED_MEDIA_TYPE
            };
            assert_eq!(status, want, "{uri} {ct:?}: {err}");
            assert!(err["error"].is_string(), "{err}");
        }
    }
    let (status, err) = send_with(
        &app,
        "POST",
        "/v1/jobs",
        job,
        &[("content-type", "text/plain;charset=UTF-8")],
    )
    .await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(
        err["error"].as_str().unwrap().contains("application/json"),
        "{err}"
    );
    // Another origin, even with a JSON body type (which a browser would preflight).
    for origin in ["http://evil.example", "null", "http://127.0.0.1:9999"] {
        let (status, err) = send_with(
            &app,
            "POST",
            "/v1/jobs",
            job,
            &[
                ("host", "127.0.0.1:8080"),
                ("origin", origin),
                ("content-type", "application/json"),
            ],
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{origin}: {err}");
        assert!(err["error"].as_str().unwrap().contains("origin"), "{err}");
    }
    let (status, _) = send_with(
        &app,
        "POST",
        "/v1/jobs",
        job,
        &[
            ("sec-fetch-site", "cross-site"),
            ("content-type", "application/json"),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // A rebinding page's host name is refused on every route but the liveness probe,
    // reads included.
    let (status, _) = send_with(&app, "GET", "/healthz", "", &[("host", "api:8080")]).await;
    assert_eq!(status, StatusCode::OK);
    for (method, uri) in [
        ("GET", "/v1/jobs"),
        ("GET", "/"),
        ("GET", "/metrics"),
        ("POST", "/v1/jobs"),
    ] {
        let (status, err) = send_with(
            &app,
            method,
            uri,
            job,
            &[
                ("host", "attacker.example:8080"),
                ("content-type", "application/json"),
            ],
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {uri}: {err}");
        // The dashboard's refusal is a page; the API's is JSON.
        if uri != "/" {
            assert!(
                err["error"].as_str().unwrap().contains("attacker.example"),
                "{err}"
            );
        }
    }
    let (status, jobs) =
        send_with(&app, "GET", "/v1/jobs", "", &[("host", "localhost:8080")]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        jobs["jobs"].as_array().unwrap().len(),
        0,
        "nothing recorded: {jobs}"
    );
    // The same origin, with JSON, reaches the handler; the engine route stays off.
    let same = [
        ("host", "127.0.0.1:8080"),
        ("origin", "http://127.0.0.1:8080"),
        ("content-type", "application/json"),
    ];
    let (status, err) = send_with(&app, "POST", "/v1/engines", engine, &same).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{err}");
    assert!(
        err["error"]
            .as_str()
            .unwrap()
            .contains("admin_without_tokens"),
        "{err}"
    );
    let (_, listed) = send_with(&app, "GET", "/v1/engines", "", &[]).await;
    assert_eq!(listed["engines"].as_array().unwrap().len(), 0, "{listed}");
    // Names the operator configured are answered.
    let mut config = Config::default();
    config.server.allowed_hosts = Some(vec!["lake.example.org".into()]);
    let named = self::app(config).await;
    let (status, _) = send_with(
        &named,
        "GET",
        "/v1/jobs",
        "",
        &[("host", "lake.example.org")],
    )
    .await;
    assert_eq!(status, StatusCode::OK);
}

/// A JSON body holding a key twice is refused naming the key (serde would keep the last),
/// and wrongly typed fields say so instead of calling them missing.
#[tokio::test]
async fn duplicate_keys_and_wrong_types_are_named() {
    let app = app(Config::default()).await;
    for (uri, body, says) in [
        (
            "/v1/jobs",
            r#"{"kind":"train","kind":"ingest_pgn","spec":{"inputs":["lake:raw/lichess/x.pgn"],"dataset":"d"}}"#,
            "duplicate key \"kind\" in $",
        ),
        (
            "/v1/jobs",
            r#"{"kind":"mask","spec":{"dataset":"a","dataset":"b","name":"q"}}"#,
            "duplicate key \"dataset\" in $.spec",
        ),
        (
            "/v1/jobs",
            r#"{"version":-1,"kind":"mask","spec":{}}"#,
            "field \"version\" must be a whole number",
        ),
        (
            "/v1/jobs",
            r#"{"kind":5,"spec":{}}"#,
            "field \"kind\" must be a string",
        ),
        (
            "/v1/sprt",
            r#"{"new":"best","new":"classical","base":"classical","book":"lake:raw/books/b.epd"}"#,
            "duplicate key \"new\"",
        ),
        (
            "/v1/engines",
            r#"{"name":"a","name":"b","command":"/bin/x"}"#,
            "duplicate key \"name\"",
        ),
    ] {
        let mut config = Config::default();
        config.server.admin_without_tokens = Some(true);
        let app = self::app(config).await;
        let (status, _, err) = send(&app, "POST", uri, body, None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {err}");
        let msg = err["error"].as_str().unwrap();
        assert!(msg.contains(says), "{body}: {msg}");
    }
    let (_, _, jobs) = send(&app, "GET", "/v1/jobs", "", None).await;
    assert_eq!(jobs["jobs"].as_array().unwrap().len(), 0);
    // A name that can never be an engine's is not found, for DELETE as for GET.
    let mut config = Config::default();
    config.server.admin_without_tokens = Some(true);
    let admin = self::app(config).await;
    for method in ["GET", "DELETE"] {
        let (status, _, err) = send(&admin, method, "/v1/engines/%3Cx%3E", "", None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method}: {err}");
        assert!(!err["error"].as_str().unwrap().contains("payload"), "{err}");
    }
}

/// A train spec is checked at the door: an architecture that does not parse, one that does
/// not fit the feature set, or the sparse update on a GPU is a 400 naming the field, and
/// nothing is recorded or queued (before issue 36 each was a 202 that failed on a worker).
#[tokio::test]
async fn train_specs_are_checked_at_the_door() {
    let app = app(Config::default()).await;
    for (spec, says) in [
        (r#""arch":"256x3-32""#, "spec.arch: "),
        (r#""arch":"banana""#, "spec.arch: "),
        (
            r#""arch":"stockfish-15.1","features":"all768""#,
            "spec.features: ",
        ),
        (
            r#""ft_update":"sparse","device":"cuda""#,
            "spec.ft_update: ",
        ),
        (
            r#""lr_schedule":{"kind":"cosine","start":0.001,"end":-1}"#,
            "invalid spec for train: lr_schedule.end must be",
        ),
        (
            r#""lr_schedule":{"kind":"constant","value":0.001},"lr_decay":0.9"#,
            "invalid spec for train: lr_schedule replaces lr_decay",
        ),
        (
            r#""lambda_schedule":{"kind":"step","start":0.5,"gamma":0.5,"every":0}"#,
            "invalid spec for train: lambda_schedule.every",
        ),
        (
            r#""lr_schedule":{"kind":"newbob"}"#,
            "invalid spec for train: ",
        ),
        (
            r#""plateau":{"factor":1.5}"#,
            "invalid spec for train: plateau.factor",
        ),
        (
            r#""prediction_scale":-1"#,
            "invalid spec for train: prediction_scale",
        ),
        (
            r#""loss":"elmo","loss_power":2"#,
            "invalid spec for train: loss_power",
        ),
        (
            r#""mirror":true,"mirror_fraction":0.5"#,
            "invalid spec for train: mirror_fraction and mirror",
        ),
        (
            r#""optimizer":{"kind":"ranger","alpha":2}"#,
            "invalid spec for train: optimizer.alpha",
        ),
        (
            r#""net":{"version":1,"inputs":{"family":"combined","parts":[{"family":"threats"},{"family":"halfkp"}]},"transformer":{"width":64},"quantization":{"eval_scale":400}}"#,
            "spec.net.inputs.parts[1].family: halfkp is not trained in a combination",
        ),
        (
            r#""net":{"version":1,"inputs":{"family":"combined","parts":[{"family":"threats"}]},"transformer":{"width":64},"quantization":{"eval_scale":400}}"#,
            "invalid spec for train: net.inputs.parts: 1 family",
        ),
        (
            r#""net":{"version":1,"inputs":{"family":"threats"},"transformer":{"width":64},"output_buckets":{"rule":"material_count","count":8},"quantization":{"eval_scale":400}}"#,
            "invalid spec for train: net.output_buckets: ",
        ),
        (
            r#""net":{"version":1,"inputs":{"family":"threats"},"transformer":{"width":64},"quantization":{"eval_scale":400,"tensors":{"ft.threats":{"dtype":"i32","factor":127}}}}"#,
            "spec.net.quantization.tensors.\"ft.threats\"",
        ),
        (
            r#""optimizer":{"kind":"ranger"},"ft_update":"sparse""#,
            "invalid spec for train: ft_update sparse: Ranger",
        ),
        (
            r#""optimizer":{"kind":"sgd"}"#,
            "invalid spec for train: optimizer.kind: unknown variant `sgd`",
        ),
        (r#""superbatch":0"#, "invalid spec for train: superbatch"),
        (
            r#""optimizer":{"kind":"adam","eps":1}"#,
            "invalid spec for train: optimizer: unknown field `eps`",
        ),
        (
            r#""filter":{"name":"f","rules":[{"rule":"wld"}]}"#,
            "invalid spec for train: filter.rules: random-skip, wld",
        ),
        (
            r#""filter":{"name":"f","rules":[]}"#,
            "invalid spec for train: filter.rules: empty",
        ),
    ] {
        let body = format!(r#"{{"kind":"train","spec":{{"shuffle":"sh-000000000001",{spec}}}}}"#);
        let (status, _, err) = send(&app, "POST", "/v1/jobs", &body, None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{spec}: {err}");
        let msg = err["error"].as_str().unwrap();
        assert!(msg.starts_with(says), "{spec}: {msg}");
    }
    // An SPRT through POST /v1/jobs is planned at the door as through POST /v1/sprt: a book
    // that is not there is a 400 (before, a 202 and a failure on the worker).
    let sprt = r#"{"kind":"sprt","spec":{"new":"classical","base":"material","book":"lake:raw/books/missing.epd","nodes":100}}"#;
    let (status, _, err) = send(&app, "POST", "/v1/jobs", sprt, None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    assert!(
        err["error"].as_str().unwrap().contains("missing.epd"),
        "{err}"
    );
    // Transforms too, naming the field.
    for (transform, says) in [
        (
            r#""output":"d","transform":{"kind":"qsearch-leaf"}"#,
            "output: d is the dataset read",
        ),
        (
            r#""output":"e","transform":{"kind":"rescore","engine":"stockfish"}"#,
            "one of depth and nodes",
        ),
        (
            r#""output":"e","transform":{"kind":"qsearch-leaf","max_nodes":0}"#,
            "transform.max_nodes",
        ),
        (r#""output":"e","transform":{"kind":"shuffle"}"#, "shuffle"),
    ] {
        let body = format!(r#"{{"kind":"transform","spec":{{"dataset":"d",{transform}}}}}"#);
        let (status, _, err) = send(&app, "POST", "/v1/jobs", &body, None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{transform}: {err}");
        let msg = err["error"].as_str().unwrap();
        assert!(msg.contains(says), "{transform}: {msg}");
    }
    // Mask definitions too, naming the rule.
    for (definition, says) in [
        (r#"{"name":"m","rules":[]}"#, "definition.rules: empty"),
        (
            r#"{"name":"m","rules":[{"rule":"piece-count","max_skip":2}]}"#,
            "definition.rules[0]: piece-count max_skip",
        ),
        (r#"{"name":"m","rules":[{"rule":"skip-all"}]}"#, "skip-all"),
    ] {
        let body =
            format!(r#"{{"kind":"mask","spec":{{"dataset":"d","definition":{definition}}}}}"#);
        let (status, _, err) = send(&app, "POST", "/v1/jobs", &body, None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{definition}: {err}");
        let msg = err["error"].as_str().unwrap();
        assert!(msg.contains(says), "{definition}: {msg}");
    }
    let (_, _, listed) = send(&app, "GET", "/v1/jobs", "", None).await;
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 0, "{listed}");
    // A good one still goes through.
    let body = r#"{"kind":"train","spec":{"shuffle":"sh-000000000001","arch":"stockfish-15.1","features":"halfka_v2_hm"}}"#;
    let (status, _, err) = send(&app, "POST", "/v1/jobs", body, None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{err}");
    // nnue-pytorch's default input set is taken as it is written.
    let threats = r#"{"kind":"train","spec":{"shuffle":"sh-000000000001","net":{"version":1,"inputs":{"family":"combined","parts":[{"family":"threats"},{"family":"halfka_v2_hm"}]},"transformer":{"width":64},"quantization":{"eval_scale":400}}}}"#;
    let (status, _, err) = send(&app, "POST", "/v1/jobs", threats, None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{err}");
}

/// A net description in a train spec is checked at the door, naming the field inside it;
/// one the engine could not evaluate is refused by name too; a preset's and a king-bucketed
/// one are taken, the latter also with sparse updates (which refuse a described net they
/// cannot train, naming why).
#[tokio::test]
async fn net_descriptions_are_checked_at_the_door() {
    let app = app(Config::default()).await;
    let layout = "[0,1,2,3,4,4,5,5,6,6,6,6,7,7,7,7,8,8,8,8,8,8,8,8,9,9,9,9,9,9,9,9]";
    let net = |inputs: &str, width: u32| {
        format!(
            r#"{{"version":1,"inputs":{inputs},"transformer":{{"width":{width},"activation":"screlu"}},"quantization":{{"eval_scale":400.0}}}}"#
        )
    };
    let bucketed = |l: &str| format!(r#"{{"family":"king_buckets","mirror":true,"layout":{l}}}"#);
    for (net, says) in [
        (net(&bucketed("[0,1,2]"), 64), "net.inputs.layout: "),
        (
            net(
                &bucketed(&layout.replace(",9,9,9,9,9,9,9,9]", ",10,10,10,10,10,10,10,10]")),
                64,
            ),
            "bucket 9 is empty",
        ),
        (net(&bucketed(layout), 0), "net.transformer.width: "),
        (
            net(r#"{"family":"piece_square","buckets":3}"#, 64),
            "net.inputs: unknown field",
        ),
        (
            r#"{"version":1,"inputs":{"family":"piece_square"},"transformer":{"width":64,"activation":"screlu","psqt":8},"output_buckets":{"rule":"material_count","count":8},"quantization":{"eval_scale":400.0}}"#.to_string(),
            "spec.net.transformer.psqt: PSQT outputs are Stockfish's",
        ),
    ] {
        let body =
            format!(r#"{{"kind":"train","spec":{{"shuffle":"sh-000000000001","net":{net}}}}}"#);
        let (status, _, err) = send(&app, "POST", "/v1/jobs", &body, None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{net}: {err}");
        let msg = err["error"].as_str().unwrap();
        assert!(msg.contains(says), "{says}: {msg}");
    }
    let (_, _, listed) = send(&app, "GET", "/v1/jobs", "", None).await;
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 0, "{listed}");
    // The description of a preset trains as that preset.
    let body = format!(
        r#"{{"kind":"train","spec":{{"shuffle":"sh-000000000001","net":{}}}}}"#,
        net(r#"{"family":"piece_square"}"#, 64).replace("400.0", "600.0")
    );
    let (status, _, err) = send(&app, "POST", "/v1/jobs", &body, None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{err}");
    let body = |extra: &str| {
        format!(
            r#"{{"kind":"train","spec":{{"shuffle":"sh-000000000001"{extra},"net":{}}}}}"#,
            net(&bucketed(layout), 64)
        )
    };
    let (status, _, err) = send(
        &app,
        "POST",
        "/v1/jobs",
        &body(r#","ft_update":"sparse""#),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{err}");
    let crelu = format!(
        r#"{{"kind":"train","spec":{{"shuffle":"sh-000000000001","ft_update":"sparse","net":{}}}}}"#,
        net(&bucketed(layout), 64).replace("screlu", "crelu")
    );
    // Outside the fused step's shapes, sparse trains in the general step; not on CUDA.
    let (status, _, err) = send(&app, "POST", "/v1/jobs", &crelu, None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{err}");
    let cuda = crelu.replace(
        r#""ft_update":"sparse""#,
        r#""ft_update":"sparse","device":"cuda""#,
    );
    let (status, _, err) = send(&app, "POST", "/v1/jobs", &cuda, None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    let msg = err["error"].as_str().unwrap();
    assert!(
        msg.contains("spec.ft_update: sparse runs on the CPU only"),
        "{msg}"
    );
    let (status, _, err) = send(&app, "POST", "/v1/jobs", &body(""), None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{err}");
}

/// A queue that does not take a job: both submit routes answer 503 and leave nothing,
/// neither a record nor a queued job (the one rule of `queue::submit`).
#[tokio::test]
async fn a_refused_push_leaves_nothing_through_either_route() {
    let app = app(Config::default()).await;
    let (status, _, _) = send(
        &app,
        "PUT",
        "/v1/books/b.epd",
        "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -\n",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    app.state.queue.close().await;
    let job = r#"{"kind":"mask","spec":{"dataset":"d1","definition":{"name":"quiet"}}}"#;
    let (status, _, err) = send(&app, "POST", "/v1/jobs", job, None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{err}");
    assert!(err["error"].as_str().unwrap().contains("queue"), "{err}");
    let sprt = r#"{"new":"classical","base":"material","book":"lake:raw/books/b.epd","nodes":100}"#;
    let (status, _, err) = send(&app, "POST", "/v1/sprt", sprt, None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{err}");
    let (_, _, listed) = send(&app, "GET", "/v1/jobs", "", None).await;
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 0, "{listed}");
}

/// The fan-out of shuffles and SPRTs and the pipeline driver submit through the same rule:
/// a refused push is a `Retry` error and leaves no record; a job already recorded keeps its
/// record.
#[tokio::test(flavor = "multi_thread")]
async fn the_submitter_of_fanned_out_jobs_leaves_nothing_when_refused() {
    let app = app(Config::default()).await;
    let store = app.state.jobs.clone();
    let spec: lakefish_schemas::JobSpec = serde_json::from_str(
        r#"{"kind":"mask","spec":{"dataset":"d1","definition":{"name":"quiet"}}}"#,
    )
    .unwrap();
    let (queued, again) = (
        lakefish_schemas::JobId::new(),
        lakefish_schemas::JobId::new(),
    );
    let submitter = app.state.queue.submitter(store.clone());
    let s2 = submitter.clone();
    let (sp, a) = (spec.clone(), again.clone());
    tokio::task::spawn_blocking(move || s2.submit(a, sp))
        .await
        .unwrap()
        .unwrap();
    app.state.queue.close().await;
    let (sp, q) = (spec.clone(), queued.clone());
    let s3 = submitter.clone();
    let err = tokio::task::spawn_blocking(move || s3.submit(q, sp))
        .await
        .unwrap()
        .unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(
        store.get(&queued).await.unwrap().is_none(),
        "a record was left"
    );
    let (sp, a) = (spec, again.clone());
    assert!(
        tokio::task::spawn_blocking(move || submitter.submit(a, sp))
            .await
            .unwrap()
            .is_err()
    );
    assert!(
        store.get(&again).await.unwrap().is_some(),
        "the earlier record was removed"
    );
}

/// Experiments at the door: bad axes (a field the train spec does not know, an empty list, a
/// value the field refuses, one that only the engine's shapes refuse), a bad rating plan, a
/// book that is not there and an anchor that cannot play are 400s naming them, with nothing
/// recorded; a good one is queued, and `/v1/experiments` answers before and after.
#[tokio::test(flavor = "multi_thread")]
async fn experiments_are_checked_at_the_door() {
    let app = app(Config::default()).await;
    app.state
        .lake
        .put(
            "raw/books/b.epd",
            b"rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -\n".to_vec(),
        )
        .await
        .unwrap();
    let doc = |axes: &str, rating: &str| {
        format!(
            r#"{{"kind":"experiment","spec":{{"base":{{"shuffle":"sh-000000000001","arch":"32x2-8"}},"axes":{axes},"rating":{rating}}}}}"#
        )
    };
    let rating = r#"{"book":"lake:raw/books/b.epd","nodes":100,"pairs":2,"anchor":"classical"}"#;
    for (axes, rating, says) in [
        (
            r#"[{"field":"widht","values":[1,2]}]"#,
            rating,
            "axes[0].field: widht: unknown field `widht`",
        ),
        (
            r#"[{"field":"arch","values":[]}]"#,
            rating,
            "axes[0].values: empty",
        ),
        (
            r#"[{"field":"arch","values":["32x2-8","banana"]}]"#,
            rating,
            "axes[0].values[1]: ",
        ),
        (
            r#"[{"field":"lambda_start","values":[0.5,7]}]"#,
            rating,
            "axes[0].values[1]: ",
        ),
        (
            r#"[{"field":"arch","values":["32x2-8"]},{"field":"arch","values":["16x2-8"]}]"#,
            rating,
            "axes[1].field: arch is varied by axes[0] too",
        ),
        (
            "[]",
            r#"{"book":"lake:raw/books/b.epd","pairs":2}"#,
            "rating: give nodes or tc",
        ),
        (
            "[]",
            r#"{"book":"lake:raw/books/missing.epd","nodes":100,"pairs":2}"#,
            "rating.book: ",
        ),
        (
            "[]",
            r#"{"book":"lake:raw/books/b.epd","nodes":100,"pairs":2,"anchor":"nn-000000000000"}"#,
            "rating.anchor: ",
        ),
    ] {
        let (status, _, err) = send(&app, "POST", "/v1/jobs", &doc(axes, rating), None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{axes} {rating}: {err}");
        let msg = err["error"].as_str().unwrap();
        assert!(msg.contains(says), "{axes} {rating}: {msg}");
    }
    // A puzzle set that is not there, or without `bm`, is named too.
    app.state
        .lake
        .put(
            "raw/puzzles/no-bm.epd",
            b"6k1/5ppp/8/8/8/8/8/R5K1 w - -\n".to_vec(),
        )
        .await
        .unwrap();
    for (file, says) in [
        ("lake:raw/puzzles/missing.epd", "puzzles.file: "),
        (
            "lake:raw/puzzles/no-bm.epd",
            "line 1: fewer than four FEN fields and a bm",
        ),
    ] {
        let body = doc("[]", rating).replace(
            r#""rating":"#,
            &format!(r#""puzzles":{{"file":"{file}"}},"rating":"#),
        );
        let (status, _, err) = send(&app, "POST", "/v1/jobs", &body, None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{file}: {err}");
        let msg = err["error"].as_str().unwrap();
        assert!(msg.contains(says), "{file}: {msg}");
    }
    let (_, _, listed) = send(&app, "GET", "/v1/jobs", "", None).await;
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 0, "{listed}");
    let (status, _, none) = send(&app, "GET", "/v1/experiments", "", None).await;
    assert_eq!(
        (status, none["experiments"].as_array().unwrap().len()),
        (StatusCode::OK, 0)
    );
    let (status, _, _) = send(&app, "GET", "/v1/experiments/ex-000000000000", "", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = send(&app, "GET", "/v1/experiments/..%2Fnets", "", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let good = doc(r#"[{"field":"arch","values":["32x2-8","16x2-8"]}]"#, rating);
    let (status, _, queued) = send(&app, "POST", "/v1/jobs", &good, None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{queued}");
}
