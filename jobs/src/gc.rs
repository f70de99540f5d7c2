//! Retention (issue 45): `lakefish gc` removes what nothing needs any more, and never what
//! something does: training checkpoints beyond the last `keep_checkpoints` of each finished
//! run, pass-1 files a committed shuffle left behind, and (with `unused_shuffle_days`)
//! shuffles no run has trained on for that long that no registered net's lineage names
//! (removed as `lakefish rm` removes them, with a tombstone for the runs that used them),
//! and what ingests that never committed left: the parts of a dataset whose writer's claim
//! is past its lease ([`lakefish_lake::datasets::CLAIM_LEASE`]) by another lease and that no
//! job at work names (and the bare claim a writer that died after its commit left).
//! The server's scheduler runs it with `[retention]` and keeps its last report in `gc/last.json`.
//!
//! Kept whatever the policy says: every checkpoint a registered net was quantized from (its
//! lineage names it), every checkpoint of a run that is not finished (a resume needs them),
//! and everything of a run that a queued or running job names (a resume, a quantize of an
//! older step). The plan is made first and shown (`lakefish gc` is a dry run; `--yes` acts);
//! acting re-reads each run and the jobs first and skips a run that changed since. Files go
//! first, then the run's record drops their names; a crash between the two leaves names of
//! removed files, which the next `gc` drops when they are still beyond what it keeps.

use std::collections::{BTreeMap, BTreeSet};

use lakefish_lake::records::JobStore;
use lakefish_schemas::RunRecord;
use lakefish_schemas::names::RunId;

use crate::{JobError, Lake};

/// What `gc` keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcPolicy {
    /// The newest checkpoints kept of every finished run (at least 1: a resume starts there).
    pub keep_checkpoints: usize,
    /// Shuffles unused for this many days go (see the module); `None` keeps them.
    pub unused_shuffle_days: Option<u32>,
}

impl Default for GcPolicy {
    fn default() -> Self {
        GcPolicy {
            keep_checkpoints: 2,
            unused_shuffle_days: None,
        }
    }
}

impl From<&lakefish_schemas::config::RetentionConfig> for GcPolicy {
    fn from(r: &lakefish_schemas::config::RetentionConfig) -> Self {
        GcPolicy {
            keep_checkpoints: r.keep_checkpoints,
            unused_shuffle_days: r.unused_shuffle_days,
        }
    }
}

/// What a removal takes, which decides how it is checked again before it acts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RemovalKind {
    /// Old checkpoints of a finished run.
    Checkpoints,
    /// A whole shuffle unused for the configured days (as `rm` removes it).
    Shuffle,
    /// Pass-1 files a committed shuffle left behind.
    PassFiles,
    /// The parts of an ingest that never committed, its writer's claim past its lease.
    FailedIngest,
    /// The claim a committed ingest's writer left when it died after the commit.
    LeftoverClaim,
}

/// One item's objects to remove.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct Removal {
    /// `run-…`, `sh-…`, or `SOURCE/NAME` for a failed ingest.
    pub item: String,
    pub kind: RemovalKind,
    pub keys: Vec<String>,
    pub bytes: u64,
    pub why: String,
}

/// An item left alone, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct Kept {
    pub item: String,
    pub why: String,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct GcPlan {
    pub keep_checkpoints: usize,
    pub remove: Vec<Removal>,
    /// Items with something the policy would remove that is needed (or all of it).
    pub kept: Vec<Kept>,
    pub bytes: u64,
    pub objects: u64,
}

/// What an applied plan did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct GcReport {
    pub removed_objects: u64,
    pub removed_bytes: u64,
    /// Items skipped at the last moment (changed since the plan, or a job named them).
    pub skipped: Vec<Kept>,
}

/// A claim whose writer is gone for sure: a lease past its expiry by another lease (a
/// writer that stalled between its last check of the claim and its commit has long given up
/// by then: it stops at half a lease without renewal).
fn past_lease(claim: &lakefish_lake::datasets::WriterClaim) -> bool {
    chrono::DateTime::parse_from_rfc3339(&claim.expires).map_or(true, |t| {
        t + lakefish_lake::datasets::CLAIM_LEASE < chrono::Utc::now()
    })
}

/// Why work under way needs `target`, if it does.
fn named_by_work(target: &crate::remove::RmTarget, active: &[String]) -> Option<String> {
    active
        .iter()
        .any(|s| target.named_in(s))
        .then(|| "a queued or running job names it".to_string())
}

