//! Quantized NNUE networks: the `.nnue` file format and integer inference.
//!
//! # Quantization (the Stockfish scheme, as nnue-pytorch serializes it)
//!
//! | tensor                 | stored | scale                  | float range            |
//! |------------------------|--------|------------------------|------------------------|
//! | `ft.weight`, `ft.bias` | i16    | ×127                   | ±258                   |
//! | hidden `lN.weight`     | i8     | ×64                    | ±127/64                |
//! | hidden `lN.bias`       | i32    | ×127·64                | ±2^31/8128             |
//! | output weight          | i8     | ×600·16/127 (≈ 75.6)   | ±127²/9600 ≈ ±1.68     |
//! | output bias            | i32    | ×600·16                |                        |
//!
//! Activations are 0..=127 for 0..=1. A hidden layer's sums carry scale 127·64 and are
//! divided by 64 (rounded) before the clipped ReLU. The output layer's sum carries scale
//! 600·16, so dividing it by 16 gives 600 × the float output: a score in Stockfish internal
//! units (the lake's score unit), like nnue-pytorch's `nnue2score = 600`.
//!
//! # SCReLU nets (`WIDTHx2:screlu`, no hidden layers)
//!
//! The single-layer design of bullet and most engines that train there: the output reads
//! the squared clipped transformer output, `Σ clamp(x, 0, 1)² · w + b`.
//!
//! | tensor                 | stored | scale   | float range            |
//! |------------------------|--------|---------|------------------------|
//! | `ft.weight`, `ft.bias` | i16    | ×255    | ±128                   |
//! | output weight          | i8     | ×64     | ±127/64                |
//! | output bias            | i32    | ×255·64 |                        |
//!
//! With `a = clamp(acc, 0, 255)`, `s = Σ a²·w` is exact in i64 (each `a·w` fits i16, which
//! is why the weights stay within ±127), and the score is `(s / 255 + b) · 600 / (255·64)`.
//!
//! # File layout (all integers little-endian)
//!
//! ```text
//! magic        8 bytes  "LKFNNUE\n"
//! version      u32      1
//! arch hash    u32      FNV-1a of "features=<set>;arch=<arch>;<scheme>" (see arch_hash)
//! features     u16 length, UTF-8   e.g. "halfkp"
//! arch         u16 length, UTF-8   e.g. "256x2-32-32"
//! description  u32 length, UTF-8   free text (run, checkpoint, ...)
//! tensors      u32 count, then per tensor:
//!              u16 length + name, u8 dtype (1 = i8, 2 = i16, 4 = i32),
//!              u8 rank, rank × u32 dims, then the values
//! ```
//!
//! Tensors come in a fixed order: `ft.bias` `[l1]`, `ft.weight` `[inputs, l1]`, then for
//! each dense layer `lN.bias` `[out]` and `lN.weight` `[out, in]`. The reader checks every
//! name, type and shape against the header's architecture and rejects a wrong version, a
//! wrong hash, a short file and trailing bytes.

use crate::bytes::ByteReader;
use crate::features::{FeatureError, FeatureSetKind};
use crate::simd::{AlignedI16, Kernel};
use shakmaty::{Board, Color};
use std::fmt;

pub const MAGIC: &[u8; 8] = b"LKFNNUE\n";
pub const VERSION: u32 = 1;
/// Feature-transformer quantization: 1.0 is stored as 127.
pub const FT_SCALE: f64 = 127.0;
/// Hidden-layer weight quantization: 1.0 is stored as 64 (a right shift by 6).
pub const WEIGHT_SCALE: f64 = 64.0;
const WEIGHT_SHIFT: u32 = 6;
/// The float network's output times this is a score in internal units.
pub const OUTPUT_SCALE: f64 = 600.0;
/// The output layer's sum is divided by this (a right shift by 4).
const OUTPUT_DIVISOR_SHIFT: u32 = 4;
/// Output-layer weight quantization: `OUTPUT_SCALE · 16 / 127`.
pub const OUTPUT_WEIGHT_SCALE: f64 = OUTPUT_SCALE * 16.0 / FT_SCALE;
/// Output-layer bias quantization: `OUTPUT_SCALE · 16`.
pub const OUTPUT_BIAS_SCALE: f64 = OUTPUT_SCALE * 16.0;
/// Largest float weight a hidden layer may have (int8 at ×64).
pub const MAX_HIDDEN_WEIGHT: f64 = 127.0 / WEIGHT_SCALE;
/// Largest float weight the output layer may have (int8 at ×[`OUTPUT_WEIGHT_SCALE`]).
pub const MAX_OUTPUT_WEIGHT: f64 = 127.0 / OUTPUT_WEIGHT_SCALE;
/// Names the quantization scheme inside the architecture hash.
const SCHEME: &str = "ft=i16x127;hidden=i8x64,i32x8128;out=i8x9600/127,i32x9600,/16";
/// The scheme of SCReLU nets.
const SCRELU_SCHEME: &str = "ft=i16x255;screlu;out=i8x64,i32x16320,(s/255+b)*600/16320";
/// SCReLU nets: the transformer's 1.0 is stored as 255 (activations 0..=255).
pub const SCRELU_FT_SCALE: f64 = 255.0;
/// SCReLU nets: output weights' 1.0 is stored as 64.
pub const SCRELU_OUTPUT_WEIGHT_SCALE: f64 = 64.0;
/// SCReLU nets: the output bias' 1.0 is stored as 255·64.
pub const SCRELU_OUTPUT_BIAS_SCALE: f64 = 255.0 * 64.0;
/// Largest float output weight of a SCReLU net: `a·w` must fit an i16 lane for `a ≤ 255`.
pub const MAX_SCRELU_OUTPUT_WEIGHT: f64 = 127.0 / SCRELU_OUTPUT_WEIGHT_SCALE;
/// Widest SCReLU transformer: the SIMD kernel's i32 lanes hold `l1/8` pair sums of at most
/// `2·255·255·127` each.
pub const MAX_SCRELU_WIDTH: usize = 1024;

