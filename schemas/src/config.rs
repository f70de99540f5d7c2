//! `lakefish.toml`: the one configuration file of a running service (server, auth tokens,
//! pipelines), versioned, with unknown keys rejected, plus `LAKEFISH__SECTION__KEY=value`
//! environment overrides. Parsing only; the file is read by the binary, once, at start.

use crate::names::check_segment;
use crate::{DatagenSpec, DatasetName, MaskName, QuantizeSpec, Source, SprtSpec, TrainSpec};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The only configuration version this build reads.
pub const CONFIG_VERSION: u32 = 1;
/// Environment variables with this prefix override config keys: `LAKEFISH__AUTH__ANONYMOUS_READ
/// =true` sets `auth.anonymous_read`. Keys are lower-cased; `__` separates table levels.
pub const ENV_PREFIX: &str = "LAKEFISH__";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{origin}: {message}")]
    Parse { origin: String, message: String },
    #[error(
        "{origin}: version {found} is not supported (this lakefish reads version {CONFIG_VERSION})"
    )]
    Version { origin: String, found: u32 },
    #[error("{origin}: {key}: {message}")]
    Invalid {
        origin: String,
        key: String,
        message: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Must be [`CONFIG_VERSION`]: a file written for another version is refused, not guessed at.
    pub version: u32,
    #[serde(default)]
    pub server: ServerConfig,
    #[serde(default)]
    pub auth: AuthConfig,
    /// Pipelines by name (`[pipelines.nightly]`).
    #[serde(default)]
    pub pipelines: BTreeMap<String, PipelineConfig>,
    /// Which local files work arriving through the API or the queue may read.
    #[serde(default)]
    pub inputs: InputsConfig,
    /// What the server removes on its own (`[retention]`); absent: nothing without a command.
    #[serde(default)]
    pub retention: Option<RetentionConfig>,
}

/// `[retention]`: `lakefish gc` with these settings, run by the server's scheduler every
/// `every_hours` and reported on `/ui/space`. Nothing a registered net's lineage, an
/// unfinished run or a queued or running job needs is ever removed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionConfig {
    /// The newest checkpoints kept of every finished run (at least 1).
    #[serde(default = "default_keep_checkpoints")]
    pub keep_checkpoints: usize,
    /// Remove shuffles no run has been trained on for this many days, unless a registered
    /// net's lineage names them (a tombstone marks them for the runs that used them).
    #[serde(default)]
    pub unused_shuffle_days: Option<u32>,
    /// Hours between two collections (the first comes this long after the server starts).
    #[serde(default = "default_every_hours")]
    pub every_hours: u32,
}

fn default_keep_checkpoints() -> usize {
    2
}

fn default_every_hours() -> u32 {
    24
}

/// Jobs submitted over the API or taken from the queue read `lake:` objects, and local files
/// only under these directories (on the API host and on every worker). The CLI running a job
/// in-process for its own user is not bound by this.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputsConfig {
    /// Directories whose files (after resolving symlinks and `..`) such jobs may read.
    /// Empty (the default): `lake:` objects only.
    #[serde(default)]
    pub local_roots: Vec<String>,
}

impl Default for Config {
    /// What a service without a config file runs with: no tokens (open API), no pipelines.
    fn default() -> Self {
        Config {
            version: CONFIG_VERSION,
            server: ServerConfig::default(),
            auth: AuthConfig::default(),
            pipelines: BTreeMap::new(),
            inputs: InputsConfig::default(),
            retention: None,
        }
    }
}

/// Settings of `lakefish serve` / `worker`. Command-line flags and their `LAKEFISH_*`
/// variables win over these; these win over the built-in defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    pub lake: Option<String>,
    pub listen: Option<String>,
    pub redis: Option<String>,
    pub queue_db: Option<String>,
    /// Where job records are kept (`--metastore`): sqlite:PATH, postgres://... or lake.
    pub metastore: Option<String>,
    /// Largest accepted JSON request body, bytes (raw uploads have their own, larger limit).
    pub max_body_bytes: Option<usize>,
    /// Largest accepted upload (`PUT /v1/raw/...`, `PUT /v1/books/...`), bytes; default 64 GiB.
    pub max_upload_bytes: Option<u64>,
    pub log_json: Option<bool>,
    /// Lets `serve` listen beyond loopback without any token configured: the API is then open
    /// to everyone who can reach it. Off by default; the name is meant to be read aloud.
    pub open_api_without_tokens: Option<bool>,
    /// Lets the routes that run code on workers (engine registration and removal) answer
    /// when no token is configured. Off by default: without tokens, any web page the
    /// operator visits could send such requests to a loopback server.
    pub admin_without_tokens: Option<bool>,
    /// Host names the API answers to besides IP addresses, `localhost` and this machine's
    /// host name (a DNS-rebinding page arrives with a name of its own).
    pub allowed_hosts: Option<Vec<String>>,
    /// Seconds a client may take to send a request's headers, counted from the connection
    /// opening or its previous answer, so also how long a quiet connection stays (default 10).
    pub header_timeout_secs: Option<u64>,
    /// Seconds a request body may stall between two pieces (default 30).
    pub body_timeout_secs: Option<u64>,
    /// Connections served at once; more wait to be accepted (default 512).
    pub max_connections: Option<usize>,
}

