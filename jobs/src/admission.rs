//! Specs checked at the door: what can be known about a job without running it is checked
//! when it is submitted (by the API, before anything is recorded or queued) and again where
//! it runs, by the same functions. A refusal names the spec field (`spec.arch: ...`).
//!
//! What needs the job's own inputs to exist (a shuffle committed, a run to resume) stays a
//! worker's check: a pipeline or a user may queue a train job behind the shuffle it reads.

use crate::JobError;
use lakefish_lake::Lake;
use lakefish_schemas::train::{FtUpdate, TrainedNet};
use lakefish_schemas::{DeviceChoice, FeatureSet, JobSpec, TrainSpec};

/// Everything about `spec` that holds or fails whatever the lake holds, and the sides of an
/// SPRT or self-play job (engines registered, their options allowed).
pub async fn check(lake: &Lake, spec: &JobSpec) -> Result<(), JobError> {
    if let JobSpec::Train(t) = spec {
        check_train(t)?;
    }
    crate::engines::check_sides(lake, spec).await
}

/// A training spec's architecture, its fit with the feature set, and the transformer update
/// on the device asked for.
pub fn check_train(spec: &TrainSpec) -> Result<(), JobError> {
    // With a description, what it expands to is its fault, not fields the user never sent.
    let bad = |field: &str, why: String| {
        let field = if spec.net.is_some() { "net" } else { field };
        Err(JobError::Invalid(format!("spec.{field}: {why}")))
    };
    // A description names its own fields (`net.inputs.layout: ...`).
    let (features, arch) = match spec
        .trained_net()
        .map_err(|e| JobError::Invalid(format!("spec.{e}")))?
    {
        TrainedNet::Preset(features, arch) => (features, arch),
        TrainedNet::Described(_) => {
            // Sparse trains any described net on the CPU: in the fused step where its shape
            // allows (`NetSpec::sparse_update`), else in the general one.
            if spec.ft_update == FtUpdate::Sparse && spec.device == DeviceChoice::Cuda {
                return Err(JobError::Invalid(
                    "spec.ft_update: sparse runs on the CPU only; this run asks for cuda \
                     (use auto or dense)"
                        .into(),
                ));
            }
            return Ok(());
        }
    };
    if arch == crate::foreign_nets::STOCKFISH_ARCH {
        if features != FeatureSet::HalfKaV2Hm {
            return bad(
                "features",
                format!(
                    "architecture {arch} takes features halfka_v2_hm (Stockfish 15.1's), not {}",
                    features.as_str()
                ),
            );
        }
    } else if let Err(e) = lakefish_engine::nnue::Arch::parse(&arch) {
        return bad(
            "arch",
            format!(
                "{e} (WIDTHx2-H1-H2 such as 256x2-32-32, WIDTHx2:screlu, or {})",
                crate::foreign_nets::STOCKFISH_ARCH
            ),
        );
    }
    if spec.ft_update == FtUpdate::Sparse && spec.device == DeviceChoice::Cuda {
        return bad(
            "ft_update",
            "sparse runs on the CPU only; this run asks for cuda (use auto or dense)".into(),
        );
    }
    Ok(())
}