/// What the feature transformer's output goes through before the dense layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Activation {
    /// Clipped ReLU, `clamp(x, 0, 1)`, the Stockfish scheme.
    #[default]
    Crelu,
    /// Squared clipped ReLU, `clamp(x, 0, 1)²`, straight into the output (no hidden layers).
    Screlu,
}

/// Network shape from strings like `256x2-32-32`: feature transformer width 256 (the `x2` is
/// the two perspectives), then hidden layers of 32 and 32, then one output. `256x2:screlu`
/// is a transformer of 256 whose squared clipped output feeds the output directly.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Arch {
    pub l1: usize,
    pub hidden: Vec<usize>,
    pub activation: Activation,
}

/// An architecture string that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("architecture {arch:?} does not parse: {reason}")]
pub struct ArchError {
    pub arch: String,
    pub reason: String,
}

impl Arch {
    pub fn parse(s: &str) -> Result<Arch, ArchError> {
        let bad = |why: &str| ArchError {
            arch: s.to_string(),
            reason: why.to_string(),
        };
        let (layers, activation) = match s.split_once(':') {
            None => (s, Activation::Crelu),
            Some((layers, "screlu")) => (layers, Activation::Screlu),
            Some((_, other)) => {
                return Err(bad(&format!(
                    "unknown activation {other:?} (the one option is `:screlu`)"
                )));
            }
        };
        let mut parts = layers.split('-');
        let first = parts.next().unwrap_or("");
        let l1 = first
            .strip_suffix("x2")
            .ok_or_else(|| bad("the first layer must be written WIDTHx2, like 256x2"))?;
        let l1: usize = l1.parse().map_err(|_| bad("the width is not a number"))?;
        let hidden = parts
            .map(|p| {
                p.parse::<usize>()
                    .map_err(|_| bad("a hidden layer size is not a number"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if !(1..=4096).contains(&l1) || hidden.iter().any(|h| !(1..=1024).contains(h)) {
            return Err(bad(
                "layer sizes must be 1..=4096 (first) and 1..=1024 (hidden)",
            ));
        }
        if activation == Activation::Screlu {
            if !hidden.is_empty() {
                return Err(bad(
                    "a :screlu net has no hidden layers (write it WIDTHx2:screlu)",
                ));
            }
            if l1 > MAX_SCRELU_WIDTH {
                return Err(bad(&format!(
                    "a :screlu transformer is at most {MAX_SCRELU_WIDTH} wide"
                )));
            }
        }
        Ok(Arch {
            l1,
            hidden,
            activation,
        })
    }

    /// The transformer's quantization scale (1.0 is stored as this).
    pub fn ft_scale(&self) -> f64 {
        match self.activation {
            Activation::Crelu => FT_SCALE,
            Activation::Screlu => SCRELU_FT_SCALE,
        }
    }

    /// `(inputs, outputs)` of each dense layer, the output layer last.
    pub fn dense(&self) -> Vec<(usize, usize)> {
        let mut widths = vec![2 * self.l1];
        widths.extend(&self.hidden);
        widths.push(1);
        widths.windows(2).map(|w| (w[0], w[1])).collect()
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x2", self.l1)?;
        for h in &self.hidden {
            write!(f, "-{h}")?;
        }
        if self.activation == Activation::Screlu {
            write!(f, ":screlu")?;
        }
        Ok(())
    }
}

/// The hash a file's header must carry for its feature set and architecture: FNV-1a (32 bit)
/// of `features=<set>;arch=<arch>;<quantization scheme>`. It changes whenever the meaning
/// of the tensors would, so a file written under other rules is refused, not misread.
pub fn arch_hash(features: FeatureSetKind, arch: &Arch) -> u32 {
    let scheme = match arch.activation {
        Activation::Crelu => SCHEME,
        Activation::Screlu => SCRELU_SCHEME,
    };
    let text = format!("features={};arch={arch};{scheme}", features.name());
    text.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ b as u32).wrapping_mul(0x0100_0193)
    })
}

/// Why a `.nnue` file or a set of quantized tensors was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NnueError {
    #[error("not a lakefish .nnue file (magic bytes {0:?})")]
    Magic(Vec<u8>),
    #[error(
        "format version {found}; this build reads version {VERSION} (fixed shapes) and 2 (nets a NetSpec describes)"
    )]
    Version { found: u32 },
    #[error(
        "architecture hash {found:#010x} does not match {expected:#010x} for {features} {arch} (written under other quantization rules, or a corrupt header)"
    )]
    Hash {
        found: u32,
        expected: u32,
        features: String,
        arch: String,
    },
    #[error("the file ends early at byte {at} while reading {what}")]
    Truncated { at: usize, what: String },
    #[error("{0} trailing bytes after the last tensor")]
    Trailing(usize),
    #[error("tensor {name}: {reason}")]
    Tensor { name: String, reason: String },
    #[error("header: {0}")]
    Header(String),
    #[error("layout: {0}")]
    Layout(String),
}

