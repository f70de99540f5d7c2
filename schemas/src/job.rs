//! Job payloads and job records.
//!
//! A client sends a [`SubmitRequest`]-shaped JSON body (`{"kind": ..., "spec": {...}}`); it is
//! validated into a [`JobSpec`] by [`JobSpec::from_request`], which names the offending field.
//! The queue carries a [`QueuedJob`] (id + spec + payload version); the job's life is kept in a
//! [`JobRecord`].

use crate::shuffle::ShuffleTask;
use crate::{DatasetName, MaskSpec, ShuffleSpec, Source};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Version of the queued payload format. A worker refuses payloads from the future.
/// 2: a train spec may leave `defaults` unset; a version-1 train payload without it was
/// queued before the trainer's defaults had generations and trains as generation 1.
pub const JOB_PAYLOAD_VERSION: u32 = 2;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("request body is not valid JSON: {0}")]
    Json(String),
    #[error("request body must be a JSON object with \"kind\" and \"spec\"")]
    NotAnObject,
    #[error("unknown field {0:?} in the request (expected version, kind, spec)")]
    UnknownField(String),
    #[error("missing field {0:?}")]
    Missing(&'static str),
    #[error("field {field:?} must be {expected}")]
    WrongType {
        field: &'static str,
        expected: &'static str,
    },
    #[error("request body: {0}")]
    DuplicateKey(String),
    #[error("unsupported payload version {0} (this build understands up to {JOB_PAYLOAD_VERSION})")]
    Version(u64),
    #[error("unknown job kind {0:?} (known: {known})", known = JobKind::submittable())]
    UnknownKind(String),
    #[error("invalid spec for {kind}: {message}")]
    Invalid { kind: &'static str, message: String },
}

/// Ids are UUIDv7: unique across machines and sortable by creation time.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct JobId(String);

impl JobId {
    pub fn new() -> Self {
        Self(uuid::Uuid::now_v7().to_string())
    }

    /// Accepts only canonical UUID strings, so an id can never smuggle a path into a key.
    pub fn parse(s: &str) -> Option<Self> {
        let u = uuid::Uuid::parse_str(s).ok()?;
        (u.to_string() == s).then(|| Self(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A deterministic id (UUIDv8 from a hash of `key`): the same task queued twice gets the
    /// same id, so its record and its work are shared.
    pub fn derived(key: &str) -> Self {
        use sha2::Digest;
        let hash = sha2::Sha256::digest(key.as_bytes());
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&hash[..16]);
        Self(uuid::Uuid::new_v8(bytes).to_string())
    }
}

impl Default for JobId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The registry of job kinds: every kind, named once, with the spec type its payload carries
/// and whether clients may submit it (`submit`) or only lakefish queues it (`internal`).
///
/// Everything else about kinds is derived from this list by passing it to a macro (the
/// "callback" `$cb`): here [`JobKind`], [`JobSpec`] and its decoding; in `lakefish-jobs` the
/// dispatch to each kind's `Job` implementation; the API's schemas and the CLI's kind lists
/// come from those. Adding a kind is its module (the spec type, and its `Job` implementation)
/// and one line here.
#[macro_export]
macro_rules! job_kinds {
    ($cb:ident) => {
        $cb! {
            /// Stockfish `.binpack` files into `positions/source=binpack/dataset=<dataset>/`.
            IngestBinpack = "ingest_binpack", $crate::IngestSpec, submit;
            /// PGN files into `positions/source=lichess/dataset=<dataset>/month=YYYY-MM/`.
            IngestPgn = "ingest_pgn", $crate::IngestSpec, submit;
            /// Stockfish's `plain` text into `positions/source=plain/dataset=<dataset>/`.
            IngestPlain = "ingest_plain", $crate::IngestSpec, submit;
            /// bullet's text or bulletformat files into `positions/source=bullet/dataset=<dataset>/`.
            IngestBullet = "ingest_bullet", $crate::IngestSpec, submit;
            /// A per-position mask beside a dataset.
            Mask = "mask", $crate::MaskSpec, submit;
            /// A dataset's counts and histograms, stored beside it (`profiles/`).
            Profile = "profile", $crate::ProfileSpec, submit;
            /// A dataset written in another tool's format into `exports/<id>/`; queued, it fans
            /// out as `export_part` jobs.
            Export = "export", $crate::export::ExportSpec, submit;
            /// Datasets into shuffled chunks; queued, it fans out as `shuffle_deal` jobs.
            Shuffle = "shuffle", $crate::ShuffleSpec, submit;
            /// A training run from a shuffle's chunks.
            Train = "train", $crate::TrainSpec, submit;
            /// A run's checkpoint to a `.nnue` file, checked against the float model.
            Quantize = "quantize", $crate::QuantizeSpec, submit;
            /// A quantized checkpoint into the content-addressed registry `nets/`.
            Register = "register", $crate::RegisterSpec, submit;
            /// An SPRT match; queued, it fans out as `sprt_batch` jobs.
            Sprt = "sprt", $crate::SprtSpec, submit;
            /// Self-play games into a binpack, ingested as `positions/source=selfplay`.
            Datagen = "datagen", $crate::DatagenSpec, submit;
            /// A new dataset from a committed one, row by row (quiescence leaves, rescoring).
            Transform = "transform", $crate::TransformSpec, submit;
            /// A side's rating against a reference engine at several `UCI_Elo` levels, each a
            /// fixed-length match stored as an SPRT test; played on one worker.
            Gauntlet = "gauntlet", $crate::sprt::GauntletSpec, submit;
            /// Nets trained from a base recipe and axes, quantized, registered and rated together
            /// (`experiments/<id>/`); queued, its cells run as `experiment_cell` jobs.
            Experiment = "experiment", $crate::experiment::ExperimentSpec, submit;
            /// One batch of an SPRT's game pairs (queued by the `sprt` job and by earlier batches).
            SprtBatch = "sprt_batch", $crate::SprtTask, internal;
            /// Pass 1 of a fanned-out shuffle for one input part (queued by the `shuffle` job).
            ShuffleDeal = "shuffle_deal", $crate::ShuffleTask, internal;
            /// Pass 2 of a fanned-out shuffle for one pile (queued by the last deal).
            ShufflePile = "shuffle_pile", $crate::ShuffleTask, internal;
            /// One cell of an experiment: its net trained, quantized and registered.
            ExperimentCell = "experiment_cell", $crate::experiment::ExperimentTask, internal;
            /// One dataset part of an export (queued by the `export` job).
            ExportPart = "export_part", $crate::export::ExportTask, internal;
        }
    };
}

/// A spec type a job kind carries: checked once decoded, so a payload that cannot run is
/// refused where it enters (the API, the queue), naming the field.
pub trait KindSpec: serde::de::DeserializeOwned {
    fn validate(&self) -> Result<(), String> {
        Ok(())
    }
}

/// Spec types whose inherent `validate` is the check.
macro_rules! validated_by_inherent_method {
    ($($t:ty),*) => {
        $(impl KindSpec for $t {
            fn validate(&self) -> Result<(), String> {
                <$t>::validate(self)
            }
        })*
    };
}
validated_by_inherent_method!(
    IngestSpec,
    ShuffleSpec,
    ShuffleTask,
    crate::TrainSpec,
    crate::QuantizeSpec,
    crate::RegisterSpec,
    crate::SprtSpec,
    crate::SprtTask,
    crate::DatagenSpec,
    crate::TransformSpec,
    crate::sprt::GauntletSpec,
    crate::experiment::ExperimentSpec,
    crate::experiment::ExperimentTask,
    MaskSpec
);

/// Builds [`JobKind`] and [`JobSpec`] from the registry.
macro_rules! define_job_kinds {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal, $spec:ty, $who:ident; )*) => {
        /// Every kind of job: the `kind` of a payload is [`JobKind::as_str`].
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
            schemars::JsonSchema,
        )]
        pub enum JobKind {
            $( $(#[$doc])* #[serde(rename = $name)] $variant, )*
        }

        impl JobKind {
            pub const ALL: &'static [JobKind] = &[$(JobKind::$variant),*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(JobKind::$variant => $name,)*
                }
            }

            /// Kinds lakefish queues itself (a shuffle's passes, an SPRT's batches); clients
            /// cannot submit them.
            pub fn is_internal(self) -> bool {
                match self {
                    $(JobKind::$variant => job_kinds_is_internal!($who),)*
                }
            }
        }

        /// A validated job. Serialized as `{"kind": "...", "spec": {...}}`.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
        #[serde(tag = "kind", content = "spec")]
        pub enum JobSpec {
            $( $(#[$doc])* #[serde(rename = $name)] $variant($spec), )*
        }

        impl JobSpec {
            pub fn job_kind(&self) -> JobKind {
                match self {
                    $(JobSpec::$variant(_) => JobKind::$variant,)*
                }
            }

            /// The spec of `kind` from its JSON, validated; the error names the field.
            fn decode_kind(kind: JobKind, spec: serde_json::Value) -> Result<JobSpec, String> {
                Ok(match kind {
                    $(JobKind::$variant => JobSpec::$variant(valid::<$spec>(spec)?),)*
                })
            }
        }
    };
}

macro_rules! job_kinds_is_internal {
    (submit) => {
        false
    };
    (internal) => {
        true
    };
}

job_kinds!(define_job_kinds);

/// The body of `POST /v1/jobs`, for its schema and for clients: [`JobSpec::from_request`]
/// reads it (it also names what is wrong in a bad one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(transform = only_submittable_kinds)]
pub struct SubmitRequest {
    /// Payload version; 1 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = JOB_PAYLOAD_VERSION))]
    pub version: Option<u32>,
    #[serde(flatten)]
    pub job: JobSpec,
}

/// Drops the kinds only lakefish queues from the schema of a submission (they are refused).
fn only_submittable_kinds(schema: &mut schemars::Schema) {
    if let Some(serde_json::Value::Array(variants)) = schema.get_mut("oneOf") {
        variants.retain(|v| {
            let kind = v.pointer("/properties/kind/const").and_then(|k| k.as_str());
            !kind
                .and_then(JobKind::parse)
                .is_some_and(JobKind::is_internal)
        });
    }
}

/// Ingest files into a dataset: Stockfish `.binpack` files (`ingest_binpack`) into
/// `positions/source=binpack/dataset=<dataset>/`, or PGN (`ingest_pgn`, `.pgn` or
/// `.pgn.zst`) into `positions/source=lichess/dataset=<dataset>/month=YYYY-MM/`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IngestSpec {
    /// Local paths readable by the worker, or lake keys written as `lake:raw/...`.
    pub inputs: Vec<String>,
    pub dataset: DatasetName,
    /// Target rows per Parquet part; a part closes at the first chunk (binpack) or game (PGN)
    /// boundary after it, so games never straddle parts.
    #[serde(default = "default_rows_per_part")]
    pub rows_per_part: u64,
    /// PGN: a game longer than this many bytes (a file with no game boundaries, a runaway
    /// comment) is reported and skipped instead of being buffered whole. Default
    /// [`DEFAULT_MAX_GAME_BYTES`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_game_bytes: Option<u64>,
}

