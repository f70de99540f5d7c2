//! `lakefish experiment`: run an experiment document (in this process, or queued on a
//! service), show one's status and table, list them.

use crate::client::{check, client};
use anyhow::Context;
use lakefish_schemas::JobSpec;
use lakefish_schemas::experiment::{ExperimentId, ExperimentSpec, ExperimentStatus};

#[derive(clap::Subcommand)]
pub(crate) enum ExperimentCommand {
    /// Train every cell of FILE (a base train spec and the axes to vary, JSON; see
    /// docs/EXPERIMENTS.md), quantize and register each net, rate the nets together and print
    /// the table (also stored under experiments/<id>/ as CSV and Markdown). The same file run
    /// again resumes it: finished cells and games are not redone.
    Run {
        /// The experiment document (JSON).
        file: std::path::PathBuf,
        /// Threads (training and games; default: all cores).
        #[arg(long)]
        threads: Option<usize>,
        /// Print the status as JSON instead of the table.
        #[arg(long)]
        json: bool,
        /// Check the document and print its id and cells; train nothing.
        #[arg(long, conflicts_with = "api")]
        dry_run: bool,
        /// Queue it on a running service instead (its scheduler fans the cells and matches
        /// out over the workers; a submit token in LAKEFISH_TOKEN); prints the ids.
        #[arg(long)]
        api: Option<String>,
    },
    /// One experiment's state and table.
    Show {
        /// The experiment's id, `ex-…` (printed by `run`, listed by `ls`).
        id: ExperimentId,
        /// Print the table as CSV.
        #[arg(long, conflicts_with = "json")]
        csv: bool,
        /// Print the whole status as JSON.
        #[arg(long)]
        json: bool,
        /// Ask a running service instead of reading the lake.
        #[arg(long)]
        api: Option<String>,
    },
    /// Experiments, newest first.
    Ls {
        /// Print the statuses as JSON.
        #[arg(long)]
        json: bool,
        /// Ask a running service instead of reading the lake.
        #[arg(long)]
        api: Option<String>,
    },
}

