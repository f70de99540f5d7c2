//! Nets described by a [`NetSpec`] (issue 37): king-bucketed inputs, SCReLU or pairwise
//! transformers, output buckets, hidden layers per bucket: whatever the description says,
//! evaluated with the same incremental accumulators as the fixed shapes in [`crate::nnue`].
//! Today's fixed shapes (the presets) keep their own format and kernels there, bit for bit.
//!
//! # Arithmetic
//!
//! The transformer is integer: `ft.weight` and `ft.bias` are i16 with one factor `QA` (1.0 is
//! stored as `QA`), summed into i16 accumulators move by move. Its activation is integer too:
//! `clamp(a, 0, QA)` (CReLU, scale `QA`), its square (SCReLU) or the product of the two halves'
//! clamps (pairwise, scale `QA²`). The first layer after it multiplies those integers by its
//! weights exactly (i64 sums) when they are integers, then divides once by both scales; every
//! later step is `f64` in a fixed order, so an evaluation is the same number on every machine.
//! The output times `eval_scale`, rounded, is the score in the lake's unit (Stockfish internal
//! units), from the side to move's point of view.
//!
//! # File layout (little-endian; the `.nnue` magic of [`crate::nnue`], version 2)
//!
//! ```text
//! magic        8 bytes  "LKFNNUE\n"
//! version      u32      2
//! description  u32 length, UTF-8 JSON of the NetSpec
//! comment      u32 length, UTF-8 (run, checkpoint, ...)
//! tensors      u32 count, then per tensor, in NetSpec::tensors() order without the factoriser
//!              (merged into ft.weight when quantized): u16 length + name, u8 type (1 i8,
//!              2 i16, 4 i32, 5 f32), u8 rank, rank × u32 dims, then the values
//! ```
//!
//! Each tensor's type is the one the description's quantization gives it; the reader checks
//! every name, type and shape against the description and refuses trailing bytes.

use lakefish_schemas::netspec::{
    Dtype, Inputs, LayerActivation, NetSpec, OutputBuckets, TransformerActivation,
};
use shakmaty::{Board, Color, Square};

use crate::bytes::ByteReader;
use crate::features::king_buckets::KingBuckets;
use crate::features::{BoardDelta, FeatureDelta, FeatureError, FeatureSet, FeatureSetKind};
use crate::nnue::{MAGIC, NnueError};
use crate::simd::{AlignedI16, Kernel};

/// The `.nnue` version of described nets.
pub const SPEC_VERSION: u32 = 2;

/// The input family of a described net, as the engine computes its features.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputFamily {
    /// A family the fixed feature sets implement (piece-square, HalfKP, HalfKAv2_hm).
    Preset(FeatureSetKind),
    /// Piece-square inputs per king bucket, with the layout the description gives.
    KingBuckets(Box<KingBuckets>),
    /// Threat inputs (`features::threats`): followed move by move with both boards at hand
    /// ([`InputFamily::follow`]).
    Threats,
    /// The thesis's axis and mobility inputs (`features::thesis`), followed like threats.
    Axes,
    Mobility,
    PairwiseAxes,
    /// Families side by side: each part's indices start where the one before ends.
    Combined(Vec<(u32, InputFamily)>),
}

impl InputFamily {
    pub fn of(inputs: &Inputs) -> Result<InputFamily, NnueError> {
        Ok(match inputs {
            Inputs::PieceSquare {} => InputFamily::Preset(FeatureSetKind::All768),
            Inputs::Halfkp {} => InputFamily::Preset(FeatureSetKind::HalfKp),
            Inputs::HalfkaV2Hm {} => InputFamily::Preset(FeatureSetKind::HalfKaV2Hm),
            Inputs::KingBuckets { layout, mirror, .. } => InputFamily::KingBuckets(Box::new(
                KingBuckets::new(layout, *mirror)
                    .map_err(|e| NnueError::Header(format!("inputs.layout: {e}")))?,
            )),
            Inputs::Threats {} => InputFamily::Threats,
            Inputs::Axes {} => InputFamily::Axes,
            Inputs::Mobility {} => InputFamily::Mobility,
            Inputs::PairwiseAxes {} => InputFamily::PairwiseAxes,
            Inputs::Combined { .. } => InputFamily::Combined(
                inputs
                    .parts()
                    .into_iter()
                    .map(|(at, p)| Ok((at as u32, InputFamily::of(p)?)))
                    .collect::<Result<_, NnueError>>()?,
            ),
        })
    }

    pub fn inputs(&self) -> usize {
        match self {
            InputFamily::Preset(k) => k.inputs(),
            InputFamily::KingBuckets(b) => b.inputs(),
            InputFamily::Threats => lakefish_schemas::netspec::THREAT_INPUTS,
            InputFamily::Axes => lakefish_schemas::netspec::AXES_INPUTS,
            InputFamily::Mobility => lakefish_schemas::netspec::MOBILITY_INPUTS,
            InputFamily::PairwiseAxes => lakefish_schemas::netspec::PAIRWISE_AXES_INPUTS,
            InputFamily::Combined(parts) => parts.iter().map(|(_, p)| p.inputs()).sum(),
        }
    }

    pub fn max_active(&self) -> usize {
        match self {
            InputFamily::Preset(k) => k.max_active(),
            InputFamily::KingBuckets(b) => b.max_active(),
            InputFamily::Threats => lakefish_schemas::netspec::MAX_THREATS,
            InputFamily::Axes | InputFamily::PairwiseAxes => 4 * 32,
            InputFamily::Mobility => 32,
            InputFamily::Combined(parts) => parts.iter().map(|(_, p)| p.max_active()).sum(),
        }
    }

    /// Whether the engine follows moves with both boards at hand ([`InputFamily::follow`]):
    /// families whose features change when men elsewhere move (threats), and combinations.
    /// The others update from the move alone ([`Incremental`]).
    pub fn needs_boards(&self) -> bool {
        matches!(
            self,
            InputFamily::Threats
                | InputFamily::Axes
                | InputFamily::Mobility
                | InputFamily::Combined(_)
        )
    }

