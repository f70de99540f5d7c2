//! The pipeline driver on a run whose step can never succeed: the run ends `failed` with
//! the reason, instead of staying `running` and being retried forever.

use lakefish_jobs::pipeline::{advance, list_runs, start_run};
use lakefish_jobs::{JobContext, Lake};
use lakefish_schemas::config::Config;
use lakefish_schemas::pipeline::RunState;

const CONFIG: &str = r#"
version = 1
[pipelines.p]
[[pipelines.p.inputs]]
source = "binpack"
prefix = "raw/binpack/"
[pipelines.p.shuffle]
chunks = 2
[pipelines.p.train]
[pipelines.p.sprt]
book = "lake:raw/books/openings.epd"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_that_fails_for_good_fails_the_run() {
    let config = Config::parse("p.toml", CONFIG, std::iter::empty()).unwrap();
    let pipeline = config.pipelines["p"].clone();
    let lake = Lake::in_memory();
    // A raw file, so the ingest step has a job to queue.
    lake.put("raw/binpack/a.binpack", b"x".to_vec())
        .await
        .unwrap();
    let (mut run, _) = start_run(&lake, "p", "manual").await.unwrap();
    // No submitter: this context cannot queue jobs, which no retry will ever change.
    let ctx = JobContext::new(lake.clone(), tokio::runtime::Handle::current());
    let outcome = tokio::task::spawn_blocking(move || {
        let r = advance(&ctx, &pipeline, &mut run);
        (r, run)
    })
    .await
    .unwrap();
    let (result, run) = outcome;
    result.expect("a deterministic failure is recorded in the run, not returned");
    assert_eq!(run.state, RunState::Failed, "{run:?}");
    let error = run.error.as_deref().unwrap();
    assert!(error.contains("only through a queue"), "{error}");
    // And it is saved: the driver will not pick it up again.
    let saved = list_runs(&lake, "p", 10).await.unwrap();
    assert_eq!(saved[0].state, RunState::Failed);
}

/// A raw file replaced by a new version is another input for the pipeline: it gets a dataset
/// of its own, while the unchanged version keeps counting as ingested.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_raw_file_is_ingested_as_a_new_dataset() {
    use lakefish_jobs::pipeline::raw_dataset;
    use lakefish_schemas::Source;
    let dir = tempfile::tempdir().unwrap();
    let lake = Lake::open(dir.path().to_str().unwrap(), &Default::default()).unwrap();
    let key = "raw/binpack/a.binpack";
    lake.put(key, lakefish_ingest::binpack::synthetic_binpack(3, 1))
        .await
        .unwrap();
    let ctx = JobContext::new(lake.clone(), tokio::runtime::Handle::current());
    let (name, v1_name, v2) = tokio::task::spawn_blocking(move || {
        let (name, done) = raw_dataset(&ctx, Source::Binpack, key).unwrap();
        assert!(!done);
        let spec = lakefish_schemas::IngestSpec {
            max_game_bytes: None,
            inputs: vec![format!("lake:{key}")],
            dataset: name.clone(),
            rows_per_part: 1000,
        };
        let id = lakefish_schemas::JobId::new();
        lakefish_ingest::ingest_binpack::ingest_binpack(&ctx, &id, &spec).unwrap();
        assert_eq!(
            raw_dataset(&ctx, Source::Binpack, key).unwrap(),
            (name.clone(), true)
        );
        ctx.block_on(
            ctx.lake
                .put(key, lakefish_ingest::binpack::synthetic_binpack(4, 2)),
        )
        .unwrap();
        let v2 = raw_dataset(&ctx, Source::Binpack, key).unwrap();
        (name.clone(), name, v2)
    })
    .await
    .unwrap();
    assert!(!v2.1, "the new version is not ingested yet");
    assert_ne!(v2.0, v1_name);
    assert!(
        v2.0.as_str().starts_with(&format!("{}.v", name.as_str())),
        "{}",
        v2.0
    );
}

/// Each pipeline round plays other openings: the datagen seed is mixed with the round number
/// (runs before this one), and stays the same for the same round.
#[test]
fn each_round_has_its_own_datagen_seed() {
    use lakefish_jobs::pipeline::round_seed;
    assert_eq!(
        round_seed(7, 0),
        7,
        "the first round plays the configured seed"
    );
    let a = round_seed(7, 1);
    assert_eq!(a, round_seed(7, 1));
    assert_ne!(a, 7);
    assert_ne!(a, round_seed(7, 2));
    assert_ne!(a, round_seed(8, 1));
}
