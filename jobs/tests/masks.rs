//! Quiet masks against an independent computation (sfbinpack's own board), side by side
//! definitions, idempotence and the readers' alignment checks.

use lakefish_ingest::binpack::synthetic_binpack;
use lakefish_jobs::masks::{mask_dataset, read_mask};
use lakefish_lake::datasets::read_manifest;
use lakefish_schemas::{DatasetName, JobId, MaskDefinition, MaskName, MaskSpec, Source};
use sfbinpack::chess::r#move::MoveType;
use sfbinpack::chess::piece::Piece;

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

/// A binpack's entries as sfbinpack decodes them.
fn binpack_entries(bytes: &[u8]) -> Vec<Plain> {
    let mut r = sfbinpack::CompressedTrainingDataEntryReader::from_slice(bytes).unwrap();
    let mut entries = Vec::new();
    while r.has_next() {
        let e = r.next();
        entries.push(Plain {
            fen: e.pos.fen().unwrap(),
            mv: e.mv.as_uci(),
            score: e.score,
            ply: e.ply,
            result: e.result as i8,
        });
    }
    entries
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
    if let Some(p) = lakefish_testkit::shared_data("binpack/small.binpack") {
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

/// One exported record as a reader written from the formats' descriptions sees it.
#[derive(Debug, PartialEq)]
struct Plain {
    fen: String,
    mv: String,
    score: i16,
    ply: u16,
    result: i8,
}

/// Stockfish's plain text: `key value` lines, a record ended by `e`.
fn read_plain(text: &str) -> Vec<Plain> {
    let mut out = Vec::new();
    let mut cur: std::collections::HashMap<&str, &str> = Default::default();
    for line in text.lines() {
        if line == "e" {
            out.push(Plain {
                fen: cur["fen"].to_string(),
                mv: cur["move"].to_string(),
                score: cur["score"].parse().unwrap(),
                ply: cur["ply"].parse().unwrap(),
                result: cur["result"].parse().unwrap(),
            });
            cur.clear();
            continue;
        }
        let (k, v) = line.split_once(' ').unwrap();
        assert!(cur.insert(k, v).is_none(), "{k} twice in a record");
    }
    assert!(cur.is_empty(), "a record without its e line");
    out
}

/// Data out (issue 45): a dataset written as Stockfish's plain text and read back by the
/// reader above gives the input's entries as sfbinpack decodes them (unscored ones counted
/// out); through the quiet mask, exactly the quiet entries; as bullet's text, the same
/// positions with the result and the score's sign from White's point of view. A missing
/// dataset or mask is refused by name.
#[test]
fn exports_read_back_as_the_input_decoded_independently() {
    use lakefish_jobs::export::{ExportFormat, export_dataset};
    let fx = LakeFixture::new();
    let bytes = [synthetic_binpack(150, 7), synthetic_binpack(150, 8)].concat();
    fx.ingest_bytes(&bytes, "d", 2_000);
    mask(&fx, "d", MaskDefinition::quiet()).unwrap();
    let entries = binpack_entries(&bytes);
    let ds = DatasetName::new("d").unwrap();
    let export = |mask: Option<&str>, format| {
        let mut out = Vec::new();
        let m = mask.map(|m| MaskName::new(m).unwrap());
        let s = export_dataset(
            &fx.ctx(),
            Source::Binpack,
            &ds,
            m.as_ref(),
            format,
            &mut out,
            |_, _| {},
        )
        .unwrap();
        assert_eq!(s.bytes as usize, out.len());
        (s, String::from_utf8(out).unwrap())
    };
    let (s, text) = export(None, ExportFormat::Plain);
    let scored: Vec<&Plain> = entries.iter().filter(|e| e.score != 32002).collect();
    let read = read_plain(&text);
    assert_eq!(read.iter().collect::<Vec<_>>(), scored);
    assert_eq!(s.rows_read as usize, entries.len());
    assert_eq!(s.no_score as usize, entries.len() - scored.len());
    assert!(scored.len() > 1000);

    let quiet = independent_quiet(&bytes, 0);
    let (s, text) = export(Some("quiet"), ExportFormat::Plain);
    let want: Vec<&Plain> = entries
        .iter()
        .zip(&quiet)
        .filter(|(_, q)| **q)
        .map(|(e, _)| e)
        .collect();
    assert_eq!(read_plain(&text).iter().collect::<Vec<_>>(), want);
    assert_eq!(s.masked_out as usize, quiet.iter().filter(|q| !**q).count());

    let (_, text) = export(None, ExportFormat::BulletText);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), scored.len());
    for (line, e) in lines.iter().zip(&scored) {
        let f: Vec<&str> = line.split(" | ").collect();
        assert_eq!(f.len(), 3, "{line}");
        assert_eq!(f[0], e.fen);
        let white = e.fen.split(' ').nth(1) == Some("w");
        let sign = if white { 1 } else { -1 };
        let cp: i32 = f[1].parse().unwrap();
        if cp == 0 {
            // Less than half a centipawn (a pawn is about 330 internal units).
            assert!(e.score.abs() <= 2, "{line}: {}", e.score);
        } else {
            assert_eq!(cp.signum(), (i32::from(e.score) * sign).signum(), "{line}");
        }
        let want = match e.result * sign as i8 {
            1 => "1.0",
            0 => "0.5",
            _ => "0.0",
        };
        assert_eq!(f[2], want, "{line}");
    }

    // binpack, decoded by sfbinpack (what ingest and bullet's SfBinpackLoader read): the
    // scored entries, chains re-formed by its writer.
    let mut bytes_out = Vec::new();
    let s = export_dataset(
        &fx.ctx(),
        Source::Binpack,
        &ds,
        None,
        ExportFormat::Binpack,
        &mut bytes_out,
        |_, _| {},
    )
    .unwrap();
    assert_eq!(s.bytes as usize, bytes_out.len());
    assert_eq!(
        binpack_entries(&bytes_out).iter().collect::<Vec<_>>(),
        scored
    );
    assert!(
        bytes_out.len() < bytes.len() * 2,
        "chained: {} bytes from {}",
        bytes_out.len(),
        bytes.len()
    );

    // bulletformat: the bytes bulletformat's own converter makes of the bullet-text export
    // (bullet-utils' `convert`), and its loader reads one record per scored row.
    let dir = tempfile::tempdir().unwrap();
    let (text_path, bin_path, ours_path) = (
        dir.path().join("t.txt"),
        dir.path().join("t.bin"),
        dir.path().join("ours.bin"),
    );
    std::fs::write(&text_path, export(None, ExportFormat::BulletText).1).unwrap();
    bulletformat::convert_from_text::<bulletformat::ChessBoard>(&text_path, &bin_path).unwrap();
    let mut ours = Vec::new();
    let s = export_dataset(
        &fx.ctx(),
        Source::Binpack,
        &ds,
        None,
        ExportFormat::Bulletformat,
        &mut ours,
        |_, _| {},
    )
    .unwrap();
    assert_eq!(s.bytes as usize, ours.len());
    assert_eq!(ours.len(), 32 * scored.len());
    assert!(
        ours == std::fs::read(&bin_path).unwrap(),
        "bulletformat differs from bulletformat's conversion of the text"
    );
    std::fs::write(&ours_path, &ours).unwrap();
    let mut records = Vec::new();
    bulletformat::DataLoader::<bulletformat::ChessBoard>::new(&ours_path, 1)
        .unwrap()
        .map_positions(|b| records.push(*b));
    assert_eq!(records.len(), scored.len());
    for (b, e) in records.iter().zip(&scored) {
        // The men, from the side to move's point of view, by the test's own reading of the FEN.
        let white = e.fen.split(' ').nth(1) == Some("w");
        let mut want = Vec::new();
        for (r, rank) in e.fen.split(' ').next().unwrap().split('/').enumerate() {
            let mut file = 0;
            for c in rank.chars() {
                if let Some(d) = c.to_digit(10) {
                    file += d;
                    continue;
                }
                let sq = (7 - r as u32) * 8 + file;
                let kind = "pnbrqk".find(c.to_ascii_lowercase()).unwrap() as u8;
                let ours = c.is_ascii_uppercase() == white;
                want.push((
                    if white { sq } else { sq ^ 56 } as u8,
                    kind | (u8::from(!ours) << 3),
                ));
                file += 1;
            }
        }
        want.sort();
        let mut got: Vec<(u8, u8)> = b.into_iter().map(|(piece, sq)| (sq, piece)).collect();
        got.sort();
        assert_eq!(got, want, "{}", e.fen);
        assert_eq!(i32::from(b.result) - 1, i32::from(e.result), "{}", e.fen);
        assert_eq!(
            b.score.signum(),
            if e.score.abs() <= 2 {
                b.score.signum()
            } else {
                e.score.signum()
            },
            "{}",
            e.fen
        );
    }

    let mut sink = Vec::new();
    let e = export_dataset(
        &fx.ctx(),
        Source::Binpack,
        &DatasetName::new("nope").unwrap(),
        None,
        ExportFormat::Plain,
        &mut sink,
        |_, _| {},
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("nope") && e.contains("no such dataset"), "{e}");
    let e = export_dataset(
        &fx.ctx(),
        Source::Binpack,
        &ds,
        Some(&MaskName::new("wld").unwrap()),
        ExportFormat::Plain,
        &mut sink,
        |_, _| {},
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("no committed mask wld"), "{e}");
    assert!(sink.is_empty());
}

