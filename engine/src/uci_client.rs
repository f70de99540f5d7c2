//! Another UCI engine as a child process: the handshake, options, `go` under a deadline, and
//! the ways an engine lets a match down (no answer to `uci`/`isready`, a crash, a stall), as
//! fastchess tells them apart. Nothing the engine prints is trusted: lines are read on their
//! own thread, capped in length, and a reply that never comes is a timeout, not a hang.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, sync_channel};
use std::time::{Duration, Instant};

use crate::search::Score;

/// How to start an engine: a program, its arguments, and UCI options set after `uci`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UciCommand {
    pub program: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// `setoption name K value V`, in order.
    #[serde(default)]
    pub options: Vec<(String, String)>,
}

/// Why an engine could not go on with a game. Each ends the game as a loss for the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineFault {
    /// It did not start, or did not answer `uci` with `uciok` / `isready` with `readyok`.
    Unresponsive(String),
    /// Its process ended or closed its pipes mid-game.
    Crashed(String),
    /// No `bestmove` within the limit plus the allowed margin; the process was killed.
    Stalled(String),
}

impl std::fmt::Display for EngineFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EngineFault::Unresponsive(s) => write!(f, "unresponsive: {s}"),
            EngineFault::Crashed(s) => write!(f, "crashed: {s}"),
            EngineFault::Stalled(s) => write!(f, "stalled: {s}"),
        }
    }
}

/// An engine's answer to `go`.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchReply {
    /// The move as the engine wrote it (checked for legality by the caller).
    pub bestmove: String,
    /// The score of the last `info ... score` line, from the side to move's view.
    pub score: Option<Score>,
    /// The depth of the last `info ... depth` line.
    pub depth: Option<u32>,
    /// From sending `go` to reading `bestmove`.
    pub elapsed: Duration,
}

/// A fault during the handshake: the engine never became ready to play.
fn unresponsive(fault: EngineFault) -> EngineFault {
    match fault {
        EngineFault::Crashed(m) | EngineFault::Stalled(m) => EngineFault::Unresponsive(m),
        u @ EngineFault::Unresponsive(_) => u,
    }
}

/// Lines longer than this are cut: an engine cannot make us buffer without bound.
const MAX_LINE: usize = 64 * 1024;

/// A running engine. Dropping it sends `quit` and kills the process if it lingers.
pub struct UciProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// `id name` from the handshake.
    pub id_name: Option<String>,
    /// The `option ...` lines of the handshake, as the engine wrote them (untrusted).
    pub option_lines: Vec<String>,
    /// The last `info string` the engine wrote: engines explain why they give up there
    /// (Stockfish: a net it cannot load), kept for the fault's reason.
    last_said: Option<String>,
    label: String,
    /// Dropped after the process: removed once the engine is gone.
    _scratch: ScratchDir,
}

/// The environment an engine gets: none of ours (which may hold storage and database
/// secrets), only what programs need to run, with its scratch directory as home and temp.
pub fn engine_env(scratch: &std::path::Path) -> Vec<(String, std::ffi::OsString)> {
    let mut env: Vec<(String, std::ffi::OsString)> =
        ["PATH", "LD_LIBRARY_PATH", "LANG", "LC_ALL", "TZ"]
            .into_iter()
            .filter_map(|k| std::env::var_os(k).map(|v| (k.to_string(), v)))
            .collect();
    for k in ["HOME", "TMPDIR"] {
        env.push((k.to_string(), scratch.as_os_str().to_owned()));
    }
    env
}

/// An empty directory of its own that an engine runs in, so that anything it writes by a
/// relative name (logs, learning files) lands there and is removed with it.
pub struct ScratchDir(std::path::PathBuf);

impl ScratchDir {
    pub fn new() -> std::io::Result<ScratchDir> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "lakefish-engine-{}-{n}-{nanos:08x}",
            std::process::id()
        ));
        std::fs::create_dir(&dir)?;
        Ok(ScratchDir(dir))
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

enum Wait {
    Line(String),
    Timeout,
    Closed,
}