/// One dense layer: `weights` is `[outputs, inputs]`, row-major.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dense {
    pub inputs: usize,
    pub outputs: usize,
    pub bias: Vec<i32>,
    pub weights: Vec<i8>,
}

impl Dense {
    /// The weights as `[inputs / 4][outputs][4]`: for each group of four inputs, those four
    /// weights of every output in turn. A kernel then broadcasts four activations and
    /// multiplies them into all outputs at once, each SIMD lane summing its own output (no
    /// horizontal sums), and can skip a group whose four activations are all zero. Empty when
    /// the shape does not fit (inputs not a multiple of 4, outputs not of 8).
    pub fn by_input_quads(&self) -> Vec<i8> {
        let (n, m) = (self.inputs, self.outputs);
        if !n.is_multiple_of(4) || !m.is_multiple_of(8) || self.weights.len() != n * m {
            return Vec::new();
        }
        let mut quads = Vec::with_capacity(n * m);
        for q in 0..n / 4 {
            for o in 0..m {
                quads.extend_from_slice(&self.weights[o * n + 4 * q..][..4]);
            }
        }
        quads
    }
}

/// A quantized network, ready to evaluate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Network {
    pub features: FeatureSetKind,
    pub arch: Arch,
    pub description: String,
    pub ft_bias: Vec<i16>,
    /// `[inputs, l1]`: the row of feature `f` starts at `f · l1`.
    pub ft_weights: AlignedI16,
    /// Hidden layers, then the output layer. Build a new `Network` rather than changing them
    /// in place: the SIMD kernels read `quads`, derived from them at construction.
    pub layers: Vec<Dense>,
    /// Each layer's weights regrouped for the SIMD kernel ([`Dense::by_input_quads`]).
    pub(crate) quads: Vec<Vec<i8>>,
    /// SCReLU nets: the output weights widened to i16 for the kernel (empty otherwise).
    pub(crate) output16: Vec<i16>,
}

/// The feature transformer's output for both perspectives, indexed by `Color as usize`
/// (shakmaty: Black 0, White 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accumulator {
    pub values: [Vec<i16>; 2],
}

impl Network {
    /// Assembles a network, checking every tensor's length against the architecture.
    pub fn new(
        features: FeatureSetKind,
        arch: Arch,
        description: String,
        ft_bias: Vec<i16>,
        ft_weights: Vec<i16>,
        layers: Vec<Dense>,
    ) -> Result<Network, NnueError> {
        let mut net = Network {
            features,
            arch,
            description,
            ft_bias,
            ft_weights: ft_weights.into(),
            layers,
            quads: Vec::new(),
            output16: Vec::new(),
        };
        for t in net.expected_tensors() {
            let len = match t.name.as_str() {
                "ft.bias" => net.ft_bias.len(),
                "ft.weight" => net.ft_weights.len(),
                _ => {
                    let i = t.layer.expect("dense tensor");
                    match net.layers.get(i) {
                        None => 0,
                        Some(l) if t.name.ends_with("bias") => l.bias.len(),
                        Some(l) => l.weights.len(),
                    }
                }
            };
            if len != t.len() {
                let reason = format!("{len} values, the architecture needs {}", t.len());
                return Err(NnueError::Tensor {
                    name: t.name,
                    reason,
                });
            }
        }
        if net.layers.len() != net.arch.dense().len() {
            return Err(NnueError::Header(format!(
                "{} dense layers, the architecture has {}",
                net.layers.len(),
                net.arch.dense().len()
            )));
        }
        net.derive_kernel_layouts();
        Ok(net)
    }

