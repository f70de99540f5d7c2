//! A saved layout: how a net's tensors are laid out in a file an engine loads, as one
//! versioned document (TOML or JSON), in the spirit of bullet's `SavedFormat` list.
//!
//! ```toml
//! version = 1
//! name = "bullet 2_output_buckets"
//! padding = { multiple = 64, bytes = "bullet" }   # what bullet appends to quantised.bin
//!
//! [[tensors]]
//! id = "l0w"                 # the name in the engine's code (bullet's weight id)
//! tensor = "ft.weight"       # the NetSpec tensor it holds
//! dtype = "i16"
//! factor = 255.0
//! rounding = "round"
//! [[tensors]]
//! id = "l1w"
//! tensor = "out.weight"
//! dtype = "i16"
//! factor = 64.0
//! transpose = true
//! ```
//!
//! Every tensor is a matrix `M×N` with M its outputs and N its inputs (a bias is `M×1`),
//! written column-major, little-endian, as bullet writes its weights; `transpose` writes the
//! transpose instead. The transformer's `ft.weight` is `width × inputs`, so each input's
//! column is contiguous; a layer's weight is `rows × fan_in` (rows `bucket · width ..` when
//! it has one set per output bucket), so without `transpose` each input's column of all
//! buckets is contiguous, and with it each output row is. The header's items come first,
//! then the tensors in order, then the padding.
//!
//! A layout says how a net's integers are *written*; the NetSpec's quantization says how
//! they were *made*. [`Layout::check`] names every place the two disagree.
//!
//! A self-describing format such as lakefish's own `.nnue` writes its net's description and
//! tensor count in its header (`spec`, `tensor_count` items) and a record before each tensor
//! (`record = "lakefish"`: its name, type and shape); `[rest]` writes every tensor not listed,
//! in the net's order, as the net stores it, so one layout fits every net.

use crate::netspec::{Dtype, NetSpec, Rounding};
use serde::{Deserialize, Serialize};

/// The format version of a layout document.
pub const LAYOUT_VERSION: u32 = 1;
/// Largest padding multiple a layout may ask for.
pub const MAX_PADDING: u32 = 4096;

/// The layouts lakefish ships (`infra/layouts/`), by name: `nets export --layout NAME`.
pub const SHIPPED: &[(&str, &str)] = &[
    (
        "bullet-1-simple",
        include_str!("../../infra/layouts/bullet-1-simple.toml"),
    ),
    (
        "bullet-2-output-buckets",
        include_str!("../../infra/layouts/bullet-2-output-buckets.toml"),
    ),
    (
        "bullet-3-input-buckets",
        include_str!("../../infra/layouts/bullet-3-input-buckets.toml"),
    ),
    (
        "bullet-4-multi-layer",
        include_str!("../../infra/layouts/bullet-4-multi-layer.toml"),
    ),
    (
        "stockfish-15.1",
        include_str!("../../infra/layouts/stockfish-15.1.toml"),
    ),
    (
        "lakefish",
        include_str!("../../infra/layouts/lakefish.toml"),
    ),
];

/// The NetSpecs of the nets the bullet layouts write (`infra/nets/`), in the same order
/// (Stockfish's is the preset `halfka_v2_hm:stockfish-15.1`).
pub const SHIPPED_NETS: &[(&str, &str)] = &[
    (
        "bullet-1-simple",
        include_str!("../../infra/nets/bullet-1-simple.toml"),
    ),
    (
        "bullet-2-output-buckets",
        include_str!("../../infra/nets/bullet-2-output-buckets.toml"),
    ),
    (
        "bullet-3-input-buckets",
        include_str!("../../infra/nets/bullet-3-input-buckets.toml"),
    ),
    (
        "bullet-4-multi-layer",
        include_str!("../../infra/nets/bullet-4-multi-layer.toml"),
    ),
];

/// A saved layout. See the module documentation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Layout {
    pub version: u32,
    /// What this layout is called ("bullet 1_simple", "lakefish").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Bytes before the first tensor, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub header: Vec<HeaderItem>,
    pub tensors: Vec<LayoutTensor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stacks: Option<Stacks>,
    /// After `tensors`: every tensor of the net they leave out, in the net's order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rest: Option<Rest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub padding: Option<Padding>,
}