    /// Appends the features `delta` (which turned `parent` into `child`) switches off and on
    /// for `perspective`, each plus `offset`; `false` when the perspective needs a refresh
    /// instead (its king changed bucket, or crossed the d/e line under threats). Threats:
    /// the threats of the men on `affected` (`threats::affected_attackers`) in the parent
    /// off, in the child on; a pair in both is in both lists.
    #[allow(clippy::too_many_arguments)]
    pub fn follow(
        &self,
        perspective: Color,
        parent: &Board,
        child: &Board,
        delta: &BoardDelta,
        affected: shakmaty::Bitboard,
        offset: u32,
        removed: &mut Vec<u32>,
        added: &mut Vec<u32>,
    ) -> bool {
        let king = || child.king_of(perspective).unwrap_or(Square::A1);
        let from_delta = |d: FeatureDelta, removed: &mut Vec<u32>, added: &mut Vec<u32>| {
            removed.extend(d.removed().iter().map(|f| f + offset));
            added.extend(d.added().iter().map(|f| f + offset));
        };
        match self {
            InputFamily::Preset(k) => {
                if k.needs_refresh_for(perspective, delta) {
                    return false;
                }
                from_delta(k.changed(perspective, king(), delta), removed, added);
            }
            InputFamily::KingBuckets(b) => {
                if b.needs_refresh_for(perspective, delta) {
                    return false;
                }
                from_delta(b.changed(perspective, king(), delta), removed, added);
            }
            InputFamily::Threats => {
                use crate::features::threats;
                if delta
                    .king_move(perspective)
                    .is_some_and(|(from, to)| threats::orientation_changes(from, to))
                {
                    return false;
                }
                for (board, out) in [(parent, &mut *removed), (child, &mut *added)] {
                    let start = out.len();
                    threats::threats_of(board, perspective, affected, out)
                        .expect("legal positions have both kings");
                    out[start..].iter_mut().for_each(|f| *f += offset);
                }
            }
            InputFamily::Axes => {
                // Local: only the men the move took away or put down change lines.
                for (list, men) in [
                    (&mut *removed, delta.removed()),
                    (&mut *added, delta.added()),
                ] {
                    for &(piece, sq) in men {
                        let f = crate::features::thesis::axes_of_man(perspective, piece, sq);
                        list.extend(f.iter().map(|x| x + offset));
                    }
                }
            }
            InputFamily::Mobility => {
                // A man's count changes only if it attacks a changed square before or after.
                for (board, out) in [(parent, &mut *removed), (child, &mut *added)] {
                    let start = out.len();
                    crate::features::thesis::mobility_of(board, perspective, affected, out);
                    out[start..].iter_mut().for_each(|f| *f += offset);
                }
            }
            InputFamily::PairwiseAxes => {
                use crate::features::thesis;
                let changed = delta
                    .removed()
                    .iter()
                    .chain(delta.added())
                    .fold(shakmaty::Bitboard::EMPTY, |b, &(_, sq)| {
                        b | shakmaty::Bitboard::from(sq)
                    });
                let men = thesis::line_neighbours(parent, child, changed);
                for (board, out) in [(parent, &mut *removed), (child, &mut *added)] {
                    let start = out.len();
                    thesis::pairwise_axes_of(board, perspective, men, out);
                    out[start..].iter_mut().for_each(|f| *f += offset);
                }
            }
            InputFamily::Combined(parts) => {
                for (at, p) in parts {
                    let followed = p.follow(
                        perspective,
                        parent,
                        child,
                        delta,
                        affected,
                        offset + at,
                        removed,
                        added,
                    );
                    if !followed {
                        return false;
                    }
                }
            }
        }
        true
    }

    /// Appends the features of `board` seen from `perspective` to `out`.
    pub fn active(
        &self,
        board: &Board,
        perspective: Color,
        out: &mut Vec<u32>,
    ) -> Result<(), FeatureError> {
        match self {
            InputFamily::Preset(k) => k.active_features(board, perspective, out),
            InputFamily::KingBuckets(b) => b.active(board, perspective, out),
            InputFamily::Threats => {
                crate::features::threats::threat_features_into(board, perspective, out)
            }
            InputFamily::Axes => crate::features::thesis::axes_into(board, perspective, out),
            InputFamily::Mobility => {
                crate::features::thesis::mobility_into(board, perspective, out)
            }
            InputFamily::PairwiseAxes => {
                crate::features::thesis::pairwise_axes_into(board, perspective, out)
            }
            InputFamily::Combined(parts) => {
                for (at, p) in parts {
                    let start = out.len();
                    p.active(board, perspective, out)?;
                    out[start..].iter_mut().for_each(|f| *f += at);
                }
                Ok(())
            }
        }
    }

    /// How the family reads in `describe`.
    fn describe(&self, inputs: &Inputs) -> String {
        match (self, inputs) {
            (InputFamily::Preset(k), _) => k.name().to_string(),
            (InputFamily::KingBuckets(b), _) => format!(
                "768x{} king buckets{}",
                b.inputs() / 768,
                match inputs {
                    Inputs::KingBuckets { mirror: true, .. } => " (mirrored)",
                    _ => "",
                }
            ),
            (InputFamily::Threats, _) => "threats".to_string(),
            (InputFamily::Axes, _) => "axes".to_string(),
            (InputFamily::Mobility, _) => "mobility".to_string(),
            (InputFamily::PairwiseAxes, _) => "pairwise axes".to_string(),
            (InputFamily::Combined(parts), Inputs::Combined { parts: described }) => parts
                .iter()
                .zip(described)
                .map(|((_, p), d)| p.describe(d))
                .collect::<Vec<_>>()
                .join(" + "),
            (InputFamily::Combined(_), _) => unreachable!("built from its description"),
        }
    }
}

/// How a feature family follows a move: what the engine's accumulator stack asks of the
/// fixed feature sets (types, resolved at compile time) and of layouts given at run time.
pub trait Incremental {
    /// Whether indices depend on the perspective's king square.
    fn king_relative(&self) -> bool;
    /// Whether the perspective's accumulator must be rebuilt after `delta`.
    fn needs_refresh_for(&self, perspective: Color, delta: &BoardDelta) -> bool;
    /// Features `delta` switches off and on, valid when no refresh is needed.
    fn changed(&self, perspective: Color, king: Square, delta: &BoardDelta) -> FeatureDelta;
}

