//! `lakefish bench train --bullet PATH`: lakefish's CPU trainer against bullet's on the same
//! net, data and steps, alternating, in one run: positions per CPU-second and the training
//! loss over the last quarter of the steps.
//!
//! bullet is the `cmp` example of `../shared/bench/bullet-cpu/` (bullet at feab6443, its CPU
//! backend): (768 → 256)×2 → 1 SCReLU, AdamW, lr 0.001, batch 16,384, target
//! sigmoid(score / 361), sigmoid-MSE, lakefish's quiet filter, configured by environment.
//! lakefish trains the same net on the quiet rows of the same file (shuffled into a scratch
//! lake first, untimed) with bullet's AdamW and start (`bias_correction` off, weight decay
//! 0.01, every weight clipped to ±1.98, `weight_init = "bullet"`) and the sparse update: the
//! shipped description `infra/nets/bullet-1-simple.toml` 256 wide with the eval scale 361, so
//! that its sigmoid sees the raw output as bullet's does (the preset `256x2:screlu` multiplies
//! it by 600/361 first, which gives the output layer larger steps: a different net to train).
//! From the same weights and batches the two trainers take the same steps (docs/BENCHMARKS.md,
//! "Step by step against bullet"), so what is left between their losses is the start each
//! draws (bullet a new one every run, lakefish seed `round` in round `round`) and the order
//! of rows (bullet's loader reads the file through a shuffle buffer, lakefish a shuffle).
//!
//! The bucketed comparison (`--bullet-buckets`) trains bullet's `3_input_buckets` shape
//! narrower, the same way: bullet runs our example `tests/bullet/lakefish_check.rs` with
//! `CMP=1` (the `cmp` example's settings), lakefish the shipped description
//! `infra/nets/bullet-3-input-buckets.toml` at that width with the eval scale 361, so that
//! both sigmoids see the raw output.

use lakefish_jobs::{JobContext, Lake};
use lakefish_schemas::JobId;
use lakefish_train::TrainError;
use std::collections::HashMap;
use std::path::Path;

/// One side's measurement of one round.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TrainerRun {
    pub cpu_seconds: f64,
    pub wall_seconds: f64,
    pub positions: u64,
    /// Mean training loss over the last quarter of the steps.
    pub last_quarter_loss: f64,
}

impl TrainerRun {
    pub fn positions_per_cpu_second(&self) -> f64 {
        self.positions as f64 / self.cpu_seconds
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct BulletComparison {
    pub steps: u64,
    pub batch_size: u64,
    pub threads: usize,
    /// Alternating rounds, bullet first in each.
    pub rounds: Vec<(TrainerRun, TrainerRun)>,
    /// lakefish / bullet positions per CPU-second, the medians of the rounds' ratios.
    pub trainer_to_bullet: f64,
    /// lakefish / bullet training loss over the last quarter, the ratio of the rounds' means
    /// (each round starts both sides from a new random draw: the rounds are not pairs).
    pub loss_to_bullet: f64,
}

const BATCH: u64 = 16_384;

/// The net both sides train.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Compared {
    /// (768 → 256)×2 → 1 SCReLU: the `cmp` example; lakefish's `bullet-1-simple`
    /// description 256 wide, eval scale 361.
    Simple,
    /// bullet's `3_input_buckets` at this width: ten mirrored king buckets with a factoriser,
    /// SCReLU, eight output buckets by material.
    Buckets { width: u32 },
}

impl Compared {
    /// The first word of the comparison's lines: the inputs.
    pub fn label(self) -> &'static str {
        match self {
            Compared::Simple => "all768",
            Compared::Buckets { .. } => "king_buckets",
        }
    }
}

/// The shipped description of bullet's bucketed net; the comparison narrows it.
const BUCKETS_NET: &str = include_str!("../../../infra/nets/bullet-3-input-buckets.toml");
/// The shipped description of bullet's simple net; the comparison widens it to 256.
const SIMPLE_NET: &str = include_str!("../../../infra/nets/bullet-1-simple.toml");

