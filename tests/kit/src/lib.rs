//! Test helpers with no lakefish dependency, so every suite (jobs, trainer, end to end) can
//! use the one copy: where the workspace and the `../shared` samples are, and loopback ports
//! for real servers that cannot be taken by someone else between picking and binding, and a
//! PostgreSQL server of its own for each test that needs one.

use std::collections::HashSet;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
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

/// PostgreSQL (Debian's `postgresql` package) on a free loopback port, from a fresh data
/// directory in a temp dir, trusting loopback connections as user `lakefish`. PostgreSQL
/// refuses to run as root, so under root (CI) it runs as the `postgres` system user (or
/// `nobody`). Stopped when dropped.
pub struct Postgres {
    pub port: u16,
    child: Option<Child>,
    bin: PathBuf,
    owner: Option<(u32, u32)>,
    dir: tempfile::TempDir,
}

impl Postgres {
    pub fn start() -> Postgres {
        let bin = postgres_bin().expect(
            "PostgreSQL not found (/usr/lib/postgresql/*/bin or initdb on PATH): run `make setup`",
        );
        let dir = tempfile::tempdir().unwrap();
        let owner = unprivileged_owner();
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).unwrap();
        }
        let data = dir.path().join("data");
        let out = as_owner(Command::new(bin.join("initdb")), owner)
            .args(["-D", data.to_str().unwrap()])
            .args(["-U", "lakefish", "-A", "trust", "-E", "UTF8", "--no-sync"])
            .stdin(Stdio::null())
            .output()
            .expect("running initdb");
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut pg = Postgres {
            port: 0,
            child: None,
            bin,
            owner,
            dir,
        };
        let (child, port) = start_on_free_port("postgres", |port| pg.spawn(port));
        pg.port = port;
        pg.child = Some(child);
        pg.wait_ready();
        pg
    }

    fn spawn(&self, port: u16) -> Child {
        let data = self.dir.path().join("data");
        as_owner(Command::new(self.bin.join("postgres")), self.owner)
            .args(["-D", data.to_str().unwrap(), "-p", &port.to_string()])
            .args(["-c", "listen_addresses=127.0.0.1"])
            .args([
                "-c",
                &format!("unix_socket_directories={}", self.dir.path().display()),
            ])
            // Scratch data: no need to survive a power cut, only a clean restart.
            .args(["-c", "fsync=off", "-c", "full_page_writes=off"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.dir.path().join("postgres.log")).unwrap())
            .spawn()
            .expect("starting postgres")
    }

    /// Waits until the server takes queries (it listens a moment before it does).
    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ok = Command::new(self.bin.join("pg_isready"))
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-q"])
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "postgres on port {} not ready after 60 s: {}",
                self.port,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The server's log so far (for assertion messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default()
    }

    /// A URL of database `db` (see [`Postgres::create_database`]).
    pub fn url(&self, db: &str) -> String {
        format!("postgres://lakefish@127.0.0.1:{}/{db}", self.port)
    }

    /// A new empty database; returns its URL.
    pub fn create_database(&self, db: &str) -> String {
        let out = Command::new(self.bin.join("createdb"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "lakefish",
                db,
            ])
            .output()
            .expect("running createdb");
        assert!(
            out.status.success(),
            "createdb {db}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.url(db)
    }

    /// Stops the server as an operator would (SIGINT: fast shutdown, data kept).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(30);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and data.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "stop it first");
        let mut child = self.spawn(self.port);
        wait_for_child_port(&mut child, self.port)
            .unwrap_or_else(|e| panic!("postgres did not come back: {e}: {}", self.log()));
        self.child = Some(child);
        self.wait_ready();
    }
}

impl Drop for Postgres {
    /// A fast shutdown, so the server's own processes and shared memory go with it.
    fn drop(&mut self) {
        self.stop();
    }
}

/// The newest PostgreSQL's binaries: `LAKEFISH_PG_BIN`, Debian's `/usr/lib/postgresql/N/bin`,
/// or `initdb` on `PATH`.
fn postgres_bin() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("LAKEFISH_PG_BIN") {
        return Some(PathBuf::from(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Some(bin);
    }
    std::env::split_paths(&std::env::var_os("PATH")?).find(|d| d.join("initdb").exists())
}

/// Under root: the uid and gid of `postgres` (Debian's package makes it) or `nobody`.
fn unprivileged_owner() -> Option<(u32, u32)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let find = |name: &str| {
        passwd.lines().find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            if f.len() < 4 || f[0] != name {
                return None;
            }
            Some((f[2].parse().ok()?, f[3].parse().ok()?))
        })
    };
    Some(
        find("postgres")
            .or_else(|| find("nobody"))
            .unwrap_or((65534, 65534)),
    )
}

fn as_owner(mut cmd: Command, owner: Option<(u32, u32)>) -> Command {
    use std::os::unix::process::CommandExt;
    if let Some((uid, gid)) = owner {
        cmd.uid(uid).gid(gid);
    }
    cmd
}

/// Copies a directory tree (a fixture lake, a lake built once per test binary) to `to`.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
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
