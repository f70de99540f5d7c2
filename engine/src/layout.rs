//! A described net ([`SpecNet`]) written in, and read back from, a saved layout
//! ([`Layout`]): the bytes another engine loads (bullet's `quantised.bin`, ...).
//!
//! The integers are the net's own: a layout only orders, transposes, widens and pads them,
//! so export → import → export gives the same bytes. Where a layout would need other
//! integers (another factor, a narrower type than a value needs), it is refused, naming the
//! tensor.

use crate::nnue::NnueError;
use crate::spec_net::{SpecNet, Values};
use lakefish_schemas::layout::{Layout, LayoutTensor};
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

fn dtype_bytes(d: Dtype) -> usize {
    match d {
        Dtype::I8 => 1,
        Dtype::I16 => 2,
        Dtype::I32 | Dtype::F32 => 4,
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

/// The layout entry of each of the net's file tensors, in the net's order.
fn entries<'a>(layout: &'a Layout, spec: &NetSpec) -> Result<Vec<&'a LayoutTensor>, NnueError> {
    layout
        .check(spec)
        .map_err(|e| NnueError::Layout(e.to_string()))?;
    Ok(layout.tensors.iter().collect())
}

/// A lakefish `.nnue` of either version as a described net: a version-2 file as it is, a
/// preset's (`all768` `256x2:screlu`, ...) under the NetSpec its preset name expands into,
/// its integers unchanged.
pub fn described(bytes: &[u8]) -> Result<SpecNet, NnueError> {
    if SpecNet::sniff(bytes) {
        return SpecNet::from_bytes(bytes);
    }
    let net = crate::nnue::Network::from_bytes(bytes)?;
    let spec = NetSpec::preset(net.features.name(), &net.arch.to_string())
        .map_err(|e| NnueError::Header(format!("no description for this preset: {e}")))?;
    let names = net_order(&spec);
    let mut values = vec![
        Values::I16(net.ft_weights.to_vec()),
        Values::I16(net.ft_bias.clone()),
    ];
    for d in &net.layers {
        values.push(Values::I8(d.weights.clone()));
        values.push(Values::I32(d.bias.clone()));
    }
    SpecNet::new(
        spec,
        net.description.clone(),
        names.into_iter().zip(values).collect(),
    )
}

/// The bytes of `net` in `layout`.
pub fn write(net: &SpecNet, layout: &Layout) -> Result<Vec<u8>, NnueError> {
    let tensors = net.tensors();
    let mut out = layout.header_bytes();
    for t in entries(layout, &net.spec)? {
        let (name, shape, values) = tensors
            .iter()
            .find(|(n, _, _)| *n == t.tensor)
            .expect("checked: the layout writes the net's tensors");
        let (m, n, row_major) = matrix(name, shape);
        // The file holds the column-major M×N (= row-major N×M), or with `transpose`
        // row-major M×N.
        let mut plain = Plain::of(values);
        if row_major != t.transpose {
            plain = if row_major {
                plain.transposed(m, n)
            } else {
                plain.transposed(n, m)
            };
        }
        let v = plain.to_values(t.dtype, &format!("{} ({})", t.id, t.tensor))?;
        v.write_le(&mut out);
    }
    if let Some(p) = &layout.padding {
        let fill = p.fill(out.len());
        out.extend(fill);
    }
    Ok(out)
}

/// The size of a file in `layout` for `spec`, before padding.
fn content_len(layout: &Layout, spec: &NetSpec) -> usize {
    let shapes = spec.tensors();
    layout.header_bytes().len()
        + layout
            .tensors
            .iter()
            .map(|t| {
                let n: usize = shapes
                    .iter()
                    .find(|s| s.name == t.tensor)
                    .map_or(0, |s| s.shape.iter().product());
                n * dtype_bytes(t.dtype)
            })
            .sum::<usize>()
}

