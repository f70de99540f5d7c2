//! The content-addressed net registry: `nets/nn-<sha256[:12]>.nnue` plus a manifest.
//!
//! Registration copies a quantized checkpoint (written by `lakefish quantize`) into `nets/`,
//! after checking that its bytes still hash to what the quantizer recorded and parse as a
//! network. The manifest is written last, so a net without one is not registered; the same
//! bytes registered again find the manifest and change nothing.

use crate::{JobContext, JobError, Lake};
use bytes::Bytes;
use lakefish_engine::nnue::Network;
use lakefish_lake::catalog::{CatalogEntry, CatalogKind, CatalogQuery};
use lakefish_schemas::names::RunId;
use lakefish_schemas::nets::{
    BEST_KEY, BestNet, NETS_PREFIX, checkpoint_step, name_for_sha256, net_keys, net_name,
    quantized_keys,
};
use lakefish_schemas::train::{METRICS_FILE, RUN_FILE};
use lakefish_schemas::{NetManifest, QuantizeReport, RegisterSpec, RunRecord};

pub use lakefish_schemas::sha256_hex;

/// Every training run's record, newest first (from the catalogue when the lake has one).
pub async fn list_runs(lake: &Lake) -> Result<Vec<RunRecord>, JobError> {
    if let Some(catalog) = lake.catalog() {
        return catalog
            .decode_all(CatalogQuery::all(CatalogKind::Run))
            .await;
    }
    let mut out = Vec::new();
    for dir in lake.list_dirs("runs").await? {
        let id = dir
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or_default();
        // Only a run's directory has a run id for a name.
        let Ok(id) = RunId::new(id) else { continue };
        if let Some(r) = read_run(lake, &id).await? {
            out.push(r);
        }
    }
    out.sort_by(|a, b| (&b.created, &b.id).cmp(&(&a.created, &a.id)));
    Ok(out)
}

pub async fn read_run(lake: &Lake, run: &RunId) -> Result<Option<RunRecord>, JobError> {
    lake.get_json(&format!("runs/{run}/{RUN_FILE}"), "run record")
        .await
}

/// Where a training run keeps its record, checkpoints, metrics and nets.
pub fn run_prefix(id: &str) -> String {
    format!("runs/{id}")
}

/// One row of a run's metrics ([`MetricsPoint`]).
pub type MetricsRow = MetricsPoint;

/// Reads a run's `metrics.parquet`.
pub fn read_metrics(bytes: &bytes::Bytes) -> Result<Vec<MetricsRow>, String> {
    use arrow_array::{Array, Float64Array, UInt32Array, UInt64Array};
    let reader =
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes.clone())
            .and_then(|b| b.build())
            .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for b in reader {
        let b = b.map_err(|e| e.to_string())?;
        let c = |i: usize| b.column(i).clone();
        let step = c(0);
        let step = step.as_any().downcast_ref::<UInt64Array>().ok_or("step")?;
        let epoch = c(1);
        let epoch = epoch
            .as_any()
            .downcast_ref::<UInt32Array>()
            .ok_or("epoch")?;
        let f = |i: usize| {
            c(i).as_any()
                .downcast_ref::<Float64Array>()
                .cloned()
                .ok_or("f64")
        };
        let (tl, vl, lr, ps) = (f(2)?, f(3)?, f(4)?, f(5)?);
        // λ was added later: files without the column read as unknown.
        let lambda = b
            .column_by_name("lambda")
            .and_then(|c| c.as_any().downcast_ref::<Float64Array>().cloned());
        for i in 0..b.num_rows() {
            out.push(MetricsPoint {
                step: step.value(i),
                epoch: epoch.value(i),
                train_loss: tl.value(i),
                val_loss: vl.is_valid(i).then(|| vl.value(i)),
                lr: lr.value(i),
                positions_per_s: ps.value(i),
                lambda: lambda.as_ref().map(|l| l.value(i)),
            });
        }
    }
    Ok(out)
}

/// One metrics row of a run, as `GET /v1/runs/{id}` and the dashboard show it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct MetricsPoint {
    pub step: u64,
    pub epoch: u32,
    pub train_loss: f64,
    pub val_loss: Option<f64>,
    pub lr: f64,
    pub positions_per_s: f64,
    /// λ at that step (absent in metrics written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lambda: Option<f64>,
}

/// A run's record with its metrics (`GET /v1/runs/{id}`: the record's fields and `metrics`).
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct RunWithMetrics {
    #[serde(flatten)]
    pub run: RunRecord,
    pub metrics: Vec<MetricsPoint>,
}

