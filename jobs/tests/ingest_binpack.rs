//! Binpack ingest, in-process, against a local lake: real sample data when `../shared` is
//! there, and generated binpacks always.

use lakefish_ingest::binpack::synthetic_binpack;
use lakefish_lake::datasets::{WriterClaim, list_claims};
use lakefish_lake::parts::{PositionRow, read_positions};
use lakefish_schemas::JobId;
use std::path::PathBuf;

mod common;
use common::{LakeFixture as Fixture, shared};

fn dataset_dir(f: &Fixture, dataset: &str) -> PathBuf {
    f.path(&format!("positions/source=binpack/dataset={dataset}"))
}

fn read_rows(f: &Fixture, dataset: &str) -> Vec<Row> {
    let mut parts: Vec<PathBuf> = std::fs::read_dir(dataset_dir(f, dataset))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
        .collect();
    parts.sort();
    let mut rows = Vec::new();
    for p in parts {
        let bytes = bytes::Bytes::from(std::fs::read(&p).unwrap());
        let meta = parquet::file::reader::FileReader::metadata(
            &parquet::file::serialized_reader::SerializedFileReader::new(bytes.clone()).unwrap(),
        )
        .clone();
        let kv = meta
            .file_metadata()
            .key_value_metadata()
            .cloned()
            .unwrap_or_default();
        let get = |k: &str| kv.iter().find(|e| e.key == k).and_then(|e| e.value.clone());
        assert_eq!(get("lakefish.schema_version").as_deref(), Some("1"));
        assert_eq!(
            get("lakefish.score_unit").as_deref(),
            Some("stockfish_internal")
        );
        rows.extend(read_positions(bytes, &p.display().to_string()).unwrap());
    }
    rows
}

type Row = PositionRow;

/// The rows the `sfbinpack` crate's own reader yields, and whether each entry continues the
/// previous one's move chain.
fn reference(bytes: &[u8]) -> Vec<(sfbinpack::TrainingDataEntry, bool)> {
    let mut r = sfbinpack::CompressedTrainingDataEntryReader::from_slice(bytes).unwrap();
    let mut out: Vec<(sfbinpack::TrainingDataEntry, bool)> = Vec::new();
    while r.has_next() {
        let e = r.next();
        let cont = out.last().is_some_and(|(p, _)| p.is_continuation(&e));
        out.push((e, cont));
    }
    out
}

fn assert_matches_reference(rows: &[Row], bytes: &[u8]) {
    let want = reference(bytes);
    assert_eq!(rows.len(), want.len());
    for (i, (row, (e, cont))) in rows.iter().zip(&want).enumerate() {
        assert_eq!(row.fen, e.pos.fen().unwrap(), "row {i}");
        assert_eq!(row.mv, e.mv.as_uci(), "row {i}");
        assert_eq!(row.score, (e.score != 32002).then_some(e.score), "row {i}");
        assert_eq!(row.ply, e.ply, "row {i}");
        assert_eq!(row.result, Some(e.result as i8), "row {i}");
        if *cont {
            assert_eq!(
                row.game_id,
                rows[i - 1].game_id,
                "row {i} continues a chain"
            );
        }
    }
}

#[test]
fn small_binpack_matches_the_sfbinpack_reader_row_by_row() {
    let f = Fixture::new();
    let Some(path) = shared("binpack/small.binpack") else {
        // Without ../shared: a generated file of the same kind, checked the same way
        // against the reference reader (the sample's fixed counts cannot be asserted).
        let bytes = synthetic_binpack(300, 9);
        let input = f.file("generated.binpack", &bytes);
        let s = f.ingest(&[input], "small", 200_000).unwrap();
        assert_eq!(s.rows as usize, reference(&bytes).len());
        assert!(s.rows > 10_000, "{s:?}");
        assert!(s.skipped.is_empty(), "{:?}", s.skipped);
        assert_matches_reference(&read_rows(&f, "small"), &bytes);
        return;
    };
    let s = f
        .ingest(&[path.to_str().unwrap().to_string()], "small", 200_000)
        .unwrap();
    assert_eq!(s.rows, 434_921);
    assert_eq!(s.null_scores, Some(10_200));
    assert!(s.skipped.is_empty(), "{:?}", s.skipped);
    let rows = read_rows(&f, "small");
    assert_eq!(rows.iter().filter(|r| r.score.is_none()).count(), 10_200);
    assert_matches_reference(&rows, &std::fs::read(&path).unwrap());
}

