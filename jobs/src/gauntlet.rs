//! A gauntlet: one fixed-length match per `UCI_Elo` level against a reference engine (each
//! an SPRT test with `fixed_length`, so its games are stored and shown like any other), then
//! the side's rating on the reference's scale ([`lakefish_engine::rating::estimate`]).

use lakefish_engine::rating::{LevelResult, estimate};
use lakefish_schemas::SprtStatus;
use lakefish_schemas::sprt::GauntletSpec;

use crate::{JobContext, JobError};

#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct GauntletLevel {
    /// The reference's `UCI_Elo`.
    pub uci_elo: u32,
    pub sprt: lakefish_schemas::names::SprtId,
    pub wins: u64,
    pub draws: u64,
    pub losses: u64,
    /// The side's score, 0..1.
    pub score: f64,
}

#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct GauntletReport {
    /// The side as resolved (`best` made a net name).
    pub engine: String,
    pub against: String,
    pub levels: Vec<GauntletLevel>,
    /// Maximum-likelihood Elo on the reference's scale; absent when every game was won (or
    /// every one lost), which bounds it on one side only.
    pub elo: Option<f64>,
    /// Half the 95 % interval.
    pub elo_error: Option<f64>,
    pub games: u64,
}

/// Plays every level here, in order, and estimates the rating. `on_level` sees each level's
/// test as it finishes.
pub fn run_here(
    ctx: &JobContext,
    spec: &GauntletSpec,
    mut on_level: impl FnMut(&SprtStatus),
) -> Result<GauntletReport, JobError> {
    spec.validate().map_err(JobError::Payload)?;
    if ctx
        .block_on(crate::engines::get(&ctx.lake, &spec.against))?
        .is_none()
    {
        return Err(JobError::Payload(format!(
            "against: engine {} is not registered (lakefish engines add {} --command ...)",
            spec.against, spec.against
        )));
    }
    let mut levels = Vec::new();
    let mut engine = String::new();
    for &elo in &spec.levels {
        let status = crate::sprt::run_here(ctx, &spec.level_spec(elo))?;
        on_level(&status);
        engine = status.new.name.clone();
        let games = status.wins + status.draws + status.losses;
        levels.push(GauntletLevel {
            uci_elo: elo,
            sprt: status.id.clone(),
            wins: status.wins,
            draws: status.draws,
            losses: status.losses,
            score: (status.wins as f64 + 0.5 * status.draws as f64) / games.max(1) as f64,
        });
    }
    let results: Vec<LevelResult> = levels
        .iter()
        .map(|l| LevelResult {
            rating: l.uci_elo as f64,
            wins: l.wins,
            draws: l.draws,
            losses: l.losses,
        })
        .collect();
    let fit = estimate(&results);
    Ok(GauntletReport {
        engine,
        against: spec.against.clone(),
        games: results.iter().map(|l| l.wins + l.draws + l.losses).sum(),
        levels,
        elo: fit.map(|f| f.elo),
        elo_error: fit.map(|f| f.error),
    })
}
