//! Commands that read or write the local lake directly: `runs`, `datasets`, `upload`, `synth`, `profile`, `du`, `gc`, `rm`.

use crate::client::{file_name, file_stream};
use crate::config::open_lake;
use anyhow::Context;
use lakefish_schemas::{Source, raw_key};

/// The metrics rows `runs RUN` shows without `--metrics`: the last few, not 100 KB.
const METRICS_SHOWN: usize = 5;

/// `lakefish runs [ID] [--metrics] [--json]`: every training run as a table (or JSON), or one
/// run's record as JSON with its last metrics rows (all of them with `--metrics`).
pub(crate) async fn runs(
    lake: &str,
    id: Option<lakefish_schemas::names::RunId>,
    all_metrics: bool,
    json: bool,
) -> anyhow::Result<()> {
    let lake = crate::config::open_existing_lake(lake)?;
    let Some(id) = id else {
        let runs = lakefish_jobs::nets::list_runs(&lake).await?;
        if json {
            println!("{}", serde_json::to_string_pretty(&runs)?);
            return Ok(());
        }
        if runs.is_empty() {
            println!("no training runs yet");
        }
        for r in runs {
            let val = match (r.val_loss.last(), r.material_val_loss) {
                (Some(v), Some(m)) => format!("val {v:.5} (material {m:.5})"),
                (Some(v), None) => format!("val {v:.5}"),
                _ => "no validation yet".into(),
            };
            println!(
                "{:<16} {:<9} {:<12} {:<16} step {:<8} epoch {:<3} {val}  {}{}",
                r.id,
                r.state(),
                r.spec.net_label().0,
                r.spec.net_label().1,
                r.step,
                r.epoch,
                r.updated,
                r.error
                    .map(|e| format!("\n    error: {e}"))
                    .unwrap_or_default()
            );
        }
        return Ok(());
    };
    let mut run = lakefish_jobs::nets::run_with_metrics(&lake, &id)
        .await?
        .with_context(|| format!("run {id} not found"))?;
    let total = run.metrics.len();
    if !all_metrics && total > METRICS_SHOWN {
        run.metrics.drain(..total - METRICS_SHOWN);
        eprintln!("the last {METRICS_SHOWN} of {total} metrics rows (all of them: --metrics)");
    }
    println!("{}", serde_json::to_string_pretty(&run)?);
    Ok(())
}

/// Bytes for people: 1.2 MiB.
pub(crate) fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// `lakefish datasets [--json]`: every committed dataset, one line each (or JSON).
pub(crate) async fn datasets(lake: &str, json: bool) -> anyhow::Result<()> {
    let lake = crate::config::open_existing_lake(lake)?;
    let ds = lakefish_lake::datasets::list_datasets(&lake).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&ds)?);
        return Ok(());
    }
    if ds.is_empty() {
        println!("no datasets yet (lakefish ingest binpack|pgn FILE --dataset NAME)");
    }
    for d in ds {
        let name = format!("{}/{}", d.source, d.name);
        let masks = if d.masks.is_empty() {
            "no masks".to_string()
        } else {
            format!("masks: {}", d.masks.join(", "))
        };
        let skipped = if d.skipped_ranges > 0 {
            format!("  {} unreadable ranges skipped", d.skipped_ranges)
        } else {
            String::new()
        };
        let from = d
            .derived_from
            .as_ref()
            .map_or(String::new(), |f| format!("  from {f}"));
        println!(
            "{name:<32} {:>12} rows {:>10} {:>4} parts  {masks:<24} {}{skipped}{from}",
            d.rows,
            human_bytes(d.bytes),
            d.partitions,
            d.created
        );
    }
    Ok(())
}