/// Every object an uncommitted dataset holds (positions and, for PGN, games), its
/// writer's claim last.
async fn attempt_keys(
    lake: &Lake,
    source: lakefish_schemas::Source,
    dataset: &lakefish_schemas::DatasetName,
) -> Result<(Vec<String>, u64), JobError> {
    let prefix = lakefish_schemas::positions::dataset_prefix(source, dataset);
    let claim = format!("{prefix}/{}", lakefish_lake::datasets::WRITER_FILE);
    let mut keys = Vec::new();
    let mut bytes = 0;
    for p in [
        prefix,
        lakefish_schemas::games::games_prefix(source, dataset),
    ] {
        for o in lake.list(&p).await? {
            bytes += o.size;
            keys.push(o.location.to_string());
        }
    }
    if let Some(i) = keys.iter().position(|k| *k == claim) {
        let k = keys.remove(i);
        keys.push(k);
    }
    Ok((keys, bytes))
}

/// Removes what a failed ingest left, holding its dataset's claim meanwhile: the stale
/// claim is taken over (atomically, as a writer would) in gc's name, so a writer arriving
/// now finds the dataset busy instead of writing parts gc is about to delete. `None` when
/// the item changed since the plan (committed, claimed afresh, or named by new work).
async fn remove_failed_ingest(
    lake: &Lake,
    jobs: &JobStore,
    item: &str,
) -> Result<Option<(u64, u64)>, JobError> {
    use lakefish_lake::datasets::{WRITER_FILE, WriterClaim, read_manifest};
    let Some((source, name)) = item.split_once('/') else {
        return Ok(None);
    };
    let (Some(source), Ok(name)) = (
        lakefish_schemas::Source::parse(source),
        lakefish_schemas::DatasetName::new(name),
    ) else {
        return Ok(None);
    };
    let prefix = lakefish_schemas::positions::dataset_prefix(source, &name);
    let claim_key = format!("{prefix}/{WRITER_FILE}");
    let Some((bytes, version)) = lake.get_versioned(&claim_key).await? else {
        return Ok(None);
    };
    let target = crate::remove::RmTarget::Dataset(source, name.clone());
    if !past_lease(&WriterClaim::parse(&bytes))
        || read_manifest(lake, source, &name).await?.is_some()
        || named_by_work(&target, &active_specs(lake, jobs).await?).is_some()
    {
        return Ok(None);
    }
    // Listed before the takeover: what the dead writer left (its claim included).
    let (keys, bytes) = attempt_keys(lake, source, &name).await?;
    let token = format!("gc-{}", lakefish_schemas::JobId::new());
    let mine = serde_json::to_vec_pretty(&WriterClaim::new("gc", &token))?;
    if !lake
        .put_if_unchanged(&claim_key, mine, Some(&version))
        .await?
    {
        return Ok(None);
    }
    let objects = keys.len() as u64;
    // The claim (last in `keys`) goes after everything it guarded.
    lake.delete_many(keys[..keys.len().saturating_sub(1)].to_vec())
        .await?;
    lake.delete(&claim_key).await?;
    Ok(Some((objects, bytes)))
}

/// The text of all work under way ([`crate::remove::work_in_progress`]).
async fn active_specs(lake: &Lake, jobs: &JobStore) -> Result<Vec<String>, JobError> {
    Ok(crate::remove::work_in_progress(lake, jobs)
        .await?
        .into_iter()
        .map(|(_, text)| text)
        .collect())
}

/// Checkpoint steps of each run that registered nets came from.
async fn registered_steps(lake: &Lake) -> Result<BTreeMap<String, BTreeSet<u64>>, JobError> {
    let mut out: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    for n in crate::nets::list_nets(lake).await? {
        if !n.external {
            out.entry(n.run.clone()).or_default().insert(n.step);
        }
    }
    Ok(out)
}

/// The step a checkpoint file name holds (`step-000000120.ot` → 120).
fn step_of(name: &str) -> Option<u64> {
    name.strip_prefix("step-")?.split('.').next()?.parse().ok()
}

fn checkpoint_key(run: &RunId, name: &str) -> String {
    format!("runs/{run}/checkpoints/{name}")
}

