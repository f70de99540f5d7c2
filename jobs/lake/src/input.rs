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

pub enum Input {
    Local {
        name: String,
        file: File,
        len: u64,
    },
    Lake {
        name: String,
        key: String,
        lake: Lake,
        rt: tokio::runtime::Handle,
        len: u64,
    },
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
            let len = ctx
                .block_on(ctx.lake.size(key))?
                .ok_or_else(|| input_err("no such object in the lake".into()))?;
            return Ok(Input::Lake {
                name: name.to_string(),
                key: key.to_string(),
                lake: ctx.lake.clone(),
                rt: ctx.rt.clone(),
                len,
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
        })
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

    /// Reads exactly `len` bytes at `offset` (the caller keeps within `self.len()`).
    pub fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>, JobError> {
        match self {
            Input::Local { name, file, .. } => {
                let mut buf = vec![0u8; len];
                file.read_exact_at(&mut buf, offset)
                    .map_err(|e| JobError::Input {
                        input: name.clone(),
                        reason: format!("read of {len} bytes at byte offset {offset}: {e}"),
                    })?;
                Ok(buf)
            }
            Input::Lake { key, lake, rt, .. } => {
                let bytes = rt.block_on(lake.get_range(key, offset..offset + len as u64))?;
                Ok(bytes.to_vec())
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
