//! Deletion with lineage kept safe (issue 45): `lakefish rm KIND NAME`.
//!
//! [`plan`] lists what would go (keys, bytes) and what still needs the item: registered nets
//! whose lineage names it (the best net among them), shuffles made from a dataset, runs
//! trained on a shuffle, experiments that rated a run, running pipeline runs, running tests,
//! and queued or running jobs. [`apply`] refuses while anything needs it, naming each
//! dependent; `force` removes anyway, except under a queued or running job or a running test
//! (cancel or stop it first: a job must never read half of what it opened).
//!
//! Every removal leaves a tombstone, `tombstones/<kind>/<name>.json` (what, when, by whom,
//! what still named it), so lineage shows the item as deleted rather than a dangling link.
//! The item's commit marker goes first (manifest, run record, games), then the rest: a reader
//! that starts meanwhile finds no item, one already reading fails naming the missing file.

use lakefish_lake::records::JobStore;
use lakefish_schemas::names::{RunId, ShuffleId, SprtId};
use lakefish_schemas::{DatasetName, MaskName, Source};

use crate::{JobError, Lake};

/// What `rm` removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RmTarget {
    /// A committed dataset with its games (PGN sources), masks and profile.
    Dataset(Source, DatasetName),
    /// One committed mask of a dataset (`MASK@[SOURCE/]DATASET`).
    Mask(MaskName, Source, DatasetName),
    Shuffle(ShuffleId),
    /// A run: record, checkpoints, metrics, the nets quantized from it (not registered ones).
    Run(RunId),
    /// One checkpoint of a run (`RUN/STEP`).
    Checkpoint(RunId, u64),
    /// A finished test's games and batches; its result stays.
    Games(SprtId),
}

impl RmTarget {
    /// `KIND NAME` as the command line gives them.
    pub fn parse(kind: &str, name: &str) -> Result<RmTarget, String> {
        let bad = |e: String| format!("{kind} {name:?}: {e}");
        Ok(match kind {
            "dataset" => {
                let r = lakefish_schemas::shuffle::DatasetRef::parse(name, Source::Binpack)
                    .map_err(bad)?;
                RmTarget::Dataset(r.source, r.dataset)
            }
            "mask" => {
                let (mask, dataset) = name.split_once('@').ok_or_else(|| {
                    bad("MASK@[SOURCE/]DATASET, e.g. quiet@binpack/sf-2024-01".into())
                })?;
                let r = lakefish_schemas::shuffle::DatasetRef::parse(dataset, Source::Binpack)
                    .map_err(bad)?;
                RmTarget::Mask(
                    MaskName::new(mask).map_err(|e| bad(e.to_string()))?,
                    r.source,
                    r.dataset,
                )
            }
            "shuffle" => RmTarget::Shuffle(
                name.parse()
                    .map_err(|e: lakefish_schemas::NameError| bad(e.to_string()))?,
            ),
            "run" => RmTarget::Run(RunId::new(name).map_err(|e| bad(e.to_string()))?),
            "checkpoint" => {
                let (run, step) = name
                    .split_once('/')
                    .ok_or_else(|| bad("RUN/STEP, e.g. run-0123456789ab/400".into()))?;
                RmTarget::Checkpoint(
                    RunId::new(run).map_err(|e| bad(e.to_string()))?,
                    step.parse().map_err(|_| bad(format!("step {step:?}")))?,
                )
            }
            "games" => RmTarget::Games(
                name.parse()
                    .map_err(|e: lakefish_schemas::NameError| bad(e.to_string()))?,
            ),
            other => {
                return Err(format!(
                    "unknown kind {other:?}: dataset, mask, shuffle, run, checkpoint or games"
                ));
            }
        })
    }