/// `rounds` alternating runs of bullet (the binary at `bullet`: `cmp` for the simple net, our
/// `lakefish_check` example for the bucketed one) and lakefish's trainer on `net`, `steps`
/// steps each (rounded down to a multiple of 4: bullet reports its loss per superbatch,
/// here a quarter of the steps), on `threads` threads.
pub fn bench_bullet(
    rt: &tokio::runtime::Handle,
    file: &str,
    bullet: &Path,
    net: Compared,
    threads: usize,
    steps: u64,
    rounds: usize,
) -> Result<BulletComparison, TrainError> {
    check_args(bullet, net, steps)?;
    let steps = steps / 4 * 4;
    let dir = std::env::temp_dir().join(format!("lakefish-bench-bullet-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = (|| {
        let lake = Lake::open(
            dir.join("lake").to_str().unwrap_or_default(),
            &HashMap::new(),
        )?;
        let ctx = JobContext::new(lake, rt.clone()).with_threads(threads);
        let shuffle = lakefish_jobs::shuffle::quiet_shuffle(&ctx, file, "bench", 8, 1)?;
        // lakefish trains on all chunks but the last (held out): too few rows for the steps
        // is said before either side trains.
        let train_rows: u64 = shuffle.chunks.iter().rev().skip(1).map(|c| c.rows).sum();
        let most = train_rows / BATCH;
        if most < steps {
            return Err(TrainError::Spec(if most < 4 {
                format!(
                    "the file's quiet rows make {most} steps of {BATCH} outside the held-out \
                     chunk; the comparison needs at least 4 ({} quiet rows)",
                    4 * BATCH * 8 / 7
                )
            } else {
                format!(
                    "the file's quiet rows make {most} steps of {BATCH}, fewer than {steps}: \
                     give --bullet-steps {} or less",
                    most / 4 * 4
                )
            }));
        }
        let mut done = Vec::new();
        for round in 0..rounds.max(1) {
            eprintln!("round {}: bullet, {steps} steps", round + 1);
            let b = run_bullet(bullet, net, file, &dir, threads, steps)?;
            eprintln!(
                "round {}: bullet {:.0} positions per CPU-second, loss {:.5}; lakefish, {steps} steps",
                round + 1,
                b.positions_per_cpu_second(),
                b.last_quarter_loss
            );
            let l = run_lakefish(&ctx, &shuffle.id, net, steps, round as u64)?;
            eprintln!(
                "round {}: lakefish {:.0} positions per CPU-second, loss {:.5}",
                round + 1,
                l.positions_per_cpu_second(),
                l.last_quarter_loss
            );
            done.push((b, l));
        }
        let median = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            let n = v.len();
            if n % 2 == 1 {
                v[n / 2]
            } else {
                (v[n / 2 - 1] + v[n / 2]) / 2.0
            }
        };
        Ok(BulletComparison {
            steps,
            batch_size: BATCH,
            threads,
            trainer_to_bullet: median(
                done.iter()
                    .map(|(b, l)| l.positions_per_cpu_second() / b.positions_per_cpu_second())
                    .collect(),
            ),
            loss_to_bullet: done.iter().map(|(_, l)| l.last_quarter_loss).sum::<f64>()
                / done.iter().map(|(b, _)| b.last_quarter_loss).sum::<f64>(),
            rounds: done,
        })
    })();
    let _ = std::fs::remove_dir_all(&dir);
    out
}

/// The comparison's arguments, checked before any work: a bullet binary for `net` that
/// exists (named by the flag that gave it), at least 4 steps.
pub fn check_args(bullet: &Path, net: Compared, steps: u64) -> Result<(), TrainError> {
    if steps < 4 {
        return Err(TrainError::Spec(format!(
            "--bullet-steps {steps}: at least 4 (bullet reports its loss per quarter)"
        )));
    }
    if !bullet.is_file() {
        let (flag, build) = match net {
            Compared::Simple => (
                "--bullet",
                "build bullet's cmp example: ../shared/bench/bullet-cpu/README.md",
            ),
            Compared::Buckets { .. } => (
                "--bullet-buckets",
                "build lakefish's example tests/bullet/lakefish_check.rs into bullet as \
                 tests/tests/bullet.rs does: target/bullet/release/examples/lakefish_check",
            ),
        };
        return Err(TrainError::Spec(format!(
            "{flag} {}: no such file ({build})",
            bullet.display()
        )));
    }
    Ok(())
}

