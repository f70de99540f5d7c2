//! What every ingest shares: one writer per dataset, parts encoded and uploaded by encoder
//! threads while the inputs are still being read, and the manifest as the commit point.
//!
//! A dataset is immutable once its manifest exists. Until then an atomic `_writer` claim names
//! the one job allowed to write it; that job (re-delivered or retried) overwrites its own parts
//! with identical bytes, and a job that fails for good deletes what it wrote.

use lakefish_lake::datasets::{
    CLAIM_LEASE, CLAIM_RENEWAL, WriterClaim, index_dataset, manifest_key, read_manifest,
};
use lakefish_lake::input::Input;
use lakefish_lake::parts::PositionColumns;
use lakefish_lake::parts::{GameRecord, batch_from_chunks, encode_games, encode_parquet_on};
use lakefish_lake::records::now;
use lakefish_lake::{JobContext, JobError};
use lakefish_schemas::dataset::MANIFEST_VERSION;
use lakefish_schemas::games::games_prefix;
use lakefish_schemas::positions::{
    NO_SCORE, SCHEMA_VERSION, SCORE_UNIT, dataset_prefix, part_file_name,
};
use lakefish_schemas::{
    DatasetManifest, DatasetName, IngestSpec, InputReport, JobId, PartInfo, Progress, Source,
};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};

pub use lakefish_lake::datasets::WRITER_FILE;

/// Where a dataset lives: its positions prefix and, for PGN sources, its games prefix.
pub struct DatasetTarget<'a> {
    pub source: Source,
    pub dataset: &'a DatasetName,
    pub prefix: String,
    pub games_prefix: Option<String>,
    /// Set when this writer's claim was taken over (it stalled past its lease): from then
    /// on it must not write a byte more.
    pub claim_lost: AtomicBool,
    /// This writer's claim token (see [`WriterClaim::token`]).
    pub claim_token: String,
}

/// An input as a committed dataset records it: its name and the version read.
pub struct InputIdentity<'a> {
    pub name: &'a str,
    pub version: String,
}

/// Why a committed manifest is not the one these inputs would write, or `None` when it is.
fn differs(m: &DatasetManifest, inputs: &[InputIdentity]) -> Option<String> {
    if !m
        .inputs
        .iter()
        .map(|i| &i.input)
        .eq(inputs.iter().map(|i| i.name))
    {
        let names: Vec<&str> = m.inputs.iter().map(|i| i.input.as_str()).collect();
        return Some(format!("other inputs ({})", names.join(", ")));
    }
    // Manifests from before versions were recorded match by name, as they did then.
    m.inputs.iter().zip(inputs).find_map(|(was, now)| {
        let old = was.version.as_deref()?;
        (old != now.version).then(|| {
            format!(
                "another version of input {} (read then as {old}, now {})",
                now.name, now.version
            )
        })
    })
}

