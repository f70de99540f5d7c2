//! One conformance suite for the job record store, run against every backend: SQLite,
//! PostgreSQL (a real server of its own) and the lake (the reference the others replace).
//! Ordering, paging, filters, the tally, conditional updates under concurrency, deletes,
//! migrations and the import of records an older lakefish left in the lake.

use lakefish_lake::Lake;
use lakefish_lake::records::{JobCursor, JobQuery, JobStore, run_seconds};
use lakefish_metastore::{MetastoreSpec, SCHEMA_VERSION, SqlRecords, open_job_store};
use lakefish_schemas::{JobId, JobKind, JobRecord, JobSpec, JobState};
use lakefish_testkit::Postgres;
use std::collections::BTreeMap;

fn spec() -> JobSpec {
    serde_json::from_value(serde_json::json!({
        "kind": "ingest_pgn",
        "spec": { "inputs": ["lake:raw/a.pgn"], "dataset": "d" }
    }))
    .unwrap()
}

const KINDS: [JobKind; 3] = [JobKind::IngestPgn, JobKind::Train, JobKind::SprtBatch];

/// Record `i` of a history: creation times rise with `i` but every fifth shares its
/// predecessor's millisecond (ties are broken by id); kinds and states cycle.
fn record(i: usize) -> JobRecord {
    let mut rec = JobStore::new_record(JobId::new(), spec());
    let ms = (i - i.is_multiple_of(5) as usize * (i > 0) as usize) as i64 * 10;
    let t0 = chrono::DateTime::parse_from_rfc3339("2026-11-25T00:00:00.000Z").unwrap();
    let at = |d: i64| {
        (t0 + chrono::Duration::milliseconds(d))
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    };
    rec.created = at(ms);
    rec.kind = KINDS[i % 3];
    rec.state = JobState::ALL[i % 4];
    if rec.state.is_final() {
        rec.started = Some(at(ms + 1000));
        rec.finished = Some(at(ms + 1000 + 250 * (i as i64 % 7)));
    }
    rec
}

fn newest_first(recs: &[JobRecord]) -> Vec<String> {
    let mut v: Vec<&JobRecord> = recs.iter().collect();
    v.sort_by(|a, b| (&b.created, b.id.as_str()).cmp(&(&a.created, a.id.as_str())));
    v.into_iter().map(|r| r.id.to_string()).collect()
}

async fn all_pages(store: &JobStore, mut query: JobQuery) -> Vec<String> {
    let mut ids = Vec::new();
    let mut pages = 0;
    loop {
        let page = store.page(&query).await.unwrap();
        assert!(page.jobs.len() <= query.limit);
        ids.extend(page.jobs.iter().map(|r| r.id.to_string()));
        pages += 1;
        assert!(pages < 1000, "paging does not end");
        match page.next {
            Some(next) => {
                // The cursor survives the trip through the API's query string.
                query.after = Some(JobCursor::parse(&next.encode()).unwrap());
            }
            None => return ids,
        }
    }
}

