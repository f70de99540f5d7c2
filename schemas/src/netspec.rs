//! A network description (`NetSpec`): everything the trainer, the quantizer and the engine
//! need to know about a net, as one versioned document (TOML or JSON).
//!
//! ```toml
//! version = 1
//! [inputs]
//! family = "king_buckets"
//! mirror = true               # 32 entries: the king on files e-h mirrors the board
//! layout = [0, 1, 2, 3,  4, 4, 5, 5,  6, 6, 6, 6,  7, 7, 7, 7,
//!           8, 8, 8, 8,  8, 8, 8, 8,  9, 9, 9, 9,  9, 9, 9, 9]
//! factoriser = true
//! [transformer]
//! width = 1024
//! activation = "screlu"
//! [output_buckets]
//! rule = "material_count"
//! count = 8
//! [quantization]
//! eval_scale = 400.0
//! ```
//!
//! The document says what a net *is*; today's names (`all768` with `256x2-32-32`,
//! `stockfish-15.1`, ...) are presets that expand into one ([`NetSpec::preset`]). Inputs are
//! a family with a size and a bound on active features per perspective, never "one feature
//! per piece and square", so families with several features per piece fit the same slot.
//! Validation names the field at fault (`inputs.layout: ...`, `layers[1].width: ...`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The format version of a NetSpec document; a reader refuses documents from the future.
pub const NETSPEC_VERSION: u32 = 1;
/// Widest transformer and hidden layer a NetSpec may ask for.
pub const MAX_TRANSFORMER_WIDTH: u32 = 4096;
pub const MAX_LAYER_WIDTH: u32 = 1024;
/// Most hidden layers a net may have (a reader of a file sizes its work by them).
pub const MAX_LAYERS: usize = 16;
/// Most output buckets (and king buckets) a net may have.
pub const MAX_BUCKETS: u32 = 64;

/// The most transformer weights (inputs × width) the CPU trainer's sparse update takes: it
/// keeps eight gradient sums of that size.
pub const SPARSE_MAX_TRANSFORMER_WEIGHTS: usize = 1 << 23;

/// A network description. See the module documentation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetSpec {
    /// The document's format version ([`NETSPEC_VERSION`]).
    pub version: u32,
    /// What this net is called where it came from ("bullet 3_input_buckets", a preset's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub inputs: Inputs,
    pub transformer: Transformer,
    /// Hidden layers between the transformer and the output, in order (none: the
    /// transformer's output feeds the output layer).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<Layer>,
    #[serde(default, skip_serializing_if = "OutputBuckets::is_none")]
    pub output_buckets: OutputBuckets,
    pub quantization: Quantization,
}

/// The input features, one family per net.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "family", rename_all = "snake_case", deny_unknown_fields)]
pub enum Inputs {
    /// 768 = 2 colours (the perspective's own, the other) × 6 pieces × 64 squares, the
    /// square seen from the perspective (a rank flip for black): bullet's `Chess768`,
    /// lakefish's `all768`.
    PieceSquare {},
    /// Piece-square inputs once per bucket of the perspective's king square: bullet's
    /// `ChessBuckets` (64 entries) and `ChessBucketsMirrored` (32 entries, `mirror = true`).
    KingBuckets {
        /// The bucket of each king square, from the perspective's own side (rank 1 first,
        /// files a-h; with `mirror`, files a-d only, as the king is mirrored onto them).
        layout: Vec<u32>,
        /// When the perspective's king stands on files e-h, every square is mirrored
        /// horizontally (file a ↔ h), so the layout needs only files a-d.
        #[serde(default)]
        mirror: bool,
        /// A shared 768-input piece-square weight added to every bucket's while training,
        /// merged into each bucket at quantization (bullet's `l0f`).
        #[serde(default)]
        factoriser: bool,
    },
    /// Stockfish's HalfKP (64 king squares × 641, nnue-pytorch's `HalfKP`).
    Halfkp {},
    /// Stockfish's HalfKAv2_hm (32 mirrored king buckets × 11 × 64).
    HalfkaV2Hm {},
    /// Threats as nnue-pytorch's `Full_Threats` and Stockfish since 2026-02 lay them out:
    /// for every man that attacks another, the attacker, its square, the target and its
    /// square ([`THREAT_INPUTS`] per perspective; docs/THREATS.md). No feature says where a
    /// man stands unattacked: combine them with a piece-square family.
    Threats {},
    /// The seed thesis's axis encoding (lakefish's reading): each man on its file, rank,
    /// diagonal and anti-diagonal, 12 kinds × 46 lines = [`AXES_INPUTS`], 4 per man.
    Axes {},
    /// Mobility: each man's kind with the number of squares it attacks that its own side
    /// does not hold (0-27), 12 × 28 = [`MOBILITY_INPUTS`], 1 per man.
    Mobility {},
    /// Pairwise axes (lakefish's reading of the thesis): every two men that see each other
    /// along a line, by their kinds, the line's direction and their distance,
    /// 12 × 12 × 4 × 7 = [`PAIRWISE_AXES_INPUTS`], at most 128.
    PairwiseAxes {},
    /// Families side by side under one transformer: the indices of `parts[0]` first, then
    /// those of `parts[1]` after its last, and so on. nnue-pytorch's
    /// `Full_Threats+HalfKAv2_hm` is `parts = [threats, halfka_v2_hm]`.
    Combined { parts: Vec<Inputs> },
}

/// Axis inputs per perspective ([`Inputs::Axes`]).
pub const AXES_INPUTS: usize = 12 * 46;

/// Mobility inputs per perspective ([`Inputs::Mobility`]).
pub const MOBILITY_INPUTS: usize = 12 * 28;

/// Pairwise-axis inputs per perspective ([`Inputs::PairwiseAxes`]).
pub const PAIRWISE_AXES_INPUTS: usize = 12 * 12 * 4 * 7;

/// The other example nets of `infra/nets/` by name, beside bullet's progression nets
/// (`layout::SHIPPED_NETS`): what `--net-spec NAME` finds without a file.
pub const EXAMPLE_NETS: &[(&str, &str)] = &[
    (
        "buckets-512",
        include_str!("../../infra/nets/buckets-512.toml"),
    ),
    (
        "halfka-256",
        include_str!("../../infra/nets/halfka-256.toml"),
    ),
    (
        "threats-halfka-256",
        include_str!("../../infra/nets/threats-halfka-256.toml"),
    ),
];

/// The file tensor holding the threat inputs' transformer rows ([`NetSpec::file_tensors`]).
pub const THREAT_TENSOR: &str = "ft.threats";

/// Threat inputs per perspective (nnue-pytorch's `Full_Threats`).
pub const THREAT_INPUTS: usize = 59_808;

/// The most threats one perspective can see: 30 men other than the kings, each attacking
/// at most 8 others (a queen or a knight; rooks and bishops 4, pawns 2).
pub const MAX_THREATS: usize = 240;

