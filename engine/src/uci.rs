//! The UCI protocol over any line reader and writer (stdin/stdout in `lakefish engine`).
//!
//! The reading thread answers `isready` and `stop` at once, even mid-search; the search runs
//! on its own thread and prints `info` and `bestmove` itself. Malformed input never ends the
//! session: it gets an `info string error: ...` line and changes nothing.

use std::io::{BufRead, Write};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use shakmaty::fen::Fen;
use shakmaty::uci::UciMove;
use shakmaty::{CastlingMode, Chess, EnPassantMode, Position};

use crate::eval::Evaluator;
use crate::search::{Limits, Searcher};

/// Turns an `EvalFile` value (a path, a registry name, `best`, `classical`) into an evaluator.
pub type Resolver = Box<dyn Fn(&str) -> Result<Evaluator, String> + Send>;

pub const DEFAULT_HASH_MB: usize = 16;

/// A UCI session.
pub struct Session<W: Write + Send + 'static> {
    out: Arc<Mutex<W>>,
    searcher: Arc<Mutex<Searcher>>,
    stop: Arc<AtomicBool>,
    resolve: Resolver,
    eval_name: String,
    chess960: bool,
    position: Chess,
    /// Keys of the positions before `position`, for repetition draws.
    history: Vec<u64>,
    running: Option<JoinHandle<()>>,
    /// True from `go` until just before `bestmove` is written. A GUI may send the next `go`
    /// the moment it reads `bestmove`, while the old thread is still exiting: that search is
    /// over, so the new one only has to join it.
    busy: Arc<AtomicBool>,
}

