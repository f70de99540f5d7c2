//! The two-pass shuffle: exactly the selected rows, spread across chunks, byte-identical for
//! the same inputs and seed whatever the order the passes ran in.

use lakefish_ingest::binpack::synthetic_binpack;
use lakefish_jobs::masks::mask_dataset;
use lakefish_jobs::shuffle::{commit, deal_part, shuffle_here, shuffle_pile, start};
use lakefish_lake::parts::{PositionRow, read_positions};
use lakefish_schemas::{
    DatasetName, JobId, MaskDefinition, MaskName, MaskSpec, ShuffleSpec, Source,
};
use std::collections::{BTreeMap, HashMap};

mod common;
use common::{LakeFixture, snapshot_dir};

/// Two datasets of generated games, several parts each, with quiet masks when `mask`.
fn with_data(mask: bool) -> LakeFixture {
    let fx = LakeFixture::new();
    for (name, seed) in [("a", 11u64), ("b", 12)] {
        let bytes = [
            synthetic_binpack(80, seed),
            synthetic_binpack(80, seed + 100),
        ]
        .concat();
        fx.ingest_bytes(&bytes, name, 3_000);
        if mask {
            let m = MaskSpec {
                dataset: DatasetName::new(name).unwrap(),
                source: Source::Binpack,
                definition: MaskDefinition::quiet(),
            };
            mask_dataset(&fx.ctx(), &JobId::new(), &m).unwrap();
        }
    }
    fx
}

fn files(fx: &LakeFixture, prefix: &str) -> BTreeMap<String, Vec<u8>> {
    snapshot_dir(&fx.path(prefix))
}

/// The chunk files of shuffle `id`, by name.
fn chunks_of(fx: &LakeFixture, id: &str) -> BTreeMap<String, Vec<u8>> {
    files(fx, &format!("shuffled/{id}"))
        .into_iter()
        .filter(|(k, _)| k.starts_with("chunk-"))
        .collect()
}

/// The rows the quiet masks select, dataset by dataset, part by part.
fn selected_rows(fx: &LakeFixture) -> Vec<PositionRow> {
    selected_rows_of(fx, &["a", "b"])
}

fn selected_rows_of(fx: &LakeFixture, datasets: &[&str]) -> Vec<PositionRow> {
    let mut rows = Vec::new();
    for &ds in datasets {
        let dir = fx.path(&format!("positions/source=binpack/dataset={ds}"));
        let mut parts: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
            .collect();
        parts.sort();
        for p in parts {
            let data = read_positions(std::fs::read(&p).unwrap().into(), "part").unwrap();
            let mask_path = fx
                .path(&format!("masks/quiet/source=binpack/dataset={ds}"))
                .join(p.file_name().unwrap());
            let keep = mask_of(&std::fs::read(mask_path).unwrap());
            rows.extend(
                data.into_iter()
                    .zip(keep)
                    .filter(|(_, k)| *k)
                    .map(|(r, _)| r),
            );
        }
    }
    rows
}

fn mask_of(bytes: &[u8]) -> Vec<bool> {
    use arrow_array::{Array, BooleanArray};
    let r = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        bytes::Bytes::copy_from_slice(bytes),
    )
    .unwrap()
    .build()
    .unwrap();
    let mut v = Vec::new();
    for b in r {
        let b = b.unwrap();
        let c = b
            .column(0)
            .as_any()
            .downcast_ref::<BooleanArray>()
            .unwrap()
            .clone();
        v.extend((0..c.len()).map(|i| c.value(i)));
    }
    v
}

fn spec(chunks: u32, seed: u64) -> ShuffleSpec {
    ShuffleSpec {
        datasets: vec![
            DatasetName::new("a").unwrap(),
            DatasetName::new("b").unwrap(),
        ],
        source: Source::Binpack,
        mask: MaskName::new("quiet").unwrap(),
        chunks,
        seed,
        extra: Vec::new(),
    }
}