/// How the transformer's output is activated, per perspective.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema, Default,
)]
#[serde(rename_all = "snake_case")]
pub enum TransformerActivation {
    /// `clamp(x, 0, 1)`.
    #[default]
    Crelu,
    /// `clamp(x, 0, 1)²`.
    Screlu,
    /// `clamp(a, 0, 1) · clamp(b, 0, 1)` of the first and the second half: the output is
    /// half as wide (bullet's `pairwise_mul`, Stockfish since SFNNv5).
    PairwiseCrelu,
}

/// The feature transformer: inputs → `width` per perspective, both perspectives sharing its
/// weights, side to move first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Transformer {
    pub width: u32,
    #[serde(default)]
    pub activation: TransformerActivation,
    /// PSQT outputs per perspective, added straight to the output (Stockfish: one per
    /// output bucket).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub psqt: u32,
}

/// How a hidden layer's output is activated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LayerActivation {
    Crelu,
    Screlu,
    /// Stockfish's first layer stack layer: its outputs but the last through both
    /// `clamp(x², 0, 1)` and `clamp(x, 0, 1)`, concatenated; the last output skips to the
    /// net's output.
    SquareAndCreluSkipLast,
}

/// One hidden layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Layer {
    pub width: u32,
    pub activation: LayerActivation,
    /// One set of weights per output bucket, the bucket's chosen (bullet's `select`,
    /// Stockfish's layer stacks); else one set for all.
    #[serde(default)]
    pub per_bucket: bool,
}

/// How the output bucket of a position is chosen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema, Default)]
#[serde(tag = "rule", rename_all = "snake_case", deny_unknown_fields)]
pub enum OutputBuckets {
    /// One output.
    #[default]
    None,
    /// `(pieces on the board − 2) / ceil(32 / count)`, kings counted: bullet's
    /// `MaterialCount<count>`.
    MaterialCount { count: u32 },
    /// Stockfish's layer stacks: `(pieces on the board − 1) / 4`, 8 buckets.
    StockfishLayerStacks,
}

impl OutputBuckets {
    pub fn is_none(&self) -> bool {
        *self == OutputBuckets::None
    }

    /// How many buckets (1 without).
    pub fn count(&self) -> u32 {
        match self {
            OutputBuckets::None => 1,
            OutputBuckets::MaterialCount { count } => *count,
            OutputBuckets::StockfishLayerStacks => 8,
        }
    }

    /// The bucket of a position with `pieces` men on the board (kings included, 2..=32).
    pub fn bucket(&self, pieces: u32) -> u32 {
        let pieces = pieces.clamp(2, 32);
        match self {
            OutputBuckets::None => 0,
            OutputBuckets::MaterialCount { count } => (pieces - 2) / 32u32.div_ceil(*count),
            OutputBuckets::StockfishLayerStacks => (pieces - 1) / 4,
        }
    }
}

/// The integer type a tensor is stored as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    I8,
    I16,
    I32,
    /// Kept as a float (bullet leaves later layers so).
    F32,
}

impl Dtype {
    /// Bytes per value.
    pub fn bytes(self) -> usize {
        match self {
            Dtype::I8 => 1,
            Dtype::I16 => 2,
            Dtype::I32 | Dtype::F32 => 4,
        }
    }

    /// The largest magnitude the type holds (floats: unbounded).
    pub fn max(self) -> f64 {
        match self {
            Dtype::I8 => i8::MAX as f64,
            Dtype::I16 => i16::MAX as f64,
            Dtype::I32 => i32::MAX as f64,
            Dtype::F32 => f64::INFINITY,
        }
    }
}

/// Rounding of `factor · x` to an integer.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema, Default,
)]
#[serde(rename_all = "lowercase")]
pub enum Rounding {
    /// To the nearest, halves away from zero.
    #[default]
    Round,
    /// Towards zero (bullet's default without `.round()`).
    Trunc,
}

/// How one tensor is stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TensorQuant {
    pub dtype: Dtype,
    /// 1.0 is stored as this.
    pub factor: f64,
    #[serde(default)]
    pub rounding: Rounding,
}

/// Quantization: the evaluation scale and how each tensor is stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Quantization {
    /// The float output times this is the evaluation (bullet: 400 centipawns; lakefish and
    /// Stockfish: 600 internal units).
    pub eval_scale: f64,
    /// Per tensor ([`NetSpec::tensors`] names them); a tensor not listed takes
    /// [`NetSpec::default_quant`].
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tensors: BTreeMap<String, TensorQuant>,
}

/// A tensor of the float model, as the trainer and the quantizer name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorShape {
    pub name: String,
    /// Outer dimension first: `[inputs, width]` for the transformer (input-major, as engines
    /// accumulate), `[out, in]` for dense layers (per bucket: `[buckets · out, in]`).
    pub shape: Vec<usize>,
}

/// A NetSpec that cannot be a net: where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct NetSpecError {
    /// The field at fault, as a path: `inputs.layout`, `layers[1].width`.
    pub field: String,
    pub reason: String,
}