impl UciProcess {
    /// Starts the engine and completes `uci` → `uciok`, the options, `isready` → `readyok`,
    /// each answer within `timeout`.
    pub fn start(command: &UciCommand, timeout: Duration) -> Result<UciProcess, EngineFault> {
        let label = command.program.clone();
        let scratch = ScratchDir::new().map_err(|e| {
            EngineFault::Unresponsive(format!("no scratch directory for {label}: {e}"))
        })?;
        // The engine runs in its scratch directory: a relative program is resolved here first.
        let program = std::path::absolute(&command.program)
            .map_err(|e| EngineFault::Unresponsive(format!("cannot start {label}: {e}")))?;
        let program = if command.program.contains('/') {
            program.into_os_string()
        } else {
            command.program.clone().into()
        };
        let mut child = Command::new(program)
            .current_dir(scratch.path())
            .env_clear()
            .envs(engine_env(scratch.path()))
            .args(&command.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| EngineFault::Unresponsive(format!("cannot start {label}: {e}")))?;
        let stdout = child.stdout.take().expect("piped");
        let stdin = child.stdin.take();
        // A bounded channel: an engine that floods output blocks its own reader, not us.
        let (tx, lines) = sync_channel(1024);
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match (&mut reader)
                    .take(MAX_LINE as u64)
                    .read_until(b'\n', &mut buf)
                {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let line = String::from_utf8_lossy(&buf).trim().to_string();
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let mut engine = UciProcess {
            child,
            stdin,
            lines,
            id_name: None,
            option_lines: Vec::new(),
            last_said: None,
            label,
            _scratch: scratch,
        };
        // An engine that is gone before it hears `uci` never answered it.
        if engine.send("uci").is_err() {
            return Err(EngineFault::Unresponsive(format!(
                "{} exited before uciok",
                engine.label
            )));
        }
        let deadline = Instant::now() + timeout;
        loop {
            match engine.next_line(deadline) {
                Wait::Line(l) if l == "uciok" => break,
                Wait::Line(l) => {
                    if let Some(name) = l.strip_prefix("id name ") {
                        engine.id_name = Some(name.trim().to_string());
                    } else if l.starts_with("option ") && engine.option_lines.len() < 1024 {
                        engine.option_lines.push(l);
                    }
                }
                Wait::Timeout => {
                    return Err(EngineFault::Unresponsive(format!(
                        "{} did not answer uci with uciok within {} ms",
                        engine.label,
                        timeout.as_millis()
                    )));
                }
                Wait::Closed => {
                    return Err(EngineFault::Unresponsive(format!(
                        "{} exited before uciok",
                        engine.label
                    )));
                }
            }
        }
        for (name, value) in &command.options {
            engine
                .send(&format!("setoption name {name} value {value}"))
                .map_err(unresponsive)?;
        }
        engine.ready(timeout).map_err(unresponsive)?;
        Ok(engine)
    }

    /// `; it said "…"`: the engine's own last word, printable ASCII, at most 80 characters
    /// (what an engine prints is not trusted further than that).
    fn its_words(&self) -> String {
        match &self.last_said {
            Some(said) => {
                let clean: String = said
                    .chars()
                    .filter(|c| c.is_ascii_graphic() || *c == ' ')
                    .take(80)
                    .collect();
                format!("; it said \"{}\"", clean.trim())
            }
            None => String::new(),
        }
    }

    fn send(&mut self, line: &str) -> Result<(), EngineFault> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| EngineFault::Crashed(format!("{} has no input", self.label)))?;
        writeln!(stdin, "{line}")
            .and_then(|_| stdin.flush())
            .map_err(|e| EngineFault::Crashed(format!("{}: writing {line:?}: {e}", self.label)))
    }

    fn next_line(&mut self, deadline: Instant) -> Wait {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(left) {
            Ok(l) => {
                if let Some(said) = l.strip_prefix("info string ") {
                    self.last_said = Some(said.to_string());
                }
                Wait::Line(l)
            }
            Err(RecvTimeoutError::Timeout) => Wait::Timeout,
            Err(RecvTimeoutError::Disconnected) => Wait::Closed,
        }
    }

    /// `isready` → `readyok` within `timeout`.
    pub fn ready(&mut self, timeout: Duration) -> Result<(), EngineFault> {
        self.send("isready")?;
        let deadline = Instant::now() + timeout;
        loop {
            match self.next_line(deadline) {
                Wait::Line(l) if l == "readyok" => return Ok(()),
                Wait::Line(_) => {}
                Wait::Timeout => {
                    return Err(EngineFault::Unresponsive(format!(
                        "{} did not answer isready with readyok within {} ms",
                        self.label,
                        timeout.as_millis()
                    )));
                }
                Wait::Closed => {
                    return Err(EngineFault::Crashed(format!(
                        "{} exited before readyok{}",
                        self.label,
                        self.its_words()
                    )));
                }
            }
        }
    }

    /// `ucinewgame`, then `isready`.
    pub fn new_game(&mut self, timeout: Duration) -> Result<(), EngineFault> {
        self.send("ucinewgame")?;
        self.ready(timeout)
    }

    /// Sends `position` and `go`, and waits up to `wait` for `bestmove`. A stall kills the
    /// process (its state is unknown); the caller starts a new one for the next game.
    pub fn go(
        &mut self,
        position: &str,
        go: &str,
        wait: Duration,
    ) -> Result<SearchReply, EngineFault> {
        // Only what it says about this search explains a crash in it.
        self.last_said = None;
        self.send(position)?;
        let started = Instant::now();
        self.send(go)?;
        let deadline = started + wait;
        let mut score = None;
        let mut depth = None;
        loop {
            match self.next_line(deadline) {
                Wait::Line(l) => {
                    if let Some(rest) = l.strip_prefix("bestmove") {
                        let elapsed = started.elapsed();
                        let bestmove = rest.split_whitespace().next().unwrap_or("").to_string();
                        return Ok(SearchReply {
                            bestmove,
                            score,
                            depth,
                            elapsed,
                        });
                    }
                    if l.starts_with("info ") && !l.starts_with("info string") {
                        score = parse_score(&l).or(score);
                        depth = parse_depth(&l).or(depth);
                    }
                }
                Wait::Timeout => {
                    let _ = self.child.kill();
                    return Err(EngineFault::Stalled(format!(
                        "{} sent no bestmove within {} ms",
                        self.label,
                        wait.as_millis()
                    )));
                }
                Wait::Closed => {
                    let status = self.child.wait().map(|s| s.to_string());
                    return Err(EngineFault::Crashed(format!(
                        "{} exited during a search ({}){}",
                        self.label,
                        status.unwrap_or_else(|e| e.to_string()),
                        self.its_words()
                    )));
                }
            }
        }
    }
}

