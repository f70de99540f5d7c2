//! libtorch's CUDA backend at run time.
//!
//! The binary links only `libtorch_cpu` (and `libc10`), so it starts on machines without
//! CUDA's libraries (cuBLAS, cuDNN, ... are several GB the CPU set-up never installs). On a
//! GPU machine the backend, `libtorch_cuda.so`, is loaded here from the directory the
//! running `libtorch_cpu.so` came from; its static initializers register the CUDA hooks,
//! after which `tch::Cuda::is_available()` and `Device::Cuda` work.
//!
//! Load it before anything asks libtorch about CUDA: libtorch looks the hooks up once and
//! keeps the answer, so a query made before loading would say "no CUDA" for good.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Loads `libtorch_cuda.so` once per process; later calls return the first outcome. The
/// error says which file was tried and why it did not load (missing file, or the dynamic
/// loader's message, e.g. a CUDA library it depends on that is not installed).
pub fn load_backend() -> Result<(), String> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED.get_or_init(load).clone()
}

fn load() -> Result<(), String> {
    let dir = libtorch_dir().ok_or("libtorch_cpu.so is not loaded in this process")?;
    let path = dir.join("libtorch_cuda.so");
    if !path.exists() {
        return Err(format!(
            "{} does not exist (this libtorch is built for the CPU only)",
            path.display()
        ));
    }
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{} contains a NUL byte", path.display()))?;
    // SAFETY: dlopen with a valid C string; RTLD_GLOBAL so the backend's symbols resolve for
    // libtorch_cpu's registries. The handle is never closed: the hooks it registers must
    // stay valid for the whole process.
    let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if handle.is_null() {
        // SAFETY: dlerror returns a thread-local C string describing the last dlopen failure
        // (or null); it is copied before any other dl* call.
        let why = unsafe {
            let e = libc::dlerror();
            if e.is_null() {
                "unknown dlopen error".to_string()
            } else {
                CStr::from_ptr(e).to_string_lossy().into_owned()
            }
        };
        return Err(format!("cannot load {}: {why}", path.display()));
    }
    Ok(())
}

/// The directory of the `libtorch_cpu.so` this process runs with (from /proc/self/maps, so
/// it is the library actually in use whether it came from the rpath or LD_LIBRARY_PATH).
fn libtorch_dir() -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    // The path is the rest of the line from its first '/' (it may hold spaces).
    maps.lines()
        .filter_map(|line| line.find('/').map(|at| &line[at..]))
        .map(|path| path.strip_suffix(" (deleted)").unwrap_or(path))
        .find(|path| path.ends_with("/libtorch_cpu.so"))
        .and_then(|path| Path::new(path).parent().map(Path::to_path_buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_libtorch_this_process_runs_with() {
        // Make sure libtorch is mapped (any call into it will do).
        let _ = tch::Tensor::zeros([1], (tch::Kind::Float, tch::Device::Cpu));
        let dir = libtorch_dir().expect("libtorch_cpu.so in /proc/self/maps");
        assert!(dir.join("libtorch_cpu.so").exists(), "{}", dir.display());
    }

    #[test]
    fn loading_gives_cuda_or_says_why_not() {
        let _ = tch::Tensor::zeros([1], (tch::Kind::Float, tch::Device::Cpu));
        match load_backend() {
            // A machine with CUDA's libraries: the hooks are registered now.
            Ok(()) => assert_eq!(load_backend(), Ok(())),
            // The CPU set-up: the error names the file it tried.
            Err(e) => assert!(e.contains("libtorch_cuda.so"), "{e}"),
        }
    }
}
