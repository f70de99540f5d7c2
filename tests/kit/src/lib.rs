//! Test helpers with no lakefish dependency, so every suite (jobs, trainer, end to end) can
//! use the one copy: where the workspace and the `../shared` samples are, and loopback ports
//! for real servers that cannot be taken by someone else between picking and binding.

use std::collections::HashSet;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root")
}

/// A sample file from `../shared/data` (beside the checkout), when it is there.
/// `LAKEFISH_TESTS_WITHOUT_SHARED=1` pretends it is not, to exercise the fallbacks that
/// every test using a sample must have (they assert on generated data instead).
pub fn shared_data(rel: &str) -> Option<PathBuf> {
    if std::env::var_os("LAKEFISH_TESTS_WITHOUT_SHARED").is_some() {
        return None;
    }
    // Resolved, so the path has no `..` (services refuse such input paths).
    workspace_root()
        .join("../shared/data")
        .join(rel)
        .canonicalize()
        .ok()
}

/// Ports this process handed out: the OS may give a just-released ephemeral port again, and
/// two tests of one binary must not both get it.
static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// A loopback port nothing listened on a moment ago and that this process has not handed
/// out before. Another process may still take it before the server binds, so servers are
/// started with [`start_on_free_port`], which retries.
pub fn free_port() -> u16 {
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a loopback port")
            .port();
        let mut seen = HANDED_OUT.lock().unwrap();
        if seen.get_or_insert_with(HashSet::new).insert(port) {
            return port;
        }
    }
}

/// Starts a server with `spawn(port)` on a free port and waits until it listens. If the
/// server exits first (the port was taken between picking and binding, the race
/// `free_port` alone leaves), it tries again on another port. The port is only trusted
/// once our child is alive and something answers on it.
pub fn start_on_free_port(what: &str, mut spawn: impl FnMut(u16) -> Child) -> (Child, u16) {
    let mut last = String::new();
    for _ in 0..5 {
        let port = free_port();
        let mut child = spawn(port);
        match wait_for_child_port(&mut child, port) {
            Ok(()) => return (child, port),
            Err(why) => {
                let _ = child.kill();
                let _ = child.wait();
                last = why;
            }
        }
    }
    panic!("{what} did not start on any of 5 free ports: {last}");
}

/// Waits until `port` accepts connections while `child` is alive (30 s at most).
pub fn wait_for_child_port(child: &mut Child, port: u16) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("exited with {status} before listening on {port}"));
        }
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            // Something answers; make sure it is ours and not a server that had the port.
            std::thread::sleep(Duration::from_millis(20));
            return match child.try_wait() {
                Ok(Some(status)) => Err(format!("exited with {status} (port {port} taken)")),
                _ => Ok(()),
            };
        }
        if Instant::now() > deadline {
            return Err(format!("not listening on {port} after 30 s"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_never_handed_out_twice() {
        let ports: HashSet<u16> = (0..200).map(|_| free_port()).collect();
        assert_eq!(ports.len(), 200);
    }

    #[test]
    fn a_server_that_cannot_bind_is_started_again_elsewhere() {
        // Occupy the first port the helper will try by starting a server that exits at once
        // (`false`), as one whose bind failed would: the helper must retry, then succeed with
        // a real listener.
        let mut tries = 0;
        let (mut child, port) = start_on_free_port("a test listener", |port| {
            tries += 1;
            let script = if tries == 1 {
                "exit 3".to_string()
            } else {
                format!(
                    "exec python3 -c 'import socket,time;s=socket.socket();s.bind((\"127.0.0.1\",{port}));s.listen();time.sleep(30)'"
                )
            };
            std::process::Command::new("sh")
                .args(["-c", &script])
                .spawn()
                .unwrap()
        });
        assert_eq!(tries, 2);
        assert!(TcpStream::connect(("127.0.0.1", port)).is_ok());
        let _ = child.kill();
        let _ = child.wait();
    }
}
