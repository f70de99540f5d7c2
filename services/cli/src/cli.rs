//! The command line: every command, flag and argument with its help text, and how each
//! command's arguments become a typed job spec. Parsing only; `main` dispatches.

use anyhow::Context;
use clap::{Parser, Subcommand};
use lakefish_schemas::shuffle::DatasetRef;
use lakefish_schemas::{
    DatasetName, IngestBinpackSpec, MaskDefinition, MaskName, MaskRule, MaskSpec, ShuffleSpec,
    Source,
};

pub(crate) use crate::train_args::{TrainArgs, read_layout, read_net_spec};

#[derive(Parser)]
#[command(name = "lakefish", version, about = "NNUE training data lake and job service", long_about = None, help_expected = true)]
pub(crate) struct Cli {
    /// The lake: a directory, or s3://bucket/prefix (credentials and endpoint from AWS_*).
    #[arg(long, global = true, env = "LAKEFISH_LAKE", default_value = "./lake")]
    pub lake: String,
    /// Log as JSON lines instead of text.
    #[arg(long, global = true, env = "LAKEFISH_LOG_JSON")]
    pub log_json: bool,
    /// lakefish.toml: server settings, API tokens, pipelines (example: infra/lakefish.toml).
    /// Flags and their LAKEFISH_* variables win over it; LAKEFISH__SECTION__KEY overrides keys.
    #[arg(long, global = true, env = "LAKEFISH_CONFIG")]
    pub config: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
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
        /// Do not start or advance pipeline runs or experiments here (run the scheduler in one
        /// server only).
        #[arg(long)]
        no_scheduler: bool,
        /// Serve beyond loopback without any token configured: everyone who can reach the
        /// address may submit jobs and read the lake (config: server.open_api_without_tokens).
        /// Without it, such a listen address is refused.
        #[arg(long)]
        open_api_without_tokens: bool,
    },
    /// The UCI chess engine on stdin/stdout (NNUE or hand-written evaluation), or its bench.
    ///
    /// Speaks uci, isready, ucinewgame, position, go (depth, nodes, movetime, wtime/btime,
    /// winc/binc, movestogo, infinite), stop, quit, and setoption Hash / EvalFile /
    /// UCI_Chess960. `eval` prints the static evaluation of the current position.
    Engine(crate::engine_cmd::EngineArgs),
    /// SPRT of two evaluations in colour-reversed game pairs from an opening book, played
    /// here on all cores (or queued with --api); `sprt calc` and `sprt show ID`.
    ///
    /// Counts W/D/L and pentanomial pairs, and stops when the LLR (fishtest's normalized
    /// model by default) leaves ln(β/(1-α)), ln((1-β)/α). Games go to sprt/<id>/games.pgn.
    Sprt(crate::sprt_cmd::SprtArgs),
    /// Place an engine (or a net in lakefish's engine) on Stockfish's Elo scale: fixed-length
    /// matches against a registered engine at several UCI_LimitStrength/UCI_Elo levels, then
    /// the maximum-likelihood Elo with its 95% interval.
    Gauntlet(crate::sprt_cmd::GauntletArgs),
    /// Self-play training data: games with a few random opening plies, then searched moves;
    /// every position with its score, best move, ply and the game's result, written as a
    /// binpack (raw/selfplay/...) and ingested as positions/source=selfplay/dataset=NAME.
    Datagen(DatagenArgs),
    /// A new dataset from a committed one, with lineage to it: quiescence leaves
    /// (qsearch-leaf) or every position scored again by an engine (rescore). Shuffle the
    /// output like any dataset (mask it first).
    Transform {
        #[command(subcommand)]
        what: crate::transform_cmd::TransformCommand,
    },
    /// Run queued jobs from a shared Redis queue.
    Worker {
        /// The shared queue (or `server.redis` in the config).
        #[arg(long, env = "LAKEFISH_REDIS", hide_env_values = true)]
        redis: Option<String>,
        #[command(flatten)]
        work: WorkArgs,
        /// Name shown in job records (default: host name and process id).
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        meta: MetastoreArg,
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
    /// Training runs in the lake: all of them, one line each, or one run's record (JSON) with
    /// its last metrics rows.
    Runs {
        /// One run's record, with its last metrics rows (default: all runs).
        id: Option<lakefish_schemas::names::RunId>,
        /// With a run: every metrics row (one each 10 steps), as JSON.
        #[arg(long, requires = "id")]
        metrics: bool,
        /// The list as a JSON array.
        #[arg(long)]
        json: bool,
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
    /// The engine registry: UCI engines (Stockfish, yours) that SPRTs can play as sides,
    /// written ENGINE[+NET][,OPTION=VALUE...] in `lakefish sprt --new/--base`.
    Engines {
        /// Go through a running service instead of the lake directly (admin token to add or
        /// remove: LAKEFISH_TOKEN). Before or after the subcommand.
        #[arg(long, env = "LAKEFISH_API", global = true)]
        api: Option<String>,
        #[command(subcommand)]
        what: crate::engines_cmd::EnginesCommand,
    },
    /// The net registry: list, show a manifest, or pull a net's file (hash-checked).
    Nets {
        /// Read through a running service instead of the lake directly. Before or after the
        /// subcommand (`nets ls --api URL`, as `sprt show ID --api URL`).
        #[arg(long, env = "LAKEFISH_API", global = true)]
        api: Option<String>,
        #[command(subcommand)]
        what: crate::nets_cmd::NetsCommand,
    },
    /// Write a per-position mask beside a dataset, in-process, with a progress bar.
    ///
    /// `lakefish mask NAME --dataset D` keeps what NAME's rule keeps when NAME is a rule
    /// (quiet, all, wld, piece-count); otherwise say which rules with `--rule`, e.g.
    /// `lakefish mask thin --dataset D --rule quiet --rule random-skip=3 --rule early-skip=8`.
    /// Several masks live side by side; shuffle with one by name (`shuffle --mask NAME`).
    Mask(MaskArgs),
    /// Send a job to a running `lakefish serve` instead of running it here.
    Submit {
        /// The API's base URL.
        #[arg(long, env = "LAKEFISH_API", default_value = "http://127.0.0.1:8080")]
        api: String,
        /// Wait for the job to finish, showing its progress; exit non-zero if it fails.
        #[arg(long)]
        wait: bool,
        /// Upload local input files through the API into the lake's raw/ first, so workers on
        /// any machine can read them. The same bytes again are not sent twice; other bytes
        /// under a name already uploaded are refused unless --replace.
        #[arg(long)]
        upload: bool,
        /// With --upload: store a file whose name holds other bytes as a new version (ingests
        /// then see it as another input).
        #[arg(long, requires = "upload")]
        replace: bool,
        #[command(subcommand)]
        what: SubmitCommand,
    },
    /// Pipelines of a running service: `pipeline ls`, `pipeline run NAME --wait`.
    Pipeline(crate::pipeline_cmd::PipelineArgs),
    /// Questions answered as tables: nets trained from a base recipe and axes to vary, then
    /// rated together in Elo with intervals (`experiment run FILE`, `show ID`, `ls`).
    Experiment {
        #[command(subcommand)]
        what: crate::experiment_cmd::ExperimentCommand,
    },
    /// A dataset (or the rows one of its masks keeps) written in another tool's text format:
    /// Stockfish's plain text, or bullet's `FEN | score | result`.
    Export(crate::export_cmd::ExportArgs),
    /// A dataset's profile: rows, histograms of score, ply, men and result, repeated positions
    /// and the share whose score and result disagree (Stockfish's win-rate model); stored
    /// beside the data as profiles/source=S/dataset=D/profile.json.
    Profile(crate::lake_cmd::ProfileArgs),
    /// What the lake holds, in bytes and objects, per kind (raw inputs, datasets, masks,
    /// profiles, shuffles, runs, nets, SPRT tests, experiments, other) and its largest items.
    Du(crate::lake_cmd::DuArgs),
    /// Remove what nothing needs: checkpoints of finished runs beyond the last
    /// --keep-checkpoints (never one a registered net came from, nor any of a run a queued or
    /// running job names), pass-1 files of committed shuffles, and the parts of ingests that
    /// never committed once their writer's claim is past its 5-minute lease and no job names
    /// the dataset. Prints the plan; --yes acts.
    Gc(crate::lake_cmd::GcArgs),
    /// Remove one item: `dataset [SOURCE/]NAME` (with its masks and profile), `mask
    /// MASK@[SOURCE/]NAME` (one mask of a dataset), `shuffle SH`,
    /// `run RUN`, `checkpoint RUN/STEP` or `games SPRT` (a finished test's games; its result
    /// stays). Refused while anything needs it (a registered net's lineage, the best net, a
    /// shuffle, a run, an experiment), naming each; --force removes anyway, leaving a tombstone
    /// lineage shows. Never under a queued or running job or a running test. Prints what it
    /// would remove; --yes acts.
    Rm(crate::lake_cmd::RmArgs),
    /// Show jobs known to a running service: all of them, or one by id.
    Jobs {
        /// The API's base URL (LAKEFISH_TOKEN is sent when set).
        #[arg(long, env = "LAKEFISH_API", default_value = "http://127.0.0.1:8080")]
        api: String,
        /// Only jobs in this state: queued, running, succeeded, failed, cancelled.
        #[arg(long)]
        state: Option<String>,
        /// Only jobs of this kind (ingest_pgn, train, sprt, ...).
        #[arg(long, value_parser = job_kind)]
        kind: Option<lakefish_schemas::JobKind>,
        /// The list as JSON, as `GET /v1/jobs` gives it (with the cursor of the next page).
        #[arg(long)]
        json: bool,
        /// One job's full record (JSON).
        id: Option<String>,
        /// Cancel that job: a queued one never starts, a running one stops at its next
        /// progress report (a submit token in LAKEFISH_TOKEN). Prints the record.
        #[arg(long, requires = "id")]
        cancel: bool,
    },
    /// The datasets committed to the lake, one line each: rows, size, parts, masks.
    Datasets {
        /// As a JSON array (the `datasets` of `GET /v1/datasets`).
        #[arg(long)]
        json: bool,
    },
    /// Print rows of one shuffle chunk: FEN (decoded from the packed board training reads),
    /// score, result, ply and move, tab-separated (or JSON lines with --json).
    Chunk {
        /// The shuffle (sh-...).
        shuffle: lakefish_schemas::names::ShuffleId,
        /// Which chunk (0 is the first).
        #[arg(default_value_t = 0)]
        index: u32,
        /// Rows to print.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// One JSON object per row.
        #[arg(long)]
        json: bool,
    },
    /// Copy local files into the lake as raw/<source>/<file name> (prints the lake: keys).
    Upload {
        /// Local files to copy (each keeps its file name).
        #[arg(required = true)]
        files: Vec<String>,
        /// binpack, lichess, selfplay, plain or bullet; or books (opening books, raw/books/).
        #[arg(long, default_value = "binpack")]
        source: String,
        /// Store a file whose name already holds other bytes as a new version (raw objects
        /// are otherwise immutable; ingests see a new version as another input).
        #[arg(long)]
        replace: bool,
    },
    /// Measure a hot path against its reference, in the same run: runs `lakefish-bench`
    /// (a binary of its own beside this one, built by `make bench`; `lakefish bench --help`
    /// lists the benchmarks).
    #[command(disable_help_flag = true)]
    Bench {
        /// The benchmark and its arguments, handed to `lakefish-bench`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// API tokens: `token new NAME --scope read` prints a fresh token and its config entry.
    Token {
        #[command(subcommand)]
        what: TokenCommand,
    },
    /// The metadata store (job records and the catalogue of the lake): its schema and counts,
    /// or filling it from a lake.
    ///
    /// Takes --metastore (or the default beside --queue-db) as `serve` does.
    Metastore {
        #[command(subcommand)]
        what: MetastoreCommand,
        #[command(flatten)]
        queue: QueueArgs,
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
pub(crate) enum TokenCommand {
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

#[derive(Subcommand)]
pub(crate) enum MetastoreCommand {
    /// Where it is, its schema version (created or migrated now if needed), catalogue
    /// entries and job counts.
    Status,
    /// Re-creates the catalogue (datasets, shuffles, runs, nets, SPRT tests, pipeline runs,
    /// the best net) from the lake alone, and copies the job records an older lakefish kept
    /// in the lake (jobs/*.json), keeping records it already has: for recovery, and once when
    /// moving an existing lake over. Safe to run again, also while the service runs.
    Rebuild {
        /// Also remove entries of things the lake no longer holds (deleted by hand, or lost
        /// with a restored backup). Safe beside running jobs: an entry goes only when a
        /// second listing of the lake, made after the entries were read, lacks it too.
        #[arg(long)]
        prune: bool,
    },
}

#[derive(clap::Args)]
pub(crate) struct QueueArgs {
    /// Use this Redis (redis://host:port) as the queue instead of the SQLite file.
    #[arg(long, env = "LAKEFISH_REDIS", hide_env_values = true)]
    pub redis: Option<String>,
    /// The SQLite queue file of the embedded default.
    #[arg(
        long,
        env = "LAKEFISH_QUEUE_DB",
        default_value = "./lakefish-queue.sqlite"
    )]
    pub queue_db: String,
    #[command(flatten)]
    pub meta: MetastoreArg,
}

#[derive(clap::Args, Clone, Default)]
pub(crate) struct MetastoreArg {
    /// Where job records are kept: sqlite:PATH (default with the SQLite queue:
    /// lakefish-meta.sqlite beside the queue file), postgres://USER:PASSWORD@HOST:PORT/DB
    /// (deployments on several machines: the server and every worker name the same one), or
    /// lake (jobs/*.json in the lake, as before the metastore; the default with --redis, slow
    /// with a long history).
    #[arg(long, env = "LAKEFISH_METASTORE", hide_env_values = true)]
    pub metastore: Option<String>,
}

#[derive(clap::Args)]
pub(crate) struct WorkArgs {
    /// Jobs run at the same time by this process.
    #[arg(long, default_value_t = 1)]
    pub concurrency: usize,
    /// CPU threads each job may use (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Take GPU-only jobs (training with device cuda) as well: checked at start (refused
    /// when libtorch sees no CUDA GPU). Without it a worker that finds a usable GPU takes
    /// them too; one without a GPU never does.
    #[arg(long)]
    pub gpu: bool,
}

#[derive(Subcommand)]
pub(crate) enum IngestCommand {
    /// Stockfish .binpack files into positions/source=binpack/dataset=NAME/.
    Binpack(IngestArgs),
    /// PGN files (.pgn, or .pgn.zst as Lichess publishes them) into
    /// positions/source=lichess/dataset=NAME/month=YYYY-MM/ plus the games table beside it.
    ///
    /// One row per position before each move of the main line; [%eval] comments become scores
    /// (side to move, Stockfish internal units). Chess960 games and null moves are kept; other
    /// variant games are skipped and counted; a game with an illegal move is reported (file,
    /// game number, move) and skipped.
    Pgn(IngestArgs),
    /// Stockfish's plain text (fen, move, score, ply, result and e lines, as `lakefish
    /// export --format plain` and Stockfish's tools write it) into
    /// positions/source=plain/dataset=NAME/. Every column is kept; a bad entry is reported
    /// by byte offset and skipped.
    Plain(IngestArgs),
    /// bullet's data into positions/source=bullet/dataset=NAME/: text (`FEN | score |
    /// result`, White's view, centipawns) or bulletformat's 32-byte records, told apart per
    /// file by its first bytes. No move is stored (bullet keeps none); records come in as
    /// White to move without castling rights (bulletformat keeps neither). Centipawns become
    /// internal units by Stockfish's win-rate model.
    Bullet(IngestArgs),
}

#[derive(Subcommand)]
// Parsed once per process: the size of the largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum SubmitCommand {
    /// Queue a job from its JSON ({"kind": ..., "spec": {...}}), as POST /v1/jobs takes it.
    #[command(after_help = format!(
        "Kinds: {}. Each spec's fields: GET /v1/openapi.json, schema SubmitRequest.",
        lakefish_schemas::JobKind::submittable()
    ))]
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
    /// Queue a mask job (the same arguments as `lakefish mask`).
    Mask(MaskArgs),
    /// Queue a transform job (the same arguments as `lakefish transform`).
    Transform {
        #[command(subcommand)]
        what: crate::transform_cmd::TransformCommand,
    },
}