    fn expected_tensors(&self) -> Vec<TensorSpec> {
        let l1 = self.arch.l1;
        let mut v = vec![
            TensorSpec::new("ft.bias", 2, vec![l1], None),
            TensorSpec::new("ft.weight", 2, vec![self.features.inputs(), l1], None),
        ];
        for (i, (inputs, outputs)) in self.arch.dense().into_iter().enumerate() {
            v.push(TensorSpec::new(
                &format!("l{i}.bias"),
                4,
                vec![outputs],
                Some(i),
            ));
            v.push(TensorSpec::new(
                &format!("l{i}.weight"),
                1,
                vec![outputs, inputs],
                Some(i),
            ));
        }
        v
    }

    /// The file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + 2 * self.ft_weights.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&arch_hash(self.features, &self.arch).to_le_bytes());
        let short = |out: &mut Vec<u8>, s: &str| {
            out.extend_from_slice(&(s.len() as u16).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
        };
        short(&mut out, self.features.name());
        short(&mut out, &self.arch.to_string());
        out.extend_from_slice(&(self.description.len() as u32).to_le_bytes());
        out.extend_from_slice(self.description.as_bytes());
        let specs = self.expected_tensors();
        out.extend_from_slice(&(specs.len() as u32).to_le_bytes());
        for t in specs {
            short(&mut out, &t.name);
            out.push(t.dtype);
            out.push(t.dims.len() as u8);
            for d in &t.dims {
                out.extend_from_slice(&(*d as u32).to_le_bytes());
            }
            match (t.name.as_str(), t.layer) {
                ("ft.bias", _) => self.ft_bias.iter().for_each(|v| {
                    out.extend_from_slice(&v.to_le_bytes());
                }),
                ("ft.weight", _) => self.ft_weights.iter().for_each(|v| {
                    out.extend_from_slice(&v.to_le_bytes());
                }),
                (name, Some(i)) if name.ends_with("bias") => self.layers[i]
                    .bias
                    .iter()
                    .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
                (_, Some(i)) => out.extend(self.layers[i].weights.iter().map(|&v| v as u8)),
                _ => unreachable!("every tensor is ft.* or a dense layer's"),
            }
        }
        out
    }

    /// Reads a `.nnue` file, refusing anything that is not exactly one well-formed network.
    pub fn from_bytes(bytes: &[u8]) -> Result<Network, NnueError> {
        let mut r = ByteReader::new(bytes);
        let magic = r.take(8, "the magic bytes")?;
        if magic != MAGIC {
            return Err(NnueError::Magic(magic.to_vec()));
        }
        let version = r.u32("the version")?;
        if version != VERSION {
            return Err(NnueError::Version { found: version });
        }
        let hash = r.u32("the architecture hash")?;
        let features = string16(&mut r, "the feature set")?;
        let arch_text = string16(&mut r, "the architecture")?;
        let features =
            FeatureSetKind::from_name(&features).map_err(|e| NnueError::Header(e.to_string()))?;
        let arch = Arch::parse(&arch_text).map_err(|e| NnueError::Header(e.to_string()))?;
        let expected = arch_hash(features, &arch);
        if hash != expected {
            return Err(NnueError::Hash {
                found: hash,
                expected,
                features: features.name().to_string(),
                arch: arch_text,
            });
        }
        let len = r.u32("the description length")? as usize;
        let description = String::from_utf8(r.take(len, "the description")?.to_vec())
            .map_err(|_| NnueError::Header("the description is not UTF-8".into()))?;
        let mut net = Network {
            features,
            arch,
            description,
            ft_bias: Vec::new(),
            ft_weights: AlignedI16::default(),
            layers: Vec::new(),
            quads: Vec::new(),
            output16: Vec::new(),
        };
        let specs = net.expected_tensors();
        let count = r.u32("the tensor count")? as usize;
        if count != specs.len() {
            return Err(NnueError::Header(format!(
                "{count} tensors, the architecture has {}",
                specs.len()
            )));
        }
        for t in specs {
            let at = r.at;
            let name = string16(&mut r, &format!("the name of tensor {}", t.name))?;
            if name != t.name {
                // Named by the slot it should fill: the file's name may be empty or garbage.
                return Err(NnueError::Tensor {
                    name: t.name,
                    reason: format!("the file has {name:?} in its place (byte {at})"),
                });
            }
            let what = format!("tensor {name}");
            let dtype = r.take(1, &what)?[0];
            let rank = r.take(1, &what)?[0] as usize;
            let dims = (0..rank)
                .map(|_| r.u32(&what).map(|d| d as usize))
                .collect::<Result<Vec<_>, _>>()?;
            if dtype != t.dtype || dims != t.dims {
                return Err(NnueError::Tensor {
                    name,
                    reason: format!(
                        "type {dtype} shape {dims:?}, the architecture needs type {} shape {:?}",
                        t.dtype, t.dims
                    ),
                });
            }
            let data = r.take(t.len() * dtype as usize, &what)?;
            match (t.name.as_str(), t.layer) {
                ("ft.bias", _) => net.ft_bias = i16s(data),
                ("ft.weight", _) => net.ft_weights = i16s(data).into(),
                (n, Some(_)) if n.ends_with("bias") => {
                    // Its weights follow and fill in `inputs`.
                    net.layers.push(Dense {
                        inputs: 0,
                        outputs: t.dims[0],
                        bias: data
                            .chunks_exact(4)
                            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                            .collect(),
                        weights: Vec::new(),
                    });
                }
                (_, Some(i)) => {
                    let layer = &mut net.layers[i];
                    layer.inputs = t.dims[1];
                    layer.weights = data.iter().map(|&b| b as i8).collect();
                }
                _ => unreachable!("every tensor is ft.* or a dense layer's"),
            }
        }
        if r.at != bytes.len() {
            return Err(NnueError::Trailing(bytes.len() - r.at));
        }
        net.derive_kernel_layouts();
        Ok(net)
    }

