//! `lakefish sprt`: run an SPRT here (or queue it with --api), `sprt calc` from counts, and
//! `sprt show ID`.

use anyhow::bail;
use lakefish_schemas::{JobSpec, SprtSpec, SprtStatus};

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct SprtArgs {
    #[command(subcommand)]
    pub command: Option<SprtCommand>,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(clap::Args)]
pub(crate) struct RunArgs {
    /// The candidate: ENGINE[+NET][,OPTION=VALUE...] — a registered engine (lakefish engines
    /// ls), optionally with a registered net (passed in the engine's net option, EvalFile for
    /// Stockfish) and UCI options, e.g. 'stockfish,UCI_LimitStrength=true,UCI_Elo=2000'.
    /// A bare net name (nn-....nnue, best, classical) is lakefish's own engine with that net.
    #[arg(long)]
    pub new: Option<String>,
    /// The baseline, written the same way.
    #[arg(long)]
    pub base: Option<String>,
    /// Opening book, EPD or PGN (samples in ../shared/data/openings/); with --api, upload it
    /// first or name a lake key as lake:raw/...
    #[arg(long)]
    pub book: Option<String>,
    /// Nodes per move (default 5000); games are then deterministic.
    #[arg(long, conflicts_with = "tc")]
    pub nodes: Option<u64>,
    /// Time control instead of nodes: base+increment in seconds, e.g. 10+0.1.
    #[arg(long)]
    pub tc: Option<String>,
    /// Elo of the null hypothesis H0 (in the --model's Elo units).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub elo0: f64,
    /// Elo of the alternative H1; must be above --elo0.
    #[arg(long, default_value_t = 2.0, allow_negative_numbers = true)]
    pub elo1: f64,
    /// False-positive rate: the upper bound is ln((1-β)/α).
    #[arg(long, default_value_t = 0.05)]
    pub alpha: f64,
    /// False-negative rate: the lower bound is ln(β/(1-α)).
    #[arg(long, default_value_t = 0.05)]
    pub beta: f64,
    /// normalized (fishtest's default) or logistic.
    #[arg(long, default_value = "normalized")]
    pub model: String,
    /// Game pairs per batch; counts and LLR update after each batch.
    #[arg(long, default_value_t = 8)]
    pub batch_pairs: u32,
    /// Stop undecided after this many game pairs.
    #[arg(long, default_value_t = 20_000)]
    pub max_pairs: u64,
    /// Shuffles the book's order.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// On the clock: milliseconds a UCI engine's move may come after its time ran out
    /// before it loses on time (fastchess's timemargin).
    #[arg(long, default_value_t = 0)]
    pub time_margin_ms: u64,
    /// Queue the test on a running service instead of playing it here.
    #[arg(long)]
    pub api: Option<String>,
    /// Threads for games played here (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Print the finished test as JSON (the same as GET /v1/sprt/{id}) instead of a summary.
    /// Either way the exit code says how it ended: 0 accepted, 3 rejected, 4 inconclusive,
    /// 5 stopped by a user (1 is an error).
    #[arg(long)]
    pub json: bool,
}

/// The exit code of a test played here: scripts can tell the outcomes apart.
pub(crate) fn exit_code(state: lakefish_schemas::SprtState) -> i32 {
    match state {
        lakefish_schemas::SprtState::Accepted | lakefish_schemas::SprtState::Running => 0,
        lakefish_schemas::SprtState::Rejected => 3,
        lakefish_schemas::SprtState::Inconclusive => 4,
        lakefish_schemas::SprtState::Stopped => 5,
    }
}

#[derive(clap::Subcommand)]
pub(crate) enum SprtCommand {
    /// LLR, Elo ± 95% interval and LOS from counts alone, like fishtest's calculator.
    Calc {
        /// Pair counts LL,LD,DD,WD,WW (DD counts WL pairs too).
        #[arg(long, conflicts_with = "wdl")]
        penta: Option<String>,
        /// Game counts W,D,L.
        #[arg(long)]
        wdl: Option<String>,
        /// Elo of the null hypothesis H0 (in the --model's Elo units).
        #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
        elo0: f64,
        /// Elo of the alternative H1; must be above --elo0.
        #[arg(long, default_value_t = 2.0, allow_negative_numbers = true)]
        elo1: f64,
        /// normalized (fishtest's default, pentanomial or trinomial) or logistic.
        #[arg(long, default_value = "normalized")]
        model: String,
        /// False-positive rate: the upper bound is ln((1-β)/α).
        #[arg(long, default_value_t = 0.05)]
        alpha: f64,
        /// False-negative rate: the lower bound is ln(β/(1-α)).
        #[arg(long, default_value_t = 0.05)]
        beta: f64,
    },
    /// One test's state: LLR and bounds, W/D/L, pentanomial, Elo, games.
    Show {
        /// The test's id (sprt-...).
        id: lakefish_schemas::names::SprtId,
        /// Read through a running service instead of the lake.
        #[arg(long)]
        api: Option<String>,
    },
    /// Stop a running test: the games counted so far become its result (state `stopped`,
    /// with who and when); batches in flight finish and nothing more is queued.
    Stop {
        /// The test's id (sprt-...).
        id: lakefish_schemas::names::SprtId,
        /// Through a running service (a submit token in LAKEFISH_TOKEN) instead of the lake.
        #[arg(long, env = "LAKEFISH_API")]
        api: Option<String>,
    },
}