#[derive(clap::Args)]
pub(crate) struct ShuffleArgs {
    /// Datasets to shuffle together (repeat the flag): NAME, of the --source partition, or
    /// SOURCE/NAME to mix sources (`--dataset sf-1 --dataset lichess/twic`).
    #[arg(long = "dataset", required = true, value_name = "[SOURCE/]NAME")]
    pub datasets: Vec<String>,
    /// The source partition of datasets named without one: binpack, lichess, selfplay, plain or bullet.
    #[arg(long, default_value = "binpack")]
    pub source: String,
    /// The mask that selects rows (it must exist for every dataset).
    #[arg(long, default_value = "quiet")]
    pub mask: MaskName,
    /// Number of output chunks (= piles).
    #[arg(long)]
    pub chunks: u32,
    /// Same seed, same chunks, byte for byte.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// CPU threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
}

impl ShuffleArgs {
    pub(crate) fn spec(&self) -> anyhow::Result<ShuffleSpec> {
        let source = Source::parse(&self.source).with_context(|| {
            format!(
                "unknown source {:?} (binpack, lichess, selfplay, plain or bullet)",
                self.source
            )
        })?;
        let inputs = self
            .datasets
            .iter()
            .map(|d| DatasetRef::parse(d, source))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow::anyhow!("--dataset {e}"))?;
        let spec = ShuffleSpec::from_inputs(&inputs, self.mask.clone(), self.chunks, self.seed);
        spec.validate().map_err(anyhow::Error::msg)?;
        Ok(spec)
    }
}