fn bad(field: impl Into<String>, reason: impl Into<String>) -> NetSpecError {
    NetSpecError {
        field: field.into(),
        reason: reason.into(),
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Inputs {
    /// Inputs of the family (what the transformer's weight has rows for).
    pub fn count(&self) -> usize {
        match self {
            Inputs::PieceSquare {} => 768,
            Inputs::KingBuckets { layout, .. } => 768 * bucket_count(layout) as usize,
            Inputs::Halfkp {} => 64 * (10 * 64 + 1),
            Inputs::HalfkaV2Hm {} => 32 * 11 * 64,
            Inputs::Threats {} => THREAT_INPUTS,
            Inputs::Axes {} => AXES_INPUTS,
            Inputs::Mobility {} => MOBILITY_INPUTS,
            Inputs::PairwiseAxes {} => PAIRWISE_AXES_INPUTS,
            Inputs::Combined { parts } => parts.iter().map(Inputs::count).sum(),
        }
    }

    /// At most this many inputs are active per perspective: what sparse batches reserve.
    pub fn max_active(&self) -> usize {
        match self {
            Inputs::Halfkp {} => 30,
            Inputs::Threats {} => MAX_THREATS,
            Inputs::Axes {} | Inputs::PairwiseAxes {} => 4 * 32,
            Inputs::Combined { parts } => parts.iter().map(Inputs::max_active).sum(),
            _ => 32,
        }
    }

    /// The family's name as documents write it (`family = "..."`).
    pub fn family_name(&self) -> &'static str {
        match self {
            Inputs::PieceSquare {} => "piece_square",
            Inputs::KingBuckets { .. } => "king_buckets",
            Inputs::Halfkp {} => "halfkp",
            Inputs::HalfkaV2Hm {} => "halfka_v2_hm",
            Inputs::Threats {} => "threats",
            Inputs::Axes {} => "axes",
            Inputs::Mobility {} => "mobility",
            Inputs::PairwiseAxes {} => "pairwise_axes",
            Inputs::Combined { .. } => "combined",
        }
    }

    /// The families in index order with the first index of each: one entry `(0, self)`
    /// unless combined.
    pub fn parts(&self) -> Vec<(usize, &Inputs)> {
        match self {
            Inputs::Combined { parts } => {
                let mut start = 0;
                parts
                    .iter()
                    .map(|p| {
                        let at = start;
                        start += p.count();
                        (at, p)
                    })
                    .collect()
            }
            single => vec![(0, single)],
        }
    }

    /// The transformer rows of the threat inputs, `(first, count)`, if the net has them.
    pub fn threat_rows(&self) -> Option<(usize, usize)> {
        self.parts()
            .into_iter()
            .find(|(_, p)| matches!(p, Inputs::Threats {}))
            .map(|(at, p)| (at, p.count()))
    }

    /// How the number of men on the board follows from a perspective's active features:
    /// `(first index, end, men beyond those features)` of the first family with one feature
    /// per man (HalfKP has none for the two kings); `None` when no family has (threats).
    pub fn men_counted_by(&self) -> Option<(usize, usize, usize)> {
        self.parts().into_iter().find_map(|(at, p)| match p {
            Inputs::Threats {}
            | Inputs::Axes {}
            | Inputs::PairwiseAxes {}
            | Inputs::Combined { .. } => None,
            Inputs::Halfkp {} => Some((at, at + p.count(), 2)),
            _ => Some((at, at + p.count(), 0)),
        })
    }

    /// The name today's trainer and engine know the family by, where they have one.
    pub fn preset_name(&self) -> Option<&'static str> {
        match self {
            Inputs::PieceSquare {} => Some("all768"),
            Inputs::Halfkp {} => Some("halfkp"),
            Inputs::HalfkaV2Hm {} => Some("halfka_v2_hm"),
            Inputs::KingBuckets { .. }
            | Inputs::Threats {}
            | Inputs::Axes {}
            | Inputs::Mobility {}
            | Inputs::PairwiseAxes {}
            | Inputs::Combined { .. } => None,
        }
    }

    /// Checks the family; `field` is where it stands in the document (`inputs`,
    /// `inputs.parts[1]`).
    fn validate(&self, field: &str) -> Result<(), NetSpecError> {
        if let Inputs::Combined { parts } = self {
            if parts.len() < 2 {
                return Err(bad(
                    format!("{field}.parts"),
                    format!(
                        "{} famil{}: a combination lists two or more (one family is written on its own)",
                        parts.len(),
                        if parts.len() == 1 { "y" } else { "ies" }
                    ),
                ));
            }
            for (i, p) in parts.iter().enumerate() {
                let here = format!("{field}.parts[{i}]");
                if let Inputs::Combined { .. } = p {
                    return Err(bad(
                        format!("{here}.family"),
                        "combined inside combined: list every family in one `parts`",
                    ));
                }
                if let Some(j) = parts[..i].iter().position(|q| q == p) {
                    return Err(bad(
                        here,
                        format!(
                            "{} is listed twice (parts[{j}] too): its features would be counted twice",
                            p.family_name()
                        ),
                    ));
                }
                if let Inputs::KingBuckets {
                    factoriser: true, ..
                } = p
                {
                    return Err(bad(
                        format!("{here}.factoriser"),
                        "a factoriser is trained for king_buckets on their own so far",
                    ));
                }
                p.validate(&here)?;
            }
            return Ok(());
        }
        let Inputs::KingBuckets { layout, mirror, .. } = self else {
            return Ok(());
        };
        let layout_field = format!("{field}.layout");
        let want = if *mirror { 32 } else { 64 };
        if layout.len() != want {
            return Err(bad(
                &layout_field,
                format!(
                    "{} entries; a layout has {want} ({}), one per king square{}",
                    layout.len(),
                    if *mirror {
                        "mirror = true: files a-d of each rank"
                    } else {
                        "a1 to h8"
                    },
                    if *mirror {
                        ""
                    } else {
                        " (or 32 with mirror = true)"
                    }
                ),
            ));
        }
        if let Some(&big) = layout.iter().find(|&&b| b >= MAX_BUCKETS) {
            return Err(bad(
                &layout_field,
                format!(
                    "bucket {big} is beyond the limit of {MAX_BUCKETS} buckets (0 to {})",
                    MAX_BUCKETS - 1
                ),
            ));
        }
        let n = bucket_count(layout);
        if let Some(empty) = (0..n).find(|b| !layout.contains(b)) {
            return Err(bad(
                &layout_field,
                format!(
                    "bucket {empty} is empty: no king square maps to it (buckets are numbered 0 to {} without gaps)",
                    n - 1
                ),
            ));
        }
        Ok(())
    }
}

/// Buckets a layout uses: its largest entry plus one.
fn bucket_count(layout: &[u32]) -> u32 {
    layout.iter().max().map_or(0, |m| m + 1)
}

impl NetSpec {
    /// Reads a NetSpec from TOML (a `.toml` file) or JSON; every error names the field.
    pub fn parse(text: &str) -> Result<NetSpec, NetSpecError> {
        let spec: NetSpec = crate::json::parse_document(text, "netspec")
            .map_err(|(field, reason)| bad(field, reason))?;
        spec.validate()?;
        Ok(spec)
    }

