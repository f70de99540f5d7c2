//! `lakefish engine`: the UCI engine on stdin/stdout, and `lakefish engine bench`.
//!
//! The engine crate knows nothing of the lake; this module turns `--net` (and UCI's
//! `EvalFile`) into an evaluator: `best`, a registry name, a file path, or `classical`.

use std::sync::Arc;

use anyhow::{Context, bail};
use lakefish_engine::eval::Evaluator;
use lakefish_engine::features::FeatureSetKind;
use lakefish_engine::nnue::random_network;

#[derive(clap::Args)]
pub(crate) struct EngineArgs {
    /// Evaluation: `best` (the registry's best net, or the hand-written evaluation until a
    /// net has been promoted), a registered name (nn-<12 hex>, pulled from the lake and
    /// hash-checked), a path to a .nnue file, or `classical`.
    #[arg(long, default_value = "best")]
    pub net: String,
    /// Transposition table size in MiB.
    #[arg(long, default_value_t = 16)]
    pub hash: usize,
    #[command(subcommand)]
    pub command: Option<EngineCommand>,
}

#[derive(clap::Subcommand)]
pub(crate) enum EngineCommand {
    /// Search a fixed set of 16 positions to a fixed depth on one thread: prints the total
    /// node count (the same on every run for the same evaluation) and nodes per second.
    Bench {
        /// Search depth for every position (the node count is fixed per depth and net).
        #[arg(long, default_value_t = 8)]
        depth: u32,
        /// Use a random net of this shape instead of --net (speed only): FEATURES:ARCH,
        /// e.g. all768:256x2-32-32 or halfkp:256x2-32-32, or a NetSpec file (.toml or .json,
        /// e.g. infra/nets/bullet-3-input-buckets.toml).
        #[arg(long)]
        random_net: Option<String>,
        /// Also time the evaluation: incremental accumulator updates against full refreshes
        /// over the same positions (needs a net).
        #[arg(long)]
        eval: bool,
        /// With --eval: replay the games of this PGN file (standard start positions, main
        /// lines, up to 2000 games) instead of 200 random games.
        #[arg(long)]
        eval_pgn: Option<std::path::PathBuf>,
        /// Also run this Stockfish binary's own `bench` (one thread, 16 MiB hash, depth 13,
        /// its 47 positions) in the same run, and print our nodes/s over its.
        #[arg(long)]
        stockfish: Option<std::path::PathBuf>,
    },
}

/// Stockfish's `bench` on one thread: its nodes per second.
fn stockfish_bench(path: &std::path::Path) -> anyhow::Result<f64> {
    use std::io::Write;
    let mut child = std::process::Command::new(path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", path.display()))?;
    let mut stdin = child.stdin.take().context("stockfish's stdin")?;
    writeln!(stdin, "setoption name Threads value 1")?;
    writeln!(stdin, "bench 16 1 13 default depth")?;
    writeln!(stdin, "quit")?;
    drop(stdin);
    let out = child.wait_with_output()?;
    // Stockfish prints its bench summary on stderr.
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("Nodes/second"))
        .and_then(|v| v.trim_start_matches([' ', ':']).trim().parse().ok())
        .with_context(|| format!("{} printed no \"Nodes/second\" for bench", path.display()))
}

/// The evaluator `what` names: a .nnue file, or what the lake resolves (built-ins, `best`,
/// registered nets).
pub(crate) fn resolve(lake: &str, what: &str) -> anyhow::Result<Evaluator> {
    let what = what.trim();
    // Built-ins need no lake.
    if let Some(builtin) = lakefish_jobs::nets::builtin_evaluator(what) {
        return Ok(builtin);
    }
    let path = std::path::Path::new(what);
    if path.is_file() {
        let bytes = std::fs::read(path).with_context(|| format!("reading {what}"))?;
        return Evaluator::from_net_bytes(&bytes)
            .map_err(|e| anyhow::anyhow!("{what} is not a net: {e}"));
    }
    if !lakefish_jobs::nets::names_a_registered_net(what) {
        bail!(
            "{what:?} is neither a file, a registered net name (nn-<12 hex>), `best`, \
             `classical` nor `material`"
        );
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let lake = crate::config::open_lake(lake)?;
        let name = lakefish_jobs::nets::resolve_evaluation(&lake, what).await?;
        Ok(lakefish_jobs::nets::load_evaluator(&lake, &name).await?)
    })
}

