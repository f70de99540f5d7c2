//! `lakefish`: the one binary. Parses the command line, opens the lake and the queue once,
//! and hands over to the API, the workers or a job run in-process.

mod api;
mod auth;
mod charts;
mod cli_progress;
mod dashboard;
mod engine_cmd;
mod load;
mod nets_cmd;
mod pipeline_cmd;
mod queue;
mod scheduler;
mod sprt_cmd;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use lakefish_jobs::records::JobStore;
use lakefish_jobs::{JobContext, Lake};
use lakefish_schemas::config::Config;
use lakefish_schemas::{
    DatasetName, IngestBinpackSpec, JobId, JobRecord, JobSpec, JobState, MaskDefinition, MaskName,
    MaskSpec, ShuffleSpec, Source, raw_key,
};
use queue::Queue;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

#[derive(Parser)]
#[command(name = "lakefish", version, about = "NNUE training data lake and job service", long_about = None, help_expected = true)]
struct Cli {
    /// The lake: a directory, or s3://bucket/prefix (credentials and endpoint from AWS_*).
    #[arg(long, global = true, env = "LAKEFISH_LAKE", default_value = "./lake")]
    lake: String,
    /// Log as JSON lines instead of text.
    #[arg(long, global = true, env = "LAKEFISH_LOG_JSON")]
    log_json: bool,
    /// lakefish.toml: server settings, API tokens, pipelines (example: infra/lakefish.toml).
    /// Flags and their LAKEFISH_* variables win over it; LAKEFISH__SECTION__KEY overrides keys.
    #[arg(long, global = true, env = "LAKEFISH_CONFIG")]
    config: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the REST API and workers in one process.
    ///
    /// Without --redis the queue is a SQLite file (the embedded default); with --redis, any
    /// number of `lakefish worker` processes on other machines share the queue.
    Serve {
        /// Address to serve the REST API and dashboard on (host:port).
        #[arg(long, default_value = "127.0.0.1:8080", env = "LAKEFISH_LISTEN")]
        listen: String,
        #[command(flatten)]
        queue: QueueArgs,
        #[command(flatten)]
        work: WorkArgs,
        /// Serve the API only; leave the jobs to separate `lakefish worker` processes.
        #[arg(long)]
        no_workers: bool,
        /// Do not start or advance pipeline runs here (run the scheduler in one server only).
        #[arg(long)]
        no_scheduler: bool,
    },
    /// The UCI chess engine on stdin/stdout (NNUE or hand-written evaluation), or its bench.
    ///
    /// Speaks uci, isready, ucinewgame, position, go (depth, nodes, movetime, wtime/btime,
    /// winc/binc, movestogo, infinite), stop, quit, and setoption Hash / EvalFile /
    /// UCI_Chess960. `eval` prints the static evaluation of the current position.
    Engine(engine_cmd::EngineArgs),
    /// SPRT of two evaluations in colour-reversed game pairs from an opening book, played
    /// here on all cores (or queued with --api); `sprt calc` and `sprt show ID`.
    ///
    /// Counts W/D/L and pentanomial pairs, and stops when the LLR (fishtest's normalized
    /// model by default) leaves ln(β/(1-α)), ln((1-β)/α). Games go to sprt/<id>/games.pgn.
    Sprt(sprt_cmd::SprtArgs),
    /// Self-play training data: games with a few random opening plies, then searched moves;
    /// every position with its score, best move, ply and the game's result, written as a
    /// binpack (raw/selfplay/...) and ingested as positions/source=selfplay/dataset=NAME.
    Datagen(DatagenArgs),
    /// Run queued jobs from a shared Redis queue.
    Worker {
        /// The shared queue (or `server.redis` in the config).
        #[arg(long, env = "LAKEFISH_REDIS")]
        redis: Option<String>,
        #[command(flatten)]
        work: WorkArgs,
        /// Name shown in job records (default: host name and process id).
        #[arg(long)]
        name: Option<String>,
    },
    /// Run an ingest job right here, in-process, with a progress bar.
    Ingest {
        #[command(subcommand)]
        what: IngestCommand,
    },
    /// Two-pass shuffle of masked rows into chunks, in-process (both passes on all cores).
    Shuffle(ShuffleArgs),
    /// Train a net on a shuffle's chunks, in-process (CPU or CUDA), with checkpoints.
    ///
    /// The last --val-chunks chunks are held out for the per-epoch validation loss, printed
    /// beside a material-only predictor's. Writes runs/<id>/ (run.json, checkpoints/,
    /// metrics.parquet); --resume RUN continues a run from its last checkpoint, exactly.
    Train(TrainArgs),
    /// Training runs in the lake: all of them, or one with its metrics.
    Runs {
        /// One run's record with its metrics (default: all runs).
        id: Option<String>,
    },
    /// Quantize a run's checkpoint into a .nnue file (Stockfish integer scheme), in-process.
    ///
    /// The integer net is compared with the float model on lake positions (held-out chunks
    /// first); the mean and 99th-percentile differences go into the report, and a net beyond
    /// the limits is refused. Writes runs/<run>/nets/step-N.nnue and step-N.json.
    Quantize(QuantizeArgs),
    /// Register a quantized checkpoint as nets/nn-<sha256[:12]>.nnue with a manifest.
    ///
    /// Content-addressed: the same bytes registered again change nothing.
    Register(RegisterArgs),
    /// The net registry: list, show a manifest, or pull a net's file (hash-checked).
    Nets {
        /// Read through a running service instead of the lake directly.
        #[arg(long, env = "LAKEFISH_API")]
        api: Option<String>,
        #[command(subcommand)]
        what: nets_cmd::NetsCommand,
    },
    /// Write a per-position mask beside a dataset, in-process, with a progress bar.
    Mask {
        #[command(subcommand)]
        what: MaskCommand,
    },
    /// Send a job to a running `lakefish serve` instead of running it here.
    Submit {
        /// The API's base URL.
        #[arg(long, env = "LAKEFISH_API", default_value = "http://127.0.0.1:8080")]
        api: String,
        /// Wait for the job to finish, showing its progress; exit non-zero if it fails.
        #[arg(long)]
        wait: bool,
        /// Upload local input files through the API into the lake's raw/ first, so workers on
        /// any machine can read them.
        #[arg(long)]
        upload: bool,
        #[command(subcommand)]
        what: SubmitCommand,
    },
    /// Pipelines of a running service: `pipeline ls`, `pipeline run NAME --wait`.
    Pipeline(pipeline_cmd::PipelineArgs),
    /// Show jobs known to a running service: all of them, or one by id.
    Jobs {
        /// The API's base URL (LAKEFISH_TOKEN is sent when set).
        #[arg(long, env = "LAKEFISH_API", default_value = "http://127.0.0.1:8080")]
        api: String,
        /// Only jobs in this state: queued, running, succeeded, failed.
        #[arg(long)]
        state: Option<String>,
        /// One job's full record.
        id: Option<String>,
    },
    /// List the datasets committed to the lake.
    Datasets,
    /// Copy local files into the lake as raw/<source>/<file name> (prints the lake: keys).
    Upload {
        /// Local files to copy (each keeps its file name).
        #[arg(required = true)]
        files: Vec<String>,
        /// binpack, lichess or selfplay; or books (opening books, raw/books/).
        #[arg(long, default_value = "binpack")]
        source: String,
    },
    /// Measure a hot path against its reference, in the same run.
    Bench {
        #[command(subcommand)]
        what: BenchCommand,
    },
    /// API tokens: `token new NAME --scope read` prints a fresh token and its config entry.
    Token {
        #[command(subcommand)]
        what: TokenCommand,
    },
    /// Check a config file (and the LAKEFISH__* overrides) and print it as loaded.
    CheckConfig {
        /// The file (default: --config).
        file: Option<String>,
    },
    /// Write test data: a binpack of random legal games.
    Synth {
        /// Output file.
        out: String,
        /// Number of games to write.
        #[arg(long, default_value_t = 2000)]
        games: usize,
        /// The same seed writes the same file.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

#[derive(Subcommand)]
enum TokenCommand {
    /// A new random token: give the token to the client, paste the entry into lakefish.toml.
    New {
        /// A label for the token: it goes into the config entry and names the token when a
        /// request is refused for lack of scope.
        name: String,
        /// read, submit or admin (repeat the flag for several).
        #[arg(long = "scope", required = true)]
        scopes: Vec<String>,
    },
}

#[derive(clap::Args)]
struct QueueArgs {
    /// Use this Redis (redis://host:port) as the queue instead of the SQLite file.
    #[arg(long, env = "LAKEFISH_REDIS")]
    redis: Option<String>,
    /// The SQLite queue file of the embedded default.
    #[arg(
        long,
        env = "LAKEFISH_QUEUE_DB",
        default_value = "./lakefish-queue.sqlite"
    )]
    queue_db: String,
}

