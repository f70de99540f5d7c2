//! Tests of the command line's argument parsing (`cli.rs`).

use clap::CommandFactory;

/// The whole command tree is consistent, and `help_expected` makes every flag and
/// argument carry help text (a bare `--threads <THREADS>` fails here). clap checks this
/// only with debug assertions, as `make test` builds (a debug `lakefish` also refuses to
/// start with an undocumented argument).
#[test]
fn every_command_and_argument_has_help() {
    crate::cli::Cli::command().debug_assert();
}

/// `--resume` takes the net from the run unless one is given in any form: a description
/// given resumes with it alone, not beside the run's features.
#[test]
fn a_resumed_net_is_one_setting() {
    use clap::Parser;
    let dir = std::env::temp_dir().join(format!("lakefish-net-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("n.json");
    let net = lakefish_schemas::netspec::NetSpec::preset("all768", "64x2:screlu").unwrap();
    std::fs::write(&file, serde_json::to_string(&net).unwrap()).unwrap();
    let run: lakefish_schemas::TrainSpec = serde_json::from_str(
        r#"{"shuffle": "sh-0123456789ab", "features": "halfkp", "arch": "128x2-8"}"#,
    )
    .unwrap();
    let args = |extra: &[&str]| {
        let mut argv = vec!["lakefish", "train", "--shuffle", "sh-0123456789ab"];
        argv.extend(extra);
        let cli = crate::cli::Cli::try_parse_from(argv).unwrap();
        let crate::cli::Command::Train(a) = cli.command else {
            panic!("not the train command");
        };
        a
    };
    let path = file.to_str().unwrap();
    let given = ["net_spec"];
    let spec = args(&["--net-spec", path])
        .resumed_spec(&run, |id| given.contains(&id))
        .unwrap();
    assert_eq!(spec.net, Some(net));
    assert_eq!(spec.preset().unwrap().1, "64x2:screlu");
    let spec = args(&[]).resumed_spec(&run, |_| false).unwrap();
    assert_eq!(spec.preset().unwrap().1, "128x2-8", "the run's own net");
    // A preset's name where no such file exists; a name that is neither is refused.
    let spec = args(&["--net-spec", "halfkp:32x2-8"])
        .resumed_spec(&run, |id| given.contains(&id))
        .unwrap();
    assert_eq!(spec.preset().unwrap().1, "32x2-8");
    let err = args(&["--net-spec", "halfkp:banana"])
        .resumed_spec(&run, |id| given.contains(&id))
        .unwrap_err()
        .to_string();
    assert!(err.contains("--net-spec halfkp:banana"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `lakefish train` without flags asks for what a payload without fields gets.
#[test]
fn train_flags_default_to_the_spec_s_defaults() {
    use clap::Parser;
    let cli =
        crate::cli::Cli::try_parse_from(["lakefish", "train", "--shuffle", "sh-0123456789ab"])
            .unwrap();
    let crate::cli::Command::Train(args) = cli.command else {
        panic!("not the train command");
    };
    let from_json: lakefish_schemas::TrainSpec =
        serde_json::from_str(r#"{"shuffle": "sh-0123456789ab"}"#).unwrap();
    assert_eq!(args.spec().unwrap(), from_json);
}

/// Resuming a run from before defaults had generations keeps its generation (bias
/// correction, the uniform start) unless the flags say otherwise; the two bias-correction
/// flags cannot both be given; `--defaults` asks for an older generation.
#[test]
fn a_resumed_run_keeps_its_generation_of_defaults() {
    use clap::Parser;
    let args = |extra: &[&str]| {
        let mut argv = vec!["lakefish", "train", "--shuffle", "sh-0123456789ab"];
        argv.extend(extra);
        let crate::cli::Command::Train(a) = crate::cli::Cli::try_parse_from(argv)?.command else {
            panic!("not the train command");
        };
        Ok::<_, clap::Error>(a)
    };
    let record: lakefish_schemas::RunRecord = serde_json::from_value(serde_json::json!({
        "id": "run-0123456789ab", "spec": { "shuffle": "sh-0123456789ab" }, "device": "Cpu",
        "step": 10, "epoch": 0, "checkpoints": [], "train_positions": 0, "val_positions": 0,
        "val_loss": [], "material_val_loss": null, "finished": true,
        "created": "2026-11-01T00:00:00Z", "updated": "2026-11-01T00:00:00Z"
    }))
    .unwrap();
    let spec = args(&[])
        .unwrap()
        .resumed_spec(&record.spec, |_| false)
        .unwrap();
    assert_eq!(spec, record.spec);
    assert!(spec.bias_correction());
    let fresh = args(&[]).unwrap().spec().unwrap();
    assert_eq!((fresh.generation(), fresh.bias_correction()), (2, false));
    let old = args(&["--defaults", "1"]).unwrap().spec().unwrap();
    assert_eq!(
        (old.bias_correction(), old.weight_init()),
        (true, lakefish_schemas::train::WeightInit::Uniform)
    );
    let both = args(&["--bias-correction", "--no-bias-correction"])
        .err()
        .unwrap();
    assert!(both.to_string().contains("cannot be used with"), "{both}");
    for (bad, named) in [
        (["--defaults", "3"], "defaults must be 1 or 2"),
        (
            ["--weight-init", "xavier"],
            "weight_init \"xavier\" is unknown",
        ),
    ] {
        let e = args(&bad).unwrap().spec().unwrap_err().to_string();
        assert!(e.contains(named), "{bad:?}: {e}");
    }
}