/// A run's record with its metrics; `None` for an unknown run.
pub async fn run_with_metrics(lake: &Lake, id: &RunId) -> Result<Option<RunWithMetrics>, JobError> {
    let Some(run) = read_run(lake, id).await? else {
        return Ok(None);
    };
    let key = format!("{}/{METRICS_FILE}", run_prefix(id));
    let rows = match lake.get(&key).await? {
        Some(b) => read_metrics(&b).map_err(|reason| JobError::Corrupt {
            what: "metrics",
            key,
            reason,
        })?,
        None => Vec::new(),
    };
    Ok(Some(RunWithMetrics { run, metrics: rows }))
}

/// The step of the checkpoint a quantize or register job means: the one asked for, which
/// must exist, or the run's last.
pub fn pick_checkpoint(run: &RunRecord, step: Option<u64>) -> Result<(String, u64), JobError> {
    let known: Vec<(String, u64)> = run
        .checkpoints
        .iter()
        .filter_map(|c| checkpoint_step(c).map(|s| (c.clone(), s)))
        .collect();
    match step {
        None => known
            .last()
            .cloned()
            .ok_or_else(|| JobError::Failed(format!("run {} has no checkpoints yet", run.id))),
        Some(s) => known.iter().find(|(_, k)| *k == s).cloned().ok_or_else(|| {
            let steps: Vec<String> = known.iter().map(|(_, k)| k.to_string()).collect();
            JobError::Failed(format!(
                "run {} has no checkpoint at step {s} (it has: {})",
                run.id,
                if steps.is_empty() {
                    "none".to_string()
                } else {
                    steps.join(", ")
                }
            ))
        }),
    }
}

impl crate::Job for RegisterSpec {
    fn run(
        &self,
        _: lakefish_schemas::JobKind,
        ctx: &JobContext,
        _: &lakefish_schemas::JobId,
    ) -> Result<serde_json::Value, JobError> {
        Ok(serde_json::to_value(register(ctx, self)?)?)
    }
}

/// Registers a quantized checkpoint. Idempotent: the same bytes give the same name and the
/// existing manifest is returned unchanged.
pub fn register(ctx: &JobContext, spec: &RegisterSpec) -> Result<NetManifest, JobError> {
    ctx.block_on(async {
        let manifest = register_async(&ctx.lake, spec).await?;
        // Also when it was registered before: a delivery after a crash between the two.
        index_net(&ctx.lake, &manifest).await?;
        Ok(manifest)
    })
}

/// Records a registered net in the catalogue.
pub async fn index_net(lake: &Lake, m: &NetManifest) -> Result<(), JobError> {
    // Linked to its shuffle and its datasets, so lists filter by them.
    let links = m
        .datasets
        .iter()
        .chain([&m.shuffle])
        .filter(|l| !l.is_empty())
        .cloned();
    lake.index(CatalogEntry::of(CatalogKind::Net, &m.name, &m.created, m).with_links(links))
        .await
}

/// Records a training run in the catalogue (after each write of its `run.json`).
pub async fn index_run(lake: &Lake, r: &RunRecord) -> Result<(), JobError> {
    let rank = 2 * r.step as i64 + r.finished as i64;
    let state = r.state();
    let entry = CatalogEntry::of(CatalogKind::Run, &r.id, &r.created, r)
        .with_rank(rank)
        .with_state(state)
        .with_links([r.spec.shuffle.to_string()]);
    lake.index(entry).await
}