    /// Checks that the description is a net every consumer can build.
    pub fn validate(&self) -> Result<(), NetSpecError> {
        if self.version == 0 || self.version > NETSPEC_VERSION {
            return Err(bad(
                "version",
                format!(
                    "{} is not a NetSpec version this lakefish reads (1 to {NETSPEC_VERSION})",
                    self.version
                ),
            ));
        }
        self.inputs.validate("inputs")?;
        if self.output_buckets.count() > 1 && self.inputs.men_counted_by().is_none() {
            return Err(bad(
                "output_buckets",
                "buckets are picked by the number of men, and threats alone do not show it: combine them with a piece-square family",
            ));
        }
        let t = &self.transformer;
        if !(1..=MAX_TRANSFORMER_WIDTH).contains(&t.width) {
            return Err(bad(
                "transformer.width",
                format!("{} is not 1 to {MAX_TRANSFORMER_WIDTH}", t.width),
            ));
        }
        if t.activation == TransformerActivation::PairwiseCrelu && !t.width.is_multiple_of(2) {
            return Err(bad(
                "transformer.width",
                format!(
                    "{} is odd: pairwise_crelu multiplies the two halves",
                    t.width
                ),
            ));
        }
        let buckets = self.output_buckets.count();
        if let OutputBuckets::MaterialCount { count } = self.output_buckets
            && !(1..=32).contains(&count)
        {
            return Err(bad(
                "output_buckets.count",
                format!("{count} is not 1 to 32 (a board holds 2 to 32 men)"),
            ));
        }
        if t.psqt != 0 && t.psqt != buckets {
            return Err(bad(
                "transformer.psqt",
                format!(
                    "{} PSQT outputs for {buckets} output bucket(s): one per bucket",
                    t.psqt
                ),
            ));
        }
        if self.layers.len() > MAX_LAYERS {
            return Err(bad(
                "layers",
                format!("{} hidden layers, at most {MAX_LAYERS}", self.layers.len()),
            ));
        }
        for (i, l) in self.layers.iter().enumerate() {
            if !(1..=MAX_LAYER_WIDTH).contains(&l.width) {
                return Err(bad(
                    format!("layers[{i}].width"),
                    format!("{} is not 1 to {MAX_LAYER_WIDTH}", l.width),
                ));
            }
            if l.activation == LayerActivation::SquareAndCreluSkipLast {
                if i != 0 {
                    return Err(bad(
                        format!("layers[{i}].activation"),
                        "square_and_crelu_skip_last is Stockfish's first layer only",
                    ));
                }
                if l.width < 2 {
                    return Err(bad(
                        format!("layers[{i}].width"),
                        "square_and_crelu_skip_last needs 2 outputs or more (the last skips)",
                    ));
                }
            }
            if l.per_bucket && buckets == 1 {
                return Err(bad(
                    format!("layers[{i}].per_bucket"),
                    "the net has no output buckets to pick weights by",
                ));
            }
        }
        let q = &self.quantization;
        if !(q.eval_scale.is_finite() && q.eval_scale > 0.0) {
            return Err(bad(
                "quantization.eval_scale",
                format!("{} is not a positive number", q.eval_scale),
            ));
        }
        let mut names: Vec<String> = self.tensors().into_iter().map(|t| t.name).collect();
        if self.inputs.threat_rows().is_some() {
            names.insert(1, THREAT_TENSOR.into());
        }
        for (name, tq) in &q.tensors {
            let field = format!("quantization.tensors.{name:?}");
            if !names.contains(name) {
                return Err(bad(
                    field,
                    format!("the net has no such tensor (it has {})", names.join(", ")),
                ));
            }
            if !(tq.factor.is_finite() && tq.factor > 0.0) {
                return Err(bad(
                    format!("{field}.factor"),
                    format!("{} is not a positive number", tq.factor),
                ));
            }
        }
        Ok(())
    }

    /// What the engine's evaluator of described nets (and so the trainer of them) takes
    /// beyond [`NetSpec::validate`]: PSQT outputs and Stockfish's layer-stack activation are
    /// Stockfish's own nets' (its preset), and the transformer is stored as i16 with one whole
    /// factor (the accumulators' lanes).
    pub fn engine_limits(&self) -> Result<(), NetSpecError> {
        if self.transformer.psqt > 0 {
            return Err(bad(
                "transformer.psqt",
                "PSQT outputs are Stockfish's own nets' (the stockfish-15.1 preset)",
            ));
        }
        if let Some(i) = self
            .layers
            .iter()
            .position(|l| l.activation == LayerActivation::SquareAndCreluSkipLast)
        {
            return Err(bad(
                format!("layers[{i}].activation"),
                "square_and_crelu_skip_last is Stockfish's layer stack (the stockfish-15.1 preset)",
            ));
        }
        let ft = |n: &str| self.default_quant(n).expect("every net has a transformer");
        let (w, b) = (ft("ft.weight"), ft("ft.bias"));
        for (name, q) in [("ft.weight", &w), ("ft.bias", &b)] {
            if q.dtype != Dtype::I16 {
                return Err(bad(
                    format!("quantization.tensors.{name:?}.dtype"),
                    format!(
                        "{:?}: the transformer is stored as i16 (the engine's accumulators are)",
                        q.dtype
                    ),
                ));
            }
        }
        if let Some(t) = self.default_quant(THREAT_TENSOR)
            && (!matches!(t.dtype, Dtype::I8 | Dtype::I16) || t.factor != w.factor)
        {
            return Err(bad(
                format!("quantization.tensors.{THREAT_TENSOR:?}"),
                format!(
                    "{:?} at factor {}: threat rows add into the transformer's accumulators, so \
                     they are i8 or i16 at ft.weight's factor ({})",
                    t.dtype, t.factor, w.factor
                ),
            ));
        }
        if w.factor != b.factor
            || w.factor.fract() != 0.0
            || !(1.0..=i16::MAX as f64).contains(&w.factor)
        {
            return Err(bad(
                "quantization.tensors.\"ft.weight\".factor",
                format!(
                    "ft.weight and ft.bias take one whole factor from 1 to 32767 (they have {} and {})",
                    w.factor, b.factor
                ),
            ));
        }
        Ok(())
    }

    /// What the trainer takes beyond [`NetSpec::engine_limits`]: it rebuilds each
    /// perspective's board from the loader's `all768` list for combinations, which shows
    /// Black's view as a flip with colours swapped; HalfKP turns Black's board round (a flip
    /// and a mirror), so it is not trained inside a combination.
    pub fn trainer_limits(&self) -> Result<(), NetSpecError> {
        if let Inputs::Combined { parts } = &self.inputs
            && let Some(i) = parts.iter().position(|p| matches!(p, Inputs::Halfkp {}))
        {
            return Err(bad(
                format!("inputs.parts[{i}].family"),
                "halfkp is not trained in a combination (its Black view is the board turned \
                 round); combine piece_square, king_buckets or halfka_v2_hm",
            ));
        }
        Ok(())
    }

    /// Whether training keeps a factoriser to merge at quantization.
    /// Whether the CPU trainer's sparse update (its fused step) trains this net, or why not:
    /// a SCReLU transformer straight into the output (no hidden layers, no PSQT), output
    /// buckets by material count or none, at most [`SPARSE_MAX_TRANSFORMER_WEIGHTS`] weights.
    pub fn sparse_update(&self) -> Result<(), String> {
        let why = if self.transformer.activation != TransformerActivation::Screlu {
            "its transformer is not SCReLU"
        } else if !self.layers.is_empty() {
            "it has hidden layers"
        } else if self.transformer.psqt > 0 {
            "it has PSQT outputs"
        } else if !matches!(
            self.output_buckets,
            OutputBuckets::None | OutputBuckets::MaterialCount { .. }
        ) {
            "its output buckets are not by material count"
        } else if self.inputs.count() * self.transformer.width as usize
            > SPARSE_MAX_TRANSFORMER_WEIGHTS
        {
            "its transformer has more than 2^23 weights"
        } else {
            return Ok(());
        };
        Err(format!(
            "the sparse update trains a described net whose SCReLU transformer goes straight \
             into the output (no hidden layers, no PSQT, output buckets by material count, at \
             most 2^23 transformer weights); {why}"
        ))
    }

    pub fn factoriser(&self) -> bool {
        matches!(
            self.inputs,
            Inputs::KingBuckets {
                factoriser: true,
                ..
            }
        )
    }

