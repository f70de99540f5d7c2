//! Engines as registered things, and the sides of a match.
//!
//! An engine is a command workers can run (a path that exists on every worker, or a binary
//! uploaded to the lake and named by its sha256) plus default UCI options: `engines/<name>.json`.
//! lakefish's own engine is always there, named `lakefish`, and plays in-process.
//!
//! A side of a match is written `ENGINE[+NET][,OPTION=VALUE...]`, or as JSON fields. A bare
//! net name (`nn-….nnue`, `best`, `classical`) still means lakefish's engine with that net.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub const ENGINES_PREFIX: &str = "engines";
/// Uploaded engine binaries: `engines/bin/<sha256>`.
pub const ENGINE_BINARIES: &str = "engines/bin";
/// The engine every lakefish build carries, played in-process.
pub const BUILTIN_ENGINE: &str = "lakefish";
/// A `command` that names an uploaded binary: `lake:engines/bin/<sha256>`.
pub const UPLOADED_PREFIX: &str = "lake:engines/bin/";

pub fn engine_key(name: &str) -> String {
    format!("{ENGINES_PREFIX}/{name}.json")
}

/// A registered engine (`POST /v1/engines`, `lakefish engines add`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EngineSpec {
    /// Letters, digits, `.`, `_`, `-`; not `lakefish`, `best`, `classical`, nor `nn-…`.
    pub name: String,
    /// An absolute path that exists on the workers, or `lake:engines/bin/<sha256>` for a
    /// binary uploaded to the lake (each worker fetches it and checks its sha256).
    pub command: String,
    /// Arguments given to the command.
    #[serde(default)]
    pub args: Vec<String>,
    /// UCI options set before every game (a side's own options override them).
    #[serde(default)]
    pub options: BTreeMap<String, String>,
    /// The UCI option a side's net is passed in (`ENGINE+NET`): Stockfish's `EvalFile`.
    #[serde(default = "default_net_option")]
    pub net_option: String,
    /// SHA-256 of the binary. Workers refuse to play when theirs differs.
    #[serde(default)]
    pub sha256: Option<String>,
    /// Nodes `COMMAND bench` reports. Workers run it before their first game and refuse to
    /// play when it differs (OpenBench's check that a build is the one registered).
    #[serde(default)]
    pub bench: Option<u64>,
}

fn default_net_option() -> String {
    "EvalFile".into()
}

/// Option names and values become UCI `setoption` lines: no line breaks, and no `value` in
/// a name (it would end the name early).
fn check_option(name: &str, value: &str) -> Result<(), String> {
    let bad = |s: &str| s.chars().any(|c| c.is_control());
    if name.trim().is_empty() || name.len() > 64 || bad(name) {
        return Err(format!(
            "UCI option name {name:?}: 1 to 64 printable characters"
        ));
    }
    if name.split_whitespace().any(|w| w == "value" || w == "name") {
        return Err(format!(
            "UCI option name {name:?} must not contain the word `name` or `value`"
        ));
    }
    if value.len() > 1024 || bad(value) {
        return Err(format!(
            "UCI option {name}: the value must be at most 1024 printable characters"
        ));
    }
    Ok(())
}

/// A name that is an engine's and can never be a net's or an evaluation's.
pub fn check_engine_name(name: &str) -> Result<(), String> {
    crate::names::check_segment("engine", name, 64).map_err(|e| e.to_string())?;
    if name == BUILTIN_ENGINE {
        return Err(format!(
            "{BUILTIN_ENGINE} is lakefish's own engine, always registered"
        ));
    }
    if ["best", "classical"].contains(&name) || name.starts_with("nn-") || name.ends_with(".nnue") {
        return Err(format!(
            "engine name {name:?} would read as a net: pick a name that is not best, classical, nn-… or ….nnue"
        ));
    }
    Ok(())
}

