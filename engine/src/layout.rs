//! A quantized net as named tensors ([`NetTensors`]: a described net, a preset, a Stockfish
//! 15.1 net) written in, and read back from, a saved layout ([`Layout`]): the bytes another
//! engine loads (bullet's `quantised.bin`, Stockfish's `.nnue`, ...).
//!
//! The integers are the net's own: a layout only orders, transposes, widens and pads them,
//! so export → import → export gives the same bytes. Where a layout would need other
//! integers (another factor, a narrower type than a value needs), it is refused, naming the
//! tensor.

use crate::nnue::NnueError;
use crate::spec_net::{SpecNet, Values, check_tensors, dtype_code, file_tensors};
use crate::stockfish_net::{LayerStack, StockfishNet};
use lakefish_schemas::layout::{HeaderValues, ItemKind, Layout, LayoutTensor, Record};
use lakefish_schemas::netspec::{Dtype, NetSpec};

/// A tensor's values held losslessly while they move between layouts.
enum Plain {
    Int(Vec<i64>),
    Float(Vec<f32>),
}

impl Plain {
    fn of(v: &Values) -> Plain {
        match v {
            Values::I8(v) => Plain::Int(v.iter().map(|&x| x as i64).collect()),
            Values::I16(v) => Plain::Int(v.iter().map(|&x| x as i64).collect()),
            Values::I32(v) => Plain::Int(v.iter().map(|&x| x as i64).collect()),
            Values::F32(v) => Plain::Float(v.clone()),
        }
    }

    /// The values as `dtype`, or the first that does not fit.
    fn to_values(&self, dtype: Dtype, tensor: &str) -> Result<Values, NnueError> {
        let overflow = |i: usize, v: i64| NnueError::Tensor {
            name: tensor.to_string(),
            reason: format!("value {v} at index {i} does not fit {dtype:?}"),
        };
        fn narrow<T: TryFrom<i64>>(
            v: &[i64],
            overflow: impl Fn(usize, i64) -> NnueError,
        ) -> Result<Vec<T>, NnueError> {
            v.iter()
                .enumerate()
                .map(|(i, &x)| T::try_from(x).map_err(|_| overflow(i, x)))
                .collect()
        }
        Ok(match (self, dtype) {
            (Plain::Int(v), Dtype::I8) => Values::I8(narrow(v, overflow)?),
            (Plain::Int(v), Dtype::I16) => Values::I16(narrow(v, overflow)?),
            (Plain::Int(v), Dtype::I32) => Values::I32(narrow(v, overflow)?),
            (Plain::Float(v), Dtype::F32) => Values::F32(v.clone()),
            _ => {
                return Err(NnueError::Tensor {
                    name: tensor.to_string(),
                    reason: format!(
                        "{dtype:?} cannot hold it: floats stay f32, integers stay integers"
                    ),
                });
            }
        })
    }

    fn len(&self) -> usize {
        match self {
            Plain::Int(v) => v.len(),
            Plain::Float(v) => v.len(),
        }
    }

    /// Values `start .. start + len`.
    fn slice(&self, start: usize, len: usize) -> Plain {
        match self {
            Plain::Int(v) => Plain::Int(v[start..start + len].to_vec()),
            Plain::Float(v) => Plain::Float(v[start..start + len].to_vec()),
        }
    }

    fn extend(&mut self, other: Plain) {
        match (self, other) {
            (Plain::Int(a), Plain::Int(b)) => a.extend(b),
            (Plain::Float(a), Plain::Float(b)) => a.extend(b),
            _ => unreachable!("one tensor is one kind"),
        }
    }

    /// Each of `rows` rows of `cols` values padded with zeros to `to` values.
    fn pad_rows(&self, rows: usize, cols: usize, to: usize) -> Plain {
        fn p<T: Copy + Default>(v: &[T], rows: usize, cols: usize, to: usize) -> Vec<T> {
            let mut out = Vec::with_capacity(rows * to);
            for r in 0..rows {
                out.extend_from_slice(&v[r * cols..][..cols]);
                out.resize(out.len() + to - cols, T::default());
            }
            out
        }
        match self {
            Plain::Int(v) => Plain::Int(p(v, rows, cols, to)),
            Plain::Float(v) => Plain::Float(p(v, rows, cols, to)),
        }
    }

    /// The first `cols` of each row of `padded` values, or the row whose padding is not zero.
    fn unpad_rows(&self, rows: usize, padded: usize, cols: usize) -> Result<Plain, usize> {
        fn u<T: Copy + Default + PartialEq>(
            v: &[T],
            rows: usize,
            padded: usize,
            cols: usize,
        ) -> Result<Vec<T>, usize> {
            let mut out = Vec::with_capacity(rows * cols);
            for r in 0..rows {
                let row = &v[r * padded..][..padded];
                if row[cols..].iter().any(|x| *x != T::default()) {
                    return Err(r);
                }
                out.extend_from_slice(&row[..cols]);
            }
            Ok(out)
        }
        Ok(match self {
            Plain::Int(v) => Plain::Int(u(v, rows, padded, cols)?),
            Plain::Float(v) => Plain::Float(u(v, rows, padded, cols)?),
        })
    }