    pub fn kind(&self) -> &'static str {
        match self {
            RmTarget::Dataset(..) => "dataset",
            RmTarget::Mask(..) => "mask",
            RmTarget::Shuffle(_) => "shuffle",
            RmTarget::Run(_) => "run",
            RmTarget::Checkpoint(..) => "checkpoint",
            RmTarget::Games(_) => "games",
        }
    }

    pub fn name(&self) -> String {
        match self {
            RmTarget::Dataset(s, d) => format!("{s}/{d}"),
            RmTarget::Mask(m, s, d) => format!("{m}@{s}/{d}"),
            RmTarget::Shuffle(id) => id.to_string(),
            RmTarget::Run(id) => id.to_string(),
            RmTarget::Checkpoint(run, step) => format!("{run}/{step}"),
            RmTarget::Games(id) => id.to_string(),
        }
    }

    /// Whether the text of another record (a job spec, a plan, a pipeline run) names the
    /// item, so that it may read it (over-matching only ever refuses more).
    pub(crate) fn named_in(&self, text: &str) -> bool {
        let dataset = |s: &Source, d: &DatasetName| {
            text.contains(&format!("\"{d}\"")) || text.contains(&format!("{s}/{d}"))
        };
        match self {
            RmTarget::Dataset(s, d) => dataset(s, d),
            RmTarget::Mask(m, s, d) => text.contains(&format!("\"{m}\"")) && dataset(s, d),
            RmTarget::Checkpoint(run, _) => text.contains(run.as_str()),
            _ => text.contains(&self.name()),
        }
    }
}

/// Something that still needs the item.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct Dependent {
    pub what: String,
    /// True when even `--force` does not remove under it (a job or test at work).
    pub blocking: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct RmPlan {
    pub kind: String,
    pub name: String,
    /// The commit marker first.
    pub keys: Vec<String>,
    pub bytes: u64,
    pub dependents: Vec<Dependent>,
}

/// `tombstones/<kind>/<name>.json`.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct Tombstone {
    pub kind: String,
    pub name: String,
    pub deleted: String,
    pub by: String,
    pub bytes: u64,
    pub objects: u64,
    /// What still named it when it was removed with `--force`.
    pub dependents: Vec<String>,
}

pub fn tombstone_key(kind: &str, name: &str) -> String {
    format!("tombstones/{kind}/{name}.json")
}

/// The tombstone of an item, if it was removed.
pub async fn tombstone(lake: &Lake, kind: &str, name: &str) -> Result<Option<Tombstone>, JobError> {
    lake.get_json(&tombstone_key(kind, name), "tombstone").await
}

/// Every tombstone, newest first.
pub async fn tombstones(lake: &Lake) -> Result<Vec<Tombstone>, JobError> {
    let mut out = Vec::new();
    for o in lake.list("tombstones").await? {
        if let Some(t) = lake
            .get_json::<Tombstone>(o.location.as_ref(), "tombstone")
            .await?
        {
            out.push(t);
        }
    }
    out.sort_by(|a, b| b.deleted.cmp(&a.deleted));
    Ok(out)
}

/// The tombstones of what a registered net's lineage names (its run, checkpoint, shuffle,
/// datasets), for pages that show the lineage.
pub async fn lineage_tombstones(
    lake: &Lake,
    net: &lakefish_schemas::NetManifest,
) -> Result<Vec<Tombstone>, JobError> {
    let mut wanted = vec![
        ("run", net.run.clone()),
        ("checkpoint", format!("{}/{}", net.run, net.step)),
        ("shuffle", net.shuffle.clone()),
    ];
    wanted.extend(net.datasets.iter().map(|d| ("dataset", d.clone())));
    if !net.mask.is_empty() {
        wanted.extend(
            net.datasets
                .iter()
                .map(|d| ("mask", format!("{}@{d}", net.mask))),
        );
    }
    let mut out = Vec::new();
    for (kind, name) in wanted {
        if !name.is_empty()
            && let Some(t) = tombstone(lake, kind, &name).await?
            && !exists_again(lake, kind, &name).await?
        {
            out.push(t);
        }
    }
    Ok(out)
}