impl EngineSpec {
    pub fn validate(&self) -> Result<(), String> {
        check_engine_name(&self.name)?;
        if let Some(sha) = self.command.strip_prefix(UPLOADED_PREFIX) {
            check_sha256(sha).map_err(|e| format!("command: {e}"))?;
            if self.sha256.as_deref().is_some_and(|s| s != sha) {
                return Err("sha256 differs from the uploaded binary's".into());
            }
        } else if !self.command.starts_with('/') {
            return Err(format!(
                "command {:?} must be an absolute path on the workers, or {UPLOADED_PREFIX}<sha256>",
                self.command
            ));
        }
        if self.command.chars().any(|c| c.is_control()) || self.command.len() > 4096 {
            return Err("command holds control characters or is too long".into());
        }
        if self.args.len() > 64 || self.args.iter().any(|a| a.len() > 4096) {
            return Err("at most 64 arguments of at most 4096 bytes".into());
        }
        if self.options.len() > 64 {
            return Err("at most 64 UCI options".into());
        }
        for (k, v) in &self.options {
            check_option(k, v)?;
        }
        check_option(&self.net_option, "")?;
        if let Some(sha) = &self.sha256 {
            check_sha256(sha).map_err(|e| format!("sha256: {e}"))?;
        }
        if self.bench == Some(0) {
            return Err("bench must be a node count above 0".into());
        }
        Ok(())
    }
}

fn check_sha256(s: &str) -> Result<(), String> {
    if s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        Ok(())
    } else {
        Err(format!("{s:?} is not 64 lower-case hex digits"))
    }
}

/// A side as a request gives it: the text form, or fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum SideRequest {
    /// `ENGINE[+NET][,OPTION=VALUE...]`, or a bare net name (lakefish's engine with it).
    Text(String),
    /// The same as fields.
    Fields(SideFields),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SideFields {
    /// A registered engine, or `lakefish` (the default).
    #[serde(default)]
    pub engine: Option<String>,
    /// A registered net (`nn-….nnue`, `best`), or `classical` for lakefish's hand-written one.
    #[serde(default)]
    pub net: Option<String>,
    #[serde(default)]
    pub options: BTreeMap<String, String>,
}

impl From<&str> for SideRequest {
    fn from(s: &str) -> Self {
        SideRequest::Text(s.to_string())
    }
}

impl std::fmt::Display for SideRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SideRequest::Text(s) => f.write_str(s),
            SideRequest::Fields(x) => {
                let head = x.engine.as_deref().unwrap_or(BUILTIN_ENGINE);
                f.write_str(head)?;
                if let Some(net) = &x.net {
                    write!(f, "+{net}")?;
                }
                for (k, v) in &x.options {
                    write!(f, ",{k}={v}")?;
                }
                Ok(())
            }
        }
    }
}

/// A side parsed, before the engine registry says whether a bare word is an engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedSide {
    /// The word before `+` and `,`: an engine, or (without `+`) perhaps a net.
    pub head: String,
    /// After `+`.
    pub net: Option<String>,
    pub options: BTreeMap<String, String>,
}

impl SideRequest {
    pub fn parse(&self) -> Result<ParsedSide, String> {
        match self {
            SideRequest::Text(text) => parse_side(text),
            SideRequest::Fields(f) => {
                let side = ParsedSide {
                    head: f
                        .engine
                        .clone()
                        .or_else(|| f.net.is_none().then(String::new))
                        .unwrap_or_else(|| BUILTIN_ENGINE.to_string()),
                    net: f.net.clone(),
                    options: f.options.clone(),
                };
                if side.head.is_empty() {
                    return Err("a side needs an engine or a net".into());
                }
                check_parsed(&side)?;
                Ok(side)
            }
        }
    }
}

/// `ENGINE[+NET][,OPTION=VALUE...]`.
pub fn parse_side(text: &str) -> Result<ParsedSide, String> {
    let mut parts = text.split(',');
    let head = parts.next().unwrap_or("").trim();
    if head.is_empty() {
        return Err(format!(
            "side {text:?}: expected ENGINE[+NET][,OPTION=VALUE...] or a net name"
        ));
    }
    let (head, net) = match head.split_once('+') {
        Some((e, n)) => (e.trim(), Some(n.trim().to_string())),
        None => (head, None),
    };
    let mut options = BTreeMap::new();
    for part in parts {
        let Some((k, v)) = part.split_once('=') else {
            return Err(format!(
                "side {text:?}: {part:?} is not OPTION=VALUE (options come after a comma)"
            ));
        };
        if options
            .insert(k.trim().to_string(), v.trim().to_string())
            .is_some()
        {
            return Err(format!("side {text:?}: option {} given twice", k.trim()));
        }
    }
    let side = ParsedSide {
        head: head.to_string(),
        net,
        options,
    };
    check_parsed(&side).map_err(|e| format!("side {text:?}: {e}"))?;
    Ok(side)
}