    /// `rows × cols` row-major → its transpose, row-major.
    fn transposed(&self, rows: usize, cols: usize) -> Plain {
        fn t<T: Copy>(v: &[T], rows: usize, cols: usize) -> Vec<T> {
            let mut out = Vec::with_capacity(v.len());
            for c in 0..cols {
                for r in 0..rows {
                    out.push(v[r * cols + c]);
                }
            }
            out
        }
        match self {
            Plain::Int(v) => Plain::Int(t(v, rows, cols)),
            Plain::Float(v) => Plain::Float(t(v, rows, cols)),
        }
    }
}

/// A quantized net as its named tensors: what a layout writes and reads.
#[derive(Debug, Clone, PartialEq)]
pub struct NetTensors {
    pub spec: NetSpec,
    /// The free-text description (Stockfish's header holds it; a described net's comment).
    pub description: Vec<u8>,
    /// The net's file tensors in its order: name, shape, values as the NetSpec stores them.
    pub tensors: Vec<(String, Vec<usize>, Values)>,
}

/// Whether `spec` is Stockfish 15.1's net (its preset).
pub fn is_stockfish(spec: &NetSpec) -> bool {
    spec.as_preset()
        .is_some_and(|(f, a)| f == "halfka_v2_hm" && a == "stockfish-15.1")
}

fn stockfish_spec() -> NetSpec {
    NetSpec::preset("halfka_v2_hm", "stockfish-15.1").expect("Stockfish 15.1's preset")
}

impl NetTensors {
    pub fn of_spec_net(net: &SpecNet) -> NetTensors {
        NetTensors {
            spec: net.spec.clone(),
            description: net.comment.as_bytes().to_vec(),
            tensors: net.tensors(),
        }
    }

    /// A Stockfish 15.1 net under its preset's description: each layer's 8 stacks one
    /// tensor, rows stack by stack; `fc_1`'s two padding inputs (zero in Stockfish's nets)
    /// dropped, refusing a net where they are not.
    pub fn of_stockfish(net: &StockfishNet) -> Result<NetTensors, NnueError> {
        let spec = stockfish_spec();
        let cat_i32 = |f: &dyn Fn(&LayerStack) -> &Vec<i32>| {
            Values::I32(
                net.stacks
                    .iter()
                    .flat_map(|s| f(s).iter().copied())
                    .collect(),
            )
        };
        let cat_i8 = |f: &dyn Fn(&LayerStack) -> &Vec<i8>| {
            Values::I8(
                net.stacks
                    .iter()
                    .flat_map(|s| f(s).iter().copied())
                    .collect(),
            )
        };
        let mut fc1 = Vec::new();
        for (b, s) in net.stacks.iter().enumerate() {
            let cols = s.fc1.inputs;
            for (r, row) in s.fc1.weights.chunks_exact(cols).enumerate() {
                if row[30..].iter().any(|&w| w != 0) {
                    return Err(NnueError::Tensor {
                        name: "l2.weight".into(),
                        reason: format!(
                            "stack {b}, output {r}: fc_1's padding inputs 30 and 31 are not zero"
                        ),
                    });
                }
                fc1.extend_from_slice(&row[..30]);
            }
        }
        let values = vec![
            Values::I16(net.ft_weights.to_vec()),
            Values::I16(net.ft_bias.clone()),
            Values::I32(net.psqt_weights.clone()),
            cat_i8(&|s| &s.fc0.weights),
            cat_i32(&|s| &s.fc0.bias),
            Values::I8(fc1),
            cat_i32(&|s| &s.fc1.bias),
            cat_i8(&|s| &s.fc2.weights),
            cat_i32(&|s| &s.fc2.bias),
        ];
        NetTensors::new(spec, net.description.clone(), values)
    }

    /// Names and shapes from `spec`, checking each tensor's type and length.
    fn new(
        spec: NetSpec,
        description: Vec<u8>,
        values: Vec<Values>,
    ) -> Result<NetTensors, NnueError> {
        let names: Vec<String> = file_tensors(&spec).into_iter().map(|(n, _)| n).collect();
        if names.len() != values.len() {
            return Err(NnueError::Header(format!(
                "{} tensors, the description has {}",
                values.len(),
                names.len()
            )));
        }
        let shapes = check_tensors(&spec, names.iter().map(String::as_str).zip(values.iter()))?;
        let tensors = shapes
            .into_iter()
            .zip(values)
            .map(|((name, shape), v)| (name, shape, v))
            .collect();
        Ok(NetTensors {
            spec,
            description,
            tensors,
        })
    }