    /// Width of the transformer's output per perspective, after its activation.
    pub fn transformer_output(&self) -> u32 {
        match self.transformer.activation {
            TransformerActivation::PairwiseCrelu => self.transformer.width / 2,
            _ => self.transformer.width,
        }
    }

    /// The float model's tensors, in the order the trainer keeps them: `ft.weight`,
    /// `ft.bias`, `ft.factoriser` (when trained with one), `psqt.weight`, each hidden
    /// layer's `lN.weight`/`lN.bias`, then `out.weight`/`out.bias`.
    pub fn tensors(&self) -> Vec<TensorShape> {
        let t = |name: &str, shape: Vec<usize>| TensorShape {
            name: name.into(),
            shape,
        };
        let width = self.transformer.width as usize;
        let buckets = self.output_buckets.count() as usize;
        let mut out = vec![
            t("ft.weight", vec![self.inputs.count(), width]),
            t("ft.bias", vec![width]),
        ];
        if self.factoriser() {
            out.push(t("ft.factoriser", vec![768, width]));
        }
        if self.transformer.psqt > 0 {
            out.push(t(
                "psqt.weight",
                vec![self.inputs.count(), self.transformer.psqt as usize],
            ));
        }
        let mut fan_in = 2 * self.transformer_output() as usize;
        for (i, l) in self.layers.iter().enumerate() {
            let rows = l.width as usize * if l.per_bucket { buckets } else { 1 };
            out.push(t(&format!("l{}.weight", i + 1), vec![rows, fan_in]));
            out.push(t(&format!("l{}.bias", i + 1), vec![rows]));
            fan_in = match l.activation {
                LayerActivation::SquareAndCreluSkipLast => 2 * (l.width as usize - 1),
                _ => l.width as usize,
            };
        }
        out.push(t("out.weight", vec![buckets, fan_in]));
        out.push(t("out.bias", vec![buckets]));
        out
    }

    /// The tensors of a quantized file, in order: the float model's without the factoriser
    /// (merged into `ft.weight`), and with threat inputs their rows of `ft.weight` apart as
    /// [`THREAT_TENSOR`] right after it (stored as i8 by default), `ft.weight` keeping the
    /// other rows in order.
    pub fn file_tensors(&self) -> Vec<TensorShape> {
        let mut out: Vec<TensorShape> = self
            .tensors()
            .into_iter()
            .filter(|t| t.name != "ft.factoriser")
            .collect();
        if let Some((_, rows)) = self.inputs.threat_rows() {
            out[0].shape[0] -= rows;
            out.insert(
                1,
                TensorShape {
                    name: THREAT_TENSOR.into(),
                    shape: vec![rows, self.transformer.width as usize],
                },
            );
        }
        out
    }

    /// Whether tensor `name` (a layer's weights or biases) has a set of rows per output
    /// bucket: rows `bucket · width ..`.
    pub fn tensor_per_bucket(&self, name: &str) -> bool {
        let buckets = self.output_buckets.count() > 1;
        let layer = name.split('.').next().unwrap_or("");
        if layer == "out" {
            return buckets;
        }
        layer
            .strip_prefix('l')
            .and_then(|i| i.parse::<usize>().ok())
            .and_then(|i| self.layers.get(i.checked_sub(1)?))
            .is_some_and(|l| buckets && l.per_bucket)
    }

    /// Whether tensor `name` is the weights of a dense layer after the transformer.
    pub fn is_layer_weight(&self, name: &str) -> bool {
        name.ends_with(".weight")
            && !name.starts_with("ft.")
            && !name.starts_with("psqt.")
            && self.tensors().iter().any(|t| t.name == name)
    }

    /// How a tensor is stored when the document does not say. Nets whose transformer feeds
    /// the output directly through SCReLU or a pairwise product take lakefish's SCReLU scheme
    /// (i16 ×255 transformer, i8 ×64 output weights, i32 ×255·64 output bias); all others the
    /// Stockfish scheme (i16 ×127 transformer, i8 ×64 layers with i32 ×127·64 biases, output
    /// ×s·16/127 and ×s·16, PSQT ×s·16, where s is `eval_scale`).
    pub fn default_quant(&self, tensor: &str) -> Option<TensorQuant> {
        let q = |dtype, factor| TensorQuant {
            dtype,
            factor,
            rounding: Rounding::Round,
        };
        if let Some(t) = self.quantization.tensors.get(tensor) {
            return Some(t.clone());
        }
        if tensor == THREAT_TENSOR {
            // Threat rows add into the same accumulators: ft.weight's factor, stored as i8
            // (Stockfish's and nnue-pytorch's).
            self.inputs.threat_rows()?;
            let ft = self.default_quant("ft.weight")?;
            return Some(TensorQuant {
                dtype: Dtype::I8,
                ..ft
            });
        }
        if !self.tensors().iter().any(|t| t.name == tensor) {
            return None;
        }
        let bullet = self.transformer.activation != TransformerActivation::Crelu
            && self.layers.is_empty()
            && self.transformer.psqt == 0;
        let ft = if bullet { 255.0 } else { 127.0 };
        let s = self.quantization.eval_scale;
        Some(match tensor {
            "ft.weight" | "ft.bias" | "ft.factoriser" => q(Dtype::I16, ft),
            "psqt.weight" => q(Dtype::I32, s * 16.0),
            "out.weight" if bullet => q(Dtype::I8, 64.0),
            "out.bias" if bullet => q(Dtype::I32, 255.0 * 64.0),
            "out.weight" => q(Dtype::I8, s * 16.0 / 127.0),
            "out.bias" => q(Dtype::I32, s * 16.0),
            n if n.ends_with(".weight") => q(Dtype::I8, 64.0),
            _ => q(Dtype::I32, 127.0 * 64.0),
        })
    }

    /// The preset this description is, as `(features, arch)`, if it is one: what today's
    /// trainer and `.nnue` format build (the name is not compared).
    pub fn as_preset(&self) -> Option<(&'static str, String)> {
        let features = self.inputs.preset_name()?;
        let arch = if self.layers.first().map(|l| l.activation)
            == Some(LayerActivation::SquareAndCreluSkipLast)
        {
            "stockfish-15.1".to_string()
        } else {
            let mut a = format!("{}x2", self.transformer.width);
            for l in &self.layers {
                a.push_str(&format!("-{}", l.width));
            }
            if self.transformer.activation == TransformerActivation::Screlu {
                a.push_str(":screlu");
            }
            a
        };
        let mut preset = NetSpec::preset(features, &arch).ok()?;
        preset.name.clone_from(&self.name);
        (preset == *self).then_some((features, arch))
    }

