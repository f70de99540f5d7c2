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
    /// UCI options set before every game, fixed by the admin (a side may change only those
    /// `allow` lets it).
    #[serde(default)]
    pub options: BTreeMap<String, String>,
    /// The options a side (a submitter's SPRT, datagen, gauntlet) may set, and to what. Any
    /// other option a side names is refused: 400 when the engine has no such option, 403
    /// otherwise. Checked at registration against `uci_options`; an empty rule (`{}`) allows
    /// the whole range the engine announces. Options of type `string` (files, paths) and
    /// `button` can never be allowed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allow: BTreeMap<String, OptionRule>,
    /// The options the engine announced in its `uci` answer, read by the registry when it
    /// registered the engine (a caller's list is kept only where the registry cannot run
    /// the engine itself; workers read them again before their first game).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uci_options: Vec<UciOption>,
    /// The UCI option a side's net is passed in (`ENGINE+NET`): Stockfish's `EvalFile`.
    #[serde(default = "default_net_option")]
    pub net_option: String,
    /// The net formats the engine loads through `net_option` (`stockfish`, `lakefish`):
    /// `ENGINE+NET` with a net of another format is refused before any game. Default:
    /// Stockfish's. Empty: the engine takes no registered net.
    #[serde(default = "default_net_formats")]
    pub net_formats: Vec<crate::nets::NetFormat>,
    /// The saved layout the engine loads nets in (docs/LAYOUTS.md: bullet's `quantised.bin`,
    /// your engine's own): `ENGINE+NET` then writes the net in it for the engine, and refuses
    /// a net the layout does not fit. Instead of `net_formats`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_layout: Option<crate::layout::Layout>,
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

fn default_net_formats() -> Vec<crate::nets::NetFormat> {
    vec![crate::nets::NetFormat::Stockfish]
}

/// What a side may set an allowed option to: integers in `min..=max`, or one of `values`.
/// Empty at registration: everything the engine announces for it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OptionRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

impl std::fmt::Display for OptionRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.min, self.max) {
            (Some(a), Some(b)) => write!(f, "{a}..{b}"),
            _ if !self.values.is_empty() => f.write_str(&self.values.join("|")),
            _ => f.write_str("(the engine's range)"),
        }
    }
}

impl std::str::FromStr for OptionRule {
    type Err = String;

    /// `MIN..MAX`, `A|B|C`, or empty (the engine's whole range), as `--allow NAME=RULE` takes it.
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.is_empty() {
            return Ok(OptionRule::default());
        }
        if let Some((a, b)) = s.split_once("..") {
            let int = |t: &str| {
                t.trim()
                    .parse::<i64>()
                    .map_err(|_| format!("{s:?}: expected MIN..MAX with integers"))
            };
            return Ok(OptionRule {
                min: Some(int(a)?),
                max: Some(int(b)?),
                values: Vec::new(),
            });
        }
        Ok(OptionRule {
            values: s.split('|').map(|v| v.trim().to_string()).collect(),
            ..Default::default()
        })
    }
}

/// One `option name N type T ...` line of an engine's `uci` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UciOption {
    pub name: String,
    /// `check`, `spin`, `combo`, `button` or `string`.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<i64>,
    /// A combo's choices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vars: Vec<String>,
}

impl UciOption {
    /// Reads an `option` line; `None` for anything else or a line without name and type.
    pub fn parse(line: &str) -> Option<UciOption> {
        let rest = line.trim().strip_prefix("option ")?.trim_start();
        let rest = rest.strip_prefix("name ")?;
        // Keywords split the line; a name may hold spaces (`Skill Level`).
        let words: Vec<&str> = rest.split_whitespace().collect();
        let keyword = |w: &str| matches!(w, "type" | "default" | "min" | "max" | "var");
        let mut i = 0;
        let mut name = Vec::new();
        while i < words.len() && !keyword(words[i]) {
            name.push(words[i]);
            i += 1;
        }
        let mut opt = UciOption {
            name: name.join(" "),
            kind: String::new(),
            min: None,
            max: None,
            vars: Vec::new(),
        };
        while i < words.len() {
            let key = words[i];
            i += 1;
            let mut value = Vec::new();
            while i < words.len() && !keyword(words[i]) {
                value.push(words[i]);
                i += 1;
            }
            let value = value.join(" ");
            match key {
                "type" => opt.kind = value,
                "min" => opt.min = value.parse().ok(),
                "max" => opt.max = value.parse().ok(),
                "var" => opt.vars.push(value),
                _ => {}
            }
        }
        if opt.name.is_empty() || opt.name.len() > 64 || opt.kind.is_empty() || opt.vars.len() > 256
        {
            return None;
        }
        Some(opt)
    }
}

