//! Per-position masks: one boolean per row of a `positions` part, stored beside the data as
//! `masks/<name>/source=<s>/dataset=<d>/part-NNNNN.parquet` with the same file name as the
//! part, so several definitions live side by side without rewriting data.

use crate::{DatasetName, JobId, Source};
use serde::{Deserialize, Serialize};

pub const MASK_MANIFEST_FILE: &str = "_mask.json";
pub const MASK_COLUMN: &str = "keep";
/// Parquet key-value metadata of a mask part: the row count of the part it belongs to.
pub const META_PART_ROWS: &str = "lakefish.part_rows";
pub const META_MASK: &str = "lakefish.mask";

crate::segment_name!(
    /// A mask definition's name: one path segment.
    MaskName,
    "mask",
    64
);

/// What a mask keeps: every rule in `rules` must keep a row (a conjunction), and then the
/// optional ply and |score| limits. The default rule set is `[quiet]`: the side to move is not
/// in check, the row's move is neither a capture (en passant included) nor a promotion, and
/// the score is not null. Every definition except `all` drops rows without a score.
///
/// Random rules (`random-skip`, `wld`, `piece-count`) are deterministic for `seed`: row `r` of
/// part `P` (its file name inside the dataset) draws `u = splitmix64(seed ^ salt ^
/// fnv1a64(P) ^ r * 0x9E3779B97F4A7C15)` (wrapping arithmetic) with the rule's salt
/// ([`MaskRule::salt`]), and `p = (u >> 11) / 2^53` in `[0, 1)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MaskDefinition {
    pub name: MaskName,
    /// The rules, all of which keep a row (default `[quiet]`).
    #[serde(default = "quiet_rules", skip_serializing_if = "is_quiet_rules")]
    pub rules: Vec<MaskRule>,
    /// Rows before this ply are dropped (opening positions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_ply: Option<u16>,
    /// Rows whose |score| exceeds this are dropped (decided positions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_abs_score: Option<u16>,
    /// The random rules' seed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub seed: u64,
}

fn quiet_rules() -> Vec<MaskRule> {
    vec![MaskRule::Quiet]
}