    /// Why this description is no preset, naming the first field that differs from what
    /// today's trainer builds (`None` when it is one).
    pub fn why_not_preset(&self) -> Option<String> {
        if self.as_preset().is_some() {
            return None;
        }
        let stockfish = self.layers.first().map(|l| l.activation)
            == Some(LayerActivation::SquareAndCreluSkipLast);
        let Some(features) = self.inputs.preset_name() else {
            return Some(
                "inputs: king_buckets inputs are described but not trained yet (piece_square, \
                 halfkp and halfka_v2_hm are)"
                    .into(),
            );
        };
        if !self.output_buckets.is_none() && !stockfish {
            return Some("output_buckets: output buckets are described but not trained yet".into());
        }
        if let Some(i) = self.layers.iter().position(|l| l.per_bucket)
            && !stockfish
        {
            return Some(format!(
                "layers[{i}].per_bucket: per-bucket layers are trained for stockfish-15.1 only so far"
            ));
        }
        if self.transformer.activation == TransformerActivation::PairwiseCrelu && !stockfish {
            return Some(
                "transformer.activation: pairwise_crelu is trained for stockfish-15.1 only so far"
                    .into(),
            );
        }
        if self.quantization.eval_scale != 600.0 || !self.quantization.tensors.is_empty() {
            return Some(
                "quantization: today's trainer writes its presets' quantization only (eval_scale \
                 600, no per-tensor entries)"
                    .into(),
            );
        }
        Some(format!(
            "transformer: this {features} net is no preset (WIDTHx2-H1-H2 with crelu layers, \
             WIDTHx2:screlu without layers, or stockfish-15.1)"
        ))
    }

    /// Today's net names as NetSpecs: `features` (all768, halfkp, halfka_v2_hm) with `arch`
    /// (`WIDTHx2-H1-H2...` clipped ReLU, `WIDTHx2:screlu`, or `stockfish-15.1`).
    pub fn preset(features: &str, arch: &str) -> Result<NetSpec, NetSpecError> {
        let inputs = match features {
            "all768" => Inputs::PieceSquare {},
            "halfkp" => Inputs::Halfkp {},
            "halfka_v2_hm" => Inputs::HalfkaV2Hm {},
            other => {
                return Err(bad(
                    "features",
                    format!("{other:?} is not a preset (all768, halfkp, halfka_v2_hm)"),
                ));
            }
        };
        let spec = if arch == "stockfish-15.1" {
            if inputs != (Inputs::HalfkaV2Hm {}) {
                return Err(bad("features", "stockfish-15.1 reads halfka_v2_hm inputs"));
            }
            NetSpec {
                version: NETSPEC_VERSION,
                name: Some("stockfish-15.1".into()),
                inputs,
                transformer: Transformer {
                    width: 1024,
                    activation: TransformerActivation::PairwiseCrelu,
                    psqt: 8,
                },
                layers: vec![
                    Layer {
                        width: 16,
                        activation: LayerActivation::SquareAndCreluSkipLast,
                        per_bucket: true,
                    },
                    Layer {
                        width: 32,
                        activation: LayerActivation::Crelu,
                        per_bucket: true,
                    },
                ],
                output_buckets: OutputBuckets::StockfishLayerStacks,
                quantization: Quantization {
                    eval_scale: 600.0,
                    tensors: BTreeMap::new(),
                },
            }
        } else {
            let (layers, activation) = match arch.split_once(':') {
                None => (arch, TransformerActivation::Crelu),
                Some((l, "screlu")) => (l, TransformerActivation::Screlu),
                Some((_, other)) => {
                    return Err(bad(
                        "arch",
                        format!("unknown activation {other:?} (the one option is `:screlu`)"),
                    ));
                }
            };
            let mut parts = layers.split('-');
            let width = parts
                .next()
                .and_then(|w| w.strip_suffix("x2"))
                .and_then(|w| w.parse::<u32>().ok())
                .ok_or_else(|| bad("arch", format!("{arch:?}: the first layer is WIDTHx2")))?;
            let hidden = parts
                .map(|p| {
                    p.parse::<u32>().map(|width| Layer {
                        width,
                        activation: LayerActivation::Crelu,
                        per_bucket: false,
                    })
                })
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| bad("arch", format!("{arch:?}: a hidden layer is not a number")))?;
            NetSpec {
                version: NETSPEC_VERSION,
                name: Some(format!("{features} {arch}")),
                inputs,
                transformer: Transformer {
                    width,
                    activation,
                    psqt: 0,
                },
                layers: hidden,
                output_buckets: OutputBuckets::None,
                quantization: Quantization {
                    eval_scale: 600.0,
                    tensors: BTreeMap::new(),
                },
            }
        };
        spec.validate()?;
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BULLET_LAYOUT: [u32; 32] = [
        0, 1, 2, 3, 4, 4, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7, 8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9,
        9, 9,
    ];

    fn bucketed() -> NetSpec {
        NetSpec {
            version: 1,
            name: None,
            inputs: Inputs::KingBuckets {
                layout: BULLET_LAYOUT.to_vec(),
                mirror: true,
                factoriser: true,
            },
            transformer: Transformer {
                width: 1024,
                activation: TransformerActivation::PairwiseCrelu,
                psqt: 0,
            },
            layers: vec![
                Layer {
                    width: 16,
                    activation: LayerActivation::Screlu,
                    per_bucket: true,
                },
                Layer {
                    width: 32,
                    activation: LayerActivation::Screlu,
                    per_bucket: true,
                },
            ],
            output_buckets: OutputBuckets::MaterialCount { count: 8 },
            quantization: Quantization {
                eval_scale: 400.0,
                tensors: BTreeMap::new(),
            },
        }
    }

    #[test]
    fn a_bucketed_multi_layer_net_has_bullet_s_shapes() {
        let s = bucketed();
        s.validate().unwrap();
        assert_eq!(s.inputs.count(), 7680);
        let shapes: Vec<(String, Vec<usize>)> =
            s.tensors().into_iter().map(|t| (t.name, t.shape)).collect();
        assert_eq!(
            shapes,
            [
                ("ft.weight", vec![7680, 1024]),
                ("ft.bias", vec![1024]),
                ("ft.factoriser", vec![768, 1024]),
                ("l1.weight", vec![8 * 16, 1024]),
                ("l1.bias", vec![8 * 16]),
                ("l2.weight", vec![8 * 32, 16]),
                ("l2.bias", vec![8 * 32]),
                ("out.weight", vec![8, 32]),
                ("out.bias", vec![8]),
            ]
            .map(|(n, s)| (n.to_string(), s))
        );
    }

    #[test]
    fn material_count_buckets_are_bullet_s() {
        let b = OutputBuckets::MaterialCount { count: 8 };
        assert_eq!(
            [2, 5, 6, 9, 30, 32].map(|n| b.bucket(n)),
            [0, 0, 1, 1, 7, 7]
        );
        let sf = OutputBuckets::StockfishLayerStacks;
        assert_eq!([2, 4, 5, 32].map(|n| sf.bucket(n)), [0, 0, 1, 7]);
    }

