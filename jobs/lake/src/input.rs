//! Input files of a job: a local path readable by the worker, or a lake object `lake:<key>`.
//! Both are read by random access so large files stream in pieces.

use crate::{JobContext, JobError, Lake};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Component, Path, PathBuf};

pub const LAKE_PREFIX: &str = "lake:";

/// Which local files a job may read. `lake:` objects are always allowed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum InputPolicy {
    /// Any file this process can read: a job the CLI runs in-process for its own user.
    #[default]
    Unconfined,
    /// Only files under these directories: work arriving through the API or the queue, whose
    /// caller may be anyone who can reach the service. `given` are the roots as configured
    /// (made absolute), for the check on the path a job names; `real` are the same roots
    /// resolved, for the check on where that path, and the file actually opened, lead.
    Confined {
        given: Vec<PathBuf>,
        real: Vec<PathBuf>,
    },
}

impl InputPolicy {
    /// The policy for `[inputs] local_roots`. A root that does not exist on this machine
    /// admits nothing (and is logged).
    pub fn confined(local_roots: &[String]) -> InputPolicy {
        let mut given = Vec::new();
        let mut real = Vec::new();
        for root in local_roots {
            match std::fs::canonicalize(root) {
                Ok(r) => {
                    given.extend(std::path::absolute(root).ok());
                    real.push(r);
                }
                Err(e) => tracing::warn!(root, "[inputs] local_roots entry admits nothing: {e}"),
            }
        }
        InputPolicy::Confined { given, real }
    }

    /// Why a local file is refused: the rule, never anything of the file.
    fn refusal(real: &[PathBuf]) -> String {
        let allowed = if real.is_empty() {
            "none are configured".to_string()
        } else {
            real.iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "local files are refused for work from the API or the queue: use lake: objects \
             (upload with PUT /v1/raw/...) or files under [inputs] local_roots ({allowed})"
        )
    }

    /// May a job read input `name`? The refusal names the rule, never anything of the file
    /// (not even whether it exists). [`Input::open`] checks the file it opened once more.
    pub fn check(&self, name: &str) -> Result<(), String> {
        let InputPolicy::Confined { given, real } = self else {
            return Ok(());
        };
        if name.starts_with(LAKE_PREFIX) {
            return Ok(());
        }
        let path = Path::new(name);
        // Lexically first: a path outside every root is refused without touching the disk.
        let plain = path.is_absolute()
            && !path
                .components()
                .any(|c| matches!(c, Component::ParentDir | Component::CurDir));
        let under = |p: &Path| given.iter().chain(real).any(|r| p.starts_with(r));
        if !plain || !under(path) {
            return Err(Self::refusal(real));
        }
        // Then resolved: a symlink under a root may point anywhere. A path that does not
        // resolve is left to the open, which reports it (it is under a root).
        match std::fs::canonicalize(path) {
            Ok(resolved) if !real.iter().any(|r| resolved.starts_with(r)) => {
                Err(Self::refusal(real))
            }
            _ => Ok(()),
        }
    }

    /// After the open: the file actually opened lies under a root (a symlink swapped in
    /// between the check and the open is caught here).
    fn check_opened(&self, file: &File) -> Result<(), String> {
        let InputPolicy::Confined { real, .. } = self else {
            return Ok(());
        };
        use std::os::fd::AsRawFd;
        match std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) {
            Ok(opened) if real.iter().any(|r| opened.starts_with(r)) => Ok(()),
            _ => Err(Self::refusal(real)),
        }
    }
}

/// An input opened for one job. Every read returns bytes of the version opened: a lake
/// object is read with its ETag as a precondition, a local file through the descriptor
/// opened (a file renamed over it is not seen) and checked unchanged at every read.
pub enum Input {
    Local {
        name: String,
        file: File,
        len: u64,
        stamp: FileStamp,
    },
    Lake {
        name: String,
        key: String,
        lake: Lake,
        rt: tokio::runtime::Handle,
        len: u64,
        version: crate::lake::Version,
    },
}

/// How a lake object's version is written in a manifest (`InputReport::version`).
pub fn lake_version(version: &crate::lake::Version) -> String {
    let mut v = format!("etag:{}", version.e_tag.as_deref().unwrap_or("none"));
    if let Some(id) = &version.version {
        v.push_str(&format!(";version:{id}"));
    }
    v
}

/// What identifies a local file's content without reading it, as make and rsync's quick
/// check do: size and modification time. Not the device or inode, so the same file seen by
/// another worker (NFS, a copy that keeps times) is the same input. Reads also check the
/// inode, to notice a file swapped in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStamp {
    len: u64,
    mtime_ns: i128,
    ino: u64,
}

impl FileStamp {
    fn of(meta: &std::fs::Metadata) -> FileStamp {
        use std::os::unix::fs::MetadataExt;
        FileStamp {
            len: meta.len(),
            mtime_ns: meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128,
            ino: meta.ino(),
        }
    }
}

