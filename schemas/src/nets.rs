//! Quantized nets: the `quantize` and `register` job specs, the quantization report written
//! beside a run's `.nnue` files, and the registry's manifests.
//!
//! Lake layout:
//! - `runs/<run>/nets/step-NNNNNNNNN.nnue` and `.json` (a [`QuantizeReport`]; written last,
//!   so its presence means the `.nnue` beside it is complete);
//! - `nets/nn-<first 12 hex of sha256>.nnue` and `nets/nn-<...>.json` (a [`NetManifest`],
//!   written after the bytes: a net is registered once its manifest exists).

use serde::{Deserialize, Serialize};

pub const NETS_PREFIX: &str = "nets";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuantizeSpec {
    /// The training run (`run-...`).
    pub run: crate::names::RunId,
    /// The checkpoint's step (default: the run's last checkpoint).
    #[serde(default)]
    pub checkpoint: Option<u64>,
    /// Lake positions the integer net is compared with the float model on.
    #[serde(default = "d_positions")]
    pub positions: u32,
    /// Refuse the net when the mean absolute difference exceeds this (centipawns).
    #[serde(default = "d_mean")]
    pub max_mean_cp: f64,
    /// Refuse the net when the 99th-percentile absolute difference exceeds this.
    #[serde(default = "d_p99")]
    pub max_p99_cp: f64,
}

fn d_positions() -> u32 {
    10_000
}
/// The default limits of a quantization's error against the float model, centipawns: wide
/// enough for the small nets a first run trains (the demo's pipeline quantizes within them),
/// tight enough that a broken quantization (hundreds of centipawns) never passes.
pub const DEFAULT_MAX_MEAN_CP: f64 = 8.0;
pub const DEFAULT_MAX_P99_CP: f64 = 40.0;

fn d_mean() -> f64 {
    DEFAULT_MAX_MEAN_CP
}
fn d_p99() -> f64 {
    DEFAULT_MAX_P99_CP
}

impl QuantizeSpec {
    pub fn new(run: &crate::names::RunId) -> Self {
        QuantizeSpec {
            run: run.clone(),
            checkpoint: None,
            positions: d_positions(),
            max_mean_cp: d_mean(),
            max_p99_cp: d_p99(),
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.positions == 0 {
            return Err("positions must be at least 1".into());
        }
        if !(self.max_mean_cp >= 0.0 && self.max_p99_cp >= 0.0) {
            return Err("max_mean_cp and max_p99_cp must be non-negative".into());
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegisterSpec {
    pub run: crate::names::RunId,
    /// The quantized checkpoint's step (default: the run's last checkpoint).
    #[serde(default)]
    pub checkpoint: Option<u64>,
    /// The registered net this one was trained from or is meant to replace.
    #[serde(default)]
    pub parent: Option<String>,
}

impl RegisterSpec {
    pub fn validate(&self) -> Result<(), String> {
        if let Some(p) = &self.parent {
            net_name(p)?;
        }
        Ok(())
    }
}

/// How far the integer net is from the float model it came from (all zero for an imported
/// net: there is no float model of ours to compare with).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QuantizationError {
    /// Lake positions compared.
    pub positions: u64,
    /// Absolute differences in UCI centipawns (Stockfish's normalization per position).
    pub mean_abs_cp: f64,
    pub p99_abs_cp: f64,
    pub max_abs_cp: f64,
    /// The same in internal units (the lake's score unit).
    pub mean_abs_internal: f64,
    pub p99_abs_internal: f64,
}

/// `runs/<run>/nets/step-NNNNNNNNN.json`: one quantized checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QuantizeReport {
    pub run: String,
    /// Checkpoint file name under `runs/<run>/checkpoints/`.
    pub checkpoint: String,
    pub step: u64,
    /// Lake key of the `.nnue` file.
    pub file: String,
    pub sha256: String,
    pub bytes: u64,
    pub features: String,
    pub arch: String,
    pub arch_hash: String,
    pub error: QuantizationError,
    pub created: String,
}

/// `nets/<name>.json`: a registered net.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NetManifest {
    /// `nn-<first 12 hex of sha256>.nnue`.
    pub name: String,
    pub sha256: String,
    pub bytes: u64,
    pub features: String,
    pub arch: String,
    pub arch_hash: String,
    pub description: String,
    pub run: String,
    pub checkpoint: String,
    pub step: u64,
    pub shuffle: String,
    /// The shuffle's inputs: `source/dataset` pairs.
    pub datasets: Vec<String>,
    pub mask: String,
    pub parent: Option<String>,
    pub quantization: QuantizationError,
    pub created: String,
    /// The file's format (manifests written before formats existed are lakefish's).
    #[serde(default)]
    pub format: NetFormat,
    /// Made elsewhere and imported (`lakefish nets import`): run, shuffle, datasets and mask
    /// are empty, the lineage is outside lakefish.
    #[serde(default)]
    pub external: bool,
    /// The net as a description (`features` and `arch` expanded; absent in manifests written
    /// before descriptions existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net: Option<crate::netspec::NetSpec>,
}

/// Formats of a net file.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum NetFormat {
    /// lakefish's own `.nnue` (magic `LKFNNUE`), read by lakefish's engine.
    #[default]
    Lakefish,
    /// Stockfish 15.1's network (HalfKAv2_hm, 8 layer stacks), read by Stockfish 15.1.
    Stockfish,
}

