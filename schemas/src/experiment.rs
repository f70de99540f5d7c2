//! An experiment (issue 44): a base training recipe and axes to vary, expanded into cells
//! that each train one net, which are then rated together. This module holds the document
//! and its expansion; running it is `lakefish-jobs`' business.
//!
//! ```json
//! {"base": {"shuffle": "sh-…", "features": "all768", "arch": "256x2-32", "epochs": 4},
//!  "axes": [{"field": "arch", "values": ["256x2-32", "512x2-32", "1024x2-32"]},
//!           {"field": "lambda_start", "values": [0.5, 1.0]}],
//!  "repeats": 1,
//!  "rating": {"book": "lake:raw/books/noob_2moves.epd", "nodes": 5000, "pairs": 50,
//!             "anchor": "classical"}}
//! ```
//!
//! A field is a train spec's field by its JSON name, dotted into objects (`net.transformer.
//! width` when the base has a `net`). Cells are the axes' values crossed, first axis slowest;
//! with `repeats` above 1 each cell is trained again with the seed plus 1, 2, …. Every cell is
//! a complete train spec checked as one (`TrainSpec::validate`, `trained_net`), so a value the
//! field refuses is named as `axes[i].values[j]`.

use serde::{Deserialize, Serialize};

use crate::train::TrainSpec;

/// The most cells an experiment may have (each one trains a net and plays every other).
pub const MAX_CELLS: usize = 64;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExperimentSpec {
    /// The recipe every cell starts from: a train spec as JSON.
    pub base: serde_json::Value,
    /// What to vary; none: the base alone (with repeats).
    #[serde(default)]
    pub axes: Vec<Axis>,
    /// How many times each cell is trained (seeds `seed`, `seed + 1`, …).
    #[serde(default = "one")]
    pub repeats: u32,
    pub rating: RatingPlan,
    /// A puzzle set to measure each net on (puzzle accuracy, as the thesis reports it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub puzzles: Option<Puzzles>,
}

/// EPD lines with `bm` (the moves that solve each): a net solves a puzzle when lakefish's
/// search with it, given `nodes`, plays one of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Puzzles {
    /// A local path or `lake:` key.
    pub file: String,
    #[serde(default = "puzzle_nodes")]
    pub nodes: u64,
}

fn puzzle_nodes() -> u64 {
    10_000
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Axis {
    /// A train spec field by its JSON name, dotted into objects.
    pub field: String,
    pub values: Vec<serde_json::Value>,
}

/// How the cells' nets are rated: every pair of nets (and the anchor) plays `pairs`
/// colour-reversed game pairs from `book`, at fixed nodes or on the clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RatingPlan {
    pub book: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tc: Option<String>,
    /// Colour-reversed pairs per pairing.
    pub pairs: u32,
    /// The player rated 0: `classical`, `material`, a registered net or engine; unset, the
    /// first cell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor: Option<crate::engines::SideRequest>,
    /// `round_robin` (every pair) or `gauntlet` (each net against the anchor only).
    #[serde(default)]
    pub schedule: Schedule,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Schedule {
    #[default]
    RoundRobin,
    Gauntlet,
}

/// One cell: the axes' values it takes, and its complete train spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// `field=value` per axis, then `seed=N` for a repeat: the table's row label.
    pub label: String,
    pub train: TrainSpec,
}

impl ExperimentSpec {
    /// Reads and expands a document, naming the field at fault.
    pub fn parse(text: &str) -> Result<(ExperimentSpec, Vec<Cell>), String> {
        let spec: ExperimentSpec = crate::json::parse_document(text, "experiment")
            .map_err(|(field, reason)| format!("{field}: {reason}"))?;
        let cells = spec.cells()?;
        Ok((spec, cells))
    }

    /// The cells, each a checked train spec; an error names `base`, `axes[i]…` or `rating…`.
    pub fn cells(&self) -> Result<Vec<Cell>, String> {
        self.cells_checked(&check)
    }