async fn register_async(lake: &Lake, spec: &RegisterSpec) -> Result<NetManifest, JobError> {
    let run = read_run(lake, &spec.run)
        .await?
        .ok_or_else(|| JobError::Failed(format!("run {} does not exist", spec.run)))?;
    let (checkpoint, step) = pick_checkpoint(&run, spec.checkpoint)?;
    let (nnue_key, report_key) = quantized_keys(&run.id, step);
    let report: QuantizeReport = lake
        .get_json(&report_key, "quantization report")
        .await?
        .ok_or_else(|| {
            JobError::Failed(format!(
                "checkpoint {checkpoint} of run {} is not quantized yet: run `lakefish quantize --run {} --checkpoint {step}` first",
                run.id, run.id
            ))
        })?;
    let corrupt = |reason: String| JobError::Corrupt {
        what: "quantized net",
        key: nnue_key.clone(),
        reason,
    };
    let bytes = lake
        .get(&nnue_key)
        .await?
        .ok_or_else(|| corrupt("missing although its report exists".into()))?;
    let sha = sha256_hex(&bytes);
    if sha != report.sha256 {
        return Err(corrupt(format!(
            "sha256 {sha} differs from the {} its report recorded",
            report.sha256
        )));
    }
    // A Stockfish-architecture run quantizes into Stockfish's format, a described net into
    // the `.nnue` version that carries its description.
    let mut described = None;
    let (features, arch, description, format) = if lakefish_engine::spec_net::SpecNet::sniff(&bytes)
    {
        let net = lakefish_engine::spec_net::SpecNet::from_bytes(&bytes)
            .map_err(|e| corrupt(e.to_string()))?;
        let label = net.spec.name.clone().unwrap_or_else(|| "(unnamed)".into());
        let comment = net.comment.clone();
        described = Some(net.spec);
        (
            "netspec".to_string(),
            label,
            comment,
            lakefish_schemas::nets::NetFormat::Lakefish,
        )
    } else if lakefish_engine::stockfish_net::StockfishNet::sniff(&bytes) {
        let net = lakefish_engine::stockfish_net::StockfishNet::from_bytes(&bytes)
            .map_err(|e| corrupt(e.to_string()))?;
        (
            "halfka_v2_hm".to_string(),
            crate::foreign_nets::STOCKFISH_ARCH.to_string(),
            String::from_utf8_lossy(&net.description).into_owned(),
            lakefish_schemas::nets::NetFormat::Stockfish,
        )
    } else {
        let net = Network::from_bytes(&bytes).map_err(|e| corrupt(e.to_string()))?;
        (
            net.features.name().to_string(),
            net.arch.to_string(),
            net.description.clone(),
            lakefish_schemas::nets::NetFormat::Lakefish,
        )
    };
    let name = name_for_sha256(&sha);
    let (file_key, manifest_key) = net_keys(&name);
    if let Some(parent) = &spec.parent {
        let parent = net_name(parent).map_err(JobError::Failed)?;
        if read_net(lake, &parent).await?.is_none() {
            return Err(JobError::Failed(format!(
                "parent net {parent} is not registered"
            )));
        }
    }
    if let Some(existing) = read_net(lake, &name).await? {
        return Ok(existing);
    }
    let shuffle = crate::shuffle::read_shuffle_manifest(lake, &run.spec.shuffle)
        .await?
        .ok_or_else(|| {
            JobError::Failed(format!(
                "shuffle {} of run {} is gone from the lake",
                run.spec.shuffle, run.id
            ))
        })?;
    // The description the file carries, or the one its features and architecture stand for.
    let net =
        described.or_else(|| lakefish_schemas::netspec::NetSpec::preset(&features, &arch).ok());
    let manifest = NetManifest {
        name: name.clone(),
        sha256: sha,
        bytes: bytes.len() as u64,
        features,
        arch,
        arch_hash: report.arch_hash.clone(),
        description,
        run: run.id.to_string(),
        checkpoint,
        step,
        shuffle: shuffle.id.to_string(),
        datasets: shuffle
            .datasets
            .iter()
            .map(|d| format!("{}/{d}", shuffle.source.as_str()))
            .chain(
                shuffle
                    .extra
                    .iter()
                    .map(|d| format!("{}/{}", d.source.as_str(), d.dataset)),
            )
            .collect(),
        mask: shuffle.mask.to_string(),
        parent: spec
            .parent
            .as_deref()
            .map(net_name)
            .transpose()
            .map_err(JobError::Failed)?,
        quantization: report.error.clone(),
        created: lakefish_lake::records::now(),
        format,
        external: false,
        net,
    };
    lake.put(&file_key, bytes).await?;
    let json = serde_json::to_vec_pretty(&manifest)?;
    if !lake.put_if_absent(&manifest_key, json).await? {
        // Registered by a concurrent job a moment ago: its manifest stands.
        return read_net(lake, &name)
            .await?
            .ok_or_else(|| JobError::Retry(format!("{manifest_key} vanished")));
    }
    Ok(manifest)
}

/// A registered net's manifest (`None` when it is not registered).
pub async fn read_net(lake: &Lake, name: &str) -> Result<Option<NetManifest>, JobError> {
    let name = net_name(name).map_err(JobError::Failed)?;
    lake.get_json(&net_keys(&name).1, "net manifest").await
}