/// Runs `write` as the only writer of the dataset. Returns `existing(manifest)` instead when
/// an identical job (same inputs, same versions) already committed it, and an error when it
/// was committed from other inputs or other versions of them.
///
/// The `_writer` claim is a lease ([`WriterClaim`]) with a token unique to this writer:
/// renewed while `write` runs, taken over by the next writer once it expired (its writer
/// died or stalled), checked again just before the commit, and released at the end.
pub fn write_once<T>(
    ctx: &JobContext,
    job_id: &JobId,
    target: &DatasetTarget,
    inputs: &[InputIdentity],
    existing: impl Fn(&DatasetManifest) -> T,
    write: impl FnOnce() -> Result<T, JobError>,
) -> Result<T, JobError> {
    let committed = || -> Result<Option<T>, JobError> {
        match ctx.block_on(read_manifest(&ctx.lake, target.source, target.dataset))? {
            Some(m) => match differs(&m, inputs) {
                None => Ok(Some(existing(&m))),
                Some(why) => Err(JobError::DatasetExists {
                    dataset: target.dataset.to_string(),
                    existing: why,
                }),
            },
            None => Ok(None),
        }
    };
    if let Some(done) = committed()? {
        // A delivery after the commit: the index may have missed it (the writer died between).
        ctx.block_on(index_dataset(&ctx.lake, target.source, target.dataset))?;
        return Ok(done);
    }
    take_claim(ctx, job_id, target)?;
    // Another job may have committed between the first look and the claim.
    match committed() {
        Ok(None) => {}
        done => {
            release_claim(ctx, target)?;
            return done.map(|d| d.expect("matched Some"));
        }
    }
    let stop = AtomicBool::new(false);
    let outcome = std::thread::scope(|s| {
        s.spawn(|| renew_claim(ctx, target, &stop));
        let outcome = write();
        stop.store(true, Ordering::Relaxed);
        outcome
    });
    if target.claim_lost.load(Ordering::Relaxed) {
        // The claim and everything under it belong to the writer that took it over.
        return Err(outcome.err().unwrap_or_else(|| lost_claim(target)));
    }
    let is_committed = || {
        ctx.block_on(read_manifest(&ctx.lake, target.source, target.dataset))
            .map_or(true, |m| m.is_some())
    };
    match &outcome {
        // A retry (the same job) writes the same parts again; nothing to undo.
        Err(e) if e.is_transient() => {}
        Err(_) if is_committed() => {}
        Err(_) => {
            // Nothing is committed and we hold the claim: every part here is ours.
            for prefix in target.prefixes() {
                for meta in ctx.block_on(ctx.lake.list(prefix)).unwrap_or_default() {
                    let key = meta.location.to_string();
                    if key.ends_with(".parquet") {
                        let _ = ctx.block_on(ctx.lake.delete(&key));
                    }
                }
            }
        }
        Ok(_) => {}
    }
    // Released whatever happened, so a retry (another token) need not wait for the lease.
    let released = release_claim(ctx, target);
    match outcome {
        Ok(done) => {
            released?;
            // Measured again without the claim the commit's index counted.
            ctx.block_on(lakefish_lake::space::measure(
                &ctx.lake,
                lakefish_lake::catalog::CatalogKind::Dataset,
                &format!("{}/{}", target.source, target.dataset),
            ))?;
            Ok(done)
        }
        Err(e) => Err(e),
    }
}

fn lost_claim(target: &DatasetTarget) -> JobError {
    JobError::Retry(format!(
        "dataset {}: this writer lost its claim (it stalled past the lease, or another \
         delivery of the job took over); nothing was committed by it",
        target.dataset
    ))
}

fn claim_key(target: &DatasetTarget) -> String {
    format!("{}/{WRITER_FILE}", target.prefix)
}

/// Takes the dataset's claim: free, stale (taken over, logged), or held by another delivery
/// of this same job (the queue re-delivers only jobs of workers it found dead; if that one
/// still runs, it finds its token gone at its next renewal or before its commit, and stops —
/// meanwhile both write the same parts with the same bytes, as parts depend only on the
/// inputs). A live claim of another job is [`JobError::DatasetBusy`].
fn take_claim(ctx: &JobContext, job_id: &JobId, target: &DatasetTarget) -> Result<(), JobError> {
    let claim = claim_key(target);
    let token = target.claim_token.as_str();
    let mine = serde_json::to_vec_pretty(&WriterClaim::new(job_id.as_str(), token))?;
    for _ in 0..10 {
        let current = ctx.block_on(ctx.lake.get_versioned(&claim))?;
        if let Some((bytes, _)) = &current {
            let held = WriterClaim::parse(bytes);
            if !held.is_stale() && held.job != job_id.as_str() {
                return Err(JobError::DatasetBusy {
                    dataset: target.dataset.to_string(),
                    job: held.job,
                    owner: held.owner,
                    expires: held.expires,
                });
            }
            tracing::warn!(
                dataset = %target.dataset, job = held.job, owner = held.owner,
                "taking over a claim (stale, or left by an earlier delivery of this job)"
            );
        }
        let expected = current.as_ref().map(|(_, v)| v);
        if ctx.block_on(ctx.lake.put_if_unchanged(&claim, mine.clone(), expected))? {
            return Ok(());
        }
    }
    Err(JobError::Retry(format!(
        "{claim} kept changing while being claimed"
    )))
}