    /// [`ExperimentSpec::cells`] with each train spec also passing `more` (the jobs layer's
    /// admission, which knows the engine's shapes), its refusals named the same way.
    pub fn cells_checked(
        &self,
        more: &dyn Fn(&TrainSpec) -> Result<(), String>,
    ) -> Result<Vec<Cell>, String> {
        let check = |spec: &TrainSpec| check(spec).and_then(|()| more(spec));
        if !self.base.is_object() {
            return Err("base: a train spec (a JSON object)".into());
        }
        if self.repeats == 0 {
            return Err("repeats: at least 1".into());
        }
        self.rating.validate()?;
        if let Some(p) = &self.puzzles {
            if p.file.trim().is_empty() {
                return Err("puzzles.file: empty".into());
            }
            if p.nodes == 0 {
                return Err("puzzles.nodes: at least 1".into());
            }
        }
        let mut count = self.repeats as usize;
        for (i, axis) in self.axes.iter().enumerate() {
            // Before anything compares values pairwise: a body may hold many.
            if axis.values.len() > MAX_CELLS {
                return Err(format!(
                    "axes[{i}].values: {} values, at most {MAX_CELLS} cells in all",
                    axis.values.len()
                ));
            }
            if axis.values.is_empty() {
                return Err(format!(
                    "axes[{i}].values: empty (an axis has a value or more)"
                ));
            }
            if let Some(j) = self.axes[..i].iter().position(|a| a.field == axis.field) {
                return Err(format!(
                    "axes[{i}].field: {} is varied by axes[{j}] too",
                    axis.field
                ));
            }
            if let Some((a, b)) = duplicate(&axis.values) {
                return Err(format!("axes[{i}].values[{b}]: the same as values[{a}]"));
            }
            count = count.saturating_mul(axis.values.len());
        }
        if count > MAX_CELLS {
            return Err(format!(
                "axes: {count} cells (with repeats), at most {MAX_CELLS}: each trains a net and plays the others"
            ));
        }
        let base = train_spec(self.base.clone()).map_err(|e| format!("base: {e}"))?;
        if base.resume.is_some() {
            return Err(
                "base.resume: every cell would go on training the same run; cells train runs of their own".into(),
            );
        }
        if self.repeats > 1 && self.axes.iter().any(|a| a.field == "seed") {
            return Err(
                "repeats: the seed is an axis already; repeats would repeat its cells".into(),
            );
        }
        if base.seed.checked_add(u64::from(self.repeats) - 1).is_none()
            || self.axes.iter().any(|a| {
                a.field == "seed"
                    && a.values.iter().any(|v| {
                        v.as_u64()
                            .is_some_and(|s| s.checked_add(u64::from(self.repeats)).is_none())
                    })
            })
        {
            return Err("repeats: seed + repeats − 1 overflows".into());
        }
        check(&base).map_err(|e| format!("base: {e}"))?;
        // Each axis on its own first, so an error names the value, not a combination.
        for (i, axis) in self.axes.iter().enumerate() {
            for (j, v) in axis.values.iter().enumerate() {
                let mut doc = self.base.clone();
                set(&mut doc, &axis.field, v.clone())
                    .map_err(|e| format!("axes[{i}].field: {e}"))?;
                let spec = train_spec(doc).map_err(|e| {
                    // A field the train spec does not have is the axis's fault, not a value's.
                    let top = axis.field.split('.').next().unwrap_or_default();
                    if e.starts_with(&format!("{top}: unknown field")) {
                        format!("axes[{i}].field: {e}")
                    } else {
                        format!("axes[{i}].values[{j}]: {e}")
                    }
                })?;
                check(&spec).map_err(|e| format!("axes[{i}].values[{j}]: {e}"))?;
            }
        }
        let mut cells = Vec::with_capacity(count);
        let combos = self.axes.iter().fold(vec![Vec::new()], |acc, axis| {
            acc.into_iter()
                .flat_map(|c| {
                    axis.values.iter().map(move |v| {
                        let mut c = c.clone();
                        c.push(v.clone());
                        c
                    })
                })
                .collect::<Vec<Vec<serde_json::Value>>>()
        });
        for combo in combos {
            let mut doc = self.base.clone();
            let mut label = Vec::new();
            for (axis, v) in self.axes.iter().zip(&combo) {
                set(&mut doc, &axis.field, v.clone()).expect("checked above");
                label.push(format!("{}={}", axis.field, short(v)));
            }
            let spec = train_spec(doc).map_err(|e| {
                format!("axes: the cell {} is no train spec: {e}", label.join(", "))
            })?;
            check(&spec).map_err(|e| format!("axes: the cell {}: {e}", label.join(", ")))?;
            for r in 0..self.repeats as u64 {
                let mut train = spec.clone();
                train.seed = spec.seed.saturating_add(r);
                let mut label = label.clone();
                if self.repeats > 1 {
                    label.push(format!("seed={}", train.seed));
                }
                cells.push(Cell {
                    label: if label.is_empty() {
                        "base".into()
                    } else {
                        label.join(", ")
                    },
                    train,
                });
            }
        }
        Ok(cells)
    }
}