/// Far beyond any real game (Lichess games with clocks and evals take a few KiB; heavily
/// annotated ones a few hundred), small enough that one stream's buffer stays bounded.
pub const DEFAULT_MAX_GAME_BYTES: u64 = 8 << 20;
/// The range `max_game_bytes` may take.
pub const GAME_BYTES_LIMITS: std::ops::RangeInclusive<u64> = 1024..=(1 << 30);

/// Keeps a part's FEN column well inside Arrow's 2 GiB string offsets.
pub const MAX_ROWS_PER_PART: u64 = 10_000_000;

pub fn default_rows_per_part() -> u64 {
    1_000_000
}

/// The name older code and payloads use.
pub type IngestBinpackSpec = IngestSpec;

/// `profile`: one committed dataset's or shuffle's rows, histograms of score, ply, men and
/// result, repeated positions and score/result disagreement, stored beside it as
/// `profiles/source=S/dataset=D/profile.json` or `shuffled/<id>/_profile.json` (the same
/// profile for the same data, however often it runs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProfileSpec {
    /// A committed dataset (in `source`), or ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<DatasetName>,
    #[serde(default = "binpack")]
    pub source: Source,
    /// ... a committed shuffle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shuffle: Option<crate::names::ShuffleId>,
}

impl ProfileSpec {
    pub fn rows(&self) -> Result<crate::export::RowsOf, String> {
        crate::export::rows_of(
            self.dataset.as_ref(),
            self.source,
            None,
            self.shuffle.as_ref(),
        )
    }
}

