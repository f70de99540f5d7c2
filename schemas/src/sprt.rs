//! SPRT matches between two evaluations (registered nets, `best`, or `classical`).
//!
//! Lake layout, under `sprt/<id>/`:
//! - `test.json`: the [`SprtPlan`] (spec, the nets it resolved to, bounds), written once;
//! - `book.epd`: the openings, as parsed when the test started;
//! - `batches/batch-NNNNNN.json`: one [`SprtBatch`] per batch of game pairs, written whole by
//!   the one job that plays it (a re-run writes the same bytes);
//! - `games.pgn` then `result.json` (an [`SprtStatus`]) once the test is decided.
//!
//! Counts are taken over the longest run of consecutive batches from 0, and the test ends at
//! the first batch after which the LLR is outside its bounds: so the result is the same
//! whatever the number of workers and the order batches finished in.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::engines::SideRequest;

pub const SPRT_PREFIX: &str = "sprt";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SprtSpec {
    /// The candidate: `ENGINE[+NET][,OPTION=VALUE...]` (a registered engine, optionally with
    /// a registered net and UCI options) or its fields; a bare net name (`nn-….nnue`, `best`,
    /// `classical`) is lakefish's own engine with that net.
    pub new: SideRequest,
    /// The baseline, written the same ways.
    pub base: SideRequest,
    /// Opening book (EPD or PGN): a local path readable where the test is planned, or a lake
    /// key `lake:raw/...`.
    pub book: String,
    /// Nodes per move (the default, [`DEFAULT_NODES`], when no time control is given; a
    /// pipeline's gate plays [`PIPELINE_DEFAULT_TC`] instead).
    #[serde(default)]
    pub nodes: Option<u64>,
    /// Time control `base+increment` in seconds, e.g. `10+0.1`, instead of nodes.
    #[serde(default)]
    pub tc: Option<String>,
    #[serde(default)]
    pub elo0: f64,
    #[serde(default = "d_elo1")]
    pub elo1: f64,
    #[serde(default = "d_rate")]
    pub alpha: f64,
    #[serde(default = "d_rate")]
    pub beta: f64,
    /// `normalized` (fishtest's default, pentanomial nElo) or `logistic`.
    #[serde(default = "d_model")]
    pub model: String,
    /// Game pairs per batch (one queued job each).
    #[serde(default = "d_batch")]
    pub batch_pairs: u32,
    /// The test stops undecided after this many pairs.
    #[serde(default = "d_max_pairs")]
    pub max_pairs: u64,
    /// Batches in flight at once over the queue.
    #[serde(default = "d_concurrency")]
    pub concurrency: u32,
    /// Shuffles the book's order; pair `i` plays opening `i` of the shuffled book, cycling.
    #[serde(default)]
    pub seed: u64,
    /// Milliseconds a UCI engine's `bestmove` may arrive after its clock ran out before it
    /// loses on time (fastchess's `timemargin`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub time_margin_ms: u64,
    /// A match of exactly `max_pairs` pairs that the LLR never stops (a gauntlet's levels);
    /// it ends `inconclusive` with its counts and Elo.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fixed_length: bool,
}

// Left out when 0, so a test planned before the field existed keeps its id.
fn is_zero(v: &u64) -> bool {
    *v == 0
}
fn d_elo1() -> f64 {
    2.0
}
fn d_rate() -> f64 {
    0.05
}
fn d_model() -> String {
    "normalized".into()
}
fn d_batch() -> u32 {
    8
}
fn d_max_pairs() -> u64 {
    20_000
}
fn d_concurrency() -> u32 {
    4
}

impl SprtSpec {
    pub fn validate(&self) -> Result<(), String> {
        for (field, side) in [("new", &self.new), ("base", &self.base)] {
            side.parse().map_err(|e| format!("{field}: {e}"))?;
        }
        if self.book.trim().is_empty() {
            return Err("book is empty".into());
        }
        if self.time_margin_ms > 60_000 {
            return Err("time_margin_ms must be at most 60000".into());
        }
        if !self.elo0.is_finite() || !self.elo1.is_finite() {
            return Err("elo0 and elo1 must be finite numbers".into());
        }
        if self.elo1 <= self.elo0 {
            return Err(format!(
                "elo1 ({}) must be greater than elo0 ({})",
                self.elo1, self.elo0
            ));
        }
        for (name, r) in [("alpha", self.alpha), ("beta", self.beta)] {
            if !(r > 0.0 && r < 0.5) {
                return Err(format!(
                    "{name} must lie strictly between 0 and 0.5, got {r}"
                ));
            }
        }
        if !["normalized", "logistic"].contains(&self.model.as_str()) {
            return Err(format!(
                "model {:?}: expected normalized or logistic",
                self.model
            ));
        }
        if self.nodes.is_some() && self.tc.is_some() {
            return Err("give nodes or tc, not both".into());
        }
        if self.nodes == Some(0) {
            return Err("nodes must be at least 1".into());
        }
        if let Some(tc) = &self.tc {
            parse_tc(tc)?;
        }
        if !(1..=1000).contains(&self.batch_pairs) {
            return Err("batch_pairs must be between 1 and 1000".into());
        }
        if self.max_pairs == 0 {
            return Err("max_pairs must be at least 1".into());
        }
        if !(1..=256).contains(&self.concurrency) {
            return Err("concurrency must be between 1 and 256".into());
        }
        Ok(())
    }

