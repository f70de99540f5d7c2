//! Data out and back in (issue 45): each export format ingested again keeps the columns
//! the format holds, and bad bytes in the other trainers' files are named by offset.

use lakefish_ingest::binpack::synthetic_binpack;
use lakefish_ingest::ingest_records::{ingest_bullet, ingest_plain};
use lakefish_jobs::export::{ExportFormat, export_dataset};
use lakefish_lake::parts::PositionRow;
use lakefish_schemas::{DatasetName, IngestSpec, JobId, Source};

mod common;
use common::LakeFixture;

/// Every row of a dataset, parts in order.
fn rows(fx: &LakeFixture, source: Source, dataset: &str) -> Vec<PositionRow> {
    let ds = DatasetName::new(dataset).unwrap();
    let m = fx
        .rt
        .block_on(lakefish_lake::datasets::read_manifest(
            &fx.lake, source, &ds,
        ))
        .unwrap()
        .unwrap();
    let mut out = Vec::new();
    for p in &m.parts {
        let key = format!(
            "{}/{}",
            lakefish_schemas::positions::dataset_prefix(source, &ds),
            p.name
        );
        let bytes = fx.rt.block_on(fx.lake.get(&key)).unwrap().unwrap();
        out.extend(lakefish_lake::parts::read_positions(bytes, &key).unwrap());
    }
    out
}

fn export(fx: &LakeFixture, source: Source, dataset: &str, format: ExportFormat) -> Vec<u8> {
    let mut out = Vec::new();
    let ds = DatasetName::new(dataset).unwrap();
    export_dataset(&fx.ctx(), source, &ds, None, format, &mut out, |_, _| {}).unwrap();
    out
}

fn spec(input: String, dataset: &str) -> IngestSpec {
    IngestSpec {
        inputs: vec![input],
        dataset: DatasetName::new(dataset).unwrap(),
        rows_per_part: 3_000,
        max_game_bytes: None,
    }
}

/// A row's fen, move, score, ply and result.
type Columns = (String, String, Option<i16>, u16, Option<i8>);

fn columns(rows: &[PositionRow]) -> Vec<Columns> {
    rows.iter()
        .map(|r| (r.fen.clone(), r.mv.clone(), r.score, r.ply, r.result))
        .collect()
}

