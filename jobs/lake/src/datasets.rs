//! Committed datasets of the `positions` table, found through their manifests.

use crate::catalog::{CatalogEntry, CatalogKind, CatalogQuery};
use crate::{JobError, Lake};
use lakefish_schemas::dataset::MANIFEST_FILE;
use lakefish_schemas::positions::dataset_prefix;
use lakefish_schemas::{DatasetManifest, DatasetName, Source};
use serde::{Deserialize, Serialize};

/// Names the job that may write a dataset until it commits (a [`WriterClaim`]).
pub const WRITER_FILE: &str = "_writer";

/// How long a writer's claim on a dataset lasts without renewal. The writer renews it
/// every [`CLAIM_RENEWAL`]; a claim past its expiry was left by a writer that died or
/// stalled, and the next writer takes it over.
pub const CLAIM_LEASE: chrono::Duration = chrono::Duration::minutes(5);
pub const CLAIM_RENEWAL: std::time::Duration = std::time::Duration::from_secs(30);

/// The `_writer` object of a dataset being written: a lease with an owner and an expiry.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct WriterClaim {
    /// The job writing the dataset.
    pub job: String,
    /// The process holding the claim (`host:pid`), for the operator.
    pub owner: String,
    /// RFC 3339; after this the claim is stale and may be taken over.
    pub expires: String,
    /// Unique to one writer (one delivery of one job): renewal, release and the commit
    /// check it, so a second delivery of the same job is not mistaken for the first.
    #[serde(default)]
    pub token: String,
}

impl WriterClaim {
    /// A claim by `job` from this process with `token`, valid for [`CLAIM_LEASE`] from now.
    pub fn new(job: &str, token: &str) -> WriterClaim {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "unknown-host".into());
        WriterClaim {
            job: job.to_string(),
            owner: format!("{host}:{}", std::process::id()),
            expires: (chrono::Utc::now() + CLAIM_LEASE)
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            token: token.to_string(),
        }
    }

    /// Reads a stored claim. Older versions stored the bare job id, without expiry: such a
    /// claim counts as stale (its writer cannot renew it).
    pub fn parse(bytes: &[u8]) -> WriterClaim {
        serde_json::from_slice(bytes).unwrap_or_else(|_| WriterClaim {
            // Only the characters of a job id: the object's bytes are not repeated as-is.
            job: String::from_utf8_lossy(bytes)
                .chars()
                .filter(|c| c.is_ascii_hexdigit() || *c == '-')
                .take(36)
                .collect(),
            owner: "unknown (a claim from an older version)".into(),
            expires: String::new(),
            token: String::new(),
        })
    }

    pub fn is_stale(&self) -> bool {
        chrono::DateTime::parse_from_rfc3339(&self.expires).map_or(true, |t| t < chrono::Utc::now())
    }
}

/// A dataset claimed by a writer and not committed yet, as `GET /v1/datasets` lists it.
#[derive(Debug, Clone, Serialize, PartialEq, schemars::JsonSchema)]
pub struct ClaimSummary {
    pub name: DatasetName,
    pub source: Source,
    #[serde(flatten)]
    pub claim: WriterClaim,
    /// True when the claim expired: its writer is gone, and the next ingest of this
    /// dataset takes the claim over.
    pub stale: bool,
}

pub fn manifest_key(source: Source, dataset: &DatasetName) -> String {
    format!("{}/{MANIFEST_FILE}", dataset_prefix(source, dataset))
}

/// The error for a dataset that is not committed under `source`, with a hint when one of
/// that name exists under another source (`--source lichess`).
pub async fn no_such_dataset(lake: &Lake, source: Source, dataset: &DatasetName) -> JobError {
    let mut elsewhere = Vec::new();
    for other in Source::ALL {
        if other != source && matches!(read_manifest(lake, other, dataset).await, Ok(Some(_))) {
            elsewhere.push(other.as_str());
        }
    }
    let hint = match elsewhere.as_slice() {
        [] => String::new(),
        found => format!(
            "; a dataset {dataset} exists with source {} (give --source {}, or \"source\" in a spec)",
            found.join(" and "),
            found[0]
        ),
    };
    JobError::Input {
        input: dataset_prefix(source, dataset),
        reason: format!("no such dataset (no committed manifest){hint}"),
    }
}