/// Which of a run's checkpoints go, or why none does.
fn run_removals(
    run: &RunRecord,
    policy: GcPolicy,
    registered: &BTreeSet<u64>,
    active: &[String],
) -> Result<Vec<String>, String> {
    if !run.finished {
        return Err("not finished: a resume needs its checkpoints".into());
    }
    if active.iter().any(|s| s.contains(run.id.as_str())) {
        return Err("a queued or running job names it".into());
    }
    let keep_from = run
        .checkpoints
        .len()
        .saturating_sub(policy.keep_checkpoints.max(1));
    Ok(run.checkpoints[..keep_from]
        .iter()
        // A name that is not a step's is not gc's to judge: kept.
        .filter(|c| step_of(c).is_some_and(|s| !registered.contains(&s)))
        .cloned()
        .collect())
}

/// What `gc` would remove under `policy`, and what it keeps that the policy alone would not.
pub async fn plan(lake: &Lake, jobs: &JobStore, policy: GcPolicy) -> Result<GcPlan, JobError> {
    let active = active_specs(lake, jobs).await?;
    let registered = registered_steps(lake).await?;
    let none = BTreeSet::new();
    let mut p = GcPlan {
        keep_checkpoints: policy.keep_checkpoints.max(1),
        remove: Vec::new(),
        kept: Vec::new(),
        bytes: 0,
        objects: 0,
    };
    for run in crate::nets::list_runs(lake).await? {
        if run.checkpoints.len() <= p.keep_checkpoints {
            continue;
        }
        let steps = registered.get(run.id.as_str()).unwrap_or(&none);
        match run_removals(&run, policy, steps, &active) {
            Err(why) => p.kept.push(Kept {
                item: run.id.to_string(),
                why,
            }),
            Ok(names) if names.is_empty() => {}
            Ok(names) => {
                let mut keys = Vec::new();
                let mut bytes = 0;
                for n in &names {
                    let key = checkpoint_key(&run.id, n);
                    bytes += lake.size(&key).await?.unwrap_or(0);
                    keys.push(key);
                }
                // Registered nets' checkpoints older than the last kept ones.
                let kept_for_nets = run.checkpoints.len() - p.keep_checkpoints - names.len();
                p.remove.push(Removal {
                    item: run.id.to_string(),
                    kind: RemovalKind::Checkpoints,
                    keys,
                    bytes,
                    why: format!(
                        "{} of {} checkpoints (keeping the last {}{})",
                        names.len(),
                        run.checkpoints.len(),
                        p.keep_checkpoints,
                        if kept_for_nets > 0 {
                            format!(", and {kept_for_nets} that registered nets came from")
                        } else {
                            String::new()
                        }
                    ),
                });
            }
        }
    }
    let runs = crate::nets::list_runs(lake).await?;
    for sh in crate::shuffle::list_shuffles(lake).await? {
        if let Some(days) = policy.unused_shuffle_days {
            // Last used: made, or the newest run trained on it.
            let last = runs
                .iter()
                .filter(|r| r.spec.shuffle == sh.id)
                .map(|r| r.updated.as_str())
                .chain([sh.created.as_str()])
                .max()
                .unwrap_or_default()
                .to_string();
            let unfinished = runs.iter().find(|r| r.spec.shuffle == sh.id && !r.finished);
            if let Some(r) = unfinished.filter(|_| older_than(&last, days)) {
                p.kept.push(Kept {
                    item: sh.id.to_string(),
                    why: format!("unused for {days} days but run {} on it is not finished (a resume needs it)", r.id),
                });
            } else if older_than(&last, days) {
                let target = crate::remove::RmTarget::Shuffle(sh.id.clone());
                let rm = crate::remove::plan(lake, jobs, &target).await?;
                match rm
                    .dependents
                    .iter()
                    .find(|d| d.blocking || d.what.starts_with("registered net"))
                {
                    Some(d) => p.kept.push(Kept {
                        item: sh.id.to_string(),
                        why: format!("unused for {days} days but needed by {}", d.what),
                    }),
                    None => {
                        p.remove.push(Removal {
                            item: sh.id.to_string(),
                            kind: RemovalKind::Shuffle,
                            why: format!("unused since {last} (over {days} days)"),
                            keys: rm.keys,
                            bytes: rm.bytes,
                        });
                        // Its pass-1 files go with it.
                        continue;
                    }
                }
            }
        }
        let mut keys = Vec::new();
        let mut bytes = 0;
        for dir in ["_deal", "_dealt"] {
            for o in lake.list(&format!("shuffled/{}/{dir}", sh.id)).await? {
                bytes += o.size;
                keys.push(o.location.to_string());
            }
        }
        if !keys.is_empty() {
            p.remove.push(Removal {
                item: sh.id.to_string(),
                kind: RemovalKind::PassFiles,
                why: format!("{} pass-1 files of a committed shuffle", keys.len()),
                keys,
                bytes,
            });
        }
    }
    for claim in lakefish_lake::datasets::list_claims(lake).await? {
        let name = format!("{}/{}", claim.source, claim.name);
        if !past_lease(&claim.claim) {
            continue;
        }
        let claim_key = format!(
            "{}/{}",
            lakefish_schemas::positions::dataset_prefix(claim.source, &claim.name),
            lakefish_lake::datasets::WRITER_FILE
        );
        if lakefish_lake::datasets::read_manifest(lake, claim.source, &claim.name)
            .await?
            .is_some()
        {
            // Committed, and its writer died before releasing the claim: only that goes.
            let bytes = lake.size(&claim_key).await?.unwrap_or(0);
            p.remove.push(Removal {
                item: name,
                kind: RemovalKind::LeftoverClaim,
                why: format!(
                    "the claim job {} left on a committed dataset",
                    claim.claim.job
                ),
                keys: vec![claim_key],
                bytes,
            });
            continue;
        }
        let target = crate::remove::RmTarget::Dataset(claim.source, claim.name.clone());
        if let Some(why) = named_by_work(&target, &active) {
            p.kept.push(Kept { item: name, why });
            continue;
        }
        let (keys, bytes) = attempt_keys(lake, claim.source, &claim.name).await?;
        p.remove.push(Removal {
            item: name,
            kind: RemovalKind::FailedIngest,
            why: format!(
                "{} objects of an ingest never committed (job {}'s claim expired {})",
                keys.len(),
                claim.claim.job,
                claim.claim.expires
            ),
            keys,
            bytes,
        });
    }
    p.bytes = p.remove.iter().map(|r| r.bytes).sum();
    p.objects = p.remove.iter().map(|r| r.keys.len() as u64).sum();
    Ok(p)
}