#[derive(clap::Args)]
pub(crate) struct MaskArgs {
    /// The mask's name: a path segment. When no --rule is given it is also the rule
    /// (quiet, all, wld or piece-count).
    pub name: MaskName,
    /// The dataset to mask.
    #[arg(long)]
    pub dataset: DatasetName,
    /// Its source partition: binpack, lichess, selfplay, plain or bullet.
    #[arg(long, default_value = "binpack")]
    pub source: String,
    /// A rule the mask applies; give several and a row must pass them all. nnue-pytorch's
    /// skips by its names: quiet (not in check, no capture, no promotion), all (every row),
    /// wld (drop by 1 − P(result | score, ply) under nnue-pytorch's win-rate model),
    /// random-skip=N (drop N of every N+1 rows at random), early-skip=N (drop ply ≤ N),
    /// simple-eval-skip=N (drop |material balance| < N, pawn = 208),
    /// piece-count[=Y0,Y1,Y2,Y3,Y4[:MAX_SKIP]] (reshape to a target piece-count
    /// distribution; weights at 0, 8, 16, 24, 32 men, default 0,0.4,1,1,0.75:0.975).
    #[arg(long = "rule", value_name = "RULE")]
    pub rules: Vec<String>,
    /// Seed of the random rules' draws (random-skip, wld, piece-count).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Drop rows before this ply.
    #[arg(long)]
    pub min_ply: Option<u16>,
    /// Drop rows whose |score| is larger.
    #[arg(long)]
    pub max_abs_score: Option<u16>,
    /// The mask's name when NAME is the rule (the older spelling:
    /// `lakefish mask quiet --name quiet-ply16 --min-ply 16`).
    #[arg(long = "name", hide = true)]
    pub rename: Option<MaskName>,
    /// CPU threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
}