fn is_quiet_rules(r: &[MaskRule]) -> bool {
    r == [MaskRule::Quiet]
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// One rule of a [`MaskDefinition`], named as nnue-pytorch's data loader names its skips.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "rule", rename_all = "kebab-case", deny_unknown_fields)]
pub enum MaskRule {
    /// nnue-pytorch's `smart_fen_skipping`, with promotions too: not in check, no capture,
    /// no promotion.
    Quiet,
    /// Every row, scored or not.
    All,
    /// `wld_filtered`: a row is dropped with probability 1 − P(its result | its score, ply)
    /// under nnue-pytorch's win-rate model (a = poly(as, m), b = 1.5·poly(bs, m), m =
    /// min(ply, 240)/64, x = clamp(100·score/208, ±2000); win = 1/(1+e^((a−x)/b)), loss =
    /// 1/(1+e^((a+x)/b)), draw = 1 − win − loss). Keeps rows whose score agrees with the
    /// game's result.
    Wld,
    /// `random_fen_skipping N`: a row is dropped with probability N/(N+1).
    RandomSkip { skip: u32 },
    /// `early_fen_skipping N`: rows at ply ≤ N are dropped.
    EarlySkip { plies: u16 },
    /// `simple_eval_skipping N`: rows whose material balance (208, 781, 825, 1276, 2538 for
    /// P, N, B, R, Q) is below N in absolute value are dropped.
    SimpleEvalSkip { below: u16 },
    /// nnue-pytorch's piece-count reshaping (`pc_y0..pc_y4`): the target weight of a piece
    /// count is a cubic Hermite spline through (0, y0), (8, y1), (16, y2), (24, y3), (32, y4)
    /// with finite-difference slopes. Applied after every other rule, on the histogram `n` of
    /// the rows they keep (the whole dataset: what nnue-pytorch's running histogram tends
    /// to): `ratio[c] = N·w[c] / (W·n[c])`, `keep[c] = min(1, (1 − max_skip)·ratio[c] /
    /// min ratio)`. So the most over-represented count keeps `1 − max_skip` of its rows.
    PieceCount {
        /// Target weights at 0, 8, 16, 24 and 32 pieces (nnue-pytorch's defaults: 0, 0.4, 1,
        /// 1, 0.75).
        #[serde(default = "default_pc_weights")]
        weights: [f64; 5],
        /// The share of the most over-represented piece count that is dropped (default
        /// 0.975, as nnue-pytorch).
        #[serde(default = "default_max_skip")]
        max_skip: f64,
    },
}

pub fn default_pc_weights() -> [f64; 5] {
    [0.0, 0.4, 1.0, 1.0, 0.75]
}

pub fn default_max_skip() -> f64 {
    0.975
}

impl MaskRule {
    /// The salt of a random rule's draws (see [`MaskDefinition`]); `None` for the others.
    pub fn salt(&self) -> Option<u64> {
        match self {
            MaskRule::RandomSkip { .. } => Some(0x5241_4e44), // "RAND"
            MaskRule::Wld => Some(0x574c_4400),               // "WLD"
            MaskRule::PieceCount { .. } => Some(0x5043_4e54), // "PCNT"
            _ => None,
        }
    }

    /// The rule's name as `--rule` takes it.
    pub fn name(&self) -> &'static str {
        match self {
            MaskRule::Quiet => "quiet",
            MaskRule::All => "all",
            MaskRule::Wld => "wld",
            MaskRule::RandomSkip { .. } => "random-skip",
            MaskRule::EarlySkip { .. } => "early-skip",
            MaskRule::SimpleEvalSkip { .. } => "simple-eval-skip",
            MaskRule::PieceCount { .. } => "piece-count",
        }
    }

    /// Rules that need the whole dataset (a histogram) or a row's place in it.
    pub fn needs_dataset(&self) -> bool {
        self.salt().is_some()
    }

    /// The CLI's form: `quiet`, `all`, `wld`, `random-skip=N`, `early-skip=N`,
    /// `simple-eval-skip=N`, `piece-count` or `piece-count=Y0,Y1,Y2,Y3,Y4[:MAX_SKIP]`.
    pub fn parse(s: &str) -> Result<MaskRule, String> {
        let (name, arg) = match s.split_once('=') {
            Some((n, a)) => (n.trim(), Some(a.trim())),
            None => (s.trim(), None),
        };
        let number = |what: &str| -> Result<u64, String> {
            let a = arg.ok_or_else(|| format!("rule {name} needs a value: {name}={what}"))?;
            a.parse::<u64>()
                .map_err(|_| format!("rule {name}: {a:?} is not a whole number ({what})"))
        };
        let small = |v: u64, max: u64| -> Result<u64, String> {
            if v > max {
                return Err(format!("rule {name}: {v} is larger than {max}"));
            }
            Ok(v)
        };
        let rule = match name {
            "quiet" | "all" | "wld" if arg.is_some() => {
                return Err(format!("rule {name} takes no value"));
            }
            "quiet" => MaskRule::Quiet,
            "all" => MaskRule::All,
            "wld" => MaskRule::Wld,
            "random-skip" => MaskRule::RandomSkip {
                skip: small(number("N, to drop N of every N+1 rows")?, u32::MAX as u64)? as u32,
            },
            "early-skip" => MaskRule::EarlySkip {
                plies: small(number("the last ply dropped")?, u16::MAX as u64)? as u16,
            },
            "simple-eval-skip" => MaskRule::SimpleEvalSkip {
                below: small(number("a material balance")?, u16::MAX as u64)? as u16,
            },
            "piece-count" => {
                let (mut weights, mut max_skip) = (default_pc_weights(), default_max_skip());
                if let Some(a) = arg {
                    let (ws, skip) = match a.split_once(':') {
                        Some((w, m)) => (w, Some(m)),
                        None => (a, None),
                    };
                    let parsed: Vec<f64> = ws
                        .split(',')
                        .map(|w| w.trim().parse::<f64>())
                        .collect::<Result<_, _>>()
                        .map_err(|_| {
                            format!("rule piece-count: {ws:?} is not five numbers Y0,Y1,Y2,Y3,Y4")
                        })?;
                    weights = parsed.try_into().map_err(|_| {
                        format!("rule piece-count: {ws:?} is not five numbers Y0,Y1,Y2,Y3,Y4")
                    })?;
                    if let Some(m) = skip {
                        max_skip = m.trim().parse().map_err(|_| {
                            format!("rule piece-count: max skip {m:?} is not a number")
                        })?;
                    }
                }
                MaskRule::PieceCount { weights, max_skip }
            }
            other => {
                return Err(format!(
                    "unknown rule {other:?}: one of quiet, all, wld, random-skip=N, \
                     early-skip=N, simple-eval-skip=N, piece-count[=Y0,Y1,Y2,Y3,Y4[:MAX_SKIP]]"
                ));
            }
        };
        rule.validate()?;
        Ok(rule)
    }

    pub fn validate(&self) -> Result<(), String> {
        if let MaskRule::PieceCount { weights, max_skip } = self {
            if weights.iter().any(|w| !w.is_finite() || *w < 0.0)
                || weights.iter().all(|w| *w == 0.0)
            {
                return Err(format!(
                    "piece-count weights {weights:?}: each must be finite and ≥ 0, one > 0"
                ));
            }
            if !(0.0..1.0).contains(max_skip) {
                return Err(format!(
                    "piece-count max_skip {max_skip}: must be in [0, 1)"
                ));
            }
        }
        Ok(())
    }
}

impl MaskDefinition {
    pub fn quiet() -> Self {
        MaskDefinition {
            name: MaskName::new("quiet").expect("valid"),
            rules: quiet_rules(),
            min_ply: None,
            max_abs_score: None,
            seed: 0,
        }
    }

