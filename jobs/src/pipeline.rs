//! Pipeline runs, driven step by step. [`advance`] looks at a run's record and the lake,
//! queues the jobs the current step still needs (ids derived from the run, so a job is never
//! queued twice), and moves on once they are done. It keeps no state of its own: calling it
//! again, from a restarted process or another one, picks up where the record says.

use crate::{JobContext, JobError, Lake};
use lakefish_lake::catalog::{CatalogEntry, CatalogKind, CatalogQuery};
use lakefish_lake::datasets::{list_datasets, read_manifest};
use lakefish_lake::records::now;
use lakefish_schemas::config::{PipelineConfig, dataset_for_raw_file};
use lakefish_schemas::pipeline::{
    PIPELINES_PREFIX, PipelineRun, PipelineStep, RunState, StepJob, run_key,
};
use lakefish_schemas::shuffle::DatasetRef;
use lakefish_schemas::{
    DatasetName, IngestSpec, JobId, JobSpec, JobState, MaskSpec, RegisterSpec, ShuffleSpec, Source,
    SprtState,
};

/// What a step found.
enum Step {
    Done,
    Waiting,
    Failed(String),
}

fn stamp() -> String {
    chrono::Utc::now().format("%Y%m%dT%H%M%S").to_string()
}

/// Starts a run of `name`, unless one is running already (that one is returned instead).
pub async fn start_run(
    lake: &Lake,
    name: &str,
    trigger: &str,
) -> Result<(PipelineRun, bool), JobError> {
    if let Some(running) = list_runs(lake, name, 50)
        .await?
        .into_iter()
        .find(|r| r.state == RunState::Running)
    {
        return Ok((running, false));
    }
    let t = now();
    // The round is the number of runs before this one (a listing of keys, no reads).
    let earlier = match lake.catalog() {
        Some(catalog) => catalog.all(runs_of(name)).await?.len() as u64,
        None => lake
            .list(&format!("{PIPELINES_PREFIX}/{name}/runs"))
            .await?
            .iter()
            .filter(|m| m.location.as_ref().ends_with(".json"))
            .count() as u64,
    };
    let run = PipelineRun {
        id: format!("{name}-{}", stamp()),
        round: earlier,
        pipeline: name.to_string(),
        trigger: trigger.to_string(),
        state: RunState::Running,
        step: PipelineStep::ORDER[0],
        steps: Vec::new(),
        jobs: Vec::new(),
        datasets: Vec::new(),
        shuffle: None,
        train_run: None,
        checkpoint: None,
        net: None,
        base: None,
        sprt: None,
        sprt_state: None,
        promoted: false,
        error: None,
        created: t.clone(),
        updated: t,
        finished: None,
    };
    put_run(lake, &run).await?;
    tracing::info!(
        pipeline = name,
        run = run.id,
        trigger,
        "pipeline run started"
    );
    Ok((run, true))
}

async fn put_run(lake: &Lake, run: &PipelineRun) -> Result<(), JobError> {
    let bytes = serde_json::to_vec_pretty(run)?;
    lake.put(&run_key(&run.pipeline, &run.id), bytes).await?;
    index_run(lake, run).await
}

/// Records a pipeline run in the catalogue (after each write); later updates rank higher.
pub async fn index_run(lake: &Lake, run: &PipelineRun) -> Result<(), JobError> {
    let rank = chrono::DateTime::parse_from_rfc3339(&run.updated)
        .map(|t| t.timestamp_millis())
        .unwrap_or(0);
    let entry = CatalogEntry::of(
        CatalogKind::PipelineRun,
        format!("{}/{}", run.pipeline, run.id),
        &run.created,
        run,
    )
    .with_state(run.state.as_str())
    .with_links([run.pipeline.clone()])
    .with_rank(rank);
    lake.index(entry).await
}

/// The catalogue query for the runs of `pipeline`.
fn runs_of(pipeline: &str) -> CatalogQuery {
    let mut query = CatalogQuery::all(CatalogKind::PipelineRun);
    query.link = Some(pipeline.to_string());
    query
}