impl MaskArgs {
    pub(crate) fn spec(&self) -> anyhow::Result<MaskSpec> {
        let rules = if self.rules.is_empty() {
            vec![MaskRule::parse(self.name.as_str()).map_err(|e| {
                anyhow::anyhow!(
                    "mask {}: with no --rule the name is the rule, and {e}; say what the mask \
                     keeps with --rule (see `lakefish mask --help`)",
                    self.name
                )
            })?]
        } else {
            self.rules
                .iter()
                .map(|r| MaskRule::parse(r).map_err(|e| anyhow::anyhow!("--rule {r}: {e}")))
                .collect::<anyhow::Result<_>>()?
        };
        let spec = MaskSpec {
            dataset: self.dataset.clone(),
            source: Source::parse(&self.source)
                .with_context(|| format!("unknown source {:?}", self.source))?,
            definition: MaskDefinition {
                name: self.rename.clone().unwrap_or_else(|| self.name.clone()),
                rules,
                min_ply: self.min_ply,
                max_abs_score: self.max_abs_score,
                seed: self.seed,
            },
        };
        spec.validate().map_err(anyhow::Error::msg)?;
        Ok(spec)
    }
}

#[derive(clap::Args)]
pub(crate) struct QuantizeArgs {
    /// The training run (run-...).
    #[arg(long)]
    pub run: lakefish_schemas::names::RunId,
    /// The checkpoint's step (default: the run's last checkpoint).
    #[arg(long)]
    pub checkpoint: Option<u64>,
    /// Lake positions to compare the integer net with the float model on.
    #[arg(long, default_value_t = 10_000)]
    pub positions: u32,
    /// Refuse the net above this mean absolute difference (centipawns).
    #[arg(long, default_value_t = lakefish_schemas::nets::DEFAULT_MAX_MEAN_CP)]
    pub max_mean_cp: f64,
    /// Refuse the net above this 99th-percentile absolute difference (centipawns).
    #[arg(long, default_value_t = lakefish_schemas::nets::DEFAULT_MAX_P99_CP)]
    max_p99_cp: f64,
    /// CPU threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
}