impl RatingPlan {
    fn validate(&self) -> Result<(), String> {
        if self.nodes.is_some() == self.tc.is_some() {
            return Err("rating: give nodes or tc (one of them)".into());
        }
        if self.nodes == Some(0) {
            return Err("rating.nodes: at least 1".into());
        }
        if let Some(tc) = &self.tc {
            crate::sprt::parse_tc(tc).map_err(|e| format!("rating.tc: {e}"))?;
        }
        if self.pairs == 0 {
            return Err("rating.pairs: at least 1 colour-reversed pair per pairing".into());
        }
        if self.book.trim().is_empty() {
            return Err("rating.book: empty".into());
        }
        if let Some(anchor) = &self.anchor {
            anchor.parse().map_err(|e| format!("rating.anchor: {e}"))?;
        }
        if self.schedule == Schedule::Gauntlet && self.anchor.is_none() {
            return Err(
                "rating.anchor: a gauntlet plays each net against the anchor: name it".into(),
            );
        }
        Ok(())
    }
}

impl ExperimentSpec {
    /// The queue's check of a payload (the API's is [`ExperimentSpec::cells`] with the engine's
    /// shapes, `lakefish_jobs::admission::check_experiment`).
    pub fn validate(&self) -> Result<(), String> {
        self.cells().map(|_| ())
    }

    /// The id: `ex-` and 12 hex digits of the spec's SHA-256, so the same document finds the
    /// same experiment (and resumes it).
    pub fn id(&self) -> ExperimentId {
        use sha2::Digest;
        let text = serde_json::to_string(self).expect("an experiment spec serializes");
        let hash = sha2::Sha256::digest(text.as_bytes());
        let hex: String = hash[..6].iter().map(|b| format!("{b:02x}")).collect();
        ExperimentId::new(&format!("{EXPERIMENT_ID_PREFIX}{hex}")).expect("a valid id")
    }
}

/// Where experiments live in the lake: `experiments/<id>/`.
pub const EXPERIMENTS_PREFIX: &str = "experiments";
pub const EXPERIMENT_ID_PREFIX: &str = "ex-";

crate::segment_name!(
    /// An experiment's id, `ex-<12 hex>` (`experiments/<id>/`).
    ExperimentId,
    "experiment",
    64
);

/// One cell of a queued experiment: train, quantize and register its net (queued by the
/// experiment's driver, one job per cell).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExperimentTask {
    pub experiment: ExperimentId,
    pub index: u32,
    /// The cell trains on a GPU: the job goes to the GPU workers' queue.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gpu: bool,
}

impl ExperimentTask {
    pub fn validate(&self) -> Result<(), String> {
        if self.index as usize >= MAX_CELLS {
            return Err(format!("index: at most {} (cells)", MAX_CELLS - 1));
        }
        Ok(())
    }
}

/// `experiments/<id>/experiment.json`: the spec and its cells, written once when planned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ExperimentPlan {
    pub id: ExperimentId,
    pub spec: ExperimentSpec,
    #[schemars(with = "Vec<serde_json::Value>")]
    pub cells: Vec<Cell>,
    /// The book and puzzle set as read when planned, copied beside the plan (lake keys): every
    /// worker plays and measures with the same bytes, hours later too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub book: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub puzzles: Option<String>,
    /// The anchor as resolved when planned (`best` made a net's name, fields written as
    /// text): every match plays this one, and a cell whose net it names is that player.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor: Option<String>,
    pub created: String,
}