    /// The weight layouts the SIMD kernels read, from `layers`.
    fn derive_kernel_layouts(&mut self) {
        self.quads = self.layers.iter().map(Dense::by_input_quads).collect();
        self.output16 = match self.arch.activation {
            Activation::Crelu => Vec::new(),
            Activation::Screlu => self.layers[0].weights.iter().map(|&w| w as i16).collect(),
        };
    }

    /// A fresh accumulator for `board`, both perspectives.
    pub fn refresh(&self, board: &Board) -> Result<Accumulator, FeatureError> {
        let mut features = Vec::with_capacity(self.features.max_active());
        let mut values = [Vec::new(), Vec::new()];
        for color in Color::ALL {
            features.clear();
            self.features.active_features(board, color, &mut features)?;
            values[color as usize] = self.accumulate(&features);
        }
        Ok(Accumulator { values })
    }

    /// Feature-transformer output for one perspective's active features.
    pub fn accumulate(&self, features: &[u32]) -> Vec<i16> {
        let l1 = self.arch.l1;
        let mut acc = self.ft_bias.clone();
        for &f in features {
            let row = &self.ft_weights[f as usize * l1..(f as usize + 1) * l1];
            for (a, w) in acc.iter_mut().zip(row) {
                // The quantizer proves sums of reachable positions fit; wrapping is what
                // SIMD lanes would do and never panics on odd input.
                *a = a.wrapping_add(*w);
            }
        }
        acc
    }

    /// Score of the position for the side to move, in internal units.
    pub fn evaluate(&self, acc: &Accumulator, side_to_move: Color) -> i32 {
        self.propagate(
            &acc.values[side_to_move as usize],
            &acc.values[side_to_move.other() as usize],
        )
    }

    /// Full-refresh evaluation of a board, for the side to move.
    pub fn evaluate_board(&self, board: &Board, side_to_move: Color) -> Result<i32, FeatureError> {
        Ok(self.evaluate(&self.refresh(board)?, side_to_move))
    }

    /// Dense layers over the two accumulators, side to move first.
    pub fn propagate(&self, stm: &[i16], nstm: &[i16]) -> i32 {
        if self.arch.activation == Activation::Screlu {
            let s = Kernel::Scalar.screlu_dot(stm, nstm, &self.output16);
            return screlu_score(s, self.layers[0].bias[0]);
        }
        let mut x: Vec<i32> = stm
            .iter()
            .chain(nstm)
            .map(|&v| (v as i32).clamp(0, 127))
            .collect();
        let last = self.layers.len() - 1;
        for (i, layer) in self.layers.iter().enumerate() {
            let sums = layer.bias.iter().enumerate().map(|(o, &b)| {
                let row = &layer.weights[o * layer.inputs..(o + 1) * layer.inputs];
                b + row.iter().zip(&x).map(|(&w, &a)| w as i32 * a).sum::<i32>()
            });
            if i == last {
                let sum = sums.into_iter().next().expect("one output");
                return rounded_shift(sum, OUTPUT_DIVISOR_SHIFT);
            }
            x = sums
                .map(|s| rounded_shift(s, WEIGHT_SHIFT).clamp(0, 127))
                .collect();
        }
        unreachable!("a network has an output layer")
    }
}

impl Network {
    /// [`Network::propagate`] on `kernel`; the same result, faster.
    pub fn propagate_with(&self, kernel: Kernel, stm: &[i16], nstm: &[i16]) -> i32 {
        if self.arch.activation == Activation::Screlu {
            let s = kernel.screlu_dot(stm, nstm, &self.output16);
            return screlu_score(s, self.layers[0].bias[0]);
        }
        let n = stm.len() + nstm.len();
        let widest = self.layers.iter().map(|l| l.outputs).max().unwrap_or(0);
        if widest <= 64 && n <= 512 {
            self.propagate_in::<512, 64>(kernel, stm, nstm)
        } else if widest > 256 {
            self.propagate(stm, nstm)
        } else if n <= 1024 {
            self.propagate_in::<1024, 256>(kernel, stm, nstm)
        } else if n <= 4096 {
            self.propagate_in::<4096, 256>(kernel, stm, nstm)
        } else {
            self.propagate(stm, nstm)
        }
    }