/// Why a side's option was refused: the caller's mistake (an option the engine does not
/// have, 400) or something it may not do (403).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OptionRefusal {
    Unknown(String),
    Forbidden(String),
}

impl std::fmt::Display for OptionRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OptionRefusal::Unknown(m) | OptionRefusal::Forbidden(m) => f.write_str(m),
        }
    }
}

/// Options whose value is what a worker spends: a side may not ask for more than the
/// registration itself sets.
const RESOURCE_OPTIONS: [&str; 2] = ["Threads", "Hash"];

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
        if let Some(layout) = &self.net_layout {
            layout.validate().map_err(|e| format!("net_layout.{e}"))?;
        }
        if self.allow.len() > 64 || self.uci_options.len() > 1024 {
            return Err("at most 64 allowed options and 1024 announced ones".into());
        }
        for (k, rule) in &self.allow {
            check_option(k, "")?;
            if rule.values.len() > 256 {
                return Err(format!("allow {k}: at most 256 values"));
            }
            for v in &rule.values {
                check_option(k, v)?;
            }
            if rule.min.is_some() != rule.max.is_some()
                || (rule.min.is_some() && !rule.values.is_empty())
                || rule.min > rule.max
            {
                return Err(format!(
                    "allow {k}: give min and max (min <= max), or values, or neither"
                ));
            }
        }
        if let Some(sha) = &self.sha256 {
            check_sha256(sha).map_err(|e| format!("sha256: {e}"))?;
        }
        if self.bench == Some(0) {
            return Err("bench must be a node count above 0".into());
        }
        Ok(())
    }
}

impl EngineSpec {
    fn announced(&self, name: &str) -> Option<&UciOption> {
        self.uci_options
            .iter()
            .find(|o| o.name.eq_ignore_ascii_case(name))
    }

    /// Checks `allow` and `options` against the options the engine announced (`uci_options`,
    /// just read), and makes each empty rule the engine's whole range. Called by the registry.
    pub fn resolve_allow(&mut self) -> Result<(), String> {
        if self.uci_options.is_empty() {
            if self.allow.is_empty() {
                return Ok(());
            }
            return Err(
                "allow: the engine's own options are unknown (it announced none in answer to `uci`), so none can be allowed"
                    .into(),
            );
        }
        for name in self.options.keys() {
            if self.announced(name).is_none() {
                return Err(format!(
                    "options: engine {} has no UCI option {name:?} (it announces: {})",
                    self.name,
                    self.announced_names()
                ));
            }
        }
        let mut resolved = BTreeMap::new();
        for (name, rule) in &self.allow {
            let Some(decl) = self.announced(name) else {
                return Err(format!(
                    "allow: engine {} has no UCI option {name:?} (it announces: {})",
                    self.name,
                    self.announced_names()
                ));
            };
            let refuse = |why: String| Err(format!("allow {name}: {why}"));
            let rule = match decl.kind.as_str() {
                "spin" => {
                    let (lo, hi) = (decl.min.unwrap_or(i64::MIN), decl.max.unwrap_or(i64::MAX));
                    let mut r = rule.clone();
                    if !r.values.is_empty() {
                        if r.values.iter().any(|v| v.parse::<i64>().is_err()) {
                            return refuse("a spin option takes integers".into());
                        }
                    } else if r.min.is_none() {
                        r.min = Some(lo);
                        r.max = Some(hi);
                    }
                    let ints: Vec<i64> = match (r.min, r.max) {
                        (Some(a), Some(b)) => vec![a, b],
                        _ => r.values.iter().filter_map(|v| v.parse().ok()).collect(),
                    };
                    if ints.iter().any(|v| !(lo..=hi).contains(v)) {
                        return refuse(format!("the engine takes {lo}..{hi}"));
                    }
                    if RESOURCE_OPTIONS
                        .iter()
                        .any(|o| o.eq_ignore_ascii_case(name))
                    {
                        let own = self
                            .options
                            .iter()
                            .find(|(k, _)| k.eq_ignore_ascii_case(name))
                            .and_then(|(_, v)| v.parse::<i64>().ok());
                        let Some(own) = own else {
                            return refuse(format!(
                                "fix {name} in options first: a side may ask for at most the registration's own value"
                            ));
                        };
                        if ints.iter().any(|v| *v > own) {
                            return refuse(format!(
                                "a side may not ask for more than the registration's own {name}={own}"
                            ));
                        }
                    }
                    r
                }
                "check" | "combo" => {
                    let choices: Vec<String> = if decl.kind == "check" {
                        vec!["true".into(), "false".into()]
                    } else {
                        decl.vars.clone()
                    };
                    if rule.min.is_some() {
                        return refuse(format!("a {} option takes values, not a range", decl.kind));
                    }
                    let values = if rule.values.is_empty() {
                        choices.clone()
                    } else {
                        rule.values.clone()
                    };
                    // Each value in the engine's own spelling: that is what is sent.
                    let mut spelled = Vec::new();
                    for v in &values {
                        let Some(c) = choices.iter().find(|c| c.eq_ignore_ascii_case(v)) else {
                            return refuse(format!(
                                "{v:?} is not one of the engine's values ({})",
                                choices.join(", ")
                            ));
                        };
                        if !spelled.contains(c) {
                            spelled.push(c.clone());
                        }
                    }
                    OptionRule {
                        values: spelled,
                        ..Default::default()
                    }
                }
                other => {
                    return refuse(format!(
                        "sides may never set a {other} option (a string can name a file, a button acts); give it a fixed value in options instead"
                    ));
                }
            };
            // Under the engine's own spelling of the name: that is what is sent.
            if resolved.insert(decl.name.clone(), rule).is_some() {
                return Err(format!("allow: {} is named twice", decl.name));
            }
        }
        self.allow = resolved;
        Ok(())
    }