pub(crate) fn run(
    lake: &str,
    rt: &tokio::runtime::Handle,
    what: ExperimentCommand,
) -> anyhow::Result<()> {
    match what {
        ExperimentCommand::Run {
            file,
            threads,
            json,
            dry_run,
            api,
        } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let (spec, cells) = ExperimentSpec::parse(&text)
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            let id = spec.id();
            if dry_run {
                lakefish_jobs::admission::check_experiment(&spec)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
                let players = cells.len() + usize::from(spec.rating.anchor.is_some());
                let pairings = match spec.rating.schedule {
                    lakefish_schemas::experiment::Schedule::RoundRobin => {
                        players * (players - 1) / 2
                    }
                    lakefish_schemas::experiment::Schedule::Gauntlet => players - 1,
                };
                println!(
                    "experiment {id}: {} cells, {pairings} pairings of {} pairs ({} games at most)",
                    cells.len(),
                    spec.rating.pairs,
                    pairings as u64 * 2 * spec.rating.pairs as u64
                );
                for (i, c) in cells.iter().enumerate() {
                    let (features, arch) = c.train.net_label();
                    println!("  cell {i}: {}  ({features} {arch})", c.label);
                }
                return Ok(());
            }
            if let Some(api) = api {
                let api = api.trim_end_matches('/');
                let body = serde_json::json!({"kind": "experiment", "spec": spec});
                let v = rt.block_on(async {
                    check(
                        client()
                            .post(format!("{api}/v1/jobs"))
                            .json(&body)
                            .send()
                            .await?,
                    )
                    .await
                })?;
                println!(
                    "queued experiment {id} ({} cells) as job {}; follow it with \
                     `lakefish experiment show {id} --api {api}` or /ui/experiments/{id}",
                    cells.len(),
                    v["id"].as_str().unwrap_or("?")
                );
                return Ok(());
            }
            eprintln!(
                "experiment {id}: {} cells, then {} pairs per pairing",
                cells.len(),
                spec.rating.pairs
            );
            let out = crate::local::run_here_value(lake, rt, JobSpec::Experiment(spec), threads)?;
            let status: ExperimentStatus = serde_json::from_value(out)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&status)?);
            } else {
                print_table(&status);
            }
            Ok(())
        }
        ExperimentCommand::Show { id, csv, json, api } => {
            let status: ExperimentStatus = match &api {
                Some(api) => {
                    let api = api.trim_end_matches('/');
                    let v = rt.block_on(async {
                        check(
                            client()
                                .get(format!("{api}/v1/experiments/{id}"))
                                .send()
                                .await?,
                        )
                        .await
                    })?;
                    serde_json::from_value(v)?
                }
                None => {
                    let l = crate::config::open_existing_lake(lake)?;
                    rt.block_on(lakefish_jobs::experiment::status(&l, &id))?
                        .ok_or_else(|| anyhow::anyhow!("no experiment {id} in {lake}"))?
                }
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&status)?);
            } else if csv {
                print!("{}", lakefish_jobs::experiment::table_csv(&status));
            } else {
                print_table(&status);
            }
            Ok(())
        }
        ExperimentCommand::Ls { json, api } => {
            let list: Vec<ExperimentStatus> = match &api {
                Some(api) => {
                    let api = api.trim_end_matches('/');
                    let v = rt.block_on(async {
                        check(client().get(format!("{api}/v1/experiments")).send().await?).await
                    })?;
                    serde_json::from_value(v["experiments"].clone())?
                }
                None => {
                    let l = crate::config::open_existing_lake(lake)?;
                    rt.block_on(lakefish_jobs::experiment::list(&l))?
                }
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&list)?);
                return Ok(());
            }
            if list.is_empty() {
                println!("no experiments (lakefish experiment run FILE starts one)");
            }
            for s in &list {
                println!(
                    "{}  {:<9}  cells {}/{}  matches {}/{}  created {}{}",
                    s.id,
                    s.state.as_str(),
                    s.cells_done,
                    s.cells,
                    s.pairings.iter().filter(|p| p.done).count(),
                    s.pairings.len(),
                    s.created,
                    s.error
                        .as_deref()
                        .map(|e| format!("  ({e})"))
                        .unwrap_or_default()
                );
            }
            Ok(())
        }
    }
}

/// The status as a reader wants it: where it stands, then the table once rated.
fn print_table(s: &ExperimentStatus) {
    println!(
        "experiment {}: {}, cells {}/{}, matches {}/{}",
        s.id,
        s.state.as_str(),
        s.cells_done,
        s.cells,
        s.pairings.iter().filter(|p| p.done).count(),
        s.pairings.len()
    );
    if let Some(e) = &s.error {
        println!("  error: {e}");
    }
    if s.table.is_empty() {
        return;
    }
    let anchor = s.players.get(s.anchor).map_or("?", String::as_str);
    println!("Elo relative to {anchor} (fixed at 0), 95 % intervals:");
    let width = s
        .table
        .iter()
        .map(|r| r.player.len())
        .max()
        .unwrap_or(6)
        .max(6);
    println!(
        "  {:<width$}  {:>16}  {:>6}  {:>6}  {:>9}  {:>9}  {:>10}  net",
        "player", "Elo", "games", "score", "val loss", "move acc.", "nodes/s"
    );
    for r in &s.table {
        let elo = match (r.elo, r.elo_error) {
            (Some(e), Some(err)) => format!("{e:+.1} ± {err:.1}"),
            _ => "-".into(),
        };
        let c = r.cell.as_ref();
        println!(
            "  {:<width$}  {elo:>16}  {:>6}  {:>6}  {:>9}  {:>9}  {:>10}  {}",
            r.player,
            r.games,
            r.score.map_or("-".into(), |v| format!("{v:.3}")),
            c.and_then(|c| c.val_loss)
                .map_or("-".into(), |v| format!("{v:.5}")),
            c.and_then(|c| c.move_accuracy)
                .map_or("-".into(), |v| format!("{v:.3}")),
            c.map_or("-".into(), |c| format!("{:.0}", c.nodes_per_s)),
            r.plays
        );
    }
    if let Some(n) = &s.note {
        println!("  {n}");
    }
}
