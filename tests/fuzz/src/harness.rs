//! Runs a target over generated inputs: panics are caught and reported with the seed, the
//! iteration and the input (hex and a file), and an input that runs past its budget is
//! reported as a hang instead of stalling the test run.

use crate::mutate::{Rng, fnv, mutate_bytes, mutate_text, random_bytes};
use std::cell::{Cell, RefCell};
use std::fmt::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

/// What a target makes of one input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Parsed (and whatever the target checks on parsed values held).
    Accepted,
    /// Refused with an error that names where the input went wrong.
    Refused,
}

/// `Err` is a broken promise (an error without a location, a round trip that differs); a
/// panic is caught by the harness.
pub type Check = Box<dyn Fn(&[u8]) -> Result<Verdict, String> + Send + Sync>;
/// A format-aware mutation (JSON values, header fix-ups); `None` leaves the input as it was.
pub type Structured = fn(&mut Rng, &[u8]) -> Option<Vec<u8>>;

pub struct Target {
    pub name: &'static str,
    /// Valid inputs (and a few interesting invalid ones) that mutations start from.
    pub seeds: Vec<Vec<u8>>,
    /// Tokens worth inserting (keywords, field names, magic bytes).
    pub dict: Vec<Vec<u8>>,
    /// Text formats also get word- and line-level mutations.
    pub text: bool,
    pub structured: Option<Structured>,
    /// Inputs longer than this are cut (keeps one input's cost bounded).
    pub max_len: usize,
    pub check: Check,
}

impl Target {
    /// Input `iter` of a run with `seed`: the seeds themselves first, then mutants.
    pub fn input(&self, seed: u64, iter: u64) -> Vec<u8> {
        if (iter as usize) < self.seeds.len() {
            return self.seeds[iter as usize].clone();
        }
        let mut rng = Rng::new(seed ^ fnv(self.name) ^ iter.wrapping_mul(0xA076_1D64_78BD_642F));
        let mut data = if self.seeds.is_empty() || rng.chance(25) {
            random_bytes(&mut rng, 256)
        } else {
            rng.pick(&self.seeds).clone()
        };
        let spread = 1 << rng.below(4);
        let rounds = 1 + rng.below(spread);
        for _ in 0..rounds {
            match self.structured {
                Some(f) if rng.chance(3) => {
                    if let Some(d) = f(&mut rng, &data) {
                        data = d;
                    }
                }
                _ if self.text && rng.chance(2) => {
                    mutate_text(&mut rng, &mut data, &self.seeds, &self.dict)
                }
                _ => mutate_bytes(&mut rng, &mut data, &self.seeds, &self.dict),
            }
        }
        data.truncate(self.max_len);
        data
    }
}

#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub inputs: u64,
    pub accepted: u64,
    pub refused: u64,
    pub elapsed: Duration,
    pub slowest: Duration,
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} inputs ({} accepted, {} refused) in {:.2} s, slowest {:.1} ms",
            self.inputs,
            self.accepted,
            self.refused,
            self.elapsed.as_secs_f64(),
            self.slowest.as_secs_f64() * 1e3
        )
    }
}

thread_local! {
    static IN_FUZZ: Cell<bool> = const { Cell::new(false) };
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Panics on threads other than fuzz workers whose name starts with this are counted (the
/// UCI session searches on a thread of its own).
static OTHER_PANICS: AtomicU64 = AtomicU64::new(0);

/// Panics seen so far on threads that targets start (`search`).
pub fn panics_elsewhere() -> u64 {
    OTHER_PANICS.load(Ordering::SeqCst)
}

/// Records panics on fuzz workers (message, place, backtrace) instead of printing them; every
/// other panic goes to the previous hook as before.
pub fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_FUZZ.with(Cell::get) {
                let bt = std::backtrace::Backtrace::force_capture();
                LAST_PANIC.with(|p| *p.borrow_mut() = Some(format!("{info}\n{bt}")));
            } else {
                if std::thread::current().name() == Some("search") {
                    OTHER_PANICS.fetch_add(1, Ordering::SeqCst);
                }
                previous(info);
            }
        }));
    });
}

/// Runs `check` on one input as the harness does; a panic becomes `Err`.
pub fn run_one(target: &Target, input: &[u8]) -> Result<Verdict, String> {
    install_panic_hook();
    IN_FUZZ.with(|f| f.set(true));
    LAST_PANIC.with(|p| p.borrow_mut().take());
    let outcome = catch_unwind(AssertUnwindSafe(|| (target.check)(input)));
    IN_FUZZ.with(|f| f.set(false));
    match outcome {
        Ok(r) => r,
        Err(_) => Err(format!(
            "panic: {}",
            LAST_PANIC
                .with(|p| p.borrow_mut().take())
                .unwrap_or_else(|| "(no message)".into())
        )),
    }
}