impl Input {
    /// Opens `name` if `ctx.inputs` allows it (checked again here, on the worker: a queue
    /// can be written by other clients than the API).
    pub fn open(ctx: &JobContext, name: &str) -> Result<Input, JobError> {
        let input_err = |reason: String| JobError::Input {
            input: name.to_string(),
            reason,
        };
        ctx.inputs.check(name).map_err(input_err)?;
        if let Some(key) = name.strip_prefix(LAKE_PREFIX) {
            let (len, version) = ctx
                .block_on(ctx.lake.head(key))?
                .ok_or_else(|| input_err("no such object in the lake".into()))?;
            return Ok(Input::Lake {
                name: name.to_string(),
                key: key.to_string(),
                lake: ctx.lake.clone(),
                rt: ctx.rt.clone(),
                len,
                version,
            });
        }
        // Non-blocking, so a FIFO cannot hold the worker; then judged by what was opened.
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(name)
            .map_err(|e| input_err(e.to_string()))?;
        let meta = file.metadata().map_err(|e| input_err(e.to_string()))?;
        if !meta.is_file() {
            return Err(input_err("not a regular file".into()));
        }
        ctx.inputs.check_opened(&file).map_err(input_err)?;
        Ok(Input::Local {
            name: name.to_string(),
            file,
            len: meta.len(),
            stamp: FileStamp::of(&meta),
        })
    }

    /// An input over a file already open (tests and tools that made the file themselves).
    pub fn from_file(name: &str, file: File) -> Result<Input, JobError> {
        let meta = file.metadata().map_err(|e| JobError::Input {
            input: name.to_string(),
            reason: e.to_string(),
        })?;
        Ok(Input::Local {
            name: name.to_string(),
            file,
            len: meta.len(),
            stamp: FileStamp::of(&meta),
        })
    }

    /// Which content this is (see `InputReport::version`): equal versions, equal bytes.
    pub fn version(&self) -> String {
        match self {
            Input::Local { stamp, .. } => format!("file:{}:{}", stamp.len, stamp.mtime_ns),
            Input::Lake { version, .. } => lake_version(version),
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Input::Local { name, .. } | Input::Lake { name, .. } => name,
        }
    }