    fn get(&self, name: &str) -> (&[usize], &Values) {
        let (_, shape, v) = self
            .tensors
            .iter()
            .find(|(n, _, _)| n == name)
            .expect("checked: the layout writes the net's tensors");
        (shape, v)
    }

    /// The net lakefish's engine evaluates (a Stockfish net is [`Self::into_stockfish`]).
    pub fn into_spec_net(self) -> Result<SpecNet, NnueError> {
        let comment = String::from_utf8_lossy(&self.description).into_owned();
        let tensors = self.tensors.into_iter().map(|(n, _, v)| (n, v)).collect();
        SpecNet::new(self.spec, comment, tensors)
    }

    /// A Stockfish 15.1 net, `fc_1` padded back to 32 inputs with zeros.
    pub fn into_stockfish(self) -> Result<StockfishNet, NnueError> {
        if !is_stockfish(&self.spec) {
            return Err(NnueError::Header("not Stockfish 15.1's net".into()));
        }
        let mut v = self.tensors.into_iter().map(|(_, _, v)| v);
        let (
            Some(Values::I16(ftw)),
            Some(Values::I16(ftb)),
            Some(Values::I32(psqt)),
            Some(Values::I8(w0)),
            Some(Values::I32(b0)),
            Some(Values::I8(w1)),
            Some(Values::I32(b1)),
            Some(Values::I8(w2)),
            Some(Values::I32(b2)),
        ) = (
            v.next(),
            v.next(),
            v.next(),
            v.next(),
            v.next(),
            v.next(),
            v.next(),
            v.next(),
            v.next(),
        )
        else {
            unreachable!("checked against the preset when made");
        };
        let stacks = (0..8)
            .map(|b| {
                let fc1: Vec<i8> = w1[b * 32 * 30..][..32 * 30]
                    .chunks_exact(30)
                    .flat_map(|row| row.iter().copied().chain([0, 0]))
                    .collect();
                LayerStack::new(
                    (
                        b0[b * 16..][..16].to_vec(),
                        w0[b * 16 * 1024..][..16 * 1024].to_vec(),
                    ),
                    (b1[b * 32..][..32].to_vec(), fc1),
                    (b2[b], w2[b * 32..][..32].to_vec()),
                )
            })
            .collect();
        Ok(StockfishNet {
            description: self.description,
            ft_bias: ftb,
            ft_weights: ftw.into(),
            psqt_weights: psqt,
            stacks,
        })
    }
}

/// How the net stores tensor `name` of `shape` relative to the layout's `M×N` matrix:
/// `(M, N, stored row-major)`. The transformer (and PSQT) is stored `[inputs, width]`, each
/// input's column contiguous (column-major); a dense layer `[rows, fan_in]` row-major.
fn matrix(name: &str, shape: &[usize]) -> (usize, usize, bool) {
    match shape {
        [n] => (*n, 1, false),
        [a, b] if name == "ft.weight" || name == "psqt.weight" => (*b, *a, false),
        [a, b] => (*a, *b, true),
        _ => (shape.iter().product(), 1, false),
    }
}

/// A registered lakefish or Stockfish net file as named tensors: a described net (`.nnue`
/// version 2) as it is, a preset's under the NetSpec its name expands into, a Stockfish 15.1
/// net under its preset; the integers unchanged.
pub fn described(bytes: &[u8]) -> Result<NetTensors, NnueError> {
    if SpecNet::sniff(bytes) {
        return Ok(NetTensors::of_spec_net(&SpecNet::from_bytes(bytes)?));
    }
    if StockfishNet::sniff(bytes) {
        let net = StockfishNet::from_bytes(bytes).map_err(|e| NnueError::Header(e.to_string()))?;
        return NetTensors::of_stockfish(&net);
    }
    let net = crate::nnue::Network::from_bytes(bytes)?;
    let spec = NetSpec::preset(net.features.name(), &net.arch.to_string())
        .map_err(|e| NnueError::Header(format!("no description for this preset: {e}")))?;
    let mut values = vec![
        Values::I16(net.ft_weights.to_vec()),
        Values::I16(net.ft_bias.clone()),
    ];
    for d in &net.layers {
        values.push(Values::I8(d.weights.clone()));
        values.push(Values::I32(d.bias.clone()));
    }
    NetTensors::new(spec, net.description.into_bytes(), values)
}

/// Rows `bucket · rows/buckets ..` of a stored tensor (a layer's weights or biases), with
/// its matrix shape.
fn bucket_rows(plain: &Plain, m: usize, n: usize, buckets: usize, bucket: usize) -> (Plain, usize) {
    let per = m / buckets;
    (plain.slice(bucket * per * n, per * n), per)
}