    #[test]
    fn presets_describe_today_s_nets() {
        let p = NetSpec::preset("all768", "256x2-32-32").unwrap();
        assert_eq!(p.inputs, Inputs::PieceSquare {});
        assert_eq!(p.transformer.width, 256);
        assert_eq!(p.layers.len(), 2);
        assert_eq!(
            p.default_quant("ft.weight").unwrap().factor,
            127.0,
            "the Stockfish scheme"
        );
        let s = NetSpec::preset("halfkp", "512x2:screlu").unwrap();
        assert_eq!(s.transformer.activation, TransformerActivation::Screlu);
        assert_eq!(s.default_quant("ft.weight").unwrap().factor, 255.0);
        let sf = NetSpec::preset("halfka_v2_hm", "stockfish-15.1").unwrap();
        assert_eq!(sf.inputs.count(), 22528);
        assert_eq!(sf.transformer_output(), 512);
        let shapes: Vec<Vec<usize>> = sf.tensors().into_iter().map(|t| t.shape).collect();
        assert_eq!(shapes[2], vec![22528, 8], "psqt");
        assert_eq!(shapes[3], vec![8 * 16, 1024], "fc_0 per stack");
        assert_eq!(
            shapes[5],
            vec![8 * 32, 30],
            "fc_1 reads 15 squared and 15 clipped"
        );
        assert!(NetSpec::preset("all768", "stockfish-15.1").is_err());
        assert!(NetSpec::preset("all768", "256x3").is_err());
    }

    fn field_of(text: &str) -> String {
        NetSpec::parse(text).unwrap_err().field
    }