impl<W: Write + Send + 'static> Session<W> {
    /// A session evaluating with `evaluator` (named `eval_name` in the `EvalFile` option).
    pub fn new(out: W, evaluator: Evaluator, eval_name: &str, resolve: Resolver) -> Self {
        let searcher = Searcher::new(evaluator, DEFAULT_HASH_MB);
        Session {
            out: Arc::new(Mutex::new(out)),
            stop: searcher.stop_flag(),
            searcher: Arc::new(Mutex::new(searcher)),
            resolve,
            eval_name: eval_name.to_string(),
            chess960: false,
            position: Chess::default(),
            history: Vec::new(),
            running: None,
            busy: Arc::new(AtomicBool::new(false)),
        }
    }

    fn say(&self, line: &str) {
        let mut out = self.out.lock().expect("output lock");
        // A closed pipe means the GUI is gone; the next read ends the session.
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }

    fn error(&self, message: &str) {
        self.say(&format!("info string error: {message}"));
    }

    /// Reads commands until `quit` or the end of input; waits for a running search to end.
    pub fn run(mut self, input: impl BufRead) {
        for line in input.lines() {
            let Ok(line) = line else { break };
            if !self.command(line.trim()) {
                break;
            }
        }
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.wait();
    }

    fn wait(&mut self) {
        if let Some(handle) = self.running.take() {
            let _ = handle.join();
        }
    }

    fn searching(&self) -> bool {
        self.busy.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Handles one line; false on `quit`.
    pub fn command(&mut self, line: &str) -> bool {
        let mut words = line.split_whitespace();
        let Some(cmd) = words.next() else {
            return true;
        };
        let rest: Vec<&str> = words.collect();
        match cmd {
            "uci" => {
                self.say("id name lakefish");
                self.say("id author the lakefish developers");
                self.say(&format!(
                    "option name Hash type spin default {DEFAULT_HASH_MB} min 1 max 65536"
                ));
                self.say(&format!(
                    "option name EvalFile type string default {}",
                    self.eval_name
                ));
                self.say("option name UCI_Chess960 type check default false");
                self.say("uciok");
            }
            "isready" => self.say("readyok"),
            "ucinewgame" => {
                self.wait();
                self.searcher.lock().expect("searcher").clear();
                self.position = Chess::default();
                self.history.clear();
            }
            "setoption" => self.set_option(&rest),
            "position" => {
                if let Err(e) = self.set_position(&rest) {
                    self.error(&format!("position: {e}; position unchanged"));
                }
            }
            "go" => self.go(&rest),
            "stop" => {
                self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
                self.wait();
            }
            "eval" => {
                self.wait();
                let v = self
                    .searcher
                    .lock()
                    .expect("searcher")
                    .static_eval(&self.position);
                let score = crate::search::Score::from_internal(v, &self.position);
                self.say(&format!("info string static eval {score} ({v} internal)"));
            }
            "quit" => return false,
            "debug" | "register" | "ponderhit" => {}
            other => self.error(&format!("unknown command {other:?}")),
        }
        true
    }

    fn set_option(&mut self, args: &[&str]) {
        // setoption name <id...> [value <x...>]
        let joined = args.join(" ");
        let Some(rest) = joined.strip_prefix("name ") else {
            return self.error("setoption: expected `setoption name <id> [value <x>]`");
        };
        let (name, value) = match rest.split_once(" value ") {
            Some((n, v)) => (n.trim(), v.trim()),
            None => (rest.trim(), ""),
        };
        self.wait();
        match name.to_ascii_lowercase().as_str() {
            "hash" => match value.parse::<usize>() {
                Ok(mb) if (1..=65536).contains(&mb) => {
                    let resized = self.searcher.lock().expect("searcher").set_hash(mb);
                    if let Err(e) = resized {
                        self.error(&format!("setoption Hash: {e}; the table keeps its size"));
                    }
                }
                _ => self.error(&format!(
                    "setoption Hash: {value:?} is not a size in MiB from 1 to 65536"
                )),
            },
            "evalfile" => match (self.resolve)(value) {
                Ok(evaluator) => {
                    let text = evaluator.describe();
                    self.searcher
                        .lock()
                        .expect("searcher")
                        .set_evaluator(evaluator);
                    self.eval_name = value.to_string();
                    self.say(&format!("info string evaluation: {text}"));
                }
                Err(e) => self.error(&format!("setoption EvalFile {value:?}: {e}")),
            },
            "uci_chess960" => match value {
                "true" => self.chess960 = true,
                "false" => self.chess960 = false,
                _ => self.error(&format!(
                    "setoption UCI_Chess960: {value:?} is not true or false"
                )),
            },
            _ => self.error(&format!("setoption: unknown option {name:?}")),
        }
    }

    fn set_position(&mut self, args: &[&str]) -> Result<(), String> {
        let mode = if self.chess960 {
            CastlingMode::Chess960
        } else {
            CastlingMode::Standard
        };
        let (mut pos, rest) = match args.first() {
            Some(&"startpos") => (Chess::default(), &args[1..]),
            Some(&"fen") => {
                let end = args
                    .iter()
                    .position(|w| *w == "moves")
                    .unwrap_or(args.len());
                let fen_text = args[1..end].join(" ");
                let fen: Fen = fen_text
                    .parse()
                    .map_err(|e| format!("bad FEN {fen_text:?}: {e}"))?;
                let pos = fen
                    .into_position(mode)
                    .map_err(|e| format!("illegal FEN {fen_text:?}: {e}"))?;
                (pos, &args[end..])
            }
            _ => return Err("expected `startpos` or `fen <FEN>`".to_string()),
        };
        let mut history = Vec::new();
        match rest.first() {
            None => {}
            Some(&"moves") => {
                for (i, text) in rest[1..].iter().enumerate() {
                    let uci: UciMove = text
                        .parse()
                        .map_err(|_| format!("move {} {text:?} is not UCI notation", i + 1))?;
                    let mv = uci
                        .to_move(&pos)
                        .map_err(|_| format!("move {} {text:?} is illegal here", i + 1))?;
                    history.push(
                        pos.zobrist_hash::<shakmaty::zobrist::Zobrist64>(EnPassantMode::Legal)
                            .0,
                    );
                    pos.play_unchecked(mv);
                }
            }
            Some(other) => return Err(format!("expected `moves`, found {other:?}")),
        }
        self.position = pos;
        self.history = history;
        Ok(())
    }

    fn go(&mut self, args: &[&str]) {
        if self.searching() {
            return self.error("go: a search is already running; send stop first");
        }
        self.wait();
        let limits = match parse_go(args) {
            Ok(l) => l,
            Err(e) => return self.error(&format!("go: {e}; not searching")),
        };
        // Cleared here, on the thread that also reads `stop`, so a `stop` right after this
        // `go` is never lost (the search thread may not have started yet).
        self.stop.store(false, std::sync::atomic::Ordering::Relaxed);
        let (searcher, out) = (Arc::clone(&self.searcher), Arc::clone(&self.out));
        let busy = Arc::clone(&self.busy);
        busy.store(true, std::sync::atomic::Ordering::Release);
        let (pos, history, chess960) = (self.position.clone(), self.history.clone(), self.chess960);
        let mode = if chess960 {
            CastlingMode::Chess960
        } else {
            CastlingMode::Standard
        };
        let spawned = std::thread::Builder::new()
            .name("search".into())
            .stack_size(64 << 20)
            .spawn(move || {
                let mut searcher = searcher.lock().expect("searcher");
                let result = searcher.search(&pos, &history, &limits, |info| {
                    let pv = uci_line(&info.pv, mode);
                    let line = format!(
                        "info depth {} seldepth {} score {} nodes {} nps {} time {} pv {}",
                        info.depth,
                        info.seldepth,
                        info.score,
                        info.nodes,
                        info.nps(),
                        info.time.as_millis(),
                        pv.join(" ")
                    );
                    let mut out = out.lock().expect("output lock");
                    let _ = writeln!(out, "{line}");
                    let _ = out.flush();
                });
                let best = result.best.map_or("0000".to_string(), |m| {
                    UciMove::from_move(m, mode).to_string()
                });
                let mut out = out.lock().expect("output lock");
                busy.store(false, std::sync::atomic::Ordering::Release);
                let _ = writeln!(out, "bestmove {best}");
                let _ = out.flush();
            });
        match spawned {
            Ok(h) => self.running = Some(h),
            Err(e) => {
                self.busy.store(false, std::sync::atomic::Ordering::Release);
                self.error(&format!("go: cannot start the search thread: {e}"))
            }
        }
    }
}