#[test]
fn exports_ingest_back_as_the_columns_each_format_keeps() {
    let fx = LakeFixture::new();
    fx.ingest_bytes(
        &[synthetic_binpack(60, 3), synthetic_binpack(60, 4)].concat(),
        "d",
        5_000,
    );
    let scored: Vec<PositionRow> = rows(&fx, Source::Binpack, "d")
        .into_iter()
        .filter(|r| r.score.is_some() && r.result.is_some())
        .collect();
    assert!(scored.len() > 5_000, "{}", scored.len());
    type Ingest = fn(
        &lakefish_jobs::JobContext,
        &JobId,
        &IngestSpec,
    ) -> Result<lakefish_ingest::IngestSummary, lakefish_jobs::JobError>;
    let run = |f: Ingest, input: String, dataset: &str| {
        f(&fx.ctx(), &JobId::new(), &spec(input, dataset)).unwrap()
    };

    // plain: every column.
    let text = export(&fx, Source::Binpack, "d", ExportFormat::Plain);
    let s = run(ingest_plain, fx.file("d.plain", &text), "p");
    assert_eq!(s.rows as usize, scored.len());
    let back = rows(&fx, Source::Plain, "p");
    assert_eq!(columns(&back), columns(&scored));
    // A game continues while the ply counts up and the result flips.
    let games = |rs: &[PositionRow]| {
        let mut ids: Vec<u64> = rs.iter().map(|r| r.game_id).collect();
        ids.dedup();
        ids.len()
    };
    assert!(games(&back) < back.len() / 10, "{} games", games(&back));

    // bullet text: written again, the same text; the positions and results kept.
    let text = export(&fx, Source::Binpack, "d", ExportFormat::BulletText);
    run(ingest_bullet, fx.file("d.txt", &text), "bt");
    let back = rows(&fx, Source::Bullet, "bt");
    assert_eq!(
        export(&fx, Source::Bullet, "bt", ExportFormat::BulletText),
        text
    );
    for (b, o) in back.iter().zip(&scored) {
        assert_eq!(
            (&b.fen, b.ply, b.result, b.mv.as_str()),
            (&o.fen, o.ply, o.result, "0000")
        );
    }
    assert_eq!(games(&back), back.len(), "no games in bullet's text");
    // A binpack holds no position without its move: each is skipped and counted.
    let mut out = Vec::new();
    let ds = DatasetName::new("bt").unwrap();
    let s = export_dataset(
        &fx.ctx(),
        Source::Bullet,
        &ds,
        None,
        ExportFormat::Binpack,
        &mut out,
        |_, _| {},
    )
    .unwrap();
    assert_eq!((s.no_move as usize, s.rows_written), (scored.len(), 0));

    // bulletformat: written again, the same bytes.
    let bin = export(&fx, Source::Binpack, "d", ExportFormat::Bulletformat);
    run(ingest_bullet, fx.file("d.bin", &bin), "bf");
    assert_eq!(rows(&fx, Source::Bullet, "bf").len(), scored.len());
    assert_eq!(
        export(&fx, Source::Bullet, "bf", ExportFormat::Bulletformat),
        bin
    );

    // Bad bytes: a record with result byte 9 and 7 trailing bytes, each named by offset;
    // the other records are kept.
    let mut bad = bin[..32 * 100].to_vec();
    bad[32 * 40 + 26] = 9;
    bad.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7]);
    let s = run(ingest_bullet, fx.file("bad.bin", &bad), "bad");
    assert_eq!(s.rows, 99);
    let m = fx
        .rt
        .block_on(lakefish_lake::datasets::read_manifest(
            &fx.lake,
            Source::Bullet,
            &DatasetName::new("bad").unwrap(),
        ))
        .unwrap()
        .unwrap();
    let skipped = &m.inputs[0].skipped;
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert_eq!((skipped[0].offset, skipped[1].offset), (32 * 40, 32 * 100));
    assert!(
        skipped[0].reason.contains("result byte 9"),
        "{}",
        skipped[0].reason
    );
    assert!(
        skipped[1].reason.contains("7 trailing bytes"),
        "{}",
        skipped[1].reason
    );
    assert_eq!(
        s.skipped.len(),
        2,
        "the summary lists them: {:?}",
        s.skipped
    );

    // Nothing readable: refused, naming why, and nothing committed.
    let e = ingest_bullet(
        &fx.ctx(),
        &JobId::new(),
        &spec(fx.file("junk.txt", b"hello | there | 2.0\n"), "junk"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("byte offset 0") && e.contains("fen \"hello\""),
        "{e}"
    );
    assert!(!fx.path("positions/source=bullet/dataset=junk").exists());
}

