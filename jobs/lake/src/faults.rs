//! An object store that fails on purpose, for tests of what jobs do when storage misbehaves:
//! reads that break past a byte offset (a lake that stops answering mid-file), and a writer
//! that lands between another writer's read and its conditional write.

use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetRange, GetResult, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};
use std::sync::{Arc, Mutex};

#[derive(Debug, Default)]
pub struct FaultyStore {
    inner: object_store::memory::InMemory,
    /// Ranged reads that reach past this offset fail, as a store that stopped answering.
    pub fail_reads_past: Mutex<Option<u64>>,
    /// Written (plainly) just before the next conditional write: a racing writer.
    pub race_next_conditional_put: Mutex<Option<(Path, Bytes)>>,
}

impl FaultyStore {
    pub fn new() -> Arc<FaultyStore> {
        Arc::new(FaultyStore::default())
    }
}

impl std::fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FaultyStore")
    }
}

fn unavailable(what: String) -> object_store::Error {
    object_store::Error::Generic {
        store: "FaultyStore",
        source: what.into(),
    }
}

#[async_trait::async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        if !matches!(opts.mode, object_store::PutMode::Overwrite) {
            let race = self.race_next_conditional_put.lock().unwrap().take();
            if let Some((key, bytes)) = race {
                self.inner
                    .put_opts(&key, bytes.into(), PutOptions::default())
                    .await?;
            }
        }
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let limit = *self.fail_reads_past.lock().unwrap();
        if let (Some(limit), Some(GetRange::Bounded(r))) = (limit, &options.range)
            && r.end > limit
        {
            return Err(unavailable(format!(
                "{location}: connection reset (bytes {}..{})",
                r.start, r.end
            )));
        }
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}