pub async fn read_run(
    lake: &Lake,
    pipeline: &str,
    id: &str,
) -> Result<Option<PipelineRun>, JobError> {
    lake.get_json(&run_key(pipeline, id), "pipeline run").await
}

/// Runs of a pipeline, newest first (ids sort by time); from the catalogue when the lake
/// has one.
pub async fn list_runs(
    lake: &Lake,
    pipeline: &str,
    limit: usize,
) -> Result<Vec<PipelineRun>, JobError> {
    if let Some(catalog) = lake.catalog() {
        let mut query = runs_of(pipeline);
        query.limit = limit.clamp(1, lakefish_lake::catalog::CATALOG_PAGE);
        let page = catalog.0.page(&query).await?;
        return page.entries.iter().map(|e| e.decode()).collect();
    }
    let mut metas = lake
        .list(&format!("{PIPELINES_PREFIX}/{pipeline}/runs"))
        .await?;
    metas.retain(|m| m.location.as_ref().ends_with(".json"));
    metas.sort_by(|a, b| b.location.as_ref().cmp(a.location.as_ref()));
    let mut out = Vec::new();
    for m in metas.into_iter().take(limit) {
        if let Some(r) = lake
            .get_json::<PipelineRun>(m.location.as_ref(), "pipeline run")
            .await?
        {
            out.push(r);
        }
    }
    Ok(out)
}

/// Moves a running run as far as it can go now, and saves it. Blocking (uses `ctx.block_on`).
pub fn advance(
    ctx: &JobContext,
    config: &PipelineConfig,
    run: &mut PipelineRun,
) -> Result<(), JobError> {
    if run.state != RunState::Running {
        return Ok(());
    }
    let before = run.clone();
    loop {
        run.begin_step(&now());
        let outcome = match run.step {
            PipelineStep::Datagen => datagen(ctx, config, run),
            PipelineStep::Ingest => ingest(ctx, config, run),
            PipelineStep::Mask => mask(ctx, config, run),
            PipelineStep::Shuffle => shuffle(ctx, config, run),
            PipelineStep::Train => train(ctx, config, run),
            PipelineStep::Quantize => quantize(ctx, config, run),
            PipelineStep::Register => register(ctx, run),
            PipelineStep::Sprt => sprt(ctx, config, run),
            PipelineStep::Done => Err(JobError::Internal(
                "a running pipeline run has no step left".into(),
            )),
        };
        let outcome = match outcome {
            Ok(o) => o,
            // Bad configuration or input is final; the lake being away is retried next time.
            Err(e) if e.is_transient() => return Err(e),
            Err(e) => Step::Failed(e.to_string()),
        };
        match outcome {
            Step::Waiting => break,
            Step::Failed(reason) => {
                tracing::warn!(
                    run = run.id,
                    step = run.step.as_str(),
                    "pipeline run failed: {reason}"
                );
                run.error = Some(format!("step {} failed: {reason}", run.step));
                run.state = RunState::Failed;
                let t = now();
                run.end_step(&t);
                run.finished = Some(t);
                break;
            }
            Step::Done => {
                // A step that found its output already made (its job ended between two
                // looks) did not ask after that job again: the record says how it ended.
                let step = run.step;
                for j in run.jobs.iter_mut() {
                    if j.step == step
                        && !j.state.is_final()
                        && let Some(rec) = ctx.block_on(ctx.jobs.get(&j.job))?
                    {
                        j.state = rec.state;
                    }
                }
                run.end_step(&now());
                run.step = run.step.next();
                if run.step == PipelineStep::Done {
                    run.state = RunState::Succeeded;
                    run.finished = Some(now());
                    tracing::info!(
                        run = run.id,
                        promoted = run.promoted,
                        "pipeline run succeeded"
                    );
                    break;
                }
            }
        }
    }
    if *run != before {
        run.updated = now();
        ctx.block_on(put_run(&ctx.lake, run))?;
    }
    Ok(())
}