#[test]
fn generated_binpacks_round_trip_in_several_parts_and_reruns_change_nothing() {
    let f = Fixture::new();
    let a = synthetic_binpack(40, 1);
    let b = synthetic_binpack(25, 2);
    let inputs = [f.file("a.binpack", &a), f.file("b.binpack", &b)];
    let s = f.ingest(&inputs, "gen", 1_000).unwrap();
    let all: Vec<u8> = [a.clone(), b.clone()].concat();
    assert_eq!(s.rows as usize, reference(&all).len());
    assert!(s.parts >= 2, "{s:?}");
    assert!(!s.already_present);
    let rows = read_rows(&f, "gen");
    assert_matches_reference(&rows, &all);

    let before = f.snapshot();
    let again = f.ingest(&inputs, "gen", 1_000).unwrap();
    assert!(again.already_present);
    assert_eq!(
        f.snapshot(),
        before,
        "a second run leaves the lake byte-identical"
    );

    let err = f
        .ingest(&inputs[..1], "gen", 1_000)
        .unwrap_err()
        .to_string();
    assert!(err.contains("already exists"), "{err}");
    assert_eq!(f.snapshot(), before);
}

/// Three chunks: the files of three generated binpacks, back to back.
fn three_chunks() -> (Vec<u8>, Vec<usize>) {
    let mut bytes = Vec::new();
    let mut starts = Vec::new();
    for seed in 10..13 {
        starts.push(bytes.len());
        bytes.extend(synthetic_binpack(12, seed));
    }
    (bytes, starts)
}

#[test]
fn truncated_file_keeps_the_whole_chunks_and_names_the_offset() {
    let f = Fixture::new();
    let (bytes, starts) = three_chunks();
    let cut = starts[2] + 100;
    let s = f
        .ingest(&[f.file("t.binpack", &bytes[..cut])], "trunc", 1_000_000)
        .unwrap();
    assert_eq!(s.rows as usize, reference(&bytes[..starts[2]]).len());
    assert_eq!(s.skipped.len(), 1, "{:?}", s.skipped);
    let why = &s.skipped[0];
    assert!(
        why.contains("t.binpack")
            && why.contains(&format!("byte offset {}", starts[2]))
            && why.contains("truncated"),
        "{why}"
    );
}

#[test]
fn a_chunk_with_flipped_bytes_is_skipped_and_its_neighbours_kept() {
    let f = Fixture::new();
    let (mut bytes, starts) = three_chunks();
    for b in &mut bytes[starts[1] + 8..starts[1] + 8 + 24] {
        *b ^= 0xA5;
    }
    let s = f
        .ingest(&[f.file("flip.binpack", &bytes)], "flip", 1_000_000)
        .unwrap();
    let kept = reference(&bytes[..starts[1]]).len() + reference(&bytes[starts[2]..]).len();
    assert_eq!(s.rows as usize, kept);
    assert_eq!(s.skipped.len(), 1, "{:?}", s.skipped);
    assert!(
        s.skipped[0].contains(&format!("chunk at byte offset {}", starts[1])),
        "{:?}",
        s.skipped
    );
    let rows = read_rows(&f, "flip");
    assert_matches_reference(
        &rows[..reference(&bytes[..starts[1]]).len()],
        &bytes[..starts[1]],
    );
}