fn binpack() -> Source {
    Source::Binpack
}

impl KindSpec for ProfileSpec {
    fn validate(&self) -> Result<(), String> {
        self.rows().map(|_| ())
    }
}

impl IngestSpec {
    pub fn validate(&self) -> Result<(), String> {
        if self.inputs.is_empty() {
            return Err("inputs is empty: name at least one input file".into());
        }
        if let Some(bad) = self.inputs.iter().find(|i| i.trim().is_empty()) {
            return Err(format!("input {bad:?} is empty"));
        }
        if !(1..=MAX_ROWS_PER_PART).contains(&self.rows_per_part) {
            return Err(format!(
                "rows_per_part must be between 1 and {MAX_ROWS_PER_PART}"
            ));
        }
        if let Some(n) = self.max_game_bytes
            && !GAME_BYTES_LIMITS.contains(&n)
        {
            return Err(format!(
                "max_game_bytes must be between {} and {}",
                GAME_BYTES_LIMITS.start(),
                GAME_BYTES_LIMITS.end()
            ));
        }
        Ok(())
    }

    /// The PGN game-length limit in force.
    pub fn max_game_bytes(&self) -> u64 {
        self.max_game_bytes.unwrap_or(DEFAULT_MAX_GAME_BYTES)
    }
}

