//! `datagen`: self-play games into a binpack file (`raw/selfplay/...`), ingested as
//! `positions/source=selfplay/dataset=<name>/`.

use serde::{Deserialize, Serialize};

use crate::DatasetName;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DatagenSpec {
    /// The evaluation both sides search with: a registered net, `best`, or `classical`.
    pub net: String,
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
        Ok(())
    }
}
