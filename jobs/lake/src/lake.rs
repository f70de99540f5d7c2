//! The lake: object storage behind one small API.
//!
//! A local directory by default (`./lake`), any S3-compatible store with `s3://bucket/prefix`
//! (credentials, endpoint and `AWS_ALLOW_HTTP` come from the usual `AWS_*` variables).
//!
//! Architecture invariant: every write is a single `put` of a whole object, so an object is
//! visible whole or not at all (S3 PUT semantics; the local store writes a staging file and
//! renames it).

use crate::JobError;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::prefix::PrefixStore;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt, PutPayload};
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

/// Requests a job keeps in flight at once where it has many objects to move.
pub const CONCURRENT_REQUESTS: usize = 16;

#[derive(Clone, Debug)]
pub struct Lake {
    store: Arc<dyn ObjectStore>,
    description: String,
    /// The directory of a local lake: its conditional updates are serialised by a lock file
    /// there, as the local object store cannot compare-and-swap by itself.
    local_dir: Option<std::path::PathBuf>,
    /// The catalogue index kept beside the lake (the metastore's), if the process has one.
    catalog: Option<crate::catalog::CatalogHandle>,
}

/// Which version of an object was read: its ETag (and the store's version id where it keeps
/// versions). A conditional write succeeds only while the object is still this version.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Version {
    pub e_tag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// SHA-256 of the bytes read, where they were read whole: a local lake's ETag (inode,
    /// coarse mtime, size) can repeat after two quick writes, the content cannot differ.
    #[serde(skip)]
    content: Option<[u8; 32]>,
}

impl Version {
    fn of(meta: &ObjectMeta) -> Version {
        Version {
            e_tag: meta.e_tag.clone(),
            version: meta.version.clone(),
            content: None,
        }
    }

    fn with_content(mut self, bytes: &[u8]) -> Version {
        use sha2::Digest;
        self.content = Some(sha2::Sha256::digest(bytes).into());
        self
    }

    /// Is `current` (read whole just now) still the version `self` was?
    fn still(&self, current: &Version) -> bool {
        match (self.content, current.content) {
            (Some(a), Some(b)) => a == b,
            _ => self.e_tag == current.e_tag && self.version == current.version,
        }
    }

    fn to_update(&self) -> object_store::UpdateVersion {
        object_store::UpdateVersion {
            e_tag: self.e_tag.clone(),
            version: self.version.clone(),
        }
    }
}

/// The file in a local lake's directory whose `flock` serialises conditional updates. The
/// `#0` suffix hides it from listings (the local store's staging-file convention).
const LOCAL_CAS_LOCK: &str = "_cas.lock#0";

/// How long a request to S3 keeps trying before the job sees an error: the store may be
/// unreachable for a while (a restart, a network blip) without failing work. Backoff grows
/// from 250 ms to 5 s between tries; after two minutes, or 40 tries, the error surfaces and
/// names the request.
pub const S3_RETRY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

fn s3_retry() -> object_store::RetryConfig {
    object_store::RetryConfig {
        backoff: object_store::BackoffConfig {
            init_backoff: std::time::Duration::from_millis(250),
            max_backoff: std::time::Duration::from_secs(5),
            base: 3.0,
        },
        max_retries: 40,
        retry_timeout: S3_RETRY_TIMEOUT,
    }
}