/// Renews the claim every [`CLAIM_RENEWAL`] until `stop`. The claim counts as lost (and
/// `target.claim_lost` stops the part writers) when it is found in other hands, or when no
/// renewal succeeded for half the lease by the wall clock (a stalled process, a store that
/// does not answer): past that point another writer may take it at any moment.
fn renew_claim(ctx: &JobContext, target: &DatasetTarget, stop: &AtomicBool) {
    let claim = claim_key(target);
    let mut renewed_at = std::time::Instant::now();
    let mut tried_at = renewed_at;
    let give_up = (CLAIM_LEASE / 2).to_std().expect("a positive lease");
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(std::time::Duration::from_millis(50));
        if renewed_at.elapsed() > give_up {
            tracing::error!(dataset = %target.dataset, "claim not renewed for half its lease");
            target.claim_lost.store(true, Ordering::Relaxed);
            return;
        }
        if tried_at.elapsed() < CLAIM_RENEWAL {
            continue;
        }
        tried_at = std::time::Instant::now();
        let renewed = (|| -> Result<bool, JobError> {
            let Some((bytes, version)) = ctx.block_on(ctx.lake.get_versioned(&claim))? else {
                return Ok(false);
            };
            let held = WriterClaim::parse(&bytes);
            if held.token != target.claim_token {
                return Ok(false);
            }
            let mine = serde_json::to_vec_pretty(&WriterClaim::new(&held.job, &held.token))?;
            ctx.block_on(ctx.lake.put_if_unchanged(&claim, mine, Some(&version)))
        })();
        match renewed {
            Ok(true) => renewed_at = tried_at,
            Ok(false) => {
                tracing::error!(dataset = %target.dataset, "lost the dataset's claim");
                target.claim_lost.store(true, Ordering::Relaxed);
                return;
            }
            // The lease outlives a few failed renewals: try again at the next one.
            Err(e) => tracing::warn!(dataset = %target.dataset, "claim not renewed: {e}"),
        }
    }
}

/// Is the claim still this writer's? Asked just before the commit.
fn claim_held(ctx: &JobContext, target: &DatasetTarget) -> Result<bool, JobError> {
    let held = ctx.block_on(ctx.lake.get(&claim_key(target)))?;
    Ok(held.is_some_and(|b| WriterClaim::parse(&b).token == target.claim_token))
}

/// Deletes the claim if it is still this writer's.
fn release_claim(ctx: &JobContext, target: &DatasetTarget) -> Result<(), JobError> {
    let claim = claim_key(target);
    if let Some((bytes, version)) = ctx.block_on(ctx.lake.get_versioned(&claim))?
        && WriterClaim::parse(&bytes).token == target.claim_token
    {
        ctx.block_on(ctx.lake.delete_if_unchanged(&claim, &version))?;
    }
    Ok(())
}

impl DatasetTarget<'_> {
    fn prefixes(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.prefix.as_str()).chain(self.games_prefix.as_deref())
    }
}

/// Writes the manifest (the commit), then deletes parts an earlier, uncommitted attempt with
/// other inputs may have left behind.
pub fn commit(
    ctx: &JobContext,
    target: &DatasetTarget,
    manifest: &DatasetManifest,
) -> Result<(), JobError> {
    if target.claim_lost.load(Ordering::Relaxed) || !claim_held(ctx, target)? {
        target.claim_lost.store(true, Ordering::Relaxed);
        return Err(lost_claim(target));
    }
    let bytes = serde_json::to_vec_pretty(manifest)?;
    let key = manifest_key(target.source, target.dataset);
    // Never over another commit: a writer that lost its claim unnoticed stops here.
    if !ctx.block_on(ctx.lake.put_if_absent(&key, bytes))? {
        return Err(JobError::Retry(format!(
            "dataset {} was committed by another writer meanwhile",
            target.dataset
        )));
    }
    let mut keep: HashSet<String> = manifest
        .parts
        .iter()
        .map(|p| format!("{}/{}", target.prefix, p.name))
        .collect();
    if let Some(games) = &target.games_prefix {
        keep.extend(manifest.games.iter().map(|p| format!("{games}/{}", p.name)));
    }
    for prefix in target.prefixes() {
        for meta in ctx.block_on(ctx.lake.list(prefix))? {
            let key = meta.location.to_string();
            if key.ends_with(".parquet") && !keep.contains(&key) {
                ctx.block_on(ctx.lake.delete(&key))?;
            }
        }
    }
    ctx.block_on(index_dataset(&ctx.lake, target.source, target.dataset))
}

