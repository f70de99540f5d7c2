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

/// Test starters, scratch directories and benchmarks stay out of what ships: the `lakefish`
/// binary and every library it links (issue 36).
#[test]
fn the_production_binary_links_no_test_or_bench_code() {
    for krate in [
        "lakefish-cli",
        "lakefish-services",
        "lakefish-jobs",
        "lakefish-train",
        "lakefish-metastore",
        "lakefish-ingest",
        "lakefish-lake",
    ] {
        assert_free_of(
            krate,
            &["lakefish-testkit", "tempfile", "lakefish-bench"],
            "tests and benchmarks have crates and a binary of their own (lakefish-bench)",
        );
    }
}

#[test]
fn the_metastore_knows_no_http_queue_job_or_format() {
    assert_free_of(
        "lakefish-metastore",
        &[
            "axum",
            "apalis",
            "lakefish-jobs",
            "lakefish-ingest",
            "lakefish-train",
            "sfbinpack",
            "pgn-reader",
            "tch",
        ],
        "it stores records and the catalogue; job kinds and formats live above it",
    );
}

#[test]
fn the_testkit_depends_on_no_lakefish_crate() {
    let deps = dependencies("lakefish-testkit");
    let ours: Vec<&String> = deps.iter().filter(|d| d.starts_with("lakefish")).collect();
    assert!(ours.is_empty(), "lakefish-testkit depends on {ours:?}");
}

#[test]
fn the_benchmarks_are_used_by_no_crate() {
    // Every workspace crate but the bench itself and the test crates that run it.
    for krate in [
        "lakefish-schemas",
        "lakefish-engine",
        "lakefish-lake",
        "lakefish-metastore",
        "lakefish-ingest",
        "lakefish-jobs",
        "lakefish-train",
        "lakefish-services",
        "lakefish-cli",
        "lakefish-fuzz",
        "lakefish-testkit",
    ] {
        assert!(
            !dependencies(krate).contains("lakefish-bench"),
            "{krate} depends on lakefish-bench"
        );
    }
}
