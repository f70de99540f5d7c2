//! The OpenAPI document against the server it describes: schemathesis (property-based, from
//! the project venv) generates requests from `/v1/openapi.json`, valid and invalid, and checks
//! every answer: no 5xx, a documented status code and content type, a body matching the
//! documented schema.

use lakefish_tests::*;
use std::process::Command;
use std::time::Instant;

const TOKEN: &str = "fuzz-admin-token";

/// Examples per operation and phase: enough to find unhandled inputs, bounded for a loaded
/// 2-core machine (about half a minute).
const MAX_EXAMPLES: &str = "25";

#[tokio::test(flavor = "multi_thread")]
async fn schemathesis_finds_no_server_errors_or_undocumented_answers() {
    let schemathesis = workspace_root().join(".venv/bin/schemathesis");
    assert!(
        schemathesis.exists(),
        "{} missing: run `make setup` (infra/setup.sh installs schemathesis into .venv)",
        schemathesis.display()
    );
    let dir = tempfile::tempdir().unwrap();
    // A committed dataset, so listings answer with real records, not only empty lists.
    let input = binpack_input(dir.path());
    let out = Command::new(lakefish_bin())
        .args(["--lake", "lake", "ingest", "binpack"])
        .arg(&input)
        .args(["--dataset", "seeded"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_success(&out);

    // Tokens configured (401/403 are part of what is documented), and no workers: jobs the
    // fuzzer submits are recorded and queued, never run (separate workers need Redis).
    let config = format!(
        "version = 1\n[server]\nlake = \"lake\"\n[auth]\nanonymous_read = false\n\
         [[auth.tokens]]\nname = \"fuzz\"\nsha256 = \"{}\"\nscopes = [\"read\", \"submit\", \"admin\"]\n",
        lakefish_schemas::config::token_sha256(TOKEN)
    );
    std::fs::write(dir.path().join("lakefish.toml"), config).unwrap();
    let redis = Redis::start();
    let (_serve, api) = lakefish(
        &[
            "--config",
            "lakefish.toml",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--redis",
            &redis.url,
            "--no-workers",
        ],
        &[],
        dir.path(),
    );
    let api = api.unwrap();
    let doc: serde_json::Value = reqwest::Client::new()
        .get(format!("{api}/v1/openapi.json"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let operations: usize = doc["paths"]
        .as_object()
        .unwrap()
        .values()
        .map(|p| p.as_object().unwrap().len())
        .sum();

    let args = [
        "run".to_string(),
        format!("{api}/v1/openapi.json"),
        "--header".into(),
        format!("Authorization: Bearer {TOKEN}"),
        "--checks".into(),
        "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance".into(),
        "--max-examples".into(),
        MAX_EXAMPLES.into(),
        "--seed".into(),
        "1".into(),
        "--workers".into(),
        "1".into(),
        "--generation-database".into(),
        "none".into(),
        "--request-timeout".into(),
        "30".into(),
        "--no-color".into(),
    ];
    let started = Instant::now();
    // In the scratch dir: schemathesis may leave report files where it runs.
    let out = Command::new(&schemathesis)
        .args(&args)
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "schemathesis {} failed ({}):\n{stdout}\n{stderr}",
        args.join(" "),
        out.status
    );
    // Every operation was generated for, not skipped for an unreadable schema.
    // Every operation was generated for, not skipped for a schema it could not use (all but
    // the document itself, which schemathesis leaves out).
    let count = |label: &str| -> usize {
        let line = stdout.lines().find_map(|l| l.trim().strip_prefix(label));
        let n = line.and_then(|l| l.trim().split('/').next()?.trim().parse().ok());
        n.unwrap_or_else(|| panic!("no {label:?} line:\n{stdout}"))
    };
    let tested = count("Tested:");
    assert!(
        tested + 1 >= operations,
        "{tested} of {operations} tested:\n{stdout}"
    );
    eprintln!(
        "schemathesis passed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
