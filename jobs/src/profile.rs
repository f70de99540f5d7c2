//! Dataset and shuffle profiles (issue 45): what a user looks at before training. Counts,
//! histograms of score, ply, men on the board and result, the share of positions whose score
//! and result disagree under Stockfish's win-rate model, and repeated positions. Stored beside
//! the data as `profiles/source=S/dataset=D/profile.json` or `shuffled/<id>/_profile.json`
//! (removed with the shuffle).
//!
//! Buckets: score by 100 internal units (`floor(score / 100) · 100`, below −3000 in −3100,
//! 3000 and above in 3000); ply by 10 (400 and above in 400); men 2-32; result −1 / 0 / 1
//! from the side to move. A position is the FEN's first four fields (board, side, castling,
//! en passant): a repeat is a row whose position an earlier row had. Score and result
//! disagree when the model's expected points for the side to move (win + half a draw, at the
//! position's material) and the result's points (1, ½, 0) differ by more than ½.

use std::collections::{BTreeMap, HashSet};

use lakefish_engine::scores::{material, win_rate};
use lakefish_lake::catalog::CatalogKind;
use lakefish_schemas::export::RowsOf;
use lakefish_schemas::names::ShuffleId;
use lakefish_schemas::{DatasetName, Source};

use crate::{JobContext, JobError};

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Profile {
    pub source: Source,
    /// The dataset profiled, or ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<DatasetName>,
    /// ... the shuffle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shuffle: Option<ShuffleId>,
    /// The commit profiled: the dataset manifest's job, or the shuffle's id.
    pub dataset_job_id: String,
    pub rows: u64,
    pub scored: u64,
    pub with_result: u64,
    /// Bucket lower bound → rows.
    pub score: BTreeMap<i32, u64>,
    pub ply: BTreeMap<u32, u64>,
    pub men: BTreeMap<u32, u64>,
    /// −1, 0, 1 → rows.
    pub result: BTreeMap<i8, u64>,
    /// Rows with both a score and a result (what `disagreeing` is a share of; 0 in profiles
    /// made before it was counted).
    #[serde(default)]
    pub scored_with_result: u64,
    /// Rows with a score and a result whose score and result disagree (see the module).
    pub disagreeing: u64,
    /// Rows whose position an earlier row had.
    pub repeated: u64,
}

/// Where a profile is stored: beside the data (for a mask's rows: none).
pub fn profile_key(of: &RowsOf) -> Result<String, JobError> {
    match of {
        RowsOf::Dataset {
            source,
            dataset,
            mask: None,
        } => Ok(format!(
            "profiles/source={source}/dataset={dataset}/profile.json"
        )),
        RowsOf::Shuffle(id) => Ok(format!(
            "{}/_profile.json",
            crate::shuffle::shuffle_prefix(id.as_str())
        )),
        RowsOf::Dataset { mask: Some(_), .. } => Err(JobError::Input {
            input: of.to_string(),
            reason: "a profile is of a whole dataset or a shuffle, not of a mask's rows".into(),
        }),
    }
}

fn score_bucket(score: i16) -> i32 {
    (i32::from(score).div_euclid(100) * 100).clamp(-3100, 3000)
}

/// Whether the model's expected points for the side to move and the result's differ by more
/// than half a point.
pub fn disagrees(score: i16, result: i8, material: i32) -> bool {
    let win = win_rate(i32::from(score), material);
    let loss = win_rate(-i32::from(score), material);
    let expected = win + 0.5 * (1.0 - win - loss).max(0.0);
    let points = f64::from(result + 1) / 2.0;
    (expected - points).abs() > 0.5
}