    fn announced_names(&self) -> String {
        let names: Vec<&str> = self.uci_options.iter().map(|o| o.name.as_str()).collect();
        names.join(", ")
    }

    /// The one rule for a side's options (checked at submission and again by the worker):
    /// each must be allowed by the registration, with a value its rule admits. Returns them
    /// under the names the registration spells them with.
    pub fn check_side_options(
        &self,
        options: &BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, String>, OptionRefusal> {
        let mut out = BTreeMap::new();
        for (name, value) in options {
            let rule = self
                .allow
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name));
            let Some((canonical, rule)) = rule else {
                if !self.uci_options.is_empty() && self.announced(name).is_none() {
                    return Err(OptionRefusal::Unknown(format!(
                        "option {name:?}: engine {} has no such UCI option (it announces: {})",
                        self.name,
                        self.announced_names()
                    )));
                }
                let allowed: Vec<String> =
                    self.allow.iter().map(|(k, r)| format!("{k}={r}")).collect();
                return Err(OptionRefusal::Forbidden(format!(
                    "option {name:?} of engine {} may not be set by a side ({}); an admin allows options when registering the engine",
                    self.name,
                    if allowed.is_empty() {
                        "it allows none".to_string()
                    } else {
                        format!("allowed: {}", allowed.join(", "))
                    }
                )));
            };
            // The value as sent: an integer as parsed, a choice in the rule's spelling.
            let sent = match (rule.min, rule.max) {
                (Some(lo), Some(hi)) => value
                    .parse::<i64>()
                    .ok()
                    .filter(|v| (lo..=hi).contains(v))
                    .map(|v| v.to_string()),
                _ => rule
                    .values
                    .iter()
                    .find(|v| v.eq_ignore_ascii_case(value))
                    .cloned(),
            };
            let Some(sent) = sent else {
                return Err(OptionRefusal::Forbidden(format!(
                    "option {name}={value:?} of engine {}: allowed values are {rule}",
                    self.name
                )));
            };
            if out.insert(canonical.clone(), sent).is_some() {
                return Err(OptionRefusal::Unknown(format!(
                    "option {canonical} is given twice (names differing only in case)"
                )));
            }
        }
        Ok(out)
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
            allow: BTreeMap::new(),
            uci_options: Vec::new(),
            net_option: default_net_option(),
            net_formats: default_net_formats(),
            net_layout: None,
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
            // A registration's layout (a request body or a stored record) is checked like a
            // layout file: here rows padded without being written row by row.
            (
                with(&|s| {
                    let mut layout =
                        crate::layout::Layout::parse(crate::layout::SHIPPED[1].1).unwrap();
                    layout.tensors[0].pad_inputs = Some(32);
                    s.net_layout = Some(layout);
                }),
                "net_layout.tensors[0].pad_inputs",
            ),
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