/// One tensor entry's bytes: the whole tensor, or with `bucket` that bucket's rows.
fn write_tensor(
    out: &mut Vec<u8>,
    net: &NetTensors,
    t: &LayoutTensor,
    bucket: Option<usize>,
) -> Result<(), NnueError> {
    let (shape, values) = net.get(&t.tensor);
    if let Some(record) = t.record {
        out.extend(record_bytes(record, t, shape));
    }
    let (mut m, n, row_major) = matrix(&t.tensor, shape);
    let mut plain = Plain::of(values);
    if let Some(b) = bucket {
        (plain, m) = bucket_rows(&plain, m, n, net.spec.output_buckets.count() as usize, b);
    }
    // The file holds the column-major M×N (= row-major N×M), or with `transpose` row-major
    // M×N, its rows padded with `pad_inputs`.
    if row_major != t.transpose {
        plain = if row_major {
            plain.transposed(m, n)
        } else {
            plain.transposed(n, m)
        };
    }
    if let Some(p) = t.pad_inputs {
        plain = plain.pad_rows(m, n, n.div_ceil(p as usize) * p as usize);
    }
    let v = plain.to_values(t.dtype, &format!("{} ({})", t.id, t.tensor))?;
    v.write_le(out);
    Ok(())
}

/// What a record writes before tensor entry `t` of a tensor the net stores as `shape`.
fn record_bytes(record: Record, t: &LayoutTensor, shape: &[usize]) -> Vec<u8> {
    match record {
        Record::Lakefish => {
            let mut out = (t.id.len() as u16).to_le_bytes().to_vec();
            out.extend_from_slice(t.id.as_bytes());
            out.push(dtype_code(t.dtype));
            out.push(shape.len() as u8);
            for d in shape {
                out.extend_from_slice(&(*d as u32).to_le_bytes());
            }
            out
        }
    }
}

/// The net's description as a header's `spec` item writes it (what lakefish's `.nnue`
/// holds).
fn spec_json(spec: &NetSpec) -> Vec<u8> {
    serde_json::to_vec(spec).expect("a NetSpec serializes")
}

/// The bytes of `net` in `layout`.
pub fn write(net: &NetTensors, layout: &Layout) -> Result<Vec<u8>, NnueError> {
    layout
        .check(&net.spec)
        .map_err(|e| NnueError::Layout(e.to_string()))?;
    let layout = &layout.for_net(&net.spec);
    if u32::try_from(net.description.len()).is_err() {
        return Err(NnueError::Layout(format!(
            "a description of {} bytes does not fit its u32 length",
            net.description.len()
        )));
    }
    let spec = spec_json(&net.spec);
    let mut out = layout.header_bytes(&HeaderValues {
        description: &net.description,
        spec: &spec,
        tensors: layout.entry_count(net.spec.output_buckets.count()),
    });
    for t in &layout.tensors {
        write_tensor(&mut out, net, t, None)?;
    }
    if let Some(st) = &layout.stacks {
        for b in 0..net.spec.output_buckets.count() as usize {
            for h in &st.prefix {
                out.extend(h.bytes(&HeaderValues::default()));
            }
            for t in &st.tensors {
                write_tensor(&mut out, net, t, Some(b))?;
            }
        }
    }
    if let Some(p) = &layout.padding {
        let fill = p.fill(out.len());
        out.extend(fill);
    }
    Ok(out)
}

/// Bytes of one entry: its values (rows padded) for the whole tensor or one bucket.
fn entry_len(spec: &NetSpec, t: &LayoutTensor, stacked: bool) -> usize {
    let shape = file_tensors(spec)
        .into_iter()
        .find(|(n, _)| *n == t.tensor)
        .map_or(Vec::new(), |(_, s)| s);
    let (mut m, n, _) = matrix(&t.tensor, &shape);
    if stacked {
        m /= spec.output_buckets.count().max(1) as usize;
    }
    let cols = t
        .pad_inputs
        .map_or(n, |p| n.div_ceil(p as usize) * p as usize);
    let record = t.record.map_or(0, |r| record_bytes(r, t, &shape).len());
    record + m * cols * t.dtype.bytes()
}

/// The size of a file in `layout` for `spec` after a header of `header` bytes, before
/// padding.
fn content_len(layout: &Layout, spec: &NetSpec, header: usize) -> usize {
    let buckets = spec.output_buckets.count() as usize;
    let stacks = layout.stacks.as_ref().map_or(0, |st| {
        buckets
            * (st
                .prefix
                .iter()
                .map(|h| h.bytes(&HeaderValues::default()).len())
                .sum::<usize>()
                + st.tensors
                    .iter()
                    .map(|t| entry_len(spec, t, true))
                    .sum::<usize>())
    });
    header
        + layout
            .tensors
            .iter()
            .map(|t| entry_len(spec, t, false))
            .sum::<usize>()
        + stacks
}