/// All registered nets, oldest first (from the catalogue when the lake has one).
pub async fn list_nets(lake: &Lake) -> Result<Vec<NetManifest>, JobError> {
    let mut out = Vec::new();
    if let Some(catalog) = lake.catalog() {
        out = catalog
            .decode_all(CatalogQuery::all(CatalogKind::Net))
            .await?;
    } else {
        for meta in lake.list(NETS_PREFIX).await? {
            let key = meta.location.to_string();
            if let Some(stem) = key
                .strip_prefix(&format!("{NETS_PREFIX}/"))
                .and_then(|k| k.strip_suffix(".json"))
                && let Some(m) = read_net(lake, stem).await?
            {
                out.push(m);
            }
        }
    }
    out.sort_by(|a, b| (&a.created, &a.name).cmp(&(&b.created, &b.name)));
    Ok(out)
}

/// A registered net's bytes, checked against its manifest's sha256.
pub async fn fetch_net(lake: &Lake, name: &str) -> Result<(NetManifest, Bytes), JobError> {
    let manifest = read_net(lake, name)
        .await?
        .ok_or_else(|| JobError::NotFound(format!("net {name} is not registered")))?;
    let (file_key, _) = net_keys(&manifest.name);
    let bytes = lake
        .get(&file_key)
        .await?
        .ok_or_else(|| JobError::Corrupt {
            what: "net",
            key: file_key.clone(),
            reason: "its manifest exists but the file is missing".into(),
        })?;
    verify(&manifest, &bytes).map_err(|reason| JobError::Corrupt {
        what: "net",
        key: file_key,
        reason,
    })?;
    Ok((manifest, bytes))
}

/// Whether `bytes` are the net `manifest` describes.
pub fn verify(manifest: &NetManifest, bytes: &[u8]) -> Result<(), String> {
    let sha = sha256_hex(bytes);
    if sha != manifest.sha256 {
        return Err(format!(
            "sha256 {sha} does not match the manifest's {} ({} bytes received, {} expected)",
            manifest.sha256,
            bytes.len(),
            manifest.bytes
        ));
    }
    Ok(())
}

/// The current best net (`None` before any promotion).
pub async fn read_best(lake: &Lake) -> Result<Option<BestNet>, JobError> {
    if let Some(catalog) = lake.catalog() {
        return catalog
            .0
            .get(CatalogKind::Best, BEST_ENTRY)
            .await?
            .map(|e| e.decode())
            .transpose();
    }
    read_best_in_lake(lake).await
}

/// The best-net pointer as the lake holds it (what a catalogue rebuild copies).
pub async fn read_best_in_lake(lake: &Lake) -> Result<Option<BestNet>, JobError> {
    lake.get_json(BEST_KEY, "best-net pointer").await
}

/// The name of the best-net pointer's catalogue entry.
pub const BEST_ENTRY: &str = "best";

/// Records the best-net pointer in the catalogue.
pub async fn index_best(lake: &Lake, best: &BestNet) -> Result<(), JobError> {
    lake.index(CatalogEntry::of(
        CatalogKind::Best,
        BEST_ENTRY,
        &best.since,
        best,
    ))
    .await
}

/// The net a user means by `name`: `best` is the current best net (an error before any
/// promotion), anything else must be a well-formed net name. Whether it is registered is
/// the caller's next question.
pub async fn resolve_net_name(lake: &Lake, name: &str) -> Result<String, JobError> {
    if name == "best" {
        return read_best(lake).await?.map(|b| b.name).ok_or_else(|| {
            JobError::NotFound(
                "no net has been promoted yet (until an SPRT accepts one, `best` plays the \
                 hand-written evaluation, which has no file)"
                    .to_string(),
            )
        });
    }
    lakefish_schemas::nets::net_name(name).map_err(JobError::NotFound)
}

/// Why and by whom a net becomes the best, and what measured it.
#[derive(Debug, Clone, Default)]
pub struct Promotion {
    pub reason: String,
    pub by: String,
    pub measured: Option<Measured>,
}

/// The SPRT that accepted a net: its id, the side it played against, its Elo and 95 % error.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    pub sprt: String,
    pub against: String,
    pub elo: Option<(f64, f64)>,
}

