//! The command line of `lakefish-bench` (its `main` is this module's): each benchmark's
//! arguments, and running it. Kept in the library so that its checks run in the library's
//! tests and the binary needs no test build of its own.

use clap::{Parser, Subcommand};
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "lakefish-bench",
    version,
    about = "Benchmarks of lakefish's hot paths, each against a reference measured in the same run",
    help_expected = true
)]
struct Args {
    #[command(subcommand)]
    what: BenchCommand,
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
    /// Reading job history: a first page, a deep page, a filtered page, /metrics and the
    /// overview, through the real router, against a metastore of RECORDS synthetic job
    /// records (SQLite, and PostgreSQL), and in the same run against LAKE_RECORDS records
    /// kept in the lake as before the metastore (the reference). Prints p50/p99 of each.
    Metastore {
        /// Job records in each database.
        #[arg(long, default_value_t = 1_000_000)]
        records: usize,
        /// Job records in the lake reference (each list reads them all).
        #[arg(long, default_value_t = 5_000)]
        lake_records: usize,
        /// Timed requests of each kind on each database.
        #[arg(long, default_value_t = 200)]
        repeats: usize,
        /// Timed requests of each kind on the lake reference (each reads the whole history).
        #[arg(long, default_value_t = 10)]
        lake_repeats: usize,
        /// Put every lake of the bench (the reference's records and tests, the databases'
        /// catalogue lakes) under this store instead of a temp directory: `s3://bucket/prefix`
        /// with AWS_ENDPOINT and the other AWS_* variables. Objects written are deleted after.
        #[arg(long)]
        store: Option<String>,
        /// An empty PostgreSQL database to fill (postgres://...); by default a server of its
        /// own is started in a temp dir (Debian's postgresql package); "" skips PostgreSQL.
        #[arg(long)]
        postgres: Option<String>,
        /// Skip SQLite.
        #[arg(long)]
        no_sqlite: bool,
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
        /// Feature sets to measure, comma-separated (each: old and new loader, trainer,
        /// PyTorch, over the same chunks).
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "all768,halfkp,halfka_v2_hm"
        )]
        features: Vec<String>,
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
        /// bullet's CPU trainer to compare with: the `cmp` example binary that
        /// ../shared/bench/bullet-cpu/ builds. Given, the run also trains (768 → 256)×2 → 1
        /// SCReLU on the file with bullet and with lakefish (bullet's AdamW and start; the net
        /// as infra/nets/bullet-1-simple.toml describes it, 256 wide, eval scale 361),
        /// alternating, and prints `all768 trainer/bullet` (positions per CPU-second) and
        /// `all768 loss lakefish/bullet` (training loss over the last quarter of the steps).
        #[arg(long, value_name = "PATH")]
        bullet: Option<std::path::PathBuf>,
        /// Steps of 16,384 positions each side trains in the bullet comparison.
        #[arg(long, default_value_t = 172)]
        bullet_steps: u64,
        /// Alternating rounds of the bullet comparison: the speed ratio is their median, the
        /// loss ratio that of their means (each round draws a new start on both sides).
        #[arg(long, default_value_t = 4)]
        bullet_rounds: usize,
        /// bullet's trainer for the bucketed comparison: our example
        /// tests/bullet/lakefish_check.rs, which `cargo test --test bullet` builds into
        /// target/bullet/release/examples/lakefish_check. Given, the run also trains bullet's
        /// `3_input_buckets` shape (ten mirrored king buckets with a factoriser, SCReLU, eight
        /// output buckets by material), --bucket-width wide, with bullet and with lakefish, and
        /// prints `king_buckets trainer/bullet` and `king_buckets loss lakefish/bullet`.
        #[arg(long, value_name = "PATH")]
        bullet_buckets: Option<std::path::PathBuf>,
        /// The transformer's width in the bucketed comparison (bullet's example: 1024).
        #[arg(long, default_value_t = 256)]
        bucket_width: u32,
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

/// CPU cores of this machine (the default thread count).
fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// The HTTP client of the load test: sends `LAKEFISH_TOKEN` as a bearer token when set.
fn client() -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Ok(token) = std::env::var("LAKEFISH_TOKEN")
        && let Ok(mut v) = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
    {
        v.set_sensitive(true);
        headers.insert(reqwest::header::AUTHORIZATION, v);
    }
    reqwest::Client::builder()
        .default_headers(headers)
        .timeout(Duration::from_secs(30))
        .build()
        .expect("http client")
}

pub fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_env("LAKEFISH_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    run(&rt, args.what)
}