    #[test]
    fn option_lines_parse_and_policies_hold() {
        let lines = [
            "option name Debug Log File type string default",
            "option name Threads type spin default 1 min 1 max 1024",
            "option name Skill Level type spin default 20 min 0 max 20",
            "option name UCI_LimitStrength type check default false",
            "option name Style type combo default Normal var Solid var Normal var Risky",
            "option name Clear Hash type button",
            "option name",
            "id name x",
        ];
        let opts: Vec<UciOption> = lines.iter().filter_map(|l| UciOption::parse(l)).collect();
        assert_eq!(opts.len(), 6);
        assert_eq!(opts[0].name, "Debug Log File");
        assert_eq!(opts[0].kind, "string");
        assert_eq!((opts[2].min, opts[2].max), (Some(0), Some(20)));
        assert_eq!(opts[4].vars, ["Solid", "Normal", "Risky"]);
        let mut spec = EngineSpec {
            name: "e".into(),
            command: "/bin/e".into(),
            args: vec![],
            options: BTreeMap::from([("Threads".into(), "2".into())]),
            allow: BTreeMap::new(),
            uci_options: opts,
            net_option: default_net_option(),
            net_formats: default_net_formats(),
            net_layout: None,
            sha256: None,
            bench: None,
        };
        let allow = |rules: &[(&str, &str)]| -> BTreeMap<String, OptionRule> {
            rules
                .iter()
                .map(|(k, r)| (k.to_string(), r.parse().unwrap()))
                .collect()
        };
        for (rules, says) in [
            (&[("Debug Log File", "")][..], "never set a string option"),
            (&[("Clear Hash", "")][..], "never set a button option"),
            (&[("Threads", "1..4")][..], "Threads=2"),
            (&[("Skill Level", "-1..5")][..], "0..20"),
            (&[("Style", "Wild")][..], "not one of"),
            (&[("Nope", "")][..], "no UCI option"),
        ] {
            let mut s = spec.clone();
            s.allow = allow(rules);
            let e = s.resolve_allow().unwrap_err();
            assert!(e.contains(says), "{rules:?}: {e}");
        }
        let mut no_threads = spec.clone();
        no_threads.options.clear();
        no_threads.allow = allow(&[("Threads", "")]);
        let e = no_threads.resolve_allow().unwrap_err();
        assert!(e.contains("fix Threads in options first"), "{e}");
        spec.allow = allow(&[
            ("skill level", ""),
            ("Style", "solid|RISKY"),
            ("threads", "1..2"),
            ("UCI_LimitStrength", "TRUE"),
        ]);
        spec.resolve_allow().unwrap();
        assert_eq!(spec.allow["Skill Level"].to_string(), "0..20");
        assert_eq!(spec.allow["Style"].values, ["Solid", "Risky"]);
        let ok = spec
            .check_side_options(&BTreeMap::from([
                ("skill LEVEL".into(), "05".into()),
                ("uci_limitstrength".into(), "True".into()),
            ]))
            .unwrap();
        assert_eq!(ok["Skill Level"], "5");
        assert_eq!(ok["UCI_LimitStrength"], "true");
        let twice = spec
            .check_side_options(&BTreeMap::from([
                ("Skill Level".into(), "1".into()),
                ("skill level".into(), "2".into()),
            ]))
            .unwrap_err();
        assert!(matches!(twice, OptionRefusal::Unknown(_)), "{twice}");
        let mut dup = spec.clone();
        dup.allow = allow(&[("Style", ""), ("style", "")]);
        assert!(dup.resolve_allow().unwrap_err().contains("named twice"));
        for (k, v, forbidden) in [
            ("Skill Level", "21", true),
            ("Skill Level", "x", true),
            ("Style", "Normal", true),
            ("Debug Log File", "/etc/passwd", true),
            ("Threads", "3", true),
            ("Thraeds", "1", false),
        ] {
            let r = spec
                .check_side_options(&BTreeMap::from([(k.to_string(), v.to_string())]))
                .unwrap_err();
            assert_eq!(
                matches!(r, OptionRefusal::Forbidden(_)),
                forbidden,
                "{k}={v}: {r}"
            );
        }
        // Without the engine's own list nothing can be allowed, and nothing is unknown.
        let mut blind = spec.clone();
        blind.uci_options.clear();
        assert!(blind.resolve_allow().is_err());
        blind.allow.clear();
        blind.resolve_allow().unwrap();
        let r = blind
            .check_side_options(&BTreeMap::from([("Thraeds".into(), "1".into())]))
            .unwrap_err();
        assert!(matches!(r, OptionRefusal::Forbidden(_)));
        assert!("1..x".parse::<OptionRule>().is_err());
    }
}
