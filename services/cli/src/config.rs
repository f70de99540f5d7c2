//! Config loading (`lakefish.toml` and LAKEFISH__* overrides), logging, the lake named on the
//! command line, and the `token new` / `check-config` commands.

use crate::cli::{Cli, Command};
use anyhow::{Context, bail};
use lakefish_jobs::Lake;
use lakefish_schemas::config::{Config, Scope};
use std::collections::HashMap;

pub(crate) fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

pub(crate) fn init_logging(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("LAKEFISH_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colours only for a terminal: a log file (serve.log) gets plain text.
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    if json {
        b.json().init();
    } else {
        b.init();
    }
}

/// Reads the config file once, with the LAKEFISH__* overrides; no file: the defaults.
pub(crate) fn load_config(path: Option<&str>) -> anyhow::Result<Config> {
    let Some(path) = path else {
        // No file: the defaults, still with the LAKEFISH__* overrides applied.
        let defaults = format!("version = {}", lakefish_schemas::config::CONFIG_VERSION);
        return Ok(Config::parse(
            "(built-in defaults)",
            &defaults,
            std::env::vars(),
        )?);
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the config file {path}"))?;
    Ok(Config::parse(path, &text, std::env::vars())?)
}

/// Config values fill in what the command line (and its LAKEFISH_* variables) left unset.
pub(crate) fn apply_config(cli: &mut Cli, matches: &clap::ArgMatches, config: &Config) {
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
            if queue.meta.metastore.is_none() {
                queue.meta.metastore = server.metastore.clone();
            }
        }
        (Command::Worker { redis, meta, .. }, _) => {
            if redis.is_none() {
                *redis = server.redis.clone();
            }
            if meta.metastore.is_none() {
                meta.metastore = server.metastore.clone();
            }
        }
        _ => {}
    }
}

pub(crate) fn open_lake(spec: &str) -> anyhow::Result<Lake> {
    let env: HashMap<String, String> = std::env::vars().collect();
    Ok(Lake::open(spec, &env)?)
}

/// The lake for a command that only reads it: a local directory that does not exist is an
/// error (a mistyped `--lake` would otherwise read as an empty lake, silently).
pub(crate) fn open_existing_lake(spec: &str) -> anyhow::Result<Lake> {
    if !spec.contains("://") && !std::path::Path::new(spec).is_dir() {
        anyhow::bail!(
            "no lake at {spec}: the directory does not exist (check --lake or LAKEFISH_LAKE; the commands that write, such as ingest, upload and serve, create a lake)"
        );
    }
    open_lake(spec)
}

/// The lake and the job records that go with it, for a command that must see every queued
/// and running job (`gc`): the lake's own records, or those of the metastore a server keeps
/// for it (SQLite beside it, or `LAKEFISH_METASTORE`); refused when they cannot be read.
pub(crate) async fn open_lake_with_jobs(
    spec: &str,
) -> anyhow::Result<(Lake, lakefish_lake::records::JobStore)> {
    let lake = open_existing_lake(spec)?;
    let Some(marker) = lakefish_jobs::catalog::read_marker(&lake).await? else {
        let jobs = lakefish_lake::records::JobStore::new(lake.clone());
        return Ok((lake, jobs));
    };
    let chosen = match std::env::var("LAKEFISH_METASTORE").ok() {
        Some(s) => s,
        None if marker.metastore.starts_with("sqlite:") => marker.metastore.clone(),
        None => anyhow::bail!(
            "{} is served with the metastore {}, which holds its job records: set LAKEFISH_METASTORE to its URL so this command sees the queued and running jobs",
            lake.describe(),
            marker.metastore
        ),
    };
    let meta = lakefish_metastore::MetastoreSpec::parse(&chosen).map_err(anyhow::Error::msg)?;
    if let lakefish_metastore::MetastoreSpec::Sqlite(path) = &meta
        && !std::path::Path::new(path).exists()
    {
        anyhow::bail!(
            "{} is served with {}, which is not on this machine: run this command where the server runs",
            lake.describe(),
            marker.metastore
        );
    }
    let opened = lakefish_metastore::open(&meta, &lake)
        .await
        .with_context(|| format!("opening the metastore {}", meta.describe()))?;
    let lake = match opened.catalog {
        Some(catalog) => lake.with_catalog(catalog),
        None => lake,
    };
    Ok((lake, opened.jobs))
}

