//! The network format and evaluation of Stockfish 15.1 (`nn-ad9b42354671.nnue`, the net its
//! Debian package embeds), so lakefish can import, evaluate and write nets Stockfish loads.
//!
//! Architecture (Stockfish 15.1's `nnue_architecture.h`, checked against its `eval` output in
//! `tests/tests/stockfish_net.rs`):
//! - Feature transformer: HalfKAv2_hm (22,528 inputs, [`HalfKaV2Hm`]) → 1,024 int16 per
//!   perspective, plus 8 int32 PSQT values per perspective (one per bucket), no PSQT bias.
//! - Its output, per perspective, side to move first: the first 512 lanes times the second
//!   512, each clamped to 0..=127, divided by 128 → 1,024 uint8.
//! - 8 layer stacks, picked by `(pieces on the board − 1) / 4`, like the PSQT bucket:
//!   `fc_0` 1,024 → 16 (int8 weights, int32 biases); outputs 0..15 go through both
//!   `min(127, x² >> 19)` and `clamp(x >> 6, 0, 127)`, concatenated (30, padded to 32) into
//!   `fc_1` 32 → 32, `clamp(x >> 6, 0, 127)`, `fc_2` 32 → 1. Output 15 of `fc_0` skips ahead:
//!   `x · 9600 / 8128` is added to `fc_2`.
//! - Evaluation in internal units, side to move: `(psqt + positional) / 16`, where
//!   `psqt = (psqt[us] − psqt[them]) / 2`; Stockfish prints internal units divided by 361.
//!
//! File layout, little-endian: version `0x7AF32F20`, a hash of the architecture, the length
//! and bytes of a free-text description; the transformer's hash, biases, weights (input-major)
//! and PSQT weights; then per stack its hash, each layer's biases and weights (output-major,
//! rows padded to 32 inputs). Nothing may follow. Stockfish refuses a file whose version or
//! hashes differ, so this reader does too, naming what differs.

use crate::bytes::{ByteReader, Short};
use crate::features::{FeatureError, FeatureSet, HalfKaV2Hm};
use crate::nnue::Dense;
use crate::simd::{AlignedI16, Kernel};
use shakmaty::{Board, Color};

pub const VERSION: u32 = 0x7AF3_2F20;
/// Inputs of HalfKAv2_hm.
pub const INPUTS: usize = HalfKaV2Hm::INPUTS;
/// Accumulator width per perspective (Stockfish's `TransformedFeatureDimensions`).
pub const HALF: usize = 1024;
/// PSQT buckets and layer stacks.
pub const BUCKETS: usize = 8;
const FC0_OUT: usize = 16;
const FC1_IN: usize = 32; // 2 × 15, padded to 32
const FC1_OUT: usize = 32;
const FC2_IN: usize = 32;
/// Internal units per network output unit.
pub const OUTPUT_SCALE: i32 = 16;
const WEIGHT_SCALE_BITS: u32 = 6;
/// Stockfish 15.1's `UCI::NormalizeToPawnValue`: internal units per printed pawn.
pub const PAWN: i32 = 361;

const fn affine_hash(prev: u32, outputs: u32) -> u32 {
    0xCC03_DAE4u32.wrapping_add(outputs) ^ (prev >> 1) ^ (prev << 31)
}

const fn relu_hash(prev: u32) -> u32 {
    0x538D_24C7u32.wrapping_add(prev)
}

/// Hash of the feature transformer (HalfKAv2_hm's `0x7f234cb8` and its output width).
pub const TRANSFORMER_HASH: u32 = 0x7F23_4CB8 ^ (HALF as u32 * 2);
/// Hash of one layer stack.
pub const STACK_HASH: u32 = {
    let mut h = 0xEC42_E90Du32 ^ (HALF as u32 * 2);
    h = affine_hash(h, FC0_OUT as u32);
    h = relu_hash(h);
    h = affine_hash(h, FC1_OUT as u32);
    h = relu_hash(h);
    affine_hash(h, 1)
};
/// The hash in the file's header.
pub const FILE_HASH: u32 = TRANSFORMER_HASH ^ STACK_HASH;