    pub fn len(&self) -> u64 {
        match self {
            Input::Local { len, .. } | Input::Lake { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads exactly `len` bytes at `offset` (the caller keeps within `self.len()`). An
    /// error here is the storage's, never the content's: it fails the job (see
    /// [`InputStream`]).
    pub fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>, JobError> {
        match self {
            Input::Local {
                name, file, stamp, ..
            } => {
                let err = |reason: String| JobError::Input {
                    input: name.clone(),
                    reason,
                };
                let mut buf = vec![0u8; len];
                file.read_exact_at(&mut buf, offset).map_err(|e| {
                    err(format!("read of {len} bytes at byte offset {offset}: {e}"))
                })?;
                // Written in place while being read: the bytes may mix two versions.
                let now = file.metadata().map_err(|e| err(e.to_string()))?;
                if FileStamp::of(&now) != *stamp {
                    return Err(JobError::Retry(format!(
                        "input {name} changed while this job read it (near byte offset {offset})"
                    )));
                }
                Ok(buf)
            }
            Input::Lake {
                key,
                lake,
                rt,
                version,
                ..
            } => {
                let range = offset..offset + len as u64;
                Ok(rt
                    .block_on(lake.get_range_of(key, range, version))?
                    .to_vec())
            }
        }
    }
}

/// An [`Input`] as a byte stream, front to back, for formats read through a decoder
/// (zstd, PGN). The rule every format shares: bytes that do not decode are skipped and
/// reported, but an input that cannot be *read* (storage that stopped answering, a file
/// that changed) fails the job with the [`JobError`] the read gave, which
/// [`InputStream::read_failure`] hands back after the decoder saw only an `io::Error`.
pub struct InputStream<'a> {
    input: &'a Input,
    offset: u64,
    /// Bytes read so far, for progress reports from another thread.
    pub read: std::sync::Arc<std::sync::atomic::AtomicU64>,
    failure: std::sync::Arc<std::sync::Mutex<Option<JobError>>>,
}

/// Reads of at most this many bytes: a few requests per block, bounded memory.
const STREAM_READ: u64 = 4 << 20;

impl<'a> InputStream<'a> {
    pub fn new(input: &'a Input) -> (InputStream<'a>, ReadFailure) {
        let failure = std::sync::Arc::new(std::sync::Mutex::new(None));
        let stream = InputStream {
            input,
            offset: 0,
            read: Default::default(),
            failure: failure.clone(),
        };
        (stream, ReadFailure(failure))
    }
}

/// Where an [`InputStream`] leaves the error of a read that failed.
pub struct ReadFailure(std::sync::Arc<std::sync::Mutex<Option<JobError>>>);

impl ReadFailure {
    /// The read error, if the stream's last failure was one (not a decoding error).
    pub fn take(&self) -> Option<JobError> {
        self.0.lock().unwrap().take()
    }
}

impl std::io::Read for InputStream<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.input.len() - self.offset;
        let n = (buf.len() as u64).min(left).min(STREAM_READ) as usize;
        if n == 0 {
            return Ok(0);
        }
        match self.input.read_at(self.offset, n) {
            Ok(bytes) => {
                buf[..n].copy_from_slice(&bytes);
                self.offset += n as u64;
                self.read
                    .store(self.offset, std::sync::atomic::Ordering::Relaxed);
                Ok(n)
            }
            Err(e) => {
                let shown = std::io::Error::other(e.to_string());
                *self.failure.lock().unwrap() = Some(e);
                Err(shown)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confinement_follows_symlinks_and_refuses_everything_else() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("data");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(root.join("ok.pgn"), "x").unwrap();
        std::os::unix::fs::symlink("/etc/hostname", root.join("escape.pgn")).unwrap();
        std::os::unix::fs::symlink(root.join("ok.pgn"), dir.path().join("outside-link")).unwrap();
        let policy = InputPolicy::confined(&[root.to_str().unwrap().to_string()]);
        let root = std::fs::canonicalize(&root).unwrap();
        let r = |p: &Path| p.to_str().unwrap().to_string();
        assert_eq!(policy.check(&r(&root.join("ok.pgn"))), Ok(()));
        // Under a root but missing: allowed here, the open reports it.
        assert_eq!(policy.check(&r(&root.join("missing.pgn"))), Ok(()));
        // `.` components are no escape (paths drop them); `..` ones are refused outright.
        assert_eq!(
            policy.check(&format!("{}/./ok.pgn", root.display())),
            Ok(())
        );
        assert_eq!(policy.check("lake:raw/lichess/a.pgn"), Ok(()));
        for bad in [
            r(&root.join("escape.pgn")),
            r(&root.join("../outside-link")),
            r(&dir.path().join("outside-link")),
            "/etc/passwd".to_string(),
            "relative/ok.pgn".to_string(),
        ] {
            let err = policy.check(&bad).unwrap_err();
            assert!(err.contains("[inputs] local_roots"), "{bad}: {err}");
            assert!(err.contains(&root.display().to_string()), "{err}");
        }
        // No roots: lake objects only, and the message says none are configured.
        let none = InputPolicy::confined(&[]);
        assert!(
            none.check(&r(&root.join("ok.pgn")))
                .unwrap_err()
                .contains("none are configured")
        );
        assert_eq!(InputPolicy::Unconfined.check("/etc/passwd"), Ok(()));
    }

    /// A job reads the version it opened: a lake object replaced, or a local file written in
    /// place, part-way through is a retryable error, never a mix of two versions.
    #[test]
    fn reads_are_pinned_to_the_version_opened() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let ctx = JobContext::new(Lake::in_memory(), rt.handle().clone());
        rt.block_on(ctx.lake.put("raw/a.pgn", "first version"))
            .unwrap();
        let input = Input::open(&ctx, "lake:raw/a.pgn").unwrap();
        assert_eq!(input.read_at(0, 5).unwrap(), b"first");
        let v1 = input.version();
        rt.block_on(ctx.lake.put("raw/a.pgn", "other version"))
            .unwrap();
        let e = input.read_at(6, 7).unwrap_err();
        assert!(
            e.is_transient() && e.to_string().contains("replaced"),
            "{e}"
        );
        assert_ne!(Input::open(&ctx, "lake:raw/a.pgn").unwrap().version(), v1);

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.binpack");
        std::fs::write(&path, "0123456789").unwrap();
        let input = Input::open(&ctx, path.to_str().unwrap()).unwrap();
        assert_eq!(input.read_at(0, 4).unwrap(), b"0123");
        // Replaced by a rename: the descriptor still reads the version opened.
        let tmp = dir.path().join("a.tmp");
        std::fs::write(&tmp, "abcdefghij").unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        assert_eq!(input.read_at(4, 4).unwrap(), b"4567");
        // Written in place: noticed at the next read.
        let input = Input::open(&ctx, path.to_str().unwrap()).unwrap();
        std::fs::write(&path, "ABCDEFGHIJK").unwrap();
        let e = input.read_at(0, 4).unwrap_err();
        assert!(e.is_transient() && e.to_string().contains("changed"), "{e}");
    }

    /// A root configured through a symlink admits its files; what is opened is judged, so a
    /// FIFO under a root is refused without blocking the worker.
    #[test]
    fn opens_judge_the_file_opened() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::fs::write(real.join("ok.binpack"), "abc").unwrap();
        let fifo = real.join("pipe.binpack");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let link = dir.path().join("data");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let rt = tokio::runtime::Runtime::new().unwrap();
        let mut ctx = JobContext::new(Lake::in_memory(), rt.handle().clone());
        ctx.inputs = InputPolicy::confined(&[link.to_str().unwrap().to_string()]);
        let via_link = link.join("ok.binpack");
        let input = Input::open(&ctx, via_link.to_str().unwrap()).unwrap();
        assert_eq!(input.len(), 3);
        let err = Input::open(&ctx, link.join("pipe.binpack").to_str().unwrap())
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("not a regular file"), "{err}");
        let err = Input::open(&ctx, "/etc/hostname")
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("[inputs] local_roots"), "{err}");
    }
}