impl Drop for UciProcess {
    fn drop(&mut self) {
        let _ = self.send("quit");
        self.stdin = None;
        let until = Instant::now() + Duration::from_millis(200);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `depth N` of an `info` line (not `seldepth`).
pub fn parse_depth(line: &str) -> Option<u32> {
    let mut words = line.split_whitespace();
    while let Some(w) = words.next() {
        if w == "depth" {
            return words.next()?.parse().ok();
        }
    }
    None
}

/// `score cp N` / `score mate N` of an `info` line.
pub fn parse_score(line: &str) -> Option<Score> {
    let mut words = line.split_whitespace();
    while let Some(w) = words.next() {
        if w == "score" {
            let kind = words.next()?;
            let value: i32 = words.next()?.parse().ok()?;
            return match kind {
                "cp" => Some(Score::Cp(value.clamp(-100_000, 100_000))),
                "mate" => Some(Score::Mate(value)),
                _ => None,
            };
        }
    }
    None
}

/// The `position` command for `start` (a FEN) and the moves played since, in UCI notation.
pub fn position_command(start_fen: &str, moves: &[String]) -> String {
    let mut s = format!("position fen {start_fen}");
    if !moves.is_empty() {
        s.push_str(" moves");
        for m in moves {
            s.push(' ');
            s.push_str(m);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An engine that gives up says why in an `info string` (Stockfish: a net it cannot
    /// load); the fault keeps those words, cleaned and cut.
    #[test]
    fn an_engine_s_last_words_are_kept_in_its_fault() {
        let script = "while read l; do case $l in \
            uci) echo uciok;; \
            isready) printf 'info string ERROR: nope.nnue is not a net of mine\\033[31m\\n'; exit 1;; \
            esac; done";
        let command = UciCommand {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            options: vec![],
        };
        let fault = match UciProcess::start(&command, Duration::from_secs(10)) {
            Err(f) => f.to_string(),
            Ok(_) => panic!("it exited"),
        };
        assert!(
            fault.contains("it said \"ERROR: nope.nnue is not a net of mine[31m\""),
            "{fault}"
        );
    }

    /// An engine starts in a directory of its own (what it writes by a relative name stays
    /// there), which is gone once the engine is; its `option` lines are kept for the policy.
    #[test]
    fn engines_run_in_a_scratch_directory_removed_after_them() {
        // Cargo gives the test process CARGO_PKG_NAME; the engine must not see it (nor
        // anything else of ours, such as storage secrets).
        assert!(std::env::var_os("CARGO_PKG_NAME").is_some());
        let out = std::env::temp_dir().join(format!("lakefish-cwd-test-{}", std::process::id()));
        let script = "pwd > \"$0\"; echo \"${CARGO_PKG_NAME:-none} $HOME\" > relative.log; \
            while read l; do case $l in \
            uci) echo 'option name Log File type string default'; echo uciok;; \
            isready) echo readyok;; quit) exit;; esac; done";
        let command = UciCommand {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into(), out.display().to_string()],
            options: vec![],
        };
        let engine = UciProcess::start(&command, Duration::from_secs(10)).unwrap();
        assert_eq!(
            engine.option_lines,
            ["option name Log File type string default"]
        );
        let cwd = std::path::PathBuf::from(std::fs::read_to_string(&out).unwrap().trim());
        assert!(cwd.starts_with(std::env::temp_dir()), "{}", cwd.display());
        assert!(
            cwd.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("lakefish-engine-")
        );
        // None of our environment (storage secrets), and its own directory as home.
        let env = std::fs::read_to_string(cwd.join("relative.log")).unwrap();
        assert_eq!(env.trim(), format!("none {}", cwd.display()));
        drop(engine);
        assert!(!cwd.exists(), "{} is left", cwd.display());
        std::fs::remove_file(&out).unwrap();
    }

    #[test]
    fn scores_are_read_from_info_lines() {
        assert_eq!(
            parse_score("info depth 10 seldepth 12 score cp -35 nodes 1000 pv e2e4"),
            Some(Score::Cp(-35))
        );
        assert_eq!(
            parse_score("info depth 3 score mate -2 pv a1a2"),
            Some(Score::Mate(-2))
        );
        assert_eq!(parse_score("info depth 3 score cp"), None);
        assert_eq!(
            parse_depth("info seldepth 12 depth 10 score cp 1"),
            Some(10)
        );
        assert_eq!(parse_depth("info depth x"), None);
        assert_eq!(parse_depth("info nodes 5"), None);
        assert_eq!(parse_score("info depth 3 score wdl 1 2 3"), None);
        assert_eq!(
            parse_score("info score cp 99999999999"),
            None,
            "out of range is no score"
        );
        assert_eq!(
            position_command("8/8/8/8/8/8/8/K1k5 w - - 0 1", &["a1a2".into()]),
            "position fen 8/8/8/8/8/8/8/K1k5 w - - 0 1 moves a1a2"
        );
    }

    #[test]
    fn a_program_that_is_not_an_engine_is_unresponsive() {
        let missing = UciCommand {
            program: "/nonexistent/engine".into(),
            args: vec![],
            options: vec![],
        };
        let e = UciProcess::start(&missing, Duration::from_secs(1))
            .err()
            .expect("no such program");
        assert!(matches!(e, EngineFault::Unresponsive(_)), "{e}");
        assert!(e.to_string().contains("/nonexistent/engine"), "{e}");
        // `true` exits at once without a word.
        let silent = UciCommand {
            program: "true".into(),
            args: vec![],
            options: vec![],
        };
        let e = UciProcess::start(&silent, Duration::from_secs(2))
            .err()
            .expect("no uciok");
        assert!(e.to_string().contains("exited before uciok"), "{e}");
        // `sleep` never answers.
        let mute = UciCommand {
            program: "sleep".into(),
            args: vec!["30".into()],
            options: vec![],
        };
        let e = UciProcess::start(&mute, Duration::from_millis(300))
            .err()
            .expect("no uciok");
        assert!(e.to_string().contains("within 300 ms"), "{e}");
    }
}
