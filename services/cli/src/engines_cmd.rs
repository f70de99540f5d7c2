//! `lakefish engines add|ls|show|rm`: the engine registry, in the lake or through the API.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, bail};
use lakefish_schemas::engines::{BUILTIN_ENGINE, EngineSpec};

// Parsed once per process: the size of `Add` costs nothing worth boxing for.
#[allow(clippy::large_enum_variant)]
#[derive(clap::Subcommand)]
pub(crate) enum EnginesCommand {
    /// Register a UCI engine that SPRTs (and self-play) may use as a side.
    ///
    /// Workers run the command: registering is code execution on every worker by design,
    /// so over the API it needs an admin token. The binary's sha256 and the node count its
    /// `bench` prints are measured here and recorded; each worker checks both before its
    /// first game and refuses to play with a different binary.
    Add {
        /// Letters, digits, `.`, `_`, `-` (not lakefish, best, classical or nn-…).
        name: String,
        /// The engine's absolute path, the same on every worker (e.g. /usr/games/stockfish).
        #[arg(long, required_unless_present = "upload", conflicts_with = "upload")]
        command: Option<PathBuf>,
        /// Upload this binary to the lake instead (engines/bin/<sha256>); workers fetch it,
        /// check its sha256 and run their copy. Needs the lake (not --api).
        #[arg(long)]
        upload: Option<PathBuf>,
        /// An argument for the command (repeat for more).
        #[arg(long = "arg", allow_hyphen_values = true)]
        args: Vec<String>,
        /// A default UCI option, NAME=VALUE (repeat for more), e.g. --option Threads=1.
        #[arg(long = "option")]
        options: Vec<String>,
        /// An option sides may set, with what they may set it to (repeat for more):
        /// NAME (everything the engine announces for it), NAME=MIN..MAX or NAME=A|B|C, e.g.
        /// --allow UCI_Elo=1320..3190 --allow UCI_LimitStrength. Nothing else may be set by
        /// a side; string options (files, paths) can never be allowed.
        #[arg(long = "allow", value_name = "NAME[=RULE]")]
        allow: Vec<String>,
        /// The UCI option a side's net is passed in (ENGINE+NET).
        #[arg(long, default_value = "EvalFile")]
        net_option: String,
        /// A net format the engine loads through that option: stockfish (the default) or
        /// lakefish; repeat for both. ENGINE+NET with a net of another format is refused.
        #[arg(
            long = "net-format",
            value_name = "FORMAT",
            conflicts_with = "net_layout"
        )]
        net_formats: Vec<lakefish_schemas::nets::NetFormat>,
        /// The saved layout the engine loads nets in instead (a layout file, or a shipped
        /// one: bullet-1-simple ... bullet-4-multi-layer; docs/LAYOUTS.md). ENGINE+NET then
        /// writes the net in it for the engine; a net the layout does not fit is refused.
        #[arg(long, value_name = "LAYOUT")]
        net_layout: Option<String>,
        /// Record this bench node count instead of running `COMMAND bench` here.
        #[arg(long)]
        bench: Option<u64>,
        /// Record neither sha256 nor bench: workers then run whatever is at the path.
        #[arg(long, conflicts_with = "bench")]
        no_check: bool,
    },
    /// List the engines: lakefish (built in) and every registered one.
    Ls,
    /// One engine's registration as JSON.
    Show {
        /// The engine's name.
        name: String,
    },
    /// Remove a registration (finished tests keep their records and games).
    Rm {
        /// The engine's name.
        name: String,
    },
}

fn parse_allow(
    allow: &[String],
) -> anyhow::Result<BTreeMap<String, lakefish_schemas::engines::OptionRule>> {
    let mut out = BTreeMap::new();
    for a in allow {
        let (name, rule) = a.split_once('=').unwrap_or((a, ""));
        let rule = rule
            .parse()
            .map_err(|e| anyhow::anyhow!("--allow {a:?}: {e}"))?;
        out.insert(name.trim().to_string(), rule);
    }
    Ok(out)
}

fn parse_options(options: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for o in options {
        let Some((k, v)) = o.split_once('=') else {
            bail!("--option {o:?}: expected NAME=VALUE");
        };
        out.insert(k.trim().to_string(), v.trim().to_string());
    }
    Ok(out)
}

