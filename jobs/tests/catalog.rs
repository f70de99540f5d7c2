//! What jobs index: datasets (with their masks) and shuffles written through a lake with a
//! catalogue list the same as the lake itself says; a commit the index missed is indexed by
//! the next delivery; a rebuild from the lake alone gives the same lists.

use lakefish_ingest::binpack::synthetic_binpack;
use lakefish_jobs::masks::mask_dataset;
use lakefish_jobs::shuffle::{list_shuffles, shuffle_here};
use lakefish_lake::catalog::{CatalogHandle, CatalogKind};
use lakefish_lake::datasets::list_datasets;
use lakefish_metastore::{MetastoreSpec, SqlRecords};
use lakefish_schemas::{
    DatasetName, JobId, MaskDefinition, MaskName, MaskSpec, ShuffleSpec, Source,
};
use std::sync::Arc;

mod common;
use common::LakeFixture;

fn catalogue(fx: &LakeFixture, file: &str) -> CatalogHandle {
    let spec = MetastoreSpec::Sqlite(fx.dir.path().join(file).display().to_string());
    let store = fx.rt.block_on(SqlRecords::open(&spec)).unwrap();
    CatalogHandle(Arc::new(store))
}

fn shuffle_spec(seed: u64) -> ShuffleSpec {
    ShuffleSpec {
        source: Source::Binpack,
        datasets: vec![
            DatasetName::new("a").unwrap(),
            DatasetName::new("b").unwrap(),
        ],
        extra: Vec::new(),
        mask: MaskName::new("quiet").unwrap(),
        chunks: 3,
        seed,
    }
}

#[test]
fn lists_from_the_catalogue_match_the_lake_and_a_rebuild() {
    let mut fx = LakeFixture::new();
    let plain = fx.lake.clone();
    let catalog = catalogue(&fx, "meta.sqlite");
    fx.lake = plain.clone().with_catalog(catalog.clone());
    for (name, seed) in [("a", 21u64), ("b", 22)] {
        fx.ingest_bytes(&synthetic_binpack(60, seed), name, 2_000);
        let m = MaskSpec {
            dataset: DatasetName::new(name).unwrap(),
            source: Source::Binpack,
            definition: MaskDefinition::quiet(),
        };
        mask_dataset(&fx.ctx(), &JobId::new(), &m).unwrap();
    }
    shuffle_here(&fx.ctx(), &shuffle_spec(1)).unwrap();

    let rt = &fx.rt;
    let indexed_datasets = rt.block_on(list_datasets(&fx.lake)).unwrap();
    assert_eq!(indexed_datasets.len(), 2);
    assert_eq!(
        indexed_datasets,
        rt.block_on(list_datasets(&plain)).unwrap()
    );
    // The mask committed after the dataset reached its entry.
    assert!(indexed_datasets.iter().all(|d| d.masks == ["quiet"]));
    assert_eq!(
        rt.block_on(list_shuffles(&fx.lake)).unwrap(),
        rt.block_on(list_shuffles(&plain)).unwrap()
    );

    // A shuffle committed while the index was not there (a crash between the two writes)
    // is indexed by the next delivery of the same job.
    fx.lake = plain.clone();
    let missed = shuffle_here(&fx.ctx(), &shuffle_spec(2)).unwrap();
    fx.lake = plain.clone().with_catalog(catalog.clone());
    assert_eq!(rt.block_on(list_shuffles(&fx.lake)).unwrap().len(), 1);
    let again = shuffle_here(&fx.ctx(), &shuffle_spec(2)).unwrap();
    assert_eq!(again, missed);
    let shuffles = rt.block_on(list_shuffles(&fx.lake)).unwrap();
    assert_eq!(shuffles, rt.block_on(list_shuffles(&plain)).unwrap());
    assert_eq!(shuffles.len(), 2);
    assert!(shuffles[0].created >= shuffles[1].created, "newest first");

    // /metrics from the catalogue's aggregates says what the lake's lists say.
    let catalogue_lines = |text: String| -> Vec<String> {
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with("lakefish_job"))
            .filter(|l| !l.starts_with("lakefish_queue"))
            .map(str::to_string)
            .collect()
    };
    let jobs = lakefish_lake::records::JobStore::new(plain.clone());
    let from_index = rt
        .block_on(lakefish_jobs::metrics::prometheus(&fx.lake, &jobs))
        .unwrap();
    let from_lake = rt
        .block_on(lakefish_jobs::metrics::prometheus(&plain, &jobs))
        .unwrap();
    assert!(from_index.contains("lakefish_datasets 2"), "{from_index}");
    assert!(
        from_index.contains("lakefish_rows_ingested{source=\"binpack\"}"),
        "{from_index}"
    );
    assert_eq!(catalogue_lines(from_index), catalogue_lines(from_lake));

    // A rebuild into an empty catalogue, from the lake alone, lists the same.
    let fresh = catalogue(&fx, "rebuilt.sqlite");
    let report = rt
        .block_on(lakefish_jobs::catalog::rebuild(&plain, &fresh))
        .unwrap();
    assert_eq!(report.indexed.get("dataset"), Some(&2));
    assert_eq!(report.indexed.get("shuffle"), Some(&2));
    let rebuilt = plain.clone().with_catalog(fresh.clone());
    assert_eq!(
        rt.block_on(list_datasets(&rebuilt)).unwrap(),
        indexed_datasets
    );
    assert_eq!(rt.block_on(list_shuffles(&rebuilt)).unwrap(), shuffles);
    let counts = rt.block_on(fresh.0.counts()).unwrap();
    assert!(counts.contains(&(CatalogKind::Dataset, 2)), "{counts:?}");

    // Entries of things the lake does not hold (nets deleted by hand, whatever their time):
    // a plain rebuild keeps them; a pruning one removes them and leaves every entry the
    // lake gives.
    let entry = |name: &str, created: &str| {
        lakefish_lake::catalog::CatalogEntry::of(
            CatalogKind::Net,
            name,
            created,
            &serde_json::json!({}),
        )
    };
    rt.block_on(async {
        fresh
            .0
            .upsert(&entry("nn-0000000000aa", "2020-01-01T00:00:00Z"))
            .await?;
        fresh
            .0
            .upsert(&entry("nn-0000000000bb", "2999-01-01T00:00:00+00:00"))
            .await
    })
    .unwrap();
    let kept = rt
        .block_on(lakefish_jobs::catalog::rebuild(&plain, &fresh))
        .unwrap();
    assert!(kept.pruned.is_empty(), "{kept:?}");
    let pruned = rt
        .block_on(lakefish_jobs::catalog::rebuild_and_prune(&plain, &fresh))
        .unwrap();
    assert_eq!(pruned.pruned.get("net"), Some(&2), "{pruned:?}");
    assert_eq!(pruned.pruned.len(), 1, "{pruned:?}");
    let get = |name| rt.block_on(fresh.0.get(CatalogKind::Net, name)).unwrap();
    assert!(get("nn-0000000000aa").is_none());
    assert!(get("nn-0000000000bb").is_none());
    assert_eq!(rt.block_on(list_shuffles(&rebuilt)).unwrap(), shuffles);
    assert_eq!(
        rt.block_on(list_datasets(&rebuilt)).unwrap(),
        indexed_datasets
    );
}