/// A fixed feature set as an [`Incremental`] (no data: the type is the set).
pub struct Fixed<S>(std::marker::PhantomData<S>);

impl<S> Default for Fixed<S> {
    fn default() -> Self {
        Fixed(std::marker::PhantomData)
    }
}

impl<S: FeatureSet> Incremental for Fixed<S> {
    #[inline(always)]
    fn king_relative(&self) -> bool {
        S::KING_RELATIVE
    }

    #[inline(always)]
    fn needs_refresh_for(&self, perspective: Color, delta: &BoardDelta) -> bool {
        S::needs_refresh_for(perspective, delta)
    }

    #[inline(always)]
    fn changed(&self, perspective: Color, king: Square, delta: &BoardDelta) -> FeatureDelta {
        S::changed(perspective, king, delta)
    }
}

impl Incremental for KingBuckets {
    #[inline(always)]
    fn king_relative(&self) -> bool {
        true
    }

    #[inline(always)]
    fn needs_refresh_for(&self, perspective: Color, delta: &BoardDelta) -> bool {
        KingBuckets::needs_refresh_for(self, perspective, delta)
    }

    #[inline(always)]
    fn changed(&self, perspective: Color, king: Square, delta: &BoardDelta) -> FeatureDelta {
        KingBuckets::changed(self, perspective, king, delta)
    }
}

/// A tensor's values as stored.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    I8(Vec<i8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    F32(Vec<f32>),
}

