//! `lakefish`: the one binary. Parses the command line, loads the config, and hands each
//! command to its module: the service (`serve`), the engine, a job run in this process
//! (`local`), the HTTP client (`client`, `--api` modes), the lake's listings or a benchmark.

mod backend;
mod cli;
mod cli_progress;
mod client;
mod config;
mod engine_cmd;
mod engines_cmd;
mod experiment_cmd;
mod export_cmd;
mod lake_cmd;
mod local;
mod nets_cmd;
mod pipeline_cmd;
mod serve;
mod sprt_cmd;
mod train_args;
mod transform_cmd;

use cli::{Cli, Command, IngestCommand, TokenCommand};
use config::{apply_config, init_logging, load_config};
use lakefish_schemas::JobSpec;
use local::run_here;

fn main() -> anyhow::Result<()> {
    let matches = <Cli as clap::CommandFactory>::command().get_matches();
    let mut cli = <Cli as clap::FromArgMatches>::from_arg_matches(&matches)?;
    // `check-config FILE` checks FILE (with the overrides), not the defaults or --config.
    if let Command::CheckConfig { file } = &cli.command {
        return config::check_config(file.clone().or(cli.config.clone()));
    }
    let mut config = load_config(cli.config.as_deref())?;
    apply_config(&mut cli, &matches, &config);
    init_logging(cli.log_json);
    // The engine runs without the multi-threaded runtime: the search owns the threads.
    if let Command::Engine(args) = cli.command {
        return engine_cmd::run(&cli.lake, args);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let lake = cli.lake.as_str();
    let here = |spec: JobSpec, threads: Option<usize>| run_here(lake, rt.handle(), spec, threads);
    match cli.command {
        Command::Engine(_) => unreachable!("handled above"),
        Command::Sprt(a) => rt.block_on(sprt_cmd::run(lake, rt.handle(), a)),
        Command::Gauntlet(a) => rt.block_on(sprt_cmd::gauntlet(lake, rt.handle(), a)),
        Command::Datagen(a) => here(JobSpec::Datagen(a.spec()?), a.threads),
        Command::Transform { what } => here(JobSpec::Transform(what.spec()?), what.threads()),
        Command::Serve {
            listen,
            queue,
            work,
            no_workers,
            no_scheduler,
            open_api_without_tokens,
        } => {
            if open_api_without_tokens {
                config.server.open_api_without_tokens = Some(true);
            }
            rt.block_on(serve::serve(
                lake,
                &listen,
                queue,
                work,
                (no_workers, no_scheduler),
                config,
            ))
        }
        Command::Worker {
            redis,
            work,
            name,
            meta,
        } => rt.block_on(serve::worker(lake, redis, work, (name, meta), &config)),
        Command::Ingest {
            what: IngestCommand::Binpack(a),
        } => here(
            JobSpec::IngestBinpack(cli::ingest_spec(&a, false)?),
            a.threads,
        ),
        Command::Ingest {
            what: IngestCommand::Pgn(a),
        } => here(JobSpec::IngestPgn(cli::ingest_spec(&a, false)?), a.threads),
        Command::Ingest {
            what: IngestCommand::Plain(a),
        } => here(
            JobSpec::IngestPlain(cli::ingest_spec(&a, false)?),
            a.threads,
        ),
        Command::Ingest {
            what: IngestCommand::Bullet(a),
        } => here(
            JobSpec::IngestBullet(cli::ingest_spec(&a, false)?),
            a.threads,
        ),
        Command::Mask(a) => here(JobSpec::Mask(a.spec()?), a.threads),
        Command::Train(a) => {
            let spec = match &a.resume {
                // Settings not given are the run's own.
                Some(run) => {
                    let l = config::open_existing_lake(lake)?;
                    let rec = rt
                        .block_on(lakefish_jobs::nets::read_run(&l, run))?
                        .ok_or_else(|| anyhow::anyhow!("--resume: run {run} does not exist"))?;
                    let given = matches
                        .subcommand_matches("train")
                        .expect("the train command");
                    a.resumed_spec(&rec.spec, |id| {
                        given.value_source(id) == Some(clap::parser::ValueSource::CommandLine)
                    })?
                }
                None => a.spec()?,
            };
            here(JobSpec::Train(spec), a.threads)
        }
        Command::Quantize(a) => here(JobSpec::Quantize(a.spec()?), a.threads),
        Command::Register(a) => here(JobSpec::Register(a.spec()?), None),
        Command::Shuffle(a) => here(JobSpec::Shuffle(a.spec()?), a.threads),
        Command::Engines { api, what } => rt.block_on(engines_cmd::run(lake, api, what)),
        Command::Nets { api, what } => rt.block_on(nets_cmd::run(lake, api, what)),
        Command::Runs { id, metrics, json } => rt.block_on(lake_cmd::runs(lake, id, metrics, json)),
        Command::Datasets { json } => rt.block_on(lake_cmd::datasets(lake, json)),
        Command::Chunk {
            shuffle,
            index,
            limit,
            json,
        } => lake_cmd::chunk(&rt, lake, &shuffle, index, limit, json),
        Command::Upload {
            files,
            source,
            replace,
        } => rt.block_on(lake_cmd::upload(lake, &files, &source, replace)),
        Command::Synth { out, games, seed } => lake_cmd::synth(&out, games, seed),
        Command::Submit {
            api,
            wait,
            upload,
            replace,
            what,
        } => rt.block_on(client::submit(&api, wait, upload, replace, what)),
        Command::Jobs {
            api,
            state,
            kind,
            json,
            id,
            cancel,
        } => match (cancel, id) {
            (true, Some(id)) => rt.block_on(client::cancel_job(&api, &id)),
            (_, id) => rt.block_on(client::show_jobs(&api, state, kind, id, json)),
        },
        Command::Pipeline(a) => rt.block_on(pipeline_cmd::run(a)),
        Command::Experiment { what } => experiment_cmd::run(lake, rt.handle(), what),
        Command::Export(a) => export_cmd::run(lake, rt.handle(), a),
        Command::Profile(a) => lake_cmd::profile(lake, rt.handle(), a),
        Command::Du(a) => lake_cmd::du(lake, rt.handle(), a),
        Command::Gc(a) => lake_cmd::gc(lake, rt.handle(), a),
        Command::Rm(a) => lake_cmd::rm(lake, rt.handle(), a),
        Command::Bench { args } => bench(args),
        Command::Token {
            what: TokenCommand::New { name, scopes },
        } => config::new_token(&name, &scopes),
        Command::Metastore { what, queue } => rt.block_on(serve::metastore(lake, what, queue)),
        Command::CheckConfig { file } => config::check_config(file.or(cli.config.clone())),
    }
}

/// `lakefish bench ARGS`: `lakefish-bench ARGS`, found beside this binary (else on PATH).
/// The benchmarks are a binary of their own so that this one links none of them.
fn bench(args: Vec<String>) -> anyhow::Result<()> {
    use std::os::unix::process::CommandExt;
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("lakefish-bench")))
        .filter(|p| p.exists());
    let program = beside.unwrap_or_else(|| "lakefish-bench".into());
    let err = std::process::Command::new(&program).args(&args).exec();
    anyhow::bail!(
        "cannot run {}: {err}. The benchmarks are a binary of their own, built beside lakefish \
         by `make bench` (or `cargo build --release --bin lakefish-bench`)",
        program.display()
    )
}