/// Queues the job for (`step`, `target`) of this run unless it exists, and returns its state.
fn ensure_job(
    ctx: &JobContext,
    run: &mut PipelineRun,
    step: PipelineStep,
    target: &str,
    spec: JobSpec,
) -> Result<(JobState, Option<serde_json::Value>, Option<String>), JobError> {
    let id = JobId::derived(&format!("pipeline/{}/{step}/{target}", run.id));
    let store = &ctx.jobs;
    let (state, result, error) = match ctx.block_on(store.get(&id))? {
        Some(rec) => (rec.state, rec.result, rec.error),
        None => {
            let submit = ctx.submitter("a pipeline")?;
            let kind = spec.kind().to_string();
            submit.submit(id.clone(), spec)?;
            run.jobs.push(StepJob {
                step,
                job: id.clone(),
                kind,
                target: target.into(),
                state: JobState::Queued,
            });
            (JobState::Queued, None, None)
        }
    };
    if let Some(j) = run.jobs.iter_mut().find(|j| j.job == id) {
        j.state = state;
    }
    Ok((state, result, error))
}

/// Folds the states of a step's jobs: any failure fails it, all successes finish it.
fn all_done(states: &[(JobState, Option<String>, String)]) -> Step {
    if let Some((_, err, target)) = states.iter().find(|(s, _, _)| s.ended_without_result()) {
        return Step::Failed(format!("{target}: {}", err.as_deref().unwrap_or("failed")));
    }
    if states.iter().all(|(s, _, _)| *s == JobState::Succeeded) {
        Step::Done
    } else {
        Step::Waiting
    }
}

/// A step with one job: its result once it succeeded, or the step's state until then.
fn one_job(
    ctx: &JobContext,
    run: &mut PipelineRun,
    step: PipelineStep,
    target: &str,
    spec: JobSpec,
) -> Result<Result<serde_json::Value, Step>, JobError> {
    let (state, result, err) = ensure_job(ctx, run, step, target, spec)?;
    Ok(match all_done(&[(state, err, target.to_string())]) {
        Step::Done => Ok(result.unwrap_or_default()),
        other => Err(other),
    })
}

fn selfplay_prefix(pipeline: &str) -> String {
    format!("{}-sp-", &pipeline[..pipeline.len().min(32)])
}

fn datagen(
    ctx: &JobContext,
    config: &PipelineConfig,
    run: &mut PipelineRun,
) -> Result<Step, JobError> {
    let stamp = run
        .id
        .rsplit('-')
        .next()
        .unwrap_or("run")
        .to_ascii_lowercase();
    let dataset = DatasetName::new(&format!("{}{stamp}", selfplay_prefix(&run.pipeline)))?;
    let Some(spec) = config.datagen_spec(&dataset) else {
        return Ok(Step::Done);
    };
    let mut spec = spec.map_err(JobError::Payload)?;
    spec.seed = round_seed(spec.seed, run.round);
    Ok(
        match one_job(
            ctx,
            run,
            PipelineStep::Datagen,
            dataset.as_str(),
            JobSpec::Datagen(spec),
        )? {
            Ok(_) => Step::Done,
            Err(step) => step,
        },
    )
}

/// The datagen seed of round `round` of a pipeline: the configured seed for the first, then
/// mixed with the round number, so each round plays other openings (with one seed every
/// round would replay the same games' starts) and a lake's history replays the same way.
pub fn round_seed(seed: u64, round: u64) -> u64 {
    if round == 0 {
        return seed;
    }
    seed ^ lakefish_engine::random_games::splitmix64(round)
}