impl JobKind {
    pub fn parse(name: &str) -> Option<JobKind> {
        JobKind::ALL.iter().copied().find(|k| k.as_str() == name)
    }

    /// The kinds clients may submit, for error messages and help: "ingest_binpack, ...".
    pub fn submittable() -> String {
        JobKind::ALL
            .iter()
            .filter(|k| !k.is_internal())
            .map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for JobKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl JobSpec {
    pub fn kind(&self) -> &'static str {
        self.job_kind().as_str()
    }

    /// Only a worker with a CUDA GPU may run it (a training run that asks for `cuda`); `auto`
    /// runs anywhere, on the GPU where the worker has one.
    pub fn needs_gpu(&self) -> bool {
        match self {
            JobSpec::Train(s) => s.device == crate::train::DeviceChoice::Cuda,
            JobSpec::ExperimentCell(t) => t.gpu,
            _ => false,
        }
    }

    /// Every file the job opens by name (local paths or `lake:` keys): what the input rule
    /// (`[inputs] local_roots`) is checked against at submission, and again on the worker.
    pub fn inputs(&self) -> Vec<&str> {
        match self {
            JobSpec::IngestBinpack(s)
            | JobSpec::IngestPgn(s)
            | JobSpec::IngestPlain(s)
            | JobSpec::IngestBullet(s) => s.inputs.iter().map(String::as_str).collect(),
            JobSpec::Sprt(s) => vec![s.book.as_str()],
            JobSpec::Experiment(e) => std::iter::once(e.rating.book.as_str())
                .chain(e.puzzles.iter().map(|p| p.file.as_str()))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Every side of a match the job names (an engine with options, a net): what the engine
    /// policy is checked against at submission, and again on the worker.
    pub fn sides(&self) -> Vec<(&'static str, &crate::engines::SideRequest)> {
        match self {
            JobSpec::Sprt(s) => vec![("new", &s.new), ("base", &s.base)],
            JobSpec::Datagen(d) => d.engine.iter().map(|e| ("engine", e)).collect(),
            JobSpec::Gauntlet(g) => vec![("engine", &g.engine)],
            JobSpec::Experiment(e) => e
                .rating
                .anchor
                .iter()
                .map(|a| ("rating.anchor", a))
                .collect(),
            JobSpec::Transform(t) => match &t.transform {
                crate::transform::Transform::Rescore { engine, .. } => {
                    vec![("transform.engine", engine)]
                }
                _ => Vec::new(),
            },
            _ => Vec::new(),
        }
    }

    /// Validates a raw submission body. Every error names what is wrong.
    pub fn from_request(body: &[u8]) -> Result<JobSpec, SpecError> {
        Self::decode(body, false)
    }

    fn decode(body: &[u8], internal: bool) -> Result<JobSpec, SpecError> {
        let value: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| SpecError::Json(e.to_string()))?;
        crate::json::check_no_duplicate_keys(body).map_err(SpecError::DuplicateKey)?;
        let serde_json::Value::Object(mut map) = value else {
            return Err(SpecError::NotAnObject);
        };
        if let Some(k) = map
            .keys()
            .find(|k| !matches!(k.as_str(), "version" | "kind" | "spec"))
        {
            return Err(SpecError::UnknownField(k.clone()));
        }
        if let Some(v) = map.remove("version") {
            let n = v.as_u64().ok_or(SpecError::WrongType {
                field: "version",
                expected: "a whole number from 1",
            })?;
            if n == 0 || n > JOB_PAYLOAD_VERSION as u64 {
                return Err(SpecError::Version(n));
            }
        }
        let name = match map.remove("kind") {
            Some(serde_json::Value::String(k)) => k,
            Some(_) => {
                return Err(SpecError::WrongType {
                    field: "kind",
                    expected: "a string naming a job kind",
                });
            }
            None => return Err(SpecError::Missing("kind")),
        };
        let spec = map.remove("spec").ok_or(SpecError::Missing("spec"))?;
        let kind = match JobKind::parse(&name) {
            Some(k) if internal || !k.is_internal() => k,
            _ => return Err(SpecError::UnknownKind(name)),
        };
        let invalid = |message: String| SpecError::Invalid {
            kind: kind.as_str(),
            message,
        };
        JobSpec::decode_kind(kind, spec).map_err(invalid)
    }
}

/// Deserializes a spec and checks it.
fn valid<T: KindSpec>(spec: serde_json::Value) -> Result<T, String> {
    let t: T = from_spec(spec)?;
    t.validate()?;
    Ok(t)
}

/// Deserializes a spec, naming the field at fault ("definition.min_ply: invalid value ...");
/// an error about the spec as a whole (not an object, a field missing) names `spec`.
fn from_spec<T: serde::de::DeserializeOwned>(spec: serde_json::Value) -> Result<T, String> {
    serde_path_to_error::deserialize(spec).map_err(|e| {
        let path = e.path().to_string();
        if path == "." || path.is_empty() {
            format!("spec: {}", e.inner())
        } else {
            format!("{path}: {}", e.inner())
        }
    })
}

/// What travels through the queue. The spec stays raw JSON until the worker has checked the
/// payload version, so a payload from a newer lakefish is refused with a reason instead of
/// failing to decode inside the queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QueuedJob {
    pub version: u32,
    pub id: JobId,
    /// A serialized [`JobSpec`]: `{"kind": ..., "spec": {...}}`.
    pub spec: serde_json::Value,
}

impl QueuedJob {
    pub fn new(id: JobId, spec: &JobSpec) -> Self {
        QueuedJob {
            version: JOB_PAYLOAD_VERSION,
            id,
            spec: serde_json::to_value(spec).expect("specs serialize"),
        }
    }