/// Whether an item with a tombstone was made again since (a shuffle's id is a function of its
/// spec, a dataset's name is the user's): then the tombstone no longer describes it.
async fn exists_again(lake: &Lake, kind: &str, name: &str) -> Result<bool, JobError> {
    Ok(match RmTarget::parse(kind, name) {
        Ok(RmTarget::Dataset(s, d)) => lakefish_lake::datasets::read_manifest(lake, s, &d)
            .await?
            .is_some(),
        Ok(RmTarget::Shuffle(id)) => crate::shuffle::read_shuffle_manifest(lake, &id)
            .await?
            .is_some(),
        Ok(RmTarget::Mask(m, s, d)) => crate::masks::read_mask_manifest(lake, &m, s, &d)
            .await?
            .is_some(),
        Ok(RmTarget::Run(id)) => crate::nets::read_run(lake, &id).await?.is_some(),
        Ok(RmTarget::Checkpoint(id, step)) => crate::nets::read_run(lake, &id)
            .await?
            .is_some_and(|r| r.checkpoints.contains(&format!("step-{step:09}.ot"))),
        _ => false,
    })
}

/// Work under way, each with the text of what it reads: queued and running jobs (a task's
/// plan included: a shuffle pass or an export part names only its plan; a training job the
/// run it writes), shuffles planned and not committed, and running pipeline runs.
pub async fn work_in_progress(
    lake: &Lake,
    jobs: &JobStore,
) -> Result<Vec<(String, String)>, JobError> {
    use lakefish_schemas::{JobKind, JobSpec, JobState};
    let mut out = Vec::new();
    for state in [JobState::Queued, JobState::Running] {
        let mut query = lakefish_lake::records::JobQuery {
            state: Some(state),
            limit: 1000,
            ..Default::default()
        };
        loop {
            let page = jobs.page(&query).await?;
            for rec in &page.jobs {
                let mut text = serde_json::to_string(&rec.spec)?;
                match &rec.spec {
                    JobSpec::ShuffleDeal(t) | JobSpec::ShufflePile(t) => {
                        if let Some(p) = crate::shuffle::read_plan(lake, &t.shuffle).await? {
                            text.push_str(&serde_json::to_string(&p.spec)?);
                        }
                    }
                    JobSpec::ExportPart(t) => {
                        if let Some(p) = crate::export::read_export_plan(lake, &t.export).await? {
                            text.push_str(&serde_json::to_string(&p.spec)?);
                        }
                    }
                    _ => {}
                }
                if rec.kind == JobKind::Train {
                    // A new run's id is the job id's last 12 hex digits (train.rs).
                    let id = rec.id.to_string();
                    text.push_str(&format!(" run-{}", &id[id.len().saturating_sub(12)..]));
                }
                out.push((
                    format!("{} job {} ({})", state.as_str(), rec.id, rec.kind),
                    text,
                ));
            }
            match page.next {
                Some(next) => query.after = Some(next),
                None => break,
            }
        }
    }
    for dir in lake.list_dirs("shuffled").await? {
        let id = dir
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_string();
        let Ok(id) = ShuffleId::new(&id) else {
            continue;
        };
        if crate::shuffle::read_shuffle_manifest(lake, &id)
            .await?
            .is_none()
            && let Some(p) = crate::shuffle::read_plan(lake, &id).await?
        {
            out.push((
                format!("shuffle {id} (planned, not committed)"),
                serde_json::to_string(&p.spec)?,
            ));
        }
    }
    for p in lake
        .list_dirs(lakefish_schemas::pipeline::PIPELINES_PREFIX)
        .await?
    {
        let name = p
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_string();
        for r in crate::pipeline::list_runs(lake, &name, 50).await? {
            if r.state == lakefish_schemas::pipeline::RunState::Running {
                out.push((
                    format!("running pipeline run {}", r.id),
                    serde_json::to_string(&r)?,
                ));
            }
        }
    }
    Ok(out)
}

/// A run not finished, not failed and written to lately may be training right now (a local
/// `lakefish train` keeps no job record; it writes its record at every checkpoint).
fn maybe_training(run: &lakefish_schemas::RunRecord) -> bool {
    !run.finished
        && run.error.is_none()
        && chrono::DateTime::parse_from_rfc3339(&run.updated).is_ok_and(|t| {
            chrono::Utc::now().signed_duration_since(t) < chrono::Duration::minutes(30)
        })
}

/// Whether a shuffle was made from the dataset (among its datasets or the extra ones).
fn made_from(
    sh: &lakefish_schemas::ShuffleManifest,
    source: Source,
    dataset: &DatasetName,
) -> bool {
    (sh.source == source && sh.datasets.contains(dataset))
        || sh
            .extra
            .iter()
            .any(|r| r.source == source && &r.dataset == dataset)
}

