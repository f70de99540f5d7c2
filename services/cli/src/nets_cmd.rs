//! `lakefish nets ls | show | pull | import | export | eval`: the registry from the command
//! line, read from the lake directly or, with `--api`, through a running service (import
//! writes the lake, so it needs the lake).

use crate::backend::Backend;
use anyhow::{Context, bail};
use lakefish_engine::eval::Evaluator;
use lakefish_schemas::nets::NetFormat;
use std::io::BufRead;

#[derive(clap::Subcommand)]
pub(crate) enum NetsCommand {
    /// All registered nets, oldest first: name, features, architecture, run, quantization
    /// error; the best one is marked.
    Ls,
    /// Make a registered net the best one, by hand (the net SPRTs test against and `best`
    /// names); recorded in the history with who, when and why. Through the API it needs an
    /// admin token (LAKEFISH_TOKEN).
    Promote {
        /// The net's registry name (nn-<sha256[:12]>.nnue).
        name: String,
        /// Why, for the history (default: "promoted by hand").
        #[arg(long)]
        reason: Option<String>,
    },
    /// Put `best` back to the net it was before the last promotion (a promotion of that net,
    /// recorded as a roll-back).
    Rollback {
        /// Why, for the history (default: "rolled back from <net>").
        #[arg(long)]
        reason: Option<String>,
    },
    /// Every promotion and roll-back, newest first: when, which net, the one it replaced,
    /// who, why, and the Elo its test measured.
    History,
    /// One net's manifest as JSON.
    Show {
        /// The net's registry name (nn-<sha256[:12]>.nnue), or `best`.
        name: String,
    },
    /// Download a net's file and check its sha256 against the manifest.
    Pull {
        /// The net's registry name (nn-<sha256[:12]>.nnue), or `best`.
        name: String,
        /// Where to write it (default: ./<name>).
        #[arg(long, short)]
        out: Option<String>,
    },
    /// Register a net made elsewhere, lineage external. `--format stockfish` takes a
    /// Stockfish 15.1 net (e.g. one written by its `export_net` command), its bytes
    /// unchanged, under nn-<sha256[:12]>.nnue (the name Stockfish gives the same file); any
    /// other version or architecture is refused, naming what differs. `--layout L --spec S`
    /// takes a file written in saved layout L (a bullet `quantised.bin`) of the net NetSpec S
    /// describes (a layout whose files describe their net, such as `lakefish`, needs no
    /// --spec); it is registered in lakefish's .nnue (exporting it in L again gives the same
    /// bytes). A file whose size, header or padding differ from the layout is refused.
    Import {
        /// The net file.
        file: String,
        /// The file's format when no --layout is given (only stockfish can be imported).
        #[arg(long, default_value = "stockfish", conflicts_with = "layout")]
        format: NetFormat,
        /// The file's saved layout: a layout file (TOML or JSON, docs/LAYOUTS.md), or a
        /// shipped one by name (bullet-1-simple, bullet-2-output-buckets,
        /// bullet-3-input-buckets, bullet-4-multi-layer, stockfish-15.1, lakefish:
        /// infra/layouts/).
        #[arg(long)]
        layout: Option<String>,
        /// The net the file holds: a NetSpec file, a shipped one by name (bullet-1-simple ...
        /// bullet-4-multi-layer: infra/nets/), or a preset name FEATURES:ARCH; with --layout
        /// (not needed when the file describes its net, as lakefish's .nnue does).
        #[arg(long, requires = "layout")]
        spec: Option<String>,
    },
    /// Write a registered net in a format an engine loads. `--format stockfish` writes a file
    /// Stockfish 15.1 loads with `setoption name EvalFile value FILE`; the net must be of
    /// Stockfish 15.1's architecture (`stockfish-15.1`). `--layout L` writes a lakefish net (one a NetSpec
    /// describes, or a preset such as all768 256x2:screlu) in saved layout L: bullet's
    /// `quantised.bin` with `--layout bullet-2-output-buckets`, or a layout file of your
    /// engine's; a layout that does not fit the net is refused, naming the tensor.
    Export {
        /// The net's registry name, or `best`.
        name: String,
        /// The format to write: stockfish (Stockfish 15.1 loads it; only nets of its
        /// architecture) or lakefish (lakefish's engine loads it). A net is written in the
        /// format it was registered in; another is refused, naming both.
        #[arg(long, default_value = "stockfish", conflicts_with = "layout")]
        format: NetFormat,
        /// A saved layout to write instead: a layout file (TOML or JSON, docs/LAYOUTS.md),
        /// or a shipped one by name (bullet-1-simple ... bullet-4-multi-layer, stockfish-15.1,
        /// lakefish: the registered file of a described net, any preset as one).
        #[arg(long)]
        layout: Option<String>,
        /// Where to write it (default: ./<name>, with .bin for a layout).
        #[arg(long, short)]
        out: Option<String>,
    },
    /// Print a net's evaluation of each FEN, one line each, from White's side: for a
    /// Stockfish-format net in Stockfish's internal units (its `eval` prints them divided by
    /// 361 as "NNUE evaluation"), for a lakefish net in centipawns. FENs come from the
    /// arguments or, when there are none, one per line from standard input.
    Eval {
        /// The net's registry name, `best`, or a path to a net file.
        name: String,
        /// Positions in FEN (none: read them from standard input).
        fens: Vec<String>,
        /// One JSON object per line instead: the FEN, the evaluation, and for a Stockfish
        /// net the bucket used and every bucket's PSQT and positional parts (side to move,
        /// internal units), as the table of Stockfish's `eval` shows them.
        #[arg(long)]
        buckets: bool,
    },
}