/// Every tensor a layout's `tensors` leave out, in the net's order, each as the net stores
/// it: its type, factor and rounding, the transformer as `M×N`, a layer's weights
/// transposed (each output's row contiguous). Its id is the tensor's name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Rest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<Record>,
}

/// What is written before a tensor's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Record {
    /// lakefish's `.nnue`: the id's length (u16) and bytes, the type (u8: i8 1, i16 2,
    /// i32 4, f32 5), the rank (u8) and each dimension of the shape the net stores (u32).
    Lakefish,
}

/// The values a header's variable items stand for when written.
#[derive(Debug, Clone, Copy, Default)]
pub struct HeaderValues<'a> {
    /// The net's free-text description.
    pub description: &'a [u8],
    /// The net's NetSpec as JSON.
    pub spec: &'a [u8],
    /// How many tensor entries the file holds.
    pub tensors: u32,
}

/// One fixed item of a header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HeaderItem {
    /// A little-endian u32 constant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub u32: Option<u32>,
    /// ASCII text, written as its bytes (no length, no terminator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The net's free-text description, after its length as this type (only `"u32"`):
    /// Stockfish's header. Read back as the imported net's description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The net's NetSpec as JSON, after its length as this type (only `"u32"`): a file
    /// that describes its own net. Read back, it must be the net's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<String>,
    /// How many tensor entries follow, as this type (only `"u32"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor_count: Option<String>,
}

/// What a header item is: a constant, or one of the values a net fills in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemKind {
    Constant,
    Description,
    Spec,
    TensorCount,
}

impl HeaderItem {
    /// Which kind of item this is (the document was validated: exactly one kind is set).
    pub fn kind(&self) -> ItemKind {
        if self.description.is_some() {
            ItemKind::Description
        } else if self.spec.is_some() {
            ItemKind::Spec
        } else if self.tensor_count.is_some() {
            ItemKind::TensorCount
        } else {
            ItemKind::Constant
        }
    }

    /// The item's bytes, with `values` for the ones a net fills in.
    pub fn bytes(&self, values: &HeaderValues) -> Vec<u8> {
        let with_length = |text: &[u8]| {
            let mut out = (text.len() as u32).to_le_bytes().to_vec();
            out.extend_from_slice(text);
            out
        };
        match (&self.u32, &self.text, self.kind()) {
            (Some(v), _, _) => v.to_le_bytes().to_vec(),
            (None, Some(t), _) => t.as_bytes().to_vec(),
            (_, _, ItemKind::Description) => with_length(values.description),
            (_, _, ItemKind::Spec) => with_length(values.spec),
            _ => values.tensors.to_le_bytes().to_vec(),
        }
    }