    /// Threats and combinations: sizes and bounds add up, the parts' indices follow each
    /// other, and every bad combination is refused naming the field.
    #[test]
    fn combined_inputs_add_up_and_bad_ones_name_the_field() {
        let doc = |inputs: &str, rest: &str| {
            format!(
                "version = 1\n[inputs]\n{inputs}\n[transformer]\nwidth = 64\nactivation = \"screlu\"\n\
                 {rest}[quantization]\neval_scale = 400.0\n"
            )
        };
        let sf = NetSpec::parse(&doc(
            "family = \"combined\"\n[[inputs.parts]]\nfamily = \"threats\"\n\
             [[inputs.parts]]\nfamily = \"halfka_v2_hm\"",
            "",
        ))
        .unwrap();
        assert_eq!(sf.inputs.count(), 59_808 + 22_528);
        assert_eq!(sf.inputs.max_active(), MAX_THREATS + 32);
        let parts: Vec<usize> = sf.inputs.parts().iter().map(|(at, _)| *at).collect();
        assert_eq!(parts, [0, 59_808]);
        assert_eq!(sf.inputs.men_counted_by(), Some((59_808, 82_336, 0)));
        assert_eq!(sf.inputs.preset_name(), None);
        assert_eq!(
            NetSpec::parse(&serde_json::to_string(&sf).unwrap()).unwrap(),
            sf
        );
        // The file keeps the threat rows apart, as i8 at the transformer's factor.
        let files: Vec<(String, Vec<usize>)> = sf
            .file_tensors()
            .into_iter()
            .take(3)
            .map(|t| (t.name, t.shape))
            .collect();
        assert_eq!(
            files,
            [
                ("ft.weight", vec![22_528, 64]),
                ("ft.threats", vec![59_808, 64]),
                ("ft.bias", vec![64])
            ]
            .map(|(n, s)| (n.to_string(), s))
        );
        let tq = sf.default_quant(THREAT_TENSOR).unwrap();
        assert_eq!((tq.dtype, tq.factor), (Dtype::I8, 255.0));
        sf.engine_limits().unwrap();
        let with_quant = |q: &str| {
            NetSpec::parse(
                &doc(
                    "family = \"combined\"\n[[inputs.parts]]\nfamily = \"threats\"\n\
                 [[inputs.parts]]\nfamily = \"halfka_v2_hm\"",
                    "",
                )
                .replace("eval_scale = 400.0", &format!("eval_scale = 400.0\n{q}")),
            )
        };
        let wide =
            with_quant("tensors.\"ft.threats\" = { dtype = \"i16\", factor = 255.0 }").unwrap();
        wide.engine_limits().unwrap();
        let e = with_quant("tensors.\"ft.threats\" = { dtype = \"i32\", factor = 255.0 }")
            .unwrap()
            .engine_limits()
            .unwrap_err();
        assert_eq!(e.field, "quantization.tensors.\"ft.threats\"", "{e}");
        let e = with_quant("tensors.\"ft.threats\" = { dtype = \"i8\", factor = 64.0 }")
            .unwrap()
            .engine_limits()
            .unwrap_err();
        assert!(e.reason.contains("ft.weight's factor"), "{e}");
        // A net without threats has no such tensor.
        let e = NetSpec::parse(&doc("family = \"halfka_v2_hm\"", "").replace(
            "eval_scale = 400.0",
            "eval_scale = 400.0\ntensors.\"ft.threats\" = { dtype = \"i8\", factor = 255.0 }",
        ))
        .unwrap_err();
        assert!(e.field.starts_with("quantization.tensors"), "{e}");
        // The shipped examples: the same as written here, and without threats.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra/nets");
        let shipped = |f: &str| NetSpec::parse(&std::fs::read_to_string(dir.join(f)).unwrap());
        let with = shipped("threats-halfka-256.toml").unwrap();
        for (name, text) in EXAMPLE_NETS {
            NetSpec::parse(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        assert_eq!(
            (with.inputs, with.transformer.width),
            (sf.inputs.clone(), 256)
        );
        let without = shipped("halfka-256.toml").unwrap();
        assert_eq!(without.inputs, Inputs::HalfkaV2Hm {});
        // Threats alone count no men.
        let alone = NetSpec::parse(&doc("family = \"threats\"", "")).unwrap();
        assert_eq!(alone.inputs.men_counted_by(), None);

        let part = |family: &str| format!("[[inputs.parts]]\nfamily = \"{family}\"\n");
        let cases = [
            (
                doc(&format!("family = \"combined\"\n{}", part("threats")), ""),
                "inputs.parts",
                "two or more",
            ),
            (
                doc("family = \"combined\"\nparts = []", ""),
                "inputs.parts",
                "two or more",
            ),
            (
                doc(
                    &format!(
                        "family = \"combined\"\n{}{}",
                        part("threats"),
                        part("threats")
                    ),
                    "",
                ),
                "inputs.parts[1]",
                "listed twice",
            ),
            (
                doc(
                    &format!(
                        "family = \"combined\"\n{}[[inputs.parts]]\nfamily = \"combined\"\nparts = []\n",
                        part("threats")
                    ),
                    "",
                ),
                "inputs.parts[1].family",
                "combined inside combined",
            ),
            (
                doc(
                    &format!(
                        "family = \"combined\"\n{}[[inputs.parts]]\nfamily = \"king_buckets\"\n\
                         layout = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]\n\
                         mirror = true\nfactoriser = true\n",
                        part("threats")
                    ),
                    "",
                ),
                "inputs.parts[1].factoriser",
                "on their own",
            ),
            (
                doc(
                    &format!(
                        "family = \"combined\"\n{}[[inputs.parts]]\nfamily = \"king_buckets\"\nlayout = [0, 1]\n",
                        part("threats")
                    ),
                    "",
                ),
                "inputs.parts[1].layout",
                "2 entries",
            ),
            (
                doc(
                    "family = \"threats\"",
                    "[output_buckets]\nrule = \"material_count\"\ncount = 8\n",
                ),
                "output_buckets",
                "threats alone",
            ),
            (
                doc(
                    &format!(
                        "family = \"combined\"\n{}{}",
                        part("threats"),
                        part("ray_pairs")
                    ),
                    "",
                ),
                // serde reads a tagged family whole: the path ends at `inputs`.
                "inputs",
                "unknown variant `ray_pairs`",
            ),
        ];
        for (text, field, why) in cases {
            let e = NetSpec::parse(&text).unwrap_err();
            assert!(
                e.field.starts_with(field) && e.to_string().contains(why),
                "{field}: {e}"
            );
        }
    }

    #[test]
    fn bad_documents_name_the_field() {
        let ok = r#"
version = 1
[inputs]
family = "king_buckets"
mirror = true
layout = [0, 1, 2, 3, 4, 4, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7, 8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9]
factoriser = true
[transformer]
width = 64
activation = "screlu"
[output_buckets]
rule = "material_count"
count = 8
[quantization]
eval_scale = 400.0
"#;
        let spec = NetSpec::parse(ok).unwrap();
        assert!(spec.factoriser());
        // The same as JSON.
        let json = serde_json::to_string(&spec).unwrap();
        assert_eq!(NetSpec::parse(&json).unwrap(), spec);

        let cases: [(&str, &str, &str); 7] = [
            (
                "layout = [0, 1, 2, 3, 4, 4, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7, 8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9]",
                "layout = [0, 1, 2]",
                "inputs.layout",
            ),
            (
                "layout = [0, 1, 2, 3, 4, 4, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7, 8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9]",
                "layout = [0, 1, 2, 3, 4, 4, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7, 8, 8, 8, 8, 8, 8, 8, 8, 11, 9, 9, 9, 9, 9, 9, 9]",
                "inputs.layout",
            ),
            ("width = 64", "width = 0", "transformer.width"),
            ("count = 8", "count = 0", "output_buckets.count"),
            (
                "eval_scale = 400.0",
                "eval_scale = -1.0",
                "quantization.eval_scale",
            ),
            ("version = 1", "version = 2", "version"),
            (
                "factoriser = true",
                "factoriser = true\nbuckets = 3",
                "inputs",
            ),
        ];
        for (from, to, field) in cases {
            let text = ok.replace(from, to);
            assert_ne!(text, ok, "{from}");
            let e = NetSpec::parse(&text).unwrap_err();
            assert_eq!(e.field, field, "{to}: {e}");
        }
        // An empty bucket is named as such; an unknown field by its name.
        let e = NetSpec::parse(&ok.replace(
            ", 9, 9, 9, 9, 9, 9, 9, 9]",
            ", 10, 10, 10, 10, 10, 10, 10, 10]",
        ))
        .unwrap_err();
        assert!(e.reason.contains("bucket 9 is empty"), "{e}");
        let e = NetSpec::parse(&ok.replace("factoriser = true", "factoriser = true\nbuckets = 3"))
            .unwrap_err();
        assert!(e.reason.contains("buckets"), "{e}");
        // A layer of width 0, and an activation a layer cannot take.
        let layered = format!(
            "{ok}\n[[layers]]\nwidth = 16\nactivation = \"screlu\"\nper_bucket = true\n[[layers]]\nwidth = 0\nactivation = \"crelu\"\n"
        );
        assert_eq!(field_of(&layered), "layers[1].width");
        let layered = format!(
            "{ok}\n[[layers]]\nwidth = 16\nactivation = \"screlu\"\n[[layers]]\nwidth = 8\nactivation = \"square_and_crelu_skip_last\"\n"
        );
        assert_eq!(field_of(&layered), "layers[1].activation");
        // Too many layers for a reader to take.
        let deep = format!(
            "{ok}{}",
            "\n[[layers]]\nwidth = 4\nactivation = \"crelu\"\n".repeat(MAX_LAYERS + 1)
        );
        assert_eq!(field_of(&deep), "layers");
        let layered = format!("{ok}\n[[layers]]\nwidth = 16\nactivation = \"pairwise_crelu\"\n");
        assert_eq!(field_of(&layered), "layers[0].activation");
        // A quantization entry for a tensor the net does not have.
        let q = ok.replace(
            "eval_scale = 400.0",
            "eval_scale = 400.0\n[quantization.tensors.\"l7.weight\"]\ndtype = \"i8\"\nfactor = 64.0",
        );
        assert!(field_of(&q).starts_with("quantization.tensors"), "{q}");
    }

    /// The examples shipped in `infra/nets/` parse, and describe bullet's progression nets
    /// with the tensor shapes bullet saves.
    #[test]
    fn bullet_s_progression_nets_ship_as_examples() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra/nets");
        let read = |f: &str| {
            let text = std::fs::read_to_string(dir.join(f)).unwrap();
            NetSpec::parse(&text).unwrap_or_else(|e| panic!("{f}: {e}"))
        };
        let shapes = |s: &NetSpec| -> Vec<(String, Vec<usize>)> {
            s.tensors().into_iter().map(|t| (t.name, t.shape)).collect()
        };
        let simple = read("bullet-1-simple.toml");
        assert_eq!(
            shapes(&simple),
            [
                ("ft.weight", vec![768, 128]),
                ("ft.bias", vec![128]),
                ("out.weight", vec![1, 256]),
                ("out.bias", vec![1])
            ]
            .map(|(n, s)| (n.to_string(), s))
        );
        let out = read("bullet-2-output-buckets.toml");
        assert_eq!(out.tensors()[2].shape, vec![8, 1024]);
        let inputs = read("bullet-3-input-buckets.toml");
        assert_eq!(inputs.inputs.count(), 7680);
        assert!(inputs.factoriser());
        let multi = read("bullet-4-multi-layer.toml");
        assert_eq!(multi.transformer_output(), 512);
        assert_eq!(
            multi.default_quant("l1.weight").unwrap(),
            TensorQuant {
                dtype: Dtype::I8,
                factor: 64.0,
                rounding: Rounding::Round
            }
        );
        // Every example there reads and is a net the engine evaluates, bullet's four among them.
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        for name in &names {
            read(name)
                .engine_limits()
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let bullet = names.iter().filter(|n| n.starts_with("bullet-")).count();
        assert_eq!(bullet, 4, "{names:?}");
    }
}