fn check_parsed(side: &ParsedSide) -> Result<(), String> {
    if side.head.is_empty() || side.net.as_deref() == Some("") {
        return Err("an empty engine or net name".into());
    }
    if side.head.len() > 256 || side.net.as_ref().is_some_and(|n| n.len() > 256) {
        return Err("names of at most 256 characters".into());
    }
    let odd = |s: &str| s.chars().any(|c| c.is_control() || c.is_whitespace());
    if odd(&side.head) || side.net.as_deref().is_some_and(odd) {
        return Err("engine and net names hold no spaces or control characters".into());
    }
    if side.options.len() > 64 {
        return Err("at most 64 options".into());
    }
    for (k, v) in &side.options {
        check_option(k, v)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sides_parse_from_text_and_fields() {
        let s = parse_side("stockfish+nn-abc.nnue,UCI_Elo=1500, Threads = 1").unwrap();
        assert_eq!(s.head, "stockfish");
        assert_eq!(s.net.as_deref(), Some("nn-abc.nnue"));
        assert_eq!(s.options["UCI_Elo"], "1500");
        assert_eq!(s.options["Threads"], "1");
        let bare = parse_side("nn-abc.nnue").unwrap();
        assert_eq!((bare.head.as_str(), bare.net), ("nn-abc.nnue", None));
        for bad in [
            "",
            ",Hash=1",
            "sf+",
            "sf,Hash",
            "sf,Hash=1,Hash=2",
            "sf,=1",
            "sf,Hash=1\nquit",
            "sf,Move value=1",
            "nn-1.nnue\nsf",
            "sf+nn x",
        ] {
            assert!(parse_side(bad).is_err(), "{bad:?}");
        }
        let json: SideRequest =
            serde_json::from_str(r#"{"engine":"sf","options":{"UCI_Elo":"1500"}}"#).unwrap();
        assert_eq!(json.to_string(), "sf,UCI_Elo=1500");
        assert_eq!(
            json.parse().unwrap(),
            parse_side("sf,UCI_Elo=1500").unwrap()
        );
        let net_only: SideRequest = serde_json::from_str(r#"{"net":"classical"}"#).unwrap();
        assert_eq!(net_only.parse().unwrap().head, "lakefish");
        assert!(
            serde_json::from_str::<SideRequest>(r#"{"options":{}}"#)
                .unwrap()
                .parse()
                .is_err()
        );
        assert!(serde_json::from_str::<SideRequest>(r#"{"engin":"sf"}"#).is_err());
        // The text form serializes as the same string, so old tests keep their ids.
        let text: SideRequest = "best".into();
        assert_eq!(serde_json::to_string(&text).unwrap(), "\"best\"");
    }

    #[test]
    fn engine_specs_are_checked() {
        let ok = EngineSpec {
            name: "stockfish".into(),
            command: "/usr/games/stockfish".into(),
            args: vec![],
            options: BTreeMap::new(),
            net_option: default_net_option(),
            sha256: None,
            bench: None,
        };
        ok.validate().unwrap();
        let with = |f: &dyn Fn(&mut EngineSpec)| {
            let mut s = ok.clone();
            f(&mut s);
            s.validate()
        };
        for (what, err) in [
            (with(&|s| s.name = "lakefish".into()), "own engine"),
            (with(&|s| s.name = "nn-1234".into()), "read as a net"),
            (with(&|s| s.name = "../x".into()), "may only contain"),
            (with(&|s| s.command = "stockfish".into()), "absolute path"),
            (with(&|s| s.command = "lake:engines/bin/xyz".into()), "hex"),
            (with(&|s| s.sha256 = Some("ABC".into())), "hex"),
            (with(&|s| s.bench = Some(0)), "above 0"),
            (
                with(&|s| {
                    s.options.insert("Hash\n".into(), "1".into());
                }),
                "printable",
            ),
        ] {
            let e = what.expect_err(err);
            assert!(e.contains(err), "{e} lacks {err}");
        }
    }
}
