//! Data out (issue 45): a committed dataset, optionally through one of its masks, written in
//! the text formats other tools read. Per format, what survives:
//!
//! - `plain` (Stockfish's tools and nnue-pytorch: `fen`, `move`, `score`, `ply`, `result`, `e`
//!   lines): every column. Scores stay in Stockfish's internal units and, like the result
//!   (−1, 0, 1), relative to the side to move, as the lake stores them.
//! - `bullet-text` (bullet's `<FEN> | <score> | <result>`): the position, the score in UCI
//!   centipawns (Stockfish's material-dependent `to_cp`) and the result as 1.0 / 0.5 / 0.0,
//!   both from White's point of view; the move, ply and game are dropped. Mate and tablebase
//!   scores (beyond Stockfish's largest evaluation), which centipawns cannot hold, are
//!   written as ±32000.
//!
//! A row without a score or a result has nothing to train on in either format: it is skipped
//! and counted.

use std::io::Write;

use lakefish_engine::scores::{MAX_EVAL, internal_to_centipawns};
use lakefish_schemas::{DatasetName, MaskName, Source};

use crate::{JobContext, JobError};

/// The formats a dataset can be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExportFormat {
    Plain,
    BulletText,
}

impl ExportFormat {
    pub fn parse(name: &str) -> Result<ExportFormat, String> {
        match name {
            "plain" => Ok(ExportFormat::Plain),
            "bullet-text" => Ok(ExportFormat::BulletText),
            other => Err(format!(
                "format {other:?}: plain (Stockfish's tools) or bullet-text (bullet's FEN | score | result)"
            )),
        }
    }
}

/// What an export read and wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ExportSummary {
    pub rows_read: u64,
    /// Rows the mask dropped.
    pub masked_out: u64,
    pub no_score: u64,
    pub no_result: u64,
    pub rows_written: u64,
    pub bytes: u64,
}

/// The score written for bullet: White's centipawns, mates at ±32000.
fn bullet_score(score: i16, white_to_move: bool, material: i32) -> i32 {
    let cp = if i32::from(score).abs() > MAX_EVAL {
        32000 * i32::from(score).signum()
    } else {
        internal_to_centipawns(i32::from(score), material).round() as i32
    };
    if white_to_move { cp } else { -cp }
}

/// A committed dataset's manifest, or an error naming it.
pub(crate) fn committed_manifest(
    ctx: &JobContext,
    source: Source,
    dataset: &DatasetName,
) -> Result<lakefish_schemas::DatasetManifest, JobError> {
    ctx.block_on(lakefish_lake::datasets::read_manifest(
        &ctx.lake, source, dataset,
    ))?
    .ok_or_else(|| JobError::Input {
        input: format!("{source}/{dataset}"),
        reason: "no such dataset (no committed manifest)".into(),
    })
}

/// One part's rows with its key (errors name it), after a cancellation check.
pub(crate) fn part_rows(
    ctx: &JobContext,
    source: Source,
    dataset: &DatasetName,
    part: &lakefish_schemas::PartInfo,
) -> Result<(String, Vec<lakefish_lake::parts::PositionRow>), JobError> {
    ctx.check_cancelled()?;
    let key = format!(
        "{}/{}",
        lakefish_schemas::positions::dataset_prefix(source, dataset),
        part.name
    );
    let bytes = ctx
        .block_on(ctx.lake.get(&key))?
        .ok_or_else(|| JobError::Corrupt {
            what: "positions part",
            key: key.clone(),
            reason: "missing (the manifest names it)".into(),
        })?;
    let rows = lakefish_lake::parts::read_positions(bytes, &key)?;
    Ok((key, rows))
}

/// Writes every row of `dataset` (those `mask` keeps, when given) to `out` in `format`, part
/// after part in the manifest's order. `on_part` sees the rows read so far.
pub fn export_dataset(
    ctx: &JobContext,
    source: Source,
    dataset: &DatasetName,
    mask: Option<&MaskName>,
    format: ExportFormat,
    out: &mut dyn Write,
    mut on_part: impl FnMut(u64, u64),
) -> Result<ExportSummary, JobError> {
    let manifest = committed_manifest(ctx, source, dataset)?;
    if let Some(m) = mask
        && ctx
            .block_on(crate::masks::read_mask_manifest(
                &ctx.lake, m, source, dataset,
            ))?
            .is_none()
    {
        return Err(JobError::Input {
            input: format!("mask {m}"),
            reason: format!(
                "no committed mask {m} for dataset {dataset} (lakefish mask {m} --dataset {dataset})"
            ),
        });
    }
    let mut sum = ExportSummary::default();
    let write_err = |e: std::io::Error| JobError::Failed(format!("writing the export: {e}"));
    let mut line = String::with_capacity(128);
    for part in &manifest.parts {
        let (key, rows) = part_rows(ctx, source, dataset, part)?;
        let keep = match mask {
            Some(m) => {
                Some(ctx.block_on(crate::masks::read_mask(&ctx.lake, m, source, dataset, part))?)
            }
            None => None,
        };
        if let Some(k) = &keep
            && k.len() != rows.len()
        {
            return Err(JobError::Corrupt {
                what: "positions part",
                key,
                reason: format!(
                    "holds {} rows, its mask {} (the manifest says {})",
                    rows.len(),
                    k.len(),
                    part.rows
                ),
            });
        }
        for (i, row) in rows.iter().enumerate() {
            sum.rows_read += 1;
            if keep.as_ref().is_some_and(|k| !k[i]) {
                sum.masked_out += 1;
                continue;
            }
            let Some(score) = row.score else {
                sum.no_score += 1;
                continue;
            };
            let Some(result) = row.result else {
                sum.no_result += 1;
                continue;
            };
            line.clear();
            match format {
                ExportFormat::Plain => {
                    use std::fmt::Write as _;
                    let _ = write!(
                        line,
                        "fen {}\nmove {}\nscore {score}\nply {}\nresult {result}\ne\n",
                        row.fen, row.mv, row.ply
                    );
                }
                ExportFormat::BulletText => {
                    use std::fmt::Write as _;
                    let white = row.fen.split_whitespace().nth(1) == Some("w");
                    let board = row
                        .fen
                        .parse::<shakmaty::fen::Fen>()
                        .map_err(|e| JobError::Corrupt {
                            what: "positions part",
                            key: key.clone(),
                            reason: format!("row {i}: {e}"),
                        })?
                        .into_setup()
                        .board;
                    let material = lakefish_engine::scores::material(&board);
                    let stm_result = f64::from(result + 1) / 2.0;
                    let white_result = if white { stm_result } else { 1.0 - stm_result };
                    let _ = writeln!(
                        line,
                        "{} | {} | {white_result:.1}",
                        row.fen,
                        bullet_score(score, white, material)
                    );
                }
            }
            out.write_all(line.as_bytes()).map_err(write_err)?;
            sum.bytes += line.len() as u64;
            sum.rows_written += 1;
        }
        on_part(sum.rows_read, manifest.rows);
    }
    out.flush().map_err(write_err)?;
    Ok(sum)
}