impl ServerConfig {
    /// Seconds, 1 to 3600.
    pub fn header_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.header_timeout_secs.unwrap_or(10).clamp(1, 3600))
    }
    /// Seconds, 1 to 3600.
    pub fn body_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.body_timeout_secs.unwrap_or(30).clamp(1, 3600))
    }
    /// 1 to 65536.
    pub fn max_connections(&self) -> usize {
        self.max_connections.unwrap_or(512).clamp(1, 65536)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// GET anything.
    Read,
    /// Submit jobs, SPRT tests and raw uploads.
    Submit,
    /// Run pipelines by hand; implies the others.
    Admin,
}

impl Scope {
    pub const ALL: [Scope; 3] = [Scope::Read, Scope::Submit, Scope::Admin];

    /// The scope named as in the config file (`read`, `submit`, `admin`).
    pub fn parse(name: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|s| s.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Submit => "submit",
            Scope::Admin => "admin",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// Without tokens the API is open (fine on loopback). With tokens, every request needs one,
    /// except reads when this is true.
    #[serde(default)]
    pub anonymous_read: bool,
    #[serde(default)]
    pub tokens: Vec<TokenConfig>,
}

/// A token as stored: its SHA-256 only (`lakefish token new` prints both).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenConfig {
    pub name: String,
    /// Lower-case hex SHA-256 of the token.
    pub sha256: String,
    pub scopes: Vec<Scope>,
}

/// The SHA-256 a token is stored under.
pub fn token_sha256(token: &str) -> String {
    crate::sha256_hex(token.as_bytes())
}

impl AuthConfig {
    pub fn enabled(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// The token's entry, if the presented token is one of ours.
    pub fn find(&self, presented: &str) -> Option<&TokenConfig> {
        let hash = token_sha256(presented);
        self.tokens.iter().find(|t| t.sha256 == hash)
    }
}

impl TokenConfig {
    pub fn allows(&self, needed: Scope) -> bool {
        self.scopes.contains(&needed) || self.scopes.contains(&Scope::Admin)
    }
}

/// Raw files a pipeline picks up: every file under `prefix` not ingested before becomes a
/// dataset of its own (named after the file), of this source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineInput {
    pub source: Source,
    /// A lake prefix under `raw/`, e.g. `raw/binpack/`.
    pub prefix: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineShuffle {
    pub chunks: u32,
    #[serde(default)]
    pub seed: u64,
}

/// The parameters of one step: its job spec's fields without those the run fills in (the
/// dataset, shuffle, run or nets of the run), checked by building the spec.
pub type StepParams = serde_json::Map<String, serde_json::Value>;

/// Training parameters: a [`TrainSpec`] without the shuffle, plus `warm_start`: begin from
/// the float weights of the current best net when it has the same features and architecture.
// No deny_unknown_fields here (serde cannot combine it with flatten): the keys are checked by
// building a TrainSpec in `Config::validate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PipelineTrain {
    #[serde(default = "yes")]
    pub warm_start: bool,
    /// Train parameters that replace `params` in a round that warm-starts (a lower `lr`,
    /// fewer `epochs`): `[pipelines.NAME.train.warm]`.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub warm: StepParams,
    #[serde(flatten)]
    pub params: StepParams,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineConfig {
    /// Cron expression, six fields, seconds first, UTC (`0 0 3 * * *`: 03:00 every day).
    /// Without one the pipeline runs only when triggered.
    #[serde(default)]
    pub schedule: Option<String>,
    #[serde(default)]
    pub inputs: Vec<PipelineInput>,
    /// Self-play games at the start of each run: a [`DatagenSpec`] without the dataset.
    #[serde(default)]
    pub datagen: Option<StepParams>,
    /// The mask that selects training rows.
    #[serde(default = "quiet")]
    pub mask: MaskName,
    /// What the mask keeps, as `lakefish mask --rule` takes it (`["quiet", "wld",
    /// "random-skip=3"]`); default `quiet`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mask_rules: Vec<String>,
    /// The seed of the mask's random rules.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub mask_seed: u64,
    pub shuffle: PipelineShuffle,
    pub train: PipelineTrain,
    /// A [`QuantizeSpec`] without the run.
    #[serde(default)]
    pub quantize: StepParams,
    /// The SPRT of the new net against the current best (classical before any promotion): an
    /// [`SprtSpec`] without `new` and `base`; `book` is a lake key (`lake:raw/books/x.epd`).
    pub sprt: StepParams,
}

fn yes() -> bool {
    true
}
fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}
fn quiet() -> MaskName {
    MaskName::new("quiet").expect("a valid name")
}