#[test]
fn damaged_header_resynchronises_on_the_next_chunk() {
    let f = Fixture::new();
    let (mut bytes, starts) = three_chunks();
    bytes[starts[1]..starts[1] + 4].copy_from_slice(b"JUNK");
    let s = f
        .ingest(&[f.file("h.binpack", &bytes)], "hdr", 1_000_000)
        .unwrap();
    let kept = reference(&bytes[..starts[1]]).len() + reference(&bytes[starts[2]..]).len();
    assert_eq!(s.rows as usize, kept);
    assert!(
        s.skipped[0].contains(&format!(
            "no \"BINP\" chunk header at byte offset {}",
            starts[1]
        )),
        "{:?}",
        s.skipped
    );
}

#[test]
fn a_damaged_size_field_costs_one_chunk_not_its_neighbours() {
    let f = Fixture::new();
    let (mut bytes, starts) = three_chunks();
    // Chunk 2 claims 100 bytes more than it has: its payload would swallow chunk 3's header.
    let claimed = (starts[2] - starts[1] - 8 + 100) as u32;
    bytes[starts[1] + 4..starts[1] + 8].copy_from_slice(&claimed.to_le_bytes());
    let s = f
        .ingest(&[f.file("size.binpack", &bytes)], "size", 1_000_000)
        .unwrap();
    let kept = reference(&bytes[..starts[1]]).len() + reference(&bytes[starts[2]..]).len();
    assert_eq!(s.rows as usize, kept, "{:?}", s.skipped);
    assert_eq!(s.skipped.len(), 1, "{:?}", s.skipped);
    assert!(
        s.skipped[0].contains(&format!("byte offset {}", starts[1]))
            && s.skipped[0].contains("damaged size field"),
        "{:?}",
        s.skipped
    );
}

#[test]
fn a_dataset_claimed_by_another_live_job_is_refused_untouched() {
    let f = Fixture::new();
    let prefix = "positions/source=binpack/dataset=busy";
    let other = JobId::new();
    let live = WriterClaim::new(other.as_str(), "another-writer");
    f.rt.block_on(f.lake.put(
        &format!("{prefix}/_writer"),
        serde_json::to_vec(&live).unwrap(),
    ))
    .unwrap();
    let before = f.snapshot();
    let input = f.file("a.binpack", &synthetic_binpack(5, 1));
    let err = f
        .ingest(&[input], "busy", 1_000_000)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("being written by job")
            && err.contains(other.as_str())
            && err.contains(&live.expires),
        "{err}"
    );
    assert_eq!(f.snapshot(), before);
    let claims = f.rt.block_on(list_claims(&f.lake)).unwrap();
    assert_eq!(claims.len(), 1);
    assert!(!claims[0].stale && claims[0].claim == live, "{claims:?}");
}

/// Another delivery of the same job holds a live claim (its worker was found dead and the
/// job re-delivered): this delivery takes the claim over with its own token, writes, commits,
/// and releases it; the first delivery's token no longer holds it.
#[test]
fn a_live_claim_of_an_earlier_delivery_of_the_same_job_is_taken_over() {
    use lakefish_schemas::{DatasetName, IngestBinpackSpec};
    let f = Fixture::new();
    let job = JobId::new();
    let key = "positions/source=binpack/dataset=twice/_writer";
    let first = WriterClaim::new(job.as_str(), "first-delivery");
    f.rt.block_on(f.lake.put(key, serde_json::to_vec(&first).unwrap()))
        .unwrap();
    let spec = IngestBinpackSpec {
        max_game_bytes: None,
        inputs: vec![f.file("twice.binpack", &synthetic_binpack(5, 1))],
        dataset: DatasetName::new("twice").unwrap(),
        rows_per_part: 1_000_000,
    };
    let s = lakefish_ingest::ingest_binpack::ingest_binpack(&f.ctx(), &job, &spec).unwrap();
    assert!(s.rows > 0 && !s.already_present);
    assert_eq!(f.rt.block_on(f.lake.get(key)).unwrap(), None, "released");
}