pub(crate) async fn run(
    lake: &str,
    api: Option<String>,
    what: EnginesCommand,
) -> anyhow::Result<()> {
    match what {
        EnginesCommand::Add {
            name,
            command,
            upload,
            args,
            options,
            allow,
            net_option,
            net_formats,
            net_layout,
            bench,
            no_check,
        } => {
            let local = upload
                .clone()
                .or(command.clone())
                .expect("clap requires one");
            let mut spec = EngineSpec {
                name,
                command: String::new(),
                args,
                options: parse_options(&options)?,
                allow: parse_allow(&allow)?,
                uci_options: Vec::new(),
                net_option,
                net_formats: if net_formats.is_empty() {
                    vec![lakefish_schemas::nets::NetFormat::Stockfish]
                } else {
                    net_formats
                },
                net_layout: match &net_layout {
                    Some(l) => Some(crate::cli::read_layout("--net-layout", l)?),
                    None => None,
                },
                sha256: None,
                bench,
            };
            if api.is_some() {
                // The service reads the engine's options itself when the program is on its
                // machine; these are what it keeps when it is not.
                match lakefish_jobs::engines::probe_options(
                    std::path::absolute(&local)?,
                    spec.args.clone(),
                )
                .await
                {
                    Ok(announced) => spec.uci_options = announced,
                    // As the registry: only options for sides need the engine's own list.
                    Err(e) if spec.allow.is_empty() => {
                        eprintln!(
                            "warning: the options {} announces could not be read: {e}",
                            local.display()
                        )
                    }
                    Err(e) => {
                        return Err(anyhow::Error::from(e).context(format!(
                            "reading the options {} announces",
                            local.display()
                        )));
                    }
                }
            }
            if !no_check {
                spec.sha256 = Some(
                    lakefish_jobs::engines::file_sha256(&local)
                        .with_context(|| format!("reading {}", local.display()))?,
                );
                if spec.bench.is_none() {
                    eprintln!(
                        "running `{} bench` to record its node count…",
                        local.display()
                    );
                    let (p, a) = (local.clone(), spec.args.clone());
                    let nodes = tokio::task::spawn_blocking(move || {
                        lakefish_jobs::engines::bench_nodes(&p, &a)
                    })
                    .await??;
                    spec.bench = Some(nodes);
                }
            }
            let lake_handle = match &upload {
                Some(path) => {
                    if api.is_some() {
                        bail!(
                            "--upload writes the binary to the lake: run it with --lake, not --api"
                        );
                    }
                    let l = crate::config::open_lake_for_writing(lake).await?;
                    let bytes = std::fs::read(path)
                        .with_context(|| format!("reading {}", path.display()))?;
                    spec.command = lakefish_jobs::engines::upload_binary(&l, bytes).await?;
                    Some(l)
                }
                None => {
                    let path = command.expect("given");
                    let absolute = std::path::absolute(&path)?;
                    spec.command = absolute.display().to_string();
                    None
                }
            };
            spec.validate().map_err(anyhow::Error::msg)?;
            let stored: EngineSpec = match &api {
                Some(api) => {
                    let resp = crate::client::client()
                        .post(format!("{api}/v1/engines"))
                        .json(&spec)
                        .send()
                        .await?;
                    serde_json::from_value(crate::client::check(resp).await?)?
                }
                None => {
                    let l = match lake_handle {
                        Some(l) => l,
                        None => crate::config::open_lake_for_writing(lake).await?,
                    };
                    lakefish_jobs::engines::register(&l, &spec).await?.0
                }
            };
            println!(
                "registered engine {} ({}{}{})",
                stored.name,
                stored.command,
                stored
                    .sha256
                    .as_ref()
                    .map(|s| format!(", sha256 {}", &s[..12]))
                    .unwrap_or_default(),
                stored
                    .bench
                    .map(|b| format!(", bench {b}"))
                    .unwrap_or_default()
            );
            if stored.allow.is_empty() {
                println!("  sides may set no UCI option (allow some with --allow NAME[=RULE])");
            } else {
                for (name, rule) in &stored.allow {
                    println!("  sides may set {name}: {rule}");
                }
            }
            Ok(())
        }
        EnginesCommand::Ls => {
            let engines: Vec<EngineSpec> = match &api {
                Some(api) => {
                    let v = crate::client::check(
                        crate::client::client()
                            .get(format!("{api}/v1/engines"))
                            .send()
                            .await?,
                    )
                    .await?;
                    serde_json::from_value(v["engines"].clone())?
                }
                None => {
                    let l = crate::config::open_existing_lake(lake)?;
                    lakefish_jobs::engines::list(&l).await?
                }
            };
            println!("{BUILTIN_ENGINE:<20} (built in: lakefish's own engine, in-process)");
            for e in engines {
                let opts: Vec<String> = e.options.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let allowed: Vec<String> =
                    e.allow.iter().map(|(k, r)| format!("{k}={r}")).collect();
                println!(
                    "{:<20} {}{}{}{}",
                    e.name,
                    e.command,
                    if opts.is_empty() {
                        String::new()
                    } else {
                        format!(" [{}]", opts.join(", "))
                    },
                    e.bench.map(|b| format!(" bench {b}")).unwrap_or_default(),
                    if allowed.is_empty() {
                        String::new()
                    } else {
                        format!(" sides may set: {}", allowed.join(", "))
                    }
                );
            }
            Ok(())
        }
        EnginesCommand::Show { name } => {
            let spec: Option<EngineSpec> = match &api {
                Some(api) => {
                    let resp = crate::client::client()
                        .get(format!("{api}/v1/engines/{name}"))
                        .send()
                        .await?;
                    Some(serde_json::from_value(crate::client::check(resp).await?)?)
                }
                None => {
                    let l = crate::config::open_existing_lake(lake)?;
                    lakefish_jobs::engines::get(&l, &name).await?
                }
            };
            match spec {
                Some(s) => println!("{}", serde_json::to_string_pretty(&s)?),
                None if name == BUILTIN_ENGINE => {
                    println!("{BUILTIN_ENGINE}: lakefish's own engine, built in, played in-process")
                }
                None => bail!("engine {name} is not registered (lakefish engines ls)"),
            }
            Ok(())
        }
        EnginesCommand::Rm { name } => {
            let removed = match &api {
                Some(api) => {
                    let resp = crate::client::client()
                        .delete(format!("{api}/v1/engines/{name}"))
                        .send()
                        .await?;
                    crate::client::check(resp).await?;
                    true
                }
                None => {
                    let l = crate::config::open_lake_for_writing(lake).await?;
                    lakefish_jobs::engines::remove(&l, &name).await?
                }
            };
            if !removed {
                bail!("engine {name} is not registered");
            }
            println!("removed engine {name}");
            Ok(())
        }
    }
}
