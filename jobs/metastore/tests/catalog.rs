//! The catalogue (`lakefish_lake::catalog`) on SQLite and PostgreSQL: pages newest first
//! with cursors, filters by state and by link, ranks that never go back, counts, and a
//! catalogue created by the migration that an older database did not have.

use lakefish_lake::catalog::{
    CatalogCursor, CatalogEntry, CatalogHandle, CatalogKind, CatalogQuery,
};
use lakefish_metastore::{MetastoreSpec, SqlRecords};
use lakefish_testkit::Postgres;
use std::sync::Arc;

const STATES: [&str; 3] = ["running", "accepted", "rejected"];

/// Test `i`: created every 10 ms (every fourth shares its predecessor's time: ties are
/// broken by name), states cycle, and it plays net `nn-<i % 5>` against `classical`.
fn entry(i: usize) -> CatalogEntry {
    let ms = (i - (i.is_multiple_of(4) && i > 0) as usize) as i64 * 10;
    let t0 = chrono::DateTime::parse_from_rfc3339("2026-11-25T00:00:00.000Z").unwrap();
    let created = (t0 + chrono::Duration::milliseconds(ms))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let name = format!("sprt-{i:03}");
    CatalogEntry::of(
        CatalogKind::Sprt,
        &name,
        created,
        &serde_json::json!({"id": name, "i": i}),
    )
    .with_state(STATES[i % 3])
    .with_links([format!("nn-{}", i % 5), "classical".to_string()])
    .with_rank(i as i64)
    .with_weight(i as i64)
}

async fn names(catalog: &CatalogHandle, mut query: CatalogQuery) -> Vec<String> {
    let mut out = Vec::new();
    for _ in 0..1000 {
        let page = catalog.0.page(&query).await.unwrap();
        assert!(page.entries.len() <= query.limit);
        out.extend(page.entries.iter().map(|e| e.name.clone()));
        match page.next {
            // The cursor survives the trip through a query string.
            Some(next) => query.after = Some(CatalogCursor::parse(&next.encode()).unwrap()),
            None => return out,
        }
    }
    panic!("paging does not end");
}

fn newest_first(entries: &[CatalogEntry], keep: impl Fn(&CatalogEntry) -> bool) -> Vec<String> {
    let mut v: Vec<&CatalogEntry> = entries.iter().filter(|e| keep(e)).collect();
    v.sort_by(|a, b| (&b.created, &b.name).cmp(&(&a.created, &a.name)));
    v.into_iter().map(|e| e.name.clone()).collect()
}