impl RunArgs {
    pub(crate) fn spec(&self) -> anyhow::Result<SprtSpec> {
        let need = |v: &Option<String>, flag: &str| match v {
            Some(v) => Ok(v.clone()),
            None => bail!("{flag} is required (see lakefish sprt --help)"),
        };
        let spec = SprtSpec {
            new: need(&self.new, "--new")?.as_str().into(),
            base: need(&self.base, "--base")?.as_str().into(),
            book: need(&self.book, "--book")?,
            nodes: self.nodes,
            tc: self.tc.clone(),
            elo0: self.elo0,
            elo1: self.elo1,
            alpha: self.alpha,
            beta: self.beta,
            model: self.model.clone(),
            batch_pairs: self.batch_pairs,
            max_pairs: self.max_pairs,
            concurrency: 4,
            seed: self.seed,
            time_margin_ms: self.time_margin_ms,
            fixed_length: false,
        };
        spec.validate().map_err(anyhow::Error::msg)?;
        Ok(spec)
    }
}

/// Prints a status the way people read SPRT results.
pub(crate) fn print_status(s: &SprtStatus) {
    println!("sprt {}: {:?}", s.id, s.state);
    if let Some(by) = &s.stopped {
        println!("  stopped by {} at {}", by.by, by.at);
    }
    println!("  new  {} ({})", s.new.name, s.new.requested);
    println!("  base {} ({})", s.base.name, s.base.requested);
    println!("  played at {}", s.spec.conditions());
    println!(
        "  LLR {:.3} in ({:.3}, {:.3}) [{}, {:.2}, {:.2}]",
        s.llr, s.lower, s.upper, s.model, s.elo0, s.elo1
    );
    println!(
        "  games {}: W {} D {} L {}, pentanomial {:?}",
        s.games, s.wins, s.draws, s.losses, s.penta
    );
    if let Some(e) = &s.elo {
        println!(
            "  Elo {:.2} ± {:.2}, nElo {:.2} ± {:.2}, LOS {:.1}%",
            e.elo,
            e.elo_error,
            e.nelo,
            e.nelo_error,
            100.0 * e.los
        );
    }
    for (side, i) in [("new", &s.new_incidents), ("base", &s.base_incidents)] {
        if i.total() > 0 {
            println!(
                "  {side} lost by fault: {} illegal moves, {} on time, {} crashes, {} stalls, {} unresponsive",
                i.illegal_moves, i.time_forfeits, i.crashes, i.stalls, i.unresponsive
            );
        }
    }
}

pub(crate) async fn run(
    lake: &str,
    rt: &tokio::runtime::Handle,
    args: SprtArgs,
) -> anyhow::Result<()> {
    match args.command {
        Some(SprtCommand::Calc {
            penta,
            wdl,
            elo0,
            elo1,
            model,
            alpha,
            beta,
        }) => {
            let (kind, counts) = match (penta, wdl) {
                (Some(p), None) => ("penta", p),
                (None, Some(w)) => ("wdl", w),
                _ => bail!("give --penta LL,LD,DD,WD,WW or --wdl W,D,L"),
            };
            let c = lakefish_jobs::sprt::calc(kind, &counts, elo0, elo1, &model, alpha, beta)
                .map_err(anyhow::Error::msg)?;
            println!(
                "LLR {:.4} in ({:.4}, {:.4}) [{model}, {elo0}, {elo1}]: {}",
                c.llr, c.lower, c.upper, c.decision
            );
            println!(
                "games {}: Elo {:.2} ± {:.2}, nElo {:.2} ± {:.2}, LOS {:.2}%",
                c.games,
                c.elo,
                c.elo_error,
                c.nelo,
                c.nelo_error,
                100.0 * c.los
            );
            Ok(())
        }
        Some(SprtCommand::Show { id, api }) => {
            let status = crate::backend::Backend::new(lake, api, false)
                .await?
                .sprt(&id)
                .await?;
            print_status(&status);
            Ok(())
        }
        Some(SprtCommand::Stop { id, api }) => {
            let status: SprtStatus = match api {
                Some(api) => {
                    let url = format!("{api}/v1/sprt/{id}/stop");
                    let resp = crate::client::client().post(url).send().await?;
                    serde_json::from_value(crate::client::check(resp).await?)?
                }
                None => {
                    let lake = crate::config::open_lake_for_writing(lake).await?;
                    lakefish_jobs::sprt::stop(&lake, &id, &crate::local::user()).await?
                }
            };
            print_status(&status);
            Ok(())
        }
        None => {
            let spec = args.run.spec()?;
            if let Some(api) = &args.run.api {
                let url = format!("{api}/v1/sprt");
                let v = crate::client::check(
                    crate::client::client().post(url).json(&spec).send().await?,
                )
                .await?;
                println!("{}", serde_json::to_string_pretty(&v)?);
                return Ok(());
            }
            let (lake, rt, threads) = (lake.to_string(), rt.clone(), args.run.threads);
            let out = tokio::task::spawn_blocking(move || {
                crate::local::run_here_value(&lake, &rt, JobSpec::Sprt(spec), threads)
            })
            .await??;
            let status: SprtStatus = serde_json::from_value(out)?;
            if args.run.json {
                println!("{}", serde_json::to_string_pretty(&status)?);
            } else {
                print_status(&status);
            }
            let code = exit_code(status.state);
            if code != 0 {
                use std::io::Write;
                std::io::stdout().flush()?;
                std::process::exit(code);
            }
            Ok(())
        }
    }
}