/// Removes what `plan` listed, checking each item again first; `by` signs tombstones.
pub async fn apply(
    lake: &Lake,
    jobs: &JobStore,
    plan: &GcPlan,
    by: &str,
) -> Result<GcReport, JobError> {
    let mut report = GcReport {
        removed_objects: 0,
        removed_bytes: 0,
        skipped: Vec::new(),
    };
    let registered = registered_steps(lake).await?;
    let none = BTreeSet::new();
    for r in &plan.remove {
        match r.kind {
            RemovalKind::Checkpoints => {
                let Ok(id) = RunId::new(&r.item) else {
                    continue;
                };
                // Again, now: a job may have been queued, or the run resumed, since the plan.
                let active = active_specs(lake, jobs).await?;
                let Some(run) = crate::nets::read_run(lake, &id).await? else {
                    continue;
                };
                let steps = registered.get(id.as_str()).unwrap_or(&none);
                let now = match run_removals(
                    &run,
                    GcPolicy {
                        keep_checkpoints: plan.keep_checkpoints,
                        unused_shuffle_days: None,
                    },
                    steps,
                    &active,
                ) {
                    Ok(names) => names,
                    Err(why) => {
                        report.skipped.push(Kept {
                            item: r.item.clone(),
                            why,
                        });
                        continue;
                    }
                };
                let keys: Vec<String> = now.iter().map(|n| checkpoint_key(&id, n)).collect();
                if keys.iter().any(|k| !r.keys.contains(k)) {
                    report.skipped.push(Kept {
                        item: r.item.clone(),
                        why: "changed since the plan: run gc again".into(),
                    });
                    continue;
                }
                let mut bytes = 0;
                for k in &keys {
                    bytes += lake.size(k).await?.unwrap_or(0);
                }
                lake.delete_many(keys.clone()).await?;
                report.removed_objects += keys.len() as u64;
                report.removed_bytes += bytes;
                let mut record = run.clone();
                record.checkpoints.retain(|c| !now.contains(c));
                lake.put(
                    &format!("runs/{id}/{}", lakefish_schemas::train::RUN_FILE),
                    serde_json::to_vec_pretty(&record)?,
                )
                .await?;
                crate::nets::index_run(lake, &record).await?;
            }
            RemovalKind::Shuffle => {
                // A whole shuffle: checked and removed as `rm` does, leaving a tombstone.
                let target =
                    crate::remove::RmTarget::Shuffle(r.item.parse().map_err(
                        |e: lakefish_schemas::NameError| JobError::Internal(e.to_string()),
                    )?);
                let rm = crate::remove::plan(lake, jobs, &target).await?;
                if let Some(d) = rm
                    .dependents
                    .iter()
                    .find(|d| d.blocking || d.what.starts_with("registered net"))
                {
                    report.skipped.push(Kept {
                        item: r.item.clone(),
                        why: format!("needed by {} since the plan", d.what),
                    });
                    continue;
                }
                let unfinished = crate::nets::list_runs(lake)
                    .await?
                    .into_iter()
                    .find(|x| x.spec.shuffle.as_str() == r.item && !x.finished);
                if let Some(x) = unfinished {
                    report.skipped.push(Kept {
                        item: r.item.clone(),
                        why: format!("run {} on it is not finished", x.id),
                    });
                    continue;
                }
                crate::remove::apply(lake, jobs, &target, &rm, true, by).await?;
                report.removed_objects += rm.keys.len() as u64;
                report.removed_bytes += rm.bytes;
            }
            RemovalKind::PassFiles => {
                lake.delete_many(r.keys.clone()).await?;
                report.removed_objects += r.keys.len() as u64;
                report.removed_bytes += r.bytes;
                lakefish_lake::space::measure(
                    lake,
                    lakefish_lake::catalog::CatalogKind::Shuffle,
                    &r.item,
                )
                .await?;
            }
            RemovalKind::LeftoverClaim => {
                // Still past its lease (no writer took it since): gone.
                let key = &r.keys[0];
                match lake.get_versioned(key).await? {
                    Some((bytes, version))
                        if past_lease(&lakefish_lake::datasets::WriterClaim::parse(&bytes)) =>
                    {
                        lake.delete_if_unchanged(key, &version).await?;
                        report.removed_objects += 1;
                        report.removed_bytes += r.bytes;
                    }
                    _ => report.skipped.push(Kept {
                        item: r.item.clone(),
                        why: "claimed again since the plan".into(),
                    }),
                }
            }
            RemovalKind::FailedIngest => match remove_failed_ingest(lake, jobs, &r.item).await? {
                Some((objects, bytes)) => {
                    report.removed_objects += objects;
                    report.removed_bytes += bytes;
                }
                None => report.skipped.push(Kept {
                    item: r.item.clone(),
                    why: "committed, claimed again or named by a job since the plan".into(),
                }),
            },
        }
    }
    Ok(report)
}