/// A step's spec: the configured parameters plus what the run fills in.
fn step_spec<T: serde::de::DeserializeOwned>(
    params: &StepParams,
    filled: &[(&str, serde_json::Value)],
) -> Result<T, String> {
    let mut all = params.clone();
    for (k, v) in filled {
        if all.contains_key(*k) {
            return Err(format!("`{k}` is set by the pipeline run; remove it"));
        }
        all.insert(k.to_string(), v.clone());
    }
    serde_path_to_error::deserialize(serde_json::Value::Object(all)).map_err(|e| {
        match e.path().to_string().as_str() {
            "." => e.inner().to_string(),
            path => format!("{path}: {}", e.inner()),
        }
    })
}

impl PipelineConfig {
    /// The mask definition each dataset of a run gets; an error names its key (`mask` or
    /// `mask_rules`).
    pub fn mask_definition(&self) -> Result<crate::MaskDefinition, (&'static str, String)> {
        let rules = match self.mask_rules.is_empty() {
            true => vec![crate::MaskRule::Quiet],
            false => self
                .mask_rules
                .iter()
                .map(|r| crate::MaskRule::parse(r))
                .collect::<Result<_, _>>()
                .map_err(|e| ("mask_rules", e))?,
        };
        if self.mask.as_str() == "quiet" && rules != [crate::MaskRule::Quiet] {
            // The datasets' quiet masks are the quiet rule's: another definition needs its
            // own name beside them.
            return Err((
                "mask",
                "name the mask these rules make; \"quiet\" is the quiet rule's".into(),
            ));
        }
        let d = crate::MaskDefinition {
            name: self.mask.clone(),
            rules,
            seed: self.mask_seed,
            ..crate::MaskDefinition::quiet()
        };
        d.validate().map_err(|e| ("mask_rules", e))?;
        Ok(d)
    }

    pub fn datagen_spec(&self, dataset: &DatasetName) -> Option<Result<DatagenSpec, String>> {
        let params = self.datagen.as_ref()?;
        Some(
            step_spec::<DatagenSpec>(params, &[("dataset", dataset.as_str().into())])
                .and_then(|s| s.validate().map(|()| s)),
        )
    }

    pub fn train_spec(&self, shuffle: &str, resume: Option<&str>) -> Result<TrainSpec, String> {
        let mut filled = vec![("shuffle", shuffle.into())];
        if let Some(r) = resume {
            filled.push(("resume", r.into()));
        }
        let spec: TrainSpec = step_spec(&self.train.params, &filled)?;
        spec.validate()?;
        Ok(spec)
    }

    /// [`PipelineConfig::train_spec`] for a round that warm-starts: `train.warm` replaces
    /// the keys it names.
    pub fn warm_train_spec(&self, shuffle: &str) -> Result<TrainSpec, String> {
        let mut params = self.train.params.clone();
        for (k, v) in &self.train.warm {
            params.insert(k.clone(), v.clone());
        }
        let spec: TrainSpec = step_spec(&params, &[("shuffle", shuffle.into())])
            .map_err(|e| format!("train.warm: {e}"))?;
        spec.validate()?;
        Ok(spec)
    }

    pub fn quantize_spec(&self, run: &str) -> Result<QuantizeSpec, String> {
        let spec: QuantizeSpec = step_spec(&self.quantize, &[("run", run.into())])?;
        spec.validate()?;
        Ok(spec)
    }