    pub fn batches(&self) -> u64 {
        self.max_pairs.div_ceil(self.batch_pairs as u64)
    }

    /// Whether the games play on a clock; a node limit (the default without `tc`) does not
    /// measure strength on the clock: a net that halves the search speed still wins.
    pub fn on_the_clock(&self) -> bool {
        self.tc.is_some()
    }

    /// What the games were played at, as every place that shows a result labels it:
    /// `tc 8+0.08`, or `5000 nodes a move (fixed nodes, not on the clock)`.
    pub fn conditions(&self) -> String {
        match &self.tc {
            Some(tc) => format!("tc {tc}"),
            None => format!(
                "{} nodes a move (fixed nodes, not on the clock)",
                self.nodes.unwrap_or(DEFAULT_NODES)
            ),
        }
    }
}

/// Nodes a move when a spec gives neither `nodes` nor `tc`.
pub const DEFAULT_NODES: u64 = 5000;

/// The time control a pipeline's gate plays when its config names neither `tc` nor `nodes`:
/// promotion is decided on the clock unless a node limit is asked for.
pub const PIPELINE_DEFAULT_TC: &str = "8+0.08";

/// `base+inc` in seconds to milliseconds.
pub fn parse_tc(tc: &str) -> Result<(u64, u64), String> {
    let bad = || format!("time control {tc:?}: expected base+increment in seconds, like 10+0.1");
    let (base, inc) = tc.split_once('+').unwrap_or((tc, "0"));
    let secs = |s: &str| -> Result<u64, String> {
        let v: f64 = s.trim().parse().map_err(|_| bad())?;
        if !(0.0..=86_400.0).contains(&v) {
            return Err(bad());
        }
        Ok((v * 1000.0).round() as u64)
    };
    let (base, inc) = (secs(base)?, secs(inc)?);
    if base == 0 {
        return Err(bad());
    }
    Ok((base, inc))
}

/// A side as a test resolved it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SprtSide {
    /// For lakefish's engine, the evaluation: `classical` or a registered net's name (`best`
    /// resolved). For another engine, the side's name in the PGN: `ENGINE[+NET][,OPT=V...]`.
    pub name: String,
    /// What the spec said.
    pub requested: String,
    /// The registered engine; absent for lakefish's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// The registered net passed to that engine (`best` resolved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net: Option<String>,
    /// UCI options of the side (over the engine's defaults).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, String>,
}

/// How often a side's engine let its games down, each such game lost
/// (fastchess's match-integrity checks).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Incidents {
    pub illegal_moves: u64,
    pub time_forfeits: u64,
    pub crashes: u64,
    pub stalls: u64,
    /// No answer to `uci` / `isready`, or the engine did not start.
    pub unresponsive: u64,
}

impl Incidents {
    pub fn total(&self) -> u64 {
        self.illegal_moves + self.time_forfeits + self.crashes + self.stalls + self.unresponsive
    }

    pub fn add(&mut self, other: &Incidents) {
        self.illegal_moves += other.illegal_moves;
        self.time_forfeits += other.time_forfeits;
        self.crashes += other.crashes;
        self.stalls += other.stalls;
        self.unresponsive += other.unresponsive;
    }
}

/// `sprt/<id>/test.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SprtPlan {
    pub id: crate::names::SprtId,
    pub spec: SprtSpec,
    pub new: SprtSide,
    pub base: SprtSide,
    pub openings: usize,
    pub lower: f64,
    pub upper: f64,
    pub created: String,
}

/// One batch of game pairs: `sprt/<id>/batches/batch-NNNNNN.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SprtBatch {
    pub index: u64,
    /// Index of the batch's first pair in the test.
    pub first_pair: u64,
    /// W/D/L of the candidate.
    pub wdl: [u64; 3],
    /// Pairs by the candidate's half points: LL, LD, DD+WL, WD, WW.
    pub penta: [u64; 5],
    pub pgn: String,
    /// Games each side lost by a fault: `[new, base]`.
    #[serde(default)]
    pub incidents: [Incidents; 2],
}

/// A queued batch of an SPRT (internal job kind `sprt_batch`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SprtTask {
    pub sprt: crate::names::SprtId,
    pub index: u64,
}