#[derive(clap::Args)]
struct WorkArgs {
    /// Jobs run at the same time by this process.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// CPU threads each job may use (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
}

#[derive(Subcommand)]
enum IngestCommand {
    /// Stockfish .binpack files into positions/source=binpack/dataset=NAME/.
    Binpack(BinpackArgs),
    /// PGN files (.pgn, or .pgn.zst as Lichess publishes them) into
    /// positions/source=lichess/dataset=NAME/month=YYYY-MM/ plus the games table beside it.
    ///
    /// One row per position before each move of the main line; [%eval] comments become scores
    /// (side to move, Stockfish internal units). Variant games are skipped and counted; a game
    /// with an illegal move is reported (file, game number, move) and skipped.
    Pgn(BinpackArgs),
}

#[derive(Subcommand)]
enum SubmitCommand {
    /// Queue a job from its JSON ({"kind": ..., "spec": {...}}), as POST /v1/jobs takes it.
    Json {
        /// A JSON file holding the request body: {"kind": ..., "spec": {...}}.
        file: String,
    },
    /// Queue an ingest. Local paths must be readable by the workers (or use --upload / lake:KEY).
    Ingest {
        #[command(subcommand)]
        what: IngestCommand,
    },
    /// Queue a shuffle job.
    Shuffle(ShuffleArgs),
    /// Queue a training job.
    Train(TrainArgs),
    /// Queue a quantize job.
    Quantize(QuantizeArgs),
    /// Queue a register job.
    Register(RegisterArgs),
    /// Queue a mask job.
    Mask {
        #[command(subcommand)]
        what: MaskCommand,
    },
}

#[derive(clap::Args)]
struct ShuffleArgs {
    /// Datasets to shuffle together (repeat the flag).
    #[arg(long = "dataset", required = true)]
    datasets: Vec<DatasetName>,
    /// Their source partition: binpack, lichess or selfplay.
    #[arg(long, default_value = "binpack")]
    source: String,
    /// The mask that selects rows (it must exist for every dataset).
    #[arg(long, default_value = "quiet")]
    mask: MaskName,
    /// Number of output chunks (= piles).
    #[arg(long)]
    chunks: u32,
    /// Same seed, same chunks, byte for byte.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// CPU threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
}

impl ShuffleArgs {
    fn spec(&self) -> anyhow::Result<ShuffleSpec> {
        let spec = ShuffleSpec {
            datasets: self.datasets.clone(),
            source: Source::parse(&self.source)
                .with_context(|| format!("unknown source {:?}", self.source))?,
            mask: self.mask.clone(),
            chunks: self.chunks,
            seed: self.seed,
            extra: Vec::new(),
        };
        spec.validate().map_err(anyhow::Error::msg)?;
        Ok(spec)
    }
}

#[derive(Subcommand)]
enum MaskCommand {
    /// Quiet positions: side to move not in check, move neither capture nor promotion,
    /// score known; optionally a minimum ply and a maximum |score|.
    Quiet(MaskArgs),
}

#[derive(clap::Args)]
struct MaskArgs {
    /// The dataset to mask.
    #[arg(long)]
    dataset: DatasetName,
    /// Its source partition: binpack, lichess or selfplay.
    #[arg(long, default_value = "binpack")]
    source: String,
    /// Name of this definition (default "quiet"; give another name for other limits).
    #[arg(long, default_value = "quiet")]
    name: MaskName,
    /// Drop rows before this ply.
    #[arg(long)]
    min_ply: Option<u16>,
    /// Drop rows whose |score| is larger.
    #[arg(long)]
    max_abs_score: Option<u16>,
    /// CPU threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
}

impl MaskArgs {
    fn spec(&self) -> anyhow::Result<MaskSpec> {
        Ok(MaskSpec {
            dataset: self.dataset.clone(),
            source: Source::parse(&self.source)
                .with_context(|| format!("unknown source {:?}", self.source))?,
            definition: MaskDefinition {
                name: self.name.clone(),
                min_ply: self.min_ply,
                max_abs_score: self.max_abs_score,
            },
        })
    }
}