/// Why bytes are not a Stockfish 15.1 net.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SfNetError {
    #[error("truncated: {what} needs {needed} bytes at offset {offset}, the file has {have}")]
    Truncated {
        what: String,
        offset: usize,
        needed: usize,
        have: usize,
    },
    #[error(
        "not a Stockfish 15.1 net: version {found:#010x}, expected {VERSION:#010x} (another Stockfish version or not an .nnue file)"
    )]
    Version { found: u32 },
    #[error(
        "not Stockfish 15.1's architecture: {what} hash {found:#010x}, expected {expected:#010x} (HalfKAv2_hm, 1024 per side, 8 stacks of 16-32-1)"
    )]
    Hash {
        what: String,
        found: u32,
        expected: u32,
    },
    #[error("{extra} bytes after the last layer (a Stockfish 15.1 net ends there)")]
    Trailing { extra: usize },
    #[error("description of {0} bytes is too long to write")]
    Description(usize),
}

/// One of the 8 layer stacks: `fc_0` 1,024 → 16, `fc_1` 32 → 32 (inputs 30 and 31 are
/// padding), `fc_2` 32 → 1, each `[outputs, inputs]` int8 with int32 biases.
#[derive(Clone, PartialEq, Eq)]
pub struct LayerStack {
    pub fc0: Dense,
    pub fc1: Dense,
    pub fc2: Dense,
    /// `fc0` and `fc1` regrouped for the SIMD kernels ([`Dense::by_input_quads`]).
    quads: [Vec<i8>; 2],
}

impl LayerStack {
    /// A stack from its layers' biases and weights, in file order.
    pub fn new(
        fc0: (Vec<i32>, Vec<i8>),
        fc1: (Vec<i32>, Vec<i8>),
        fc2: (i32, Vec<i8>),
    ) -> LayerStack {
        let dense = |inputs, (bias, weights): (Vec<i32>, Vec<i8>)| Dense {
            inputs,
            outputs: bias.len(),
            bias,
            weights,
        };
        let fc0 = dense(HALF, fc0);
        let fc1 = dense(FC1_IN, fc1);
        let fc2 = dense(FC2_IN, (vec![fc2.0], fc2.1));
        let quads = [fc0.by_input_quads(), fc1.by_input_quads()];
        LayerStack {
            fc0,
            fc1,
            fc2,
            quads,
        }
    }
}

/// A Stockfish 15.1 network, every byte of its file kept (padding and description too), so
/// writing it back gives the same file.
#[derive(Clone, PartialEq, Eq)]
pub struct StockfishNet {
    pub description: Vec<u8>,
    pub ft_bias: Vec<i16>,
    /// `INPUTS × HALF`, input-major (cache-line aligned for the accumulator kernels).
    pub ft_weights: AlignedI16,
    /// `INPUTS × BUCKETS`, input-major.
    pub psqt_weights: Vec<i32>,
    pub stacks: Vec<LayerStack>,
}

impl std::fmt::Debug for StockfishNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "StockfishNet({:?})",
            String::from_utf8_lossy(&self.description)
        )
    }
}

impl From<Short> for SfNetError {
    fn from(s: Short) -> SfNetError {
        SfNetError::Truncated {
            what: s.what,
            offset: s.offset,
            needed: s.needed,
            have: s.have,
        }
    }
}

fn hash(r: &mut ByteReader, what: &str, expected: u32) -> Result<(), SfNetError> {
    let found = r.u32(what)?;
    if found != expected {
        return Err(SfNetError::Hash {
            what: what.to_string(),
            found,
            expected,
        });
    }
    Ok(())
}

fn i8s(r: &mut ByteReader, n: usize, what: &str) -> Result<Vec<i8>, Short> {
    Ok(r.take(n, what)?.iter().map(|&b| b as i8).collect())
}

fn i16s(r: &mut ByteReader, n: usize, what: &str) -> Result<Vec<i16>, Short> {
    let b = r.take(n * 2, what)?;
    Ok(b.chunks_exact(2)
        .map(|c| i16::from_le_bytes([c[0], c[1]]))
        .collect())
}