    fn validate(&self, field: &str, in_header: bool) -> Result<(), LayoutError> {
        let set = [
            self.u32.is_some(),
            self.text.is_some(),
            self.description.is_some(),
            self.spec.is_some(),
            self.tensor_count.is_some(),
        ];
        if set.iter().filter(|s| **s).count() != 1 {
            return Err(bad(
                field,
                "give exactly one of u32, text, description, spec or tensor_count",
            ));
        }
        if let Some(t) = &self.text
            && (t.is_empty() || !t.is_ascii() || t.len() > 4096)
        {
            return Err(bad(field, "text must be 1 to 4096 ASCII characters"));
        }
        for (name, value) in [
            ("description", &self.description),
            ("spec", &self.spec),
            ("tensor_count", &self.tensor_count),
        ] {
            match value {
                Some(_) if !in_header => {
                    return Err(bad(
                        format!("{field}.{name}"),
                        format!("the {name} is written once, in the header"),
                    ));
                }
                Some(d) if d != "u32" => {
                    return Err(bad(
                        format!("{field}.{name}"),
                        format!("{d:?}: the only type it is written as is \"u32\""),
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// One tensor as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LayoutTensor {
    /// The name the engine's code gives it (bullet's weight id: `l0w`, `l1b`).
    pub id: String,
    /// The NetSpec tensor written here (`ft.weight`, `l1.bias`, `out.weight`).
    pub tensor: String,
    pub dtype: Dtype,
    /// 1.0 is written as this (1 for f32: floats are written as trained).
    pub factor: f64,
    #[serde(default)]
    pub rounding: Rounding,
    /// Write the transpose (`N×M`, column-major: each output's row contiguous).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub transpose: bool,
    /// Tensors added in before quantizing (`ft.factoriser`, repeated over the king
    /// buckets): what bullet's `.transform` merging `l0f` into `l0w` does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merge: Vec<String>,
    /// With `transpose`: each output's row of weights padded with zeros to a multiple of
    /// this many inputs (Stockfish pads its 30-input layer to 32).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pad_inputs: Option<u32>,
    /// What is written before the values (none: nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<Record>,
}

/// What is written once per output bucket, bucket 0 first, after `tensors`: Stockfish's
/// layer stacks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Stacks {
    /// Fixed items before each bucket's tensors (a hash).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefix: Vec<HeaderItem>,
    /// Tensors with a set of rows per output bucket; each writes its bucket's rows.
    pub tensors: Vec<LayoutTensor>,
}

/// Bytes appended so the file's size is a multiple of `multiple`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Padding {
    pub multiple: u32,
    /// The fill, repeated from its start (bullet: "bullet"); empty: zero bytes.
    #[serde(default)]
    pub bytes: String,
}

impl Padding {
    /// The bytes that follow `len` bytes of content.
    pub fn fill(&self, len: usize) -> Vec<u8> {
        let m = self.multiple.max(1) as usize;
        let n = (m - len % m) % m;
        let pattern = self.bytes.as_bytes();
        (0..n)
            .map(|i| {
                if pattern.is_empty() {
                    0
                } else {
                    pattern[i % pattern.len()]
                }
            })
            .collect()
    }
}

/// What is wrong with a layout, or with a layout for a net: the field (or tensor) at fault
/// and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct LayoutError {
    pub field: String,
    pub reason: String,
}

fn bad(field: impl Into<String>, reason: impl Into<String>) -> LayoutError {
    LayoutError {
        field: field.into(),
        reason: reason.into(),
    }
}

fn dtype_name(d: Dtype) -> &'static str {
    match d {
        Dtype::I8 => "i8",
        Dtype::I16 => "i16",
        Dtype::I32 => "i32",
        Dtype::F32 => "f32",
    }
}

/// Whether a tensor stored as `stored` can be written as `written`: integers as any integer
/// type (each value is checked when written), floats only as floats.
fn compatible(stored: Dtype, written: Dtype) -> bool {
    (stored == Dtype::F32) == (written == Dtype::F32)
}

impl Layout {
    /// Reads a layout from TOML or JSON; every error names the field.
    pub fn parse(text: &str) -> Result<Layout, LayoutError> {
        let layout: Layout = crate::json::parse_document(text, "layout")
            .map_err(|(field, reason)| bad(field, reason))?;
        layout.validate()?;
        Ok(layout)
    }

    /// Checks the document on its own.
    pub fn validate(&self) -> Result<(), LayoutError> {
        if self.version == 0 || self.version > LAYOUT_VERSION {
            return Err(bad(
                "version",
                format!(
                    "{} is not a layout version this lakefish reads (1 to {LAYOUT_VERSION})",
                    self.version
                ),
            ));
        }
        for (i, h) in self.header.iter().enumerate() {
            h.validate(&format!("header[{i}]"), true)?;
        }
        for (kind, name) in [
            (ItemKind::Description, "description"),
            (ItemKind::Spec, "spec"),
            (ItemKind::TensorCount, "tensor count"),
        ] {
            if self.header.iter().filter(|h| h.kind() == kind).count() > 1 {
                return Err(bad("header", format!("the {name} is written once")));
            }
        }
        if self.tensors.is_empty() && self.rest.is_none() {
            return Err(bad(
                "tensors",
                "a layout writes at least one tensor (or all of them: [rest])",
            ));
        }
        if self.rest.is_some() && self.stacks.is_some() {
            return Err(bad(
                "rest",
                "[rest] writes every tensor left, so a layout with [stacks] cannot have it",
            ));
        }
        let stacked = self.stacks.as_ref().map_or(&[][..], |s| &s.tensors[..]);
        let all: Vec<(String, &LayoutTensor)> = self
            .tensors
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("tensors[{i}]"), t))
            .chain(
                stacked
                    .iter()
                    .enumerate()
                    .map(|(i, t)| (format!("stacks.tensors[{i}]"), t)),
            )
            .collect();
        for (n, (at, t)) in all.iter().enumerate() {
            let field = |f: &str| format!("{at}.{f}");
            if t.id.is_empty() || t.id.len() > 64 {
                return Err(bad(field("id"), "1 to 64 characters"));
            }
            if all[..n].iter().any(|(_, u)| u.id == t.id) {
                return Err(bad(field("id"), format!("{:?} appears twice", t.id)));
            }
            if all[..n].iter().any(|(_, u)| u.tensor == t.tensor) {
                return Err(bad(
                    field("tensor"),
                    format!("{:?} is written twice", t.tensor),
                ));
            }
            if !t.factor.is_finite() || t.factor <= 0.0 || t.factor > 1e9 {
                return Err(bad(
                    field("factor"),
                    format!("{} is not a positive number up to 1e9", t.factor),
                ));
            }
            if t.dtype == Dtype::F32 && t.factor != 1.0 {
                return Err(bad(
                    field("factor"),
                    "f32 tensors are written as trained: the factor must be 1",
                ));
            }
            if let Some(p) = t.pad_inputs
                && (!t.transpose || !(1..=64).contains(&p))
            {
                return Err(bad(
                    field("pad_inputs"),
                    "1 to 64, with transpose = true (rows are padded)",
                ));
            }
            if t.record.is_some() && at.starts_with("stacks") {
                return Err(bad(
                    field("record"),
                    "a record describes a whole tensor, which a stack does not write",
                ));
            }
        }
        if let Some(st) = &self.stacks {
            if st.tensors.is_empty() {
                return Err(bad("stacks.tensors", "a stack writes at least one tensor"));
            }
            for (i, h) in st.prefix.iter().enumerate() {
                h.validate(&format!("stacks.prefix[{i}]"), false)?;
            }
        }
        if let Some(p) = &self.padding {
            if !(1..=MAX_PADDING).contains(&p.multiple) {
                return Err(bad(
                    "padding.multiple",
                    format!("{} is not 1 to {MAX_PADDING}", p.multiple),
                ));
            }
            if !p.bytes.is_ascii() || p.bytes.len() > 64 {
                return Err(bad("padding.bytes", "at most 64 ASCII characters"));
            }
        }
        Ok(())
    }