/// One lines per skipped range or game, prefixed with the input.
pub fn skipped_lines(inputs: &[InputReport]) -> Vec<String> {
    inputs
        .iter()
        .flat_map(|i| {
            let ranges = i.skipped.iter().map(move |s| format!("{}: {s}", i.input));
            let games = i
                .skipped_games
                .iter()
                .map(move |g| format!("{}: {g}", i.input));
            ranges.chain(games)
        })
        .collect()
}

struct PartJob {
    /// Path inside the dataset prefix, e.g. `month=2025-05/part-00003.parquet`.
    name: String,
    chunks: Vec<PositionColumns>,
    games: Vec<GameRecord>,
}

#[derive(Default)]
struct Pending {
    next_index: u32,
    chunks: Vec<PositionColumns>,
    games: Vec<GameRecord>,
    rows: u64,
}

/// Collects rows in input order, per partition, and hands each full part to the encoders.
/// A part closes at the first push past `target_rows`, so a pushed unit (a binpack chunk, a
/// block of PGN games) never straddles parts.
pub struct PartBuilder {
    target_rows: u64,
    partitions: BTreeMap<String, Pending>,
    tx: SyncSender<PartJob>,
    pub total_rows: u64,
    pub null_scores: u64,
}

impl PartBuilder {
    /// `partition` is a sub-path such as `month=2025-05`, or empty for none.
    pub fn push(
        &mut self,
        partition: &str,
        chunk: PositionColumns,
        games: Vec<GameRecord>,
    ) -> Result<(), JobError> {
        let rows = chunk.rows() as u64;
        self.total_rows += rows;
        self.null_scores += chunk.score.iter().filter(|&&s| s == NO_SCORE).count() as u64;
        let p = self.partitions.entry(partition.to_string()).or_default();
        p.rows += rows;
        p.chunks.push(chunk);
        p.games.extend(games);
        if p.rows >= self.target_rows {
            self.flush(partition)?;
        }
        Ok(())
    }

    fn flush(&mut self, partition: &str) -> Result<(), JobError> {
        let Some(p) = self.partitions.get_mut(partition) else {
            return Ok(());
        };
        if p.chunks.iter().all(|c| c.rows() == 0) && p.games.is_empty() {
            return Ok(());
        }
        let file = part_file_name(p.next_index);
        let name = if partition.is_empty() {
            file
        } else {
            format!("{partition}/{file}")
        };
        let job = PartJob {
            name,
            chunks: std::mem::take(&mut p.chunks),
            games: std::mem::take(&mut p.games),
        };
        p.next_index += 1;
        p.rows = 0;
        self.tx
            .send(job)
            .map_err(|_| JobError::Internal("every part encoder stopped".into()))
    }

    fn flush_all(&mut self) -> Result<(), JobError> {
        let keys: Vec<String> = self.partitions.keys().cloned().collect();
        keys.iter().try_for_each(|k| self.flush(k))
    }
}

/// What the encoders wrote, shared with the driver.
#[derive(Default)]
pub struct Written {
    parts: Mutex<Vec<PartInfo>>,
    games: Mutex<Vec<PartInfo>>,
    failure: Mutex<Option<JobError>>,
}

impl Written {
    /// True once an encoder failed: the driver should stop reading.
    pub fn failed(&self) -> bool {
        self.failure.lock().unwrap().is_some()
    }
}

/// The outcome of [`write_parts`].
pub struct PartsWritten<R> {
    pub driven: R,
    pub parts: Vec<PartInfo>,
    pub games: Vec<PartInfo>,
    pub rows: u64,
    pub null_scores: u64,
}