/// A file's header as read: the values a net fills in, and where the tensors start.
struct FileHeader {
    description: Vec<u8>,
    spec: Option<Vec<u8>>,
    tensor_count: Option<(usize, u32)>,
    len: usize,
}

/// Reads the header `layout` says `bytes` start with, refusing a constant that differs or a
/// length that runs past the file (naming the byte).
fn read_header(bytes: &[u8], layout: &Layout) -> Result<FileHeader, NnueError> {
    let mut h = FileHeader {
        description: Vec::new(),
        spec: None,
        tensor_count: None,
        len: 0,
    };
    let u32_at = |at: usize, what: &str| {
        bytes
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| {
                NnueError::Layout(format!(
                    "the file ends at byte {} before {what}",
                    bytes.len()
                ))
            })
    };
    let mut at = 0;
    for item in &layout.header {
        let kind = item.kind();
        if kind == ItemKind::TensorCount {
            h.tensor_count = Some((at, u32_at(at, "the tensor count")?));
            at += 4;
            continue;
        }
        if matches!(kind, ItemKind::Description | ItemKind::Spec) {
            let what = if kind == ItemKind::Spec {
                "the net's description (NetSpec)"
            } else {
                "the description"
            };
            let len = u32_at(at, &format!("{what}'s length"))? as usize;
            let text = (at + 4)
                .checked_add(len)
                .and_then(|end| bytes.get(at + 4..end))
                .ok_or_else(|| {
                    NnueError::Layout(format!(
                        "{what}'s length says {len} bytes from byte {}, the file has {}",
                        at + 4,
                        bytes.len()
                    ))
                })?;
            if kind == ItemKind::Spec {
                h.spec = Some(text.to_vec());
            } else {
                h.description = text.to_vec();
            }
            at += 4 + len;
            continue;
        }
        let want = item.bytes(&HeaderValues::default());
        let got = bytes
            .get(at..at + want.len())
            .unwrap_or(&bytes[at.min(bytes.len())..]);
        if let Some(i) = (0..want.len()).find(|&i| got.get(i) != Some(&want[i])) {
            return Err(NnueError::Layout(match got.get(i) {
                Some(b) => format!(
                    "the file's byte {} is {b:#04x}, the layout's header has {:#04x} there",
                    at + i,
                    want[i]
                ),
                None => format!("the file ends at byte {} inside the header", bytes.len()),
            }));
        }
        at += want.len();
    }
    h.len = at;
    Ok(h)
}

/// The net a file in `layout` describes in its own header (a `spec` item, as lakefish's
/// `.nnue` has), or `None` when the layout writes none.
pub fn embedded_spec(bytes: &[u8], layout: &Layout) -> Result<Option<NetSpec>, NnueError> {
    layout
        .validate()
        .map_err(|e| NnueError::Layout(e.to_string()))?;
    let Some(text) = read_header(bytes, layout)?.spec else {
        return Ok(None);
    };
    let text = std::str::from_utf8(&text).map_err(|_| {
        NnueError::Layout("the file's net description (NetSpec) is not UTF-8".into())
    })?;
    NetSpec::parse(text)
        .map(Some)
        .map_err(|e| NnueError::Layout(format!("the file's net description: {e}")))
}