impl Values {
    pub fn len(&self) -> usize {
        match self {
            Values::I8(v) => v.len(),
            Values::I16(v) => v.len(),
            Values::I32(v) => v.len(),
            Values::F32(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn dtype(&self) -> Dtype {
        match self {
            Values::I8(_) => Dtype::I8,
            Values::I16(_) => Dtype::I16,
            Values::I32(_) => Dtype::I32,
            Values::F32(_) => Dtype::F32,
        }
    }

    /// Value `i` as stored (a float for f32, the integer otherwise).
    #[inline]
    fn raw(&self, i: usize) -> f64 {
        match self {
            Values::I8(v) => v[i] as f64,
            Values::I16(v) => v[i] as f64,
            Values::I32(v) => v[i] as f64,
            Values::F32(v) => v[i] as f64,
        }
    }

    /// Value `i` as an integer, for integer types.
    #[inline]
    fn int(&self, i: usize) -> i64 {
        match self {
            Values::I8(v) => v[i] as i64,
            Values::I16(v) => v[i] as i64,
            Values::I32(v) => v[i] as i64,
            Values::F32(_) => unreachable!("only integer tensors are summed as integers"),
        }
    }

    fn code(&self) -> u8 {
        dtype_code(self.dtype())
    }

    /// Appends the values, little-endian.
    pub fn write_le(&self, out: &mut Vec<u8>) {
        match self {
            Values::I8(v) => out.extend(v.iter().map(|&x| x as u8)),
            Values::I16(v) => v
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            Values::I32(v) => v
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            Values::F32(v) => v
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        }
    }

    /// Values of `dtype` from little-endian bytes (a partial last value is dropped).
    pub fn read_le(dtype: Dtype, data: &[u8]) -> Values {
        match dtype {
            Dtype::I8 => Values::I8(data.iter().map(|&b| b as i8).collect()),
            Dtype::I16 => Values::I16(
                data.chunks_exact(2)
                    .map(|c| i16::from_le_bytes([c[0], c[1]]))
                    .collect(),
            ),
            Dtype::I32 => Values::I32(
                data.chunks_exact(4)
                    .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
            Dtype::F32 => Values::F32(
                data.chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
        }
    }
}

pub(crate) fn dtype_code(d: Dtype) -> u8 {
    match d {
        Dtype::I8 => 1,
        Dtype::I16 => 2,
        Dtype::I32 => 4,
        Dtype::F32 => 5,
    }
}

/// One dense layer after the transformer (a hidden layer or the output): `[rows, fan_in]`
/// weights, rows `bucket · width ..` when it has one set per output bucket.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecLayer {
    pub name: String,
    pub fan_in: usize,
    /// Outputs per bucket.
    pub width: usize,
    pub per_bucket: bool,
    /// `None` for the output layer.
    pub activation: Option<LayerActivation>,
    pub weight: Values,
    /// 1.0 is stored as this.
    pub weight_factor: f64,
    pub bias: Values,
    pub bias_factor: f64,
}

/// A quantized net described by a NetSpec, ready to evaluate.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecNet {
    pub spec: NetSpec,
    pub family: InputFamily,
    pub comment: String,
    /// The transformer's width per perspective (before a pairwise product halves it).
    pub width: usize,
    /// The transformer's factor: 1.0 is stored as this.
    pub qa: i32,
    pub ft_bias: Vec<i16>,
    /// `[inputs, width]`: the row of feature `f` starts at `f · width`.
    pub ft_weights: AlignedI16,
    /// Hidden layers, then the output.
    pub layers: Vec<SpecLayer>,
    /// When the transformer is SCReLU with QA 255 and the output layer follows it with
    /// weights within ±127: those weights as i16 for [`Kernel::screlu_dot`] (else empty).
    output16: Vec<i16>,
}

/// The tensors of the quantized file, in order ([`NetSpec::file_tensors`]).
pub(crate) fn file_tensors(spec: &NetSpec) -> Vec<(String, Vec<usize>)> {
    spec.file_tensors()
        .into_iter()
        .map(|t| (t.name, t.shape))
        .collect()
}

/// The transformer's rows in feature order from the file's `ft.weight` (every row but the
/// threats') and `ft.threats` (`threats`: their first row, count and values).
fn merge_threat_rows(other: Vec<i16>, threats: (usize, usize, &Values), width: usize) -> Vec<i16> {
    let (at, rows, values) = threats;
    let mut out = Vec::with_capacity(other.len() + rows * width);
    out.extend_from_slice(&other[..at * width]);
    out.extend((0..rows * width).map(|i| values.int(i) as i16));
    out.extend_from_slice(&other[at * width..]);
    out
}

/// Checks that `tensors` are exactly `spec`'s file tensors, in order, each of the type and
/// length the description gives it, naming the first that is not; their shapes.
pub(crate) fn check_tensors<'a>(
    spec: &NetSpec,
    tensors: impl ExactSizeIterator<Item = (&'a str, &'a Values)>,
) -> Result<Vec<(String, Vec<usize>)>, NnueError> {
    let want = file_tensors(spec);
    if tensors.len() != want.len() {
        return Err(NnueError::Header(format!(
            "{} tensors, the description has {}",
            tensors.len(),
            want.len()
        )));
    }
    for ((name, shape), (got, values)) in want.iter().zip(tensors) {
        let dtype = spec.default_quant(name).expect("described").dtype;
        let len: usize = shape.iter().product();
        if got != name || values.dtype() != dtype || values.len() != len {
            return Err(NnueError::Tensor {
                name: name.clone(),
                reason: format!(
                    "{got} of {:?} × {}, the description needs {name} of {dtype:?} × {len}",
                    values.dtype(),
                    values.len()
                ),
            });
        }
    }
    Ok(want)
}

impl SpecNet {
    /// Checks that the engine can evaluate `spec` as described, naming the field if not.
    fn check_spec(spec: &NetSpec) -> Result<(InputFamily, i32), NnueError> {
        spec.validate()
            .and_then(|()| spec.engine_limits())
            .map_err(|e| NnueError::Header(e.to_string()))?;
        let qa = spec
            .default_quant("ft.weight")
            .expect("a transformer")
            .factor as i32;
        Ok((InputFamily::of(&spec.inputs)?, qa))
    }

    /// Assembles a net from its tensors (named as in the file), checking each against the
    /// description.
    pub fn new(
        spec: NetSpec,
        comment: String,
        mut tensors: Vec<(String, Values)>,
    ) -> Result<SpecNet, NnueError> {
        let (family, qa) = Self::check_spec(&spec)?;
        check_tensors(&spec, tensors.iter().map(|(n, v)| (n.as_str(), v)))?;
        let mut take = || tensors.remove(0).1;
        let Values::I16(mut ft_weights) = take() else {
            unreachable!("checked above: the transformer is i16");
        };
        if let Some((at, rows)) = spec.inputs.threat_rows() {
            let threats = take();
            let width = spec.transformer.width as usize;
            ft_weights = merge_threat_rows(ft_weights, (at, rows, &threats), width);
        }
        let Values::I16(ft_bias) = take() else {
            unreachable!("checked above: the transformer is i16");
        };
        let buckets = spec.output_buckets.count() as usize;
        let mut fan_in = 2 * spec.transformer_output() as usize;
        let mut layers = Vec::new();
        let hidden = spec
            .layers
            .iter()
            .map(|l| (l.width as usize, l.per_bucket, Some(l.activation)));
        let out = std::iter::once((1, buckets > 1, None));
        for (i, (width, per_bucket, activation)) in hidden.chain(out).enumerate() {
            let name = if activation.is_some() {
                format!("l{}", i + 1)
            } else {
                "out".to_string()
            };
            let quant = |t: &str| {
                spec.default_quant(&format!("{name}.{t}"))
                    .expect("described")
            };
            let (weight, bias) = (take(), take());
            layers.push(SpecLayer {
                fan_in,
                width,
                per_bucket,
                activation,
                weight,
                weight_factor: quant("weight").factor,
                bias,
                bias_factor: quant("bias").factor,
                name,
            });
            fan_in = width;
        }
        let mut net = SpecNet {
            spec,
            family,
            comment,
            width: 0,
            qa,
            ft_bias,
            ft_weights: ft_weights.into(),
            layers,
            output16: Vec::new(),
        };
        net.width = net.spec.transformer.width as usize;
        let first = &net.layers[0];
        // The kernel squares activations of at most 255 and multiplies them by weights in
        // i16 lanes: weights within ±127 (any i8; i16 ones that stay there, as trained
        // SCReLU nets' do).
        let narrow: Option<Vec<i16>> = match &first.weight {
            Values::I8(w) => Some(w.iter().map(|&x| x as i16).collect()),
            Values::I16(w) if w.iter().all(|x| x.unsigned_abs() <= 127) => Some(w.clone()),
            _ => None,
        };
        if net.spec.transformer.activation == TransformerActivation::Screlu
            && qa == 255
            && net.layers.len() == 1
            && net.width <= crate::nnue::MAX_SCRELU_WIDTH
            && let Some(w) = narrow
        {
            net.output16 = w;
        }
        Ok(net)
    }

    /// Whether `bytes` claim to be a described net (the magic and version 2), so a reader
    /// knows which format's errors to report.
    pub fn sniff(bytes: &[u8]) -> bool {
        bytes.starts_with(MAGIC) && bytes.get(8..12) == Some(&SPEC_VERSION.to_le_bytes()[..])
    }

    /// The file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + 2 * self.ft_weights.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&SPEC_VERSION.to_le_bytes());
        let spec = serde_json::to_string(&self.spec).expect("a NetSpec serializes");
        for text in [spec.as_str(), self.comment.as_str()] {
            out.extend_from_slice(&(text.len() as u32).to_le_bytes());
            out.extend_from_slice(text.as_bytes());
        }
        let transformer = self.transformer_values();
        let mut values: Vec<&Values> = transformer.iter().collect();
        for l in &self.layers {
            values.push(&l.weight);
            values.push(&l.bias);
        }
        let specs = file_tensors(&self.spec);
        out.extend_from_slice(&(specs.len() as u32).to_le_bytes());
        for ((name, shape), v) in specs.iter().zip(values) {
            out.extend_from_slice(&(name.len() as u16).to_le_bytes());
            out.extend_from_slice(name.as_bytes());
            out.push(v.code());
            out.push(shape.len() as u8);
            for d in shape {
                out.extend_from_slice(&(*d as u32).to_le_bytes());
            }
            v.write_le(&mut out);
        }
        out
    }

    /// Reads a version-2 `.nnue` file, refusing anything that is not exactly one net as its
    /// description says.
    pub fn from_bytes(bytes: &[u8]) -> Result<SpecNet, NnueError> {
        let mut r = ByteReader::new(bytes);
        let magic = r.take(8, "the magic bytes")?;
        if magic != MAGIC {
            return Err(NnueError::Magic(magic.to_vec()));
        }
        let version = r.u32("the version")?;
        if version != SPEC_VERSION {
            return Err(NnueError::Version { found: version });
        }
        let mut text = |what: &str| -> Result<String, NnueError> {
            let len = r.u32(&format!("{what}'s length"))? as usize;
            String::from_utf8(r.take(len, what)?.to_vec())
                .map_err(|_| NnueError::Header(format!("{what} is not UTF-8")))
        };
        let spec_text = text("the net's description")?;
        let comment = text("the comment")?;
        let spec = NetSpec::parse(&spec_text)
            .map_err(|e| NnueError::Header(format!("the net's description: {e}")))?;
        Self::check_spec(&spec)?;
        let want = file_tensors(&spec);
        let count = r.u32("the tensor count")? as usize;
        if count != want.len() {
            return Err(NnueError::Header(format!(
                "{count} tensors, the description has {}",
                want.len()
            )));
        }
        let mut tensors = Vec::with_capacity(count);
        for (name, shape) in &want {
            let at = r.at;
            let what = format!("tensor {name}");
            let len = r.take(2, &what)?;
            let len = u16::from_le_bytes([len[0], len[1]]) as usize;
            let got = String::from_utf8_lossy(r.take(len, &what)?).into_owned();
            if &got != name {
                return Err(NnueError::Tensor {
                    name: name.clone(),
                    reason: format!("the file has {got:?} in its place (byte {at})"),
                });
            }
            let dtype = spec.default_quant(name).expect("described").dtype;
            let code = r.take(1, &what)?[0];
            let rank = r.take(1, &what)?[0] as usize;
            let dims = (0..rank)
                .map(|_| r.u32(&what).map(|d| d as usize))
                .collect::<Result<Vec<_>, _>>()?;
            if code != dtype_code(dtype) || &dims != shape {
                return Err(NnueError::Tensor {
                    name: name.clone(),
                    reason: format!(
                        "type {code} shape {dims:?}, the description needs type {} shape {shape:?}",
                        dtype_code(dtype)
                    ),
                });
            }
            let n: usize = shape.iter().product();
            let data = r.take(n * dtype.bytes(), &what)?;
            tensors.push((name.clone(), Values::read_le(dtype, data)));
        }
        if r.remaining() != 0 {
            return Err(NnueError::Trailing(r.remaining()));
        }
        SpecNet::new(spec, comment, tensors)
    }

    /// The transformer's tensors as in the file: `ft.weight`, (`ft.threats`,) `ft.bias`.
    fn transformer_values(&self) -> Vec<Values> {
        let w = self.width;
        let all = &self.ft_weights[..];
        let mut out = match self.spec.inputs.threat_rows() {
            None => vec![Values::I16(all.to_vec())],
            Some((at, rows)) => {
                let (start, end) = (at * w, (at + rows) * w);
                let other = [&all[..start], &all[end..]].concat();
                let threats = &all[start..end];
                let dtype = self
                    .spec
                    .default_quant(lakefish_schemas::netspec::THREAT_TENSOR)
                    .expect("a net with threats")
                    .dtype;
                vec![
                    Values::I16(other),
                    match dtype {
                        // Read from i8 (or checked to fit when assembled): no value is cut.
                        Dtype::I8 => Values::I8(threats.iter().map(|&x| x as i8).collect()),
                        _ => Values::I16(threats.to_vec()),
                    },
                ]
            }
        };
        out.push(Values::I16(self.ft_bias.clone()));
        out
    }

    /// The net's tensors as in its file: name, shape and values, in order.
    pub fn tensors(&self) -> Vec<(String, Vec<usize>, Values)> {
        let mut values = self.transformer_values();
        for l in &self.layers {
            values.push(l.weight.clone());
            values.push(l.bias.clone());
        }
        file_tensors(&self.spec)
            .into_iter()
            .zip(values)
            .map(|((name, shape), v)| (name, shape, v))
            .collect()
    }

    /// Transformer output for one perspective's active features.
    pub fn accumulate(&self, features: &[u32]) -> Vec<i16> {
        let w = self.width;
        let mut acc = self.ft_bias.clone();
        for &f in features {
            for (a, x) in acc.iter_mut().zip(&self.ft_weights[f as usize * w..][..w]) {
                *a = a.wrapping_add(*x);
            }
        }
        acc
    }

    /// Both perspectives' accumulators of `board`, indexed by `Color as usize`.
    pub fn refresh(&self, board: &Board) -> Result<[Vec<i16>; 2], FeatureError> {
        let mut features = Vec::with_capacity(self.family.max_active());
        let mut out = [Vec::new(), Vec::new()];
        for color in Color::ALL {
            features.clear();
            self.family.active(board, color, &mut features)?;
            out[color as usize] = self.accumulate(&features);
        }
        Ok(out)
    }

    /// Full-refresh evaluation of `board` for `side_to_move`.
    pub fn evaluate_board(&self, board: &Board, side_to_move: Color) -> Result<i32, FeatureError> {
        let acc = self.refresh(board)?;
        Ok(self.evaluate(
            Kernel::Scalar,
            &acc[side_to_move as usize],
            &acc[side_to_move.other() as usize],
            board.occupied().count() as u32,
        ))
    }

    /// The score for the side to move from both accumulators (side to move first) and the
    /// number of men on the board (which picks the output bucket).
    pub fn evaluate(&self, kernel: Kernel, stm: &[i16], nstm: &[i16], men: u32) -> i32 {
        let bucket = self.spec.output_buckets.bucket(men) as usize;
        let scale = self.spec.quantization.eval_scale;
        let qa = self.qa as i64;
        if !self.output16.is_empty() {
            // SCReLU straight into i8 output weights: the AVX2 dot of `nnue`'s SCReLU nets.
            let out = &self.layers[0];
            let n = 2 * self.width;
            let s = kernel.screlu_dot(stm, nstm, &self.output16[bucket * n..][..n]);
            let v = s as f64 / ((qa * qa) as f64 * out.weight_factor)
                + out.bias.raw(bucket) / out.bias_factor;
            return round_score(v * scale);
        }
        // The transformer's activation, as integers at scale `qa` or `qa²`.
        let clamp = |v: i16| (v as i64).clamp(0, qa);
        let (x, x_scale): (Vec<i64>, i64) = match self.spec.transformer.activation {
            TransformerActivation::Crelu => {
                (stm.iter().chain(nstm).map(|&v| clamp(v)).collect(), qa)
            }
            TransformerActivation::Screlu => (
                stm.iter()
                    .chain(nstm)
                    .map(|&v| clamp(v) * clamp(v))
                    .collect(),
                qa * qa,
            ),
            TransformerActivation::PairwiseCrelu => {
                let h = self.width / 2;
                let pair = |a: &[i16]| {
                    (0..h)
                        .map(|i| clamp(a[i]) * clamp(a[i + h]))
                        .collect::<Vec<i64>>()
                };
                let mut v = pair(stm);
                v.extend(pair(nstm));
                (v, qa * qa)
            }
        };
        let mut values: Vec<f64> = Vec::new();
        for (i, layer) in self.layers.iter().enumerate() {
            let first_row = if layer.per_bucket {
                bucket * layer.width
            } else {
                0
            };
            let mut out = Vec::with_capacity(layer.width);
            for o in first_row..first_row + layer.width {
                let row = o * layer.fan_in;
                let bias = layer.bias.raw(o) / layer.bias_factor;
                let sum = if i == 0 && layer.weight.dtype() != Dtype::F32 {
                    // Exact: integers times integers, one division by both scales. i32 weights
                    // times activations up to QA² could pass i64 over thousands of inputs.
                    let s: i128 = (0..layer.fan_in)
                        .map(|j| (x[j] * layer.weight.int(row + j)) as i128)
                        .sum();
                    s as f64 / (x_scale as f64 * layer.weight_factor)
                } else if i == 0 {
                    (0..layer.fan_in)
                        .map(|j| x[j] as f64 / x_scale as f64 * layer.weight.raw(row + j))
                        .sum::<f64>()
                        / layer.weight_factor
                } else {
                    (0..layer.fan_in)
                        .map(|j| values[j] * layer.weight.raw(row + j))
                        .sum::<f64>()
                        / layer.weight_factor
                };
                let y = sum + bias;
                out.push(match layer.activation {
                    None => y,
                    Some(LayerActivation::Crelu) => y.clamp(0.0, 1.0),
                    Some(LayerActivation::Screlu) => y.clamp(0.0, 1.0).powi(2),
                    Some(LayerActivation::SquareAndCreluSkipLast) => {
                        unreachable!("refused when the net was read")
                    }
                });
            }
            values = out;
        }
        round_score(values[0] * scale)
    }

    /// What the engine prints for this net.
    pub fn describe(&self) -> String {
        let s = &self.spec;
        let inputs = self.family.describe(&s.inputs);
        let act = match s.transformer.activation {
            TransformerActivation::Crelu => "crelu",
            TransformerActivation::Screlu => "screlu",
            TransformerActivation::PairwiseCrelu => "pairwise crelu",
        };
        let mut shape = format!("({inputs} -> {} {act})x2", self.width);
        for l in &s.layers {
            shape.push_str(&format!(" -> {}", l.width));
        }
        shape.push_str(" -> 1");
        if let OutputBuckets::MaterialCount { count } = s.output_buckets {
            shape.push_str(&format!(", {count} output buckets"));
        } else if s.output_buckets == OutputBuckets::StockfishLayerStacks {
            shape.push_str(", Stockfish's 8 layer stacks");
        }
        match &s.name {
            Some(name) => format!("netspec {name:?}: {shape}"),
            None => format!("netspec {shape}"),
        }
    }
}

/// `v` rounded to the nearest integer score (halves away from zero), kept in i32.
fn round_score(v: f64) -> i32 {
    v.round().clamp(i32::MIN as f64, i32::MAX as f64) as i32
}

/// A net of `spec` with small random weights (seeded): for tests and benchmarks of shapes no
/// trained net exists for yet. Transformer sums stay far inside i16 for any position.
pub fn random_spec_net(spec: NetSpec, seed: u64) -> Result<SpecNet, NnueError> {
    SpecNet::check_spec(&spec)?;
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move |span: i64| -> i64 {
        // xorshift64*: deterministic and dependency-free.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        let r = state.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (r >> 33) as i64 % (2 * span + 1) - span
    };
    let qa = spec.default_quant("ft.weight").expect("described").factor as i64;
    let tensors = file_tensors(&spec)
        .into_iter()
        .map(|(name, shape)| {
            let n: usize = shape.iter().product();
            let q = spec.default_quant(&name).expect("described");
            // Transformer weights up to QA/16 (32 features stay below 2·QA); layer weights
            // within about ±1 at their factor; biases small.
            let span = match name.as_str() {
                "ft.weight" | lakefish_schemas::netspec::THREAT_TENSOR => (qa / 16).max(1),
                "ft.bias" => (qa / 4).max(1),
                n if n.ends_with(".bias") => (q.factor.min(1e6) as i64 / 8).max(1),
                _ => (q.factor.min(127.0) as i64).max(1),
            };
            let values = match q.dtype {
                Dtype::I8 => Values::I8((0..n).map(|_| next(span.min(127)) as i8).collect()),
                Dtype::I16 => Values::I16((0..n).map(|_| next(span) as i16).collect()),
                Dtype::I32 => Values::I32((0..n).map(|_| next(span) as i32).collect()),
                Dtype::F32 => Values::F32(
                    (0..n)
                        .map(|_| next(1000) as f32 / 1000.0 * (span as f32 / q.factor as f32))
                        .collect(),
                ),
            };
            (name, values)
        })
        .collect();
    SpecNet::new(spec, format!("random net, seed {seed}"), tensors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::{EvalStack, Evaluator};
    use shakmaty::{Chess, Position};
    use std::sync::Arc;

    /// bullet's four progression nets as shipped in `infra/nets`, transformers narrowed to 64
    /// so the tests stay quick.
    fn bullet_nets() -> Vec<NetSpec> {
        [
            include_str!("../../infra/nets/bullet-1-simple.toml"),
            include_str!("../../infra/nets/bullet-2-output-buckets.toml"),
            include_str!("../../infra/nets/bullet-3-input-buckets.toml"),
            include_str!("../../infra/nets/bullet-4-multi-layer.toml"),
        ]
        .into_iter()
        .map(|text| {
            let mut spec = NetSpec::parse(text).expect("the shipped examples parse");
            spec.transformer.width = 64;
            spec
        })
        .collect()
    }

    /// Checks that ply `ply`'s accumulators equal a refresh of `pos` and its evaluation the
    /// full one; that evaluation.
    fn same_as_refresh(net: &SpecNet, stack: &EvalStack, ply: usize, pos: &Chess, n: usize) -> i32 {
        let fresh = net.refresh(pos.board()).unwrap();
        for c in Color::ALL {
            assert_eq!(
                stack.accumulator(ply, c),
                &fresh[c as usize][..],
                "net {n}, {c:?} at {}",
                shakmaty::fen::Fen::from_position(pos, shakmaty::EnPassantMode::Legal)
            );
        }
        let full = net.evaluate_board(pos.board(), pos.turn()).unwrap();
        assert_eq!(
            stack.evaluate(ply, pos),
            full.clamp(-crate::scores::MAX_EVAL, crate::scores::MAX_EVAL)
        );
        full
    }

    /// Along random games, every ply's accumulators equal a refresh and every evaluation
    /// equals the full one, for each bullet net; the king-bucketed ones see king moves into
    /// other buckets and across the mirror line, and the output-bucketed ones more than one
    /// bucket.
    #[test]
    fn incremental_evaluation_equals_refresh_for_every_bullet_net() {
        for (n, spec) in bullet_nets().into_iter().enumerate() {
            let net = Arc::new(random_spec_net(spec, 7 + n as u64).unwrap());
            let mut stack = EvalStack::new(Evaluator::Spec(Arc::clone(&net)), 400);
            let (mut refreshes, mut buckets) = (0, std::collections::BTreeSet::new());
            let mut rng = crate::random_games::SplitMix(0xC0FFEE + n as u64);
            let mut distinct = std::collections::BTreeSet::new();
            for _game in 0..12 {
                let mut pos = Chess::default();
                stack.reset(&pos);
                for ply in 0..300 {
                    let moves = pos.legal_moves();
                    if moves.is_empty() {
                        break;
                    }
                    let mv = moves[rng.below(moves.len() as u64) as usize];
                    let turn = pos.turn();
                    let delta = BoardDelta::from_move(turn, mv);
                    if let InputFamily::KingBuckets(kb) = &net.family {
                        refreshes += Color::ALL
                            .iter()
                            .filter(|&&c| kb.needs_refresh_for(c, &delta))
                            .count();
                    }
                    pos.play_unchecked(mv);
                    stack.push(ply, turn, mv, &pos);
                    distinct.insert(same_as_refresh(&net, &stack, ply + 1, &pos, n));
                    buckets.insert(
                        net.spec
                            .output_buckets
                            .bucket(pos.board().occupied().count() as u32),
                    );
                }
            }
            assert!(distinct.len() > 100, "net {n}: {} distinct", distinct.len());
            if matches!(net.family, InputFamily::KingBuckets(_)) {
                assert!(refreshes > 10, "net {n}: {refreshes} refreshes");
            }
            if net.spec.output_buckets.count() > 1 {
                assert!(buckets.len() > 2, "net {n}: buckets {buckets:?}");
            }
        }
    }

    /// Nets with threat, axis and mobility inputs, alone and beside piece-square families:
    /// along random games
    /// every ply's accumulators (followed by list difference) equal a refresh and every
    /// evaluation the full one; the games hold captures, promotions, castling, en passant
    /// and kings crossing the d/e line.
    #[test]
    fn threat_nets_follow_moves_exactly() {
        let specs = [
            "[inputs]\nfamily = \"combined\"\n[[inputs.parts]]\nfamily = \"threats\"\n\
             [[inputs.parts]]\nfamily = \"halfka_v2_hm\"\n[transformer]\nwidth = 32\n\
             activation = \"screlu\"\n",
            "[inputs]\nfamily = \"combined\"\n[[inputs.parts]]\nfamily = \"piece_square\"\n\
             [[inputs.parts]]\nfamily = \"threats\"\n[transformer]\nwidth = 32\n\
             [[layers]]\nwidth = 8\nactivation = \"crelu\"\nper_bucket = true\n\
             [output_buckets]\nrule = \"material_count\"\ncount = 8\n",
            "[inputs]\nfamily = \"threats\"\n[transformer]\nwidth = 16\nactivation = \"screlu\"\n",
            // The thesis's families: All ⊕ axes, and mobility beside HalfKA and threats.
            "[inputs]\nfamily = \"combined\"\n[[inputs.parts]]\nfamily = \"piece_square\"\n\
             [[inputs.parts]]\nfamily = \"axes\"\n[[inputs.parts]]\nfamily = \"pairwise_axes\"\n\
             [transformer]\nwidth = 16\n\
             activation = \"screlu\"\n",
            "[inputs]\nfamily = \"combined\"\n[[inputs.parts]]\nfamily = \"halfka_v2_hm\"\n\
             [[inputs.parts]]\nfamily = \"mobility\"\n[[inputs.parts]]\nfamily = \"threats\"\n\
             [transformer]\nwidth = 16\nactivation = \"screlu\"\n",
        ];
        let mut seen = [0usize; 5];
        for (n, text) in specs.into_iter().enumerate() {
            let spec = NetSpec::parse(&format!(
                "version = 1\n{text}[quantization]\neval_scale = 400.0\n"
            ))
            .unwrap();
            let net = Arc::new(random_spec_net(spec, 11 + n as u64).unwrap());
            assert!(net.family.needs_boards());
            // The threat rows are a file tensor of their own, i8, and read back in place.
            let names: Vec<(String, Dtype)> = net
                .tensors()
                .into_iter()
                .map(|(name, _, v)| (name, v.dtype()))
                .collect();
            if net.spec.inputs.threat_rows().is_some() {
                assert_eq!(names[1], ("ft.threats".to_string(), Dtype::I8), "{names:?}");
            }
            let bytes = net.to_bytes();
            assert_eq!(SpecNet::from_bytes(&bytes).unwrap(), *net);
            // Damaged files are refused, never a panic: truncations and a trailing byte.
            for cut in (0..bytes.len()).step_by(4099).chain([bytes.len() - 1]) {
                assert!(
                    SpecNet::from_bytes(&bytes[..cut]).is_err(),
                    "net {n}, cut at {cut}"
                );
            }
            let mut long = bytes.clone();
            long.push(0);
            assert_eq!(SpecNet::from_bytes(&long), Err(NnueError::Trailing(1)));
            let mut stack = EvalStack::new(Evaluator::Spec(Arc::clone(&net)), 400);
            let mut rng = crate::random_games::SplitMix(0xBEEF + n as u64);
            let mut distinct = std::collections::BTreeSet::new();
            for _game in 0..8 {
                let mut pos = Chess::default();
                stack.reset(&pos);
                for ply in 0..300 {
                    let moves = pos.legal_moves();
                    if moves.is_empty() {
                        break;
                    }
                    // Castling and en passant are rare in random games: take them when
                    // they come up, half the time.
                    let rare: Vec<_> = moves
                        .iter()
                        .filter(|m| m.is_castle() || m.is_en_passant())
                        .collect();
                    let mv = match rare.first() {
                        Some(&&m) if rng.below(2) == 0 => m,
                        _ => moves[rng.below(moves.len() as u64) as usize],
                    };
                    let kings = |p: &Chess| {
                        Color::ALL.map(|c| p.board().king_of(c).map(|k| k.file() as u32 >= 4))
                    };
                    let before = kings(&pos);
                    seen[0] += usize::from(mv.is_capture());
                    seen[1] += usize::from(mv.is_promotion());
                    seen[2] += usize::from(mv.is_castle());
                    seen[3] += usize::from(mv.is_en_passant());
                    pos.play_unchecked(mv);
                    seen[4] += usize::from(kings(&pos) != before);
                    if ply % 7 == 3 {
                        // A null move in between, as the search plays them.
                        stack.push_null(ply);
                        stack.push(ply + 1, pos.turn().other(), mv, &pos);
                    }
                    stack.push(ply, pos.turn().other(), mv, &pos);
                    distinct.insert(same_as_refresh(&net, &stack, ply + 1, &pos, n));
                }
            }
            assert!(distinct.len() > 100, "net {n}: {} distinct", distinct.len());
        }
        assert!(
            seen.iter().all(|&k| k > 3),
            "captures, promotions, castles, en passant, king crossings: {seen:?}"
        );
    }

    /// The SCReLU kernel path and the general path give the same scores.
    #[test]
    fn the_screlu_kernel_path_equals_the_general_one() {
        let spec = bullet_nets().remove(1);
        let net = random_spec_net(spec, 3).unwrap();
        assert!(!net.output16.is_empty(), "bullet 2 takes the kernel path");
        let mut general = net.clone();
        general.output16.clear();
        let mut rng = crate::random_games::SplitMix(5);
        let mut pos = Chess::default();
        for _ in 0..200 {
            let moves = pos.legal_moves();
            if moves.is_empty() {
                pos = Chess::default();
                continue;
            }
            pos.play_unchecked(moves[rng.below(moves.len() as u64) as usize]);
            let acc = net.refresh(pos.board()).unwrap();
            let men = pos.board().occupied().count() as u32;
            for kernel in Kernel::available(net.width) {
                assert_eq!(
                    net.evaluate(kernel, &acc[1], &acc[0], men),
                    general.evaluate(Kernel::Scalar, &acc[1], &acc[0], men)
                );
            }
        }
    }

    /// A file reads back as the same net, and the engine's loader takes it.
    #[test]
    fn files_round_trip() {
        for (n, spec) in bullet_nets().into_iter().enumerate() {
            let net = random_spec_net(spec, n as u64).unwrap();
            let bytes = net.to_bytes();
            assert_eq!(SpecNet::from_bytes(&bytes).unwrap(), net);
            let Evaluator::Spec(loaded) = Evaluator::from_net_bytes(&bytes).unwrap() else {
                panic!("a described net loads as one");
            };
            assert_eq!(*loaded, net);
        }
    }

    /// Garbage is refused with an error, never a panic: every truncation, a trailing byte,
    /// a description the engine cannot evaluate, a tensor of the wrong type.
    #[test]
    fn damaged_files_are_refused() {
        let spec = bullet_nets().remove(3);
        let bytes = random_spec_net(spec.clone(), 1).unwrap().to_bytes();
        for cut in (0..bytes.len()).step_by(97).chain([bytes.len() - 1]) {
            assert!(SpecNet::from_bytes(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(SpecNet::from_bytes(&long), Err(NnueError::Trailing(1)));

        let mut psqt = spec.clone();
        psqt.transformer.psqt = 8;
        let err = random_spec_net(psqt, 1).unwrap_err().to_string();
        assert!(err.contains("transformer.psqt"), "{err}");

        let mut wide_ft = spec.clone();
        wide_ft.quantization.tensors.insert(
            "ft.weight".into(),
            lakefish_schemas::netspec::TensorQuant {
                dtype: Dtype::I32,
                factor: 255.0,
                rounding: Default::default(),
            },
        );
        let err = random_spec_net(wide_ft, 1).unwrap_err().to_string();
        assert!(err.contains("ft.weight"), "{err}");

        // A tensor stored as another type than the description says.
        let net = random_spec_net(spec, 1).unwrap();
        let mut tensors: Vec<(String, Values)> = vec![
            ("ft.weight".into(), Values::I16(net.ft_weights.to_vec())),
            ("ft.bias".into(), Values::I16(net.ft_bias.clone())),
        ];
        for l in &net.layers {
            tensors.push((format!("{}.weight", l.name), l.weight.clone()));
            tensors.push((format!("{}.bias", l.name), l.bias.clone()));
        }
        let Values::I8(w) = &tensors[2].1 else {
            panic!("l1.weight is i8 in bullet 4")
        };
        tensors[2].1 = Values::I16(w.iter().map(|&x| x as i16).collect());
        let err = SpecNet::new(net.spec.clone(), String::new(), tensors)
            .unwrap_err()
            .to_string();
        assert!(err.contains("l1.weight"), "{err}");
    }
}
