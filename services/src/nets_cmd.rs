//! `lakefish nets ls | show NAME | pull NAME`: the registry from the command line, read from
//! the lake directly or, with `--api`, through a running service.

use anyhow::{Context, bail};
use lakefish_schemas::NetManifest;

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
    match what {
        NetsCommand::Ls => {
            let (nets, best) = match &api {
                Some(api) => {
                    let v =
                        crate::check(crate::client().get(format!("{api}/v1/nets")).send().await?)
                            .await?;
                    (
                        serde_json::from_value::<Vec<NetManifest>>(v["nets"].clone())?,
                        v["best"]["name"].as_str().map(str::to_string),
                    )
                }
                None => {
                    let lake = crate::open_lake(lake)?;
                    let best = lakefish_jobs::nets::read_best(&lake).await?;
                    (
                        lakefish_jobs::nets::list_nets(&lake).await?,
                        best.map(|b| b.name),
                    )
                }
            };
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
            let m = manifest(lake, api.as_deref(), &name).await?;
            println!("{}", serde_json::to_string_pretty(&m)?);
        }
        NetsCommand::Pull { name, out } => {
            let (m, bytes) = match &api {
                Some(api) => {
                    let m = manifest(lake, Some(api), &name).await?;
                    let resp = crate::client()
                        .get(format!("{api}/v1/nets/{}/file", m.name))
                        .send()
                        .await?;
                    if !resp.status().is_success() {
                        crate::check(resp).await?;
                        unreachable!("check fails on an error status");
                    }
                    let bytes = resp.bytes().await?;
                    (m, bytes)
                }
                None => {
                    let lake = crate::open_lake(lake)?;
                    let name = lakefish_jobs::nets::resolve_net_name(&lake, &name).await?;
                    lakefish_jobs::nets::fetch_net(&lake, &name).await?
                }
            };
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

/// A net's manifest; `best` is resolved by the service or here.
async fn manifest(lake: &str, api: Option<&str>, name: &str) -> anyhow::Result<NetManifest> {
    let name = match (api, name) {
        (Some(_), "best") => name.to_string(),
        (Some(_), _) => lakefish_schemas::nets::net_name(name).map_err(anyhow::Error::msg)?,
        (None, _) => lakefish_jobs::nets::resolve_net_name(&crate::open_lake(lake)?, name).await?,
    };
    match api {
        Some(api) => {
            let v = crate::check(
                crate::client()
                    .get(format!("{api}/v1/nets/{name}"))
                    .send()
                    .await?,
            )
            .await?;
            Ok(serde_json::from_value(v)?)
        }
        None => lakefish_jobs::nets::read_net(&crate::open_lake(lake)?, &name)
            .await?
            .with_context(|| format!("net {name} is not registered")),
    }
}