    /// The header's bytes, with `values` where the layout writes them.
    pub fn header_bytes(&self, values: &HeaderValues) -> Vec<u8> {
        self.header.iter().flat_map(|h| h.bytes(values)).collect()
    }

    /// This layout for `spec`'s net: `[rest]` expanded into the tensors it writes (a layout
    /// without one is returned as it is).
    pub fn for_net(&self, spec: &NetSpec) -> Layout {
        let Some(rest) = &self.rest else {
            return self.clone();
        };
        let mut out = self.clone();
        out.rest = None;
        for t in spec.tensors() {
            let listed = self
                .tensors
                .iter()
                .any(|u| u.tensor == t.name || u.merge.contains(&t.name));
            if listed || t.name == "ft.factoriser" {
                continue;
            }
            let q = spec.default_quant(&t.name).expect("the net's tensor");
            out.tensors.push(LayoutTensor {
                id: t.name.clone(),
                tensor: t.name.clone(),
                dtype: q.dtype,
                factor: q.factor,
                rounding: q.rounding,
                transpose: spec.is_layer_weight(&t.name),
                // The quantized transformer holds the factoriser merged.
                merge: if t.name == "ft.weight" && spec.factoriser() {
                    vec!["ft.factoriser".into()]
                } else {
                    Vec::new()
                },
                pad_inputs: None,
                record: rest.record,
            });
        }
        out
    }