    /// Rules are not empty, `all` stands alone, at most one piece-count, each rule's values
    /// in range. Errors name the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.rules.is_empty() {
            return Err("rules: empty (give at least one rule, e.g. all or quiet)".into());
        }
        if self.rules.contains(&MaskRule::All) {
            if self.rules.len() > 1 {
                return Err("rules: `all` keeps every row and stands alone".into());
            }
            if self.min_ply.is_some() || self.max_abs_score.is_some() {
                return Err(
                    "min_ply, max_abs_score: `all` keeps every row; use early-skip and \
                     max_abs_score with another rule"
                        .into(),
                );
            }
        }
        for (i, r) in self.rules.iter().enumerate() {
            if self.rules[..i]
                .iter()
                .any(|q| std::mem::discriminant(q) == std::mem::discriminant(r))
            {
                return Err(format!("rules[{i}]: a second {} rule", r.name()));
            }
        }
        for (i, r) in self.rules.iter().enumerate() {
            r.validate().map_err(|e| format!("rules[{i}]: {e}"))?;
        }
        Ok(())
    }

    /// Whether the definition can be applied row by row while training reads a shuffle (no
    /// random draw, no dataset histogram).
    pub fn applies_per_row(&self) -> bool {
        !self.rules.iter().any(MaskRule::needs_dataset)
    }
}

impl MaskSpec {
    pub fn validate(&self) -> Result<(), String> {
        self.definition
            .validate()
            .map_err(|e| format!("definition.{e}"))
    }
}

/// `lakefish mask quiet`: write a mask for every part of one dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MaskSpec {
    pub dataset: DatasetName,
    #[serde(default = "default_source")]
    pub source: Source,
    pub definition: MaskDefinition,
}

fn default_source() -> Source {
    Source::Binpack
}

/// Written last: the mask is complete for the dataset version it names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MaskManifest {
    pub version: u32,
    pub definition: MaskDefinition,
    pub source: Source,
    pub dataset: DatasetName,
    /// The job that committed the dataset the mask was computed from.
    pub dataset_job_id: JobId,
    pub job_id: JobId,
    pub rows: u64,
    /// Rows the mask keeps.
    pub selected: u64,
    pub parts: Vec<MaskPart>,
    pub created: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MaskPart {
    pub name: String,
    pub rows: u64,
    pub selected: u64,
}

/// `masks/<name>/source=<s>/dataset=<d>`
pub fn mask_prefix(name: &MaskName, source: Source, dataset: &DatasetName) -> String {
    format!("masks/{name}/source={source}/dataset={dataset}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_and_old_definitions_read_as_quiet() {
        assert_eq!(
            MaskRule::parse("random-skip=3"),
            Ok(MaskRule::RandomSkip { skip: 3 })
        );
        assert_eq!(
            MaskRule::parse("piece-count=1,1,2,1,1:0.5"),
            Ok(MaskRule::PieceCount {
                weights: [1.0, 1.0, 2.0, 1.0, 1.0],
                max_skip: 0.5
            })
        );
        for (bad, says) in [
            ("early-skip", "needs a value"),
            ("early-skip=-1", "not a whole number"),
            ("wld=2", "takes no value"),
            ("piece-count=1,2,3", "five numbers"),
            ("piece-count=0,0,0,0,0", "one > 0"),
            ("piece-count=1,1,1,1,1:1.5", "[0, 1)"),
            ("smart", "unknown rule"),
        ] {
            let e = MaskRule::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        // A definition stored before rules existed is the quiet one, and a quiet definition
        // is written as before (ids and manifests do not change).
        let old: MaskDefinition = serde_json::from_str(r#"{"name":"quiet"}"#).unwrap();
        assert_eq!(old, MaskDefinition::quiet());
        assert_eq!(
            serde_json::to_string(&MaskDefinition::quiet()).unwrap(),
            r#"{"name":"quiet"}"#
        );
        let mut d = MaskDefinition::quiet();
        d.rules = vec![];
        assert!(d.validate().unwrap_err().starts_with("rules: empty"));
        d.rules = vec![MaskRule::All, MaskRule::Quiet];
        assert!(d.validate().unwrap_err().contains("stands alone"));
        d.rules = vec![MaskRule::Quiet, MaskRule::Quiet];
        assert_eq!(d.validate().unwrap_err(), "rules[1]: a second quiet rule");
        d.rules = vec![MaskRule::All];
        d.min_ply = Some(3);
        assert!(
            d.validate()
                .unwrap_err()
                .starts_with("min_ply, max_abs_score")
        );
        d.min_ply = None;
        d.rules = vec![MaskRule::Quiet, MaskRule::EarlySkip { plies: 8 }];
        assert!(d.validate().is_ok() && d.applies_per_row());
        d.rules.push(MaskRule::Wld);
        assert!(d.validate().is_ok() && !d.applies_per_row());
    }
}
