//! `lakefish nets ls | show NAME | pull NAME`: the registry from the command line, read from
//! the lake directly or, with `--api`, through a running service.

use crate::backend::Backend;
use anyhow::{Context, bail};

#[derive(clap::Subcommand)]
pub enum NetsCommand {
    /// All registered nets, oldest first: name, features, architecture, run, quantization
    /// error; the best one is marked.
    Ls,
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
}

pub async fn run(lake: &str, api: Option<String>, what: NetsCommand) -> anyhow::Result<()> {
    let backend = Backend::new(lake, api).await?;
    match what {
        NetsCommand::Ls => {
            let (nets, best) = backend.nets().await?;
            if nets.is_empty() {
                println!("no nets registered yet");
            }
            for n in nets {
                println!(
                    "{}  {:<12} {:<14} {:<18} mean |Δ| {:.2} cp, p99 {:.2} cp  {}{}",
                    n.name,
                    n.features,
                    n.arch,
                    n.run,
                    n.quantization.mean_abs_cp,
                    n.quantization.p99_abs_cp,
                    n.created,
                    if best.as_deref() == Some(n.name.as_str()) {
                        "  (best)"
                    } else {
                        ""
                    }
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
    }
    Ok(())
}
