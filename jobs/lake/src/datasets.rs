//! Committed datasets of the `positions` table, found through their manifests.

use crate::{JobError, Lake};
use lakefish_schemas::dataset::MANIFEST_FILE;
use lakefish_schemas::positions::dataset_prefix;
use lakefish_schemas::{DatasetManifest, DatasetName, Source};
use serde::Serialize;

pub fn manifest_key(source: Source, dataset: &DatasetName) -> String {
    format!("{}/{MANIFEST_FILE}", dataset_prefix(source, dataset))
}

pub async fn read_manifest(
    lake: &Lake,
    source: Source,
    dataset: &DatasetName,
) -> Result<Option<DatasetManifest>, JobError> {
    lake.get_json(&manifest_key(source, dataset), "dataset manifest")
        .await
}

#[derive(Debug, Clone, Serialize, PartialEq)]
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
}

/// Every committed dataset, by source then name.
pub async fn list_datasets(lake: &Lake) -> Result<Vec<DatasetSummary>, JobError> {
    let mut out = Vec::new();
    let mask_names: Vec<String> = lake
        .list_dirs("masks")
        .await?
        .iter()
        .filter_map(|d| d.rsplit('/').next().map(str::to_string))
        .collect();
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
            let Some(name) = ds_dir
                .rsplit('/')
                .next()
                .and_then(|s| s.strip_prefix("dataset="))
                .and_then(|s| DatasetName::new(s).ok())
            else {
                continue;
            };
            if let Some(m) = read_manifest(lake, source, &name).await? {
                let mut masks = Vec::new();
                for mask in &mask_names {
                    let key = format!(
                        "masks/{mask}/source={source}/dataset={name}/{}",
                        lakefish_schemas::mask::MASK_MANIFEST_FILE
                    );
                    if lake.size(&key).await?.is_some() {
                        masks.push(mask.clone());
                    }
                }
                out.push(DatasetSummary {
                    name,
                    source,
                    rows: m.rows,
                    bytes: m.bytes,
                    partitions: m.parts.len(),
                    created: m.created,
                    job_id: m.job_id.to_string(),
                    skipped_ranges: m.inputs.iter().map(|i| i.skipped.len()).sum(),
                    masks,
                });
            }
        }
    }
    Ok(out)
}