fn encode_parts(
    ctx: &JobContext,
    target: &DatasetTarget,
    rx: &Mutex<Receiver<PartJob>>,
    written: &Written,
) {
    loop {
        let job = match rx.lock().unwrap().recv() {
            Ok(job) => job,
            Err(_) => return, // the driver finished and dropped the sender
        };
        let key = format!("{}/{}", target.prefix, job.name);
        if target.claim_lost.load(Ordering::Relaxed) {
            written
                .failure
                .lock()
                .unwrap()
                .get_or_insert(lost_claim(target));
            continue;
        }
        // A panic here must not kill the encoder: the driver would block on a full queue.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let batch = batch_from_chunks(&job.chunks);
            let bytes = encode_parquet_on(&batch, &key, ctx.threads)?;
            let part = PartInfo {
                name: job.name.clone(),
                rows: batch.num_rows() as u64,
                bytes: bytes.len() as u64,
            };
            ctx.block_on(ctx.lake.put(&key, bytes))?;
            let games = match &target.games_prefix {
                Some(prefix) => {
                    let key = format!("{prefix}/{}", job.name);
                    let bytes = encode_games(&job.games, &key)?;
                    let info = PartInfo {
                        name: job.name.clone(),
                        rows: job.games.len() as u64,
                        bytes: bytes.len() as u64,
                    };
                    ctx.block_on(ctx.lake.put(&key, bytes))?;
                    Some(info)
                }
                None => None,
            };
            Ok::<_, JobError>((part, games))
        }))
        .unwrap_or_else(|_| Err(JobError::Panic(format!("encoding {key}"))));
        match result {
            Ok((part, games)) => {
                written.parts.lock().unwrap().push(part);
                if let Some(g) = games {
                    written.games.lock().unwrap().push(g);
                }
            }
            Err(e) => {
                written.failure.lock().unwrap().get_or_insert(e);
                // Keep draining so the driver never blocks on a full queue.
            }
        }
    }
}

/// Runs `drive` (which reads the inputs and pushes rows) beside `ctx.threads` encoder threads.
pub fn write_parts<R>(
    ctx: &JobContext,
    target: &DatasetTarget,
    rows_per_part: u64,
    drive: impl FnOnce(&mut PartBuilder, &Written) -> Result<R, JobError>,
) -> Result<PartsWritten<R>, JobError> {
    let written = Written::default();
    let (tx, rx) = sync_channel::<PartJob>(1);
    // Only the encoders hold the receiver: if they all stopped, the driver's send fails.
    let rx = Arc::new(Mutex::new(rx));
    let driven = std::thread::scope(|s| {
        for _ in 0..ctx.threads {
            let rx = rx.clone();
            let written = &written;
            s.spawn(move || encode_parts(ctx, target, &rx, written));
        }
        drop(rx);
        let mut builder = PartBuilder {
            target_rows: rows_per_part,
            partitions: BTreeMap::new(),
            tx,
            total_rows: 0,
            null_scores: 0,
        };
        let driven = drive(&mut builder, &written)?;
        builder.flush_all()?;
        Ok::<_, JobError>((driven, builder.total_rows, builder.null_scores))
        // `builder` drops here with the sender: encoders drain the queue and exit.
    });
    if let Some(e) = written.failure.lock().unwrap().take() {
        return Err(e);
    }
    let (driven, rows, null_scores) = driven?;
    let by_name = |v: &mut Vec<PartInfo>| {
        v.sort_by(|a, b| (a.name.len(), &a.name).cmp(&(b.name.len(), &b.name)));
    };
    let mut parts = written.parts.into_inner().unwrap();
    let mut games = written.games.into_inner().unwrap();
    by_name(&mut parts);
    by_name(&mut games);
    Ok(PartsWritten {
        driven,
        parts,
        games,
        rows,
        null_scores,
    })
}

/// What an ingest job returns (and the job record shows as `result`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct IngestSummary {
    pub dataset: String,
    pub rows: u64,
    /// Rows without a score (null `score`); unknown when nothing was written.
    pub null_scores: Option<u64>,
    pub parts: usize,
    pub bytes: u64,
    /// True when the dataset was already committed by an identical job: nothing was written.
    pub already_present: bool,
    /// Every byte range or game that was not ingested, with the file and the reason.
    pub skipped: Vec<String>,
    /// A transform's rows that changed (moved to a leaf, scored differently).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed: Option<u64>,
}

impl IngestSummary {
    pub fn from_manifest(
        m: &DatasetManifest,
        null_scores: Option<u64>,
        already_present: bool,
    ) -> Self {
        IngestSummary {
            dataset: m.dataset.to_string(),
            rows: m.rows,
            null_scores,
            parts: m.parts.len(),
            bytes: m.bytes,
            already_present,
            skipped: skipped_lines(&m.inputs),
            changed: None,
        }
    }
}

/// Reads one non-empty input into `part`; `progress(bytes read, rows so far)`.
pub type ReadInput = fn(
    ctx: &JobContext,
    spec: &IngestSpec,
    pool: &rayon::ThreadPool,
    input: &Input,
    part: &mut PartBuilder,
    written: &Written,
    progress: &dyn Fn(u64, u64),
) -> Result<InputReport, JobError>;

