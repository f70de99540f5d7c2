//! Input files of a job: a local path readable by the worker, or a lake object `lake:<key>`.
//! Both are read by random access so large files stream in pieces.

use crate::{JobContext, JobError, Lake};
use std::fs::File;
use std::os::unix::fs::FileExt;

pub const LAKE_PREFIX: &str = "lake:";

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
    pub fn open(ctx: &JobContext, name: &str) -> Result<Input, JobError> {
        let input_err = |reason: String| JobError::Input {
            input: name.to_string(),
            reason,
        };
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
        // Look before opening: opening a FIFO would block the worker.
        let meta = std::fs::metadata(name).map_err(|e| input_err(e.to_string()))?;
        if !meta.is_file() {
            return Err(input_err("not a regular file".into()));
        }
        let file = File::open(name).map_err(|e| input_err(e.to_string()))?;
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