    /// The gate's test: on the clock ([`crate::sprt::PIPELINE_DEFAULT_TC`]) unless the config
    /// names a time control or asks for a node limit explicitly.
    pub fn sprt_spec(&self, new: &str, base: &str) -> Result<SprtSpec, String> {
        let mut filled = vec![("new", new.into()), ("base", base.into())];
        if !self.sprt.contains_key("tc") && !self.sprt.contains_key("nodes") {
            filled.push(("tc", crate::sprt::PIPELINE_DEFAULT_TC.into()));
        }
        let spec: SprtSpec = step_spec(&self.sprt, &filled)?;
        spec.validate()?;
        Ok(spec)
    }
}

impl Config {
    /// Parses a config file's text, applies the environment overrides, and checks it all.
    /// `origin` names the file in errors.
    pub fn parse(
        origin: &str,
        text: &str,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Config, ConfigError> {
        let parse_err = |message: String| ConfigError::Parse {
            origin: origin.to_string(),
            message,
        };
        let mut table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| parse_err(e.to_string().trim_end().replace('\n', " ")))?;
        let mut overrides: Vec<(String, String)> = env
            .into_iter()
            .filter(|(k, _)| k.starts_with(ENV_PREFIX))
            .collect();
        overrides.sort();
        for (key, value) in overrides {
            apply_override(&mut table, &key, &value)
                .map_err(|m| parse_err(format!("{key}: {m}")))?;
        }
        let version = table.get("version").and_then(|v| v.as_integer());
        match version {
            Some(v) if v == CONFIG_VERSION as i64 => {}
            Some(v) => {
                return Err(ConfigError::Version {
                    origin: origin.into(),
                    found: v.clamp(0, u32::MAX as i64) as u32,
                });
            }
            None => {
                return Err(parse_err(format!(
                    "`version = {CONFIG_VERSION}` is missing"
                )));
            }
        }
        let config: Config =
            serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
                ConfigError::Invalid {
                    origin: origin.into(),
                    key: e.path().to_string(),
                    message: e.inner().to_string(),
                }
            })?;
        config.validate(origin)?;
        Ok(config)
    }

    fn validate(&self, origin: &str) -> Result<(), ConfigError> {
        let invalid = |key: String, message: String| ConfigError::Invalid {
            origin: origin.into(),
            key,
            message,
        };
        if let Some(r) = &self.retention {
            if r.keep_checkpoints == 0 {
                return Err(invalid(
                    "retention.keep_checkpoints".into(),
                    "at least 1: a resume starts from the last checkpoint".into(),
                ));
            }
            if r.every_hours == 0 {
                return Err(invalid("retention.every_hours".into(), "at least 1".into()));
            }
        }
        let mut names = std::collections::HashSet::new();
        for (i, t) in self.auth.tokens.iter().enumerate() {
            let key = format!("auth.tokens[{i}]");
            if t.name.is_empty() || !names.insert(t.name.as_str()) {
                return Err(invalid(
                    key,
                    format!("token names must be unique and non-empty ({:?})", t.name),
                ));
            }
            if t.sha256.len() != 64
                || !t
                    .sha256
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            {
                return Err(invalid(
                    format!("{key}.sha256"),
                    "must be 64 lower-case hex digits (`lakefish token new` prints one)".into(),
                ));
            }
            if t.scopes.is_empty() {
                return Err(invalid(
                    format!("{key}.scopes"),
                    "name at least one scope".into(),
                ));
            }
        }
        for (name, p) in &self.pipelines {
            let key = format!("pipelines.{name}");
            check_segment("pipeline name", name, 64)
                .map_err(|e| invalid(key.clone(), e.to_string()))?;
            if let Some(s) = &p.schedule {
                let fields = s.split_whitespace().count();
                if !(6..=7).contains(&fields) {
                    return Err(invalid(
                        format!("{key}.schedule"),
                        format!(
                            "{s:?} has {fields} fields; write six, seconds first (\"0 0 3 * * *\")"
                        ),
                    ));
                }
            }
            for (i, input) in p.inputs.iter().enumerate() {
                if input.source == Source::Selfplay {
                    return Err(invalid(
                        format!("{key}.inputs[{i}].source"),
                        "selfplay data comes from the datagen step; inputs are binpack or lichess"
                            .into(),
                    ));
                }
                if !input.prefix.starts_with("raw/") || input.prefix.contains("..") {
                    return Err(invalid(
                        format!("{key}.inputs[{i}].prefix"),
                        format!("{:?} must be a lake prefix under raw/", input.prefix),
                    ));
                }
            }
            if p.inputs.is_empty() && p.datagen.is_none() {
                return Err(invalid(
                    key,
                    "has neither inputs nor datagen: nothing to train on".into(),
                ));
            }
            let step = |name: &str, r: Result<(), String>| {
                r.map_err(|m| invalid(format!("{key}.{name}"), m))
            };
            let ds = DatasetName::new("check").expect("valid");
            if let Some(r) = p.datagen_spec(&ds) {
                step("datagen", r.map(drop))?;
            }
            if let Err((field, m)) = p.mask_definition() {
                return Err(invalid(format!("{key}.{field}"), m));
            }
            step("train", p.train_spec("sh-000000000000", None).map(drop))?;
            step("train", p.warm_train_spec("sh-000000000000").map(drop))?;
            step("quantize", p.quantize_spec("run-000000000000").map(drop))?;
            step("sprt", p.sprt_spec("best", "best").map(drop))?;
            let book = p.sprt.get("book").and_then(|b| b.as_str()).unwrap_or("");
            if !book.starts_with("lake:raw/") {
                return Err(invalid(
                    format!("{key}.sprt.book"),
                    format!("{book:?} must be a lake key, lake:raw/... (upload the book first)"),
                ));
            }
            if p.shuffle.chunks < 2 {
                return Err(invalid(
                    format!("{key}.shuffle.chunks"),
                    "needs at least 2 chunks (one is held out for validation)".into(),
                ));
            }
        }
        Ok(())
    }
}