/// An export as a job: one file per dataset part under `exports/<id>/`, whose concatenation
/// is the export `lakefish export` writes; parts written in any order, any number of times,
/// commit once every part is there.
#[test]
fn an_export_job_writes_parts_that_concatenate_to_the_export() {
    use lakefish_jobs::export::{export_part, plan_export, read_export};
    use lakefish_schemas::export::ExportSpec;
    let fx = LakeFixture::new();
    fx.ingest_bytes(
        &[
            synthetic_binpack(30, 3),
            synthetic_binpack(30, 4),
            synthetic_binpack(30, 5),
        ]
        .concat(),
        "d",
        2_000,
    );
    let read = |key: &str| fx.rt.block_on(fx.lake.get(key)).unwrap().unwrap().to_vec();
    for format in [
        ExportFormat::Plain,
        ExportFormat::Bulletformat,
        ExportFormat::Binpack,
    ] {
        let spec = ExportSpec {
            dataset: Some(DatasetName::new("d").unwrap()),
            source: Source::Binpack,
            mask: None,
            shuffle: None,
            format,
        };
        let plan = plan_export(&fx.ctx(), &spec).unwrap();
        assert!(plan.parts.len() >= 3, "{}", plan.parts.len());
        assert_eq!(
            plan_export(&fx.ctx(), &spec).unwrap(),
            plan,
            "the same spec, the same plan"
        );
        // Parts out of order, the first twice: the manifest only once all are there.
        for i in (0..plan.parts.len()).rev() {
            assert!(
                fx.rt
                    .block_on(read_export(&fx.lake, &plan.id))
                    .unwrap()
                    .is_none()
            );
            export_part(&fx.ctx(), &plan, i).unwrap();
        }
        let m = fx
            .rt
            .block_on(read_export(&fx.lake, &plan.id))
            .unwrap()
            .unwrap();
        let first = read(&m.files[0]);
        export_part(&fx.ctx(), &plan, 0).unwrap();
        assert_eq!(read(&m.files[0]), first, "a part written again is the same");
        let whole: Vec<u8> = m.files.iter().flat_map(|k| read(k)).collect();
        assert_eq!(whole.len() as u64, m.counts.bytes);
        let direct = export(&fx, Source::Binpack, "d", format);
        if format == ExportFormat::Binpack {
            // Chains end at part boundaries: other bytes, the same entries.
            let entries = |b: &[u8]| {
                let mut r = sfbinpack::CompressedTrainingDataEntryReader::from_slice(b).unwrap();
                let mut out = Vec::new();
                while r.has_next() {
                    let e = r.next();
                    out.push((
                        e.pos.fen().unwrap(),
                        e.mv.as_uci(),
                        e.score,
                        e.ply,
                        e.result,
                    ));
                }
                out
            };
            assert_eq!(entries(&whole), entries(&direct));
        } else {
            assert!(
                whole == direct,
                "{format:?}: the parts concatenated differ from the export"
            );
        }
        // The job in-process: the same manifest (already committed).
        let job = lakefish_jobs::runner::run_spec(
            &fx.ctx(),
            &JobId::new(),
            &lakefish_schemas::JobSpec::Export(spec.clone()),
        )
        .unwrap();
        assert_eq!(job["id"], serde_json::json!(plan.id));
    }
    // A mask that is not committed is refused by name.
    let spec = ExportSpec {
        dataset: Some(DatasetName::new("d").unwrap()),
        source: Source::Binpack,
        mask: Some(lakefish_schemas::MaskName::new("quiet").unwrap()),
        shuffle: None,
        format: ExportFormat::Plain,
    };
    let e = plan_export(&fx.ctx(), &spec).unwrap_err().to_string();
    assert!(e.contains("no committed mask quiet"), "{e}");
}