fn run_bullet(
    bullet: &Path,
    net: Compared,
    file: &str,
    dir: &Path,
    threads: usize,
    steps: u64,
) -> Result<TrainerRun, TrainError> {
    let t = threads.to_string();
    let cpu = crate::jobs::cpu_seconds_of(libc::RUSAGE_CHILDREN);
    let start = std::time::Instant::now();
    let mut cmd = std::process::Command::new(bullet);
    if let Compared::Buckets { width } = net {
        cmd.env("CMP", "1")
            .env("NET", "3")
            .env("HL", width.to_string())
            .env("STEPS", steps.to_string())
            .env("THREADS", &t);
    }
    let out = cmd
        .stdin(std::process::Stdio::null())
        .env("DATA", file)
        .env("BATCHES", steps.to_string())
        .env("SB", (steps / 4).to_string())
        .env("TRAIN_THREADS", &t)
        .env("LOADER_THREADS", &t)
        .env("PREP_THREADS", &t)
        .env("BUF_MB", "32")
        .env("OUT", dir.join("bullet-out"))
        .output()
        .map_err(|e| TrainError::Internal(format!("running {}: {e}", bullet.display())))?;
    let wall = start.elapsed().as_secs_f64();
    let cpu = crate::jobs::cpu_seconds_of(libc::RUSAGE_CHILDREN) - cpu;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(TrainError::Internal(format!(
            "{} exited with {}: {}",
            bullet.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        )));
    }
    let loss = last_running_loss(&text).ok_or_else(|| {
        TrainError::Internal(format!(
            "{} printed no \"running loss\" (is it bullet's cmp example, or for --bullet-buckets \
             the lakefish_check example?)",
            bullet.display()
        ))
    })?;
    Ok(TrainerRun {
        cpu_seconds: cpu,
        wall_seconds: wall,
        positions: steps * BATCH,
        last_quarter_loss: loss,
    })
}

