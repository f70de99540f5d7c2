//! Quiet masks against an independent computation (sfbinpack's own board), side by side
//! definitions, idempotence and the readers' alignment checks.

use lakefish_ingest::binpack::synthetic_binpack;
use lakefish_jobs::masks::{mask_dataset, read_mask};
use lakefish_lake::datasets::read_manifest;
use lakefish_schemas::{DatasetName, JobId, MaskDefinition, MaskName, MaskSpec, Source};
use sfbinpack::chess::r#move::MoveType;
use sfbinpack::chess::piece::Piece;
use std::path::Path;

mod common;
use common::LakeFixture;

fn mask(
    fx: &LakeFixture,
    dataset: &str,
    def: MaskDefinition,
) -> Result<lakefish_jobs::masks::MaskSummary, lakefish_jobs::JobError> {
    let spec = MaskSpec {
        dataset: DatasetName::new(dataset).unwrap(),
        source: Source::Binpack,
        definition: def,
    };
    mask_dataset(&fx.ctx(), &JobId::new(), &spec)
}

/// The mask of the whole dataset, parts in order, through the checking reader.
fn read_all(fx: &LakeFixture, dataset: &str, name: &str) -> Vec<bool> {
    let ds = DatasetName::new(dataset).unwrap();
    let m = fx
        .rt
        .block_on(read_manifest(&fx.lake, Source::Binpack, &ds))
        .unwrap()
        .unwrap();
    let name = MaskName::new(name).unwrap();
    let mut all = Vec::new();
    for part in &m.parts {
        all.extend(
            fx.rt
                .block_on(read_mask(&fx.lake, &name, Source::Binpack, &ds, part))
                .unwrap(),
        );
    }
    all
}

/// Quiet by sfbinpack's board (no shakmaty): not in check, no capture, no promotion, scored.
fn independent_quiet(bytes: &[u8], min_ply: u16) -> Vec<bool> {
    let mut r = sfbinpack::CompressedTrainingDataEntryReader::from_slice(bytes).unwrap();
    let mut out = Vec::new();
    while r.has_next() {
        let e = r.next();
        let stm = e.pos.side_to_move();
        let capture = match e.mv.mtype() {
            MoveType::EnPassant => true,
            MoveType::Castle => false,
            _ => e.pos.piece_at(e.mv.to()) != Piece::none(),
        };
        let promotion = e.mv.mtype() == MoveType::Promotion;
        out.push(
            e.score != 32002
                && e.ply >= min_ply
                && !e.pos.is_checked(stm)
                && !capture
                && !promotion,
        );
    }
    out
}

fn sample() -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/binpack/small.binpack");
    if p.exists() {
        std::fs::read(p).unwrap()
    } else {
        [synthetic_binpack(200, 1), synthetic_binpack(200, 2)].concat()
    }
}

#[test]
fn quiet_mask_matches_an_independent_computation() {
    for bytes in [
        sample(),
        [synthetic_binpack(150, 3), synthetic_binpack(150, 4)].concat(),
    ] {
        let fx = LakeFixture::new();
        fx.ingest_bytes(&bytes, "d", 50_000);
        let s = mask(&fx, "d", MaskDefinition::quiet()).unwrap();
        let want = independent_quiet(&bytes, 0);
        assert_eq!(s.rows as usize, want.len());
        assert_eq!(s.selected as usize, want.iter().filter(|&&k| k).count());
        assert!(s.selected > 0 && (s.selected as usize) < want.len());
        assert_eq!(read_all(&fx, "d", "quiet"), want);
    }
}

#[test]
fn a_second_definition_leaves_data_and_other_masks_alone_and_reruns_change_nothing() {
    let fx = LakeFixture::new();
    let bytes = [synthetic_binpack(120, 5), synthetic_binpack(120, 6)].concat();
    fx.ingest_bytes(&bytes, "d", 2_000);
    mask(&fx, "d", MaskDefinition::quiet()).unwrap();
    let before = fx.snapshot();

    let late = MaskDefinition {
        name: MaskName::new("quiet-ply16").unwrap(),
        min_ply: Some(16),
        max_abs_score: None,
        ..MaskDefinition::quiet()
    };
    let s = mask(&fx, "d", late.clone()).unwrap();
    assert_eq!(
        read_all(&fx, "d", "quiet-ply16"),
        independent_quiet(&bytes, 16)
    );
    assert!(s.selected > 0);
    let after = fx.snapshot();
    for (k, v) in &before {
        assert!(after.get(k) == Some(v), "{k} changed");
    }
    assert!(after.keys().any(|k| k.starts_with("masks/quiet-ply16/")));

    let again = mask(&fx, "d", late).unwrap();
    assert!(again.already_present);
    assert_eq!(fx.snapshot(), after, "a second run changes nothing");

    let clash = MaskDefinition {
        name: MaskName::new("quiet").unwrap(),
        min_ply: Some(4),
        max_abs_score: None,
        ..MaskDefinition::quiet()
    };
    let e = mask(&fx, "d", clash).unwrap_err().to_string();
    assert!(e.contains("another definition"), "{e}");
    assert_eq!(fx.snapshot(), after);
}

#[test]
fn readers_refuse_missing_and_misaligned_masks() {
    let fx = LakeFixture::new();
    fx.ingest_bytes(
        &[synthetic_binpack(60, 7), synthetic_binpack(60, 8)].concat(),
        "d",
        1_000,
    );
    mask(&fx, "d", MaskDefinition::quiet()).unwrap();
    let ds = DatasetName::new("d").unwrap();
    let m = fx
        .rt
        .block_on(read_manifest(&fx.lake, Source::Binpack, &ds))
        .unwrap()
        .unwrap();
    assert!(m.parts.len() >= 2);
    let quiet = MaskName::new("quiet").unwrap();
    let (p0, p1) = (&m.parts[0], &m.parts[1]);
    let k0 = format!("masks/quiet/source=binpack/dataset=d/{}", p0.name);
    let k1 = format!("masks/quiet/source=binpack/dataset=d/{}", p1.name);

    // Part 1's mask copied over part 0's: a different length.
    if p0.rows != p1.rows {
        let other = fx.rt.block_on(fx.lake.get(&k1)).unwrap().unwrap();
        fx.rt.block_on(fx.lake.put(&k0, other)).unwrap();
        let e = fx
            .rt
            .block_on(read_mask(&fx.lake, &quiet, Source::Binpack, &ds, p0))
            .unwrap_err()
            .to_string();
        assert!(e.contains(&k0) && e.contains("does not belong"), "{e}");
    }
    fx.rt.block_on(fx.lake.delete(&k0)).unwrap();
    let e = fx
        .rt
        .block_on(read_mask(&fx.lake, &quiet, Source::Binpack, &ds, p0))
        .unwrap_err()
        .to_string();
    assert!(e.contains(&k0) && e.contains("missing"), "{e}");
}

#[test]
fn masking_a_dataset_that_does_not_exist_says_so() {
    let fx = LakeFixture::new();
    let e = mask(&fx, "nothing-here", MaskDefinition::quiet())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("dataset=nothing-here") && e.contains("no such dataset"),
        "{e}"
    );
    assert!(fx.snapshot().is_empty());
}