/// The dataset a raw file goes into, and whether it is ingested already. A raw file
/// replaced by a new version (`PUT ...?replace=true`) is another input: it goes into a
/// dataset of its own (`<name>.v<hash of the version>`), and only that one is trained on.
pub fn raw_dataset(
    ctx: &JobContext,
    source: lakefish_schemas::Source,
    key: &str,
) -> Result<(DatasetName, bool), JobError> {
    let base = dataset_for_raw_file(key);
    let Some((_, version)) = ctx.block_on(ctx.lake.head(key))? else {
        return Err(JobError::Retry(format!("{key} was deleted while listed")));
    };
    let version = lakefish_lake::input::lake_version(&version);
    let matches = |m: &lakefish_schemas::DatasetManifest| {
        m.inputs
            .iter()
            .all(|i| i.version.as_deref().is_none_or(|v| v == version))
    };
    match ctx.block_on(read_manifest(&ctx.lake, source, &base))? {
        None => return Ok((base, false)),
        Some(m) if matches(&m) => return Ok((base, true)),
        Some(_) => {}
    }
    let tag = &lakefish_schemas::config::token_sha256(&version)[..8];
    let name = DatasetName::new(&format!("{base}.v{tag}"))?;
    let done = ctx.block_on(read_manifest(&ctx.lake, source, &name))?;
    Ok((name, done.is_some()))
}

fn ingest(
    ctx: &JobContext,
    config: &PipelineConfig,
    run: &mut PipelineRun,
) -> Result<Step, JobError> {
    let mut states = Vec::new();
    let mut datasets = Vec::new();
    for input in &config.inputs {
        let mut keys: Vec<String> = ctx
            .block_on(ctx.lake.list(&input.prefix))?
            .into_iter()
            .map(|m| m.location.to_string())
            .filter(|k| !k.rsplit('/').next().unwrap_or("").starts_with('.'))
            .collect();
        keys.sort();
        for key in keys {
            let (dataset, ingested) = raw_dataset(ctx, input.source, &key)?;
            datasets.push(DatasetRef {
                source: input.source,
                dataset: dataset.clone(),
            });
            if ingested {
                continue; // ingested by an earlier run
            }
            let spec = IngestSpec {
                max_game_bytes: None,
                inputs: vec![format!("{}{key}", lakefish_lake::input::LAKE_PREFIX)],
                dataset,
                rows_per_part: lakefish_schemas::job::default_rows_per_part(),
            };
            let spec = match input.source {
                Source::Lichess => JobSpec::IngestPgn(spec),
                Source::Plain => JobSpec::IngestPlain(spec),
                Source::Bullet => JobSpec::IngestBullet(spec),
                Source::Binpack | Source::Selfplay => JobSpec::IngestBinpack(spec),
            };
            let (state, _, err) = ensure_job(ctx, run, PipelineStep::Ingest, &key, spec)?;
            states.push((state, err, key));
        }
    }
    // Self-play data of this pipeline's runs, this one's included.
    let prefix = selfplay_prefix(&run.pipeline);
    for d in ctx.block_on(list_datasets(&ctx.lake))? {
        if d.source == Source::Selfplay && d.name.as_str().starts_with(&prefix) {
            datasets.push(DatasetRef {
                source: d.source,
                dataset: d.name,
            });
        }
    }
    let step = all_done(&states);
    if matches!(step, Step::Done) {
        if datasets.is_empty() {
            return Ok(Step::Failed(
                "no data: no raw files under the inputs and no self-play".into(),
            ));
        }
        datasets
            .sort_by(|a, b| (a.source, a.dataset.as_str()).cmp(&(b.source, b.dataset.as_str())));
        run.datasets = datasets
            .iter()
            .map(|d| format!("{}/{}", d.source.as_str(), d.dataset))
            .collect();
    }
    Ok(step)
}

fn run_datasets(run: &PipelineRun) -> Result<Vec<DatasetRef>, JobError> {
    run.datasets
        .iter()
        .map(|s| {
            let (source, name) = s.split_once('/').unwrap_or(("", s));
            let source = Source::parse(source)
                .ok_or_else(|| JobError::Internal(format!("bad dataset entry {s}")))?;
            Ok(DatasetRef {
                source,
                dataset: DatasetName::new(name)?,
            })
        })
        .collect()
}