/// A shuffle is exported and profiled as the rows it holds: with the `all` mask those are
/// its dataset's rows, so the profiles agree count for count and the plain exports hold the
/// same lines in another order; as a job, one part per chunk. A spec naming both a dataset
/// and a shuffle, neither, or a shuffle with a mask is refused naming the fields.
#[test]
fn a_shuffle_exports_and_profiles_as_the_rows_it_holds() {
    use lakefish_jobs::export::{export_part, export_rows, plan_export, read_export};
    use lakefish_schemas::export::{ExportSpec, RowsOf};
    use lakefish_schemas::{MaskDefinition, MaskName, MaskRule, MaskSpec, ShuffleSpec};
    let fx = LakeFixture::new();
    fx.ingest_bytes(
        &[synthetic_binpack(30, 3), synthetic_binpack(30, 4)].concat(),
        "d",
        2_000,
    );
    let all = MaskSpec {
        dataset: DatasetName::new("d").unwrap(),
        source: Source::Binpack,
        definition: MaskDefinition {
            name: MaskName::new("all").unwrap(),
            rules: vec![MaskRule::All],
            min_ply: None,
            max_abs_score: None,
            seed: 0,
        },
    };
    lakefish_jobs::masks::mask_dataset(&fx.ctx(), &JobId::new(), &all).unwrap();
    let sh = lakefish_jobs::shuffle::shuffle_here(
        &fx.ctx(),
        &ShuffleSpec {
            datasets: vec![DatasetName::new("d").unwrap()],
            source: Source::Binpack,
            mask: MaskName::new("all").unwrap(),
            chunks: 3,
            seed: 5,
            extra: Vec::new(),
        },
    )
    .unwrap();
    let dataset = RowsOf::Dataset {
        source: Source::Binpack,
        dataset: DatasetName::new("d").unwrap(),
        mask: None,
    };
    let shuffle = RowsOf::Shuffle(sh.id.clone());

    let pd = lakefish_jobs::profile::profile(&fx.ctx(), &dataset).unwrap();
    let ps = lakefish_jobs::profile::profile(&fx.ctx(), &shuffle).unwrap();
    assert!(pd.rows > 1000 && pd.repeated > 0, "{pd:?}");
    assert_eq!(
        (ps.dataset.as_ref(), ps.shuffle.as_ref()),
        (None, Some(&sh.id))
    );
    let counts = |p: &lakefish_jobs::profile::Profile| {
        (
            p.rows,
            p.scored,
            p.with_result,
            p.scored_with_result,
            p.disagreeing,
            p.repeated,
            p.score.clone(),
            p.ply.clone(),
            p.men.clone(),
            p.result.clone(),
        )
    };
    assert_eq!(counts(&ps), counts(&pd));
    assert!(
        fx.path(&format!("shuffled/{}/_profile.json", sh.id))
            .exists()
    );
    assert_eq!(
        fx.rt
            .block_on(lakefish_jobs::profile::read_profile(&fx.lake, &shuffle))
            .unwrap(),
        Some(ps)
    );

    // The same lines, shuffled; the position's board, side, castling and en passant kept.
    let text = |of: &RowsOf| {
        let mut out = Vec::new();
        export_rows(&fx.ctx(), of, ExportFormat::Plain, &mut out, |_, _| {}).unwrap();
        String::from_utf8(out).unwrap()
    };
    let records = |t: &str| {
        let mut r: Vec<String> = t
            .split("e\n")
            .map(|rec| {
                rec.lines()
                    .map(|l| match l.strip_prefix("fen ") {
                        Some(fen) => {
                            let f: Vec<&str> = fen.split(' ').take(4).collect();
                            format!("fen {}", f.join(" "))
                        }
                        None => l.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .collect();
        r.sort_unstable();
        r
    };
    let (td, ts) = (text(&dataset), text(&shuffle));
    assert_ne!(td, ts, "shuffled");
    assert_eq!(records(&ts), records(&td));

    // As a job: one part per chunk, concatenated equal to the export here.
    let spec = ExportSpec {
        dataset: None,
        source: Source::Binpack,
        mask: None,
        shuffle: Some(sh.id.clone()),
        format: ExportFormat::Plain,
    };
    let plan = plan_export(&fx.ctx(), &spec).unwrap();
    assert_eq!(plan.parts.len(), 3);
    assert_eq!(plan.dataset_job_id, sh.id.as_str());
    for i in (0..3).rev() {
        export_part(&fx.ctx(), &plan, i).unwrap();
    }
    let m = fx
        .rt
        .block_on(read_export(&fx.lake, &plan.id))
        .unwrap()
        .unwrap();
    let mut joined = Vec::new();
    for f in &m.files {
        joined.extend(fx.rt.block_on(fx.lake.get(f)).unwrap().unwrap());
    }
    assert_eq!(String::from_utf8(joined).unwrap(), ts);

    // Specs that name no rows, or two.
    for (body, want) in [
        (
            r#"{"kind":"export","spec":{"format":"plain"}}"#,
            "dataset or shuffle: name one of them",
        ),
        (
            r#"{"kind":"export","spec":{"dataset":"d","shuffle":"sh-000000000001","format":"plain"}}"#,
            "not both",
        ),
        (
            r#"{"kind":"export","spec":{"shuffle":"sh-000000000001","mask":"quiet","format":"plain"}}"#,
            "mask: a shuffle's rows",
        ),
        (
            r#"{"kind":"profile","spec":{"source":"binpack"}}"#,
            "dataset or shuffle: name one of them",
        ),
        (
            r#"{"kind":"profile","spec":{"shuffle":"../x"}}"#,
            "shuffle: shuffle name \"../x\" may only contain",
        ),
    ] {
        let e = lakefish_schemas::JobSpec::from_request(body.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{body}: {e}");
    }
    // A profile of a mask's rows has no place to be stored.
    let masked = RowsOf::Dataset {
        source: Source::Binpack,
        dataset: DatasetName::new("d").unwrap(),
        mask: Some(MaskName::new("all").unwrap()),
    };
    let e = lakefish_jobs::profile::profile(&fx.ctx(), &masked)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not of a mask's rows"), "{e}");
}