pub(crate) async fn run(lake: &str, api: Option<String>, what: NetsCommand) -> anyhow::Result<()> {
    // Importing a net adds to a lake (and may start one); `eval` may read a net file and no
    // lake at all. The others only read a lake, which must be there.
    let writes = matches!(
        what,
        NetsCommand::Import { .. }
            | NetsCommand::Eval { .. }
            | NetsCommand::Promote { .. }
            | NetsCommand::Rollback { .. }
    );
    let backend = Backend::new(lake, api, writes).await?;
    match what {
        NetsCommand::Ls => {
            let (nets, best) = backend.nets().await?;
            if nets.is_empty() {
                println!("no nets registered yet");
            }
            for n in nets {
                // An imported net was never quantized here: no error to show.
                let error = if n.external {
                    "imported, not quantized here".to_string()
                } else {
                    format!(
                        "mean |Δ| {:.2} cp, p99 {:.2} cp",
                        n.quantization.mean_abs_cp, n.quantization.p99_abs_cp
                    )
                };
                println!(
                    "{}  {:<12} {:<14} {:<18} {error}  {}{}",
                    n.name,
                    n.features,
                    n.arch,
                    n.run,
                    n.created,
                    if best.as_deref() == Some(n.name.as_str()) {
                        "  (best)"
                    } else {
                        ""
                    }
                );
            }
        }
        NetsCommand::Promote { name, reason } => {
            let b = backend.promote(&name, reason).await?;
            print_promotion(&b);
        }
        NetsCommand::Rollback { reason } => {
            let history = backend.promotions().await?;
            let (_, best) = backend.nets().await?;
            // The promotion that made today's best net (the pointer decides, not the order).
            let now = best
                .as_deref()
                .and_then(|b| history.iter().find(|h| h.name == b));
            let Some(now) = now else {
                bail!("no net has been promoted yet: there is nothing to roll back");
            };
            let Some(previous) = now.previous.clone() else {
                bail!(
                    "{} was the first net promoted: before it the hand-written evaluation was the best, which has no file to promote; promote another net instead",
                    now.name
                );
            };
            let reason = reason.unwrap_or_else(|| format!("rolled back from {}", now.name));
            let b = backend.promote(&previous, Some(reason)).await?;
            print_promotion(&b);
        }
        NetsCommand::History => {
            let history = backend.promotions().await?;
            if history.is_empty() {
                println!("no net has been promoted yet");
            }
            for b in &history {
                let elo = match (b.elo, b.elo_error) {
                    (Some(e), Some(err)) => format!("  Elo {e:+.1} ± {err:.1}"),
                    _ => String::new(),
                };
                println!(
                    "{}  {}  replaced {}  by {}{elo}  {}",
                    b.since,
                    b.name,
                    b.previous.as_deref().unwrap_or("classical"),
                    b.by.as_deref().unwrap_or("?"),
                    b.reason
                );
            }
        }
        NetsCommand::Show { name } => {
            let m = backend.net(&name).await?;
            println!("{}", serde_json::to_string_pretty(&m)?);
        }
        NetsCommand::Pull { name, out } => {
            let (m, bytes) = backend.net_file(&name).await?;
            if let Err(why) = lakefish_jobs::nets::verify(&m, &bytes) {
                bail!("net {} arrived damaged: {why}; nothing was written", m.name);
            }
            let out = out.unwrap_or_else(|| m.name.clone());
            // Written beside the target and renamed, so a partial file never has its name.
            let tmp = format!("{out}.partial");
            std::fs::write(&tmp, &bytes).with_context(|| format!("writing {tmp}"))?;
            std::fs::rename(&tmp, &out).with_context(|| format!("renaming {tmp} to {out}"))?;
            println!("{out}\t{} bytes\tsha256 {} ok", bytes.len(), m.sha256);
        }
        NetsCommand::Import {
            file,
            format,
            layout,
            spec,
        } => {
            let Backend::Lake(lake) = &backend else {
                bail!("nets import writes the lake: run it without --api");
            };
            if let Some(layout) = layout {
                let layout = crate::cli::read_layout("--layout", &layout)?;
                let spec = match spec {
                    Some(spec) => Some(crate::cli::read_net_spec("--spec", &spec)?),
                    None => None,
                };
                let bytes = std::fs::read(&file).with_context(|| format!("reading {file}"))?;
                let spec = lakefish_jobs::foreign_nets::layout_net(&bytes, &layout, spec)
                    .with_context(|| format!("importing {file}; nothing was registered"))?;
                let m = lakefish_jobs::foreign_nets::import_layout(lake, &bytes, &layout, spec)
                    .await
                    .with_context(|| format!("importing {file}; nothing was registered"))?;
                print_imported(&m);
                return Ok(());
            }
            if format != NetFormat::Stockfish {
                bail!(
                    "only --format stockfish can be imported (lakefish nets are registered from their training run)"
                );
            }
            let bytes = std::fs::read(&file).with_context(|| format!("reading {file}"))?;
            let m = lakefish_jobs::foreign_nets::import_stockfish(lake, bytes)
                .await
                .with_context(|| format!("importing {file}"))?;
            print_imported(&m);
        }
        NetsCommand::Export {
            name,
            format,
            layout,
            out,
        } => {
            let (m, bytes) = backend.net_file(&name).await?;
            if let Err(why) = lakefish_jobs::nets::verify(&m, &bytes) {
                bail!("net {} arrived damaged: {why}; nothing was written", m.name);
            }
            if let Some(layout) = layout {
                let layout = crate::cli::read_layout("--layout", &layout)?;
                let written = lakefish_jobs::foreign_nets::export_layout(&m, &bytes, &layout)
                    .context("nothing was written")?;
                let out =
                    out.unwrap_or_else(|| format!("{}.bin", m.name.trim_end_matches(".nnue")));
                let tmp = format!("{out}.partial");
                std::fs::write(&tmp, &written).with_context(|| format!("writing {tmp}"))?;
                std::fs::rename(&tmp, &out).with_context(|| format!("renaming {tmp} to {out}"))?;
                println!(
                    "{out}\t{} bytes\t{} in layout {:?}",
                    written.len(),
                    m.name,
                    layout.name.as_deref().unwrap_or("(unnamed)")
                );
                return Ok(());
            }
            if m.format != format {
                bail!(
                    "net {} is in {}'s format (architecture {}): export it with --format {} (only nets of Stockfish 15.1's architecture, {}, export to --format {})",
                    m.name,
                    m.format.as_str(),
                    m.arch,
                    m.format.as_str(),
                    lakefish_jobs::foreign_nets::STOCKFISH_ARCH,
                    format.as_str()
                );
            }
            let out = out.unwrap_or_else(|| m.name.clone());
            let tmp = format!("{out}.partial");
            std::fs::write(&tmp, &bytes).with_context(|| format!("writing {tmp}"))?;
            std::fs::rename(&tmp, &out).with_context(|| format!("renaming {tmp} to {out}"))?;
            println!("{out}\t{} bytes\t{}", bytes.len(), m.name);
        }
        NetsCommand::Eval {
            name,
            fens,
            buckets,
        } => {
            let bytes = if std::path::Path::new(&name).is_file() {
                std::fs::read(&name).with_context(|| format!("reading {name}"))?
            } else {
                backend.net_file(&name).await?.1.to_vec()
            };
            let net =
                Evaluator::from_net_bytes(&bytes).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
            let print = |fen: &str| -> anyhow::Result<()> {
                let e = lakefish_jobs::foreign_nets::evaluate_fen(&net, fen)
                    .map_err(|e| anyhow::anyhow!("{fen:?}: {e}"))?;
                if !buckets {
                    println!("{}", e.white);
                    return Ok(());
                }
                let mut line = serde_json::json!({"fen": fen, "eval": e.white});
                if let Some(sf) = e.sf {
                    let parts: Vec<(i32, i32)> = (0..sf.psqt.len()).map(|b| sf.trace(b)).collect();
                    line["bucket"] = sf.bucket.into();
                    line["psqt"] = parts.iter().map(|p| p.0).collect::<Vec<_>>().into();
                    line["positional"] = parts.iter().map(|p| p.1).collect::<Vec<_>>().into();
                }
                println!("{line}");
                Ok(())
            };
            if fens.is_empty() {
                for (i, line) in std::io::stdin().lock().lines().enumerate() {
                    let line =
                        line.with_context(|| format!("reading standard input, line {}", i + 1))?;
                    let fen = line.trim();
                    if !fen.is_empty() {
                        print(fen).with_context(|| format!("standard input, line {}", i + 1))?;
                    }
                }
            } else {
                for fen in &fens {
                    print(fen)?;
                }
            }
        }
    }
    Ok(())
}

/// One line for an imported net: name, size, architecture and description, and whether it is
/// new and external or was already registered from a run here (the same bytes).
fn print_imported(m: &lakefish_schemas::NetManifest) {
    let origin = if m.external {
        "external".to_string()
    } else {
        format!("already registered from {}", m.run)
    };
    println!(
        "{}\t{} bytes\t{} ({})\t{origin}",
        m.name, m.bytes, m.arch, m.description
    );
}

fn print_promotion(b: &lakefish_schemas::nets::BestNet) {
    println!(
        "best is now {} (was {}), since {}, by {}: {}",
        b.name,
        b.previous.as_deref().unwrap_or("classical"),
        b.since,
        b.by.as_deref().unwrap_or("?"),
        b.reason
    );
}
