//! The two-pass shuffle: exactly the selected rows, spread across chunks, byte-identical for
//! the same inputs and seed whatever the order the passes ran in.

use lakefish_jobs::binpack::synthetic_binpack;
use lakefish_jobs::ingest_binpack::ingest_binpack;
use lakefish_jobs::masks::mask_dataset;
use lakefish_jobs::parts::{PositionRow, read_positions};
use lakefish_jobs::shuffle::{commit, deal_part, shuffle_here, shuffle_pile, start};
use lakefish_jobs::{JobContext, Lake};
use lakefish_schemas::{
    DatasetName, IngestBinpackSpec, JobId, MaskDefinition, MaskName, MaskSpec, ShuffleSpec, Source,
};
use std::collections::{BTreeMap, HashMap};

struct Fx {
    dir: tempfile::TempDir,
    lake: Lake,
    rt: tokio::runtime::Runtime,
}

impl Fx {
    fn new() -> Fx {
        let dir = tempfile::tempdir().unwrap();
        let lake = Lake::open(dir.path().join("lake").to_str().unwrap(), &HashMap::new()).unwrap();
        Fx {
            dir,
            lake,
            rt: tokio::runtime::Runtime::new().unwrap(),
        }
    }

    fn ctx(&self) -> JobContext {
        JobContext::new(self.lake.clone(), self.rt.handle().clone())
    }

    /// Two datasets of generated games, several parts each, with quiet masks.
    fn with_data(self, mask: bool) -> Fx {
        for (name, seed) in [("a", 11u64), ("b", 12)] {
            let p = self.dir.path().join(format!("{name}.binpack"));
            std::fs::write(
                &p,
                [
                    synthetic_binpack(80, seed),
                    synthetic_binpack(80, seed + 100),
                ]
                .concat(),
            )
            .unwrap();
            let spec = IngestBinpackSpec {
                inputs: vec![p.to_str().unwrap().into()],
                dataset: DatasetName::new(name).unwrap(),
                rows_per_part: 3_000,
            };
            ingest_binpack(&self.ctx(), &JobId::new(), &spec).unwrap();
            if mask {
                let m = MaskSpec {
                    dataset: DatasetName::new(name).unwrap(),
                    source: Source::Binpack,
                    definition: MaskDefinition::quiet(),
                };
                mask_dataset(&self.ctx(), &JobId::new(), &m).unwrap();
            }
        }
        self
    }

    fn files(&self, prefix: &str) -> BTreeMap<String, Vec<u8>> {
        let root = self.dir.path().join("lake").join(prefix);
        let mut out = BTreeMap::new();
        if let Ok(rd) = std::fs::read_dir(&root) {
            for e in rd {
                let p = e.unwrap().path();
                if p.is_file() {
                    out.insert(
                        p.file_name().unwrap().to_string_lossy().into_owned(),
                        std::fs::read(&p).unwrap(),
                    );
                }
            }
        }
        out
    }

    fn selected_rows(&self) -> Vec<PositionRow> {
        let mut rows = Vec::new();
        for ds in ["a", "b"] {
            let dir = self
                .dir
                .path()
                .join(format!("lake/positions/source=binpack/dataset={ds}"));
            let mut parts: Vec<_> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
                .collect();
            parts.sort();
            for p in parts {
                let data = read_positions(std::fs::read(&p).unwrap().into(), "part").unwrap();
                let mask_path = self
                    .dir
                    .path()
                    .join(format!("lake/masks/quiet/source=binpack/dataset={ds}"))
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

fn chunk_rows(chunks: &BTreeMap<String, Vec<u8>>) -> Vec<Vec<PositionRow>> {
    chunks
        .iter()
        .filter(|(k, _)| k.starts_with("chunk-"))
        .map(|(k, v)| read_positions(v.clone().into(), k).unwrap())
        .collect()
}

#[test]
fn chunks_hold_exactly_the_selected_rows_spread_over_the_chunks() {
    let fx = Fx::new().with_data(true);
    let m = shuffle_here(&fx.ctx(), &JobId::new(), &spec(8, 42)).unwrap();
    let want = fx.selected_rows();
    assert_eq!(m.rows as usize, want.len());
    assert_eq!(m.chunks.len(), 8);
    let files = fx.files(&format!("shuffled/{}", m.id));
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
    let a = Fx::new().with_data(true);
    let ma = shuffle_here(&a.ctx(), &JobId::new(), &spec(5, 7)).unwrap();
    let chunks_a: BTreeMap<_, _> = a
        .files(&format!("shuffled/{}", ma.id))
        .into_iter()
        .filter(|(k, _)| k.starts_with("chunk-"))
        .collect();

    // Another lake, the passes run one by one in reverse order (as workers might).
    let b = Fx::new().with_data(true);
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
    let chunks_b: BTreeMap<_, _> = b
        .files(&format!("shuffled/{}", mb.id))
        .into_iter()
        .filter(|(k, _)| k.starts_with("chunk-"))
        .collect();
    assert_eq!(chunks_a.len(), 5);
    assert!(chunks_a == chunks_b, "byte-identical chunks");

    // A different seed: same rows, different order.
    let mc = shuffle_here(&a.ctx(), &JobId::new(), &spec(5, 8)).unwrap();
    assert_ne!(mc.id, ma.id);
    let chunks_c: BTreeMap<_, _> = a
        .files(&format!("shuffled/{}", mc.id))
        .into_iter()
        .filter(|(k, _)| k.starts_with("chunk-"))
        .collect();
    assert!(chunks_c != chunks_a);
    assert_eq!(mc.rows, ma.rows);

    // Running the same shuffle again changes nothing.
    let before = a.files(&format!("shuffled/{}", ma.id));
    let again = shuffle_here(&a.ctx(), &JobId::new(), &spec(5, 7)).unwrap();
    assert_eq!(again, ma);
    assert!(a.files(&format!("shuffled/{}", ma.id)) == before);
}

#[test]
fn a_shuffle_without_masks_or_data_fails_clearly_and_writes_nothing() {
    let fx = Fx::new().with_data(false);
    let e = shuffle_here(&fx.ctx(), &JobId::new(), &spec(4, 1))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("has no mask quiet") && e.contains("lakefish mask"),
        "{e}"
    );
    let mut s = spec(4, 1);
    s.datasets = vec![DatasetName::new("missing").unwrap()];
    let e = shuffle_here(&fx.ctx(), &JobId::new(), &s)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("dataset=missing") && e.contains("no such dataset"),
        "{e}"
    );
    assert!(!fx.dir.path().join("lake/shuffled").exists());
}