/// How one kind of input file becomes rows: the part each ingest job does differently.
pub struct InputFormat {
    pub source: Source,
    /// True for formats with a `games` table beside the positions.
    pub has_games: bool,
    /// Names the worker threads (`binpack-decode`, `pgn-parse`).
    pub thread_name: &'static str,
    /// Why nothing was ingested when no input said why.
    pub nothing_found: &'static str,
    pub read: ReadInput,
}

/// An ingest job: claims the dataset, reads every input into parts, commits the manifest.
pub fn ingest(
    ctx: &JobContext,
    job_id: &JobId,
    spec: &IngestSpec,
    format: &InputFormat,
) -> Result<IngestSummary, JobError> {
    let source = format.source;
    let target = DatasetTarget {
        source,
        dataset: &spec.dataset,
        prefix: dataset_prefix(source, &spec.dataset),
        games_prefix: format
            .has_games
            .then(|| games_prefix(source, &spec.dataset)),
        claim_lost: AtomicBool::new(false),
        claim_token: JobId::new().to_string(),
    };
    // Opened once: the versions compared with a committed dataset are the ones read.
    let inputs: Vec<Input> = spec
        .inputs
        .iter()
        .map(|n| Input::open(ctx, n))
        .collect::<Result<_, _>>()?;
    let identities: Vec<InputIdentity> = inputs
        .iter()
        .map(|i| InputIdentity {
            name: i.name(),
            version: i.version(),
        })
        .collect();
    write_once(
        ctx,
        job_id,
        &target,
        &identities,
        |m| IngestSummary::from_manifest(m, None, true),
        || write_dataset(ctx, job_id, spec, &inputs, &target, format),
    )
}

fn write_dataset(
    ctx: &JobContext,
    job_id: &JobId,
    spec: &IngestSpec,
    inputs: &[Input],
    target: &DatasetTarget,
    format: &InputFormat,
) -> Result<IngestSummary, JobError> {
    let total_bytes: u64 = inputs.iter().map(|i| i.len()).sum();
    let name = format.thread_name;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(ctx.threads)
        .thread_name(move |i| format!("{name}-{i}"))
        .build()
        .map_err(|e| JobError::Internal(e.to_string()))?;
    let out = write_parts(ctx, target, spec.rows_per_part, |part, written| {
        let mut reports = Vec::new();
        let mut done_bytes = 0u64;
        for input in inputs {
            let progress = |offset: u64, rows: u64| {
                ctx.progress.report(&Progress {
                    stage: format!("ingesting {}", input.name()),
                    done: done_bytes + offset,
                    total: Some(total_bytes),
                    unit: "bytes".into(),
                    rows,
                });
            };
            let report = if input.is_empty() {
                let mut r = InputReport::new(input.name(), 0);
                r.skipped.push(lakefish_schemas::SkippedRange {
                    offset: 0,
                    len: 0,
                    reason: "empty file: nothing to ingest".into(),
                });
                r
            } else {
                (format.read)(ctx, spec, &pool, input, part, written, &progress)?
            };
            reports.push(InputReport {
                version: Some(input.version()),
                ..report
            });
            done_bytes += input.len();
        }
        Ok(reports)
    })?;
    let reports = out.driven;
    if out.rows == 0 {
        let mut why = skipped_lines(&reports);
        why.truncate(5);
        let why = if why.is_empty() {
            format.nothing_found.to_string()
        } else {
            why.join("; ")
        };
        return Err(JobError::NothingIngested(why));
    }
    let manifest = DatasetManifest {
        version: MANIFEST_VERSION,
        source: target.source,
        dataset: spec.dataset.clone(),
        job_id: job_id.clone(),
        schema_version: SCHEMA_VERSION,
        score_unit: SCORE_UNIT.into(),
        rows: out.rows,
        bytes: out.parts.iter().chain(&out.games).map(|p| p.bytes).sum(),
        parts: out.parts,
        games: out.games,
        inputs: reports,
        derived_from: None,
        created: now(),
    };
    commit(ctx, target, &manifest)?;
    Ok(IngestSummary::from_manifest(
        &manifest,
        Some(out.null_scores),
        false,
    ))
}