impl Lake {
    /// Opens `spec`: a directory path (created if missing) or `s3://bucket[/prefix]`.
    /// `env` supplies the `AWS_*` settings for S3 (pass `std::env::vars()` at the edge).
    pub fn open(spec: &str, env: &HashMap<String, String>) -> Result<Lake, JobError> {
        let err = |reason: String| JobError::LakeConfig {
            spec: spec.to_string(),
            reason,
        };
        if let Some(rest) = spec.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(err("no bucket name after s3://".into()));
            }
            let mut builder = AmazonS3Builder::new()
                .with_bucket_name(bucket)
                .with_retry(s3_retry());
            for (k, v) in env {
                if let Ok(key) = k.to_ascii_lowercase().parse() {
                    builder = builder.with_config(key, v);
                }
            }
            let s3 = builder.build().map_err(|e| err(e.to_string()))?;
            let prefix = prefix.trim_matches('/');
            let store: Arc<dyn ObjectStore> = if prefix.is_empty() {
                Arc::new(s3)
            } else {
                Arc::new(PrefixStore::new(s3, prefix))
            };
            return Ok(Lake {
                store,
                description: spec.to_string(),
                local_dir: None,
                catalog: None,
            });
        }
        if spec.contains("://") {
            return Err(err(
                "unsupported scheme: use a directory path or s3://bucket/prefix".into(),
            ));
        }
        std::fs::create_dir_all(spec).map_err(|e| err(e.to_string()))?;
        let dir = std::fs::canonicalize(spec).map_err(|e| err(e.to_string()))?;
        // Automatic cleanup removes directories emptied by deletes, as on a real object store.
        let local = LocalFileSystem::new_with_prefix(&dir)
            .map_err(|e| err(e.to_string()))?
            .with_automatic_cleanup(true);
        Ok(Lake {
            store: Arc::new(local),
            description: dir.display().to_string(),
            local_dir: Some(dir),
            catalog: None,
        })
    }

    /// Removes the staging files (`NAME#N`) that uploads into `prefix` left behind when their
    /// process died mid-stream, if untouched for `older_than` (a live upload writes to its
    /// file as parts arrive). Only a local lake has them: S3 keeps no partial object. Returns
    /// the keys removed.
    pub fn sweep_staging(
        &self,
        prefix: &str,
        older_than: std::time::Duration,
    ) -> Result<Vec<String>, JobError> {
        let Some(root) = &self.local_dir else {
            return Ok(Vec::new());
        };
        let io = |e: std::io::Error, p: &std::path::Path| {
            JobError::lake(
                "sweep",
                p.display().to_string(),
                object_store::Error::Generic {
                    store: "lake",
                    source: Box::new(e),
                },
            )
        };
        let mut removed = Vec::new();
        let mut dirs = vec![root.join(prefix)];
        while let Some(dir) = dirs.pop() {
            let entries = match std::fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io(e, &dir)),
            };
            for entry in entries {
                let entry = entry.map_err(|e| io(e, &dir))?;
                let path = entry.path();
                let meta = entry.metadata().map_err(|e| io(e, &path))?;
                if meta.is_dir() {
                    dirs.push(path);
                    continue;
                }
                let name = entry.file_name().to_string_lossy().into_owned();
                let staging = name.rsplit_once('#').is_some_and(|(base, n)| {
                    !base.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
                });
                let idle = meta
                    .modified()
                    .ok()
                    .and_then(|m| m.elapsed().ok())
                    .is_some_and(|age| age >= older_than);
                if staging && idle && name != LOCAL_CAS_LOCK {
                    std::fs::remove_file(&path).map_err(|e| io(e, &path))?;
                    let key = path.strip_prefix(root).unwrap_or(&path);
                    removed.push(key.display().to_string());
                }
            }
        }
        removed.sort();
        Ok(removed)
    }

    /// An in-memory lake, for tests and dry runs.
    pub fn in_memory() -> Lake {
        Lake::from_store(Arc::new(object_store::memory::InMemory::new()), "memory")
    }

    /// A lake on any object store that can compare-and-swap by itself (S3, memory, or a
    /// test's wrapper around them).
    pub fn from_store(store: Arc<dyn ObjectStore>, description: &str) -> Lake {
        Lake {
            store,
            description: description.to_string(),
            local_dir: None,
            catalog: None,
        }
    }

    /// This lake with a catalogue index: writers index what they commit, lists read the index.
    pub fn with_catalog(mut self, catalog: crate::catalog::CatalogHandle) -> Lake {
        self.catalog = Some(catalog);
        self
    }

    /// This lake without its catalogue (what a rebuild reads: the lake alone).
    pub fn without_catalog(mut self) -> Lake {
        self.catalog = None;
        self
    }

    pub fn catalog(&self) -> Option<&crate::catalog::CatalogHandle> {
        self.catalog.as_ref()
    }

    pub fn describe(&self) -> &str {
        &self.description
    }

    pub async fn put(&self, key: &str, bytes: impl Into<Bytes>) -> Result<(), JobError> {
        let payload = PutPayload::from_bytes(bytes.into());
        self.store
            .put(&Path::from(key), payload)
            .await
            .map_err(|e| JobError::lake("put", key, e))?;
        Ok(())
    }

    /// Writes `key` only if it does not exist yet (atomically, also on S3). `Ok(false)` when
    /// another writer got there first.
    pub async fn put_if_absent(
        &self,
        key: &str,
        bytes: impl Into<Bytes>,
    ) -> Result<bool, JobError> {
        // Under the local lock too: a compare-and-swap must not see the object appear
        // between its check and its write.
        let _lock = match &self.local_dir {
            Some(dir) => Some(lock_file(dir.join(LOCAL_CAS_LOCK)).await?),
            None => None,
        };
        let bytes: Bytes = bytes.into();
        let payload = PutPayload::from_bytes(bytes.clone());
        let opts = object_store::PutOptions::from(object_store::PutMode::Create);
        match self.store.put_opts(&Path::from(key), payload, opts).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => self.landed(key, &bytes).await,
            Err(e) => Err(JobError::lake("put", key, e)),
        }
    }

    /// After a conditional write was refused: did an earlier try of the same request land?
    /// (The S3 client retries a request whose answer was lost; the retry then finds the
    /// object written and is refused.) The callers' writes carry unique contents (tokens,
    /// attempts, times), so equal bytes mean the write was theirs.
    async fn landed(&self, key: &str, bytes: &Bytes) -> Result<bool, JobError> {
        Ok(self.get(key).await?.as_ref() == Some(bytes))
    }

    /// Deletes `key` only while it is still `expected`. On a local lake this is exact (under
    /// the compare-and-swap lock); object stores have no conditional delete, so there the
    /// check and the delete are two requests.
    pub async fn delete_if_unchanged(
        &self,
        key: &str,
        expected: &Version,
    ) -> Result<bool, JobError> {
        let _lock = match &self.local_dir {
            Some(dir) => Some(lock_file(dir.join(LOCAL_CAS_LOCK)).await?),
            None => None,
        };
        match self.get_versioned(key).await? {
            Some((_, now)) if expected.still(&now) => {
                self.delete_unlocked(key).await?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// The whole object and the version read, or `None` when it does not exist.
    pub async fn get_versioned(&self, key: &str) -> Result<Option<(Bytes, Version)>, JobError> {
        match self.store.get(&Path::from(key)).await {
            Ok(r) => {
                let version = Version::of(&r.meta);
                let bytes = r.bytes().await.map_err(|e| JobError::lake("get", key, e))?;
                let version = version.with_content(&bytes);
                Ok(Some((bytes, version)))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(JobError::lake("get", key, e)),
        }
    }

    /// Compare-and-swap: writes `key` only while it is still `expected` (`None`: only while
    /// it does not exist). `Ok(false)` when another writer changed it first; the caller reads
    /// again and decides again.
    pub async fn put_if_unchanged(
        &self,
        key: &str,
        bytes: impl Into<Bytes>,
        expected: Option<&Version>,
    ) -> Result<bool, JobError> {
        let Some(expected) = expected else {
            return self.put_if_absent(key, bytes).await;
        };
        if let Some(dir) = &self.local_dir {
            let _lock = lock_file(dir.join(LOCAL_CAS_LOCK)).await?;
            match self.get_versioned(key).await? {
                Some((_, now)) if expected.still(&now) => {}
                _ => return Ok(false),
            }
            self.put(key, bytes).await?;
            return Ok(true);
        }
        let payload = PutPayload::from_bytes(bytes.into());
        let opts =
            object_store::PutOptions::from(object_store::PutMode::Update(expected.to_update()));
        match self.store.put_opts(&Path::from(key), payload, opts).await {
            Ok(_) => Ok(true),
            Err(
                object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. },
            ) => Ok(false),
            Err(e) => Err(JobError::lake("put", key, e)),
        }
    }

    /// Writes a stream of bytes as one object (multipart above a few MiB), in constant memory.
    /// The object appears only when the stream ended cleanly; on any error the upload is
    /// aborted and nothing becomes visible. Returns the number of bytes written.
    pub async fn put_stream<S, E>(&self, key: &str, stream: S) -> Result<u64, JobError>
    where
        S: futures::Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        self.put_stream_capped(key, stream, u64::MAX).await
    }

    /// [`Lake::put_stream`] that stops at `max` bytes: a longer stream is
    /// [`JobError::TooLarge`] and nothing becomes visible.
    pub async fn put_stream_capped<S, E>(
        &self,
        key: &str,
        mut stream: S,
        max: u64,
    ) -> Result<u64, JobError>
    where
        S: futures::Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        use futures::StreamExt;
        use tokio::io::AsyncWriteExt;
        let mut w = object_store::buffered::BufWriter::new(self.store.clone(), Path::from(key));
        let mut total = 0u64;
        let mut failure = None;
        while let Some(piece) = stream.next().await {
            let outcome = match piece {
                Ok(bytes) => {
                    total += bytes.len() as u64;
                    if total > max {
                        Err(JobError::TooLarge {
                            input: key.to_string(),
                            max,
                        })
                    } else {
                        w.put(bytes)
                            .await
                            .map_err(|e| JobError::lake("put", key, e))
                    }
                }
                Err(e) => Err(JobError::Input {
                    input: key.to_string(),
                    reason: format!("upload interrupted after {total} bytes: {e}"),
                }),
            };
            if let Err(e) = outcome {
                failure = Some(e);
                break;
            }
        }
        if let Some(e) = failure {
            let _ = w.abort().await;
            return Err(e);
        }
        w.shutdown().await.map_err(|e| JobError::Lake {
            op: "put",
            key: key.to_string(),
            source: object_store::Error::Generic {
                store: "lake",
                source: Box::new(e),
            },
        })?;
        Ok(total)
    }

    /// Stores an upload under an immutable name: a new name is written (at most `max`
    /// bytes), the same bytes again change nothing, other bytes are
    /// [`JobError::ObjectExists`] and are only hashed as they stream by, never stored;
    /// `replace` writes them as a new version. Declared lengths that differ are refused
    /// before reading.
    pub async fn put_immutable<S, E>(
        &self,
        key: &str,
        stream: S,
        declared: Option<u64>,
        max: u64,
        replace: bool,
    ) -> Result<Stored, JobError>
    where
        S: futures::Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        use sha2::Digest;
        if declared.is_some_and(|n| n > max) {
            return Err(JobError::TooLarge {
                input: key.to_string(),
                max,
            });
        }
        let existing = if replace { None } else { self.size(key).await? };
        if existing.is_some() && declared.is_some_and(|n| Some(n) != existing) {
            return Err(JobError::ObjectExists {
                key: key.to_string(),
            });
        }
        let hasher = Arc::new(std::sync::Mutex::new(sha2::Sha256::new()));
        let stream = {
            let hasher = hasher.clone();
            stream.map(move |piece| {
                if let Ok(bytes) = &piece {
                    hasher.lock().unwrap().update(bytes);
                }
                piece
            })
        };
        let bytes = match existing {
            None => self.put_stream_capped(key, stream, max).await?,
            Some(_) => drain_capped(key, stream, max).await?,
        };
        let sha256: [u8; 32] = std::mem::take(&mut *hasher.lock().unwrap())
            .finalize()
            .into();
        if existing.is_some() && self.sha256(key).await? != Some((bytes, sha256)) {
            return Err(JobError::ObjectExists {
                key: key.to_string(),
            });
        }
        Ok(Stored {
            bytes,
            sha256,
            created: existing.is_none(),
        })
    }

    /// The whole object, or `None` when it does not exist.
    pub async fn get(&self, key: &str) -> Result<Option<Bytes>, JobError> {
        match self.store.get(&Path::from(key)).await {
            Ok(r) => Ok(Some(
                r.bytes().await.map_err(|e| JobError::lake("get", key, e))?,
            )),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(JobError::lake("get", key, e)),
        }
    }

    /// Several whole objects, in the order of `keys`, fetched [`CONCURRENT_REQUESTS`] at a
    /// time: on S3 one request after another spends most of its time waiting.
    pub async fn get_many(&self, keys: &[String]) -> Result<Vec<Option<Bytes>>, JobError> {
        futures::stream::iter(keys.iter().map(|k| self.get(k)))
            .buffered(CONCURRENT_REQUESTS)
            .try_collect()
            .await
    }

    /// Writes several objects, [`CONCURRENT_REQUESTS`] at a time; each is still one `put`.
    pub async fn put_many(&self, objects: Vec<(String, Bytes)>) -> Result<(), JobError> {
        futures::stream::iter(
            objects
                .into_iter()
                .map(|(k, b)| async move { self.put(&k, b).await }),
        )
        .buffer_unordered(CONCURRENT_REQUESTS)
        .try_collect::<()>()
        .await
    }

    /// Deletes every key given (bulk deletes on S3); keys already gone are fine.
    pub async fn delete_many(&self, keys: Vec<String>) -> Result<(), JobError> {
        let paths = futures::stream::iter(keys.into_iter().map(|k| Ok(Path::from(k)))).boxed();
        let mut results = self.store.delete_stream(paths);
        while let Some(r) = results.next().await {
            match r {
                Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(JobError::lake("delete", "(bulk delete)", e)),
            }
        }
        Ok(())
    }

    /// A JSON document (manifest, record), or `None` when it does not exist. A document that
    /// does not parse is an error naming `what` and the key.
    pub async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        key: &str,
        what: &'static str,
    ) -> Result<Option<T>, JobError> {
        let Some(bytes) = self.get(key).await? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| JobError::Corrupt {
                what,
                key: key.to_string(),
                reason: e.to_string(),
            })
    }

    pub async fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes, JobError> {
        self.store
            .get_range(&Path::from(key), range)
            .await
            .map_err(|e| JobError::lake("get", key, e))
    }

    /// `range` of `key` while it is still `version`: a job reads one version of an input
    /// from its first byte to its last, even when the object is replaced meanwhile.
    pub async fn get_range_of(
        &self,
        key: &str,
        range: Range<u64>,
        version: &Version,
    ) -> Result<Bytes, JobError> {
        let opts = object_store::GetOptions {
            range: Some(range.into()),
            if_match: version.e_tag.clone(),
            version: version.version.clone(),
            ..Default::default()
        };
        match self.store.get_opts(&Path::from(key), opts).await {
            Ok(r) => r.bytes().await.map_err(|e| JobError::lake("get", key, e)),
            Err(
                object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. },
            ) => Err(JobError::Retry(format!(
                "lake object {key} was replaced or deleted while this job read it"
            ))),
            Err(e) => Err(JobError::lake("get", key, e)),
        }
    }

    /// Size and SHA-256 of an object's bytes (read through once, in constant memory), or
    /// `None` when it does not exist.
    pub async fn sha256(&self, key: &str) -> Result<Option<(u64, [u8; 32])>, JobError> {
        use sha2::Digest;
        let r = match self.store.get(&Path::from(key)).await {
            Ok(r) => r,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(JobError::lake("get", key, e)),
        };
        let mut stream = r.into_stream();
        let mut hasher = sha2::Sha256::new();
        let mut len = 0u64;
        while let Some(piece) = stream.next().await {
            let piece = piece.map_err(|e| JobError::lake("get", key, e))?;
            len += piece.len() as u64;
            hasher.update(&piece);
        }
        Ok(Some((len, hasher.finalize().into())))
    }

    /// Size and version of an object, or `None` when it does not exist.
    pub async fn head(&self, key: &str) -> Result<Option<(u64, Version)>, JobError> {
        match self.store.head(&Path::from(key)).await {
            Ok(m) => Ok(Some((m.size, Version::of(&m)))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(JobError::lake("head", key, e)),
        }
    }

    /// Size of an object, or `None` when it does not exist.
    pub async fn size(&self, key: &str) -> Result<Option<u64>, JobError> {
        match self.store.head(&Path::from(key)).await {
            Ok(m) => Ok(Some(m.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(JobError::lake("head", key, e)),
        }
    }

    /// Every object under `prefix` (recursively), sorted by key.
    pub async fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>, JobError> {
        let p = Path::from(prefix);
        let mut all: Vec<ObjectMeta> = self
            .store
            .list(Some(&p))
            .try_collect()
            .await
            .map_err(|e| JobError::lake("list", prefix, e))?;
        all.sort_by(|a, b| a.location.cmp(&b.location));
        Ok(all)
    }

    /// One level under `prefix`: its objects and its "sub-directories".
    async fn one_level(&self, prefix: &str) -> Result<object_store::ListResult, JobError> {
        self.store
            .list_with_delimiter(Some(&Path::from(prefix)))
            .await
            .map_err(|e| JobError::lake("list", prefix, e))
    }

    /// The objects directly under `prefix` (not in its subdirectories).
    pub async fn list_files(&self, prefix: &str) -> Result<Vec<ObjectMeta>, JobError> {
        let mut files = self.one_level(prefix).await?.objects;
        files.sort_by(|a, b| a.location.cmp(&b.location));
        Ok(files)
    }

    /// The immediate "sub-directories" of `prefix`, as full keys.
    pub async fn list_dirs(&self, prefix: &str) -> Result<Vec<String>, JobError> {
        let r = self.one_level(prefix).await?;
        let mut dirs: Vec<String> = r.common_prefixes.iter().map(|p| p.to_string()).collect();
        dirs.sort();
        Ok(dirs)
    }

    pub async fn delete(&self, key: &str) -> Result<(), JobError> {
        // On a local lake, not between a compare-and-swap's check and its write.
        let _lock = match &self.local_dir {
            Some(dir) => Some(lock_file(dir.join(LOCAL_CAS_LOCK)).await?),
            None => None,
        };
        self.delete_unlocked(key).await
    }

    async fn delete_unlocked(&self, key: &str) -> Result<(), JobError> {
        match self.store.delete(&Path::from(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(JobError::lake("delete", key, e)),
        }
    }

    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }
}

/// What [`Lake::put_immutable`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    pub bytes: u64,
    pub sha256: [u8; 32],
    /// False when the same bytes were already stored under the name (nothing written).
    pub created: bool,
}

impl Stored {
    pub fn sha256_hex(&self) -> String {
        self.sha256.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Drains an upload that will not be stored, counting (and so capping) its bytes.
async fn drain_capped<S, E>(key: &str, mut stream: S, max: u64) -> Result<u64, JobError>
where
    S: futures::Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let mut total = 0u64;
    while let Some(piece) = stream.next().await {
        let piece = piece.map_err(|e| JobError::Input {
            input: key.to_string(),
            reason: format!("upload interrupted after {total} bytes: {e}"),
        })?;
        total += piece.len() as u64;
        if total > max {
            return Err(JobError::TooLarge {
                input: key.to_string(),
                max,
            });
        }
    }
    Ok(total)
}

/// An exclusive `flock` on `path` (created if missing), held until the file is dropped.
async fn lock_file(path: std::path::PathBuf) -> Result<std::fs::File, JobError> {
    let shown = path.display().to_string();
    tokio::task::spawn_blocking(move || {
        use std::os::fd::AsRawFd;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)?;
        // SAFETY: a valid open descriptor; LOCK_EX blocks until no other holder remains.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(file)
    })
    .await
    .map_err(|e| JobError::Internal(format!("lock thread: {e}")))?
    .map_err(|e| JobError::Internal(format!("cannot lock {shown}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn conformance(lake: &Lake) {
        assert_eq!(lake.get("a/b.json").await.unwrap(), None);
        lake.put("a/b.json", Bytes::from_static(b"hello"))
            .await
            .unwrap();
        lake.put("a/c/d.json", Bytes::from_static(b"x"))
            .await
            .unwrap();
        assert_eq!(lake.get("a/b.json").await.unwrap().unwrap(), "hello");
        assert_eq!(lake.size("a/b.json").await.unwrap(), Some(5));
        assert_eq!(lake.get_range("a/b.json", 1..3).await.unwrap(), "el");
        let keys: Vec<String> = lake
            .list("a")
            .await
            .unwrap()
            .iter()
            .map(|m| m.location.to_string())
            .collect();
        assert_eq!(keys, ["a/b.json", "a/c/d.json"]);
        assert_eq!(lake.list_dirs("a").await.unwrap(), ["a/c"]);
        let pieces = (0..5).map(|i| Ok::<_, String>(Bytes::from(vec![i as u8; 3 << 20])));
        let n = lake
            .put_stream("big/obj", futures::stream::iter(pieces))
            .await
            .unwrap();
        assert_eq!(n, 15 << 20);
        assert_eq!(
            lake.get_range("big/obj", (9 << 20)..(9 << 20) + 2)
                .await
                .unwrap(),
            vec![3u8, 3]
        );
        let broken = futures::stream::iter([
            Ok(Bytes::from(vec![1u8; 6 << 20])),
            Err("client went away".to_string()),
        ]);
        let e = lake
            .put_stream("big/broken", broken)
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("client went away"), "{e}");
        assert_eq!(
            lake.size("big/broken").await.unwrap(),
            None,
            "no partial object"
        );
        lake.delete("big/obj").await.unwrap();
        assert!(
            lake.put_if_absent("lock", Bytes::from_static(b"1"))
                .await
                .unwrap()
        );
        assert!(
            !lake
                .put_if_absent("lock", Bytes::from_static(b"2"))
                .await
                .unwrap()
        );
        assert_eq!(lake.get("lock").await.unwrap().unwrap(), "1");
        lake.delete("lock").await.unwrap();

        // Compare-and-swap: only the writer holding the current version wins.
        assert!(lake.put_if_unchanged("rec", "v1", None).await.unwrap());
        assert!(!lake.put_if_unchanged("rec", "v1'", None).await.unwrap());
        let (bytes, v1) = lake.get_versioned("rec").await.unwrap().unwrap();
        assert_eq!(bytes, "v1");
        assert!(lake.put_if_unchanged("rec", "v2", Some(&v1)).await.unwrap());
        assert!(
            !lake
                .put_if_unchanged("rec", "lost", Some(&v1))
                .await
                .unwrap(),
            "a stale version must not overwrite"
        );
        let (bytes, v2) = lake.get_versioned("rec").await.unwrap().unwrap();
        assert_eq!(bytes, "v2");
        assert_ne!(v1, v2);
        // Pinned reads: the version read first, or an error asking for a retry.
        assert_eq!(lake.get_range_of("rec", 0..1, &v2).await.unwrap(), "v");
        lake.put("rec", "v3 is longer").await.unwrap();
        let e = lake.get_range_of("rec", 0..1, &v2).await.unwrap_err();
        assert!(
            e.is_transient() && e.to_string().contains("replaced"),
            "{e}"
        );
        lake.delete("rec").await.unwrap();
        assert!(!lake.put_if_unchanged("rec", "x", Some(&v2)).await.unwrap());
        assert_eq!(lake.get("rec").await.unwrap(), None);
        lake.delete("a/b.json").await.unwrap();
        lake.delete("a/b.json").await.unwrap();
        assert_eq!(lake.size("a/b.json").await.unwrap(), None);
    }

    /// Many writers each add one to a counter by compare-and-swap: none is lost.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_compare_and_swap_loses_no_update() {
        let dir = tempfile::tempdir().unwrap();
        let local = Lake::open(dir.path().join("lake").to_str().unwrap(), &HashMap::new()).unwrap();
        for lake in [Lake::in_memory(), local] {
            lake.put("n", "0").await.unwrap();
            let adders = (0..8).map(|_| {
                let lake = lake.clone();
                tokio::spawn(async move {
                    for _ in 0..10 {
                        loop {
                            let (b, v) = lake.get_versioned("n").await.unwrap().unwrap();
                            let n: u32 = std::str::from_utf8(&b).unwrap().parse().unwrap();
                            let next = (n + 1).to_string();
                            if lake.put_if_unchanged("n", next, Some(&v)).await.unwrap() {
                                break;
                            }
                        }
                    }
                })
            });
            for a in adders.collect::<Vec<_>>() {
                a.await.unwrap();
            }
            assert_eq!(
                lake.get("n").await.unwrap().unwrap(),
                "80",
                "{}",
                lake.describe()
            );
            // The lock file stays out of listings.
            assert!(
                lake.list("")
                    .await
                    .unwrap()
                    .iter()
                    .all(|m| !m.location.as_ref().contains("cas"))
            );
        }
    }

    #[tokio::test]
    async fn memory_and_local_lakes_behave_alike() {
        conformance(&Lake::in_memory()).await;
        let dir = tempfile::tempdir().unwrap();
        let lake = Lake::open(dir.path().join("lake").to_str().unwrap(), &HashMap::new()).unwrap();
        conformance(&lake).await;
    }

    #[test]
    fn bad_specs_are_named() {
        let e = Lake::open("gs://x", &HashMap::new())
            .unwrap_err()
            .to_string();
        assert!(e.contains("unsupported scheme"), "{e}");
        let e = Lake::open("s3://", &HashMap::new())
            .unwrap_err()
            .to_string();
        assert!(e.contains("no bucket"), "{e}");
    }
}
