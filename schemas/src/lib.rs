//! The vocabulary every other lakefish crate shares: lake table schemas (Arrow), job payloads
//! (versioned serde types), validated names and the manifests written next to the data.
//!
//! Architecture invariant: this crate does no I/O and knows nothing about tokio, object
//! storage or chess rules. Anything here can be used from a browser, a test or a worker.

pub mod config;
pub mod datagen;
pub mod dataset;
pub mod engines;
pub mod experiment;
pub mod export;
pub mod games;
pub mod job;
pub mod json;
pub mod layout;
pub mod mask;
pub mod names;
pub mod nets;
pub mod netspec;
pub mod pipeline;
pub mod positions;
pub mod schedule;
pub mod shuffle;
pub mod sprt;
pub mod train;
pub mod transform;

/// Lower-case hex SHA-256: net names, token hashes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub use datagen::DatagenSpec;
pub use dataset::{DatasetManifest, InputReport, PartInfo, SkippedGame, SkippedRange};
pub use job::{
    IngestBinpackSpec, IngestSpec, JOB_PAYLOAD_VERSION, JobId, JobKind, JobRecord, JobSpec,
    JobState, ProfileSpec, Progress, QueuedJob, Requested, SpecError,
};
pub use mask::{MaskDefinition, MaskManifest, MaskName, MaskRule, MaskSpec};
pub use names::{DatasetName, NameError, Source, raw_key};
pub use nets::{NetManifest, QuantizationError, QuantizeReport, QuantizeSpec, RegisterSpec};
pub use shuffle::{ShuffleManifest, ShufflePlan, ShuffleSpec, ShuffleTask};
pub use sprt::{SprtBatch, SprtPlan, SprtSpec, SprtState, SprtStatus, SprtTask};
pub use train::{DeviceChoice, FeatureSet, LossName, RunRecord, TrainSpec};
pub use transform::TransformSpec;