/// Makes `name`, which must be registered, the best net; the promotion is also kept in the
/// history (`registry/best-history/`), which is what a roll-back picks from.
pub async fn set_best(lake: &Lake, name: &str, why: Promotion) -> Result<BestNet, JobError> {
    let name = net_name(name.trim_end_matches(".nnue")).map_err(JobError::Payload)?;
    let manifest = read_net(lake, &name)
        .await?
        .ok_or_else(|| JobError::NotFound(format!("net {name} is not registered")))?;
    // Compare-and-swap on the pointer: of two promotions at once, each replaces what the
    // other left, so the pointer and the history tell the same story.
    let best = loop {
        let stored = lake.get_versioned(BEST_KEY).await?;
        let now: Option<BestNet> = match &stored {
            Some((bytes, _)) => {
                Some(
                    serde_json::from_slice(bytes).map_err(|e| JobError::Corrupt {
                        what: "best-net pointer",
                        key: BEST_KEY.into(),
                        reason: e.to_string(),
                    })?,
                )
            }
            None => None,
        };
        if let Some(b) = now.as_ref().filter(|b| b.name == manifest.name) {
            return Err(JobError::Conflict(format!(
                "{} is already the best net (since {}); nothing changed",
                b.name, b.since
            )));
        }
        let m = why.measured.clone();
        let number = now.as_ref().map_or(0, |b| b.number) + 1;
        let best = BestNet {
            number,
            name: manifest.name.clone(),
            since: lakefish_lake::records::now(),
            reason: why.reason.clone(),
            by: Some(why.by.clone()),
            previous: now.map(|b| b.name),
            sprt: m.as_ref().map(|m| m.sprt.clone()),
            against: m.as_ref().map(|m| m.against.clone()),
            elo: m.as_ref().and_then(|m| m.elo).map(|e| e.0),
            elo_error: m.as_ref().and_then(|m| m.elo).map(|e| e.1),
        };
        let json = serde_json::to_vec_pretty(&best).expect("serializable");
        let version = stored.as_ref().map(|(_, v)| v);
        if lake.put_if_unchanged(BEST_KEY, json, version).await? {
            break best;
        }
    };
    // Then its record, under its number: the pointer's compare-and-swap orders promotions,
    // so the history sorts as they happened (two in one millisecond included).
    let key = format!(
        "{}/{:010}-{}.json",
        lakefish_schemas::nets::BEST_HISTORY_PREFIX,
        best.number,
        best.name
    );
    lake.put(
        &key,
        serde_json::to_vec_pretty(&best).expect("serializable"),
    )
    .await?;
    index_best(lake, &best).await?;
    Ok(best)
}

/// Every promotion, newest first (the first is the current best unless the history began
/// after it).
pub async fn best_history(lake: &Lake) -> Result<Vec<BestNet>, JobError> {
    let mut out = Vec::new();
    for meta in lake
        .list(lakefish_schemas::nets::BEST_HISTORY_PREFIX)
        .await?
        .iter()
        .rev()
    {
        let key = meta.location.to_string();
        if let Some(b) = lake
            .get_json::<BestNet>(&key, "best-net history entry")
            .await?
        {
            out.push(b);
        }
    }
    Ok(out)
}

/// The name an evaluation request resolves to: `classical` and `material` (built in) stay,
/// `best` becomes the best net's name (`classical` before any promotion), and anything else
/// must be a registered net.
pub async fn resolve_evaluation(lake: &Lake, requested: &str) -> Result<String, JobError> {
    match requested {
        "classical" | "material" => Ok(requested.to_string()),
        "best" => Ok(read_best(lake)
            .await?
            .map_or_else(|| "classical".to_string(), |b| b.name)),
        name => {
            let m = read_net(lake, name)
                .await
                .map_err(|e| JobError::Payload(format!("{requested}: {e}")))?
                .ok_or_else(|| {
                    JobError::Payload(format!(
                        "net {name} is not registered (expected a registered net, best, \
                         classical or material)"
                    ))
                })?;
            Ok(m.name)
        }
    }
}

/// The hand-written evaluators, known without a lake: `classical` and `material`.
pub fn builtin_evaluator(name: &str) -> Option<lakefish_engine::eval::Evaluator> {
    use lakefish_engine::eval::Evaluator;
    match name {
        "classical" => Some(Evaluator::Classical),
        "material" => Some(Evaluator::Material),
        _ => None,
    }
}

/// Whether `name` can only mean an entry of the registry (`best` or `nn-...`), which
/// [`resolve_evaluation`] looks up in the lake.
pub fn names_a_registered_net(name: &str) -> bool {
    name == "best" || (name.starts_with("nn-") && !name.contains('/'))
}

/// The evaluator for a name from [`resolve_evaluation`]; nets are fetched and hash-checked.
pub async fn load_evaluator(
    lake: &Lake,
    name: &str,
) -> Result<lakefish_engine::eval::Evaluator, JobError> {
    use lakefish_engine::eval::Evaluator;
    if let Some(builtin) = builtin_evaluator(name) {
        return Ok(builtin);
    }
    let (manifest, bytes) = fetch_net(lake, name).await?;
    Evaluator::from_net_bytes(&bytes).map_err(|reason| JobError::Corrupt {
        what: "net",
        key: manifest.name.clone(),
        reason,
    })
}