/// Every object under `prefix`, with `first` (the commit marker) moved to the front.
async fn keys_under(
    lake: &Lake,
    prefix: &str,
    first: &str,
) -> Result<(Vec<String>, u64), JobError> {
    let mut keys = Vec::new();
    let mut bytes = 0;
    for o in lake.list(prefix).await? {
        bytes += o.size;
        keys.push(o.location.to_string());
    }
    if let Some(i) = keys.iter().position(|k| k == first) {
        let k = keys.remove(i);
        keys.insert(0, k);
    }
    Ok((keys, bytes))
}

/// What removing `target` would remove, and what needs it.
pub async fn plan(lake: &Lake, jobs: &JobStore, target: &RmTarget) -> Result<RmPlan, JobError> {
    let stone = tombstone(lake, target.kind(), &target.name()).await?;
    let missing = || JobError::Input {
        input: format!("{} {}", target.kind(), target.name()),
        reason: match &stone {
            Some(t) => format!("removed {} by {}", t.deleted, t.by),
            None => "no such item in the lake".into(),
        },
    };
    let mut deps: Vec<Dependent> = Vec::new();
    let mut need = |what: String, blocking: bool| deps.push(Dependent { what, blocking });
    let nets = crate::nets::list_nets(lake).await?;
    let best = crate::nets::read_best(lake).await?.map(|b| b.name);
    let net_label = |n: &lakefish_schemas::NetManifest| {
        if best.as_deref() == Some(n.name.trim_end_matches(".nnue"))
            || best.as_deref() == Some(n.name.as_str())
        {
            format!("registered net {} (the best net)", n.name)
        } else {
            format!("registered net {}", n.name)
        }
    };
    let (keys, bytes) = match target {
        RmTarget::Dataset(source, dataset) => {
            if lakefish_lake::datasets::read_manifest(lake, *source, dataset)
                .await?
                .is_none()
            {
                return Err(missing());
            }
            let full = format!("{source}/{dataset}");
            for sh in crate::shuffle::list_shuffles(lake).await? {
                if made_from(&sh, *source, dataset) {
                    need(format!("shuffle {}", sh.id), false);
                }
            }
            for n in nets.iter().filter(|n| n.datasets.contains(&full)) {
                need(net_label(n), false);
            }
            for d in lakefish_lake::datasets::list_datasets(lake).await? {
                if d.derived_from
                    .as_deref()
                    .is_some_and(|f| f.ends_with(&format!(" of {full}")))
                {
                    need(
                        format!("dataset {}/{} (made from it)", d.source, d.name),
                        false,
                    );
                }
            }
            let prefix = lakefish_schemas::positions::dataset_prefix(*source, dataset);
            let (mut keys, mut bytes) = keys_under(
                lake,
                &prefix,
                &lakefish_lake::datasets::manifest_key(*source, dataset),
            )
            .await?;
            for m in lake.list_dirs("masks").await? {
                let (k, b) = keys_under(
                    lake,
                    &format!(
                        "{}/source={source}/dataset={dataset}",
                        m.trim_end_matches('/')
                    ),
                    "",
                )
                .await?;
                keys.extend(k);
                bytes += b;
            }
            for p in [
                format!("profiles/source={source}/dataset={dataset}"),
                lakefish_schemas::games::games_prefix(*source, dataset),
            ] {
                let (k, b) = keys_under(lake, &p, "").await?;
                keys.extend(k);
                bytes += b;
            }
            (keys, bytes)
        }
        RmTarget::Mask(mask, source, dataset) => {
            if crate::masks::read_mask_manifest(lake, mask, *source, dataset)
                .await?
                .is_none()
            {
                return Err(missing());
            }
            let full = format!("{source}/{dataset}");
            for sh in crate::shuffle::list_shuffles(lake).await? {
                if made_from(&sh, *source, dataset) && &sh.mask == mask {
                    need(format!("shuffle {} (made through it)", sh.id), false);
                }
            }
            for n in nets
                .iter()
                .filter(|n| n.datasets.contains(&full) && n.mask == mask.as_str())
            {
                need(net_label(n), false);
            }
            let prefix = lakefish_schemas::mask::mask_prefix(mask, *source, dataset);
            keys_under(
                lake,
                &prefix,
                &format!("{prefix}/{}", lakefish_schemas::mask::MASK_MANIFEST_FILE),
            )
            .await?
        }
        RmTarget::Shuffle(id) => {
            if !crate::shuffle::list_shuffles(lake)
                .await?
                .iter()
                .any(|s| &s.id == id)
            {
                return Err(missing());
            }
            for r in crate::nets::list_runs(lake).await? {
                if &r.spec.shuffle == id && maybe_training(&r) {
                    need(
                        format!(
                            "run {} on it is not finished and was written in the last 30 minutes (it may be training)",
                            r.id
                        ),
                        true,
                    );
                } else if &r.spec.shuffle == id {
                    need(format!("run {} (trained on it)", r.id), false);
                }
            }
            for n in nets.iter().filter(|n| n.shuffle == id.as_str()) {
                need(net_label(n), false);
            }
            keys_under(
                lake,
                &format!("shuffled/{id}"),
                &format!("shuffled/{id}/_manifest.json"),
            )
            .await?
        }
        RmTarget::Run(id) => {
            let run = crate::nets::read_run(lake, id).await?.ok_or_else(missing)?;
            for n in nets.iter().filter(|n| n.run == id.as_str()) {
                need(net_label(n), false);
            }
            for e in crate::experiment::list(lake).await? {
                if serde_json::to_string(&e)?.contains(id.as_str()) {
                    need(format!("experiment {}", e.id), false);
                }
            }
            if maybe_training(&run) {
                need(
                    format!(
                        "run {id} is not finished and was written in the last 30 minutes (it may be training)"
                    ),
                    true,
                );
            } else if !run.finished {
                need(
                    format!("run {id} is not finished (a resume needs it)"),
                    false,
                );
            }
            keys_under(
                lake,
                &format!("runs/{id}"),
                &format!("runs/{id}/{}", lakefish_schemas::train::RUN_FILE),
            )
            .await?
        }
        RmTarget::Checkpoint(id, step) => {
            let run = crate::nets::read_run(lake, id).await?.ok_or_else(missing)?;
            let name = format!("step-{step:09}.ot");
            if !run.checkpoints.contains(&name) {
                return Err(missing());
            }
            for n in nets
                .iter()
                .filter(|n| n.run == id.as_str() && n.step == *step)
            {
                need(net_label(n), false);
            }
            if maybe_training(&run) {
                need(
                    format!(
                        "run {id} is not finished and was written in the last 30 minutes (it may be training)"
                    ),
                    true,
                );
            } else if !run.finished && run.checkpoints.last() == Some(&name) {
                need(
                    format!("run {id}: its last checkpoint, where a resume starts"),
                    false,
                );
            }
            let key = format!("runs/{id}/checkpoints/{name}");
            let bytes = lake.size(&key).await?.unwrap_or(0);
            (vec![key], bytes)
        }
        RmTarget::Games(id) => {
            let status = crate::sprt::status(lake, id).await?.ok_or_else(missing)?;
            if status.state == lakefish_schemas::sprt::SprtState::Running {
                need(format!("test {id} is running (stop it first)"), true);
            }
            let (mut keys, mut bytes) = keys_under(lake, &format!("sprt/{id}/batches"), "").await?;
            let pgn = format!("sprt/{id}/games.pgn");
            if let Some(n) = lake.size(&pgn).await? {
                keys.insert(0, pgn);
                bytes += n;
            }
            (keys, bytes)
        }
    };
    // At work: whatever is under way and names it.
    for (what, text) in work_in_progress(lake, jobs).await? {
        if target.named_in(&text) {
            need(what, true);
        }
    }
    Ok(RmPlan {
        kind: target.kind().into(),
        name: target.name(),
        keys,
        bytes,
        dependents: deps,
    })
}