/// Reads a file written in `layout` as the net `spec` describes, refusing one whose size,
/// header or padding differ from what the layout says (naming what differs) and any value
/// the net's own type cannot hold.
pub fn read(bytes: &[u8], layout: &Layout, spec: NetSpec) -> Result<NetTensors, NnueError> {
    layout
        .check(&spec)
        .map_err(|e| NnueError::Layout(e.to_string()))?;
    let layout = &layout.for_net(&spec);
    let header = read_header(bytes, layout)?;
    if header.spec.is_some() {
        let own = embedded_spec(bytes, layout)?.expect("the layout writes one");
        if own != spec {
            return Err(NnueError::Layout(format!(
                "the file describes another net than the one given: {}",
                serde_json::to_string(&own).unwrap_or_default()
            )));
        }
    }
    if let Some((at, count)) = header.tensor_count {
        let want = layout.entry_count(spec.output_buckets.count());
        if count != want {
            return Err(NnueError::Layout(format!(
                "the tensor count at byte {at} is {count}, the layout writes {want} for this net"
            )));
        }
    }
    let description = header.description;
    let content = content_len(layout, &spec, header.len);
    let padded = content + layout.padding.as_ref().map_or(0, |p| p.fill(content).len());
    if bytes.len() != padded {
        let mut why = format!(
            "the file has {} bytes, the layout{} for this net makes {padded} ({content} of header and tensors",
            bytes.len(),
            layout
                .name
                .as_ref()
                .map(|n| format!(" {n:?}"))
                .unwrap_or_default(),
        );
        why.push_str(if padded > content {
            ", then padding)"
        } else {
            ")"
        });
        return Err(NnueError::Layout(why));
    }
    if let Some(p) = &layout.padding {
        let fill = p.fill(content);
        if bytes[content..] != fill[..] {
            return Err(NnueError::Layout(format!(
                "the file's padding after byte {content} is not the layout's {:?}",
                p.bytes
            )));
        }
    }
    let shapes = file_tensors(&spec);
    let mut got: Vec<(String, Plain)> = Vec::new();
    let mut read_entry = |at: &mut usize, t: &LayoutTensor, stacked: bool| {
        let shape = &shapes
            .iter()
            .find(|(n, _)| *n == t.tensor)
            .expect("checked")
            .1;
        let (mut m, n, row_major) = matrix(&t.tensor, shape);
        if stacked {
            m /= spec.output_buckets.count() as usize;
        }
        let mut len = entry_len(&spec, t, stacked);
        if let Some(record) = t.record {
            let want = record_bytes(record, t, shape);
            if bytes[*at..*at + want.len()] != want[..] {
                return Err(NnueError::Tensor {
                    name: format!("{} ({})", t.id, t.tensor),
                    reason: format!(
                        "the record at byte {at} is not its name, type {} and shape {shape:?}",
                        dtype_code(t.dtype)
                    ),
                });
            }
            *at += want.len();
            len -= want.len();
        }
        let v = Values::read_le(t.dtype, &bytes[*at..*at + len]);
        *at += len;
        let mut plain = Plain::of(&v);
        if let Some(p) = t.pad_inputs {
            let padded = n.div_ceil(p as usize) * p as usize;
            plain = plain
                .unpad_rows(m, padded, n)
                .map_err(|row| NnueError::Tensor {
                    name: format!("{} ({})", t.id, t.tensor),
                    reason: format!("row {row}: the padding inputs are not zero"),
                })?;
        }
        if row_major != t.transpose {
            plain = if row_major {
                plain.transposed(n, m)
            } else {
                plain.transposed(m, n)
            };
        }
        match got.iter_mut().find(|(name, _)| *name == t.tensor) {
            Some((_, rows)) => rows.extend(plain),
            None => got.push((t.tensor.clone(), plain)),
        }
        Ok::<(), NnueError>(())
    };
    let mut at = header.len;
    for t in &layout.tensors {
        read_entry(&mut at, t, false)?;
    }
    if let Some(st) = &layout.stacks {
        for b in 0..spec.output_buckets.count() {
            for (i, h) in st.prefix.iter().enumerate() {
                let want = h.bytes(&HeaderValues::default());
                if bytes[at..at + want.len()] != want[..] {
                    return Err(NnueError::Layout(format!(
                        "bytes {at}..{} are not the layout's stack prefix (stacks.prefix[{i}], bucket {b})",
                        at + want.len()
                    )));
                }
                at += want.len();
            }
            for t in &st.tensors {
                read_entry(&mut at, t, true)?;
            }
        }
    }
    let mut values = Vec::new();
    for (name, _) in &shapes {
        let (_, plain) = got.iter().find(|(n, _)| n == name).expect("checked");
        let layout_id = layout
            .entries()
            .find(|(_, t)| t.tensor == *name)
            .map_or("", |(_, t)| t.id.as_str());
        let dtype = spec.default_quant(name).expect("checked").dtype;
        debug_assert_eq!(
            plain.len(),
            shapes
                .iter()
                .find(|(n, _)| n == name)
                .unwrap()
                .1
                .iter()
                .product::<usize>()
        );
        values.push(plain.to_values(dtype, &format!("{layout_id} ({name})"))?);
    }
    NetTensors::new(spec, description, values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec_net::random_spec_net;

    const BULLET_2: &str = r#"
version = 1
name = "bullet 2_output_buckets"
padding = { multiple = 64, bytes = "bullet" }
[[tensors]]
id = "l0w"
tensor = "ft.weight"
dtype = "i16"
factor = 255.0
[[tensors]]
id = "l0b"
tensor = "ft.bias"
dtype = "i16"
factor = 255.0
[[tensors]]
id = "l1w"
tensor = "out.weight"
dtype = "i16"
factor = 64.0
transpose = true
[[tensors]]
id = "l1b"
tensor = "out.bias"
dtype = "i16"
factor = 16320.0
"#;

    fn spec() -> NetSpec {
        NetSpec::parse(
            r#"
version = 1
[inputs]
family = "piece_square"
[transformer]
width = 16
activation = "screlu"
[output_buckets]
rule = "material_count"
count = 8
[quantization]
eval_scale = 400.0
tensors."ft.weight" = { dtype = "i16", factor = 255.0 }
tensors."ft.bias" = { dtype = "i16", factor = 255.0 }
tensors."out.weight" = { dtype = "i16", factor = 64.0 }
tensors."out.bias" = { dtype = "i16", factor = 16320.0 }
"#,
        )
        .unwrap()
    }

    #[test]
    fn bytes_are_where_bullet_puts_them_and_come_back() {
        let net = random_spec_net(spec(), 7).unwrap();
        let layout = Layout::parse(BULLET_2).unwrap();
        let bytes = write(&NetTensors::of_spec_net(&net), &layout).unwrap();
        // 768·16 + 16 + 8·32 + 8 i16 = 12,568 values, 25,136 bytes, padded to 25,152.
        assert_eq!(bytes.len(), 25_152);
        assert_eq!(&bytes[25_136..25_142], b"bullet");
        let i16_at = |i: usize| i16::from_le_bytes([bytes[2 * i], bytes[2 * i + 1]]);
        // l0w column-major 16×768: input 5's column starts at 5·16.
        let Values::I16(ftw) = &net.tensors()[0].2 else {
            panic!()
        };
        assert_eq!(i16_at(5 * 16 + 3), ftw[5 * 16 + 3]);
        // l1w transposed: bucket 2's 32 weights are contiguous.
        let out = net.layers.last().unwrap();
        let Values::I16(ow) = &out.weight else {
            panic!()
        };
        let base = 768 * 16 + 16;
        assert_eq!(i16_at(base + 2 * 32 + 7), ow[2 * 32 + 7]);

        let back = read(&bytes, &layout, spec()).unwrap();
        assert_eq!(back.tensors, net.tensors());
        assert_eq!(write(&back, &layout).unwrap(), bytes);

        // Without the transpose, input j's eight bucket weights are contiguous.
        let plain = Layout::parse(&BULLET_2.replace("transpose = true\n", "")).unwrap();
        let b2 = write(&NetTensors::of_spec_net(&net), &plain).unwrap();
        let at = |i: usize| i16::from_le_bytes([b2[2 * i], b2[2 * i + 1]]);
        assert_eq!(at(base + 7 * 8 + 2), ow[2 * 32 + 7]);

        // A file one byte short, a damaged pad, a value the type cannot hold: refused.
        let e = read(&bytes[..bytes.len() - 1], &layout, spec()).unwrap_err();
        assert!(e.to_string().contains("25151 bytes"), "{e}");
        let mut bad = bytes.clone();
        *bad.last_mut().unwrap() = 0;
        let e = read(&bad, &layout, spec()).unwrap_err();
        assert!(e.to_string().contains("padding"), "{e}");
        let narrow = Layout::parse(&BULLET_2.replace(
            "tensor = \"out.bias\"\ndtype = \"i16\"",
            "tensor = \"out.bias\"\ndtype = \"i32\"",
        ))
        .unwrap();
        let wide = write(&NetTensors::of_spec_net(&net), &narrow).unwrap();
        let mut big = wide.clone();
        let bias_at = 2 * (768 * 16 + 16 + 8 * 32);
        big[bias_at..bias_at + 4].copy_from_slice(&100_000i32.to_le_bytes());
        let e = read(&big, &narrow, spec()).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("tensor l1b (out.bias): value 100000 at index 0 does not fit I16"),
            "{e}"
        );
    }

    /// Stockfish 15.1's file as a layout (`infra/layouts/stockfish-15.1.toml`): the bytes
    /// today's writer makes, and back.
    #[test]
    fn stockfish_s_format_is_a_layout_too() {
        use crate::stockfish_net::{LayerStack, random_net};
        let text = include_str!("../../infra/layouts/stockfish-15.1.toml");
        let layout = Layout::parse(text).unwrap();
        let mut net = random_net(5);
        // Stockfish's nets hold zeros in fc_1's two padding inputs; so must this one.
        let err = NetTensors::of_stockfish(&net).unwrap_err().to_string();
        assert!(err.starts_with("tensor l2.weight: stack 0"), "{err}");
        net.stacks = net
            .stacks
            .iter()
            .map(|s| {
                let mut w = s.fc1.weights.clone();
                for row in w.chunks_exact_mut(32) {
                    row[30] = 0;
                    row[31] = 0;
                }
                LayerStack::new(
                    (s.fc0.bias.clone(), s.fc0.weights.clone()),
                    (s.fc1.bias.clone(), w),
                    (s.fc2.bias[0], s.fc2.weights.clone()),
                )
            })
            .collect();
        let tensors = NetTensors::of_stockfish(&net).unwrap();
        let bytes = write(&tensors, &layout).unwrap();
        assert!(
            bytes == net.to_bytes().unwrap(),
            "the layout writes other bytes"
        );
        let back = read(&bytes, &layout, tensors.spec.clone()).unwrap();
        assert_eq!(back.description, b"a test net");
        assert!(back.into_stockfish().unwrap() == net);
        // A description longer than the file, a damaged stack hash: named.
        let mut bad = bytes.clone();
        bad[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        let e = read(&bad, &layout, tensors.spec.clone())
            .unwrap_err()
            .to_string();
        assert!(e.contains("the description's length says"), "{e}");
        let mut bad = bytes.clone();
        let first_stack = bytes.len() - 8 * (4 + 16 * 4 + 16 * 1024 + 32 * 4 + 32 * 32 + 4 + 32);
        bad[first_stack] ^= 1;
        let e = read(&bad, &layout, tensors.spec).unwrap_err().to_string();
        assert!(e.contains("stack prefix"), "{e}");
    }

    /// lakefish's own `.nnue` as a layout (`infra/layouts/lakefish.toml`): for every kind of
    /// net the bytes `SpecNet::to_bytes` writes, and back; a preset becomes the same net
    /// described; a record, count or description that differs is named.
    #[test]
    fn lakefish_s_format_is_a_layout_too() {
        use crate::features::FeatureSetKind;
        use lakefish_schemas::layout::SHIPPED_NETS;
        let layout = Layout::parse(include_str!("../../infra/layouts/lakefish.toml")).unwrap();
        let mut specs: Vec<NetSpec> = SHIPPED_NETS
            .iter()
            .map(|(_, t)| {
                let mut s = NetSpec::parse(t).unwrap();
                s.transformer.width = 8;
                s
            })
            .collect();
        specs.push(spec());
        specs.push(NetSpec::preset("halfka_v2_hm", "16x2-8-8").unwrap());
        for (i, spec) in specs.into_iter().enumerate() {
            let mut net = random_spec_net(spec.clone(), i as u64).unwrap();
            net.comment = format!("net {i}");
            let bytes = write(&NetTensors::of_spec_net(&net), &layout).unwrap();
            assert!(
                bytes == net.to_bytes(),
                "net {i}: other bytes than .nnue v2"
            );
            assert_eq!(embedded_spec(&bytes, &layout).unwrap(), Some(spec.clone()));
            let back = read(&bytes, &layout, spec).unwrap();
            assert_eq!(back.description, format!("net {i}").into_bytes());
            assert!(back.into_spec_net().unwrap() == net, "net {i} read back");
        }
        // A preset's version-1 file: the same integers as a described net (which evaluates
        // the hidden layers in its own arithmetic: a SCReLU net without any, the same score).
        let v1 = crate::nnue::random_network(FeatureSetKind::All768, "16x2-8", 3);
        let tensors = described(&v1.to_bytes()).unwrap();
        let bytes = write(&tensors, &layout).unwrap();
        assert!(NetTensors::of_spec_net(&SpecNet::from_bytes(&bytes).unwrap()) == tensors);
        let screlu = crate::nnue::random_network(FeatureSetKind::All768, "16x2:screlu", 4);
        let as_v2 = write(&described(&screlu.to_bytes()).unwrap(), &layout).unwrap();
        let as_v2 = SpecNet::from_bytes(&as_v2).unwrap();
        let board = shakmaty::Board::default();
        assert_eq!(
            as_v2
                .evaluate_board(&board, shakmaty::Color::Black)
                .unwrap(),
            screlu
                .evaluate_board(&board, shakmaty::Color::Black)
                .unwrap()
        );

        // Damage: the tensor count, the first record's name, the NetSpec, a record's shape.
        let spec = NetSpec::preset("all768", "16x2-8").unwrap();
        let count_at = 12 + 4 + spec_json(&spec).len() + 4 + tensors.description.len();
        let err = |bytes: &[u8]| read(bytes, &layout, spec.clone()).unwrap_err().to_string();
        let mut bad = bytes.clone();
        bad[count_at] = 5;
        assert!(
            err(&bad).contains(&format!("the tensor count at byte {count_at} is 5")),
            "{}",
            err(&bad)
        );
        let mut bad = bytes.clone();
        bad[count_at + 4 + 2] = b'x';
        assert!(
            err(&bad).starts_with("tensor ft.weight (ft.weight): the record at byte"),
            "{}",
            err(&bad)
        );
        let other = NetSpec::preset("all768", "16x2-16").unwrap();
        let e = read(&bytes, &layout, other).unwrap_err().to_string();
        assert!(e.contains("describes another net"), "{e}");
        let e = read(&bytes[..bytes.len() - 2], &layout, spec.clone())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("bytes, the layout \"lakefish\" for this net makes"),
            "{e}"
        );
    }
}