impl SprtTask {
    pub fn validate(&self) -> Result<(), String> {
        crate::names::check_segment("sprt", &self.sprt, 64).map_err(|e| e.to_string())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SprtState {
    Running,
    /// H1: the candidate is better by about elo1.
    Accepted,
    /// H0: it is not better than elo0.
    Rejected,
    /// max_pairs played without a decision.
    Inconclusive,
    /// Stopped by a user before it decided (`stopped` says who and when).
    Stopped,
}

impl SprtState {
    pub fn as_str(self) -> &'static str {
        match self {
            SprtState::Running => "running",
            SprtState::Accepted => "accepted",
            SprtState::Rejected => "rejected",
            SprtState::Inconclusive => "inconclusive",
            SprtState::Stopped => "stopped",
        }
    }

    pub fn parse(s: &str) -> Option<SprtState> {
        Some(match s {
            "running" => SprtState::Running,
            "accepted" => SprtState::Accepted,
            "rejected" => SprtState::Rejected,
            "inconclusive" => SprtState::Inconclusive,
            "stopped" => SprtState::Stopped,
            _ => return None,
        })
    }
}

/// Elo summary of counts (logistic Elo with its 95% interval, normalized Elo, LOS).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EloSummary {
    pub elo: f64,
    pub elo_error: f64,
    pub nelo: f64,
    pub nelo_error: f64,
    pub los: f64,
}

/// Where a test stands: `GET /v1/sprt/{id}`, and `result.json` once decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SprtStatus {
    pub id: crate::names::SprtId,
    pub state: SprtState,
    pub new: SprtSide,
    pub base: SprtSide,
    pub elo0: f64,
    pub elo1: f64,
    pub model: String,
    pub llr: f64,
    pub lower: f64,
    pub upper: f64,
    pub wins: u64,
    pub draws: u64,
    pub losses: u64,
    pub penta: [u64; 5],
    pub games: u64,
    /// Batches counted (consecutive from 0) and the LLR after each.
    pub batches: u64,
    pub llr_history: Vec<f64>,
    pub elo: Option<EloSummary>,
    /// Games the candidate lost by a fault (illegal move, time, crash, stall, no answer).
    #[serde(default)]
    pub new_incidents: Incidents,
    /// The same for the baseline.
    #[serde(default)]
    pub base_incidents: Incidents,
    pub spec: SprtSpec,
    pub created: String,
    /// What the games were played at ([`SprtSpec::conditions`]): `tc 8+0.08`, or a node
    /// limit labelled as not on the clock. Derived from `spec` whenever a status is read.
    #[serde(default)]
    pub conditions: String,
    /// Whether the games played on a clock ([`SprtSpec::on_the_clock`]); a result at fixed
    /// nodes says nothing about strength on the clock.
    #[serde(default)]
    pub on_the_clock: bool,
    /// When the test ended (RFC 3339): decided, out of pairs, or stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<String>,
    /// Who stopped the test, and when (state `stopped`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<crate::job::Requested>,
}

impl SprtStatus {
    /// With `conditions` and `on_the_clock` filled in from the spec (results stored before
    /// those fields existed get them too).
    pub fn labelled(mut self) -> SprtStatus {
        self.conditions = self.spec.conditions();
        self.on_the_clock = self.spec.on_the_clock();
        self
    }
}

/// A gauntlet: an engine placed on another engine's Elo scale by fixed-length matches
/// against it at several `UCI_LimitStrength`/`UCI_Elo` settings (`lakefish gauntlet`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GauntletSpec {
    /// The side to place: `ENGINE[+NET][,OPTION=VALUE...]` or a net for lakefish's engine.
    pub engine: SideRequest,
    /// The registered engine whose `UCI_Elo` scale it is placed on (Stockfish 15.1's runs
    /// from 1350 to 2850).
    pub against: String,
    /// `UCI_Elo` of each level.
    pub levels: Vec<u32>,
    /// Game pairs per level.
    pub pairs: u64,
    pub book: String,
    #[serde(default)]
    pub nodes: Option<u64>,
    #[serde(default)]
    pub tc: Option<String>,
    #[serde(default)]
    pub seed: u64,
}

impl GauntletSpec {
    pub fn validate(&self) -> Result<(), String> {
        self.engine.parse().map_err(|e| format!("engine: {e}"))?;
        crate::engines::check_engine_name(&self.against).map_err(|e| format!("against: {e}"))?;
        if self.levels.is_empty() || self.levels.len() > 20 {
            return Err("levels: give 1 to 20 UCI_Elo values".into());
        }
        if self.levels.iter().any(|l| !(1..=5000).contains(l)) {
            return Err("levels: each UCI_Elo between 1 and 5000".into());
        }
        if !(1..=10_000).contains(&self.pairs) {
            return Err("pairs must be between 1 and 10000".into());
        }
        self.level_spec(self.levels[0]).validate()
    }

    /// The fixed-length match of one level.
    pub fn level_spec(&self, elo: u32) -> SprtSpec {
        SprtSpec {
            new: self.engine.clone(),
            base: SideRequest::Text(format!(
                "{},UCI_LimitStrength=true,UCI_Elo={elo}",
                self.against
            )),
            book: self.book.clone(),
            nodes: self.nodes,
            tc: self.tc.clone(),
            elo0: 0.0,
            elo1: 10.0,
            alpha: 0.05,
            beta: 0.05,
            model: "logistic".into(),
            batch_pairs: self.pairs.min(8) as u32,
            max_pairs: self.pairs,
            concurrency: 4,
            seed: self.seed,
            time_margin_ms: 0,
            fixed_length: true,
        }
    }
}