#[derive(clap::Args)]
struct TrainArgs {
    /// The shuffle to train on (sh-...).
    #[arg(long)]
    shuffle: String,
    /// Feature set: all768, halfkp or halfka_v2_hm.
    #[arg(long, default_value = "all768")]
    features: String,
    /// Layer sizes: feature transformer WIDTHx2, then hidden layers.
    #[arg(long, default_value = "256x2-32-32")]
    arch: String,
    /// Positions per training step.
    #[arg(long, default_value_t = 16384)]
    batch_size: u32,
    /// Passes over the shuffle's training chunks.
    #[arg(long, default_value_t = 1)]
    epochs: u32,
    /// Stop after this many steps in total.
    #[arg(long)]
    max_steps: Option<u64>,
    /// Adam learning rate at the start.
    #[arg(long, default_value_t = 1e-3)]
    lr: f64,
    /// Learning rate factor applied after every epoch.
    #[arg(long, default_value_t = 1.0)]
    lr_decay: f64,
    /// elmo (cross-entropy), mse (|Δ|^2) or power (|Δ|^2.6), on win probabilities.
    #[arg(long, default_value = "elmo")]
    loss: String,
    /// Sigmoid scale of scores (internal units).
    #[arg(long, default_value_t = 361.0)]
    scale: f64,
    /// Weight of the score against the game result in the target at the first epoch (it
    /// moves linearly to --lambda-end by the last).
    #[arg(long, default_value_t = 1.0)]
    lambda_start: f64,
    /// λ at the last epoch (interpolated linearly from --lambda-start).
    #[arg(long, default_value_t = 1.0)]
    lambda_end: f64,
    /// The shuffle's last N chunks are held out for the validation loss.
    #[arg(long, default_value_t = 1)]
    val_chunks: u32,
    /// Checkpoint every N steps (0: at every epoch end only).
    #[arg(long, default_value_t = 0)]
    checkpoint_every: u64,
    /// Seeds the weight initialization and the chunk order of every epoch (exact resume needs the same).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// auto, cpu or cuda.
    #[arg(long, default_value = "auto")]
    device: String,
    /// Continue this run from its last checkpoint (same settings; more steps or epochs).
    #[arg(long)]
    resume: Option<String>,
    /// Warm start: a new run from the weights of another run's checkpoint, RUN:STEP (same
    /// features and architecture).
    #[arg(long)]
    init_from: Option<String>,
    /// Filter the chunks' rows at load time: quiet rows from this ply on.
    #[arg(long)]
    filter_min_ply: Option<u16>,
    /// Filter the chunks' rows at load time: quiet rows with |score| at most this.
    #[arg(long)]
    filter_max_abs_score: Option<u16>,
    /// CPU threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
}

impl TrainArgs {
    fn spec(&self) -> anyhow::Result<lakefish_schemas::TrainSpec> {
        let spec = lakefish_schemas::TrainSpec {
            shuffle: self.shuffle.clone(),
            features: self.features.clone(),
            arch: self.arch.clone(),
            batch_size: self.batch_size,
            epochs: self.epochs,
            max_steps: self.max_steps,
            lr: self.lr,
            lr_decay: self.lr_decay,
            loss: self.loss.clone(),
            scale: self.scale,
            lambda_start: self.lambda_start,
            lambda_end: self.lambda_end,
            val_chunks: self.val_chunks,
            checkpoint_every: self.checkpoint_every,
            seed: self.seed,
            device: self.device.clone(),
            resume: self.resume.clone(),
            init_from: match &self.init_from {
                None => None,
                Some(s) => {
                    let (run, step) = s
                        .split_once(':')
                        .context("--init-from is RUN:STEP, e.g. run-0123456789ab:204")?;
                    Some(lakefish_schemas::train::InitFrom {
                        run: run.to_string(),
                        step: step
                            .parse()
                            .context("--init-from RUN:STEP: STEP is a number")?,
                    })
                }
            },
            filter: (self.filter_min_ply.is_some() || self.filter_max_abs_score.is_some()).then(
                || MaskDefinition {
                    name: MaskName::new("train-filter").expect("a valid name"),
                    min_ply: self.filter_min_ply,
                    max_abs_score: self.filter_max_abs_score,
                },
            ),
        };
        spec.validate().map_err(anyhow::Error::msg)?;
        Ok(spec)
    }
}

#[derive(clap::Args)]
struct QuantizeArgs {
    /// The training run (run-...).
    #[arg(long)]
    run: String,
    /// The checkpoint's step (default: the run's last checkpoint).
    #[arg(long)]
    checkpoint: Option<u64>,
    /// Lake positions to compare the integer net with the float model on.
    #[arg(long, default_value_t = 10_000)]
    positions: u32,
    /// Refuse the net above this mean absolute difference (centipawns).
    #[arg(long, default_value_t = 3.0)]
    max_mean_cp: f64,
    /// Refuse the net above this 99th-percentile absolute difference (centipawns).
    #[arg(long, default_value_t = 15.0)]
    max_p99_cp: f64,
    /// CPU threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
}

impl QuantizeArgs {
    fn spec(&self) -> anyhow::Result<lakefish_schemas::QuantizeSpec> {
        let spec = lakefish_schemas::QuantizeSpec {
            run: self.run.clone(),
            checkpoint: self.checkpoint,
            positions: self.positions,
            max_mean_cp: self.max_mean_cp,
            max_p99_cp: self.max_p99_cp,
        };
        spec.validate().map_err(anyhow::Error::msg)?;
        Ok(spec)
    }
}

#[derive(clap::Args)]
struct RegisterArgs {
    /// The training run (run-...).
    #[arg(long)]
    run: String,
    /// The quantized checkpoint's step (default: the run's last checkpoint).
    #[arg(long)]
    checkpoint: Option<u64>,
    /// The registered net this one descends from (nn-....nnue).
    #[arg(long)]
    parent: Option<String>,
}

impl RegisterArgs {
    fn spec(&self) -> anyhow::Result<lakefish_schemas::RegisterSpec> {
        let spec = lakefish_schemas::RegisterSpec {
            run: self.run.clone(),
            checkpoint: self.checkpoint,
            parent: self.parent.clone(),
        };
        spec.validate().map_err(anyhow::Error::msg)?;
        Ok(spec)
    }
}