async fn suite(store: Arc<SqlRecords>) {
    let catalog = CatalogHandle(store.clone());
    let entries: Vec<CatalogEntry> = (0..60).map(entry).collect();
    for e in &entries {
        catalog.0.upsert(e).await.unwrap();
    }
    // Twice is the same as once.
    for e in &entries[..10] {
        catalog.0.upsert(e).await.unwrap();
    }
    let mut query = CatalogQuery::all(CatalogKind::Sprt);
    query.limit = 7;
    assert_eq!(
        names(&catalog, query.clone()).await,
        newest_first(&entries, |_| true)
    );
    let mut by_state = query.clone();
    by_state.state = Some("accepted".into());
    assert_eq!(
        names(&catalog, by_state).await,
        newest_first(&entries, |e| e.state.as_deref() == Some("accepted"))
    );
    let mut by_net = query.clone();
    by_net.link = Some("nn-3".into());
    assert_eq!(
        names(&catalog, by_net.clone()).await,
        newest_first(&entries, |e| e.links.contains(&"nn-3".to_string()))
    );
    by_net.state = Some("running".into());
    assert_eq!(
        names(&catalog, by_net).await,
        newest_first(&entries, |e| {
            e.links.contains(&"nn-3".to_string()) && e.state.as_deref() == Some("running")
        })
    );
    // Other kinds are not mixed in.
    assert!(
        names(&catalog, CatalogQuery::all(CatalogKind::Net))
            .await
            .is_empty()
    );

    // A lower rank changes nothing; a higher one replaces the summary, state and links.
    let stale = entry(7).with_rank(3).with_state("rejected");
    catalog.0.upsert(&stale).await.unwrap();
    let got = catalog
        .0
        .get(CatalogKind::Sprt, "sprt-007")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.state.as_deref(), Some(STATES[7 % 3]));
    assert_eq!(got.rank, 7);
    let newer = CatalogEntry {
        summary: serde_json::json!({"id": "sprt-007", "decided": true}),
        ..entry(7)
    }
    .with_rank(100)
    .with_state("accepted")
    .with_links(["nn-9".to_string()]);
    catalog.0.upsert(&newer).await.unwrap();
    let got = catalog
        .0
        .get(CatalogKind::Sprt, "sprt-007")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.summary["decided"], true);
    assert_eq!(got.state.as_deref(), Some("accepted"));
    let mut by_new_net = CatalogQuery::all(CatalogKind::Sprt);
    by_new_net.link = Some("nn-9".into());
    assert_eq!(names(&catalog, by_new_net).await, vec!["sprt-007"]);
    let mut by_old_net = CatalogQuery::all(CatalogKind::Sprt);
    by_old_net.link = Some("nn-2".into());
    assert!(
        !names(&catalog, by_old_net)
            .await
            .contains(&"sprt-007".to_string())
    );
    assert!(
        catalog
            .0
            .get(CatalogKind::Net, "sprt-007")
            .await
            .unwrap()
            .is_none()
    );

    // Decoding goes through serde; a summary of the wrong shape is a clear corrupt error.
    let err = got.decode::<Vec<u8>>().unwrap_err().to_string();
    assert!(err.contains("catalog/sprt/sprt-007"), "{err}");

    let best = CatalogEntry::of(
        CatalogKind::Best,
        "best",
        "2026-11-25T01:00:00.000Z",
        &serde_json::json!({"name": "nn-000000000000"}),
    );
    catalog.0.upsert(&best).await.unwrap();
    // Totals by state in one query: entry 7 moved from `running` to `accepted`.
    let totals = catalog.0.totals(CatalogKind::Sprt).await.unwrap();
    for state in STATES {
        let moved = |i: &usize| if *i == 7 { "accepted" } else { STATES[i % 3] };
        let mine: Vec<usize> = (0..60).filter(|i| moved(i) == state).collect();
        let t = totals
            .iter()
            .find(|t| t.state.as_deref() == Some(state))
            .unwrap();
        assert_eq!(t.count, mine.len() as u64, "{state}");
        assert_eq!(t.weight, mine.iter().sum::<usize>() as i64, "{state}");
    }
    let counts = catalog.0.counts().await.unwrap();
    assert!(counts.contains(&(CatalogKind::Sprt, 60)), "{counts:?}");
    assert!(counts.contains(&(CatalogKind::Best, 1)), "{counts:?}");

    // Removing an entry takes its links with it: lists by link no longer name it.
    assert!(
        catalog
            .0
            .remove(CatalogKind::Sprt, "sprt-010")
            .await
            .unwrap()
    );
    assert!(
        !catalog
            .0
            .remove(CatalogKind::Sprt, "sprt-010")
            .await
            .unwrap()
    );
    let of_net = |l: &str| CatalogQuery {
        link: Some(l.to_string()),
        ..CatalogQuery::all(CatalogKind::Sprt)
    };
    let listed = names(&catalog, of_net("nn-0")).await;
    assert!(!listed.iter().any(|n| n == "sprt-010"), "{listed:?}");
    assert_eq!(listed.len(), 11);
    let counts = catalog.0.counts().await.unwrap();
    assert!(counts.contains(&(CatalogKind::Sprt, 59)), "{counts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_catalogue() {
    let dir = tempfile::tempdir().unwrap();
    let spec = MetastoreSpec::Sqlite(dir.path().join("meta.sqlite").display().to_string());
    let store = SqlRecords::open(&spec).await.unwrap();
    assert!(store.catalog_created_now());
    suite(Arc::new(store)).await;
    let again = SqlRecords::open(&spec).await.unwrap();
    assert!(!again.catalog_created_now(), "the catalogue was kept");

    // A database from before the catalogue (schema version 1) gains it, empty.
    let old = MetastoreSpec::Sqlite(dir.path().join("old.sqlite").display().to_string());
    let v1 = SqlRecords::open(&old).await.unwrap();
    v1.set_schema_version_for_tests(1).await;
    drop(v1);
    let upgraded = SqlRecords::open(&old).await.unwrap();
    assert!(upgraded.catalog_created_now() && !upgraded.created_now());
    assert_eq!(
        upgraded.schema_version().await.unwrap(),
        lakefish_metastore::SCHEMA_VERSION
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_catalogue() {
    let pg = tokio::task::spawn_blocking(Postgres::start).await.unwrap();
    let spec = MetastoreSpec::Postgres(pg.create_database("catalogue"));
    let store = SqlRecords::open(&spec).await.unwrap();
    assert!(store.catalog_created_now());
    suite(Arc::new(store)).await;
}