impl NetFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            NetFormat::Lakefish => "lakefish",
            NetFormat::Stockfish => "stockfish",
        }
    }
}

impl std::str::FromStr for NetFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "lakefish" => Ok(NetFormat::Lakefish),
            "stockfish" => Ok(NetFormat::Stockfish),
            other => Err(format!(
                "unknown net format {other:?}; expected lakefish or stockfish"
            )),
        }
    }
}

/// Lake keys of a run's quantized checkpoint at `step`: the `.nnue` file and its report.
pub fn quantized_keys(run: &str, step: u64) -> (String, String) {
    let base = format!("runs/{run}/nets/step-{step:09}");
    (format!("{base}.nnue"), format!("{base}.json"))
}

/// The step of a checkpoint file name (`step-000000123.ot`).
pub fn checkpoint_step(file_name: &str) -> Option<u64> {
    file_name
        .strip_prefix("step-")?
        .strip_suffix(".ot")?
        .parse()
        .ok()
}

/// The registry name of bytes with this sha256 (hex).
pub fn name_for_sha256(sha256_hex: &str) -> String {
    format!("nn-{}.nnue", &sha256_hex[..12])
}

/// Checks a net name (`nn-` + 12 lowercase hex + `.nnue`; the extension may be left off) and
/// returns it in full.
pub fn net_name(name: &str) -> Result<String, String> {
    let stem = name.strip_suffix(".nnue").unwrap_or(name);
    let ok = stem.len() == 15
        && stem.starts_with("nn-")
        && stem[3..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if ok {
        Ok(format!("{stem}.nnue"))
    } else {
        Err(format!(
            "net name {name:?} is not nn-<12 lowercase hex digits>.nnue"
        ))
    }
}

/// Lake keys of a registered net: its bytes and its manifest.
pub fn net_keys(name: &str) -> (String, String) {
    let stem = name.strip_suffix(".nnue").unwrap_or(name);
    (
        format!("{NETS_PREFIX}/{stem}.nnue"),
        format!("{NETS_PREFIX}/{stem}.json"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_names_are_checked() {
        assert_eq!(net_name("nn-0123456789ab").unwrap(), "nn-0123456789ab.nnue");
        assert_eq!(
            net_name("nn-0123456789ab.nnue").unwrap(),
            "nn-0123456789ab.nnue"
        );
        for bad in [
            "nn-0123456789AB",
            "nn-0123",
            "../nets/nn-0123456789ab",
            "nn-0123456789ab.json",
            "",
        ] {
            assert!(net_name(bad).is_err(), "{bad}");
        }
        assert_eq!(
            net_keys("nn-0123456789ab.nnue"),
            (
                "nets/nn-0123456789ab.nnue".to_string(),
                "nets/nn-0123456789ab.json".to_string()
            )
        );
    }

    #[test]
    fn specs_validate() {
        let run = crate::names::RunId::new("run-abc").unwrap();
        assert!(QuantizeSpec::new(&run).validate().is_ok());
        // A run id that is not one cannot be written down.
        assert!(crate::names::RunId::new("../x").is_err());
        let bad: Result<QuantizeSpec, _> = serde_json::from_str(r#"{"run": "../x"}"#);
        assert!(bad.unwrap_err().to_string().contains("run name \"../x\""));
        let mut q = QuantizeSpec::new(&run);
        q.positions = 0;
        assert!(q.validate().is_err());
        let r = RegisterSpec {
            run,
            checkpoint: None,
            parent: Some("best".into()),
        };
        assert!(r.validate().unwrap_err().contains("best"));
    }
}

/// `registry/best.json`: the net new candidates are tested against. Absent until a first net
/// is promoted; then the hand-written evaluation is the one to beat.
pub const BEST_KEY: &str = "registry/best.json";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BestNet {
    /// A registered net's name, `nn-<12 hex>`.
    pub name: String,
    /// When it became the best (RFC 3339).
    pub since: String,
    /// Why: the SPRT that accepted it, or a manual promotion.
    pub reason: String,
    /// Who: a pipeline (`pipeline:<name>`), a token's name, or `local:<user>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// Which promotion this is, counting from 1 (0: made before promotions were counted):
    /// the order of the history, whatever the clocks say.
    #[serde(default)]
    pub number: u64,
    /// The best net it replaced (`None`: the hand-written evaluation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<String>,
    /// The test that measured it, the side it was measured against (the best net when the
    /// test began, `classical` before any), its Elo estimate and 95 % error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sprt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub against: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elo: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elo_error: Option<f64>,
}

/// Where each promotion is kept, one object each, named so that keys sort in the order the
/// promotions happened: `registry/best-history/<number, 10 digits>-<name>.json`.
pub const BEST_HISTORY_PREFIX: &str = "registry/best-history";

/// A request to make a registered net the best one (by hand: a promotion or a roll-back).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromoteRequest {
    /// A registered net, `nn-<12 hex>` (with or without `.nnue`).
    pub name: String,
    /// Why, for the history (default: "promoted by hand").
    #[serde(default)]
    pub reason: Option<String>,
}