#[derive(clap::Args)]
struct BinpackArgs {
    /// Input files (local paths, or lake:raw/... keys).
    #[arg(required = true)]
    files: Vec<String>,
    /// Dataset name (letters, digits, '.', '_', '-').
    #[arg(long)]
    dataset: DatasetName,
    /// Target rows per Parquet part.
    #[arg(long, default_value_t = lakefish_schemas::job::default_rows_per_part())]
    rows_per_part: u64,
    /// CPU threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Load test of a running API: CLIENTS concurrent clients submit JOB and poll it to its
    /// end, for SECONDS; prints throughput and p50/p99 latencies against GET /healthz with
    /// the same clients, and fails when any request errs or a submitted job is unaccounted for.
    Load {
        /// The API's base URL (LAKEFISH_TOKEN is sent when set).
        #[arg(long, default_value = "http://127.0.0.1:8080")]
        api: String,
        /// The job to submit, as the body of POST /v1/jobs: {"kind": ..., "spec": {...}}.
        #[arg(long)]
        job: String,
        /// Concurrent clients submitting and polling.
        #[arg(long, default_value_t = 32)]
        clients: usize,
        /// How long clients keep submitting (at most 60).
        #[arg(long, default_value_t = 30.0)]
        seconds: f64,
        /// How long the GET /healthz reference runs first.
        #[arg(long, default_value_t = 3.0)]
        reference_seconds: f64,
    },
    /// The two-pass shuffle vs a plain copy of the same bytes on the same store.
    Shuffle {
        /// A .binpack file: ingested and quiet-masked into a scratch lake untimed, then shuffled.
        file: String,
        /// CPU threads (default: all cores).
        #[arg(long)]
        threads: Option<usize>,
        /// Output chunks (piles) of the shuffle.
        #[arg(long, default_value_t = 16)]
        chunks: u32,
        /// Best of this many runs.
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Run on this store instead of a scratch directory: a directory or
        /// s3://bucket/prefix (AWS_* variables as for --lake). Everything is written under
        /// a fresh lakefish-bench-shuffle-PID/ prefix there and deleted afterwards.
        #[arg(long)]
        store: Option<String>,
    },
    /// The quiet mask job vs a bare read of the same Parquet parts.
    Mask {
        /// A .binpack file, ingested into a scratch lake untimed.
        file: String,
        /// CPU threads (default: all cores).
        #[arg(long)]
        threads: Option<usize>,
        /// Best of this many runs.
        #[arg(long, default_value_t = 3)]
        runs: usize,
    },
    /// Full PGN ingest vs a bare pgn-reader visitor (SAN to moves, [%eval]) over the same bytes.
    IngestPgn {
        /// A .pgn or .pgn.zst file (repeated into a scratch file of at least --min-mib).
        file: String,
        /// CPU threads (default: all cores).
        #[arg(long)]
        threads: Option<usize>,
        /// Best of this many runs.
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Smallest input to time, in MiB: a smaller file is repeated into a scratch file this large.
        #[arg(long, default_value_t = 48)]
        min_mib: usize,
    },
    /// The training loader alone vs training steps (all768 256x2-32-32, batch 16384, CPU or
    /// CUDA), over the quiet rows of a binpack file shuffled into a scratch lake.
    Train {
        /// A .binpack file whose quiet rows are shuffled into a scratch lake untimed.
        file: String,
        /// CPU threads (default: all cores).
        #[arg(long)]
        threads: Option<usize>,
        /// Training steps to time.
        #[arg(long, default_value_t = 30)]
        steps: usize,
        /// Where the training steps run, ours and the reference's: cpu, cuda or auto (CUDA
        /// when libtorch's CUDA backend loads and sees a GPU).
        #[arg(long, default_value = "cpu", value_parser = ["cpu", "cuda", "auto"])]
        device: String,
        /// A Python with torch 2.11 for the plain PyTorch reference (`make bench-train` sets
        /// one up in .venv-bench); skipped when it does not exist.
        #[arg(long, default_value = ".venv-bench/bin/python")]
        torch_python: String,
        /// The reference training script.
        #[arg(long, default_value = "infra/bench/torch_reference.py")]
        torch_script: String,
    },
    /// Full binpack ingest vs a bare sfbinpack decode loop over the same file.
    IngestBinpack {
        /// A .binpack file (one or more concatenated).
        file: String,
        /// CPU threads (default: all cores).
        #[arg(long)]
        threads: Option<usize>,
        /// Best of this many runs.
        #[arg(long, default_value_t = 3)]
        runs: usize,
    },
}

fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

fn init_logging(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("LAKEFISH_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        b.json().init();
    } else {
        b.init();
    }
}