/// A damaged `_catalog.json` is a clear error naming it; the lake around it is untouched.
#[test]
fn a_garbage_catalogue_marker_is_a_clear_error() {
    let fx = LakeFixture::new();
    fx.ingest_bytes(&synthetic_binpack(20, 3), "a", 2_000);
    let before = fx.snapshot();
    fx.rt
        .block_on(
            fx.lake
                .put(lakefish_jobs::catalog::MARKER_KEY, b"{not json".to_vec()),
        )
        .unwrap();
    let err = fx
        .rt
        .block_on(lakefish_jobs::catalog::read_marker(&fx.lake))
        .unwrap_err()
        .to_string();
    assert!(err.contains("_catalog.json"), "{err}");
    let mut after = fx.snapshot();
    after.remove(lakefish_jobs::catalog::MARKER_KEY);
    assert_eq!(after, before);
}

/// Issue 35, item 1: tests are found by the net on either side, named with or without its
/// `.nnue` (the name a test records is the registered one, with it).
#[test]
fn sprt_tests_are_found_by_their_net() {
    let mut fx = LakeFixture::new();
    fx.lake = fx.lake.clone().with_catalog(catalogue(&fx, "meta.sqlite"));
    let net = "nn-0123456789ab.nnue";
    let status: lakefish_schemas::SprtStatus = serde_json::from_value(serde_json::json!({
        "id": "sprt-000000000001", "state": "accepted",
        "new": {"name": net, "requested": "best"},
        "base": {"name": "classical", "requested": "classical"},
        "elo0": 0.0, "elo1": 2.0, "model": "normalized", "llr": 3.0, "lower": -2.9,
        "upper": 2.9, "wins": 2, "draws": 0, "losses": 0, "penta": [0, 0, 0, 0, 1],
        "games": 2, "batches": 1, "llr_history": [3.0], "elo": null,
        "spec": {"new": "best", "base": "classical", "book": "lake:raw/books/b.epd"},
        "created": "2026-11-26T00:00:00Z"
    }))
    .unwrap();
    let rt = &fx.rt;
    rt.block_on(lakefish_jobs::sprt::index_status(&fx.lake, &status))
        .unwrap();
    for filter in [net, "nn-0123456789ab", "classical"] {
        let found = rt
            .block_on(lakefish_jobs::sprt::list(&fx.lake, Some(filter), None))
            .unwrap();
        assert_eq!(found.len(), 1, "{filter}");
        assert_eq!(found[0].id, "sprt-000000000001");
    }
    let none = rt
        .block_on(lakefish_jobs::sprt::list(
            &fx.lake,
            Some("nn-ffffffffffff"),
            None,
        ))
        .unwrap();
    assert!(none.is_empty());
}