/// The moves of `pv` in UCI notation.
pub fn uci_line(pv: &[shakmaty::Move], mode: CastlingMode) -> Vec<String> {
    pv.iter()
        .map(|m| UciMove::from_move(*m, mode).to_string())
        .collect()
}

/// Parses the arguments of `go`.
pub fn parse_go(args: &[&str]) -> Result<Limits, String> {
    let mut limits = Limits::default();
    let mut i = 0;
    while i < args.len() {
        let key = args[i];
        let number = |i: usize| -> Result<u64, String> {
            let v = args
                .get(i + 1)
                .ok_or_else(|| format!("{key} needs a value"))?;
            // Some GUIs send negative clock times when a player is late.
            if let Ok(n) = v.parse::<i64>() {
                return Ok(n.max(0) as u64);
            }
            Err(format!("{key}: {v:?} is not a number"))
        };
        let ms = |i| number(i).map(Duration::from_millis).map(Some);
        match key {
            "infinite" | "ponder" => limits.infinite = true,
            "depth" => limits.depth = Some(number(i)?.clamp(1, 127) as u32),
            "nodes" => limits.nodes = Some(number(i)?.max(1)),
            "movetime" => limits.movetime = ms(i)?,
            "wtime" => limits.wtime = ms(i)?,
            "btime" => limits.btime = ms(i)?,
            "winc" => limits.winc = ms(i)?,
            "binc" => limits.binc = ms(i)?,
            "movestogo" => limits.movestogo = Some(number(i)?.clamp(1, 1000) as u32),
            "mate" => limits.depth = Some((number(i)?.clamp(1, 60) * 2) as u32),
            "searchmoves" => {
                return Err("searchmoves is not supported".to_string());
            }
            other => return Err(format!("unknown parameter {other:?}")),
        }
        i += if key == "infinite" || key == "ponder" {
            1
        } else {
            2
        };
    }
    Ok(limits)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Output collected in memory for tests.
    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn session(script: &str) -> String {
        let buf = Buf::default();
        let s = Session::new(
            buf.clone(),
            Evaluator::Classical,
            "classical",
            Box::new(|v| match v {
                "classical" => Ok(Evaluator::Classical),
                _ => Err(format!("no net {v:?}")),
            }),
        );
        s.run(script.as_bytes());
        let out = buf.0.lock().unwrap().clone();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn plays_a_legal_move_and_survives_garbage() {
        let out = session(
            "uci\nisready\nposition startpos moves e2e4 e7e5\ngo depth 4\nstop\n\
             position fen not a fen\nposition startpos moves e2e5\ngo depth banana\n\
             setoption name Hash value -3\nsetoption name EvalFile value nope\nfrobnicate\n\
             setoption name EvalFile value classical\n\
             position fen 6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1\ngo depth 3\nquit\n",
        );
        assert!(out.contains("uciok") && out.contains("readyok"), "{out}");
        // `stop` may end the depth-4 search at any depth, even before depth 1 completes.
        assert!(out.contains("bestmove "), "{out}");
        assert!(out.contains("bad FEN \"not a fen\""), "{out}");
        assert!(out.contains("move 1 \"e2e5\" is illegal"), "{out}");
        assert!(out.contains("depth: \"banana\" is not a number"), "{out}");
        assert!(out.contains("setoption Hash: \"-3\""), "{out}");
        assert!(out.contains("no net \"nope\""), "{out}");
        assert!(out.contains("unknown command \"frobnicate\""), "{out}");
        // Back-rank mate in one.
        assert!(out.contains("score mate 1"), "{out}");
        assert!(out.trim_end().ends_with("bestmove a1a8"), "{out}");
        assert_eq!(out.matches("bestmove").count(), 2, "{out}");
    }

    /// A hash size the machine cannot back is an error line, not a dead engine (only where
    /// the machine really has less than 64 GiB available, so the test never allocates it).
    #[test]
    fn a_hash_size_beyond_memory_is_refused() {
        if crate::search::available_megabytes().is_none_or(|mb| mb >= 65536) {
            return;
        }
        let out = session(
            "setoption name Hash value 65536
position startpos
go depth 2
isready
quit
",
        );
        assert!(
            out.contains("setoption Hash:") && out.contains("the table keeps its size"),
            "{out}"
        );
        assert!(
            out.contains("bestmove ") && out.contains("readyok"),
            "{out}"
        );
    }

    /// A GUI sends the next `go` as soon as it reads `bestmove`, while the finished search's
    /// thread may still be exiting: every such `go` must search.
    #[test]
    fn go_right_after_bestmove_always_searches() {
        let buf = Buf::default();
        let (reader, mut writer) = std::io::pipe().unwrap();
        let session = Session::new(
            buf.clone(),
            Evaluator::Classical,
            "classical",
            Box::new(|_| Err("none".into())),
        );
        let runner = std::thread::spawn(move || session.run(std::io::BufReader::new(reader)));
        let bestmoves = |b: &Buf| {
            String::from_utf8_lossy(&b.0.lock().unwrap())
                .matches("bestmove")
                .count()
        };
        for i in 1..=100 {
            writeln!(writer, "go depth 1").unwrap();
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while bestmoves(&buf) < i {
                assert!(
                    std::time::Instant::now() < deadline,
                    "go {i} got no bestmove"
                );
                std::thread::yield_now();
            }
        }
        writeln!(writer, "quit").unwrap();
        runner.join().unwrap();
        let out = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert!(!out.contains("already running"), "{out}");
    }

    /// `stop` sent the instant after `go infinite` (before the search thread has begun) must
    /// still end that search.
    #[test]
    fn stop_right_after_go_infinite_ends_the_search() {
        let buf = Buf::default();
        let session = Session::new(
            buf.clone(),
            Evaluator::Classical,
            "classical",
            Box::new(|_| Err("none".into())),
        );
        let script = "go infinite\nstop\n".repeat(200) + "quit\n";
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            session.run(script.as_bytes());
            let _ = done_tx.send(());
        });
        assert!(
            done_rx.recv_timeout(Duration::from_secs(60)).is_ok(),
            "a stop was lost: go infinite never ended"
        );
        let out = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert_eq!(out.matches("bestmove").count(), 200, "{out}");
    }

    #[test]
    fn go_parameters() {
        let l = parse_go(&[
            "wtime",
            "1000",
            "btime",
            "-5",
            "winc",
            "10",
            "movestogo",
            "3",
        ])
        .unwrap();
        assert_eq!(l.wtime, Some(Duration::from_millis(1000)));
        assert_eq!(l.btime, Some(Duration::ZERO));
        assert_eq!(l.movestogo, Some(3));
        assert!(parse_go(&["nodes"]).unwrap_err().contains("needs a value"));
        assert!(parse_go(&["sideways", "3"]).is_err());
    }
}