    /// The validated spec (checks the payload version first).
    pub fn spec(&self) -> Result<JobSpec, SpecError> {
        if self.version == 0 || self.version > JOB_PAYLOAD_VERSION {
            return Err(SpecError::Version(self.version as u64));
        }
        let mut spec = self.spec.clone();
        // Queued by a build before generations of defaults: it trains (and finds its run
        // again, delivered twice) as generation 1, what that build wrote into the run.
        if self.version < 2
            && spec.get("kind").and_then(|k| k.as_str()) == Some("train")
            && let Some(fields) = spec.get_mut("spec").and_then(|s| s.as_object_mut())
        {
            fields.entry("defaults").or_insert_with(|| 1u32.into());
        }
        JobSpec::decode(spec.to_string().as_bytes(), true)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    Queued,
    Running,
    Succeeded,
    Failed,
    /// Stopped on a user's request (`cancel` says who and when).
    Cancelled,
}

impl JobState {
    pub const ALL: [JobState; 5] = [
        JobState::Queued,
        JobState::Running,
        JobState::Succeeded,
        JobState::Failed,
        JobState::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<JobState> {
        JobState::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Ended without its result: failed or cancelled (what waits on the job stops waiting).
    pub fn ended_without_result(self) -> bool {
        matches!(self, JobState::Failed | JobState::Cancelled)
    }

    pub fn is_final(self) -> bool {
        matches!(
            self,
            JobState::Succeeded | JobState::Failed | JobState::Cancelled
        )
    }
}

/// Progress reported as data: a stage, how far, out of how much.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Progress {
    pub stage: String,
    pub done: u64,
    pub total: Option<u64>,
    /// What `done` and `total` count: "bytes", "rows", ...
    pub unit: String,
    /// Rows written so far, when the job writes rows.
    #[serde(default)]
    pub rows: u64,
}

/// The life of one job, as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobRecord {
    pub id: JobId,
    pub kind: JobKind,
    pub spec: JobSpec,
    pub state: JobState,
    pub progress: Progress,
    pub error: Option<String>,
    /// Job-specific outcome (for ingest: rows, parts, skipped ranges).
    pub result: Option<serde_json::Value>,
    /// How many times a worker started it (re-deliveries count).
    pub attempts: u32,
    pub worker: Option<String>,
    pub created: String,
    pub started: Option<String>,
    pub finished: Option<String>,
    /// Who asked to stop the job, and when. A running job stops at its next check and then
    /// turns `cancelled`; a queued one turns `cancelled` at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel: Option<Requested>,
}

/// An action a user asked for: who (a token's name, or `anonymous` where no tokens are
/// configured) and when (RFC 3339).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Requested {
    pub by: String,
    pub at: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(body: &str) -> String {
        JobSpec::from_request(body.as_bytes())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn accepts_a_valid_ingest() {
        let spec = JobSpec::from_request(
            br#"{"version":1,"kind":"ingest_binpack","spec":{"inputs":["a.binpack"],"dataset":"d1"}}"#,
        )
        .unwrap();
        let JobSpec::IngestBinpack(s) = &spec else {
            panic!("{spec:?}")
        };
        assert_eq!(s.rows_per_part, 1_000_000);
        let round: JobSpec = serde_json::from_str(&serde_json::to_string(&spec).unwrap()).unwrap();
        assert_eq!(round, spec);
    }

    /// The kinds added for data in and out refuse garbage naming the field.
    #[test]
    fn export_profile_and_new_ingest_payloads_are_checked() {
        for (body, says) in [
            (
                r#"{"kind":"export","spec":{"dataset":"d","format":"marlin"}}"#,
                "marlin",
            ),
            (
                r#"{"kind":"export","spec":{"dataset":"../d","format":"plain"}}"#,
                "dataset",
            ),
            (
                r#"{"kind":"export","spec":{"dataset":"d","format":"plain","output":"/etc/x"}}"#,
                "output",
            ),
            (
                r#"{"kind":"export_part","spec":{"export":"out-000000000000","index":0}}"#,
                "unknown job kind \"export_part\"",
            ),
            (
                r#"{"kind":"profile","spec":{"dataset":"d","source":"nfs"}}"#,
                "nfs",
            ),
            (
                r#"{"kind":"profile","spec":{"dataset":"d","extra":1}}"#,
                "extra",
            ),
            (
                r#"{"kind":"ingest_bullet","spec":{"inputs":[],"dataset":"d"}}"#,
                "inputs",
            ),
        ] {
            let e = err(body);
            assert!(e.contains(says), "{body}: {e}");
        }
        // From the queue, a part's export id becomes lake keys: only the id's own shape.
        let task = crate::export::ExportTask {
            export: "../../nets".into(),
            index: 0,
        };
        assert!(
            KindSpec::validate(&task)
                .unwrap_err()
                .contains("not an export id")
        );
        let ok = JobSpec::from_request(
            br#"{"kind":"export","spec":{"dataset":"d","format":"bulletformat"}}"#,
        )
        .unwrap();
        assert!(
            matches!(ok, JobSpec::Export(ref e) if e.source == crate::Source::Binpack && e.mask.is_none())
        );
    }

    #[test]
    fn rejects_bad_requests_with_reasons() {
        assert!(err("{").contains("not valid JSON"));
        assert!(err("[1]").contains("JSON object"));
        assert!(err(r#"{"kind":"ingest_binpack"}"#).contains("\"spec\""));
        assert!(err(r#"{"kind":"nope","spec":{}}"#).contains("unknown job kind \"nope\""));
        assert!(err(r#"{"kind":"ingest_binpack","spec":{},"x":1}"#).contains("\"x\""));
        assert!(err(r#"{"version":7,"kind":"ingest_binpack","spec":{}}"#).contains("version 7"));
        let e = err(r#"{"kind":"ingest_binpack","spec":{"inputs":["a"],"dataset":"../x"}}"#);
        assert!(e.contains("may only contain"), "{e}");
        // Found by lakefish-fuzz: a spec that is not an object named no place.
        let e = err(r#"{"kind":"train","spec":true}"#);
        assert!(e.contains("spec: invalid type: boolean"), "{e}");
        let e = err(r#"{"kind":"ingest_binpack","spec":{"inputs":[],"dataset":"x"}}"#);
        assert!(e.contains("inputs is empty"), "{e}");
        let e = err(r#"{"kind":"ingest_binpack","spec":{"inputs":["a"],"dataset":"x","bogus":1}}"#);
        assert!(e.contains("bogus"), "{e}");
        let e = err(
            r#"{"kind":"ingest_binpack","spec":{"inputs":["a"],"dataset":"x","rows_per_part":0}}"#,
        );
        assert!(e.contains("rows_per_part must be between"), "{e}");
        let e = err(
            r#"{"kind":"ingest_binpack","spec":{"inputs":["a"],"dataset":"x","rows_per_part":99999999}}"#,
        );
        assert!(e.contains("rows_per_part must be between"), "{e}");
        for bad in ["0", "100", "2000000000", "-1", "\"big\""] {
            let e = err(&format!(
                r#"{{"kind":"ingest_pgn","spec":{{"inputs":["a"],"dataset":"x","max_game_bytes":{bad}}}}}"#
            ));
            assert!(e.contains("max_game_bytes"), "{bad}: {e}");
        }
    }

    #[test]
    fn bad_mask_and_shuffle_specs_say_what_is_wrong() {
        for (body, needle) in [
            (r#"{"kind":"mask","spec":{"dataset":"d"}}"#, "definition"),
            (
                r#"{"kind":"mask","spec":{"dataset":"d","definition":{"name":"../q"}}}"#,
                "may only contain",
            ),
            (
                r#"{"kind":"mask","spec":{"dataset":"d","definition":{"name":"q","min_ply":-3}}}"#,
                "min_ply",
            ),
            (
                r#"{"kind":"mask","spec":{"dataset":"d","source":"chess.com","definition":{"name":"q"}}}"#,
                "chess.com",
            ),
            (
                r#"{"kind":"shuffle","spec":{"datasets":[],"mask":"quiet","chunks":4,"seed":1}}"#,
                "datasets is empty",
            ),
            (
                r#"{"kind":"shuffle","spec":{"datasets":["a","a"],"mask":"quiet","chunks":4,"seed":1}}"#,
                "named twice",
            ),
            (
                r#"{"kind":"shuffle","spec":{"datasets":["a"],"mask":"quiet","chunks":0,"seed":1}}"#,
                "chunks must be",
            ),
            (
                r#"{"kind":"shuffle","spec":{"datasets":["a/b"],"mask":"quiet","chunks":2,"seed":1}}"#,
                "may only contain",
            ),
            (
                r#"{"kind":"shuffle","spec":{"datasets":["a"],"mask":"quiet","chunks":2}}"#,
                "seed",
            ),
        ] {
            let e = err(body);
            assert!(e.contains(needle), "{body}: {e}");
        }
    }

    #[test]
    fn queued_payloads_from_the_future_are_refused_with_a_reason() {
        let spec = JobSpec::from_request(
            br#"{"kind":"ingest_binpack","spec":{"inputs":["a"],"dataset":"d"}}"#,
        )
        .unwrap();
        let mut q = QueuedJob::new(JobId::new(), &spec);
        assert_eq!(q.spec().unwrap(), spec);
        q.version = JOB_PAYLOAD_VERSION + 1;
        q.spec = serde_json::json!({"kind": "train_the_net", "spec": {"new": true}});
        let e = q.spec().unwrap_err().to_string();
        assert!(
            e.contains(&format!("version {}", JOB_PAYLOAD_VERSION + 1)),
            "{e}"
        );
    }

    /// Everything derived from the registry agrees with it: names, serde, the submission
    /// schema, and which kinds a client may send.
    #[test]
    fn every_registered_kind_is_named_decoded_and_described_alike() {
        let mut names = std::collections::BTreeSet::new();
        let schema = serde_json::to_value(schemars::schema_for!(SubmitRequest)).unwrap();
        let described: Vec<&str> = schema["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v.pointer("/properties/kind/const")?.as_str())
            .collect();
        for &kind in JobKind::ALL {
            let name = kind.as_str();
            assert!(names.insert(name), "{name} registered twice");
            assert_eq!(JobKind::parse(name), Some(kind));
            assert_eq!(serde_json::to_value(kind).unwrap(), name);
            assert_eq!(described.contains(&name), !kind.is_internal(), "{name}");
            // The payload names its kind; a client may not send an internal one.
            let body = format!(r#"{{"kind":"{name}","spec":{{}}}}"#);
            let refused = JobSpec::from_request(body.as_bytes()).unwrap_err();
            if kind.is_internal() {
                assert_eq!(refused, SpecError::UnknownKind(name.into()));
            } else {
                assert!(
                    matches!(&refused, SpecError::Invalid { kind: k, .. } if *k == name),
                    "{name}: {refused}"
                );
            }
        }
        assert_eq!(JobKind::parse("no_such_kind"), None);
        assert_eq!(described.len(), JobKind::submittable().split(", ").count());
    }

    #[test]
    fn job_ids_are_canonical_uuids() {
        let id = JobId::new();
        assert_eq!(JobId::parse(id.as_str()), Some(id));
        assert_eq!(JobId::parse("../jobs"), None);
        assert_eq!(JobId::parse("A1A2A3A4-0000-7000-8000-000000000000"), None);
    }

    #[test]
    fn queued_shuffle_tasks_are_checked_before_they_touch_the_lake() {
        let ok = QueuedJob {
            version: JOB_PAYLOAD_VERSION,
            id: JobId::new(),
            spec: serde_json::json!({"kind": "shuffle_pile", "spec": {"shuffle": "sh-0123456789ab", "index": 3}}),
        };
        assert!(matches!(ok.spec(), Ok(JobSpec::ShufflePile(_))));
        for bad in ["../../etc", "sh-0123", "sh-0123456789AB", ""] {
            let job = QueuedJob {
                spec: serde_json::json!({"kind": "shuffle_deal", "spec": {"shuffle": bad, "index": 0}}),
                ..ok.clone()
            };
            let e = job.spec().unwrap_err().to_string();
            // Refused as a name when it could not be one, else by the id's own form.
            assert!(
                e.contains("not a shuffle id")
                    || e.contains(&format!("shuffle name {bad:?}"))
                    || e.contains("shuffle name is empty"),
                "{bad}: {e}"
            );
        }
        // Clients cannot submit them.
        let body = br#"{"kind":"shuffle_pile","spec":{"shuffle":"sh-0123456789ab","index":0}}"#;
        assert!(matches!(
            JobSpec::from_request(body),
            Err(SpecError::UnknownKind(_))
        ));
    }

    /// A train job queued before defaults had generations (payload version 1) trains as
    /// generation 1 when delivered again after an upgrade; one queued since keeps what it says.
    #[test]
    fn a_train_job_queued_before_generations_trains_as_generation_1() {
        let queued = |version, spec| QueuedJob {
            version,
            id: JobId::new(),
            spec: serde_json::json!({"kind": "train", "spec": spec}),
        };
        let generation = |job: QueuedJob| match job.spec().unwrap() {
            JobSpec::Train(t) => t.defaults,
            other => panic!("{other:?}"),
        };
        let plain = serde_json::json!({"shuffle": "sh-0123456789ab"});
        let two = serde_json::json!({"shuffle": "sh-0123456789ab", "defaults": 2});
        assert_eq!(generation(queued(1, plain.clone())), Some(1));
        assert_eq!(generation(queued(1, two.clone())), Some(2));
        assert_eq!(generation(queued(2, plain.clone())), None);
        assert_eq!(generation(queued(2, two)), Some(2));
        // Other kinds are untouched, and a payload from the future is still refused.
        let mask = QueuedJob {
            version: 1,
            id: JobId::new(),
            spec: serde_json::json!({"kind": "mask", "spec": {"dataset": "d1", "definition": {"name": "quiet"}}}),
        };
        assert!(
            matches!(mask.spec(), Ok(JobSpec::Mask(_))),
            "{:?}",
            mask.spec()
        );
        assert!(matches!(
            queued(3, plain).spec(),
            Err(SpecError::Version(3))
        ));
    }

    #[test]
    fn derived_ids_are_stable_canonical_uuids() {
        let a = JobId::derived("sh-0123456789ab/deal/0");
        assert_eq!(a, JobId::derived("sh-0123456789ab/deal/0"));
        assert_ne!(a, JobId::derived("sh-0123456789ab/deal/1"));
        assert_eq!(JobId::parse(a.as_str()), Some(a));
    }
}