    /// How many tensor entries a file in this layout holds for a net of `buckets` output
    /// buckets (a stack's tensors once per bucket).
    pub fn entry_count(&self, buckets: u32) -> u32 {
        let stacked = self.stacks.as_ref().map_or(0, |s| s.tensors.len() as u32);
        self.tensors.len() as u32 + stacked * buckets
    }

    /// Every tensor entry: `(in a stack, entry)`, the plain ones first.
    pub fn entries(&self) -> impl Iterator<Item = (bool, &LayoutTensor)> {
        let stacked = self.stacks.as_ref().map_or(&[][..], |s| &s.tensors[..]);
        self.tensors
            .iter()
            .map(|t| (false, t))
            .chain(stacked.iter().map(|t| (true, t)))
    }

    /// Checks that this layout writes exactly the tensors of `spec`'s quantized net, each as
    /// the NetSpec's quantization made it (another integer type is fine: each value is
    /// checked as it is written), naming the tensor where they disagree.
    pub fn check(&self, spec: &NetSpec) -> Result<(), LayoutError> {
        // A layout may come from elsewhere than `parse` (a stored engine registration).
        self.validate()?;
        if self.rest.is_some() {
            return self.for_net(spec).check(spec);
        }
        let tensors = spec.tensors();
        let factoriser = tensors.iter().any(|t| t.name == "ft.factoriser");
        let file: Vec<&str> = tensors
            .iter()
            .map(|t| t.name.as_str())
            .filter(|n| *n != "ft.factoriser")
            .collect();
        let buckets = spec.output_buckets.count() as usize;
        let mut in_stack = 0;
        let mut plain = 0;
        for (stacked, t) in self.entries() {
            let at = if stacked {
                in_stack += 1;
                format!("stacks.tensors[{}] ({})", in_stack - 1, t.id)
            } else {
                plain += 1;
                format!("tensors[{}] ({})", plain - 1, t.id)
            };
            if !file.contains(&t.tensor.as_str()) {
                return Err(bad(
                    format!("{at}.tensor"),
                    format!(
                        "the net has no tensor {:?} (it has {})",
                        t.tensor,
                        file.join(", ")
                    ),
                ));
            }
            if stacked && !spec.tensor_per_bucket(&t.tensor) {
                return Err(bad(
                    format!("{at}.tensor"),
                    format!(
                        "{} has no set of rows per output bucket ({buckets} bucket(s)), so it cannot be written per stack",
                        t.tensor
                    ),
                ));
            }
            if t.pad_inputs.is_some() && !spec.is_layer_weight(&t.tensor) {
                return Err(bad(
                    format!("{at}.pad_inputs"),
                    format!("{} is not a layer's weights", t.tensor),
                ));
            }
            let q = spec.default_quant(&t.tensor).expect("the net's tensor");
            if !compatible(q.dtype, t.dtype) {
                return Err(bad(
                    format!("{at}.dtype"),
                    format!(
                        "{} cannot hold {}, which the net stores as {} (integers are written as integers, floats as f32)",
                        dtype_name(t.dtype),
                        t.tensor,
                        dtype_name(q.dtype)
                    ),
                ));
            }
            if q.factor != t.factor {
                return Err(bad(
                    format!("{at}.factor"),
                    format!(
                        "{} is quantized with factor {} by the net's description, the layout writes {}",
                        t.tensor, q.factor, t.factor
                    ),
                ));
            }
            if q.dtype != Dtype::F32 && q.rounding != t.rounding {
                return Err(bad(
                    format!("{at}.rounding"),
                    format!(
                        "{} is quantized {:?} by the net's description, the layout says {:?}",
                        t.tensor, q.rounding, t.rounding
                    ),
                ));
            }
            for m in &t.merge {
                if m != "ft.factoriser" || t.tensor != "ft.weight" {
                    return Err(bad(
                        format!("{at}.merge"),
                        format!(
                            "{m:?}: only ft.factoriser merges, into ft.weight (as bullet merges l0f into l0w)"
                        ),
                    ));
                }
                if !factoriser {
                    return Err(bad(
                        format!("{at}.merge"),
                        "the net has no factoriser to merge",
                    ));
                }
            }
            if t.tensor == "ft.weight" && factoriser && t.merge.is_empty() {
                return Err(bad(
                    format!("{at}.merge"),
                    "the net trains a factoriser, which its quantized transformer holds merged: say merge = [\"ft.factoriser\"]",
                ));
            }
        }
        if let Some(missing) = file
            .iter()
            .find(|n| !self.entries().any(|(_, t)| t.tensor == **n))
        {
            return Err(bad(
                "tensors",
                format!("the layout leaves out {missing}, so a file in it could not be read back"),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bullet_1() -> &'static str {
        r#"
version = 1
name = "bullet 1_simple"
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
[[tensors]]
id = "l1b"
tensor = "out.bias"
dtype = "i16"
factor = 16320.0
"#
    }

    fn spec_1() -> NetSpec {
        NetSpec::parse(
            r#"
version = 1
[inputs]
family = "piece_square"
[transformer]
width = 128
activation = "screlu"
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
    fn every_shipped_layout_fits_its_net() {
        for ((name, layout), (net_name, net)) in SHIPPED.iter().zip(SHIPPED_NETS) {
            assert_eq!(name, net_name);
            let layout = Layout::parse(layout).unwrap();
            layout.check(&NetSpec::parse(net).unwrap()).unwrap();
            assert_eq!(layout.padding.unwrap().bytes, "bullet", "{name}");
        }
        let (name, sf) = SHIPPED[SHIPPED_NETS.len()];
        assert_eq!(name, "stockfish-15.1");
        let sf = Layout::parse(sf).unwrap();
        sf.check(&NetSpec::preset("halfka_v2_hm", "stockfish-15.1").unwrap())
            .unwrap();
        // Its stacks hold per-bucket tensors only: the transformer cannot be one.
        let mut wrong = sf.clone();
        let ft = wrong.tensors.remove(1);
        wrong.stacks.as_mut().unwrap().tensors.push(ft);
        let e = wrong
            .check(&NetSpec::preset("halfka_v2_hm", "stockfish-15.1").unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("stacks.tensors[6] (ft.weights).tensor:"),
            "{e}"
        );
    }

    #[test]
    fn a_layout_fits_its_net_and_bad_ones_name_the_tensor() {
        let layout = Layout::parse(bullet_1()).unwrap();
        layout.check(&spec_1()).unwrap();
        assert_eq!(layout.padding.as_ref().unwrap().fill(100).len(), 28);
        assert_eq!(&layout.padding.as_ref().unwrap().fill(120)[..], b"bulletbu");
        assert!(layout.padding.as_ref().unwrap().fill(128).is_empty());

        let err = |text: &str| Layout::parse(text).unwrap_err().to_string();
        assert!(err(&bullet_1().replace("version = 1", "version = 7")).starts_with("version:"));
        let unknown =
            err(&bullet_1().replace("factor = 255.0\n[[", "factor = 255.0\nscale = 2\n[["));
        assert!(unknown.starts_with("tensors[0]"), "{unknown}");
        assert!(
            err(&bullet_1().replace("\"l0b\"", "\"l0w\"")).starts_with("tensors[1].id:"),
            "a duplicate id"
        );
        assert!(err(&bullet_1().replace("multiple = 64", "multiple = 0")).starts_with("padding"));

        let check = |text: String| {
            Layout::parse(&text)
                .unwrap()
                .check(&spec_1())
                .unwrap_err()
                .to_string()
        };
        let e = check(bullet_1().replace("\"out.bias\"", "\"l2.bias\""));
        assert!(
            e.starts_with("tensors[3] (l1b).tensor: the net has no tensor"),
            "{e}"
        );
        let e = check(bullet_1().replace("factor = 64.0", "factor = 128.0"));
        assert!(e.starts_with("tensors[2] (l1w).factor:"), "{e}");
        let e = check(bullet_1().replace(
            "id = \"l0w\"\ntensor = \"ft.weight\"\ndtype = \"i16\"\nfactor = 255.0",
            "id = \"l0w\"\ntensor = \"ft.weight\"\ndtype = \"f32\"\nfactor = 1.0",
        ));
        assert!(
            e.starts_with("tensors[0] (l0w).dtype: f32 cannot hold"),
            "{e}"
        );
        // The output bias left out: a file without it could not be read back.
        let short = bullet_1()
            .split("[[tensors]]\nid = \"l1b\"")
            .next()
            .unwrap()
            .to_string();
        let e = check(short);
        assert!(
            e.starts_with("tensors: the layout leaves out out.bias"),
            "{e}"
        );
        // A wider type than the net stores is fine.
        Layout::parse(&bullet_1().replace(
            "tensor = \"out.bias\"\ndtype = \"i16\"",
            "tensor = \"out.bias\"\ndtype = \"i32\"",
        ))
        .unwrap()
        .check(&spec_1())
        .unwrap();
    }

    /// lakefish's own layout fits every net, preset or described; the items a net fills in
    /// are refused where they cannot be, naming the field.
    #[test]
    fn the_lakefish_layout_fits_every_net() {
        let (_, text) = SHIPPED.iter().find(|(n, _)| *n == "lakefish").unwrap();
        let layout = Layout::parse(text).unwrap();
        let mut specs: Vec<NetSpec> = SHIPPED_NETS
            .iter()
            .map(|(_, t)| NetSpec::parse(t).unwrap())
            .collect();
        specs.push(NetSpec::preset("halfka_v2_hm", "stockfish-15.1").unwrap());
        specs.push(NetSpec::preset("all768", "256x2-32-32").unwrap());
        for spec in &specs {
            layout.check(spec).unwrap();
            let full = layout.for_net(spec);
            assert!(full.rest.is_none());
            // Every file tensor once, the factoriser merged into the transformer.
            let names: Vec<&str> = full.tensors.iter().map(|t| t.tensor.as_str()).collect();
            let want: Vec<String> = spec
                .tensors()
                .into_iter()
                .map(|t| t.name)
                .filter(|n| n != "ft.factoriser")
                .collect();
            assert_eq!(names, want);
            assert_eq!(
                full.entry_count(spec.output_buckets.count()),
                want.len() as u32
            );
        }
        let err = |text: String| Layout::parse(&text).unwrap_err().to_string();
        let e = err(text.replace("{ tensor_count = \"u32\" },", "{ spec = \"u32\" },"));
        assert!(e.starts_with("header: the spec is written once"), "{e}");
        let e = err(text.replace("{ spec = \"u32\" }", "{ spec = \"u16\" }"));
        assert!(e.starts_with("header[2].spec: \"u16\""), "{e}");
        let e = err(text.replace("{ u32 = 2 }", "{ u32 = 2, text = \"x\" }"));
        assert!(e.starts_with("header[1]: give exactly one of"), "{e}");
        let e = err(format!(
            "{text}\n[stacks]\nprefix = [{{ tensor_count = \"u32\" }}]\n[[stacks.tensors]]\nid = \"a\"\ntensor = \"l1.bias\"\ndtype = \"i32\"\nfactor = 1.0\n"
        ));
        assert!(e.starts_with("rest:"), "{e}");
        let e = err(text.replace(
            "tensors = []\n\n[rest]\nrecord = \"lakefish\"\n",
            "tensors = []\n",
        ));
        assert!(
            e.starts_with("tensors: a layout writes at least one tensor"),
            "{e}"
        );
        let (_, sf) = SHIPPED
            .iter()
            .find(|(n, _)| *n == "stockfish-15.1")
            .unwrap();
        let e = err(sf.replace(
            "prefix = [{ u32 = 0x63336A4A }]",
            "prefix = [{ tensor_count = \"u32\" }]",
        ));
        assert!(
            e.starts_with(
                "stacks.prefix[0].tensor_count: the tensor_count is written once, in the header"
            ),
            "{e}"
        );
    }
}