impl QuantizeArgs {
    pub(crate) fn spec(&self) -> anyhow::Result<lakefish_schemas::QuantizeSpec> {
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
pub(crate) struct RegisterArgs {
    /// The training run (run-...).
    #[arg(long)]
    pub run: lakefish_schemas::names::RunId,
    /// The quantized checkpoint's step (default: the run's last checkpoint).
    #[arg(long)]
    pub checkpoint: Option<u64>,
    /// The registered net this one descends from (nn-....nnue).
    #[arg(long)]
    pub parent: Option<String>,
}

impl RegisterArgs {
    pub(crate) fn spec(&self) -> anyhow::Result<lakefish_schemas::RegisterSpec> {
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
pub(crate) struct IngestArgs {
    /// Input files (local paths, or lake:raw/... keys).
    #[arg(required = true)]
    pub files: Vec<String>,
    /// Dataset name (letters, digits, '.', '_', '-').
    #[arg(long)]
    pub dataset: DatasetName,
    /// Target rows per Parquet part.
    #[arg(long, default_value_t = lakefish_schemas::job::default_rows_per_part())]
    pub rows_per_part: u64,
    /// PGN: skip (and report) a game longer than this many bytes; default 8 MiB.
    #[arg(long)]
    pub max_game_bytes: Option<u64>,
    /// CPU threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
}

pub(crate) fn ingest_spec(a: &IngestArgs, absolute: bool) -> anyhow::Result<IngestBinpackSpec> {
    let inputs = a
        .files
        .iter()
        .map(|f| {
            if absolute && !f.starts_with(lakefish_lake::input::LAKE_PREFIX) {
                // Resolved (no `..`, no symlinks), as the service's input rule judges it.
                let p = std::fs::canonicalize(f)
                    .or_else(|_| std::path::absolute(f))
                    .with_context(|| format!("input {f}"))?;
                Ok(p.to_string_lossy().into_owned())
            } else {
                Ok(f.clone())
            }
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let spec = IngestBinpackSpec {
        max_game_bytes: a.max_game_bytes,
        inputs,
        dataset: a.dataset.clone(),
        rows_per_part: a.rows_per_part,
    };
    spec.validate().map_err(anyhow::Error::msg)?;
    Ok(spec)
}

#[derive(clap::Args)]
pub(crate) struct DatagenArgs {
    /// The evaluation both sides use: a registered net, `best`, or `classical`.
    #[arg(long, default_value = "best")]
    pub net: String,
    /// Play and score the games with another engine instead of lakefish's:
    /// ENGINE[+NET][,OPTION=VALUE...], a registered engine (lakefish engines ls), e.g.
    /// 'stockfish,Skill Level=20' (options as its registration allows) with --nodes 5000. Its `info ... score` labels each position.
    #[arg(long)]
    pub engine: Option<String>,
    /// Dataset to ingest the games into.
    #[arg(long)]
    pub dataset: String,
    /// Number of self-play games.
    #[arg(long, default_value_t = 100)]
    pub games: u64,
    /// The same seed gives the same games, whatever the number of threads.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Nodes per move (default 5000).
    #[arg(long, conflicts_with = "depth")]
    pub nodes: Option<u64>,
    /// A fixed depth per move instead of nodes.
    #[arg(long)]
    pub depth: Option<u32>,
    /// Random legal moves at the start of each game, for variety.
    #[arg(long, default_value_t = 6)]
    pub random_plies: u32,
    /// Searched plies before adjudication (|score| below --draw-cp is a draw).
    #[arg(long, default_value_t = 200)]
    pub max_plies: u32,
    /// At the ply limit, a game whose last |score| is below this many centipawns is a draw (the rest go to the side ahead).
    #[arg(long, default_value_t = 400)]
    pub draw_cp: i32,
    /// Win adjudication: a game is won by the side ahead once |score| reaches this many
    /// centipawns for --win-plies searched plies in a row (off by default).
    #[arg(long)]
    pub win_cp: Option<i32>,
    /// Searched plies in a row for --win-cp.
    #[arg(long, default_value_t = 4)]
    pub win_plies: u32,
    /// Draw adjudication from this game ply on: |score| at most --draw-window-cp for
    /// --draw-window-plies searched plies in a row is a draw (off by default).
    #[arg(long)]
    pub draw_after_ply: Option<u32>,
    /// Centipawn window for --draw-after-ply.
    #[arg(long, default_value_t = 10)]
    pub draw_window_cp: i32,
    /// Searched plies in a row for --draw-after-ply.
    #[arg(long, default_value_t = 12)]
    pub draw_window_plies: u32,
    /// Openings whose search after the random plies scores beyond this many centipawns
    /// either way are drawn again (off by default).
    #[arg(long)]
    pub opening_max_cp: Option<i32>,
    /// Threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
}

impl DatagenArgs {
    pub(crate) fn spec(&self) -> anyhow::Result<lakefish_schemas::DatagenSpec> {
        let spec = lakefish_schemas::DatagenSpec {
            net: self.net.clone(),
            engine: self.engine.as_deref().map(Into::into),
            dataset: DatasetName::new(&self.dataset)?,
            games: self.games,
            seed: self.seed,
            nodes: self.nodes,
            depth: self.depth,
            random_plies: self.random_plies,
            max_plies: self.max_plies,
            draw_cp: self.draw_cp,
            win_cp: self.win_cp,
            win_plies: self.win_plies,
            draw_after_ply: self.draw_after_ply,
            draw_window_cp: self.draw_window_cp,
            draw_window_plies: self.draw_window_plies,
            opening_max_cp: self.opening_max_cp,
        };
        spec.validate().map_err(anyhow::Error::msg)?;
        Ok(spec)
    }
}

/// A job kind named on the command line.
fn job_kind(name: &str) -> Result<lakefish_schemas::JobKind, String> {
    lakefish_schemas::JobKind::parse(name).ok_or_else(|| {
        let known: Vec<&str> = lakefish_schemas::JobKind::ALL
            .iter()
            .map(|k| k.as_str())
            .collect();
        format!("unknown job kind (known: {})", known.join(", "))
    })
}

#[cfg(test)]
#[path = "cli_tests.rs"]
mod tests;