fn i32s(r: &mut ByteReader, n: usize, what: &str) -> Result<Vec<i32>, Short> {
    let b = r.take(n * 4, what)?;
    Ok(b.chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Bytes of a file of this architecture with an empty description.
pub const BYTES_WITHOUT_DESCRIPTION: usize = 12
    + 4
    + HALF * 2
    + INPUTS * HALF * 2
    + INPUTS * BUCKETS * 4
    + BUCKETS * (4 + FC0_OUT * 4 + FC0_OUT * HALF + FC1_OUT * 4 + FC1_OUT * FC1_IN + 4 + FC2_IN);

impl StockfishNet {
    /// Whether `bytes` start like a Stockfish 15.1 net (version and architecture hash).
    pub fn sniff(bytes: &[u8]) -> bool {
        bytes.len() >= 8
            && bytes[0..4] == VERSION.to_le_bytes()
            && bytes[4..8] == FILE_HASH.to_le_bytes()
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<StockfishNet, SfNetError> {
        let mut r = ByteReader::new(bytes);
        let version = r.u32("the version")?;
        if version != VERSION {
            return Err(SfNetError::Version { found: version });
        }
        hash(&mut r, "the file's architecture", FILE_HASH)?;
        let len = r.u32("the description's length")? as usize;
        let description = r.take(len, "the description")?.to_vec();
        hash(&mut r, "the feature transformer's", TRANSFORMER_HASH)?;
        let ft_bias = i16s(&mut r, HALF, "the feature transformer's biases")?;
        let ft_weights = i16s(&mut r, INPUTS * HALF, "the feature transformer's weights")?.into();
        let psqt_weights = i32s(&mut r, INPUTS * BUCKETS, "the PSQT weights")?;
        let mut stacks = Vec::with_capacity(BUCKETS);
        for s in 0..BUCKETS {
            let name = |part: &str| format!("layer stack {s}'s {part}");
            hash(&mut r, &name("layers'"), STACK_HASH)?;
            let fc0 = (
                i32s(&mut r, FC0_OUT, &name("fc_0 biases"))?,
                i8s(&mut r, FC0_OUT * HALF, &name("fc_0 weights"))?,
            );
            let fc1 = (
                i32s(&mut r, FC1_OUT, &name("fc_1 biases"))?,
                i8s(&mut r, FC1_OUT * FC1_IN, &name("fc_1 weights"))?,
            );
            let fc2 = (
                i32s(&mut r, 1, &name("fc_2 bias"))?[0],
                i8s(&mut r, FC2_IN, &name("fc_2 weights"))?,
            );
            stacks.push(LayerStack::new(fc0, fc1, fc2));
        }
        if r.remaining() > 0 {
            return Err(SfNetError::Trailing {
                extra: r.remaining(),
            });
        }
        Ok(StockfishNet {
            description,
            ft_bias,
            ft_weights,
            psqt_weights,
            stacks,
        })
    }

    pub fn to_bytes(&self) -> Result<Vec<u8>, SfNetError> {
        let len = u32::try_from(self.description.len())
            .map_err(|_| SfNetError::Description(self.description.len()))?;
        let mut out = Vec::with_capacity(BYTES_WITHOUT_DESCRIPTION + self.description.len());
        out.extend(VERSION.to_le_bytes());
        out.extend(FILE_HASH.to_le_bytes());
        out.extend(len.to_le_bytes());
        out.extend(&self.description);
        out.extend(TRANSFORMER_HASH.to_le_bytes());
        out.extend(self.ft_bias.iter().flat_map(|v| v.to_le_bytes()));
        out.extend(self.ft_weights.iter().flat_map(|v| v.to_le_bytes()));
        out.extend(self.psqt_weights.iter().flat_map(|v| v.to_le_bytes()));
        for s in &self.stacks {
            out.extend(STACK_HASH.to_le_bytes());
            for layer in [&s.fc0, &s.fc1, &s.fc2] {
                out.extend(layer.bias.iter().flat_map(|v| v.to_le_bytes()));
                out.extend(layer.weights.iter().map(|&v| v as u8));
            }
        }
        Ok(out)
    }

    /// The accumulator of `perspective`: biases plus the weights of its active features
    /// (16-bit lanes wrap, as Stockfish's SIMD adds do), and its 8 PSQT sums.
    fn accumulate(
        &self,
        board: &Board,
        perspective: Color,
    ) -> Result<(Vec<i16>, [i32; BUCKETS]), FeatureError> {
        let mut features = Vec::with_capacity(32);
        HalfKaV2Hm::active(board, perspective, &mut features)?;
        let mut acc = self.ft_bias.clone();
        for &f in &features {
            let f = f as usize;
            let row = &self.ft_weights[f * HALF..(f + 1) * HALF];
            for (a, &w) in acc.iter_mut().zip(row) {
                *a = a.wrapping_add(w);
            }
        }
        let mut psqt = [0i32; BUCKETS];
        self.update_psqt(&mut psqt, &[], &features);
        Ok((acc, psqt))
    }

    /// Adds the PSQT rows of `added` to `psqt` and takes those of `removed` away.
    pub fn update_psqt(&self, psqt: &mut [i32], removed: &[u32], added: &[u32]) {
        let row = |f: u32| &self.psqt_weights[f as usize * BUCKETS..][..BUCKETS];
        for &f in removed {
            for (p, &w) in psqt.iter_mut().zip(row(f)) {
                *p = p.wrapping_sub(w);
            }
        }
        for &f in added {
            for (p, &w) in psqt.iter_mut().zip(row(f)) {
                *p = p.wrapping_add(w);
            }
        }
    }

    /// Every bucket's PSQT and positional output for the side to move, in network units (as
    /// Stockfish's `trace_evaluate` computes them before dividing by [`OUTPUT_SCALE`]), from
    /// a full refresh of both accumulators.
    pub fn evaluate(&self, board: &Board, turn: Color) -> Result<SfEvaluation, SfEvalError> {
        let bucket = bucket_of(board)?;
        let (us, us_psqt) = self.accumulate(board, turn)?;
        let (them, them_psqt) = self.accumulate(board, !turn)?;
        let input = transform(&us, &them);
        let mut out = SfEvaluation {
            bucket,
            psqt: [0; BUCKETS],
            positional: [0; BUCKETS],
        };
        for b in 0..BUCKETS {
            out.psqt[b] = (us_psqt[b].wrapping_sub(them_psqt[b])) / 2;
            out.positional[b] = propagate(Kernel::Scalar, &self.stacks[b], &input);
        }
        Ok(out)
    }

    /// Stockfish's `NNUE::evaluate(pos, false)` from the two perspectives' active feature
    /// lists (side to move first): internal units, side to move.
    pub fn evaluate_features(&self, kernel: Kernel, stm: &[u32], nstm: &[u32]) -> i32 {
        let acc = |features: &[u32]| {
            let mut acc = self.ft_bias.clone();
            kernel.update(&mut acc, &self.ft_bias, &self.ft_weights, &[], features);
            let mut psqt = [0i32; BUCKETS];
            self.update_psqt(&mut psqt, &[], features);
            (acc, psqt)
        };
        let ((us, us_psqt), (them, them_psqt)) = (acc(stm), acc(nstm));
        self.evaluate_accumulated(kernel, stm.len(), &us, &them, &us_psqt, &them_psqt)
    }

    /// Stockfish's `NNUE::evaluate(pos, false)` from accumulators kept up to date elsewhere
    /// (the search's): internal units, side to move. `pieces` selects the bucket.
    pub fn evaluate_accumulated(
        &self,
        kernel: Kernel,
        pieces: usize,
        us: &[i16],
        them: &[i16],
        us_psqt: &[i32],
        them_psqt: &[i32],
    ) -> i32 {
        // Clamped: a search only meets legal positions (2 to 32 pieces).
        let bucket = (pieces.max(1) - 1).min(4 * BUCKETS - 1) / 4;
        let psqt = (us_psqt[bucket].wrapping_sub(them_psqt[bucket])) / 2;
        let positional = propagate(kernel, &self.stacks[bucket], &transform(us, them));
        (psqt + positional) / OUTPUT_SCALE
    }
}

/// The bucket of a board: `(pieces − 1) / 4`, for 1 to 32 pieces.
fn bucket_of(board: &Board) -> Result<usize, SfEvalError> {
    let pieces = board.occupied().count();
    let bucket = pieces.saturating_sub(1) / 4;
    if pieces == 0 || bucket >= BUCKETS {
        return Err(SfEvalError::Pieces(pieces));
    }
    Ok(bucket)
}

/// The feature transformer's output: per perspective, side to move first, the first half
/// of the accumulator times the second, each clamped to 0..=127, over 128.
fn transform(us: &[i16], them: &[i16]) -> [u8; HALF] {
    let mut input = [0u8; HALF];
    for (p, acc) in [us, them].into_iter().enumerate() {
        let (lo, hi) = acc.split_at(HALF / 2);
        for (j, (&a, &b)) in lo.iter().zip(hi).enumerate() {
            let (a, b) = (a.clamp(0, 127) as i32, b.clamp(0, 127) as i32);
            input[p * HALF / 2 + j] = (a * b / 128) as u8;
        }
    }
    input
}

/// Why a position has no evaluation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SfEvalError {
    #[error(transparent)]
    Features(#[from] FeatureError),
    #[error("{0} pieces on the board: Stockfish's buckets take 1 to 32")]
    Pieces(usize),
}

/// One layer stack over the transformer's output: network units, side to move. Every
/// activation is at most 127, as `Kernel::dense` requires.
fn propagate(kernel: Kernel, stack: &LayerStack, input: &[u8; HALF]) -> i32 {
    let mut fc0 = [0i32; FC0_OUT];
    kernel.dense(input, &stack.fc0, &stack.quads[0], &mut fc0);
    // Squared and plain clipped ReLU of outputs 0..15, side by side; 30 and 31 stay zero.
    let mut hidden = [0u8; FC1_IN];
    for i in 0..FC0_OUT - 1 {
        let x = fc0[i] as i64;
        hidden[i] = ((x * x) >> (2 * WEIGHT_SCALE_BITS + 7)).min(127) as u8;
        hidden[FC0_OUT - 1 + i] = (fc0[i] >> WEIGHT_SCALE_BITS).clamp(0, 127) as u8;
    }
    let mut fc1 = [0i32; FC1_OUT];
    kernel.dense(&hidden, &stack.fc1, &stack.quads[1], &mut fc1);
    let fc1 = fc1.map(|x| (x >> WEIGHT_SCALE_BITS).clamp(0, 127) as u8);
    let mut fc2 = [0i32; 1];
    kernel.dense(&fc1, &stack.fc2, &[], &mut fc2);
    // fc_0's last output: 1.0 is 127 << 6 there and 600 · OUTPUT_SCALE at the output.
    // In 32 bits as Stockfish computes it (its `int` product wraps for |x| > 223,696).
    let skip = fc0[FC0_OUT - 1].wrapping_mul(600 * OUTPUT_SCALE) / (127 * (1 << WEIGHT_SCALE_BITS));
    fc2[0].wrapping_add(skip)
}

/// One position's evaluation by a [`StockfishNet`], every bucket, side to move's view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SfEvaluation {
    /// The bucket the piece count selects.
    pub bucket: usize,
    /// Network units (internal units × 16).
    pub psqt: [i32; BUCKETS],
    pub positional: [i32; BUCKETS],
}

impl SfEvaluation {
    /// Stockfish's `NNUE::evaluate(pos, false)`: internal units, side to move.
    pub fn side_to_move(&self) -> i32 {
        (self.psqt[self.bucket] + self.positional[self.bucket]) / OUTPUT_SCALE
    }

    /// [`SfEvaluation::side_to_move`] from White's side, as `eval` prints it.
    pub fn white(&self, turn: Color) -> i32 {
        match turn {
            Color::White => self.side_to_move(),
            Color::Black => -self.side_to_move(),
        }
    }

    /// Bucket `b`'s PSQT and positional parts in internal units, side to move, as the table
    /// of Stockfish's `eval` shows them (each divided by 16 on its own).
    pub fn trace(&self, b: usize) -> (i32, i32) {
        (
            self.psqt[b] / OUTPUT_SCALE,
            self.positional[b] / OUTPUT_SCALE,
        )
    }
}

/// Internal units as Stockfish's `eval` table prints them: a sign and `%6.2f` pawns.
pub fn format_table_cp(v: i32) -> String {
    let sign = match v.signum() {
        -1 => '-',
        1 => '+',
        _ => ' ',
    };
    format!("{sign}{:6.2}", v.unsigned_abs() as f64 / PAWN as f64)
}

/// Internal units as Stockfish's "NNUE evaluation" line prints them: `+0.28`.
pub fn format_line_cp(v: i32) -> String {
    format!("{:+.2}", v as f64 / PAWN as f64)
}

/// A net of this architecture with small pseudo-random values (a fixed LCG: the same seed
/// gives the same net), for tests and benchmarks.
pub fn random_net(seed: u64) -> StockfishNet {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move |span: i64| -> i64 {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((state >> 33) as i64 % (2 * span + 1)) - span
    };
    let stacks = (0..BUCKETS)
        .map(|_| {
            let fc0 = (
                (0..FC0_OUT).map(|_| next(3000) as i32).collect(),
                (0..FC0_OUT * HALF).map(|_| next(20) as i8).collect(),
            );
            let fc1 = (
                (0..FC1_OUT).map(|_| next(3000) as i32).collect(),
                (0..FC1_OUT * FC1_IN).map(|_| next(60) as i8).collect(),
            );
            let fc2 = (
                next(3000) as i32,
                (0..FC2_IN).map(|_| next(100) as i8).collect(),
            );
            LayerStack::new(fc0, fc1, fc2)
        })
        .collect();
    StockfishNet {
        description: b"a test net".to_vec(),
        ft_bias: (0..HALF).map(|_| next(40) as i16).collect(),
        ft_weights: (0..INPUTS * HALF)
            .map(|_| next(30) as i16)
            .collect::<Vec<_>>()
            .into(),
        psqt_weights: (0..INPUTS * BUCKETS).map(|_| next(5000) as i32).collect(),
        stacks,
    }
}

#[cfg(test)]
mod tests;