/// `lakefish chunk SHUFFLE [INDEX]`: a chunk's rows as text.
pub(crate) fn chunk(
    rt: &tokio::runtime::Runtime,
    lake: &str,
    shuffle: &lakefish_schemas::names::ShuffleId,
    index: u32,
    limit: usize,
    json: bool,
) -> anyhow::Result<()> {
    let ctx = lakefish_jobs::JobContext::new(
        crate::config::open_existing_lake(lake)?,
        rt.handle().clone(),
    );
    let rows = lakefish_jobs::chunks::chunk_rows_as_text(&ctx, shuffle, index, limit)?;
    let cell = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    for r in rows {
        if json {
            println!("{}", serde_json::to_string(&r)?);
        } else {
            println!(
                "{}\t{}\t{}\t{}\t{}",
                r.fen,
                cell(r.score.map(|s| s.to_string())),
                cell(r.result.map(|s| s.to_string())),
                r.ply,
                r.mv
            );
        }
    }
    Ok(())
}

/// `lakefish upload FILE... --source S`: files into `raw/` (or `books/`) of the lake.
/// `lakefish upload`: copies files into `raw/` under the same rule as the API: the same bytes
/// again change nothing, other bytes under a taken name are refused unless `replace`.
pub(crate) async fn upload(
    lake: &str,
    files: &[String],
    source: &str,
    replace: bool,
) -> anyhow::Result<()> {
    let lake = open_lake(lake)?;
    let src = match source {
        "books" => None,
        s => Some(Source::parse(s).with_context(|| {
            format!("unknown source {source:?} (binpack, lichess, selfplay or books)")
        })?),
    };
    for f in files {
        let key = match src {
            Some(src) => raw_key(src, file_name(f)?)?,
            None => lakefish_schemas::names::book_key(file_name(f)?)?,
        };
        let size = std::fs::metadata(f)
            .with_context(|| format!("reading {f}"))?
            .len();
        let stored = lake
            .put_immutable(&key, file_stream(f).await?, Some(size), u64::MAX, replace)
            .await?;
        let what = if stored.created {
            "stored"
        } else {
            "unchanged, already there"
        };
        println!(
            "{}{key}\t{} bytes\tsha256 {}\t{what}",
            lakefish_lake::input::LAKE_PREFIX,
            stored.bytes,
            stored.sha256_hex()
        );
    }
    Ok(())
}

/// `lakefish synth OUT`: a synthetic binpack of random games, for tests and demos.
pub(crate) fn synth(out: &str, games: usize, seed: u64) -> anyhow::Result<()> {
    let bytes = lakefish_ingest::binpack::synthetic_binpack(games, seed);
    std::fs::write(out, &bytes).with_context(|| format!("writing {out}"))?;
    println!("wrote {out}: {games} games, {} bytes", bytes.len());
    Ok(())
}

/// `lakefish profile DATASET` (or `--shuffle ID`): counts and histograms, stored beside it.
#[derive(clap::Args)]
pub(crate) struct ProfileArgs {
    /// The dataset to profile (or --shuffle).
    pub dataset: Option<lakefish_schemas::DatasetName>,
    /// Its source partition: binpack, lichess, selfplay, plain or bullet.
    #[arg(long, default_value = "binpack")]
    pub source: String,
    /// A committed shuffle instead of a dataset (sh-...): what training will read.
    #[arg(long, conflicts_with = "dataset")]
    pub shuffle: Option<lakefish_schemas::names::ShuffleId>,
    /// Print the profile as JSON.
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn profile(
    lake: &str,
    rt: &tokio::runtime::Handle,
    a: ProfileArgs,
) -> anyhow::Result<()> {
    let of =
        crate::export_cmd::rows_named(a.dataset.as_ref(), &a.source, None, a.shuffle.as_ref())?;
    crate::config::open_existing_lake(lake)?;
    // With its server's catalogue, so the profile's space is measured there too.
    let lake = rt.block_on(crate::config::open_lake_for_writing(lake))?;
    let ctx = lakefish_jobs::JobContext::new(lake, rt.clone());
    let p = lakefish_jobs::profile::profile(&ctx, &of)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&p)?);
        return Ok(());
    }
    let pct = |n: u64| 100.0 * n as f64 / p.rows.max(1) as f64;
    println!(
        "{of}: {} rows, {:.1}% scored, {:.1}% with a result, {:.1}% repeated positions, {:.1}% whose score and result disagree",
        p.rows,
        pct(p.scored),
        pct(p.with_result),
        pct(p.repeated),
        100.0 * p.disagreeing as f64 / p.scored_with_result.max(1) as f64,
    );
    let bar = |n: u64, max: u64| "#".repeat((40 * n / max.max(1)) as usize);
    let show = |title: &str, h: Vec<(String, u64)>| {
        println!("{title}");
        let max = h.iter().map(|(_, n)| *n).max().unwrap_or(0);
        for (k, n) in h {
            println!("  {k:>6} {n:>9} {}", bar(n, max));
        }
    };
    show(
        "result (side to move)",
        p.result.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
    );
    show(
        "men on the board",
        p.men.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
    );
    show(
        "ply (by 10)",
        p.ply.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
    );
    show(
        "score (internal units, by 100)",
        p.score.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
    );
    eprintln!("stored as {}", lakefish_jobs::profile::profile_key(&of)?);
    Ok(())
}