    /// With an activation buffer of `N` bytes and `M` sums (sized to the net, so clearing
    /// them stays cheap).
    fn propagate_in<const N: usize, const M: usize>(
        &self,
        kernel: Kernel,
        stm: &[i16],
        nstm: &[i16],
    ) -> i32 {
        let mut x = [0u8; N];
        let mut sums = [0i32; M];
        kernel.clip(stm, nstm, &mut x[..stm.len() + nstm.len()]);
        let last = self.layers.len() - 1;
        for (i, layer) in self.layers.iter().enumerate() {
            kernel.dense(&x[..layer.inputs], layer, &self.quads[i], &mut sums);
            if i == last {
                break;
            }
            for (x, &s) in x.iter_mut().zip(&sums[..layer.outputs]) {
                *x = rounded_shift(s, WEIGHT_SHIFT).clamp(0, 127) as u8;
            }
        }
        rounded_shift(sums[0], OUTPUT_DIVISOR_SHIFT)
    }
}

/// A network with random values spread over each type's whole range, for tests and speed
/// benchmarks (it evaluates nonsense, at the real cost).
pub fn random_network(features: FeatureSetKind, arch: &str, seed: u64) -> Network {
    let arch = Arch::parse(arch).unwrap();
    let mut rng = crate::random_games::SplitMix(seed);
    let mut small = |range: i64| (rng.next_u64() % (2 * range as u64 + 1)) as i64 - range;
    let l1 = arch.l1;
    let ft_bias = (0..l1).map(|_| small(60) as i16).collect();
    let ft_weights = (0..features.inputs() * l1)
        .map(|_| small(20) as i16)
        .collect();
    let layers = arch
        .dense()
        .into_iter()
        .map(|(inputs, outputs)| Dense {
            inputs,
            outputs,
            bias: (0..outputs).map(|_| small(4000) as i32).collect(),
            weights: (0..inputs * outputs).map(|_| small(127) as i8).collect(),
        })
        .collect();
    Network::new(
        features,
        arch,
        "test net".into(),
        ft_bias,
        ft_weights,
        layers,
    )
    .unwrap()
}

/// A SCReLU net's score from `s = Σ a²·w` and the output bias:
/// `(s / 255 + b) · 600 / (255·64)`, each division rounded to nearest.
fn screlu_score(s: i64, bias: i32) -> i32 {
    let div = |v: i64, d: i64| (v + d / 2).div_euclid(d);
    let t = div(s, 255) + bias as i64;
    div(t * OUTPUT_SCALE as i64, 255 * 64) as i32
}

/// `v / 2^shift` rounded to nearest (halves up).
fn rounded_shift(v: i32, shift: u32) -> i32 {
    (v + (1 << (shift - 1))) >> shift
}

fn i16s(data: &[u8]) -> Vec<i16> {
    data.chunks_exact(2)
        .map(|c| i16::from_le_bytes([c[0], c[1]]))
        .collect()
}

struct TensorSpec {
    name: String,
    dtype: u8,
    dims: Vec<usize>,
    layer: Option<usize>,
}

impl TensorSpec {
    fn new(name: &str, dtype: u8, dims: Vec<usize>, layer: Option<usize>) -> Self {
        TensorSpec {
            name: name.to_string(),
            dtype,
            dims,
            layer,
        }
    }
    fn len(&self) -> usize {
        self.dims.iter().product()
    }
}

impl From<crate::bytes::Short> for NnueError {
    fn from(s: crate::bytes::Short) -> NnueError {
        NnueError::Truncated {
            at: s.have,
            what: s.what,
        }
    }
}

