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
    match spec {
        JobSpec::Train(t) => check_train(t)?,
        JobSpec::Experiment(e) => {
            check_experiment(e)?;
        }
        _ => {}
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

/// An experiment's cells, each checked as a training spec is at the door
/// ([`check_train`]), a refusal named by the axis value that caused it
/// (`axes[1].values[2]: arch: ...`).
pub fn check_experiment(
    spec: &lakefish_schemas::experiment::ExperimentSpec,
) -> Result<Vec<lakefish_schemas::experiment::Cell>, JobError> {
    // The train door names `spec.FIELD`; inside an experiment the field is the cell's.
    spec.cells_checked(&|t| {
        check_train(t).map_err(|e| {
            let e = e.to_string();
            e.strip_prefix("spec.").map_or(e.clone(), str::to_string)
        })
    })
    .map_err(JobError::Invalid)
}

#[cfg(test)]
mod experiment_tests {
    use super::*;

    /// The engine's shapes are checked per cell: a width the engine cannot build is named
    /// by its axis value; good cells pass.
    #[test]
    fn an_experiment_s_cells_pass_the_train_door() {
        let doc = |archs: &str| {
            format!(
                r#"{{"base": {{"shuffle": "sh-000000000001", "features": "all768", "arch": "256x2-32"}},
                    "axes": [{{"field": "arch", "values": {archs}}}],
                    "rating": {{"book": "lake:raw/books/b.epd", "nodes": 1000, "pairs": 2}}}}"#
            )
        };
        let (spec, _) = lakefish_schemas::experiment::ExperimentSpec::parse(&doc(
            r#"["256x2-32", "512x2-32"]"#,
        ))
        .unwrap();
        assert_eq!(check_experiment(&spec).unwrap().len(), 2);
        let (spec, _) =
            lakefish_schemas::experiment::ExperimentSpec::parse(&doc(r#"["256x2-32", "banana"]"#))
                .unwrap();
        let e = check_experiment(&spec).unwrap_err().to_string();
        assert!(
            e.contains("axes[0].values[1]: ") && e.contains("values[1]: arch: "),
            "{e}"
        );
    }
}
