//! Helpers shared by the end-to-end tests: real servers on free loopback ports, the
//! `lakefish` binary, and readers that check lake contents against the `sfbinpack` crate.

use lakefish_jobs::Lake;
use lakefish_schemas::JobRecord;
use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use lakefish_testkit::{free_port, shared_data, start_on_free_port, workspace_root};

/// The debug `lakefish` binary (`make test` builds it before running the tests).
pub fn lakefish_bin() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    let bin = target.join("debug/lakefish");
    assert!(
        bin.exists(),
        "{} missing: run `cargo build --bin lakefish` (make test does)",
        bin.display()
    );
    bin
}

/// The project venv's python (`make setup` creates it).
pub fn venv_bin(name: &str) -> PathBuf {
    let p = workspace_root().join(".venv/bin").join(name);
    assert!(p.exists(), "{} missing: run `make setup`", p.display());
    p
}

/// small.binpack when present, else a generated binpack in `dir`.
pub fn binpack_input(dir: &Path) -> PathBuf {
    if let Some(p) = shared_data("binpack/small.binpack") {
        return p;
    }
    let p = dir.join("generated.binpack");
    std::fs::write(&p, lakefish_ingest::binpack::synthetic_binpack(400, 5)).unwrap();
    p
}

fn wait_for_port(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{what} did not open port {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A child process killed when dropped.
pub struct Proc {
    pub child: Child,
    pub name: String,
}

impl Proc {
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `redis-server` on a free loopback port in a temp dir: without persistence, or with
/// `infra/redis.conf` (append-only file) and restartable.
pub struct Redis {
    pub url: String,
    port: u16,
    persistent: bool,
    _proc: Proc,
    _dir: tempfile::TempDir,
}

impl Redis {
    pub fn start() -> Redis {
        Redis::launch(false)
    }

    /// With the deployment's `infra/redis.conf` (port and directory moved to scratch).
    pub fn start_persistent() -> Redis {
        Redis::launch(true)
    }

    fn launch(persistent: bool) -> Redis {
        let dir = tempfile::tempdir().unwrap();
        let (child, port) = start_on_free_port("redis-server", |port| {
            Redis::command(dir.path(), port, persistent)
        });
        let proc = Proc {
            child,
            name: "redis-server".into(),
        };
        Redis {
            url: format!("redis://127.0.0.1:{port}"),
            port,
            persistent,
            _proc: proc,
            _dir: dir,
        }
    }

    fn command(dir: &Path, port: u16, persistent: bool) -> Child {
        let mut cmd = Command::new("redis-server");
        if persistent {
            cmd.arg(workspace_root().join("infra/redis.conf"))
                .args(["--dir", dir.to_str().unwrap()]);
        } else {
            cmd.args(["--save", "", "--appendonly", "no"]);
        }
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .current_dir(dir)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server not found: run `make setup`")
    }

    /// On a port this server held before (a restart).
    fn spawn(dir: &Path, port: u16, persistent: bool) -> Proc {
        let child = Redis::command(dir, port, persistent);
        wait_for_port(port, "redis-server");
        Proc {
            child,
            name: "redis-server".into(),
        }
    }

    /// Stops the server as an operator would (SIGTERM: it writes its data out), waits
    /// `down`, and starts it again on the same port and directory.
    pub fn restart(&mut self, down: Duration) {
        assert!(self.persistent, "restart needs persistence");
        let pid = self._proc.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let _ = self._proc.child.wait();
        std::thread::sleep(down);
        self._proc = Redis::spawn(self._dir.path(), self.port, true);
    }
}

/// A TCP forwarder on a loopback port that can be taken down (new connections dropped the
/// moment they open, open ones cut) and brought back, to make a server unreachable without
/// losing its state. The port stays bound throughout, so nothing else can take it meanwhile.
pub struct Outage {
    pub port: u16,
    state: std::sync::Arc<std::sync::Mutex<Forwarding>>,
}

/// Whether traffic passes, and every open connection (to cut them when going down).
#[derive(Default)]
struct Forwarding {
    down: bool,
    open: Vec<TcpStream>,
}

impl Outage {
    pub fn forward_to(target: u16) -> Outage {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = std::sync::Arc::new(std::sync::Mutex::new(Forwarding::default()));
        let shared = state.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(client) = conn else {
                    // (e.g. out of file descriptors): back off rather than spin.
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                let mut st = shared.lock().unwrap();
                if st.down {
                    let _ = client.shutdown(std::net::Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                st.open.push(client.try_clone().unwrap());
                st.open.push(server.try_clone().unwrap());
                drop(st);
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Write);
                    });
                }
            }
        });
        Outage { port, state }
    }

    /// Unreachable from now on: open connections are cut and new ones dropped.
    pub fn down(&self) {
        let mut st = self.state.lock().unwrap();
        st.down = true;
        for c in st.open.drain(..) {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Reachable again.
    pub fn up(&self) {
        self.state.lock().unwrap().down = false;
    }
}

/// moto's S3-compatible server on a free loopback port, with one bucket.
pub struct S3 {
    pub endpoint: String,
    pub bucket: String,
    _proc: Proc,
}

impl S3 {
    pub fn start(bucket: &str) -> S3 {
        let (child, port) = start_on_free_port("moto_server", |port| {
            Command::new(venv_bin("moto_server"))
                .args(["-H", "127.0.0.1", "-p", &port.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("moto_server")
        });
        let proc = Proc {
            child,
            name: "moto_server".into(),
        };
        let endpoint = format!("http://127.0.0.1:{port}");
        let status = reqwest::blocking_put(&format!("{endpoint}/{bucket}"));
        assert!(status < 300, "creating bucket {bucket}: HTTP {status}");
        S3 {
            endpoint,
            bucket: bucket.into(),
            _proc: proc,
        }
    }

    /// The `AWS_*` variables a process needs to use this server.
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("AWS_ENDPOINT", self.endpoint.as_str()),
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ALLOW_HTTP", "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    pub fn lake(&self, prefix: &str) -> Lake {
        Lake::open(
            &format!("s3://{}/{prefix}", self.bucket),
            &self.env().into_iter().collect(),
        )
        .unwrap()
    }
}

/// A multi-machine deployment on loopback: redis-server, moto with an S3 lake, `lakefish serve
/// --no-workers`, and one `lakefish worker` process per name (one thread each).
pub struct Cluster {
    pub api: String,
    pub s3: S3,
    pub lake_url: String,
    pub redis: Redis,
    /// The metastore of every process (`LAKEFISH_METASTORE`): job records live here.
    pub postgres: lakefish_testkit::Postgres,
    /// Between the lakefish processes and moto, when started with `s3_outage`.
    pub outage: Option<Outage>,
    env: Vec<(String, String)>,
    serve_args: Vec<String>,
    dir: PathBuf,
    /// Worker names, in the order of `_procs[1..]`.
    workers: Vec<String>,
    _procs: Vec<Proc>,
}

#[derive(Default)]
pub struct ClusterOptions<'a> {
    /// `lakefish.toml` for the API process (pipelines, schedules).
    pub config: Option<&'a str>,
    /// Redis with `infra/redis.conf` (append-only file), so it can be restarted.
    pub persistent_redis: bool,
    /// Route S3 traffic through an [`Outage`] forwarder.
    pub s3_outage: bool,
}

impl Cluster {
    /// SIGKILLs worker `i` (0-based, in the order given to `start`).
    pub fn kill_worker(&mut self, i: usize) {
        self._procs[1 + i].kill();
    }

    pub fn start(dir: &Path, bucket: &str, workers: &[&str]) -> Cluster {
        Cluster::start_with(dir, bucket, workers, ClusterOptions::default())
    }

    pub fn start_with(dir: &Path, bucket: &str, workers: &[&str], opts: ClusterOptions) -> Cluster {
        let redis = if opts.persistent_redis {
            Redis::start_persistent()
        } else {
            Redis::start()
        };
        let s3 = S3::start(bucket);
        let lake_url = format!("s3://{}/lake", s3.bucket);
        let postgres = lakefish_testkit::Postgres::start();
        let mut env = s3.env();
        env.push((
            "LAKEFISH_METASTORE".into(),
            postgres.create_database("lakefish"),
        ));
        let outage = opts.s3_outage.then(|| {
            let port: u16 = s3.endpoint.rsplit(':').next().unwrap().parse().unwrap();
            let o = Outage::forward_to(port);
            for (k, v) in env.iter_mut() {
                if k == "AWS_ENDPOINT" {
                    *v = format!("http://127.0.0.1:{}", o.port);
                }
            }
            o
        });
        let mut serve_args: Vec<String> = Vec::new();
        if let Some(text) = opts.config {
            std::fs::write(dir.join("lakefish.toml"), text).unwrap();
            serve_args.extend(["--config".into(), "lakefish.toml".into()]);
        }
        serve_args.extend(
            [
                "--lake",
                &lake_url,
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--redis",
                &redis.url,
                "--no-workers",
            ]
            .map(String::from),
        );
        let args: Vec<&str> = serve_args.iter().map(String::as_str).collect();
        let (serve, api) = lakefish(&args, &env, dir);
        let mut cluster = Cluster {
            api: api.expect("serve prints its address"),
            s3,
            lake_url,
            redis,
            postgres,
            outage,
            env,
            serve_args,
            dir: dir.to_path_buf(),
            workers: Vec::new(),
            _procs: vec![serve],
        };
        for name in workers {
            cluster.add_worker(name);
        }
        cluster
    }

    /// Starts one more `lakefish worker` (one thread) named `name`.
    pub fn add_worker(&mut self, name: &str) {
        let (worker, _) = lakefish(
            &[
                "--lake",
                &self.lake_url,
                "worker",
                "--redis",
                &self.redis.url,
                "--name",
                name,
                "--threads",
                "1",
            ],
            &self.env,
            &self.dir,
        );
        self._procs.push(worker);
        self.workers.push(name.to_string());
    }

    /// SIGKILLs the worker whose name `worker` starts with (as job records show it).
    pub fn kill_worker_named(&mut self, worker: &str) {
        let i = self
            .workers
            .iter()
            .position(|w| worker.starts_with(w.as_str()))
            .unwrap_or_else(|| panic!("no worker {worker} in {:?}", self.workers));
        self._procs[1 + i].kill();
    }

    /// SIGKILLs the API process and starts a new one (on a new port: see `api`).
    pub fn restart_api(&mut self) {
        self._procs[0].kill();
        let args: Vec<&str> = self.serve_args.iter().map(String::as_str).collect();
        let (serve, api) = lakefish(&args, &self.env, &self.dir);
        self._procs[0] = serve;
        self.api = api.expect("serve prints its address");
    }
}

pub mod cdp;

mod reqwest {
    use std::io::{Read, Write};

    /// A bodiless HTTP PUT over a plain socket (usable inside or outside a runtime).
    pub(crate) fn blocking_put(url: &str) -> u16 {
        let rest = url.strip_prefix("http://").unwrap();
        let (host, path) = rest.split_once('/').unwrap();
        let mut s = std::net::TcpStream::connect(host).unwrap();
        write!(
            s,
            "PUT /{path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut resp = String::new();
        s.read_to_string(&mut resp).unwrap();
        resp.split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0)
    }
}

/// `lakefish serve` on the embedded default in `dir` (lake `dir/lake`, SQLite queue, workers
/// in-process), with `config` written to `dir/lakefish.toml` and passed when given. Returns
/// the process and the API's base URL.
pub fn serve_embedded(dir: &Path, config: Option<&str>) -> (Proc, String) {
    let mut args = vec!["--lake", "lake", "serve", "--listen", "127.0.0.1:0"];
    if let Some(text) = config {
        std::fs::write(dir.join("lakefish.toml"), text).unwrap();
        args.splice(0..0, ["--config", "lakefish.toml"]);
    }
    let (proc, api) = lakefish(&args, &[], dir);
    (proc, api.expect("serve prints its address"))
}

/// The override of `[inputs] local_roots`.
pub const LOCAL_ROOTS_ENV: &str = "LAKEFISH__INPUTS__LOCAL_ROOTS";

/// `local_roots` for a service a test starts in `dir`: that directory, the system's temporary
/// directory (tests keep their inputs in tempdirs) and the shared samples, as a TOML list.
pub fn local_roots_for(dir: &Path) -> String {
    let mut roots = vec![dir.to_path_buf(), std::env::temp_dir()];
    roots.push(workspace_root().join("../shared"));
    let quoted: Vec<String> = roots
        .iter()
        .map(|r| format!("{:?}", r.display().to_string()))
        .collect();
    format!("[{}]", quoted.join(", "))
}

/// Starts `lakefish` with `args`; for `serve`, waits for its "listening on" line.
pub fn lakefish(args: &[&str], env: &[(String, String)], cwd: &Path) -> (Proc, Option<String>) {
    let mut cmd = Command::new(lakefish_bin());
    cmd.args(args)
        .current_dir(cwd)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (k, v) in env {
        cmd.env(k, v);
    }
    // Services read local files only under [inputs] local_roots: the test's own directory
    // and the shared samples, as an operator would configure it (unless the test says).
    if (args.contains(&"serve") || args.contains(&"worker"))
        && !env.iter().any(|(k, _)| k == LOCAL_ROOTS_ENV)
    {
        cmd.env(LOCAL_ROOTS_ENV, local_roots_for(cwd));
    }
    let mut child = cmd.spawn().unwrap();
    let mut api = None;
    if args.contains(&"serve") {
        let out = child.stdout.take().unwrap();
        let mut lines = BufReader::new(out).lines();
        for line in lines.by_ref() {
            let line = line.unwrap();
            if let Some(url) = line.strip_prefix("listening on ") {
                api = Some(url.to_string());
                break;
            }
        }
        std::thread::spawn(move || for _ in lines {});
        assert!(api.is_some(), "lakefish serve did not start");
    }
    (
        Proc {
            child,
            name: args.join(" "),
        },
        api,
    )
}

/// GET a JSON document from the API.
pub async fn get_json(url: String) -> serde_json::Value {
    ::reqwest::get(&url).await.unwrap().json().await.unwrap()
}

/// The body of a GET as text (`/metrics`, pages).
pub async fn get_text(url: String) -> String {
    ::reqwest::get(&url).await.unwrap().text().await.unwrap()
}

/// Asserts a finished `lakefish` command succeeded, showing its stderr if not.
pub fn assert_success(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `POST /v1/jobs`; asserts 202 and returns the job id.
pub async fn submit_job(api: &str, body: &serde_json::Value) -> String {
    let resp = ::reqwest::Client::new()
        .post(format!("{api}/v1/jobs"))
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    let v: serde_json::Value = resp.json().await.unwrap();
    v["id"].as_str().unwrap().to_string()
}

/// Polls `GET /v1/shuffles/{id}` until committed; returns the manifest.
pub async fn wait_for_shuffle(api: &str, id: &str, timeout: Duration) -> serde_json::Value {
    let deadline = Instant::now() + timeout;
    loop {
        let resp = ::reqwest::get(format!("{api}/v1/shuffles/{id}"))
            .await
            .unwrap();
        assert_eq!(
            resp.status(),
            200,
            "shuffle {id} should be known once its job succeeded"
        );
        let v: serde_json::Value = resp.json().await.unwrap();
        if v["state"] == "committed" {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "shuffle {id} not committed in time: {v}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub async fn wait_for_job(api: &str, id: &str, timeout: Duration) -> JobRecord {
    let deadline = Instant::now() + timeout;
    loop {
        let rec: JobRecord = ::reqwest::get(format!("{api}/v1/jobs/{id}"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if rec.state.is_final() {
            return rec;
        }
        assert!(
            Instant::now() < deadline,
            "job {id} still {:?} after {timeout:?}",
            rec.state
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Submits a job and waits for it to end.
pub async fn run_job(api: &str, body: &serde_json::Value, timeout: Duration) -> JobRecord {
    let id = submit_job(api, body).await;
    wait_for_job(api, &id, timeout).await
}

/// Runs a job through the API and asserts that it succeeded.
pub async fn run_job_ok(api: &str, body: &serde_json::Value) -> JobRecord {
    let rec = run_job(api, body, Duration::from_secs(240)).await;
    assert_eq!(rec.state, lakefish_schemas::JobState::Succeeded, "{rec:?}");
    rec
}

/// PUTs `body` to `url` (a raw file or a book upload) and asserts 201 Created.
pub async fn put_created(url: String, body: Vec<u8>) {
    let r = ::reqwest::Client::new()
        .put(&url)
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{url}");
}

pub use lakefish_lake::parts::PositionRow as Row;

/// Every row of a binpack dataset, parts in name order, read through the lake.
pub async fn read_dataset(lake: &Lake, dataset: &str) -> Vec<Row> {
    read_source_dataset(lake, "binpack", dataset).await
}

/// Every row of a dataset of `source`, parts in name order.
pub async fn read_source_dataset(lake: &Lake, source: &str, dataset: &str) -> Vec<Row> {
    let prefix = format!("positions/source={source}/dataset={dataset}");
    let mut rows = Vec::new();
    for meta in lake.list(&prefix).await.unwrap() {
        let key = meta.location.to_string();
        if key.ends_with(".parquet") {
            let bytes = lake.get(&key).await.unwrap().unwrap();
            rows.extend(lakefish_lake::parts::read_positions(bytes, &key).unwrap());
        }
    }
    rows
}

/// Asserts the rows equal what the `sfbinpack` crate reads from the same file.
pub fn assert_rows_match_binpack(rows: &[Row], binpack: &Path) {
    let bytes = std::fs::read(binpack).unwrap();
    let mut r = sfbinpack::CompressedTrainingDataEntryReader::from_slice(&bytes).unwrap();
    let mut i = 0;
    while r.has_next() {
        let e = r.next();
        let row = rows
            .get(i)
            .unwrap_or_else(|| panic!("only {} rows, the file has more", rows.len()));
        assert_eq!(row.fen, e.pos.fen().unwrap(), "row {i}");
        assert_eq!(row.mv, e.mv.as_uci(), "row {i}");
        assert_eq!(row.score, (e.score != 32002).then_some(e.score), "row {i}");
        assert_eq!(
            (row.ply, row.result),
            (e.ply, Some(e.result as i8)),
            "row {i}"
        );
        i += 1;
    }
    assert_eq!(rows.len(), i, "row count");
}

/// Plays one game of `lakefish ARGS` (an engine command line) against itself through
/// python-chess's UCI client (tests/uci/play_game.py): the JSON it prints.
pub fn play_through_python_chess(args: &[&str], nodes: u32, max_plies: u32) -> serde_json::Value {
    let script = workspace_root().join("tests/uci/play_game.py");
    let out = std::process::Command::new(venv_bin("python"))
        .arg(script)
        .arg(lakefish_bin())
        .args(args)
        .args([
            "--",
            "--nodes",
            &nodes.to_string(),
            "--max-plies",
            &max_plies.to_string(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python-chess game failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Headless Chromium (Debian's `chromium`, installed by `infra/setup.sh`) driven from its
/// command line: each call is a fresh browser that loads one URL.
pub struct Browser {
    bin: PathBuf,
    profile: tempfile::TempDir,
}

/// The Chromium on this machine (`make setup` installs Debian's).
pub fn chromium() -> PathBuf {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|b| {
            let ok = Command::new(b)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            ok.then(|| PathBuf::from(b))
        })
        .expect("chromium not found: run `make setup` (apt-get install chromium)")
}

/// How the tests run Chromium: headless, in a container, with a page size screenshots keep.
pub const CHROMIUM_FLAGS: [&str; 7] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--hide-scrollbars",
    "--window-size=1280,1400",
];

impl Browser {
    pub fn new() -> Browser {
        Browser {
            bin: chromium(),
            profile: tempfile::tempdir().unwrap(),
        }
    }

    fn run(&self, extra: &[String], url: &str) -> std::process::Output {
        let mut cmd = Command::new(&self.bin);
        cmd.args(CHROMIUM_FLAGS)
            .arg(format!("--user-data-dir={}", self.profile.path().display()))
            .args(extra)
            .arg(url);
        let out = cmd.output().expect("run chromium");
        assert!(
            out.status.success(),
            "chromium {url}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// The DOM after the page rendered, as HTML.
    pub fn dom(&self, url: &str) -> String {
        String::from_utf8(self.run(&["--dump-dom".into()], url).stdout).unwrap()
    }

    /// A PNG screenshot of the page at `path`.
    pub fn screenshot(&self, url: &str, path: &Path) {
        let _ = std::fs::remove_file(path);
        self.run(&[format!("--screenshot={}", path.display())], url);
        let png = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(png.starts_with(b"\x89PNG") && png.len() > 5_000, "{url}");
    }
}

impl Default for Browser {
    fn default() -> Self {
        Browser::new()
    }
}

/// The `href`s in an HTML document, in order.
pub fn links(html: &str) -> Vec<String> {
    html.split("href=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .map(|s| s.replace("&amp;", "&"))
        .collect()
}

/// The steps a pipeline run's jobs went through, in order (from its `jobs`).
pub fn steps_of(run: &serde_json::Value) -> Vec<String> {
    let mut steps: Vec<String> = Vec::new();
    for j in run["jobs"].as_array().into_iter().flatten() {
        let s = j["step"].as_str().unwrap_or("").to_string();
        if steps.last() != Some(&s) {
            steps.push(s);
        }
    }
    steps
}

/// A PGN without what the clock decides: dates, start and end times, durations, and each
/// move's time (`0.012s`) in its comment; words joined by single spaces.
pub fn pgn_untimed(pgn: &str) -> String {
    pgn.lines()
        .filter(|l| {
            ![
                "[Date ",
                "[GameDuration ",
                "[GameStartTime ",
                "[GameEndTime ",
            ]
            .iter()
            .any(|t| l.starts_with(t))
        })
        .flat_map(|l| l.split_whitespace())
        .map(|w| {
            let bare = w.trim_end_matches([',', '}']);
            let timed = bare
                .strip_suffix('s')
                .is_some_and(|t| t.contains('.') && t.parse::<f64>().is_ok());
            if timed { &w[bare.len()..] } else { w }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