pub(crate) fn run(lake: &str, args: EngineArgs) -> anyhow::Result<()> {
    match args.command {
        None => {
            let evaluator = resolve(lake, &args.net)?;
            eprintln!("lakefish engine: {}", evaluator.describe());
            let lake = lake.to_string();
            let resolver = Box::new(move |v: &str| resolve(&lake, v).map_err(|e| format!("{e:#}")));
            let mut session = lakefish_engine::uci::Session::new(
                std::io::stdout(),
                evaluator,
                &args.net,
                resolver,
            );
            if args.hash != lakefish_engine::uci::DEFAULT_HASH_MB {
                session.command(&format!("setoption name Hash value {}", args.hash));
            }
            session.run(std::io::stdin().lock());
            Ok(())
        }
        Some(EngineCommand::Bench {
            depth,
            random_net,
            eval,
            eval_pgn,
            stockfish,
        }) => {
            let evaluator = match random_net {
                Some(file) if file.ends_with(".toml") || file.ends_with(".json") => {
                    let text = std::fs::read_to_string(&file)
                        .with_context(|| format!("--random-net {file}"))?;
                    let spec = lakefish_schemas::netspec::NetSpec::parse(&text)
                        .map_err(|e| anyhow::anyhow!("--random-net {file}: {e}"))?;
                    let net = lakefish_engine::spec_net::random_spec_net(spec, 1)
                        .map_err(|e| anyhow::anyhow!("--random-net {file}: {e}"))?;
                    Evaluator::Spec(Arc::new(net))
                }
                Some(shape) => {
                    let (features, arch) = shape
                        .split_once(':')
                        .context("--random-net is FEATURES:ARCH, e.g. all768:256x2-32-32")?;
                    let features = FeatureSetKind::from_name(features)?;
                    lakefish_engine::nnue::Arch::parse(arch)?;
                    Evaluator::Nnue(Arc::new(random_network(features, arch, 1)))
                }
                None => resolve(lake, &args.net)?,
            };
            println!("evaluation: {}", evaluator.describe());
            if eval {
                let Evaluator::Nnue(net) = &evaluator else {
                    bail!(
                        "--eval times lakefish's fixed shapes (--net or --random-net FEATURES:ARCH)"
                    );
                };
                let lines = match &eval_pgn {
                    Some(path) => {
                        let bytes = std::fs::read(path)
                            .with_context(|| format!("reading {}", path.display()))?;
                        let lines = lakefish_engine::bench::pgn_lines(
                            &String::from_utf8_lossy(&bytes),
                            2000,
                        );
                        if lines.is_empty() {
                            bail!("{}: no games from the standard position", path.display());
                        }
                        println!(
                            "eval positions: {} games of {}",
                            lines.len(),
                            path.display()
                        );
                        lines
                    }
                    None => {
                        println!("eval positions: 200 random games");
                        lakefish_engine::bench::random_lines(200)
                    }
                };
                let e = lakefish_engine::bench::bench_eval(Arc::clone(net), &lines);
                println!(
                    "eval ({} positions): accumulators incremental {:.1} ns, full refresh {:.1} ns \
                     (ratio {:.2}x); dense layers {:.1} ns; whole evaluation ratio {:.2}x",
                    e.positions,
                    e.incremental_ns,
                    e.refresh_ns,
                    e.accumulator_ratio(),
                    e.propagate_ns,
                    e.evaluation_ratio()
                );
            }
            let r = lakefish_engine::bench::bench(evaluator, depth);
            println!(
                "bench: depth {depth}, {} positions, {} nodes, {:.3} s, {:.0} nodes/s",
                lakefish_engine::bench::POSITIONS.len(),
                r.nodes,
                r.elapsed.as_secs_f64(),
                r.nps()
            );
            if let Some(path) = stockfish {
                let theirs = stockfish_bench(&path)?;
                println!(
                    "stockfish bench ({}, 1 thread, depth 13): {theirs:.0} nodes/s; ours / stockfish {:.3}",
                    path.display(),
                    r.nps() / theirs.max(1.0)
                );
            }
            Ok(())
        }
    }
}