pub async fn read_manifest(
    lake: &Lake,
    source: Source,
    dataset: &DatasetName,
) -> Result<Option<DatasetManifest>, JobError> {
    lake.get_json(&manifest_key(source, dataset), "dataset manifest")
        .await
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct DatasetSummary {
    pub name: DatasetName,
    pub source: Source,
    pub rows: u64,
    pub bytes: u64,
    pub partitions: usize,
    pub created: String,
    pub job_id: String,
    /// Byte ranges of the inputs that could not be read.
    pub skipped_ranges: usize,
    /// Committed mask definitions for this dataset.
    pub masks: Vec<String>,
    /// A transformed dataset's origin: `<transform> of <source>/<dataset>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derived_from: Option<String>,
}

/// The dataset directories under `positions/`, by source then name.
async fn dataset_dirs(lake: &Lake) -> Result<Vec<(Source, DatasetName, String)>, JobError> {
    let mut out = Vec::new();
    for source_dir in lake.list_dirs("positions").await? {
        let Some(source) = source_dir
            .rsplit('/')
            .next()
            .and_then(|s| s.strip_prefix("source="))
            .and_then(Source::parse)
        else {
            continue;
        };
        for ds_dir in lake.list_dirs(&source_dir).await? {
            if let Some(name) = ds_dir
                .rsplit('/')
                .next()
                .and_then(|s| s.strip_prefix("dataset="))
                .and_then(|s| DatasetName::new(s).ok())
            {
                out.push((source, name, ds_dir));
            }
        }
    }
    Ok(out)
}

/// Every dataset being written (claimed, not committed), live or stale. With a catalogue,
/// only directories of datasets it does not list as committed are looked into.
pub async fn list_claims(lake: &Lake) -> Result<Vec<ClaimSummary>, JobError> {
    let committed: std::collections::HashSet<String> = match lake.catalog() {
        Some(catalog) => catalog
            .all(CatalogQuery::all(CatalogKind::Dataset))
            .await?
            .into_iter()
            .map(|e| e.name)
            .collect(),
        None => Default::default(),
    };
    let mut out = Vec::new();
    for (source, name, dir) in dataset_dirs(lake).await? {
        if committed.contains(&format!("{source}/{name}")) {
            continue;
        }
        if let Some(bytes) = lake.get(&format!("{dir}/{WRITER_FILE}")).await? {
            let claim = WriterClaim::parse(&bytes);
            out.push(ClaimSummary {
                name,
                source,
                stale: claim.is_stale(),
                claim,
            });
        }
    }
    Ok(out)
}

/// Every committed dataset, by source then name (from the catalogue when the lake has one).
pub async fn list_datasets(lake: &Lake) -> Result<Vec<DatasetSummary>, JobError> {
    if let Some(catalog) = lake.catalog() {
        let mut out: Vec<DatasetSummary> = catalog
            .decode_all(CatalogQuery::all(CatalogKind::Dataset))
            .await?;
        out.sort_by(|a, b| (a.source, &a.name).cmp(&(b.source, &b.name)));
        return Ok(out);
    }
    let mut out = Vec::new();
    for (source, name, _) in dataset_dirs(lake).await? {
        if let Some(summary) = dataset_summary(lake, source, &name).await? {
            out.push(summary);
        }
    }
    Ok(out)
}

/// One committed dataset as lists show it, with the masks committed for it (`None` before
/// its commit).
pub async fn dataset_summary(
    lake: &Lake,
    source: Source,
    name: &DatasetName,
) -> Result<Option<DatasetSummary>, JobError> {
    let Some(m) = read_manifest(lake, source, name).await? else {
        return Ok(None);
    };
    let mut masks = Vec::new();
    for mask_dir in lake.list_dirs("masks").await? {
        let Some(mask) = mask_dir.rsplit('/').next() else {
            continue;
        };
        let key = format!(
            "masks/{mask}/source={source}/dataset={name}/{}",
            lakefish_schemas::mask::MASK_MANIFEST_FILE
        );
        if lake.size(&key).await?.is_some() {
            masks.push(mask.to_string());
        }
    }
    Ok(Some(DatasetSummary {
        name: name.clone(),
        source,
        rows: m.rows,
        bytes: m.bytes,
        partitions: m.parts.len(),
        created: m.created,
        job_id: m.job_id.to_string(),
        skipped_ranges: m.inputs.iter().map(|i| i.skipped.len()).sum(),
        masks,
        derived_from: m
            .derived_from
            .as_ref()
            .map(|d| format!("{} of {}/{}", d.transform.name(), d.source, d.dataset)),
    }))
}

/// Indexes a committed dataset (after its commit, and after a mask for it is committed).
pub async fn index_dataset(
    lake: &Lake,
    source: Source,
    name: &DatasetName,
) -> Result<(), JobError> {
    if lake.catalog().is_none() {
        return Ok(());
    }
    if let Some(summary) = dataset_summary(lake, source, name).await? {
        lake.index(
            CatalogEntry::of(
                CatalogKind::Dataset,
                format!("{source}/{name}"),
                summary.created.clone(),
                &summary,
            )
            .with_rank(summary.masks.len() as i64)
            .with_state(source.as_str())
            .with_weight(summary.rows as i64),
        )
        .await?;
    }
    Ok(())
}

/// The rows of one part a dataset's manifest lists, checked against its row count; errors
/// name the part.
pub async fn read_part_rows(
    lake: &Lake,
    source: Source,
    dataset: &DatasetName,
    part: &lakefish_schemas::PartInfo,
) -> Result<Vec<crate::parts::PositionRow>, JobError> {
    let key = format!("{}/{}", dataset_prefix(source, dataset), part.name);
    let bytes = lake.get(&key).await?.ok_or_else(|| JobError::Corrupt {
        what: "dataset",
        key: key.clone(),
        reason: "a part listed in the manifest is missing".into(),
    })?;
    let rows = crate::parts::read_positions(bytes, &key)?;
    if rows.len() as u64 != part.rows {
        return Err(JobError::Corrupt {
            what: "positions part",
            key,
            reason: format!("has {} rows, the manifest says {}", rows.len(), part.rows),
        });
    }
    Ok(rows)
}