/// Removes what `plan` lists, unless something needs it (with `force`: unless a job or test
/// is at work on it), leaving a tombstone signed `by`. The work under way is read again
/// first: a job started since the plan was shown refuses the removal as well.
pub async fn apply(
    lake: &Lake,
    jobs: &JobStore,
    target: &RmTarget,
    plan: &RmPlan,
    force: bool,
    by: &str,
) -> Result<Tombstone, JobError> {
    let named = |deps: Vec<&Dependent>| {
        deps.iter()
            .map(|d| d.what.clone())
            .collect::<Vec<_>>()
            .join("; ")
    };
    let since: Vec<Dependent> = work_in_progress(lake, jobs)
        .await?
        .into_iter()
        .filter(|(_, text)| target.named_in(text))
        .map(|(what, _)| Dependent {
            what: format!("{what}, started since the plan"),
            blocking: true,
        })
        .filter(|d| {
            // The same job, queued at the plan and running now, is not new.
            let unstated = |w: &str| {
                w.trim_start_matches("queued ")
                    .trim_start_matches("running ")
                    .split(", started since")
                    .next()
                    .unwrap_or_default()
                    .to_string()
            };
            !plan
                .dependents
                .iter()
                .any(|p| unstated(&d.what) == unstated(&p.what))
        })
        .collect();
    let blocking: Vec<&Dependent> = plan
        .dependents
        .iter()
        .chain(&since)
        .filter(|d| d.blocking)
        .collect();
    if !blocking.is_empty() {
        return Err(JobError::Input {
            input: format!("{} {}", plan.kind, plan.name),
            reason: format!(
                "in use by {} (not even --force removes under a job at work)",
                named(blocking)
            ),
        });
    }
    if !force && !plan.dependents.is_empty() {
        return Err(JobError::Input {
            input: format!("{} {}", plan.kind, plan.name),
            reason: format!(
                "needed by {} (--force removes it anyway and leaves a tombstone where they point)",
                named(plan.dependents.iter().collect())
            ),
        });
    }
    let stone = Tombstone {
        kind: plan.kind.clone(),
        name: plan.name.clone(),
        deleted: lakefish_lake::records::now(),
        by: by.to_string(),
        bytes: plan.bytes,
        objects: plan.keys.len() as u64,
        dependents: plan.dependents.iter().map(|d| d.what.clone()).collect(),
    };
    lake.put(
        &tombstone_key(&stone.kind, &stone.name),
        serde_json::to_vec_pretty(&stone)?,
    )
    .await?;
    // The commit marker first: from here on the item is gone for new readers.
    if let Some(first) = plan.keys.first() {
        lake.delete(first).await?;
    }
    lake.delete_many(plan.keys.iter().skip(1).cloned().collect())
        .await?;
    use lakefish_lake::catalog::CatalogKind;
    match target {
        RmTarget::Dataset(..) => {
            lake.unindex(CatalogKind::Dataset, &plan.name).await?;
        }
        RmTarget::Shuffle(id) => {
            lake.unindex(CatalogKind::Shuffle, id.as_str()).await?;
        }
        RmTarget::Run(id) => {
            lake.unindex(CatalogKind::Run, id.as_str()).await?;
        }
        RmTarget::Games(id) => {
            lakefish_lake::space::measure(lake, CatalogKind::Sprt, id.as_str()).await?;
        }
        // The dataset's entry lists its masks, ranked by their count (an upsert with fewer
        // never replaces it): replaced, and its space measured again.
        RmTarget::Mask(_, source, dataset) => {
            if let Some(c) = lake.catalog() {
                c.0.remove(CatalogKind::Dataset, &format!("{source}/{dataset}"))
                    .await?;
            }
            lakefish_lake::datasets::index_dataset(lake, *source, dataset).await?;
        }
        // The run's record is indexed again below.
        RmTarget::Checkpoint(..) => {}
    }
    if let RmTarget::Checkpoint(id, step) = target
        && let Some(mut run) = crate::nets::read_run(lake, id).await?
    {
        let name = format!("step-{step:09}.ot");
        run.checkpoints.retain(|c| c != &name);
        lake.put(
            &format!("runs/{id}/{}", lakefish_schemas::train::RUN_FILE),
            serde_json::to_vec_pretty(&run)?,
        )
        .await?;
        crate::nets::index_run(lake, &run).await?;
    }
    Ok(stone)
}
