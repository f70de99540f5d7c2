//! The code map's "must not" column, checked against Cargo's own dependency graph
//! (`cargo tree`, offline, on the lockfile). Each rule is one line of ARCHITECTURE.md's
//! "Architecture invariant:" list; a new dependency that breaks one fails here by name.

use std::collections::BTreeSet;
use std::process::Command;

/// Every package `krate` depends on, directly or not (normal and build edges; dev-only
/// dependencies do not reach the production binary).
fn dependencies(krate: &str) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let tree = |offline: bool| {
        let mut cmd = Command::new(&cargo);
        cmd.current_dir(lakefish_tests::workspace_root())
            .args(["tree", "--locked"]);
        if offline {
            cmd.arg("--offline");
        }
        cmd.args([
            "-e",
            "normal,build",
            "--prefix",
            "none",
            "--format",
            "{p}",
            "-p",
            krate,
        ])
        .output()
        .expect("cargo runs")
    };
    // Offline first (the build has every crate it needs); online if cargo wants more.
    let mut out = tree(true);
    if !out.status.success() {
        out = tree(false);
    }
    assert!(
        out.status.success(),
        "cargo tree -p {krate}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let mut deps: BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect();
    deps.remove(krate);
    deps
}

fn assert_free_of(krate: &str, forbidden: &[&str], why: &str) {
    let deps = dependencies(krate);
    assert!(
        deps.len() > 3,
        "cargo tree found almost nothing for {krate}: {deps:?}"
    );
    let found: Vec<&&str> = forbidden.iter().filter(|f| deps.contains(**f)).collect();
    assert!(found.is_empty(), "{krate} depends on {found:?}: {why}");
}

#[test]
fn schemas_do_no_io() {
    assert_free_of(
        "lakefish-schemas",
        &[
            "tokio",
            "object_store",
            "parquet",
            "lakefish-engine",
            "lakefish-lake",
        ],
        "schemas are types only",
    );
}

#[test]
fn the_engine_knows_no_lake_and_no_runtime() {
    assert_free_of(
        "lakefish-engine",
        &[
            "tokio",
            "object_store",
            "parquet",
            "lakefish-lake",
            "lakefish-jobs",
        ],
        "the engine is chess and inference, no I/O",
    );
}

#[test]
fn the_lake_knows_no_format_but_parquet_and_no_job() {
    assert_free_of(
        "lakefish-lake",
        &[
            "sfbinpack",
            "pgn-reader",
            "lakefish-engine",
            "lakefish-ingest",
            "lakefish-jobs",
            "lakefish-train",
            "axum",
            "apalis",
            "tch",
        ],
        "the lake stores; readers and jobs build on it",
    );
}

#[test]
fn ingest_is_below_the_jobs() {
    assert_free_of(
        "lakefish-ingest",
        &["lakefish-jobs", "lakefish-train", "axum", "apalis", "tch"],
        "readers know the lake, not the jobs that drive them",
    );
}

#[test]
fn jobs_know_no_http_queue_or_libtorch() {
    assert_free_of(
        "lakefish-jobs",
        &[
            "axum",
            "apalis",
            "apalis-redis",
            "apalis-sqlite",
            "lakefish-train",
            "tch",
            "torch-sys",
            "lakefish-bench",
        ],
        "workers reach the trainer through the Trainer hook (reqwest is allowed: object_store uses it for S3)",
    );
}

#[test]
fn the_http_service_never_links_libtorch() {
    assert_free_of(
        "lakefish-services",
        &["lakefish-train", "tch", "torch-sys", "lakefish-bench"],
        "the API serves without libtorch; the binary hands workers the trainer",
    );
}

#[test]
fn the_trainer_is_the_only_libtorch_user() {
    for krate in [
        "lakefish-schemas",
        "lakefish-engine",
        "lakefish-lake",
        "lakefish-ingest",
        "lakefish-jobs",
        "lakefish-services",
        "lakefish-fuzz",
    ] {
        assert_free_of(
            krate,
            &["tch", "torch-sys"],
            "only lakefish-train links libtorch",
        );
    }
    assert!(dependencies("lakefish-train").contains("tch"));
}
