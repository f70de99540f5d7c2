//! Progress of jobs run or followed from the command line: a bar on a terminal, and a plain
//! line every [`PLAIN_EVERY`] when the output is a file or a pipe (a CI log, `make demo`'s
//! log), so a long job is never silent.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use lakefish_jobs::ProgressSink;
use lakefish_schemas::Progress;

/// How often a line is written when the output is not a terminal.
pub(crate) const PLAIN_EVERY: Duration = Duration::from_secs(10);

pub(crate) enum Bar {
    Terminal(ProgressBar),
    /// When it started, and what it has written so far.
    Plain {
        started: Instant,
        state: Mutex<PlainState>,
    },
}

#[derive(Default)]
pub(crate) struct PlainState {
    /// When the last line was written.
    last: Option<Instant>,
    /// The last report, when it is not written yet (it is at the end).
    pending: Option<Progress>,
    /// Finished: nothing more is written (a follower may report a finished job again).
    done: bool,
}

/// The message of a report: its stage and what it has written so far (positions per second
/// for training, whose `rows` is a rate).
fn message(p: &Progress) -> String {
    match (p.rows, p.unit.as_str()) {
        (0, _) => p.stage.clone(),
        (r, "steps") => format!("{} ({r} positions/s)", p.stage),
        (r, _) => format!("{} ({r} rows)", p.stage),
    }
}

impl Bar {
    pub(crate) fn new() -> Self {
        if !std::io::stderr().is_terminal() {
            return Bar::Plain {
                started: Instant::now(),
                state: Mutex::new(PlainState::default()),
            };
        }
        let bar = ProgressBar::new(0);
        // The message on a line of its own, the terminal's whole width: after the bar, an
        // 80-column terminal cut the SPRT's W/D/L and the training loss off.
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} [{bar:30}] {percent:>3}% {elapsed_precise} eta {eta}\n  {wide_msg}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        Bar::Terminal(bar)
    }

    pub(crate) fn show(&self, p: &Progress) {
        match self {
            Bar::Terminal(bar) => {
                if let Some(total) = p.total {
                    bar.set_length(total);
                }
                bar.set_position(p.done);
                bar.set_message(message(p));
            }
            Bar::Plain { started, state } => {
                let mut s = state.lock().expect("progress state");
                if s.done {
                    return;
                }
                if s.last.is_none_or(|last| last.elapsed() >= PLAIN_EVERY) {
                    s.last = Some(Instant::now());
                    s.pending = None;
                    eprintln!("{}", plain_line(started.elapsed(), p));
                } else {
                    s.pending = Some(p.clone());
                }
            }
        }
    }

    pub(crate) fn finish(&self) {
        match self {
            Bar::Terminal(bar) => bar.finish(),
            Bar::Plain { started, state } => {
                let mut s = state.lock().expect("progress state");
                s.done = true;
                if let Some(p) = s.pending.take() {
                    eprintln!("{}", plain_line(started.elapsed(), &p));
                }
            }
        }
    }
}

/// `[  42s] ingest sf: 3/10 chunks (30%) (12345 rows)`.
fn plain_line(elapsed: Duration, p: &Progress) -> String {
    let count = match p.total {
        Some(t) if t > 0 => format!("{}/{t} {} ({}%)", p.done, p.unit, (100 * p.done.min(t)) / t),
        _ => format!("{} {}", p.done, p.unit),
    };
    format!("[{:>5}s] {}: {count}", elapsed.as_secs(), message(p))
}

impl ProgressSink for Bar {
    fn report(&self, p: &Progress) {
        self.show(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A follower reports a finished job on every poll: once finished, a plain bar writes
    /// nothing more (each poll would otherwise print its last line again).
    #[test]
    fn a_finished_plain_bar_stays_quiet() {
        let bar = Bar::Plain {
            started: Instant::now(),
            state: Mutex::new(PlainState::default()),
        };
        let p = Progress {
            stage: "train run-x".into(),
            done: 5,
            total: Some(10),
            unit: "steps".into(),
            rows: 1000,
        };
        bar.show(&p);
        bar.show(&p);
        let Bar::Plain { state, .. } = &bar else {
            unreachable!()
        };
        assert!(state.lock().unwrap().pending.is_some(), "the second waits");
        bar.finish();
        bar.show(&p);
        bar.finish();
        let s = state.lock().unwrap();
        assert!(s.done && s.pending.is_none());
        assert_eq!(
            plain_line(Duration::from_secs(42), &p),
            "[   42s] train run-x (1000 positions/s): 5/10 steps (50%)"
        );
    }
}