/// A string of up to 65,535 bytes after its u16 length.
fn string16(r: &mut ByteReader, what: &str) -> Result<String, NnueError> {
    let b = r.take(2, what)?;
    let n = u16::from_le_bytes([b[0], b[1]]) as usize;
    let s = r.take(n, what)?;
    String::from_utf8(s.to_vec()).map_err(|_| NnueError::Header(format!("{what} is not UTF-8")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random_games::SplitMix;

    /// Every buffer size `propagate_with` picks (512/64, 1024/256, 4096/256 and the plain
    /// fallback), and layers the quads kernels do not fit: each kernel equals the scalar
    /// reference `propagate` over random accumulators (within and beyond the clip range).
    #[test]
    fn propagate_with_matches_propagate_for_every_buffer_size() {
        let mut rng = SplitMix(11);
        for arch in [
            "256x2-32-32",
            "128x2-16-16",
            "256x2-128-32",
            "96x2-36-12",
            "1024x2-8-32",
            "32x2-300-8",
            "256x2:screlu",
            "32x2:screlu",
            "1024x2:screlu",
        ] {
            let net = random_network(FeatureSetKind::All768, arch, 3);
            let l1 = net.arch.l1;
            for _ in 0..20 {
                let mut acc = || -> Vec<i16> {
                    (0..l1)
                        .map(|_| (rng.next_u64() % 400) as i16 - 150)
                        .collect()
                };
                let (stm, nstm) = (acc(), acc());
                let want = net.propagate(&stm, &nstm);
                for kernel in Kernel::available(l1) {
                    assert_eq!(
                        net.propagate_with(kernel, &stm, &nstm),
                        want,
                        "{arch} {kernel:?}"
                    );
                }
            }
        }
    }
    use shakmaty::{Chess, Position};

    #[test]
    fn arch_parses_and_prints() {
        let a = Arch::parse("256x2-32-32").unwrap();
        assert_eq!(a.l1, 256);
        assert_eq!(a.hidden, vec![32, 32]);
        assert_eq!(a.to_string(), "256x2-32-32");
        assert_eq!(a.dense(), vec![(512, 32), (32, 32), (32, 1)]);
        for bad in ["256-32", "x2-32", "256x2-3a", "0x2", "256x2-2000", ""] {
            let e = Arch::parse(bad).unwrap_err();
            assert!(e.to_string().contains("does not parse"), "{bad}: {e}");
        }
        let s = Arch::parse("512x2:screlu").unwrap();
        assert_eq!((s.l1, s.activation), (512, Activation::Screlu));
        assert_eq!(s.to_string(), "512x2:screlu");
        assert_eq!(s.dense(), vec![(1024, 1)]);
        assert_eq!(s.ft_scale(), 255.0);
        assert_eq!(Arch::parse("512x2").unwrap().activation, Activation::Crelu);
        for (bad, why) in [
            ("256x2-32:screlu", "no hidden layers"),
            ("2048x2:screlu", "at most 1024"),
            ("256x2:relu", "unknown activation"),
            ("256x2:", "unknown activation"),
        ] {
            let e = Arch::parse(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    /// A SCReLU net's score computed by hand: two active lanes per perspective, one
    /// clamped above 255, one negative (0), against the formula in the module notes.
    #[test]
    fn screlu_score_follows_the_formula() {
        let arch = Arch::parse("32x2:screlu").unwrap();
        let mut weights = vec![0i8; 64];
        weights[0] = 100; // stm lane 0
        weights[1] = -7; // stm lane 1 (negative accumulator: contributes 0)
        weights[32] = -50; // nstm lane 0 (clamped to 255)
        let output = Dense {
            inputs: 64,
            outputs: 1,
            bias: vec![5000],
            weights,
        };
        let net = Network::new(
            FeatureSetKind::All768,
            arch,
            String::new(),
            vec![0; 32],
            vec![0; 768 * 32],
            vec![output],
        )
        .unwrap();
        let mut stm = vec![0i16; 32];
        let mut nstm = vec![0i16; 32];
        stm[0] = 200;
        stm[1] = -30;
        nstm[0] = 400;
        let s = 200i64 * 200 * 100 - 255 * 255 * 50;
        let t = (s as f64 / 255.0).round() + 5000.0;
        let want = (t * 600.0 / 16320.0).round() as i32;
        assert_eq!(net.propagate(&stm, &nstm), want);
        for kernel in Kernel::available(32) {
            assert_eq!(net.propagate_with(kernel, &stm, &nstm), want, "{kernel:?}");
        }
    }

    #[test]
    fn round_trip_is_exact() {
        for (features, arch) in [
            (FeatureSetKind::All768, "16x2-8-4"),
            (FeatureSetKind::HalfKp, "8x2-4"),
            (FeatureSetKind::HalfKaV2Hm, "8x2"),
            (FeatureSetKind::All768, "32x2:screlu"),
        ] {
            let net = random_network(features, arch, 7);
            let bytes = net.to_bytes();
            let back = Network::from_bytes(&bytes).unwrap();
            assert_eq!(back, net);
            assert_eq!(back.to_bytes(), bytes);
        }
    }

    #[test]
    fn damaged_files_are_refused_with_reasons() {
        let net = random_network(FeatureSetKind::All768, "16x2-8", 1);
        let bytes = net.to_bytes();

        let mut v = bytes.clone();
        v[8] = 2;
        assert_eq!(
            Network::from_bytes(&v).unwrap_err(),
            NnueError::Version { found: 2 }
        );

        let mut v = bytes.clone();
        v[12] ^= 1;
        let e = Network::from_bytes(&v).unwrap_err();
        assert!(matches!(e, NnueError::Hash { .. }), "{e}");
        assert!(e.to_string().contains("all768 16x2-8"), "{e}");

        let mut v = bytes.clone();
        v.push(0);
        assert_eq!(Network::from_bytes(&v).unwrap_err(), NnueError::Trailing(1));

        for cut in [0, 7, 20, bytes.len() / 2, bytes.len() - 1] {
            let e = Network::from_bytes(&bytes[..cut]).unwrap_err();
            assert!(
                matches!(e, NnueError::Truncated { .. } | NnueError::Magic(_)),
                "cut at {cut}: {e}"
            );
        }

        assert!(matches!(
            Network::from_bytes(b"garbage garbage garbage").unwrap_err(),
            NnueError::Magic(_)
        ));

        // Found by lakefish-fuzz: a damaged tensor name is reported by the slot it fills.
        let mut v = bytes.clone();
        let at = v.windows(7).position(|w| w == b"ft.bias").unwrap();
        v[at - 2] = 0;
        let e = Network::from_bytes(&v).unwrap_err().to_string();
        assert!(
            e.starts_with("tensor ft.bias: the file has \"\" in its place"),
            "{e}"
        );

        // A header claiming another width: the hash no longer matches.
        let other = random_network(FeatureSetKind::All768, "32x2-8", 1);
        let mut v = other.to_bytes();
        let at = 8 + 4 + 4 + 2 + "all768".len() + 2;
        v[at..at + 6].copy_from_slice(b"16x2-8");
        let e = Network::from_bytes(&v).unwrap_err();
        assert!(matches!(e, NnueError::Hash { .. }), "{e}");
    }

    #[test]
    fn wrong_lengths_are_refused_on_assembly() {
        let net = random_network(FeatureSetKind::All768, "16x2-8", 3);
        let mut bias = net.ft_bias.clone();
        bias.pop();
        let e = Network::new(
            net.features,
            net.arch.clone(),
            String::new(),
            bias,
            net.ft_weights.to_vec(),
            net.layers.clone(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("ft.bias"), "{e}");
    }

    /// Integer inference against the same arithmetic written out in f64.
    #[test]
    fn evaluation_matches_a_reference_computation() {
        for features in FeatureSetKind::ALL {
            let net = random_network(features, "16x2-8-4", 11);
            let mut pos = Chess::default();
            let mut rng = SplitMix(5);
            for _ in 0..40 {
                let board = pos.board().clone();
                let turn = pos.turn();
                let got = net.evaluate_board(&board, turn).unwrap();
                let acc = |c: Color| {
                    let mut f = Vec::new();
                    features.active_features(&board, c, &mut f).unwrap();
                    (0..16)
                        .map(|j| {
                            let s: i64 = f
                                .iter()
                                .map(|&i| net.ft_weights[i as usize * 16 + j] as i64)
                                .sum();
                            (s + net.ft_bias[j] as i64).clamp(0, 127)
                        })
                        .collect::<Vec<_>>()
                };
                let mut x: Vec<i64> = acc(turn).into_iter().chain(acc(turn.other())).collect();
                for (k, l) in net.layers.iter().enumerate() {
                    let y: Vec<i64> = (0..l.outputs)
                        .map(|o| {
                            l.bias[o] as i64
                                + (0..l.inputs)
                                    .map(|i| l.weights[o * l.inputs + i] as i64 * x[i])
                                    .sum::<i64>()
                        })
                        .collect();
                    x = if k + 1 == net.layers.len() {
                        vec![(y[0] as f64 / 16.0 + 0.5).floor() as i64]
                    } else {
                        y.iter()
                            .map(|&v| ((v as f64 / 64.0 + 0.5).floor() as i64).clamp(0, 127))
                            .collect()
                    };
                }
                assert_eq!(got as i64, x[0], "{features} at {board}");
                let moves = pos.legal_moves();
                if moves.is_empty() {
                    break;
                }
                let m = moves[(rng.next_u64() % moves.len() as u64) as usize];
                pos.play_unchecked(m);
            }
        }
    }

    #[test]
    fn hash_depends_on_features_and_arch() {
        let a = Arch::parse("256x2-32-32").unwrap();
        let b = Arch::parse("256x2-32").unwrap();
        let h = arch_hash(FeatureSetKind::HalfKp, &a);
        assert_ne!(h, arch_hash(FeatureSetKind::All768, &a));
        assert_ne!(h, arch_hash(FeatureSetKind::HalfKp, &b));
        assert_eq!(h, arch_hash(FeatureSetKind::HalfKp, &a.clone()));
        // The activation changes the meaning of every tensor.
        let crelu = Arch::parse("256x2").unwrap();
        let screlu = Arch::parse("256x2:screlu").unwrap();
        assert_ne!(
            arch_hash(FeatureSetKind::All768, &crelu),
            arch_hash(FeatureSetKind::All768, &screlu)
        );
    }
}
