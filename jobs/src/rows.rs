//! Reading what a profile or an export reads ([`RowsOf`]): a committed dataset, part by
//! part, with the keep flags of a mask when one is given, or a committed shuffle, chunk by
//! chunk (boards unpacked to FEN), both as position rows.

use lakefish_lake::parts::PositionRow;
use lakefish_schemas::export::RowsOf;
use lakefish_schemas::{DatasetName, MaskName, PartInfo, Source};

use crate::{JobContext, JobError};

/// The committed state read: its commit, its units (a dataset's parts or a shuffle's
/// chunks) in order, and their rows.
pub struct Committed {
    /// The dataset manifest's job, or the shuffle's id (immutable once committed).
    pub commit: String,
    /// The dataset's source; a shuffle's (its first datasets').
    pub source: Source,
    pub units: Vec<PartInfo>,
    pub rows: u64,
}

/// One unit's rows, with the key errors name and the mask's keep flags (datasets).
pub struct UnitRows {
    pub key: String,
    pub rows: Vec<PositionRow>,
    pub keep: Option<Vec<bool>>,
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

/// A mask asked for must be committed for the dataset.
fn check_mask(
    ctx: &JobContext,
    source: Source,
    dataset: &DatasetName,
    mask: Option<&MaskName>,
) -> Result<(), JobError> {
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
    Ok(())
}

/// What `of` holds now, or an error naming what is missing.
pub fn committed(ctx: &JobContext, of: &RowsOf) -> Result<Committed, JobError> {
    match of {
        RowsOf::Dataset {
            source,
            dataset,
            mask,
        } => {
            let m = committed_manifest(ctx, *source, dataset)?;
            check_mask(ctx, *source, dataset, mask.as_ref())?;
            Ok(Committed {
                commit: m.job_id.to_string(),
                source: *source,
                units: m.parts,
                rows: m.rows,
            })
        }
        RowsOf::Shuffle(id) => {
            let m = ctx
                .block_on(crate::shuffle::read_shuffle_manifest(&ctx.lake, id))?
                .ok_or_else(|| JobError::Input {
                    input: format!("shuffle {id}"),
                    reason: "no such shuffle (no committed manifest)".into(),
                })?;
            Ok(Committed {
                commit: id.to_string(),
                source: m.source,
                units: m
                    .chunks
                    .into_iter()
                    .map(|c| PartInfo {
                        name: c.name,
                        rows: c.rows,
                        bytes: c.bytes,
                    })
                    .collect(),
                rows: m.rows,
            })
        }
    }
}

/// One dataset part's rows with its key, after a cancellation check.
pub(crate) fn part_rows(
    ctx: &JobContext,
    source: Source,
    dataset: &DatasetName,
    part: &PartInfo,
) -> Result<(String, Vec<PositionRow>), JobError> {
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

/// The rows of one unit of `of`.
pub fn read_unit(ctx: &JobContext, of: &RowsOf, unit: &PartInfo) -> Result<UnitRows, JobError> {
    match of {
        RowsOf::Dataset {
            source,
            dataset,
            mask,
        } => {
            let (key, rows) = part_rows(ctx, *source, dataset, unit)?;
            let keep = match mask {
                Some(m) => Some(ctx.block_on(crate::masks::read_mask(
                    &ctx.lake, m, *source, dataset, unit,
                ))?),
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
                        unit.rows
                    ),
                });
            }
            Ok(UnitRows { key, rows, keep })
        }
        RowsOf::Shuffle(id) => {
            let rows = crate::chunks::read_chunk_rows(ctx, id, &unit.name, usize::MAX)?
                .into_iter()
                .map(|r| PositionRow {
                    fen: r.fen,
                    score: r.score,
                    mv: r.mv,
                    result: r.result,
                    ply: r.ply,
                    game_id: r.game_id,
                })
                .collect();
            Ok(UnitRows {
                key: format!(
                    "{}/{}",
                    crate::shuffle::shuffle_prefix(id.as_str()),
                    unit.name
                ),
                rows,
                keep: None,
            })
        }
    }
}