/// `lakefish gauntlet`: places an engine on another engine's Elo scale.
#[derive(clap::Args)]
pub(crate) struct GauntletArgs {
    /// The side to place: ENGINE[+NET][,OPTION=VALUE...], or a net (best, classical,
    /// nn-....nnue) for lakefish's own engine.
    #[arg(long)]
    pub engine: String,
    /// The registered engine whose UCI_Elo scale it is placed on.
    #[arg(long, default_value = "stockfish")]
    pub against: String,
    /// UCI_Elo of each level, comma-separated (Stockfish 15.1: 1350 to 2850).
    #[arg(long, value_delimiter = ',', default_value = "1350,1700,2000,2300")]
    pub levels: Vec<u32>,
    /// Game pairs (colour-reversed) per level.
    #[arg(long, default_value_t = 20)]
    pub pairs: u64,
    /// Opening book, EPD or PGN.
    #[arg(long)]
    pub book: String,
    /// Nodes per move for both sides.
    #[arg(long, conflicts_with = "tc")]
    pub nodes: Option<u64>,
    /// Time control base+increment in seconds (UCI_Elo is meant for the clock).
    #[arg(long, default_value = "4+0.04")]
    pub tc: Option<String>,
    /// Shuffles the book's order.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Threads (games at once; default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Queue it on a running service instead (a `gauntlet` job one worker plays; a submit
    /// token in LAKEFISH_TOKEN); prints the job's id.
    #[arg(long)]
    pub api: Option<String>,
}

pub(crate) async fn gauntlet(
    lake: &str,
    rt: &tokio::runtime::Handle,
    args: GauntletArgs,
) -> anyhow::Result<()> {
    let spec = lakefish_schemas::sprt::GauntletSpec {
        engine: args.engine.as_str().into(),
        against: args.against.clone(),
        levels: args.levels.clone(),
        pairs: args.pairs,
        book: args.book.clone(),
        nodes: args.nodes,
        tc: if args.nodes.is_some() {
            None
        } else {
            args.tc.clone()
        },
        seed: args.seed,
    };
    spec.validate().map_err(anyhow::Error::msg)?;
    if let Some(api) = &args.api {
        let body = serde_json::json!({"kind": "gauntlet", "spec": spec});
        let resp = crate::client::client()
            .post(format!("{}/v1/jobs", api.trim_end_matches('/')))
            .json(&body)
            .send()
            .await?;
        let v = crate::client::check(resp).await?;
        println!(
            "queued gauntlet job {} (lakefish jobs {} --api {api}, or /ui/jobs/{} on the dashboard)",
            v["id"].as_str().unwrap_or("?"),
            v["id"].as_str().unwrap_or("?"),
            v["id"].as_str().unwrap_or("?")
        );
        return Ok(());
    }
    let (lake, rt2, threads) = (lake.to_string(), rt.clone(), args.threads);
    let report = tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
        let l = rt2.block_on(crate::config::open_lake_for_writing(&lake))?;
        let ctx = lakefish_jobs::JobContext::new(l, rt2.clone())
            .with_threads(
                threads
                    .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
            )
            .with_hooks(lakefish_jobs::Hooks {
                inputs: lakefish_lake::input::InputPolicy::Unconfined,
                ..Default::default()
            });
        Ok(lakefish_jobs::gauntlet::run_here(&ctx, &spec, |s| {
            eprintln!(
                "  {} vs {}: W {} D {} L {} ({})",
                s.new.name, s.base.name, s.wins, s.draws, s.losses, s.id
            )
        })?)
    })
    .await??;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!("gauntlet of {} against {}", report.engine, report.against);
    for l in &report.levels {
        println!(
            "  UCI_Elo {:>4}: W {} D {} L {}, score {:.1}% ({})",
            l.uci_elo,
            l.wins,
            l.draws,
            l.losses,
            100.0 * l.score,
            l.sprt
        );
    }
    match (report.elo, report.elo_error) {
        (Some(e), Some(err)) => println!(
            "  Elo on {}'s UCI_Elo scale: {e:.0} ± {err:.0} (95%, {} games)",
            report.against, report.games
        ),
        _ => println!(
            "  no estimate: every game won or every game lost; add a stronger or weaker level"
        ),
    }
    Ok(())
}