/// `experiments/<id>/cells/cell-NNN.json`: a cell's net, written when it is registered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CellResult {
    pub index: u32,
    pub label: String,
    pub run: crate::names::RunId,
    /// The registered net, `nn-….nnue`.
    pub net: String,
    /// The run's last validation loss, on the shuffle's held-out chunks (the same for every
    /// cell of one shuffle).
    pub val_loss: Option<f64>,
    /// The material-only predictor's loss on the same positions: the floor a net must beat.
    pub material_val_loss: Option<f64>,
    /// Quantization error against the float model, centipawns.
    pub quantized_mean_cp: Option<f64>,
    /// How often the net's quiescence-level best move is the data's, on held-out positions.
    #[serde(default)]
    pub move_accuracy: Option<f64>,
    /// The share of the experiment's puzzles solved, when it names a puzzle set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub puzzle_accuracy: Option<f64>,
    /// Nodes/s of lakefish's search with this net over the bench positions, and that number
    /// divided by the classical evaluation's measured just after on the same worker.
    pub nodes_per_s: f64,
    pub nodes_per_s_ratio: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExperimentState {
    Training,
    Rating,
    Succeeded,
    Failed,
}

impl ExperimentState {
    pub fn as_str(self) -> &'static str {
        match self {
            ExperimentState::Training => "training",
            ExperimentState::Rating => "rating",
            ExperimentState::Succeeded => "succeeded",
            ExperimentState::Failed => "failed",
        }
    }

    pub fn is_final(self) -> bool {
        matches!(self, ExperimentState::Succeeded | ExperimentState::Failed)
    }
}

/// One pairing's games, counted from its fixed-length match (an SPRT test).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PairingResult {
    /// Players by their index in the table.
    pub a: usize,
    pub b: usize,
    pub sprt: Option<crate::names::SprtId>,
    /// From `a`'s side.
    pub wins: u64,
    pub draws: u64,
    pub losses: u64,
    pub penta: [u64; 5],
    pub done: bool,
    /// Its test was stopped by hand before all its pairs were played.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stopped: bool,
}

/// One player's row of the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TableRow {
    /// The cell's label, or `anchor` for an anchor that is not a cell.
    pub player: String,
    /// What played: a net name, `classical`, an engine.
    pub plays: String,
    /// Elo relative to the anchor (fixed at 0), with half its 95 % interval.
    pub elo: Option<f64>,
    pub elo_error: Option<f64>,
    pub games: u64,
    /// Points over games, 0..1.
    pub score: Option<f64>,
    pub cell: Option<CellResult>,
}

/// `experiments/<id>/status.json`: where an experiment stands; the table once rated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ExperimentStatus {
    pub id: ExperimentId,
    pub state: ExperimentState,
    pub cells: usize,
    pub cells_done: usize,
    pub pairings: Vec<PairingResult>,
    /// Players in table order: the cells, then the anchor when it is not a cell.
    pub players: Vec<String>,
    pub anchor: usize,
    pub table: Vec<TableRow>,
    /// Why the fit gave no ratings (every game of a player won, say), or why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Run by a process of its own (`lakefish experiment run` without `--api`): the
    /// scheduler leaves it alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub local: bool,
    /// Queued attempts after the first (a failed experiment submitted again): part of the
    /// ids of the jobs it queues, so the failed ones are not found again.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attempt: u32,
    pub created: String,
    pub updated: String,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// A train spec from JSON; an error names the field inside it (`net.inputs.parts[1].family:
/// unknown variant ...`).
fn train_spec(doc: serde_json::Value) -> Result<TrainSpec, String> {
    serde_path_to_error::deserialize(doc).map_err(|e| {
        let path = e.path().to_string();
        if path == "." || path.is_empty() {
            e.inner().to_string()
        } else {
            format!("{path}: {}", e.inner())
        }
    })
}

/// What a train spec is checked for at submission without the lake.
fn check(spec: &TrainSpec) -> Result<(), String> {
    spec.validate()?;
    spec.trained_net().map(|_| ())
}

/// Sets the dotted `field` of the JSON object `doc`; every object on the way must exist but
/// the last key may be new (the train spec then says whether it knows it).
fn set(doc: &mut serde_json::Value, field: &str, value: serde_json::Value) -> Result<(), String> {
    let mut at = doc;
    let keys: Vec<&str> = field.split('.').collect();
    if keys.iter().any(|k| k.is_empty()) {
        return Err(format!(
            "{field:?} is not a field name (dotted into objects)"
        ));
    }
    for (n, key) in keys.iter().enumerate() {
        let serde_json::Value::Object(map) = at else {
            return Err(format!(
                "{}: not an object in the base",
                keys[..n].join(".")
            ));
        };
        if n + 1 == keys.len() {
            map.insert(key.to_string(), value);
            return Ok(());
        }
        at = map
            .get_mut(*key)
            .ok_or_else(|| format!("{field}: the base has no {}", keys[..=n].join(".")))?;
    }
    unreachable!("the loop returns at the last key")
}