fn row_hash(r: &PositionRow) -> u64 {
    let text = format!(
        "{}|{:?}|{}|{:?}|{}|{}",
        r.fen, r.score, r.mv, r.result, r.ply, r.game_id
    );
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// A batch in chunk layout (`board`) back in the `positions` layout (`fen`), as deal files
/// were before packed boards.
fn with_fen_text(b: &arrow_array::RecordBatch) -> arrow_array::RecordBatch {
    use arrow_array::{Array, FixedSizeBinaryArray, StringArray};
    use lakefish_engine::packed_board::{from_bytes, unpack_fen};
    let board = b
        .column_by_name("board")
        .unwrap()
        .as_any()
        .downcast_ref::<FixedSizeBinaryArray>()
        .unwrap();
    let fens: Vec<String> = (0..board.len())
        .map(|i| unpack_fen(from_bytes(board.value(i)).unwrap()).unwrap())
        .collect();
    let schema = lakefish_schemas::positions::schema();
    let columns = schema
        .fields()
        .iter()
        .map(|f| match f.name().as_str() {
            "fen" => std::sync::Arc::new(StringArray::from(fens.clone())) as arrow_array::ArrayRef,
            name => b.column_by_name(name).unwrap().clone(),
        })
        .collect();
    arrow_array::RecordBatch::try_new(schema, columns).unwrap()
}

/// A chunk's rows as `positions` rows: FENs printed from the packed boards.
fn chunk_rows(chunks: &BTreeMap<String, Vec<u8>>) -> Vec<Vec<PositionRow>> {
    use arrow_array::{Array, FixedSizeBinaryArray, Int8Array, Int16Array, StringArray};
    use arrow_array::{UInt16Array, UInt64Array};
    use lakefish_engine::packed_board::{from_bytes, unpack_fen};
    fn col<'a, T: 'static>(b: &'a arrow_array::RecordBatch, name: &str) -> &'a T {
        b.column_by_name(name)
            .unwrap_or_else(|| panic!("column {name}"))
            .as_any()
            .downcast_ref::<T>()
            .unwrap()
    }
    chunks
        .iter()
        .filter(|(k, _)| k.starts_with("chunk-"))
        .map(|(_, v)| {
            let b = lakefish_lake::parts::read_chunk(v.clone().into(), &[]).unwrap();
            assert!(b.column_by_name("fen").is_none(), "no FEN text in chunks");
            let board = col::<FixedSizeBinaryArray>(&b, "board");
            let (score, mv) = (
                col::<Int16Array>(&b, "score"),
                col::<StringArray>(&b, "move"),
            );
            let result = col::<Int8Array>(&b, "result");
            let (ply, game) = (
                col::<UInt16Array>(&b, "ply"),
                col::<UInt64Array>(&b, "game_id"),
            );
            (0..b.num_rows())
                .map(|i| PositionRow {
                    fen: unpack_fen(from_bytes(board.value(i)).unwrap()).unwrap(),
                    score: score.is_valid(i).then(|| score.value(i)),
                    mv: mv.value(i).to_string(),
                    result: result.is_valid(i).then(|| result.value(i)),
                    ply: ply.value(i),
                    game_id: game.value(i),
                })
                .collect()
        })
        .collect()
}

#[test]
fn chunks_hold_exactly_the_selected_rows_spread_over_the_chunks() {
    let fx = with_data(true);
    let m = shuffle_here(&fx.ctx(), &spec(8, 42)).unwrap();
    let want = selected_rows(&fx);
    assert_eq!(m.rows as usize, want.len());
    assert_eq!(m.chunks.len(), 8);
    let files = files(&fx, &format!("shuffled/{}", m.id));
    let chunks = chunk_rows(&files);
    let got: Vec<&PositionRow> = chunks.iter().flatten().collect();
    assert_eq!(got.len(), want.len(), "row count");
    let sum = |rows: &mut dyn Iterator<Item = &PositionRow>| {
        rows.fold(0u64, |a, r| a.wrapping_add(row_hash(r)))
    };
    assert_eq!(
        sum(&mut got.iter().copied()),
        sum(&mut want.iter()),
        "order-independent checksum"
    );
    // No pass-1 leftovers once committed.
    assert!(
        !fx.dir
            .path()
            .join(format!("lake/shuffled/{}/_deal", m.id))
            .exists()
    );

    // Chunk sizes near uniform, and a game's rows spread: with 8 chunks a game's largest share
    // in one chunk is about 1/4 for 30 rows; an unshuffled layout would put them all in one.
    let mean = want.len() as f64 / 8.0;
    for c in &chunks {
        assert!(
            (c.len() as f64 - mean).abs() < 0.25 * mean,
            "chunk of {} rows, mean {mean}",
            c.len()
        );
    }
    let mut per_game: HashMap<u64, HashMap<usize, usize>> = HashMap::new();
    for (ci, c) in chunks.iter().enumerate() {
        for r in c {
            *per_game
                .entry(r.game_id)
                .or_default()
                .entry(ci)
                .or_default() += 1;
        }
    }
    let shares: Vec<f64> = per_game
        .values()
        .filter(|m| m.values().sum::<usize>() >= 16)
        .map(|m| *m.values().max().unwrap() as f64 / m.values().sum::<usize>() as f64)
        .collect();
    assert!(shares.len() > 50, "{} games with 16+ rows", shares.len());
    let mean_share = shares.iter().sum::<f64>() / shares.len() as f64;
    assert!(mean_share < 0.4, "mean largest share {mean_share}");
    // Within a chunk, neighbours rarely come from the same game.
    let same_game_neighbours: usize = chunks
        .iter()
        .map(|c| {
            c.windows(2)
                .filter(|w| w[0].game_id == w[1].game_id)
                .count()
        })
        .sum();
    assert!(
        (same_game_neighbours as f64) < 0.05 * want.len() as f64,
        "{same_game_neighbours}"
    );
}

#[test]
fn same_seed_same_bytes_in_any_order_other_seed_other_order() {
    let a = with_data(true);
    let ma = shuffle_here(&a.ctx(), &spec(5, 7)).unwrap();
    let chunks_a = chunks_of(&a, &ma.id);

    // Another lake, the passes run one by one in reverse order (as workers might).
    let b = with_data(true);
    let ctx = b.ctx();
    let plan = start(&ctx, &spec(5, 7)).unwrap();
    for i in (0..plan.parts.len()).rev() {
        deal_part(&ctx, &plan, i).unwrap();
        deal_part(&ctx, &plan, i).unwrap(); // delivered twice
    }
    for p in (0..5).rev() {
        shuffle_pile(&ctx, &plan, p).unwrap();
    }
    let mb = commit(&ctx, &plan).unwrap();
    // Late duplicates after the commit removed the pass-1 files: a pile keeps its committed
    // chunk, and a second commit (two last piles racing) returns the same manifest.
    assert_eq!(shuffle_pile(&ctx, &plan, 2).unwrap(), mb.chunks[2]);
    assert_eq!(commit(&ctx, &plan).unwrap(), mb);
    let chunks_b = chunks_of(&b, &mb.id);
    assert_eq!(chunks_a.len(), 5);
    assert!(chunks_a == chunks_b, "byte-identical chunks");

    // A different seed: same rows, different order.
    let mc = shuffle_here(&a.ctx(), &spec(5, 8)).unwrap();
    assert_ne!(mc.id, ma.id);
    let chunks_c = chunks_of(&a, &mc.id);
    assert!(chunks_c != chunks_a);
    assert_eq!(mc.rows, ma.rows);

    // Running the same shuffle again changes nothing.
    let before = files(&a, &format!("shuffled/{}", ma.id));
    let again = shuffle_here(&a.ctx(), &spec(5, 7)).unwrap();
    assert_eq!(again, ma);
    assert!(files(&a, &format!("shuffled/{}", ma.id)) == before);
}

#[test]
fn a_shuffle_without_masks_or_data_fails_clearly_and_writes_nothing() {
    let fx = with_data(false);
    let e = shuffle_here(&fx.ctx(), &spec(4, 1))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("has no mask quiet") && e.contains("lakefish mask"),
        "{e}"
    );
    let mut s = spec(4, 1);
    s.datasets = vec![DatasetName::new("missing").unwrap()];
    let e = shuffle_here(&fx.ctx(), &s).unwrap_err().to_string();
    assert!(
        e.contains("dataset=missing") && e.contains("no such dataset"),
        "{e}"
    );
    // A name that exists under another source says which (issue 35, item 10).
    let mut s = spec(4, 1);
    s.source = Source::Lichess;
    let e = shuffle_here(&fx.ctx(), &s).unwrap_err().to_string();
    assert!(e.contains("exists with source binpack"), "{e}");
    // A mask that keeps no row (a PGN without [%eval] has no scores, so nothing is quiet):
    // refused before any chunk is written, not a shuffle of empty chunks (issue 35, item 6).
    for name in ["a", "b"] {
        let mut none = MaskDefinition::quiet();
        none.name = MaskName::new("none").unwrap();
        none.min_ply = Some(u16::MAX);
        let m = MaskSpec {
            dataset: DatasetName::new(name).unwrap(),
            source: Source::Binpack,
            definition: none,
        };
        mask_dataset(&fx.ctx(), &JobId::new(), &m).unwrap();
    }
    let mut s = spec(4, 1);
    s.mask = MaskName::new("none").unwrap();
    let e = shuffle_here(&fx.ctx(), &s).unwrap_err().to_string();
    assert!(
        e.contains("mask none keeps no row") && e.contains("[%eval]"),
        "{e}"
    );
    assert!(!fx.dir.path().join("lake/shuffled").exists());
}

/// A deal file damaged between the passes (a truncated upload): pass 2 for its pile fails
/// naming the file, and no chunk for that pile appears.
#[test]
fn a_damaged_deal_file_is_named_and_its_pile_writes_no_chunk() {
    let fx = with_data(true);
    let ctx = fx.ctx();
    let plan = start(&ctx, &spec(3, 7)).unwrap();
    for i in 0..plan.parts.len() {
        deal_part(&ctx, &plan, i).unwrap();
    }
    let pile_dir = fx.path(&format!("shuffled/{}/_deal/pile-00001", plan.id));
    let victim = std::fs::read_dir(&pile_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .min()
        .unwrap();
    let bytes = std::fs::read(&victim).unwrap();
    std::fs::write(&victim, &bytes[..bytes.len() / 2]).unwrap();
    let e = shuffle_pile(&ctx, &plan, 1).unwrap_err().to_string();
    let name = victim.file_name().unwrap().to_str().unwrap();
    assert!(e.contains(name) && e.contains("deal file"), "{e}");
    let chunk = lakefish_schemas::shuffle::chunk_file_name(1);
    assert!(!fx.path(&format!("shuffled/{}/{chunk}", plan.id)).exists());
    // The other piles are unaffected.
    shuffle_pile(&ctx, &plan, 0).unwrap();
}

/// A shuffle dealt (partly) by an older version, whose deal files were Parquet: pass 2 reads
/// them, a part dealt in both formats counts once, and the chunks are byte-identical to a
/// shuffle dealt entirely in the current format.
#[test]
fn deal_files_of_the_older_parquet_format_are_read_once() {
    let a = with_data(true);
    let ma = shuffle_here(&a.ctx(), &spec(3, 9)).unwrap();
    let chunks_a = chunks_of(&a, &ma.id);

    let b = with_data(true);
    let ctx = b.ctx();
    let plan = start(&ctx, &spec(3, 9)).unwrap();
    for i in 0..plan.parts.len() {
        deal_part(&ctx, &plan, i).unwrap();
    }
    // Pile 0: every deal file rewritten as Parquet (the old format). Pile 1: a Parquet twin
    // beside each deal file.
    for (pile, keep_new) in [(0, false), (1, true)] {
        let dir = b.path(&format!("shuffled/{}/_deal/pile-{pile:05}", plan.id));
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let reader =
                arrow_ipc::reader::FileReader::try_new(std::fs::File::open(&path).unwrap(), None)
                    .unwrap();
            let batches: Vec<_> = reader.map(Result::unwrap).collect();
            assert_eq!(batches.len(), 1);
            // Old deal files had FEN text, no packed boards: pass 2 packs them.
            let old = with_fen_text(&batches[0]);
            let bytes = lakefish_lake::parts::encode_parquet(&old, "t").unwrap();
            std::fs::write(path.with_extension("parquet"), bytes).unwrap();
            if !keep_new {
                std::fs::remove_file(&path).unwrap();
            }
        }
    }
    for p in 0..3 {
        shuffle_pile(&ctx, &plan, p).unwrap();
    }
    let mb = commit(&ctx, &plan).unwrap();
    assert_eq!(mb.rows, ma.rows);
    let chunks_b = chunks_of(&b, &mb.id);
    assert!(chunks_a == chunks_b, "byte-identical chunks");
}

/// Every chunk row carries its position packed (layout named in the file, no FEN text), and
/// the packed boards print back as exactly the rows' FENs: on generated games and, where
/// ../shared has it, on the real binpack sample. `chunk_rows_as_text` reads the boards.
#[test]
fn chunks_carry_packed_boards_that_print_back_as_their_fens() {
    use lakefish_engine::packed_board::PACKED_BOARD_LAYOUT;
    assert_eq!(
        PACKED_BOARD_LAYOUT,
        lakefish_schemas::positions::BOARD_LAYOUT
    );
    let fx = with_data(true);
    let real = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/data/binpack/small.binpack");
    let mut datasets = vec!["a", "b"];
    if real.exists() {
        fx.ingest(&[real.to_str().unwrap().to_string()], "real", 50_000)
            .unwrap();
        let m = MaskSpec {
            dataset: DatasetName::new("real").unwrap(),
            source: Source::Binpack,
            definition: MaskDefinition::quiet(),
        };
        mask_dataset(&fx.ctx(), &JobId::new(), &m).unwrap();
        datasets.push("real");
    }
    let mut s = spec(4, 5);
    s.datasets = datasets
        .iter()
        .map(|d| DatasetName::new(d).unwrap())
        .collect();
    let m = shuffle_here(&fx.ctx(), &s).unwrap();
    let files = chunks_of(&fx, &m.id);
    for (name, bytes) in &files {
        let reader =
            parquet::file::reader::SerializedFileReader::new(bytes::Bytes::from(bytes.clone()))
                .unwrap();
        let meta = parquet::file::reader::FileReader::metadata(&reader)
            .file_metadata()
            .key_value_metadata()
            .cloned()
            .unwrap_or_default();
        assert!(
            meta.iter().any(|kv| kv.key == "lakefish.board_layout"
                && kv.value.as_deref() == Some(PACKED_BOARD_LAYOUT)),
            "{name}: {meta:?}"
        );
    }
    // The decoded rows are exactly the selected rows, FEN text included.
    let want = selected_rows_of(&fx, &datasets);
    let got: Vec<PositionRow> = chunk_rows(&files).into_iter().flatten().collect();
    assert_eq!(got.len(), want.len());
    if datasets.contains(&"real") {
        assert!(got.len() > 100_000, "the real sample's quiet rows are in");
    }
    let mut a: Vec<String> = got.iter().map(|r| format!("{r:?}")).collect();
    let mut b: Vec<String> = want.iter().map(|r| format!("{r:?}")).collect();
    a.sort_unstable();
    b.sort_unstable();
    assert!(a == b, "the chunks' rows differ from the selected rows");
    // A chunk whose boards are of another layout is refused, not misread.
    let (name, bytes) = files.iter().next().unwrap();
    let batch = lakefish_lake::parts::read_chunk(bytes.clone().into(), &[]).unwrap();
    let other = lakefish_lake::parts::encode_parquet_with(
        &batch,
        name,
        1,
        lakefish_lake::parts::chunk_writer_properties("lakefish-packed-board-v9"),
    )
    .unwrap();
    let e = lakefish_lake::parts::read_chunk(other.into(), &["board"]).unwrap_err();
    assert!(e.contains("lakefish-packed-board-v9"), "{e}");
    let text = lakefish_jobs::chunks::chunk_rows_as_text(&fx.ctx(), &m.id, 1, 5).unwrap();
    assert_eq!(text.len(), 5);
    assert!(
        text.iter()
            .all(|r| r.packed && r.fen.split(' ').count() == 6)
    );
    // Outside input is refused by name, not looked up: a path is not a shuffle id at all.
    let e = lakefish_schemas::names::ShuffleId::new("../etc").unwrap_err();
    assert!(e.to_string().contains("../etc"), "{e}");
    for (id, index) in [("sh-000000000000", 0), (m.id.as_str(), 99)] {
        let id = lakefish_schemas::names::ShuffleId::new(id).unwrap();
        let e = lakefish_jobs::chunks::chunk_rows_as_text(&fx.ctx(), &id, index, 5)
            .unwrap_err()
            .to_string();
        assert!(e.contains(id.as_str()), "{e}");
    }
}