/// Reads a file written in `layout` as the net `spec` describes, refusing one whose size,
/// header or padding differ from what the layout says (naming what differs) and any value
/// the net's own type cannot hold.
pub fn read(
    bytes: &[u8],
    layout: &Layout,
    spec: NetSpec,
    comment: String,
) -> Result<SpecNet, NnueError> {
    let entries = entries(layout, &spec)?;
    let content = content_len(layout, &spec);
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
    let header = layout.header_bytes();
    if bytes[..header.len()] != header[..] {
        let at = (0..header.len())
            .find(|&i| bytes[i] != header[i])
            .expect("they differ");
        return Err(NnueError::Layout(format!(
            "the file's byte {at} is {:#04x}, the layout's header has {:#04x} there",
            bytes[at], header[at]
        )));
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
    let shapes = spec.tensors();
    let mut at = header.len();
    let mut got: Vec<(String, Values)> = Vec::new();
    for t in entries {
        let shape = &shapes
            .iter()
            .find(|s| s.name == t.tensor)
            .expect("checked")
            .shape;
        let count: usize = shape.iter().product();
        let len = count * dtype_bytes(t.dtype);
        let v = Values::read_le(t.dtype, &bytes[at..at + len]);
        at += len;
        let (m, n, row_major) = matrix(&t.tensor, shape);
        let mut plain = Plain::of(&v);
        if row_major != t.transpose {
            plain = if row_major {
                plain.transposed(n, m)
            } else {
                plain.transposed(m, n)
            };
        }
        let dtype = spec.default_quant(&t.tensor).expect("checked").dtype;
        got.push((
            t.tensor.clone(),
            plain.to_values(dtype, &format!("{} ({})", t.id, t.tensor))?,
        ));
    }
    // The net's own order, whatever the layout's.
    let order: Vec<String> = net_order(&spec);
    got.sort_by_key(|(n, _)| order.iter().position(|o| o == n));
    SpecNet::new(spec, comment, got)
}

fn net_order(spec: &NetSpec) -> Vec<String> {
    spec.tensors()
        .into_iter()
        .map(|t| t.name)
        .filter(|n| n != "ft.factoriser")
        .collect()
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
        let bytes = write(&net, &layout).unwrap();
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

        let back = read(&bytes, &layout, spec(), String::new()).unwrap();
        assert_eq!(back.tensors(), net.tensors());
        assert_eq!(write(&back, &layout).unwrap(), bytes);

        // Without the transpose, input j's eight bucket weights are contiguous.
        let plain = Layout::parse(&BULLET_2.replace("transpose = true\n", "")).unwrap();
        let b2 = write(&net, &plain).unwrap();
        let at = |i: usize| i16::from_le_bytes([b2[2 * i], b2[2 * i + 1]]);
        assert_eq!(at(base + 7 * 8 + 2), ow[2 * 32 + 7]);

        // A file one byte short, a damaged pad, a value the type cannot hold: refused.
        let e = read(&bytes[..bytes.len() - 1], &layout, spec(), String::new()).unwrap_err();
        assert!(e.to_string().contains("25151 bytes"), "{e}");
        let mut bad = bytes.clone();
        *bad.last_mut().unwrap() = 0;
        let e = read(&bad, &layout, spec(), String::new()).unwrap_err();
        assert!(e.to_string().contains("padding"), "{e}");
        let narrow = Layout::parse(&BULLET_2.replace(
            "tensor = \"out.bias\"\ndtype = \"i16\"",
            "tensor = \"out.bias\"\ndtype = \"i32\"",
        ))
        .unwrap();
        let wide = write(&net, &narrow).unwrap();
        let mut big = wide.clone();
        let bias_at = 2 * (768 * 16 + 16 + 8 * 32);
        big[bias_at..bias_at + 4].copy_from_slice(&100_000i32.to_le_bytes());
        let e = read(&big, &narrow, spec(), String::new()).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("tensor l1b (out.bias): value 100000 at index 0 does not fit I16"),
            "{e}"
        );
    }
}