/// Reads the config file once, with the LAKEFISH__* overrides; no file: the defaults.
fn load_config(path: Option<&str>) -> anyhow::Result<Config> {
    let Some(path) = path else {
        return Ok(Config::default());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the config file {path}"))?;
    Ok(Config::parse(path, &text, std::env::vars())?)
}

/// Config values fill in what the command line (and its LAKEFISH_* variables) left unset.
fn apply_config(cli: &mut Cli, matches: &clap::ArgMatches, config: &Config) {
    use clap::parser::ValueSource;
    let defaulted = |m: &clap::ArgMatches, id: &str| {
        !matches!(
            m.value_source(id),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        )
    };
    let server = &config.server;
    if let Some(lake) = &server.lake
        && defaulted(matches, "lake")
    {
        cli.lake = lake.clone();
    }
    if server.log_json == Some(true) {
        cli.log_json = true;
    }
    let sub = matches.subcommand().map(|(_, m)| m);
    match (&mut cli.command, sub) {
        (Command::Serve { listen, queue, .. }, Some(m)) => {
            if let Some(l) = &server.listen
                && defaulted(m, "listen")
            {
                *listen = l.clone();
            }
            if queue.redis.is_none() {
                queue.redis = server.redis.clone();
            }
            if let Some(db) = &server.queue_db
                && defaulted(m, "queue_db")
            {
                queue.queue_db = db.clone();
            }
        }
        (Command::Worker { redis, .. }, _) if redis.is_none() => *redis = server.redis.clone(),
        _ => {}
    }
}

pub(crate) fn open_lake(spec: &str) -> anyhow::Result<Lake> {
    let env: HashMap<String, String> = std::env::vars().collect();
    Ok(Lake::open(spec, &env)?)
}

fn ingest_spec(a: &BinpackArgs, absolute: bool) -> anyhow::Result<IngestBinpackSpec> {
    let inputs = a
        .files
        .iter()
        .map(|f| {
            if absolute && !f.starts_with(lakefish_jobs::input::LAKE_PREFIX) {
                let p = std::path::absolute(f).with_context(|| format!("input {f}"))?;
                Ok(p.to_string_lossy().into_owned())
            } else {
                Ok(f.clone())
            }
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let spec = IngestBinpackSpec {
        inputs,
        dataset: a.dataset.clone(),
        rows_per_part: a.rows_per_part,
    };
    spec.validate().map_err(anyhow::Error::msg)?;
    Ok(spec)
}

#[derive(clap::Args)]
struct DatagenArgs {
    /// The evaluation both sides use: a registered net, `best`, or `classical`.
    #[arg(long, default_value = "best")]
    net: String,
    /// Dataset to ingest the games into.
    #[arg(long)]
    dataset: String,
    /// Number of self-play games.
    #[arg(long, default_value_t = 100)]
    games: u64,
    /// The same seed gives the same games, whatever the number of threads.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Nodes per move (default 5000).
    #[arg(long, conflicts_with = "depth")]
    nodes: Option<u64>,
    /// A fixed depth per move instead of nodes.
    #[arg(long)]
    depth: Option<u32>,
    /// Random legal moves at the start of each game, for variety.
    #[arg(long, default_value_t = 6)]
    random_plies: u32,
    /// Searched plies before adjudication (|score| below --draw-cp is a draw).
    #[arg(long, default_value_t = 200)]
    max_plies: u32,
    /// At the ply limit, a game whose last |score| is below this many centipawns is a draw (the rest go to the side ahead).
    #[arg(long, default_value_t = 400)]
    draw_cp: i32,
    /// Threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
}

impl DatagenArgs {
    fn spec(&self) -> anyhow::Result<lakefish_schemas::DatagenSpec> {
        let spec = lakefish_schemas::DatagenSpec {
            net: self.net.clone(),
            dataset: DatasetName::new(&self.dataset)?,
            games: self.games,
            seed: self.seed,
            nodes: self.nodes,
            depth: self.depth,
            random_plies: self.random_plies,
            max_plies: self.max_plies,
            draw_cp: self.draw_cp,
        };
        spec.validate().map_err(anyhow::Error::msg)?;
        Ok(spec)
    }
}

fn main() -> anyhow::Result<()> {
    let matches = <Cli as clap::CommandFactory>::command().get_matches();
    let mut cli = <Cli as clap::FromArgMatches>::from_arg_matches(&matches)?;
    let config = load_config(cli.config.as_deref())?;
    apply_config(&mut cli, &matches, &config);
    init_logging(cli.log_json);
    // The engine runs without the multi-threaded runtime: the search owns the threads.
    if let Command::Engine(args) = cli.command {
        return engine_cmd::run(&cli.lake, args);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match cli.command {
        Command::Engine(_) => unreachable!("handled above"),
        Command::Sprt(a) => rt.block_on(sprt_cmd::run(&cli.lake, rt.handle(), a)),
        Command::Datagen(a) => {
            let spec = a.spec()?;
            run_here(&cli.lake, rt.handle(), JobSpec::Datagen(spec), a.threads)
        }
        Command::Serve {
            listen,
            queue,
            work,
            no_workers,
            no_scheduler,
        } => rt.block_on(serve(
            &cli.lake,
            &listen,
            queue,
            work,
            (no_workers, no_scheduler),
            config,
        )),
        Command::Worker { redis, work, name } => rt.block_on(async {
            let lake = open_lake(&cli.lake)?;
            let redis = redis.context(
                "a worker needs the shared queue: --redis URL, LAKEFISH_REDIS or server.redis in the config",
            )?;
            let q = Queue::redis(&redis).await?;
            let name = name.unwrap_or_else(default_worker_name);
            tracing::info!(lake = lake.describe(), queue = q.describe(), %name, "worker ready");
            q.run_workers(
                lake,
                name,
                work.concurrency.max(1),
                work.threads.unwrap_or_else(cores),
            )
            .await
        }),
        Command::Ingest {
            what: IngestCommand::Binpack(a),
        } => {
            let spec = JobSpec::IngestBinpack(ingest_spec(&a, false)?);
            run_here(&cli.lake, rt.handle(), spec, a.threads)
        }
        Command::Ingest {
            what: IngestCommand::Pgn(a),
        } => {
            let spec = JobSpec::IngestPgn(ingest_spec(&a, false)?);
            run_here(&cli.lake, rt.handle(), spec, a.threads)
        }
        Command::Mask {
            what: MaskCommand::Quiet(a),
        } => run_here(&cli.lake, rt.handle(), JobSpec::Mask(a.spec()?), a.threads),
        Command::Train(a) => run_here(&cli.lake, rt.handle(), JobSpec::Train(a.spec()?), a.threads),
        Command::Quantize(a) => run_here(
            &cli.lake,
            rt.handle(),
            JobSpec::Quantize(a.spec()?),
            a.threads,
        ),
        Command::Register(a) => {
            run_here(&cli.lake, rt.handle(), JobSpec::Register(a.spec()?), None)
        }
        Command::Nets { api, what } => rt.block_on(nets_cmd::run(&cli.lake, api, what)),
        Command::Runs { id } => rt.block_on(async {
            let lake = open_lake(&cli.lake)?;
            let v = match id {
                Some(id) => lakefish_train::train::run_with_metrics(&lake, &id)
                    .await?
                    .with_context(|| format!("run {id} not found"))?,
                None => serde_json::to_value(lakefish_train::train::list_runs(&lake).await?)?,
            };
            println!("{}", serde_json::to_string_pretty(&v)?);
            Ok(())
        }),
        Command::Shuffle(a) => run_here(
            &cli.lake,
            rt.handle(),
            JobSpec::Shuffle(a.spec()?),
            a.threads,
        ),
        Command::Submit {
            api,
            wait,
            upload,
            what,
        } => rt.block_on(submit(&api, wait, upload, what)),
        Command::Upload { files, source } => rt.block_on(async {
            let lake = open_lake(&cli.lake)?;
            let src = match source.as_str() {
                "books" => None,
                s => Some(Source::parse(s).with_context(|| {
                    format!("unknown source {source:?} (binpack, lichess, selfplay or books)")
                })?),
            };
            for f in &files {
                let key = match src {
                    Some(src) => raw_key(src, file_name(f)?)?,
                    None => lakefish_schemas::names::book_key(file_name(f)?)?,
                };
                let n = lake.put_stream(&key, file_stream(f).await?).await?;
                println!("{}{key}\t{n} bytes", lakefish_jobs::input::LAKE_PREFIX);
            }
            Ok(())
        }),
        Command::Pipeline(a) => rt.block_on(pipeline_cmd::run(a)),
        Command::Jobs { api, state, id } => rt.block_on(show_jobs(&api, state, id)),
        Command::Datasets => rt.block_on(async {
            let lake = open_lake(&cli.lake)?;
            let ds = lakefish_jobs::datasets::list_datasets(&lake).await?;
            println!("{}", serde_json::to_string_pretty(&ds)?);
            Ok(())
        }),
        Command::Bench {
            what:
                BenchCommand::Train {
                    file,
                    threads,
                    steps,
                    device,
                    torch_python,
                    torch_script,
                },
        } => {
            let threads = threads.unwrap_or_else(cores);
            let device = lakefish_train::train::select_device(&device)?;
            let reference = std::path::Path::new(&torch_python).exists().then(|| {
                lakefish_train::bench::TorchReference {
                    python: torch_python.clone().into(),
                    script: torch_script.into(),
                }
            });
            if reference.is_none() {
                eprintln!(
                    "no {torch_python}: the PyTorch reference is skipped (make bench-train sets it up)"
                );
            }
            let r = lakefish_train::bench::bench_train(
                rt.handle(),
                &file,
                threads,
                steps,
                device,
                reference.as_ref(),
            )?;
            println!(
                "file                     {} ({} positions in batches)",
                r.file, r.positions
            );
            println!(
                "loader, 1 thread         {:>12.0} positions/s",
                r.loader_positions_per_s_per_core
            );
            println!(
                "loader, {} threads        {:>12.0} positions/s",
                r.threads, r.loader_positions_per_s
            );
            println!(
                "trainer {} b{} ({}) {:>12.0} positions/s ({} threads)",
                r.arch, r.batch_size, r.device, r.trainer_positions_per_s, r.threads
            );
            println!(
                "loader per core / trainer {:>11.1} (target >= 10)",
                r.loader_to_trainer
            );
            if let (Some(p), Some(ratio)) = (r.pytorch_positions_per_s, r.trainer_to_pytorch) {
                println!(
                    "plain PyTorch {} ({}) {:>12.0} positions/s ({} threads)",
                    r.pytorch_version.as_deref().unwrap_or("?"),
                    r.device,
                    p,
                    r.threads
                );
                println!("trainer / PyTorch       {:>12.2} (target >= 1)", ratio);
            }
            println!("{}", serde_json::to_string(&r)?);
            Ok(())
        }
        Command::Bench {
            what:
                BenchCommand::IngestPgn {
                    file,
                    threads,
                    runs,
                    min_mib,
                },
        } => {
            let threads = threads.unwrap_or_else(cores);
            let r =
                lakefish_jobs::bench::bench_ingest_pgn(rt.handle(), &file, threads, runs, min_mib)?;
            println!(
                "file                         {} (x{}, {:.1} MiB)",
                r.file, r.repeat, r.mib
            );
            println!("games / positions            {} / {}", r.games, r.positions);
            println!(
                "bare pgn-reader visitor      {:>10.1} MiB/s (1 core)",
                r.bare_mib_per_s
            );
            println!(
                "full ingest                  {:>10.1} MiB/s ({} threads, {:.0} positions/s)",
                r.ingest_mib_per_s, r.threads, r.ingest_positions_per_s
            );
            println!(
                "full ingest per core         {:>10.1} MiB per CPU-second ({:.2} cores busy)",
                r.ingest_mib_per_s_per_core, r.cores_busy
            );
            println!(
                "ratio per core               {:>10.3} (target >= 0.5)",
                r.ratio_per_core
            );
            println!(
                "  phase: bare visitor        {:>10.1} ns/position (1 core)",
                r.bare_ns_per_position
            );
            println!(
                "  phase: parse to columns    {:>10.1} ns/position (1 core)",
                r.parse_ns_per_position
            );
            println!(
                "  phase: parquet encode      {:>10.1} ns/position (1 core)",
                r.parquet_encode_ns_per_position
            );
            println!("{}", serde_json::to_string(&r)?);
            Ok(())
        }
        Command::Bench {
            what:
                BenchCommand::IngestBinpack {
                    file,
                    threads,
                    runs,
                },
        } => {
            let threads = threads.unwrap_or_else(cores);
            let r = lakefish_jobs::bench::bench_ingest_binpack(rt.handle(), &file, threads, runs)?;
            println!("file                         {}", r.file);
            println!("positions                    {}", r.positions);
            println!(
                "bare sfbinpack decode        {:>12.0} positions/s (1 core)",
                r.decode_positions_per_s
            );
            println!(
                "full ingest                  {:>12.0} positions/s ({} threads)",
                r.ingest_positions_per_s, r.threads
            );
            println!(
                "full ingest per core         {:>12.0} positions per CPU-second ({:.2} cores busy)",
                r.ingest_positions_per_s_per_core, r.cores_busy
            );
            println!(
                "ratio per core               {:>12.3} (target >= 0.5)",
                r.ratio_per_core
            );
            println!(
                "  phase: decode to columns   {:>12.1} ns/position (1 core)",
                r.decode_to_columns_ns_per_position
            );
            println!(
                "  phase: parquet encode      {:>12.1} ns/position (1 core)",
                r.parquet_encode_ns_per_position
            );
            println!(
                "binpack bytes/position       {:>12.3}",
                r.binpack_bytes_per_position
            );
            println!(
                "parquet bytes/position       {:>12.3}",
                r.parquet_bytes_per_position
            );
            println!("{}", serde_json::to_string(&r)?);
            Ok(())
        }
        Command::Bench {
            what:
                BenchCommand::Mask {
                    file,
                    threads,
                    runs,
                },
        } => {
            let threads = threads.unwrap_or_else(cores);
            let r = lakefish_jobs::bench::bench_mask(rt.handle(), &file, threads, runs)?;
            println!("file                         {}", r.file);
            println!("rows                         {}", r.rows);
            println!(
                "bare read of the parts       {:>12.0} rows/s ({} threads)",
                r.read_rows_per_s, r.threads
            );
            println!(
                "quiet mask job               {:>12.0} rows/s ({} threads)",
                r.mask_rows_per_s, r.threads
            );
            println!("ratio mask / read            {:>12.3}", r.ratio);
            println!("{}", serde_json::to_string(&r)?);
            Ok(())
        }
        Command::Bench {
            what:
                BenchCommand::Load {
                    api,
                    job,
                    clients,
                    seconds,
                    reference_seconds,
                },
        } => {
            let job: serde_json::Value = serde_json::from_str(&job)
                .map_err(|e| anyhow::anyhow!("--job is not JSON: {e}"))?;
            if !(0.0..=60.0).contains(&seconds) || !(0.0..=60.0).contains(&reference_seconds) {
                anyhow::bail!("--seconds and --reference-seconds must be between 0 and 60");
            }
            if clients == 0 || clients > 1024 {
                anyhow::bail!("--clients must be between 1 and 1024");
            }
            let r = rt.block_on(load::run(
                client(),
                &api,
                job,
                clients,
                Duration::from_secs_f64(seconds),
                Duration::from_secs_f64(reference_seconds),
            ))?;
            println!(
                "clients / seconds            {} / {:.1}",
                r.clients, r.seconds
            );
            println!(
                "jobs submitted / done        {} / {} succeeded, {} failed",
                r.submitted, r.succeeded, r.failed
            );
            println!("jobs/s                       {:>10.1}", r.jobs_per_s);
            println!(
                "requests/s                   {:>10.1} (GET /healthz alone: {:.1})",
                r.requests_per_s, r.healthz_requests_per_s
            );
            for (name, l) in [
                ("submit", &r.submit),
                ("poll", &r.poll),
                ("job end to end", &r.job),
                ("GET /healthz", &r.healthz),
            ] {
                println!(
                    "{name:<28} p50 {:>8.1} ms  p99 {:>8.1} ms  max {:>8.1} ms  ({} samples)",
                    l.p50_ms, l.p99_ms, l.max_ms, l.count
                );
            }
            println!(
                "ratio requests / healthz     {:>10.3}",
                r.requests_per_s / r.healthz_requests_per_s.max(1e-9)
            );
            println!("{}", serde_json::to_string(&r)?);
            if r.errors > 0 || r.unaccounted > 0 {
                anyhow::bail!(
                    "{} request errors, {} jobs unaccounted for; first errors: {:?}",
                    r.errors,
                    r.unaccounted,
                    r.first_errors
                );
            }
            Ok(())
        }
        Command::Bench {
            what:
                BenchCommand::Shuffle {
                    file,
                    threads,
                    chunks,
                    runs,
                    store,
                },
        } => {
            let threads = threads.unwrap_or_else(cores);
            let r = lakefish_jobs::bench::bench_shuffle(
                rt.handle(),
                &file,
                threads,
                chunks,
                runs,
                store.as_deref(),
            )?;
            println!("file                         {}", r.file);
            println!(
                "rows in / selected           {} / {}",
                r.input_rows, r.selected_rows
            );
            println!(
                "input                        {:>12.2} MiB of Parquet, {} chunks",
                r.input_mib, r.chunks
            );
            println!(
                "plain copy                   {:>12.1} MiB/s",
                r.copy_mib_per_s
            );
            println!(
                "two-pass shuffle             {:>12.1} MiB/s, {:.0} rows/s ({} threads)",
                r.shuffle_mib_per_s, r.shuffle_rows_per_s, threads
            );
            println!(
                "ratio shuffle / copy         {:>12.3} (target >= 0.3)",
                r.ratio
            );
            println!("{}", serde_json::to_string(&r)?);
            Ok(())
        }
        Command::Token {
            what: TokenCommand::New { name, scopes },
        } => {
            let scopes = scopes
                .iter()
                .map(|s| match s.as_str() {
                    "read" | "submit" | "admin" => Ok(format!("{s:?}")),
                    other => bail!("unknown scope {other:?} (read, submit or admin)"),
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let token = format!(
                "lf_{}{}",
                uuid::Uuid::new_v4().simple(),
                uuid::Uuid::new_v4().simple()
            );
            println!("token (give it to the client; it is not stored anywhere): {token}");
            println!("\n# for lakefish.toml:\n[[auth.tokens]]\nname = {name:?}");
            println!(
                "sha256 = \"{}\"\nscopes = [{}]",
                lakefish_schemas::config::token_sha256(&token),
                scopes.join(", ")
            );
            Ok(())
        }
        Command::CheckConfig { file } => {
            let path = file
                .or(cli.config.clone())
                .context("name the file: lakefish check-config FILE (or --config)")?;
            let config = load_config(Some(&path))?;
            println!("{path}: ok (version {})", config.version);
            println!("{}", serde_json::to_string_pretty(&config)?);
            Ok(())
        }
        Command::Synth { out, games, seed } => {
            let bytes = lakefish_jobs::binpack::synthetic_binpack(games, seed);
            std::fs::write(&out, &bytes).with_context(|| format!("writing {out}"))?;
            println!("wrote {out}: {games} games, {} bytes", bytes.len());
            Ok(())
        }
    }
}

/// Runs a job in this process with a progress bar and prints its result.
fn run_here(
    lake: &str,
    rt: &tokio::runtime::Handle,
    spec: JobSpec,
    threads: Option<usize>,
) -> anyhow::Result<()> {
    let out = run_here_value(lake, rt, spec, threads)?;
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

/// Runs a job in this process with a progress bar and returns its result.
fn run_here_value(
    lake: &str,
    rt: &tokio::runtime::Handle,
    spec: JobSpec,
    threads: Option<usize>,
) -> anyhow::Result<serde_json::Value> {
    let lake = open_lake(lake)?;
    let bar = Arc::new(cli_progress::Bar::new());
    let ctx = JobContext::new(lake, rt.clone())
        .with_progress(bar.clone())
        .with_threads(threads.unwrap_or_else(cores))
        .with_hooks(lakefish_jobs::Hooks {
            submitter: None,
            trainer: Some(Arc::new(lakefish_train::LakefishTrainer)),
        });
    let out = lakefish_jobs::runner::run_spec(&ctx, &JobId::new(), &spec);
    bar.finish();
    Ok(out?)
}

/// `<host>-<pid>-<random>`: apalis refuses a worker name it still believes alive, and a
/// restarted container can get the same pid.
fn default_worker_name() -> String {
    let host = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
    let host = if host.trim().is_empty() {
        "worker"
    } else {
        host.trim()
    };
    let suffix = &JobId::new().to_string()[24..];
    format!("{host}-{}-{suffix}", std::process::id())
}

async fn serve(
    lake: &str,
    listen: &str,
    q: QueueArgs,
    work: WorkArgs,
    (no_workers, no_scheduler): (bool, bool),
    config: Config,
) -> anyhow::Result<()> {
    for (name, p) in &config.pipelines {
        if let Some(expr) = &p.schedule {
            scheduler::schedule(name, expr)?;
        }
    }
    if no_workers && q.redis.is_none() {
        bail!(
            "--no-workers needs --redis: only a Redis queue can be served by separate `lakefish worker` processes"
        );
    }
    let lake = open_lake(lake)?;
    let queue = match &q.redis {
        Some(url) => Queue::redis(url).await?,
        None => Queue::sqlite(&q.queue_db).await?,
    };
    let state = api::AppState {
        lake: lake.clone(),
        jobs: JobStore::new(lake.clone()),
        queue: queue.clone(),
        config: Arc::new(config),
    };
    if !no_scheduler && !state.config.pipelines.is_empty() {
        let (lake, queue, config) = (lake.clone(), queue.clone(), state.config.clone());
        tokio::spawn(async move {
            if let Err(e) = scheduler::run(lake, queue, config).await {
                tracing::error!("the pipeline scheduler stopped: {e}");
            }
        });
    }
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let addr = listener.local_addr()?;
    tracing::info!(
        lake = lake.describe(),
        queue = queue.describe(),
        "serving on http://{addr}"
    );
    // Machine-readable line for scripts and tests that pass port 0.
    println!("listening on http://{addr}");
    let server = axum::serve(listener, api::router(state)).with_graceful_shutdown(async {
        let _ = tokio::signal::ctrl_c().await;
    });
    if no_workers {
        server.await?;
        return Ok(());
    }
    let name = default_worker_name();
    let workers = queue.run_workers(
        lake,
        name,
        work.concurrency.max(1),
        work.threads.unwrap_or_else(cores),
    );
    tokio::select! {
        r = server => r?,
        r = workers => r?,
    }
    Ok(())
}

/// The HTTP client of every `--api` command: sends `LAKEFISH_TOKEN` as a bearer token when set.
pub(crate) fn client() -> reqwest::Client {
    client_with_timeout(Some(Duration::from_secs(30)))
}

fn client_with_timeout(timeout: Option<Duration>) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Ok(token) = std::env::var("LAKEFISH_TOKEN")
        && let Ok(mut v) = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
    {
        v.set_sensitive(true);
        headers.insert(reqwest::header::AUTHORIZATION, v);
    }
    let mut b = reqwest::Client::builder().default_headers(headers);
    if let Some(t) = timeout {
        b = b.timeout(t);
    }
    b.build().expect("http client")
}

pub(crate) async fn check(resp: reqwest::Response) -> anyhow::Result<serde_json::Value> {
    let status = resp.status();
    let body: serde_json::Value = resp.json().await.unwrap_or(serde_json::Value::Null);
    if !status.is_success() {
        let msg = body
            .get("error")
            .and_then(|e| e.as_str())
            .unwrap_or("no message");
        bail!("the API answered {status}: {msg}");
    }
    Ok(body)
}

fn file_name(path: &str) -> anyhow::Result<&str> {
    std::path::Path::new(path)
        .file_name()
        .and_then(|n| n.to_str())
        .with_context(|| format!("{path} has no file name"))
}

/// A local file as a stream of 1 MiB pieces.
async fn file_stream(
    path: &str,
) -> anyhow::Result<
    impl futures::Stream<Item = std::io::Result<bytes::Bytes>> + Unpin + Send + 'static,
> {
    use tokio::io::AsyncReadExt;
    let file = tokio::fs::File::open(path)
        .await
        .with_context(|| format!("opening {path}"))?;
    Ok(Box::pin(futures::stream::try_unfold(
        file,
        |mut f| async move {
            let mut buf = vec![0u8; 1 << 20];
            let n = f.read(&mut buf).await?;
            buf.truncate(n);
            Ok((n > 0).then(|| (bytes::Bytes::from(buf), f)))
        },
    )))
}

async fn upload_via_api(api: &str, source: Source, path: &str) -> anyhow::Result<String> {
    let name = file_name(path)?;
    raw_key(source, name)?;
    let body = reqwest::Body::wrap_stream(file_stream(path).await?);
    // No overall timeout: an upload takes as long as the file needs.
    let resp = client_with_timeout(None)
        .put(format!("{api}/v1/raw/{source}/{name}"))
        .body(body)
        .send()
        .await
        .with_context(|| format!("cannot reach the API at {api}"))?;
    let v = check(resp).await?;
    let input = v["input"].as_str().unwrap_or_default().to_string();
    eprintln!("uploaded {path} as {input} ({} bytes)", v["bytes"]);
    Ok(input)
}

async fn submit(api: &str, wait: bool, upload: bool, what: SubmitCommand) -> anyhow::Result<()> {
    let body = match what {
        SubmitCommand::Json { file } => {
            std::fs::read(&file).with_context(|| format!("reading {file}"))?
        }
        SubmitCommand::Ingest { what } => {
            let (source, mut a) = match what {
                IngestCommand::Binpack(a) => (Source::Binpack, a),
                IngestCommand::Pgn(a) => (Source::Lichess, a),
            };
            if upload {
                for f in a.files.iter_mut() {
                    if !f.starts_with(lakefish_jobs::input::LAKE_PREFIX) {
                        *f = upload_via_api(api, source, f).await?;
                    }
                }
            }
            let spec = ingest_spec(&a, true)?;
            serde_json::to_vec(&match source {
                Source::Binpack => JobSpec::IngestBinpack(spec),
                _ => JobSpec::IngestPgn(spec),
            })?
        }
        SubmitCommand::Mask {
            what: MaskCommand::Quiet(a),
        } => serde_json::to_vec(&JobSpec::Mask(a.spec()?))?,
        SubmitCommand::Shuffle(a) => serde_json::to_vec(&JobSpec::Shuffle(a.spec()?))?,
        SubmitCommand::Train(a) => serde_json::to_vec(&JobSpec::Train(a.spec()?))?,
        SubmitCommand::Quantize(a) => serde_json::to_vec(&JobSpec::Quantize(a.spec()?))?,
        SubmitCommand::Register(a) => serde_json::to_vec(&JobSpec::Register(a.spec()?))?,
    };
    let resp = client()
        .post(format!("{api}/v1/jobs"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .with_context(|| format!("cannot reach the API at {api}"))?;
    let accepted = check(resp).await?;
    let id = accepted["id"].as_str().unwrap_or_default().to_string();
    eprintln!("queued job {id}");
    if !wait {
        return Ok(());
    }
    let bar = cli_progress::Bar::new();
    loop {
        let rec: JobRecord = serde_json::from_value(
            check(client().get(format!("{api}/v1/jobs/{id}")).send().await?).await?,
        )?;
        bar.show(&rec.progress);
        if rec.state.is_final() {
            if rec.state == JobState::Failed {
                bar.finish();
                println!("{}", serde_json::to_string_pretty(&rec)?);
                bail!("job {id} failed: {}", rec.error.unwrap_or_default());
            }
            // A shuffle fans its passes out as jobs of their own: follow it to the commit.
            let fanned = rec.result.as_ref().and_then(|r| r["shuffle"].as_str());
            if let (Some(shuffle), "shuffle") = (fanned, rec.kind.as_str()) {
                let manifest = wait_for_shuffle(api, shuffle, &bar).await?;
                bar.finish();
                println!("{}", serde_json::to_string_pretty(&manifest)?);
                return Ok(());
            }
            bar.finish();
            println!("{}", serde_json::to_string_pretty(&rec)?);
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Polls `GET /v1/shuffles/{id}` until the shuffle is committed; returns its manifest.
async fn wait_for_shuffle(
    api: &str,
    id: &str,
    bar: &cli_progress::Bar,
) -> anyhow::Result<serde_json::Value> {
    loop {
        let v = check(
            client()
                .get(format!("{api}/v1/shuffles/{id}"))
                .send()
                .await?,
        )
        .await?;
        if v["state"] == "committed" {
            return Ok(v);
        }
        let n = |k: &str| v[k].as_u64().unwrap_or(0);
        bar.show(&lakefish_schemas::Progress {
            stage: format!(
                "shuffle {id}: deal {}/{}, piles {}/{}",
                n("dealt"),
                n("parts"),
                n("piles_done"),
                n("chunks")
            ),
            done: n("dealt") + n("piles_done"),
            total: Some(n("parts") + n("chunks")),
            unit: "tasks".into(),
            rows: 0,
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

async fn show_jobs(api: &str, state: Option<String>, id: Option<String>) -> anyhow::Result<()> {
    let url = match (&id, &state) {
        (Some(id), _) => format!("{api}/v1/jobs/{id}"),
        (None, Some(s)) => format!("{api}/v1/jobs?state={s}"),
        (None, None) => format!("{api}/v1/jobs"),
    };
    let body = check(
        client()
            .get(url)
            .send()
            .await
            .with_context(|| format!("cannot reach the API at {api}"))?,
    )
    .await?;
    println!("{}", serde_json::to_string_pretty(&body)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// The whole command tree is consistent, and `help_expected` makes every flag and
    /// argument carry help text (a bare `--threads <THREADS>` fails here). clap checks this
    /// only with debug assertions, as `make test` builds (a debug `lakefish` also refuses to
    /// start with an undocumented argument).
    #[test]
    fn every_command_and_argument_has_help() {
        super::Cli::command().debug_assert();
    }

    /// `bench train --device` takes cpu, cuda or auto; anything else is refused by name with
    /// the values it takes, before any work starts.
    #[test]
    fn bench_train_refuses_an_unknown_device() {
        use clap::Parser;
        let parse = |device: &str| {
            super::Cli::try_parse_from([
                "lakefish",
                "bench",
                "train",
                "x.binpack",
                "--device",
                device,
            ])
        };
        let err = parse("gpu0").err().expect("gpu0 refused").to_string();
        assert!(err.contains("gpu0") && err.contains("cuda"), "{err}");
        for ok in ["cpu", "cuda", "auto"] {
            assert!(parse(ok).is_ok(), "{ok}");
        }
    }
}