/// Per-input time limit: generous, so a loaded CI machine never trips it; a hang does.
fn input_budget() -> Duration {
    let secs = std::env::var("LAKEFISH_FUZZ_INPUT_BUDGET_S")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    Duration::from_secs(secs)
}

/// `LAKEFISH_FUZZ_SEED` or the fixed default.
pub fn seed_from_env() -> u64 {
    std::env::var("LAKEFISH_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x1a4e_f15b)
}

/// `LAKEFISH_FUZZ_ITERS` or `default`.
pub fn iters_from_env(default: u64) -> u64 {
    std::env::var("LAKEFISH_FUZZ_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn hex_dump(data: &[u8], max: usize) -> String {
    let mut s = String::new();
    for (row, chunk) in data[..data.len().min(max)].chunks(16).enumerate() {
        let _ = write!(s, "{:08x} ", row * 16);
        for b in chunk {
            let _ = write!(s, " {b:02x}");
        }
        s.push_str("  ");
        s.extend(chunk.iter().map(|&b| {
            if (0x20..0x7f).contains(&b) {
                b as char
            } else {
                '.'
            }
        }));
        s.push('\n');
    }
    if data.len() > max {
        let _ = writeln!(s, "... ({} bytes in all)", data.len());
    }
    s
}

/// Where failing inputs are written: `LAKEFISH_FUZZ_OUT`, else the temp dir.
fn save(name: &str, seed: u64, iter: u64, data: &[u8]) -> PathBuf {
    let dir = std::env::var_os("LAKEFISH_FUZZ_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("lakefish-fuzz"));
    let path = dir.join(format!("{name}-seed{seed}-iter{iter}.bin"));
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(&path, data);
    path
}

fn failure(name: &str, seed: u64, iter: u64, data: &[u8], what: &str) -> String {
    let path = save(name, seed, iter, data);
    format!(
        "fuzz target {name}, seed {seed}, iteration {iter}: {what}\n\
         input ({} bytes) saved to {} (LAKEFISH_FUZZ_SEED={seed} regenerates it as iteration {iter}):\n{}",
        data.len(),
        path.display(),
        hex_dump(data, 1024)
    )
}

enum Msg {
    Started(u64),
    Failed(u64, Vec<u8>, String),
    Done(Stats),
}

/// Runs `iters` inputs of `target` from `seed` on a worker thread; panics (the test fails)
/// with a reproducible report on the first panic, broken promise or hang.
pub fn fuzz(target: Arc<Target>, iters: u64, seed: u64) -> Stats {
    install_panic_hook();
    let budget = input_budget();
    let current = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = channel();
    let worker = {
        let (target, current) = (Arc::clone(&target), Arc::clone(&current));
        std::thread::Builder::new()
            .name(format!("fuzz-{}", target.name))
            .stack_size(64 << 20)
            .spawn(move || {
                let mut stats = Stats::default();
                let start = Instant::now();
                for iter in 0..iters {
                    let input = target.input(seed, iter);
                    *current.lock().unwrap() = input.clone();
                    let _ = tx.send(Msg::Started(iter));
                    let t = Instant::now();
                    let verdict = run_one(&target, &input);
                    stats.slowest = stats.slowest.max(t.elapsed());
                    stats.inputs += 1;
                    match verdict {
                        Ok(Verdict::Accepted) => stats.accepted += 1,
                        Ok(Verdict::Refused) => stats.refused += 1,
                        Err(why) => {
                            let _ = tx.send(Msg::Failed(iter, input, why));
                            return;
                        }
                    }
                }
                stats.elapsed = start.elapsed();
                let _ = tx.send(Msg::Done(stats));
            })
            .expect("a fuzz worker thread")
    };
    let mut iter = 0;
    loop {
        match rx.recv_timeout(budget) {
            Ok(Msg::Started(i)) => iter = i,
            Ok(Msg::Done(stats)) => {
                let _ = worker.join();
                return stats;
            }
            Ok(Msg::Failed(i, input, why)) => {
                let _ = worker.join();
                panic!("{}", failure(target.name, seed, i, &input, &why));
            }
            Err(RecvTimeoutError::Timeout) => {
                // The worker is left running: it cannot be stopped, and the test fails anyway.
                let input = current.lock().map(|c| c.clone()).unwrap_or_default();
                panic!(
                    "{}",
                    failure(
                        target.name,
                        seed,
                        iter,
                        &input,
                        &format!("hang: one input ran longer than {budget:?}")
                    )
                );
            }
            Err(RecvTimeoutError::Disconnected) => {
                panic!("fuzz target {}: the worker thread died", target.name)
            }
        }
    }
}