/// `lakefish du`: the lake's space by kind and its largest items.
#[derive(clap::Args)]
pub(crate) struct DuArgs {
    /// Items listed after the kinds (largest first).
    #[arg(long, default_value_t = 15)]
    pub top: usize,
    /// Print everything as JSON (every item).
    #[arg(long)]
    pub json: bool,
    /// List every object of the lake instead of reading the catalogue's measurements (what
    /// a lake without a server's catalogue always does; slower on a large bucket, and it
    /// also counts what is still being written).
    #[arg(long)]
    pub scan: bool,
}

/// Bytes for people: B, KiB, MiB, GiB, TiB.
fn human(bytes: u64) -> String {
    let mut v = bytes as f64;
    for unit in ["B", "KiB", "MiB", "GiB"] {
        if v < 1024.0 {
            return if unit == "B" {
                format!("{bytes} B")
            } else {
                format!("{v:.1} {unit}")
            };
        }
        v /= 1024.0;
    }
    format!("{v:.1} TiB")
}

pub(crate) fn du(lake: &str, rt: &tokio::runtime::Handle, a: DuArgs) -> anyhow::Result<()> {
    let u = if a.scan {
        let lake = crate::config::open_existing_lake(lake)?;
        rt.block_on(lakefish_jobs::space::usage_by_listing(&lake))?
    } else {
        let (lake, _) = rt.block_on(crate::config::open_lake_with_jobs(lake))?;
        rt.block_on(lakefish_jobs::space::usage(&lake))?
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&u)?);
        return Ok(());
    }
    let kind = lakefish_jobs::space::SpaceKind::as_str;
    println!(
        "{:<12} {:>11} {:>9} {:>7}",
        "kind", "size", "objects", "items"
    );
    for k in &u.kinds {
        println!(
            "{:<12} {:>11} {:>9} {:>7}",
            kind(k.kind),
            human(k.bytes),
            k.objects,
            k.items
        );
    }
    println!("{:<12} {:>11} {:>9}", "total", human(u.bytes), u.objects);
    eprintln!(
        "{}",
        if u.from == "catalogue" {
            "(from the catalogue's measurements and a listing of the rest; --scan lists everything)"
        } else {
            "(from a listing of every object)"
        }
    );
    if a.top > 0 && !u.items.is_empty() {
        println!("\nlargest items:");
        for i in u.items.iter().take(a.top) {
            println!(
                "  {:<12} {:>11} {:>7} objects  {}",
                kind(i.kind),
                human(i.bytes),
                i.objects,
                i.name
            );
        }
    }
    Ok(())
}