/// The real sample (generated games without ../shared; both hold every kind of move),
/// ingested and written back as a
/// binpack: sfbinpack decodes the export to the input's scored entries, castling, en
/// passant and promotions included, and the export is no larger than twice the input.
#[test]
fn a_binpack_export_gives_back_the_input() {
    use lakefish_jobs::export::{ExportFormat, export_dataset};
    let fx = LakeFixture::new();
    let bytes = sample();
    fx.ingest_bytes(&bytes, "real", 50_000);
    let mut out = Vec::new();
    let s = export_dataset(
        &fx.ctx(),
        Source::Binpack,
        &DatasetName::new("real").unwrap(),
        None,
        ExportFormat::Binpack,
        &mut out,
        |_, _| {},
    )
    .unwrap();
    let input = binpack_entries(&bytes);
    let scored: Vec<&Plain> = input.iter().filter(|e| e.score != 32002).collect();
    assert_eq!(s.rows_written as usize, scored.len());
    assert_eq!(binpack_entries(&out).iter().collect::<Vec<_>>(), scored);
    // The kinds of moves the round trip went through (by sfbinpack's move types).
    let mut kinds = [0usize; 4];
    let mut r = sfbinpack::CompressedTrainingDataEntryReader::from_slice(&bytes).unwrap();
    while r.has_next() {
        let e = r.next();
        if e.score != 32002 {
            kinds[e.mv.mtype() as usize] += 1;
        }
    }
    eprintln!("normal, promotion, castle, en passant: {kinds:?}");
    assert!(kinds[1] > 0 && kinds[2] > 0 && kinds[3] > 0, "{kinds:?}");
    assert!(
        out.len() <= 2 * bytes.len(),
        "{} bytes from {}",
        out.len(),
        bytes.len()
    );
}