/// True when RFC 3339 time `t` is more than `days` days ago (an unreadable time is not).
fn older_than(t: &str, days: u32) -> bool {
    chrono::DateTime::parse_from_rfc3339(t).is_ok_and(|t| {
        chrono::Utc::now().signed_duration_since(t) > chrono::Duration::days(i64::from(days))
    })
}

/// The last collection, as `/ui/space` shows it (`gc/last.json`).
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct GcRecord {
    pub at: String,
    pub by: String,
    pub removed_bytes: u64,
    pub removed_objects: u64,
    /// One line per item removed, kept or skipped.
    pub lines: Vec<String>,
}

pub const LAST_KEY: &str = "gc/last.json";

/// Plans, applies and records one collection under `policy`.
pub async fn collect(
    lake: &Lake,
    jobs: &JobStore,
    policy: GcPolicy,
    by: &str,
) -> Result<GcRecord, JobError> {
    let plan = plan(lake, jobs, policy).await?;
    let report = apply(lake, jobs, &plan, by).await?;
    record(lake, &plan, &report, by).await
}

/// Stores what an applied plan did as the last collection.
pub async fn record(
    lake: &Lake,
    plan: &GcPlan,
    report: &GcReport,
    by: &str,
) -> Result<GcRecord, JobError> {
    let mut lines: Vec<String> = plan
        .remove
        .iter()
        .filter(|r| !report.skipped.iter().any(|k| k.item == r.item))
        .map(|r| format!("{}: removed {}", r.item, r.why))
        .collect();
    lines.extend(
        plan.kept
            .iter()
            .map(|k| format!("{}: kept, {}", k.item, k.why)),
    );
    lines.extend(
        report
            .skipped
            .iter()
            .map(|k| format!("{}: skipped, {}", k.item, k.why)),
    );
    let record = GcRecord {
        at: lakefish_lake::records::now(),
        by: by.to_string(),
        removed_bytes: report.removed_bytes,
        removed_objects: report.removed_objects,
        lines,
    };
    lake.put(LAST_KEY, serde_json::to_vec_pretty(&record)?)
        .await?;
    Ok(record)
}

pub async fn last(lake: &Lake) -> Result<Option<GcRecord>, JobError> {
    lake.get_json(LAST_KEY, "gc record").await
}