fn run(rt: &tokio::runtime::Runtime, what: BenchCommand) -> anyhow::Result<()> {
    match what {
        BenchCommand::Train {
            file,
            features,
            threads,
            steps,
            device,
            torch_python,
            torch_script,
            bullet,
            bullet_steps,
            bullet_rounds,
            bullet_buckets,
            bucket_width,
        } => {
            let threads = threads.unwrap_or_else(cores);
            if let Some(bullet) = &bullet {
                crate::bullet::check_args(bullet, crate::bullet::Compared::Simple, bullet_steps)?;
            }
            if let Some(b) = &bullet_buckets {
                let net = crate::bullet::Compared::Buckets {
                    width: bucket_width,
                };
                crate::bullet::check_args(b, net, bullet_steps)?;
                crate::bullet::buckets_net(bucket_width)?;
            }
            let device = lakefish_train::train::select_device(
                lakefish_schemas::DeviceChoice::parse(&device).map_err(anyhow::Error::msg)?,
            )?;
            let feature_sets = features
                .iter()
                .map(|f| lakefish_engine::features::FeatureSetKind::from_name(f))
                .collect::<Result<Vec<_>, _>>()?;
            let reference = std::path::Path::new(&torch_python).exists().then(|| {
                crate::train::TorchReference {
                    python: torch_python.clone().into(),
                    script: torch_script.into(),
                }
            });
            if reference.is_none() {
                eprintln!(
                    "no {torch_python}: the PyTorch reference is skipped (make bench-train sets it up)"
                );
            }
            let r = crate::train::bench_train(
                rt.handle(),
                &file,
                &feature_sets,
                threads,
                steps,
                device,
                reference.as_ref(),
            )?;
            println!(
                "file {}, {} threads, {} on {}",
                r.file, r.threads, r.arch, r.device
            );
            for f in &r.features {
                let name = &f.features;
                println!("{name} positions in batches {}", f.positions);
                println!(
                    "{name} loader old, 1 thread {:>12.0} positions/s (FEN text)",
                    f.old_loader_positions_per_s_per_core
                );
                println!(
                    "{name} loader new, 1 thread {:>12.0} positions/s (packed boards)",
                    f.loader_positions_per_s_per_core
                );
                println!(
                    "{name} chunk reads alone {:>12.0} positions/s (Parquet, 1 thread)",
                    f.chunk_read_positions_per_s
                );
                println!(
                    "{name} loader new, {} threads {:>11.0} positions/s",
                    r.threads, f.loader_positions_per_s
                );
                println!(
                    "{name} trainer b{} {:>12.0} positions/s",
                    r.batch_size, f.trainer_positions_per_s
                );
                println!(
                    "{name} trainer, dense Adam {:>8.0} positions/s (libtorch backward)",
                    f.dense_trainer_positions_per_s
                );
                if let Some(s) = f.sparse_trainer_positions_per_s {
                    println!("{name} trainer, sparse FT {s:>9.0} positions/s (lazy Adam)");
                }
                if let Some(p) = f.pytorch_positions_per_s {
                    println!(
                        "{name} plain PyTorch {} {:>12.0} positions/s",
                        r.pytorch_version.as_deref().unwrap_or("?"),
                        p
                    );
                }
            }
            for f in &r.features {
                println!(
                    "{} loader new/old {:.2} (target >= 5)",
                    f.features, f.loader_new_to_old
                );
                if let Some(ratio) = f.trainer_to_pytorch {
                    println!("{} trainer/PyTorch {ratio:.2}", f.features);
                }
                println!(
                    "{} loader per core/trainer {:.1} (target >= 10)",
                    f.features, f.loader_to_trainer
                );
            }
            println!("{}", serde_json::to_string(&r)?);
            let compared = bullet
                .map(|b| (b, crate::bullet::Compared::Simple))
                .into_iter()
                .chain(bullet_buckets.map(|b| {
                    let net = crate::bullet::Compared::Buckets {
                        width: bucket_width,
                    };
                    (b, net)
                }));
            for (bullet, net) in compared {
                let c = crate::bullet::bench_bullet(
                    rt.handle(),
                    &file,
                    &bullet,
                    net,
                    threads,
                    bullet_steps,
                    bullet_rounds,
                )?;
                let label = net.label();
                for (i, (b, l)) in c.rounds.iter().enumerate() {
                    println!(
                        "{label} round {}: bullet {:.2} CPU-s {:.0} positions/CPU-s loss {:.5}; lakefish {:.2} CPU-s {:.0} positions/CPU-s loss {:.5}",
                        i + 1,
                        b.cpu_seconds,
                        b.positions_per_cpu_second(),
                        b.last_quarter_loss,
                        l.cpu_seconds,
                        l.positions_per_cpu_second(),
                        l.last_quarter_loss
                    );
                }
                println!(
                    "{label} trainer/bullet {:.2} (target >= 1)",
                    c.trainer_to_bullet
                );
                println!(
                    "{label} loss lakefish/bullet {:.2} (target <= 1)",
                    c.loss_to_bullet
                );
                println!("{}", serde_json::to_string(&c)?);
            }
            Ok(())
        }
        BenchCommand::IngestPgn {
            file,
            threads,
            runs,
            min_mib,
        } => {
            let threads = threads.unwrap_or_else(cores);
            let r = crate::jobs::bench_ingest_pgn(rt.handle(), &file, threads, runs, min_mib)?;
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
        BenchCommand::IngestBinpack {
            file,
            threads,
            runs,
        } => {
            let threads = threads.unwrap_or_else(cores);
            let r = crate::jobs::bench_ingest_binpack(rt.handle(), &file, threads, runs)?;
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
        BenchCommand::Mask {
            file,
            threads,
            runs,
        } => {
            let threads = threads.unwrap_or_else(cores);
            let r = crate::jobs::bench_mask(rt.handle(), &file, threads, runs)?;
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
        BenchCommand::Load {
            api,
            job,
            clients,
            seconds,
            reference_seconds,
        } => {
            let job: serde_json::Value = serde_json::from_str(&job)
                .map_err(|e| anyhow::anyhow!("--job is not JSON: {e}"))?;
            if !(0.0..=60.0).contains(&seconds) || !(0.0..=60.0).contains(&reference_seconds) {
                anyhow::bail!("--seconds and --reference-seconds must be between 0 and 60");
            }
            if clients == 0 || clients > 1024 {
                anyhow::bail!("--clients must be between 1 and 1024");
            }
            let r = rt.block_on(crate::load::run(
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
        BenchCommand::Metastore {
            records,
            lake_records,
            repeats,
            lake_repeats,
            store,
            postgres,
            no_sqlite,
        } => {
            if records == 0 || lake_records == 0 || repeats == 0 || lake_repeats == 0 {
                anyhow::bail!(
                    "--records, --lake-records, --repeats and --lake-repeats must be at least 1"
                );
            }
            let bar = indicatif::ProgressBar::new(0);
            let progress = |what: &str, done: usize, total: usize| {
                bar.set_length(total as u64);
                bar.set_position(done as u64);
                bar.set_message(format!("filling {what}"));
            };
            bar.set_style(
                indicatif::ProgressStyle::with_template("{msg} {wide_bar} {pos}/{len} {eta}")
                    .expect("template"),
            );
            let reports = rt.block_on(crate::metastore::run(
                records,
                lake_records,
                repeats,
                crate::metastore::Backends {
                    sqlite: !no_sqlite,
                    postgres,
                    store,
                    lake_repeats,
                },
                &progress,
            ))?;
            bar.finish_and_clear();
            let reference = &reports[0];
            for r in &reports {
                println!(
                    "{} — {} records and {} SPRT tests, filled at {:.0} records/s",
                    r.backend, r.records, r.tests, r.fill_per_s
                );
                for (i, (name, l)) in r.requests.iter().enumerate() {
                    let base = &reference.requests[i].1;
                    println!(
                        "  {name:<14} p50 {:>9.2} ms  p99 {:>9.2} ms  ({} samples)  p99 / lake reference {:.4}",
                        l.p50_ms,
                        l.p99_ms,
                        l.count,
                        l.p99_ms / base.p99_ms.max(1e-9)
                    );
                }
            }
            println!("{}", serde_json::to_string(&reports)?);
            Ok(())
        }
        BenchCommand::Shuffle {
            file,
            threads,
            chunks,
            runs,
            store,
        } => {
            let threads = threads.unwrap_or_else(cores);
            let r = crate::jobs::bench_shuffle(
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
    }
}

#[cfg(test)]
mod tests {
    use super::Args;
    use clap::{CommandFactory, Parser};

    /// Every benchmark and argument carries help text (clap checks with debug assertions).
    #[test]
    fn every_command_and_argument_has_help() {
        Args::command().debug_assert();
    }

    /// `train --device` takes cpu, cuda or auto; anything else is refused by name with the
    /// values it takes, before any work starts.
    #[test]
    fn bench_train_refuses_an_unknown_device() {
        let parse = |device: &str| {
            Args::try_parse_from(["lakefish-bench", "train", "x.binpack", "--device", device])
        };
        let err = parse("gpu0").err().expect("gpu0 refused").to_string();
        assert!(err.contains("gpu0") && err.contains("cuda"), "{err}");
        for ok in ["cpu", "cuda", "auto"] {
            assert!(parse(ok).is_ok(), "{ok}");
        }
    }
}