/// The lake for a command that writes it in its own process, with the catalogue its server
/// keeps (the lake's `_catalog.json` names it), so lists show what the command writes. A
/// PostgreSQL catalogue needs its URL with the password: `LAKEFISH_METASTORE`.
pub(crate) async fn open_lake_for_writing(spec: &str) -> anyhow::Result<Lake> {
    let lake = open_lake(spec)?;
    let Some(marker) = lakefish_jobs::catalog::read_marker(&lake).await? else {
        return Ok(lake);
    };
    if !marker.is_of(&lake) {
        // A copy (or a moved lake): the metastore it names indexes the original.
        tracing::warn!(
            "{} was indexed by {} where it was {}: this is a copy or has moved, so this command does not index what it writes there (give it a metastore of its own with `lakefish serve` or `lakefish metastore rebuild`)",
            lake.describe(),
            marker.metastore,
            marker.lake.as_deref().unwrap_or("?")
        );
        return Ok(lake);
    }
    let from_env = std::env::var("LAKEFISH_METASTORE").ok();
    let chosen = match from_env {
        Some(s) => Some(s),
        None if marker.metastore.starts_with("sqlite:") => Some(marker.metastore.clone()),
        None => None,
    };
    let Some(chosen) = chosen else {
        tracing::warn!(
            "{} is indexed by the metastore {}: set LAKEFISH_METASTORE to its URL so lists \
             show what this command writes (or run `lakefish metastore rebuild` afterwards)",
            lake.describe(),
            marker.metastore
        );
        return Ok(lake);
    };
    let meta = lakefish_metastore::MetastoreSpec::parse(&chosen).map_err(anyhow::Error::msg)?;
    if let lakefish_metastore::MetastoreSpec::Sqlite(path) = &meta
        && !std::path::Path::new(path).exists()
    {
        // Opening it would create an empty catalogue that the server then trusts.
        tracing::warn!(
            "{} is indexed by {}, which does not exist here: not indexing this command's \
             output; run `lakefish metastore rebuild` where the server runs",
            lake.describe(),
            marker.metastore
        );
        return Ok(lake);
    }
    if meta.locator() != marker.metastore {
        tracing::warn!(
            "{} is indexed by {}, not by {} (LAKEFISH_METASTORE): indexing this command's \
             output in neither; run `lakefish metastore rebuild` against the right one",
            lake.describe(),
            marker.metastore,
            meta.locator()
        );
        return Ok(lake);
    }
    let opened = lakefish_metastore::open(&meta, &lake)
        .await
        .with_context(|| {
            format!(
                "opening the metastore {} that indexes this lake",
                meta.describe()
            )
        })?;
    Ok(match opened.catalog {
        Some(catalog) => lake.with_catalog(catalog),
        None => lake,
    })
}

/// `lakefish token new NAME --scope ...`: a fresh token and the config lines that admit it.
pub(crate) fn new_token(name: &str, scopes: &[String]) -> anyhow::Result<()> {
    let scopes = scopes
        .iter()
        .map(|s| match Scope::parse(s) {
            Some(scope) => Ok(format!("{:?}", scope.as_str())),
            None => bail!("unknown scope {s:?} (read, submit or admin)"),
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

/// `lakefish check-config [FILE]`: parses the file as `serve` would and prints it resolved.
pub(crate) fn check_config(path: Option<String>) -> anyhow::Result<()> {
    let path = path.context("name the file: lakefish check-config FILE (or --config)")?;
    let config = load_config(Some(&path))?;
    println!("{path}: ok (version {})", config.version);
    println!("{}", serde_json::to_string_pretty(&config)?);
    Ok(())
}