/// The last `running loss X` bullet printed (its colours taken out): the mean over its last
/// superbatch.
fn last_running_loss(text: &str) -> Option<f64> {
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // An ANSI sequence: ESC [ ... letter.
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
        .rsplit("running loss")
        .next()
        .filter(|_| plain.contains("running loss"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn run_lakefish(
    ctx: &JobContext,
    shuffle: &lakefish_schemas::names::ShuffleId,
    net: Compared,
    steps: u64,
    seed: u64,
) -> Result<TrainerRun, TrainError> {
    let mut spec = serde_json::json!({
        "seed": seed,
        "shuffle": shuffle.to_string(),
        "batch_size": BATCH,
        "epochs": 1,
        "max_steps": steps,
        "device": "cpu",
        "loss": "mse",
        "ft_update": "sparse",
        "bias_correction": false,
        "weight_init": "bullet",
        "weight_decay": 0.01,
        "clip_weights": 1.98,
    });
    match net {
        Compared::Simple => {
            spec["net"] = serde_json::to_value(described(SIMPLE_NET, 256, "1_simple")?)
                .map_err(|e| TrainError::Internal(format!("the simple net: {e}")))?;
        }
        Compared::Buckets { width } => {
            spec["net"] = serde_json::to_value(buckets_net(width)?)
                .map_err(|e| TrainError::Internal(format!("the bucketed net: {e}")))?;
        }
    }
    let spec: lakefish_schemas::TrainSpec = serde_json::from_value(spec)
        .map_err(|e| TrainError::Internal(format!("the comparison's train spec: {e}")))?;
    let cpu = crate::jobs::cpu_seconds_of(libc::RUSAGE_SELF);
    let start = std::time::Instant::now();
    let run = lakefish_train::train::train(ctx, &JobId::new(), &spec)?;
    let wall = start.elapsed().as_secs_f64();
    let cpu = crate::jobs::cpu_seconds_of(libc::RUSAGE_SELF) - cpu;
    if run.step < steps {
        return Err(TrainError::Spec(format!(
            "the file's quiet rows make {} steps of {BATCH}, fewer than {steps}",
            run.step
        )));
    }
    let with = ctx
        .block_on(lakefish_jobs::nets::run_with_metrics(&ctx.lake, &run.id))?
        .ok_or_else(|| TrainError::Internal(format!("run {} vanished", run.id)))?;
    Ok(TrainerRun {
        cpu_seconds: cpu,
        wall_seconds: wall,
        positions: steps * BATCH,
        last_quarter_loss: last_quarter(&with.metrics, steps),
    })
}

/// bullet's `3_input_buckets` as shipped, `width` wide, its output read with the eval scale
/// 361 (the target's), so that the sigmoid sees the raw output as bullet's does.
pub fn buckets_net(width: u32) -> Result<lakefish_schemas::netspec::NetSpec, TrainError> {
    described(BUCKETS_NET, width, "3_input_buckets").map_err(|e| match e {
        TrainError::Spec(e) => TrainError::Spec(format!("--bucket-width {width}: {e}")),
        e => e,
    })
}

/// A shipped description of a bullet net, `width` wide, its output read with the eval scale
/// 361 (the target's), so that the sigmoid sees the raw output as bullet's does.
fn described(
    toml: &str,
    width: u32,
    name: &str,
) -> Result<lakefish_schemas::netspec::NetSpec, TrainError> {
    let mut net = lakefish_schemas::netspec::NetSpec::parse(toml)
        .map_err(|e| TrainError::Internal(format!("bullet's {name}: {e}")))?;
    net.transformer.width = width;
    net.quantization.eval_scale = 361.0;
    net.name = Some(format!("bullet {name}, {width} wide, eval scale 361"));
    net.validate()
        .map_err(|e| TrainError::Spec(e.to_string()))?;
    Ok(net)
}

/// The mean training loss over steps after `3/4 · steps`, each metrics row weighted by the
/// steps of the quarter it covers (a row holds the mean since the row before, so a row that
/// straddles the quarter's start counts for its steps inside it). A loss that is not finite
/// makes the result NaN: a diverging run is not hidden.
fn last_quarter(rows: &[lakefish_jobs::nets::MetricsPoint], steps: u64) -> f64 {
    let from = steps - steps / 4;
    let (mut sum, mut n) = (0.0, 0u64);
    let mut prev = 0u64;
    for r in rows {
        let covered = r.step.saturating_sub(prev.max(from));
        if r.step > from {
            sum += r.train_loss * covered as f64;
            n += covered;
        }
        prev = r.step;
    }
    if n == 0 { f64::NAN } else { sum / n as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_bullet_or_too_few_steps_is_refused_before_any_work() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let tmp =
            std::env::temp_dir().join(format!("lakefish-bench-bullet-{}", std::process::id()));
        let e = bench_bullet(
            rt.handle(),
            "no-such.binpack",
            Path::new("/no/such/cmp"),
            Compared::Simple,
            1,
            172,
            1,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("--bullet /no/such/cmp: no such file"), "{e}");
        assert!(!tmp.exists(), "a scratch lake was made");
        let e = check_args(Path::new("/bin/sh"), Compared::Simple, 3)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--bullet-steps 3: at least 4"), "{e}");
        check_args(Path::new("/bin/sh"), Compared::Simple, 4).unwrap();
        let buckets = Compared::Buckets { width: 64 };
        let e = check_args(Path::new("/no/such/check"), buckets, 172)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--bullet-buckets /no/such/check: no such file ("),
            "{e}"
        );
        assert!(e.contains("lakefish_check"), "{e}");
        check_args(Path::new("/bin/sh"), buckets, 172).unwrap();
        // A width the shipped description cannot take is refused naming the flag.
        for width in [0, 100_000] {
            let e = buckets_net(width).unwrap_err().to_string();
            assert!(e.contains(&format!("--bucket-width {width}: ")), "{e}");
        }
        assert_eq!(buckets_net(64).unwrap().transformer.width, 64);
        // The simple comparison's net: bullet's 1_simple 256 wide, its output read raw.
        let simple = described(SIMPLE_NET, 256, "1_simple").unwrap();
        assert_eq!(simple.transformer.width, 256);
        assert_eq!(simple.quantization.eval_scale, 361.0);
    }

    #[test]
    fn bullet_s_last_running_loss_is_read_through_its_colours() {
        let text = "superbatch \u{1b}[36m3\u{1b}[0m | running loss \u{1b}[36m0.006100\u{1b}[0m | x\n\
                    superbatch \u{1b}[36m4\u{1b}[0m | time 1.9s | running loss \u{1b}[36m0.005598\u{1b}[0m | 380278 pos/sec\n";
        assert_eq!(last_running_loss(text), Some(0.005598));
        assert_eq!(last_running_loss("no loss here"), None);
        assert_eq!(last_running_loss("running loss nan?"), None);
    }

    #[test]
    fn the_last_quarter_weights_rows_by_the_steps_they_cover() {
        let row = |step, train_loss| lakefish_jobs::nets::MetricsPoint {
            step,
            epoch: 0,
            train_loss,
            val_loss: None,
            lr: 1e-3,
            positions_per_s: 0.0,
            lambda: None,
        };
        // 40 steps: the last quarter is steps 31..=40; the row at 30 is before it, the row
        // at 40 covers 10 steps at 2.0.
        let rows = [row(10, 9.0), row(20, 9.0), row(30, 5.0), row(40, 2.0)];
        assert_eq!(last_quarter(&rows, 40), 2.0);
        // 172 steps: from 129; rows at 130 (1 step of it), 140 ... 170, 172 (2 steps).
        let rows: Vec<_> = (1..=17)
            .map(|i| row(i * 10, i as f64))
            .chain([row(172, 100.0)])
            .collect();
        let want = (13.0 + 10.0 * (14.0 + 15.0 + 16.0 + 17.0) + 2.0 * 100.0) / 43.0;
        assert!((last_quarter(&rows, 172) - want).abs() < 1e-12);
        assert!(last_quarter(&[row(30, 1.0), row(40, f64::NAN)], 40).is_nan());
    }
}