/// A claim whose writer died (expired lease, or a bare job id from an older version that
/// can never be renewed) no longer blocks the dataset: the next ingest takes it over.
#[test]
fn a_stale_claim_is_listed_and_taken_over() {
    let f = Fixture::new();
    for (dataset, claim) in [
        (
            "expired",
            serde_json::to_vec(&WriterClaim {
                job: "dead-job".into(),
                owner: "gone-host:1".into(),
                expires: "2020-01-01T00:00:00.000Z".into(),
                token: "dead-writer".into(),
            })
            .unwrap(),
        ),
        ("legacy", b"0191f0e4-dead-7000-8000-000000000000".to_vec()),
    ] {
        let key = format!("positions/source=binpack/dataset={dataset}/_writer");
        f.rt.block_on(f.lake.put(&key, claim)).unwrap();
        let claims = f.rt.block_on(list_claims(&f.lake)).unwrap();
        let listed = claims.iter().find(|c| c.name.as_str() == dataset).unwrap();
        assert!(listed.stale, "{listed:?}");
        let input = f.file(&format!("{dataset}.binpack"), &synthetic_binpack(5, 1));
        let s = f.ingest(&[input], dataset, 1_000_000).unwrap();
        assert!(s.rows > 0 && !s.already_present);
        assert_eq!(f.rt.block_on(f.lake.get(&key)).unwrap(), None, "released");
    }
    assert_eq!(f.rt.block_on(list_claims(&f.lake)).unwrap(), vec![]);
}

/// Inputs are recognised by content, not name: a file rewritten under the same name is
/// another input, and the committed dataset is neither reported as present nor changed.
#[test]
fn an_input_rewritten_under_the_same_name_is_not_already_present() {
    let f = Fixture::new();
    let input = f.file("same-name.binpack", &synthetic_binpack(5, 1));
    let first = f
        .ingest(std::slice::from_ref(&input), "versions", 1_000_000)
        .unwrap();
    let again = f
        .ingest(std::slice::from_ref(&input), "versions", 1_000_000)
        .unwrap();
    assert!(again.already_present && again.rows == first.rows);
    let before = f.snapshot();
    std::fs::write(&input, synthetic_binpack(7, 2)).unwrap();
    let err = f
        .ingest(std::slice::from_ref(&input), "versions", 1_000_000)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("another version of input") && err.contains("same-name.binpack"),
        "{err}"
    );
    assert_eq!(f.snapshot(), before);
}

#[test]
fn not_binpack_and_empty_files_fail_clearly_and_change_nothing() {
    let f = Fixture::new();
    let good = f.file("good.binpack", &synthetic_binpack(5, 3));
    f.ingest(&[good], "keep", 1_000_000).unwrap();
    let before = f.snapshot();

    let text = f.file(
        "notes.binpack",
        &b"[Event \"not a binpack\"]\n1. e4 e5\n".repeat(50),
    );
    let err = f
        .ingest(&[text], "bad1", 1_000_000)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("notes.binpack")
            && err.contains("byte offset 0")
            && err.contains("not a binpack"),
        "{err}"
    );

    let empty = f.file("empty.binpack", b"");
    let err = f
        .ingest(&[empty], "bad2", 1_000_000)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("empty.binpack") && err.contains("empty file"),
        "{err}"
    );

    let err = f
        .ingest(&["/nonexistent/x.binpack".to_string()], "bad3", 1_000_000)
        .unwrap_err()
        .to_string();
    assert!(err.contains("/nonexistent/x.binpack"), "{err}");

    assert_eq!(
        f.snapshot(),
        before,
        "failed ingests leave the lake as it was"
    );
    assert!(!dataset_dir(&f, "bad1").exists());
}