/// Datasets a pipeline ingests are named after the raw file: its stem, cleaned to a
/// [`DatasetName`] (the name stays recognisable; a hash keeps distinct files apart).
pub fn dataset_for_raw_file(key: &str) -> DatasetName {
    let file = key.rsplit('/').next().unwrap_or(key);
    let stem = file.split('.').next().unwrap_or(file);
    let mut clean: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(40)
        .collect();
    if clean.is_empty() || !clean.as_bytes()[0].is_ascii_alphanumeric() {
        clean.insert(0, 'f');
    }
    let hash = &token_sha256(key)[..8];
    DatasetName::new(&format!("{clean}-{hash}")).expect("cleaned to valid characters")
}

fn apply_override(table: &mut toml::Table, key: &str, value: &str) -> Result<(), String> {
    let path: Vec<String> = key[ENV_PREFIX.len()..]
        .split("__")
        .map(|s| s.to_ascii_lowercase())
        .collect();
    if path.iter().any(|p| p.is_empty()) {
        return Err("empty key segment".into());
    }
    // A value that parses as TOML keeps its type (true, 3, ["a"]); anything else is a string.
    let parsed = format!("v = {value}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(value.to_string()));
    let (last, parents) = path.split_last().expect("non-empty");
    let mut here = table;
    for p in parents {
        let entry = here
            .entry(p.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        here = entry
            .as_table_mut()
            .ok_or_else(|| format!("{p} is not a table"))?;
    }
    here.insert(last.clone(), parsed);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = include_str!("../../infra/lakefish.toml");

    #[test]
    fn the_example_in_infra_loads() {
        let c = Config::parse("infra/lakefish.toml", EXAMPLE, []).unwrap();
        assert!(c.pipelines.contains_key("nightly"));
        assert!(c.auth.enabled());
        let p = &c.pipelines["nightly"];
        p.train_spec("sh-0123456789ab", None).unwrap();
        assert_eq!(p.sprt_spec("nn-0123456789ab", "best").unwrap().elo1, 2.0);
    }

    /// A gate plays on the clock unless its config asks for nodes; whichever it plays is what
    /// its result is labelled with; asking for both is refused.
    #[test]
    fn a_pipeline_gate_plays_on_the_clock_unless_nodes_are_asked_for() {
        let gate = |sprt: &str| {
            let text = format!(
                "version = 1\n[pipelines.p]\n[[pipelines.p.inputs]]\nsource = \"binpack\"\n\
                 prefix = \"raw/binpack/\"\n[pipelines.p.shuffle]\nchunks = 2\n[pipelines.p.train]\n\
                 [pipelines.p.sprt]\nbook = \"lake:raw/books/b.epd\"\n{sprt}"
            );
            Config::parse("test.toml", &text, [])
                .map(|c| c.pipelines["p"].sprt_spec("nn-0123456789ab", "best"))
        };
        let clock = gate("").unwrap().unwrap();
        assert_eq!(clock.tc.as_deref(), Some(crate::sprt::PIPELINE_DEFAULT_TC));
        assert!(clock.on_the_clock());
        assert_eq!(clock.conditions(), "tc 8+0.08");
        let nodes = gate("nodes = 2000").unwrap().unwrap();
        assert!(!nodes.on_the_clock());
        assert_eq!(
            nodes.conditions(),
            "2000 nodes a move (fixed nodes, not on the clock)"
        );
        assert_eq!(
            gate("tc = \"2+0.02\"").unwrap().unwrap().conditions(),
            "tc 2+0.02"
        );
        let both = gate("nodes = 2000\ntc = \"2+0.02\"");
        let e = match both {
            Err(e) => e.to_string(),
            Ok(spec) => spec.unwrap_err(),
        };
        assert!(e.contains("give nodes or tc, not both"), "{e}");
    }

    /// A pipeline's mask takes rules as `lakefish mask --rule` does; a bad one is refused
    /// when the config loads, naming the key.
    #[test]
    fn retention_is_off_unless_configured_and_checked() {
        assert!(Config::default().retention.is_none());
        let c = Config::parse(
            "t.toml",
            "version = 1\n[retention]\nunused_shuffle_days = 30\n",
            [],
        )
        .unwrap();
        let r = c.retention.unwrap();
        assert_eq!(
            (r.keep_checkpoints, r.every_hours, r.unused_shuffle_days),
            (2, 24, Some(30))
        );
        let e = Config::parse(
            "t.toml",
            "version = 1\n[retention]\nkeep_checkpoints = 0\n",
            [],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("retention.keep_checkpoints"), "{e}");
        let e = Config::parse("t.toml", "version = 1\n[retention]\nkeep = 3\n", [])
            .unwrap_err()
            .to_string();
        assert!(e.contains("keep"), "{e}");
    }

    #[test]
    fn a_pipeline_mask_takes_rules() {
        let with = |mask: &str| {
            let text = format!(
                "version = 1\n[pipelines.p]\n{mask}\n[[pipelines.p.inputs]]\n\
                 source = \"binpack\"\nprefix = \"raw/binpack/\"\n[pipelines.p.shuffle]\nchunks = 2\n\
                 [pipelines.p.train]\n[pipelines.p.sprt]\nbook = \"lake:raw/books/b.epd\""
            );
            Config::parse("test.toml", &text, []).map(|c| c.pipelines["p"].mask_definition())
        };
        let d = with("mask = \"thin\"\nmask_rules = [\"quiet\", \"random-skip=3\"]\nmask_seed = 4")
            .unwrap()
            .unwrap();
        assert_eq!((d.name.as_str(), d.rules.len(), d.seed), ("thin", 2, 4));
        assert_eq!(with("").unwrap().unwrap().rules, [crate::MaskRule::Quiet]);
        for (mask, key, says) in [
            (
                "mask = \"t\"\nmask_rules = [\"early-skip\"]",
                "pipelines.p.mask_rules",
                "needs a value",
            ),
            (
                "mask_rules = [\"wld\"]",
                "pipelines.p.mask",
                "name the mask",
            ),
        ] {
            let e = with(mask).unwrap_err().to_string();
            assert!(e.contains(key) && e.contains(says), "{e}");
        }
    }

    /// `train.warm` replaces the keys it names in a round that warm-starts; a bad one is
    /// refused when the config loads, naming it.
    #[test]
    fn warm_rounds_take_their_own_train_settings() {
        let quality = include_str!("../../infra/quality.toml");
        let c = Config::parse("infra/quality.toml", quality, []).unwrap();
        let p = &c.pipelines["quality"];
        let cold = p.train_spec("sh-0123456789ab", None).unwrap();
        let warm = p.warm_train_spec("sh-0123456789ab").unwrap();
        assert_eq!((cold.lr, cold.epochs), (0.002, 8));
        assert_eq!((warm.lr, warm.epochs), (0.001, 6));
        assert_eq!(warm.arch, cold.arch);

        let text = quality.replace(
            "[pipelines.quality.train.warm]\n",
            "[pipelines.quality.train.warm]\nlrr = 1\n",
        );
        let e = Config::parse("q.toml", &text, []).unwrap_err().to_string();
        assert!(e.contains("train.warm") && e.contains("lrr"), "{e}");
    }

    #[test]
    fn unknown_keys_and_versions_are_refused() {
        let e = Config::parse(
            "x.toml",
            "version = 1\n[server]\nlisten = \"a\"\nlistn = 3\n",
            [],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("listn"), "{e}");
        let e = Config::parse("x.toml", "version = 2\n", [])
            .unwrap_err()
            .to_string();
        assert!(e.contains("version 2 is not supported"), "{e}");
        let e = Config::parse("x.toml", "[server]\n", [])
            .unwrap_err()
            .to_string();
        assert!(e.contains("version = 1"), "{e}");
        let e = Config::parse("x.toml", "version = 1\nserver = [\n", [])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("x.toml: "), "{e}");
    }

    #[test]
    fn environment_overrides_win_and_keep_types() {
        let env = [
            (
                "LAKEFISH__SERVER__LISTEN".to_string(),
                "127.0.0.1:9".to_string(),
            ),
            (
                "LAKEFISH__AUTH__ANONYMOUS_READ".to_string(),
                "true".to_string(),
            ),
            (
                "LAKEFISH__SERVER__MAX_BODY_BYTES".to_string(),
                "1000".to_string(),
            ),
            ("OTHER".to_string(), "x".to_string()),
        ];
        let c = Config::parse(
            "x.toml",
            "version = 1\n[server]\nlisten = \"0.0.0.0:1\"\n",
            env,
        )
        .unwrap();
        assert_eq!(c.server.listen.as_deref(), Some("127.0.0.1:9"));
        assert!(c.auth.anonymous_read);
        assert_eq!(c.server.max_body_bytes, Some(1000));
        let bad = [("LAKEFISH__SERVER__NOPE".to_string(), "1".to_string())];
        let e = Config::parse("x.toml", "version = 1\n", bad)
            .unwrap_err()
            .to_string();
        assert!(e.contains("nope"), "{e}");
    }

    #[test]
    fn tokens_are_checked_by_hash_and_scope() {
        let c = Config::parse("infra/lakefish.toml", EXAMPLE, []).unwrap();
        assert!(c.auth.find("not a token").is_none());
        let text = format!(
            "version = 1\n[[auth.tokens]]\nname = \"ci\"\nsha256 = \"{}\"\nscopes = [\"read\"]\n",
            token_sha256("s3cret")
        );
        let c = Config::parse("x.toml", &text, []).unwrap();
        let t = c.auth.find("s3cret").unwrap();
        assert!(t.allows(Scope::Read) && !t.allows(Scope::Submit));
        let bad = text.replace("[\"read\"]", "[\"root\"]");
        assert!(Config::parse("x.toml", &bad, []).is_err());
    }

    #[test]
    fn raw_files_get_stable_valid_dataset_names() {
        let a = dataset_for_raw_file("raw/binpack/Test80 Jan.2023.binpack");
        assert!(a.as_str().starts_with("test80-jan-"), "{a}");
        assert_eq!(
            a,
            dataset_for_raw_file("raw/binpack/Test80 Jan.2023.binpack")
        );
        assert_ne!(
            a,
            dataset_for_raw_file("raw/binpack/test80 jan.2023.binpack")
        );
        dataset_for_raw_file("raw/lichess/.hidden");
    }

    #[test]
    fn step_parameters_are_checked_as_job_specs() {
        let with = |extra: &str| {
            let text = EXAMPLE.replace(
                "[pipelines.nightly.train]\n",
                &format!("[pipelines.nightly.train]\n{extra}\n"),
            );
            Config::parse("x.toml", &text, [])
                .map(drop)
                .map_err(|e| e.to_string())
        };
        with("").unwrap();
        let e = with("epochz = 3").unwrap_err();
        assert!(
            e.contains("pipelines.nightly.train") && e.contains("epochz"),
            "{e}"
        );
        let e = with("shuffle = \"sh-0123456789ab\"").unwrap_err();
        assert!(e.contains("set by the pipeline run"), "{e}");
        let text = EXAMPLE.replace("features = \"all768\"", "features = \"halfkz\"");
        let e = Config::parse("x.toml", &text, []).unwrap_err().to_string();
        assert!(e.contains("halfkz"), "{e}");
    }
}