fn mask(
    ctx: &JobContext,
    config: &PipelineConfig,
    run: &mut PipelineRun,
) -> Result<Step, JobError> {
    let mut states = Vec::new();
    for d in run_datasets(run)? {
        let current = ctx.block_on(read_manifest(&ctx.lake, d.source, &d.dataset))?;
        let mask = ctx.block_on(crate::masks::read_mask_manifest(
            &ctx.lake,
            &config.mask,
            d.source,
            &d.dataset,
        ))?;
        if let (Some(m), Some(ds)) = (&mask, &current)
            && m.dataset_job_id == ds.job_id
        {
            continue;
        }
        let definition = config
            .mask_definition()
            .map_err(|(field, m)| JobError::Payload(format!("{field}: {m}")))?;
        let spec = MaskSpec {
            dataset: d.dataset.clone(),
            source: d.source,
            definition,
        };
        let target = format!("{}/{}", d.source.as_str(), d.dataset);
        let (state, _, err) =
            ensure_job(ctx, run, PipelineStep::Mask, &target, JobSpec::Mask(spec))?;
        states.push((state, err, target));
    }
    Ok(all_done(&states))
}

fn shuffle(
    ctx: &JobContext,
    config: &PipelineConfig,
    run: &mut PipelineRun,
) -> Result<Step, JobError> {
    let inputs = run_datasets(run)?;
    let spec = ShuffleSpec::from_inputs(
        &inputs,
        config.mask.clone(),
        config.shuffle.chunks,
        config.shuffle.seed,
    );
    let id = crate::shuffle::plan(ctx, &spec)?.id;
    run.shuffle = Some(id.clone());
    if ctx
        .block_on(crate::shuffle::read_shuffle_manifest(&ctx.lake, &id))?
        .is_some()
    {
        return Ok(Step::Done);
    }
    if let Err(step) = one_job(ctx, run, PipelineStep::Shuffle, &id, JobSpec::Shuffle(spec))? {
        return Ok(step);
    }
    // The job only queued the passes; the manifest says when they are all done.
    Ok(
        crate::shuffle::failed_task(ctx, &id)?.map_or(Step::Waiting, |e| {
            Step::Failed(format!("shuffle {id}: {e}"))
        }),
    )
}

fn train(
    ctx: &JobContext,
    config: &PipelineConfig,
    run: &mut PipelineRun,
) -> Result<Step, JobError> {
    let shuffle = run
        .shuffle
        .clone()
        .ok_or_else(|| JobError::Failed("this pipeline run has no shuffle yet".into()))?;
    let mut spec = config
        .train_spec(&shuffle, None)
        .map_err(JobError::Payload)?;
    if config.train.warm_start
        && let Some(best) = ctx.block_on(crate::nets::read_best(&ctx.lake))?
        && let Some(m) = ctx.block_on(crate::nets::read_net(&ctx.lake, &best.name))?
        && let Ok((features, arch)) = spec.preset()
        && m.features == features.as_str()
        && m.arch == arch
        // An imported net has no run of ours to warm-start from.
        && !m.external
    {
        spec = config
            .warm_train_spec(&shuffle)
            .map_err(JobError::Payload)?;
        spec.init_from = Some(lakefish_schemas::train::InitFrom {
            run: lakefish_schemas::names::RunId::new(&m.run)
                .map_err(|e| JobError::Failed(format!("the best net's run: {e}")))?,
            step: m.step,
        });
    }
    let result = match one_job(
        ctx,
        run,
        PipelineStep::Train,
        &shuffle,
        JobSpec::Train(spec),
    )? {
        Ok(r) => r,
        Err(step) => return Ok(step),
    };
    run.train_run = result["id"]
        .as_str()
        .map(|id| {
            lakefish_schemas::names::RunId::new(id)
                .map_err(|e| JobError::Failed(format!("the train job's result id: {e}")))
        })
        .transpose()?;
    Ok(Step::Done)
}

fn quantize(
    ctx: &JobContext,
    config: &PipelineConfig,
    run: &mut PipelineRun,
) -> Result<Step, JobError> {
    let train_run = trained(run)?;
    let spec = config
        .quantize_spec(&train_run)
        .map_err(JobError::Payload)?;
    let result = match one_job(
        ctx,
        run,
        PipelineStep::Quantize,
        &train_run,
        JobSpec::Quantize(spec),
    )? {
        Ok(r) => r,
        Err(step) => return Ok(step),
    };
    run.checkpoint = result["step"].as_u64();
    Ok(Step::Done)
}