/// The first two equal values, by index.
fn duplicate(values: &[serde_json::Value]) -> Option<(usize, usize)> {
    (0..values.len()).find_map(|b| (0..b).find(|&a| values[a] == values[b]).map(|a| (a, b)))
}

/// A value as a label shows it: strings bare, objects by their `name` or as JSON.
fn short(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Object(o) => match (o.get("name"), o.get("kind")) {
            (Some(serde_json::Value::String(n)), _) => n.clone(),
            // A schedule or optimizer: `constant(value=0.2)`.
            (None, Some(serde_json::Value::String(k))) => {
                let rest: Vec<String> = o
                    .iter()
                    .filter(|(key, _)| *key != "kind")
                    .map(|(key, val)| format!("{key}={}", short(val)))
                    .collect();
                format!("{k}({})", rest.join(", "))
            }
            _ => v.to_string(),
        },
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(axes: &str) -> String {
        format!(
            r#"{{"base": {{"shuffle": "sh-000000000001", "features": "all768", "arch": "256x2-32", "epochs": 2, "seed": 7}},
                "axes": {axes}, "repeats": 1,
                "rating": {{"book": "lake:raw/books/b.epd", "nodes": 1000, "pairs": 4, "anchor": "classical"}}}}"#
        )
    }

    /// The thesis's L1 sweep by λ: six cells, first axis slowest, each a full train spec.
    #[test]
    fn axes_cross_into_cells() {
        let (_, cells) = ExperimentSpec::parse(&doc(
            r#"[{"field": "arch", "values": ["256x2-32", "512x2-32", "1024x2-32"]},
                {"field": "lambda_start", "values": [0.5, 1.0]}]"#,
        ))
        .unwrap();
        let labels: Vec<&str> = cells.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "arch=256x2-32, lambda_start=0.5",
                "arch=256x2-32, lambda_start=1.0",
                "arch=512x2-32, lambda_start=0.5",
                "arch=512x2-32, lambda_start=1.0",
                "arch=1024x2-32, lambda_start=0.5",
                "arch=1024x2-32, lambda_start=1.0"
            ]
        );
        assert_eq!(cells[5].train.arch, "1024x2-32");
        assert_eq!(cells[5].train.lambda_start, 1.0);
        assert!(
            cells
                .iter()
                .all(|c| c.train.seed == 7 && c.train.epochs == 2)
        );
        // Repeats: seeds 7 and 8 for each cell.
        let two = doc(r#"[{"field": "lr", "values": [0.001, 0.002]}]"#)
            .replace("\"repeats\": 1", "\"repeats\": 2");
        let (_, cells) = ExperimentSpec::parse(&two).unwrap();
        let labels: Vec<&str> = cells.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "lr=0.001, seed=7",
                "lr=0.001, seed=8",
                "lr=0.002, seed=7",
                "lr=0.002, seed=8"
            ]
        );
        // A described net's field, dotted.
        let net = doc(r#"[{"field": "net.transformer.width", "values": [64, 128]}]"#).replace(
            r#""features": "all768", "arch": "256x2-32","#,
            r#""net": {"version": 1, "inputs": {"family": "combined", "parts": [{"family": "threats"}, {"family": "piece_square"}]}, "transformer": {"width": 32, "activation": "screlu"}, "quantization": {"eval_scale": 400}},"#,
        );
        let (_, cells) = ExperimentSpec::parse(&net).unwrap();
        assert_eq!(cells[1].train.net.as_ref().unwrap().transformer.width, 128);
    }

    /// Bad axes name where: an unknown field, an empty list, a value the field refuses, a
    /// field the base lacks, a repeated value or field, too many cells, a bad rating plan.
    #[test]
    fn bad_experiments_name_the_field() {
        for (axes, says) in [
            (
                r#"[{"field": "lamda_start", "values": [0.5]}]"#,
                "axes[0].field: lamda_start: unknown field `lamda_start`",
            ),
            (
                r#"[{"field": "lr", "values": []}]"#,
                "axes[0].values: empty",
            ),
            (
                r#"[{"field": "loss", "values": ["elmo", "banana"]}]"#,
                "axes[0].values[1]: loss: unknown variant `banana`",
            ),
            (
                r#"[{"field": "epochs", "values": [1, 0]}]"#,
                "axes[0].values[1]: batch_size and epochs",
            ),
            (
                r#"[{"field": "net.transformer.width", "values": [64]}]"#,
                "axes[0].field: net.transformer.width: the base has no net",
            ),
            (
                r#"[{"field": "lr", "values": [0.1, 0.1]}]"#,
                "axes[0].values[1]: the same as values[0]",
            ),
            (
                r#"[{"field": "lr", "values": [0.1]}, {"field": "lr", "values": [0.2]}]"#,
                "axes[1].field: lr is varied by axes[0] too",
            ),
            (
                r#"[{"field": "lr", "values": [1,2,3,4,5,6,7,8,9]}, {"field": "seed", "values": [1,2,3,4,5,6,7,8]}]"#,
                "axes: 72 cells",
            ),
            (
                r#"[{"field": "a..b", "values": [1]}]"#,
                "axes[0].field: \"a..b\"",
            ),
        ] {
            let e = ExperimentSpec::parse(&doc(axes)).unwrap_err();
            assert!(e.starts_with(says), "{axes}: {e}");
        }
        let e = ExperimentSpec::parse(&doc("[]").replace("\"nodes\": 1000", "\"nodes\": 0"))
            .unwrap_err();
        assert!(e.starts_with("rating.nodes"), "{e}");
        // A time control that cannot be played, a base that resumes a run, a seed that
        // overflows, and an axis too long to compare pairwise are refused before any work.
        for (doc, says) in [
            (
                doc("[]").replace("\"nodes\": 1000", "\"tc\": \"8+x\""),
                "rating.tc: ",
            ),
            (
                doc("[]").replace("\"epochs\": 2", "\"epochs\": 2, \"resume\": \"run-1\""),
                "base.resume: ",
            ),
            (
                doc("[]")
                    .replace("\"seed\": 7", "\"seed\": 18446744073709551615")
                    .replace("\"repeats\": 1", "\"repeats\": 2"),
                "repeats: seed + repeats",
            ),
            (
                doc(&format!(
                    r#"[{{"field": "lr", "values": [{}]}}]"#,
                    (0..5000)
                        .map(|i| i.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                )),
                "axes[0].values: 5000 values",
            ),
        ] {
            let e = ExperimentSpec::parse(&doc).unwrap_err();
            assert!(e.starts_with(says), "{says}: {e}");
        }
        let e = ExperimentSpec::parse(
            &doc("[]")
                .replace("\"nodes\": 1000", "\"tc\": \"8+0.08\"")
                .replace("\"book\"", "\"nodes\": 5, \"book\""),
        )
        .unwrap_err();
        assert!(e.starts_with("rating: give nodes or tc"), "{e}");
        let e =
            ExperimentSpec::parse(&doc("[]").replace("\"pairs\": 4", "\"pairs\": 0")).unwrap_err();
        assert!(e.starts_with("rating.pairs"), "{e}");
        let e = ExperimentSpec::parse(
            &doc("[]").replace(r#", "anchor": "classical""#, r#", "schedule": "gauntlet""#),
        )
        .unwrap_err();
        assert!(e.starts_with("rating.anchor"), "{e}");
        let e = ExperimentSpec::parse(&doc("[]").replace("\"epochs\": 2", "\"epochs\": 0"))
            .unwrap_err();
        assert!(e.starts_with("base: "), "{e}");
        let e = ExperimentSpec::parse(
            &doc("[]").replace("\"repeats\": 1", "\"repeats\": 1, \"color\": 1"),
        )
        .unwrap_err();
        assert!(e.contains("color"), "{e}");
        // A check from outside (the jobs layer's admission) names the value the same way.
        let (spec, _) = ExperimentSpec::parse(&doc(
            r#"[{"field": "arch", "values": ["256x2-32", "banana"]}]"#,
        ))
        .unwrap();
        let e = spec
            .cells_checked(&|t| {
                if t.arch == "banana" {
                    Err("spec.arch: not a shape".into())
                } else {
                    Ok(())
                }
            })
            .unwrap_err();
        assert_eq!(e, "axes[0].values[1]: spec.arch: not a shape");
        // No axes: the base alone.
        let (_, cells) = ExperimentSpec::parse(&doc("[]")).unwrap();
        assert_eq!(cells.len(), 1);
        assert_eq!(cells[0].label, "base");
    }
}