/// Profiles a committed dataset or shuffle unit by unit and stores the profile beside it.
pub fn profile(ctx: &JobContext, of: &RowsOf) -> Result<Profile, JobError> {
    let key = profile_key(of)?;
    let c = crate::rows::committed(ctx, of)?;
    let mut p = Profile {
        source: c.source,
        dataset: match of {
            RowsOf::Dataset { dataset, .. } => Some(dataset.clone()),
            RowsOf::Shuffle(_) => None,
        },
        shuffle: match of {
            RowsOf::Shuffle(id) => Some(id.clone()),
            RowsOf::Dataset { .. } => None,
        },
        dataset_job_id: c.commit.clone(),
        rows: 0,
        scored: 0,
        with_result: 0,
        score: BTreeMap::new(),
        ply: BTreeMap::new(),
        men: BTreeMap::new(),
        result: BTreeMap::new(),
        scored_with_result: 0,
        disagreeing: 0,
        repeated: 0,
    };
    let mut seen: HashSet<u64> = HashSet::new();
    for unit in &c.units {
        ctx.progress.report(&lakefish_schemas::Progress {
            stage: format!("profiling {of}"),
            done: p.rows,
            total: Some(c.rows),
            unit: "rows".into(),
            rows: p.rows,
        });
        let u = crate::rows::read_unit(ctx, of, unit)?;
        for (i, row) in u.rows.iter().enumerate() {
            p.rows += 1;
            let fen: Vec<&str> = row.fen.split_whitespace().take(4).collect();
            let position = fen.join(" ");
            // 64-bit hashes, not the texts: months of data fit in memory (a collision in a
            // billion positions is a chance of about 3 in 100 million).
            let mut h = std::hash::DefaultHasher::new();
            std::hash::Hash::hash(&position, &mut h);
            if !seen.insert(std::hash::Hasher::finish(&h)) {
                p.repeated += 1;
            }
            let men = fen.first().map_or(0, |b| {
                b.chars().filter(char::is_ascii_alphabetic).count() as u32
            });
            *p.men.entry(men).or_default() += 1;
            *p.ply
                .entry((u32::from(row.ply) / 10 * 10).min(400))
                .or_default() += 1;
            if let Some(r) = row.result {
                p.with_result += 1;
                *p.result.entry(r).or_default() += 1;
            }
            let Some(score) = row.score else { continue };
            p.scored += 1;
            *p.score.entry(score_bucket(score)).or_default() += 1;
            if let Some(r) = row.result {
                p.scored_with_result += 1;
                let board = row
                    .fen
                    .parse::<shakmaty::fen::Fen>()
                    .map_err(|e| JobError::Corrupt {
                        what: "positions",
                        key: u.key.clone(),
                        reason: format!("row {i}: {e}"),
                    })?
                    .into_setup()
                    .board;
                p.disagreeing += u64::from(disagrees(score, r, material(&board)));
            }
        }
    }
    ctx.block_on(ctx.lake.put(&key, serde_json::to_vec_pretty(&p)?))?;
    // The profile counts in its dataset's or shuffle's space.
    let (kind, name) = match of {
        RowsOf::Dataset {
            source, dataset, ..
        } => (CatalogKind::Dataset, format!("{source}/{dataset}")),
        RowsOf::Shuffle(id) => (CatalogKind::Shuffle, id.to_string()),
    };
    ctx.block_on(lakefish_lake::space::measure(&ctx.lake, kind, &name))?;
    Ok(p)
}

/// A dataset's or shuffle's stored profile, if it was profiled.
pub async fn read_profile(lake: &crate::Lake, of: &RowsOf) -> Result<Option<Profile>, JobError> {
    let key = profile_key(of)?;
    let Some(bytes) = lake.get(&key).await? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| JobError::Corrupt {
            what: "dataset profile",
            key,
            reason: e.to_string(),
        })
}

impl crate::runner::Job for lakefish_schemas::ProfileSpec {
    fn run(
        &self,
        _: lakefish_schemas::JobKind,
        ctx: &JobContext,
        _: &lakefish_schemas::JobId,
    ) -> Result<serde_json::Value, JobError> {
        let of = self.rows().map_err(|reason| JobError::Input {
            input: "profile".into(),
            reason,
        })?;
        let p = profile(ctx, &of)?;
        Ok(serde_json::json!({
            "profile": profile_key(&of)?,
            "rows": p.rows,
            "scored": p.scored,
            "repeated": p.repeated,
            "disagreeing": p.disagreeing,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A winning score with a lost game disagrees, a level score with a draw does not, and
    /// buckets hold their edges.
    #[test]
    fn disagreement_and_buckets() {
        assert!(disagrees(1500, -1, 58));
        assert!(disagrees(-1500, 1, 58));
        assert!(!disagrees(0, 0, 58));
        assert!(!disagrees(1500, 1, 58));
        assert_eq!(
            [-32000, -3001, -1, 0, 99, 100, 2999, 31000].map(score_bucket),
            [-3100, -3100, -100, 0, 0, 100, 2900, 3000]
        );
    }
}