/// The run this pipeline run trained: the steps after training need it.
fn trained(run: &PipelineRun) -> Result<lakefish_schemas::names::RunId, JobError> {
    run.train_run
        .clone()
        .ok_or_else(|| JobError::Failed("this pipeline run has no training run yet".into()))
}

fn register(ctx: &JobContext, run: &mut PipelineRun) -> Result<Step, JobError> {
    let train_run = trained(run)?;
    let best = ctx.block_on(crate::nets::read_best(&ctx.lake))?;
    let spec = RegisterSpec {
        run: train_run.clone(),
        checkpoint: run.checkpoint,
        parent: best.map(|b| b.name),
    };
    let result = match one_job(
        ctx,
        run,
        PipelineStep::Register,
        &train_run,
        JobSpec::Register(spec),
    )? {
        Ok(r) => r,
        Err(step) => return Ok(step),
    };
    run.net = result["name"].as_str().map(str::to_string);
    Ok(Step::Done)
}

fn sprt(
    ctx: &JobContext,
    config: &PipelineConfig,
    run: &mut PipelineRun,
) -> Result<Step, JobError> {
    let net = run.net.clone().unwrap_or_default();
    // The base is fixed once, when the step starts: a promotion elsewhere meanwhile must not
    // change what this test compares.
    let base = match &run.base {
        Some(b) => b.clone(),
        None => {
            let b = ctx
                .block_on(crate::nets::read_best(&ctx.lake))?
                .map_or_else(|| "classical".to_string(), |b| b.name);
            run.base = Some(b.clone());
            b
        }
    };
    if base == net {
        run.sprt_state = Some("skipped: the new net is the best net already".into());
        return Ok(Step::Done);
    }
    let spec = config.sprt_spec(&net, &base).map_err(JobError::Payload)?;
    let result = match one_job(ctx, run, PipelineStep::Sprt, &net, JobSpec::Sprt(spec))? {
        Ok(r) => r,
        Err(step) => return Ok(step),
    };
    let id = result["sprt"]
        .as_str()
        .ok_or_else(|| JobError::Failed("the sprt job's result has no sprt id".into()))
        .and_then(|id| {
            lakefish_schemas::names::SprtId::new(id)
                .map_err(|e| JobError::Failed(format!("the sprt job's result: {e}")))
        })?;
    run.sprt = Some(id.clone());
    let Some(status) = ctx.block_on(crate::sprt::status(&ctx.lake, &id))? else {
        return Ok(Step::Waiting);
    };
    if status.state == SprtState::Running {
        return Ok(crate::sprt::failed_batch(ctx, &id, status.batches)?
            .map_or(Step::Waiting, |e| Step::Failed(format!("sprt {id}: {e}"))));
    }
    run.sprt_state = Some(status.state.as_str().to_string());
    if status.state == SprtState::Accepted {
        let reason = format!(
            "sprt {id} accepted against {base} (pipeline run {})",
            run.id
        );
        let why = crate::nets::Promotion {
            reason,
            by: format!("pipeline:{}", run.pipeline),
            measured: Some(crate::nets::Measured {
                sprt: id.to_string(),
                against: base.clone(),
                elo: status.elo.as_ref().map(|e| (e.elo, e.elo_error)),
            }),
        };
        // A step run again after its promotion landed finds it in the history (and must
        // not undo a roll-back made since).
        let history = ctx.block_on(crate::nets::best_history(&ctx.lake))?;
        if !history
            .iter()
            .any(|b| b.sprt.as_deref() == Some(id.as_str()))
        {
            match ctx.block_on(crate::nets::set_best(&ctx.lake, &net, why)) {
                // Someone made it the best by hand meanwhile: it is, which is the point.
                Ok(_) | Err(JobError::Conflict(_)) => {}
                Err(e) => return Err(e),
            }
        }
        run.promoted = true;
        tracing::info!(run = run.id, net, "promoted to best");
    }
    Ok(Step::Done)
}
