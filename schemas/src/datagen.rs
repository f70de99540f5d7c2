//! `datagen`: self-play games into a binpack file (`raw/selfplay/...`), ingested as
//! `positions/source=selfplay/dataset=<name>/`.

use serde::{Deserialize, Serialize};

use crate::DatasetName;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DatagenSpec {
    /// The evaluation both sides search with: a registered net, `best`, or `classical`
    /// (lakefish's engine; ignored when `engine` is given).
    pub net: String,
    /// Another engine plays and scores the games instead: a side,
    /// `ENGINE[+NET][,OPTION=VALUE...]` (a registered engine, e.g. `stockfish,Threads=1`),
    /// searching with the same node or depth limit; its `info ... score` is the label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<crate::engines::SideRequest>,
    pub dataset: DatasetName,
    pub games: u64,
    /// Game `i` plays from seed `(seed, i)`: the same seed gives the same games.
    #[serde(default)]
    pub seed: u64,
    /// Nodes per move (default 5000), or a fixed depth instead.
    #[serde(default)]
    pub nodes: Option<u64>,
    #[serde(default)]
    pub depth: Option<u32>,
    #[serde(default = "d_random")]
    pub random_plies: u32,
    /// Searched plies after which a game is adjudicated.
    #[serde(default = "d_max_plies")]
    pub max_plies: u32,
    /// At the ply limit, |score| below this (centipawns) is a draw.
    #[serde(default = "d_draw")]
    pub draw_cp: i32,
    /// Win adjudication (off when absent): a game is won by the side the score favours once
    /// |score| ≥ `win_cp` centipawns for `win_plies` searched plies in a row.
    #[serde(default)]
    pub win_cp: Option<i32>,
    #[serde(default = "d_win_plies")]
    pub win_plies: u32,
    /// Draw adjudication (off when absent): from game ply `draw_after_ply` on, a game is drawn
    /// once |score| ≤ `draw_window_cp` for `draw_window_plies` searched plies in a row.
    #[serde(default)]
    pub draw_after_ply: Option<u32>,
    #[serde(default = "d_draw_window_cp")]
    pub draw_window_cp: i32,
    #[serde(default = "d_draw_window_plies")]
    pub draw_window_plies: u32,
    /// Opening check (off when absent): after the random plies, a search with the per-move
    /// limit; openings scoring beyond ±`opening_max_cp` centipawns are drawn again.
    #[serde(default)]
    pub opening_max_cp: Option<i32>,
}

fn d_win_plies() -> u32 {
    4
}
fn d_draw_window_cp() -> i32 {
    10
}
fn d_draw_window_plies() -> u32 {
    12
}

fn d_random() -> u32 {
    6
}
fn d_max_plies() -> u32 {
    200
}
fn d_draw() -> i32 {
    400
}

impl DatagenSpec {
    pub fn validate(&self) -> Result<(), String> {
        if self.net.trim().is_empty() {
            return Err("net is empty".into());
        }
        if let Some(e) = &self.engine {
            e.parse().map_err(|m| format!("engine: {m}"))?;
        }
        if !(1..=10_000_000).contains(&self.games) {
            return Err("games must be between 1 and 10000000".into());
        }
        match (self.nodes, self.depth) {
            (Some(_), Some(_)) => return Err("give nodes or depth, not both".into()),
            (Some(0), _) => return Err("nodes must be at least 1".into()),
            (_, Some(d)) if !(1..=30).contains(&d) => {
                return Err("depth must be between 1 and 30".into());
            }
            _ => {}
        }
        if self.random_plies > 40 || !(1..=1000).contains(&self.max_plies) {
            return Err("random_plies must be at most 40 and max_plies 1 to 1000".into());
        }
        if self.draw_cp < 0 {
            return Err("draw_cp must not be negative".into());
        }
        if self.win_cp.is_some_and(|c| !(100..=32_000).contains(&c)) {
            return Err("win_cp must be between 100 and 32000 centipawns".into());
        }
        if !(1..=100).contains(&self.win_plies) {
            return Err("win_plies must be between 1 and 100".into());
        }
        if !(1..=200).contains(&self.draw_window_plies) {
            return Err("draw_window_plies must be between 1 and 200".into());
        }
        if self.draw_after_ply.is_some_and(|p| p > 1000) {
            return Err("draw_after_ply must be at most 1000".into());
        }
        if !(0..=1000).contains(&self.draw_window_cp) {
            return Err("draw_window_cp must be between 0 and 1000 centipawns".into());
        }
        if self
            .opening_max_cp
            .is_some_and(|c| !(0..=32_000).contains(&c))
        {
            return Err("opening_max_cp must be between 0 and 32000 centipawns".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Adjudication and opening settings: off by default, bad values refused by name.
    #[test]
    fn adjudication_settings_default_off_and_bad_values_are_named() {
        let spec: DatagenSpec =
            serde_json::from_str(r#"{"net":"classical","dataset":"d","games":10}"#).unwrap();
        assert_eq!(
            (spec.win_cp, spec.draw_after_ply, spec.opening_max_cp),
            (None, None, None)
        );
        assert_eq!(spec.validate(), Ok(()));
        for (json, field) in [
            (r#""win_cp":50"#, "win_cp"),
            (r#""win_cp":2000,"win_plies":0"#, "win_plies"),
            (r#""draw_after_ply":5000"#, "draw_after_ply"),
            (r#""draw_window_cp":-1"#, "draw_window_cp"),
            (r#""draw_window_plies":0"#, "draw_window_plies"),
            (r#""opening_max_cp":-5"#, "opening_max_cp"),
        ] {
            let text = format!(r#"{{"net":"classical","dataset":"d","games":10,{json}}}"#);
            let spec: DatagenSpec = serde_json::from_str(&text).unwrap();
            let err = spec.validate().unwrap_err();
            assert!(err.starts_with(field), "{json}: {err}");
        }
    }
}