/// `lakefish gc`: the plan, and with `--yes` the removal.
#[derive(clap::Args)]
pub(crate) struct GcArgs {
    /// The newest checkpoints kept of every finished run (at least 1).
    #[arg(long, default_value_t = lakefish_jobs::gc::GcPolicy::default().keep_checkpoints)]
    pub keep_checkpoints: usize,
    /// Also remove shuffles no run has trained on for this many days (never one a registered
    /// net's lineage names; a tombstone marks them for the runs that used them).
    #[arg(long)]
    pub unused_shuffle_days: Option<u32>,
    /// Remove what the plan lists (without it, nothing is removed).
    #[arg(long)]
    pub yes: bool,
    /// Print the plan (and the report) as JSON.
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn gc(lake: &str, rt: &tokio::runtime::Handle, a: GcArgs) -> anyhow::Result<()> {
    let (lake, jobs) = rt.block_on(crate::config::open_lake_with_jobs(lake))?;
    let policy = lakefish_jobs::gc::GcPolicy {
        keep_checkpoints: a.keep_checkpoints.max(1),
        unused_shuffle_days: a.unused_shuffle_days,
    };
    let plan = rt.block_on(lakefish_jobs::gc::plan(&lake, &jobs, policy))?;
    if a.json && !a.yes {
        println!("{}", serde_json::to_string_pretty(&plan)?);
        return Ok(());
    }
    if !a.json {
        for r in &plan.remove {
            println!("  {:<18} {:>11}  {}", r.item, human(r.bytes), r.why);
        }
        for k in &plan.kept {
            println!("  {:<18} {:>11}  kept: {}", k.item, "", k.why);
        }
        println!(
            "{} {} in {} objects{}",
            if a.yes { "removing" } else { "would free" },
            human(plan.bytes),
            plan.objects,
            if a.yes || plan.objects == 0 {
                String::new()
            } else {
                " (nothing removed: run again with --yes)".into()
            }
        );
    }
    if !a.yes {
        return Ok(());
    }
    let by = format!(
        "local:{}",
        std::env::var("USER").unwrap_or_else(|_| "unknown".into())
    );
    let report = rt.block_on(lakefish_jobs::gc::apply(&lake, &jobs, &plan, &by))?;
    rt.block_on(lakefish_jobs::gc::record(&lake, &plan, &report, &by))?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"plan": plan, "report": report}))?
        );
        return Ok(());
    }
    for s in &report.skipped {
        println!("  {:<18} skipped: {}", s.item, s.why);
    }
    println!(
        "removed {} in {} objects",
        human(report.removed_bytes),
        report.removed_objects
    );
    Ok(())
}

/// `lakefish rm KIND NAME`.
#[derive(clap::Args)]
pub(crate) struct RmArgs {
    /// dataset, mask, shuffle, run, checkpoint or games.
    pub kind: String,
    /// The item: [SOURCE/]DATASET, MASK@[SOURCE/]DATASET, sh-…, run-…, run-…/STEP or sprt-….
    pub name: String,
    /// Remove even what registered nets, shuffles, runs or experiments still name (they then
    /// point at its tombstone).
    #[arg(long)]
    pub force: bool,
    /// Remove (without it, only what would be removed is printed).
    #[arg(long)]
    pub yes: bool,
}

pub(crate) fn rm(lake: &str, rt: &tokio::runtime::Handle, a: RmArgs) -> anyhow::Result<()> {
    use lakefish_jobs::remove;
    let target = remove::RmTarget::parse(&a.kind, &a.name).map_err(anyhow::Error::msg)?;
    let (lake, jobs) = rt.block_on(crate::config::open_lake_with_jobs(lake))?;
    let plan = rt.block_on(remove::plan(&lake, &jobs, &target))?;
    println!(
        "{} {}: {} in {} objects",
        plan.kind,
        plan.name,
        human(plan.bytes),
        plan.keys.len()
    );
    for d in &plan.dependents {
        println!(
            "  needed by {}{}",
            d.what,
            if d.blocking { " (at work)" } else { "" }
        );
    }
    if !a.yes {
        println!(
            "nothing removed: {}",
            if plan.dependents.iter().any(|d| d.blocking) {
                "what is at work on it must end first (cancel the job, stop the test)"
            } else if plan.dependents.is_empty() {
                "run again with --yes"
            } else {
                "run again with --yes --force to remove it anyway (a tombstone stays)"
            }
        );
        return Ok(());
    }
    let by = format!(
        "local:{}",
        std::env::var("USER").unwrap_or_else(|_| "unknown".into())
    );
    let stone = rt.block_on(remove::apply(&lake, &jobs, &target, &plan, a.force, &by))?;
    println!(
        "removed {} {} ({}); tombstone {}",
        stone.kind,
        stone.name,
        human(stone.bytes),
        remove::tombstone_key(&stone.kind, &stone.name)
    );
    Ok(())
}