async fn suite(store: JobStore) {
    let history: Vec<JobRecord> = (0..120).map(record).collect();
    for rec in &history {
        store.put(rec).await.unwrap();
    }

    // Newest first, every record once, across pages of an odd size.
    let query = JobQuery {
        limit: 7,
        ..JobQuery::default()
    };
    assert_eq!(
        all_pages(&store, query.clone()).await,
        newest_first(&history)
    );
    assert_eq!(store.list(None, 3).await.unwrap().len(), 3);

    // Filters, alone and together, page the same way.
    for (state, kind) in [
        (Some(JobState::Failed), None),
        (None, Some(JobKind::Train)),
        (Some(JobState::Succeeded), Some(JobKind::SprtBatch)),
        // A kind no record has.
        (Some(JobState::Running), Some(JobKind::Datagen)),
    ] {
        let expect: Vec<JobRecord> = history
            .iter()
            .filter(|r| state.is_none_or(|s| r.state == s) && kind.is_none_or(|k| r.kind == k))
            .cloned()
            .collect();
        let q = JobQuery {
            state,
            kind,
            limit: 4,
            after: None,
            submitted_only: false,
        };
        assert_eq!(
            all_pages(&store, q).await,
            newest_first(&expect),
            "{state:?} {kind:?}"
        );
    }

    // Without the tasks lakefish queues itself, pages count only submitted jobs.
    let submitted: Vec<JobRecord> = history
        .iter()
        .filter(|r| !r.kind.is_internal())
        .cloned()
        .collect();
    assert!(submitted.len() < history.len());
    assert_eq!(
        all_pages(
            &store,
            JobQuery {
                limit: 5,
                submitted_only: true,
                ..JobQuery::default()
            }
        )
        .await,
        newest_first(&submitted)
    );

    // A job created while a client pages does not shift the pages after the first.
    let first = store.page(&query).await.unwrap();
    let mut late = record(500);
    late.created = lakefish_lake::records::now();
    store.put(&late).await.unwrap();
    let rest = all_pages(
        &store,
        JobQuery {
            after: first.next.clone(),
            ..query.clone()
        },
    )
    .await;
    assert_eq!(rest, newest_first(&history)[7..].to_vec());

    // The tally agrees with a count of the records themselves.
    let mut all = history.clone();
    all.push(late.clone());
    assert_tally(&store, &all).await;

    // Conditional updates under concurrency: every increment counts once.
    let target = history[3].clone();
    let before = store.get(&target.id).await.unwrap().unwrap().attempts;
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (store, id) = (store.clone(), target.id.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..10 {
                store
                    .update(&id, |r| {
                        let mut r = r.expect("stored");
                        r.attempts += 1;
                        Some(r)
                    })
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let after = store.get(&target.id).await.unwrap().unwrap();
    assert_eq!(after.attempts, before + 80);

    // A success is final: a later failure from the same attempt does not overwrite it.
    let mut done = after.clone();
    done.state = JobState::Succeeded;
    store.put_unless_succeeded(&done).await.unwrap();
    let mut stale = done.clone();
    stale.state = JobState::Failed;
    stale.error = Some("late report".into());
    let kept = store.put_unless_succeeded(&stale).await.unwrap();
    assert_eq!(kept.state, JobState::Succeeded);
    // ... and an older attempt never writes over a newer one.
    let mut older = kept.clone();
    older.attempts -= 1;
    older.state = JobState::Running;
    assert_eq!(
        store.put_unless_succeeded(&older).await.unwrap().attempts,
        kept.attempts
    );
    // A change that declines leaves the record as it was.
    let same = store.update(&target.id, |_| None).await.unwrap().unwrap();
    assert_eq!(same, kept);

    // Deletes: gone from lists and from the tally; deleting twice is fine.
    store.delete(&late.id).await.unwrap();
    store.delete(&late.id).await.unwrap();
    assert!(store.get(&late.id).await.unwrap().is_none());
    let mut now_all = history.clone();
    now_all[3] = kept;
    assert_tally(&store, &now_all).await;
    assert_eq!(
        all_pages(&store, query.clone()).await,
        newest_first(&now_all)
    );
}

async fn assert_tally(store: &JobStore, records: &[JobRecord]) {
    let mut expect: BTreeMap<(JobKind, &str), (u64, u64, f64)> = BTreeMap::new();
    for r in records {
        let e = expect.entry((r.kind, r.state.as_str())).or_default();
        e.0 += 1;
        if let Some(s) = run_seconds(r) {
            e.1 += 1;
            e.2 += s;
        }
    }
    let mut got: BTreeMap<(JobKind, &str), (u64, u64, f64)> = BTreeMap::new();
    for t in store.tally().await.unwrap() {
        if t.count > 0 {
            got.insert((t.kind, t.state.as_str()), (t.count, t.timed, t.seconds));
        }
    }
    assert_eq!(got.len(), expect.len(), "{got:?}\n{expect:?}");
    for (k, (n, timed, secs)) in &expect {
        let (gn, gt, gs) = got[k];
        assert_eq!((gn, gt), (*n, *timed), "{k:?}");
        assert!((gs - secs).abs() < 1e-6, "{k:?}: {gs} s, expected {secs} s");
    }
}

/// Applies migrations once on an empty database, and again as a no-op; refuses a database
/// newer than the binary without touching it; imports an old lake's records once.
async fn migrations_and_import(spec: MetastoreSpec) {
    let first = SqlRecords::open(&spec).await.unwrap();
    assert_eq!(first.schema_version().await.unwrap(), SCHEMA_VERSION);
    let again = SqlRecords::open(&spec).await.unwrap();
    assert_eq!(again.schema_version().await.unwrap(), SCHEMA_VERSION);

    let lake = Lake::in_memory();
    let old = JobStore::new(lake.clone());
    let recs: Vec<JobRecord> = (0..30).map(record).collect();
    for r in &recs {
        old.put(r).await.unwrap();
    }
    assert_eq!(first.import_lake_records(&lake).await.unwrap(), 30);
    assert_eq!(first.import_lake_records(&lake).await.unwrap(), 0);
    let store = JobStore::with_backend(std::sync::Arc::new(first.clone()));
    assert_eq!(
        all_pages(
            &store,
            JobQuery {
                limit: 100,
                ..JobQuery::default()
            }
        )
        .await,
        newest_first(&recs)
    );
    assert_tally(&store, &recs).await;

    first.set_schema_version_for_tests(SCHEMA_VERSION + 1).await;
    let err = SqlRecords::open(&spec).await.unwrap_err().to_string();
    assert!(
        err.contains(&format!("schema version {}", SCHEMA_VERSION + 1))
            && err.contains("upgrade lakefish"),
        "{err}"
    );
    assert_eq!(
        first.schema_version().await.unwrap(),
        SCHEMA_VERSION + 1,
        "the newer database was not touched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_backend() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("meta.sqlite").display().to_string();
    let store = open_job_store(&MetastoreSpec::Sqlite(path), &Lake::in_memory())
        .await
        .unwrap();
    assert!(store.describe().starts_with("sqlite:"));
    suite(store).await;
    let other = dir.path().join("fresh/meta.sqlite").display().to_string();
    migrations_and_import(MetastoreSpec::Sqlite(other)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_backend() {
    let pg = tokio::task::spawn_blocking(Postgres::start).await.unwrap();
    let url = pg.create_database("conformance");
    let store = open_job_store(&MetastoreSpec::Postgres(url), &Lake::in_memory())
        .await
        .unwrap();
    assert!(store.describe().starts_with("postgres://"));
    suite(store).await;
    let fresh = pg.create_database("migrations");
    migrations_and_import(MetastoreSpec::Postgres(fresh)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lake_backend() {
    let store = open_job_store(&MetastoreSpec::Lake, &Lake::in_memory())
        .await
        .unwrap();
    suite(store).await;
}

#[tokio::test]
async fn an_unreachable_database_is_a_clear_transient_error() {
    let port = lakefish_testkit::free_port();
    let spec = MetastoreSpec::Postgres(format!("postgres://lakefish:pw@127.0.0.1:{port}/x"));
    let err = SqlRecords::open(&spec).await.unwrap_err();
    assert!(err.is_transient(), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("127.0.0.1") && !msg.contains("pw"), "{msg}");
}

#[test]
fn cursors_are_checked() {
    let rec = record(3);
    let c = JobCursor::after(&rec);
    assert_eq!(JobCursor::parse(&c.encode()).unwrap(), c);
    // Another way of writing the same instant compares like the stored times.
    let other = JobCursor::parse(&format!("2026-11-25T01:00:00+01:00_{}", rec.id)).unwrap();
    assert_eq!(other.created, "2026-11-25T00:00:00.000Z");
    for bad in [
        "",
        "x",
        "2026-11-25T00:00:00.000Z",
        "yesterday_0193",
        "2026-11-25T00:00:00.000Z_../../etc/passwd",
    ] {
        let err = JobCursor::parse(bad).unwrap_err();
        assert!(err.contains("cursor"), "{bad}: {err}");
    }
}

/// An upgrade: the first start on a new database copies the records an older lakefish kept in
/// the lake, so history survives (and a pipeline in flight finds the jobs it ran); later
/// starts do not copy again.
#[tokio::test]
async fn a_new_metastore_takes_over_the_records_in_the_lake() {
    let lake = Lake::in_memory();
    let old = JobStore::new(lake.clone());
    let recs: Vec<JobRecord> = (0..12).map(record).collect();
    for r in &recs {
        old.put(r).await.unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let spec = MetastoreSpec::Sqlite(dir.path().join("meta.sqlite").display().to_string());
    let store = open_job_store(&spec, &lake).await.unwrap();
    let page = store
        .page(&JobQuery {
            limit: 100,
            ..JobQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(page.jobs.len(), 12);
    store.delete(&recs[0].id).await.unwrap();
    let again = open_job_store(&spec, &lake).await.unwrap();
    assert!(again.get(&recs[0].id).await.unwrap().is_none());
    assert_eq!(again.list(None, 100).await.unwrap().len(), 11);
}
