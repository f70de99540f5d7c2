//! Match statistics for engine testing: Elo estimates and the generalized SPRT.
//!
//! The formulas follow fishtest (`server/fishtest/stats/LLRcalc.py` and `stat_util.py`,
//! written by Michel Van den Bergh) so that a lakefish SPRT stops exactly where fishtest
//! would on the same counts. The theory is in Van den Bergh's notes that fishtest cites:
//! `support_MLE_multinomial.pdf` (Proposition 1.1) and `normalized_elo_practical.pdf`
//! (Section 4.1).
//!
//! In short: the log-likelihood ratio (LLR) of H1 against H0 is the difference of two
//! *profile* log-likelihoods. For each hypothesis we find the outcome distribution that
//! explains the observed counts best while obeying the hypothesis (a given expected score
//! for logistic Elo, a given t-value `(mu - 1/2) / sigma` for normalized Elo), and compare
//! how well the two explain the data. Game pairs (pentanomial counts) are treated as one
//! sample with five outcomes, which accounts for the correlation between the two games of a
//! pair that share an opening.
//!
//! Empty bins are replaced by `1e-3` before anything is computed, as fishtest does: every
//! maximum likelihood estimate then lies strictly inside the simplex and every logarithm
//! is finite, while the effect on real-sized samples is negligible.

use std::f64::consts::{FRAC_2_SQRT_PI, LN_10, SQRT_2};

/// Normalized Elo per unit of t-value: `800 / ln 10`, fishtest's `nelo_divided_by_nt`.
///
/// With this scale a small nElo difference equals the logistic Elo difference when there
/// are no draws, which is what makes nElo readable.
pub const NELO_PER_T: f64 = 800.0 / LN_10;

/// The 97.5% quantile of the standard normal law: the half width of a 95% interval.
pub const Z_975: f64 = 1.959_963_984_540_054;

/// What an empty bin counts as: fishtest's regularization epsilon.
const EMPTY_BIN: f64 = 1e-3;

/// Scores are clamped to `[SCORE_CLAMP, 1 - SCORE_CLAMP]` before conversion to Elo in
/// [`elo_estimate`], as fishtest's `stat_util.elo` does, so a perfect score reads about
/// ±1200 Elo instead of infinity.
const SCORE_CLAMP: f64 = 1e-3;

/// Invalid input to the statistics in this module.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SprtError {
    #[error("elo1 must be greater than elo0")]
    Elo1NotGreater,
    #[error("no games")]
    NoGames,
    #[error("{name} must be finite, got {value}")]
    NonFinite { name: &'static str, value: f64 },
    #[error("alpha and beta must lie in (0, 1) with alpha + beta < 1")]
    InvalidErrorRates,
    #[error("elo {elo} is too far from zero to be represented")]
    OutOfRange { elo: f64 },
    #[error("maximum likelihood estimate did not converge")]
    NoConvergence,
}

/// Game results from the point of view of the engine under test.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Wdl {
    pub wins: u64,
    pub draws: u64,
    pub losses: u64,
}

impl Wdl {
    pub const fn new(wins: u64, draws: u64, losses: u64) -> Self {
        Self {
            wins,
            draws,
            losses,
        }
    }

    /// Number of games played.
    pub fn games(&self) -> u64 {
        self.wins
            .saturating_add(self.draws)
            .saturating_add(self.losses)
    }

    /// Mean score per game (win 1, draw 1/2, loss 0); `None` before the first game.
    pub fn score(&self) -> Option<f64> {
        let games = self.games();
        (games > 0).then(|| (self.wins as f64 + 0.5 * self.draws as f64) / games as f64)
    }
}

/// Game-pair results: `self.0[k]` counts the pairs in which the engine under test scored `k / 2`
/// points over the two games.
///
/// Index 0 is LL (score 0), 1 is LD (1/2), 2 is DD or WL (1), 3 is WD (3/2) and 4 is WW (2).
/// The order inside a pair does not matter. The W/D/L totals cannot be recovered from these
/// counts (DD and WL share a bin), which is why both are kept side by side by callers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Pentanomial(pub [u64; 5]);

impl Pentanomial {
    /// Number of game pairs.
    pub fn pairs(&self) -> u64 {
        self.0.iter().fold(0u64, |acc, &n| acc.saturating_add(n))
    }

    /// Number of games: two per pair.
    pub fn games(&self) -> u64 {
        self.pairs().saturating_mul(2)
    }

    /// Mean score per game, in `[0, 1]`; `None` before the first pair.
    pub fn score(&self) -> Option<f64> {
        let pairs = self.pairs();
        (pairs > 0).then(|| {
            let points: f64 = self
                .0
                .iter()
                .enumerate()
                .map(|(k, &n)| k as f64 * 0.5 * n as f64)
                .sum();
            points / (2.0 * pairs as f64)
        })
    }
}

/// Either kind of counts. The statistics accept both through `impl Into<Counts>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Counts {
    Trinomial(Wdl),
    Pentanomial(Pentanomial),
}

impl From<Wdl> for Counts {
    fn from(wdl: Wdl) -> Self {
        Counts::Trinomial(wdl)
    }
}

impl From<Pentanomial> for Counts {
    fn from(p: Pentanomial) -> Self {
        Counts::Pentanomial(p)
    }
}

impl Counts {
    /// Number of games played.
    pub fn games(&self) -> u64 {
        match self {
            Counts::Trinomial(wdl) => wdl.games(),
            Counts::Pentanomial(p) => p.games(),
        }
    }
}

/// Expected score of a player `elo` logistic Elo stronger than its opponent.
pub fn logistic_elo_to_score(elo: f64) -> f64 {
    1.0 / (1.0 + 10f64.powf(-elo / 400.0))
}

/// Logistic Elo difference that gives expected score `score`; ±infinity at 0 and 1.
pub fn score_to_logistic_elo(score: f64) -> f64 {
    -400.0 * (1.0 / score - 1.0).log10()
}

/// Normalized Elo of a mean score, given the standard deviation of a single game's score.
///
/// nElo measures the score excess in units of its noise, so it is inversely proportional
/// to the square root of the number of games needed to detect a difference. For game pairs
/// fishtest's per-game sigma is `sqrt(2)` times the standard deviation of the per-game
/// score of a pair (`EloEstimate::sigma_per_game` gives it).
pub fn score_to_nelo(score: f64, sigma_per_game: f64) -> f64 {
    (score - 0.5) / sigma_per_game * NELO_PER_T
}

/// Inverse of [`score_to_nelo`].
pub fn nelo_to_score(nelo: f64, sigma_per_game: f64) -> f64 {
    0.5 + nelo / NELO_PER_T * sigma_per_game
}

/// Wald's stopping thresholds for the LLR.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SprtBounds {
    pub lower: f64,
    pub upper: f64,
}

/// What an SPRT concludes from one LLR value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SprtDecision {
    /// The LLR fell to the lower bound: H0 (elo = elo0) is accepted.
    AcceptH0,
    /// The LLR reached the upper bound: H1 (elo = elo1) is accepted.
    AcceptH1,
    Continue,
}

impl SprtBounds {
    /// Bounds for a test with false-positive rate `alpha` and false-negative rate `beta`:
    /// `lower = ln(beta / (1 - alpha))`, `upper = ln((1 - beta) / alpha)`.
    pub fn new(alpha: f64, beta: f64) -> Result<Self, SprtError> {
        finite("alpha", alpha)?;
        finite("beta", beta)?;
        if !(alpha > 0.0 && alpha < 1.0 && beta > 0.0 && beta < 1.0 && alpha + beta < 1.0) {
            return Err(SprtError::InvalidErrorRates);
        }
        Ok(Self {
            lower: (beta / (1.0 - alpha)).ln(),
            upper: ((1.0 - beta) / alpha).ln(),
        })
    }

    /// Compares an LLR with the bounds; reaching a bound exactly stops the test.
    pub fn decide(&self, llr: f64) -> SprtDecision {
        if llr >= self.upper {
            SprtDecision::AcceptH1
        } else if llr <= self.lower {
            SprtDecision::AcceptH0
        } else {
            SprtDecision::Continue
        }
    }
}

/// Generalized LLR of H1 `elo = elo1` against H0 `elo = elo0`, with logistic Elo bounds
/// (fishtest's `LLR_logistic`). A hypothesis fixes the expected score per game.
pub fn llr_logistic(counts: impl Into<Counts>, elo0: f64, elo1: f64) -> Result<f64, SprtError> {
    check_hypotheses(elo0, elo1)?;
    let sample = Sample::new(counts.into())?;
    let profile = |elo: f64| {
        let score = logistic_elo_to_score(elo);
        if !(score > 0.0 && score < 1.0) {
            return Err(SprtError::OutOfRange { elo });
        }
        let p =
            mle_expected(&sample.values, &sample.probs, score).ok_or(SprtError::NoConvergence)?;
        Ok(sample.log_likelihood(&p))
    };
    Ok(sample.total * (profile(elo1)? - profile(elo0)?))
}

/// Generalized LLR of H1 `nelo = nelo1` against H0 `nelo = nelo0`, with normalized Elo
/// bounds (fishtest's `LLR_normalized`, its default). A hypothesis fixes the t-value
/// `(mu - 1/2) / sigma` of one sample: `nelo / NELO_PER_T` for a game, `sqrt(2)` times that
/// for a pair, because a pair's score has twice the mean excess but only `sqrt(2)` times
/// the noise of a game's.
pub fn llr_normalized(counts: impl Into<Counts>, nelo0: f64, nelo1: f64) -> Result<f64, SprtError> {
    check_hypotheses(nelo0, nelo1)?;
    let counts = counts.into();
    let sample = Sample::new(counts)?;
    let per_sample = match counts {
        Counts::Trinomial(_) => 1.0,
        Counts::Pentanomial(_) => SQRT_2,
    };
    let profile = |nelo: f64| {
        let t = nelo / NELO_PER_T * per_sample;
        let p = mle_t_value(&sample.values, &sample.probs, 0.5, t)?;
        Ok::<_, SprtError>(sample.log_likelihood(&p))
    };
    Ok(sample.total * (profile(nelo1)? - profile(nelo0)?))
}

/// Elo summary of a match, as fishtest's `get_elo` and its raw-statistics page give it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EloEstimate {
    /// Games played (not regularized).
    pub games: u64,
    /// Mean score per game of the regularized counts.
    pub score: f64,
    /// Standard deviation of one game's score; for game pairs, the per-pair deviation of the
    /// per-game score times `sqrt(2)`, so that nElo means the same for both kinds of counts.
    pub sigma_per_game: f64,
    /// Logistic Elo, clamped to about ±1200 for all-win or all-loss samples.
    pub elo: f64,
    /// Half width of the 95% interval of `elo`, mapped through the logistic curve from the
    /// normal interval of the score.
    pub elo_error: f64,
    /// Likelihood of superiority: the normal-approximation probability that the true score
    /// exceeds 1/2.
    pub los: f64,
    /// Normalized Elo.
    pub nelo: f64,
    /// Half width of the 95% interval of `nelo`. Like fishtest (and unlike fastchess, which
    /// uses `Z_975 * NELO_PER_T / sqrt(games)`), the variance of the t-value accounts for
    /// the skewness and kurtosis of the outcome distribution, which matters when one side
    /// dominates.
    pub nelo_error: f64,
}

/// Elo, normalized Elo, their 95% intervals and the LOS of a match.
pub fn elo_estimate(counts: impl Into<Counts>) -> Result<EloEstimate, SprtError> {
    let counts = counts.into();
    let sample = Sample::new(counts)?;
    let (mean, var) = mean_var(&sample.values, &sample.probs);
    let sd = var.sqrt();
    // Standard error of the mean score per game, identical for both kinds of counts: a
    // pair's per-game score is the mean of two games.
    let se = sd / sample.total.sqrt();
    let clamped_elo = |s: f64| score_to_logistic_elo(s.clamp(SCORE_CLAMP, 1.0 - SCORE_CLAMP));
    let elo = clamped_elo(mean);
    let elo_error = (clamped_elo(mean + Z_975 * se) - clamped_elo(mean - Z_975 * se)) / 2.0;
    let los = normal_cdf((mean - 0.5) / se);

    // The t-value of one sample and, by the delta method, the variance of its estimate.
    let (m3, m4) =
        sample
            .values
            .iter()
            .zip(&sample.probs)
            .fold((0.0, 0.0), |(m3, m4), (&a, &p)| {
                let d = a - mean;
                (m3 + p * d.powi(3), m4 + p * d.powi(4))
            });
    let skewness = m3 / var.powf(1.5);
    let excess_kurtosis = m4 / (var * var) - 3.0;
    let t = (mean - 0.5) / sd;
    let var_t = (1.0 - t * skewness + 0.25 * t * t * (excess_kurtosis + 2.0)).max(0.0);
    let (per_sample, sigma_per_game) = match counts {
        Counts::Trinomial(_) => (1.0, sd),
        Counts::Pentanomial(_) => (SQRT_2, SQRT_2 * sd),
    };
    let nelo = NELO_PER_T * t / per_sample;
    let nelo_error = NELO_PER_T / per_sample * Z_975 * (var_t / sample.total).sqrt();

    Ok(EloEstimate {
        games: counts.games(),
        score: mean,
        sigma_per_game,
        elo,
        elo_error,
        los,
        nelo,
        nelo_error,
    })
}

fn finite(name: &'static str, value: f64) -> Result<(), SprtError> {
    if value.is_finite() {
        Ok(())
    } else {
        Err(SprtError::NonFinite { name, value })
    }
}

fn check_hypotheses(elo0: f64, elo1: f64) -> Result<(), SprtError> {
    finite("elo0", elo0)?;
    finite("elo1", elo1)?;
    if elo1 <= elo0 {
        return Err(SprtError::Elo1NotGreater);
    }
    Ok(())
}

/// Regularized empirical distribution of one sample (a game or a game pair).
struct Sample {
    /// Regularized number of samples: the weight of the mean log-likelihood.
    total: f64,
    /// Score of each outcome, scaled to `[0, 1]` per game.
    values: Vec<f64>,
    /// Empirical frequency of each outcome; all strictly positive.
    probs: Vec<f64>,
}

impl Sample {
    fn new(counts: Counts) -> Result<Self, SprtError> {
        if counts.games() == 0 {
            return Err(SprtError::NoGames);
        }
        let raw: Vec<u64> = match counts {
            Counts::Trinomial(w) => vec![w.losses, w.draws, w.wins],
            Counts::Pentanomial(p) => p.0.to_vec(),
        };
        let regularized: Vec<f64> = raw
            .iter()
            .map(|&n| if n == 0 { EMPTY_BIN } else { n as f64 })
            .collect();
        let total: f64 = regularized.iter().sum();
        let last = (raw.len() - 1) as f64;
        Ok(Self {
            total,
            values: (0..raw.len()).map(|k| k as f64 / last).collect(),
            probs: regularized.iter().map(|n| n / total).collect(),
        })
    }

    /// Mean log-likelihood per sample of the data under outcome distribution `p`.
    fn log_likelihood(&self, p: &[f64]) -> f64 {
        self.probs.iter().zip(p).map(|(q, p)| q * p.ln()).sum()
    }
}

fn mean_var(values: &[f64], p: &[f64]) -> (f64, f64) {
    let mean: f64 = values.iter().zip(p).map(|(a, p)| a * p).sum();
    let var = values
        .iter()
        .zip(p)
        .map(|(a, p)| p * (a - mean) * (a - mean))
        .sum();
    (mean, var)
}

/// Solves the secular equation `sum_i q_i phi_i / (1 + x phi_i) = 0` for `x`.
///
/// Maximizing `sum_i q_i ln p_i` under the linear constraint `sum_i p_i phi_i = 0` gives
/// `p_i = q_i / (1 + x phi_i)` with `x` the root of this equation (the Lagrange multiplier).
/// On the interval where every `1 + x phi_i` is positive the left side falls strictly from
/// +infinity to -infinity, so there is exactly one root when `phi` takes both signs, and
/// none otherwise. Newton's method safeguarded by bisection finds it to machine precision.
fn secular(phi: &[f64], q: &[f64]) -> Option<f64> {
    let lo_phi = phi.iter().copied().fold(f64::INFINITY, f64::min);
    let hi_phi = phi.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !(lo_phi < 0.0 && hi_phi > 0.0) {
        return None;
    }
    // The open bracket: f > 0 at `lo`, f < 0 at `hi`.
    let (mut lo, mut hi) = (-1.0 / hi_phi, -1.0 / lo_phi);
    let eval = |x: f64| {
        phi.iter().zip(q).fold((0.0, 0.0), |(f, df), (&a, &p)| {
            let r = a / (1.0 + x * a);
            (f + p * r, df - p * r * r)
        })
    };
    let mut x = 0.0;
    for _ in 0..200 {
        let (f, df) = eval(x);
        if f == 0.0 {
            return Some(x);
        }
        if f > 0.0 {
            lo = x;
        } else {
            hi = x;
        }
        let newton = x - f / df;
        let next = if newton > lo && newton < hi {
            newton
        } else {
            0.5 * (lo + hi)
        };
        if (next - x).abs() <= 4.0 * f64::EPSILON * (1.0 + x.abs()) || next <= lo || next >= hi {
            return Some(next.clamp(lo, hi));
        }
        x = next;
    }
    Some(x)
}

/// Maximum likelihood distribution on `values` with expected score `s`, given the empirical
/// frequencies `q` (`support_MLE_multinomial.pdf`, Proposition 1.1).
fn mle_expected(values: &[f64], q: &[f64], s: f64) -> Option<Vec<f64>> {
    let phi: Vec<f64> = values.iter().map(|a| a - s).collect();
    let x = secular(&phi, q)?;
    Some(normalized(
        q.iter().zip(&phi).map(|(q, a)| q / (1.0 + x * a)).collect(),
    ))
}

/// Maximum likelihood distribution on `values` whose t-value `(mu - reference) / sigma`
/// equals `t`, given the empirical frequencies `q` (`normalized_elo_practical.pdf`,
/// Section 4.1).
///
/// The constraint is not linear in `p`, so it is linearized around the current estimate,
/// the linear problem solved through [`secular`], and the step repeated until it no longer
/// moves. Fishtest starts those iterations from the uniform distribution, which fails when
/// one side dominates (no sign change in the linearized constraint). Starting instead from
/// the empirical distribution, which is the exact answer for its own t-value, and walking
/// `t` towards the target in steps that are halved whenever an iteration fails, reaches
/// the same maximum in ordinary cases and also copes with lopsided ones.
fn mle_t_value(values: &[f64], q: &[f64], reference: f64, t: f64) -> Result<Vec<f64>, SprtError> {
    finite("t-value", t)?;
    // Where fishtest's own procedure gives an answer, its answer: its iterations stop after
    // ten, before they settle on degenerate counts (all draws: 4 % off the converged LLR),
    // and an SPRT must decide as fishtest would on the same counts.
    if let Some(p) = fishtest_t_value(values, q, reference, t) {
        return Ok(p);
    }
    let (mean, var) = mean_var(values, q);
    let mut t_now = (mean - reference) / var.sqrt();
    let mut p = q.to_vec();
    let mut step = t - t_now;
    for _ in 0..200 {
        let t_next = if (t - t_now).abs() <= step.abs() {
            t
        } else {
            t_now + step
        };
        let solved = fixed_point_t(values, q, reference, t_next, &p, 1.0)
            .or_else(|| fixed_point_t(values, q, reference, t_next, &p, 0.5));
        match solved {
            Some(next) => {
                p = next;
                t_now = t_next;
                if t_now == t {
                    return Ok(p);
                }
                step *= 2.0;
            }
            None => step *= 0.5,
        }
    }
    Err(SprtError::NoConvergence)
}

/// Fishtest's `MLE_t_value` step for step: from the uniform distribution, at most ten
/// linearized iterations, stopping early when no probability moves by 1e-9; `None` where
/// fishtest's would raise (no root of the secular equation, or a t-value more than 1e-5 off
/// the target at the end).
fn fishtest_t_value(values: &[f64], q: &[f64], reference: f64, t: f64) -> Option<Vec<f64>> {
    let mut p = vec![1.0 / values.len() as f64; values.len()];
    for _ in 0..10 {
        let (mean, var) = mean_var(values, &p);
        let sigma = var.sqrt();
        let phi: Vec<f64> = values
            .iter()
            .map(|&a| a - reference - t * sigma * (1.0 + ((mean - a) / sigma).powi(2)) / 2.0)
            .collect();
        let x = secular(&phi, q)?;
        let next: Vec<f64> = q.iter().zip(&phi).map(|(q, a)| q / (1.0 + x * a)).collect();
        let moved = p
            .iter()
            .zip(&next)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        p = next;
        if moved < 1e-9 {
            break;
        }
    }
    let (mean, var) = mean_var(values, &p);
    let ok = ((mean - reference) / var.sqrt() - t).abs() < 1e-5
        && p.iter().all(|&v| v > 0.0 && v.is_finite());
    ok.then_some(p)
}

/// Iterates the linearized t-value problem from `start` with relaxation `omega`; `None`
/// when an iteration has no solution or the iterations do not settle.
fn fixed_point_t(
    values: &[f64],
    q: &[f64],
    reference: f64,
    t: f64,
    start: &[f64],
    omega: f64,
) -> Option<Vec<f64>> {
    let mut p = start.to_vec();
    for _ in 0..500 {
        let (mean, var) = mean_var(values, &p);
        let sigma = var.sqrt();
        // Gradient of `mu - reference - t * sigma` at `p`, shifted so that its mean under
        // `p` is the constraint's value there.
        let phi: Vec<f64> = values
            .iter()
            .map(|&a| {
                let z = (a - mean) / sigma;
                a - reference - 0.5 * t * sigma * (1.0 + z * z)
            })
            .collect();
        let x = secular(&phi, q)?;
        let target = normalized(q.iter().zip(&phi).map(|(q, a)| q / (1.0 + x * a)).collect());
        // Relative change: a probability near zero is known only to relative precision,
        // as `1 + x phi_i` then cancels and amplifies the rounding of `x`.
        let mut change: f64 = 0.0;
        for (old, new) in p.iter_mut().zip(&target) {
            let relaxed = *old + omega * (new - *old);
            change = change.max((relaxed - *old).abs() / relaxed);
            *old = relaxed;
        }
        if change < 1e-10 {
            let (mean, var) = mean_var(values, &p);
            let reached = (mean - reference) / var.sqrt();
            let ok = (reached - t).abs() <= 1e-9 * (1.0 + t.abs())
                && p.iter().all(|&v| v > 0.0 && v.is_finite());
            return ok.then_some(p);
        }
    }
    None
}

/// Rescales to sum 1, removing the rounding left by the secular solution.
fn normalized(mut p: Vec<f64>) -> Vec<f64> {
    let sum: f64 = p.iter().sum();
    p.iter_mut().for_each(|v| *v /= sum);
    p
}

/// Standard normal cumulative distribution function.
fn normal_cdf(x: f64) -> f64 {
    0.5 * erfc(-x / SQRT_2)
}

/// Complementary error function, accurate to about 1e-15 absolute.
///
/// Below 3 it uses the everywhere-positive series
/// `erf x = 2/sqrt(pi) e^(-x^2) sum_n (2x^2)^n x / (1*3*...*(2n+1))`; above, the continued
/// fraction `erfc x = e^(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...))))`, which
/// keeps full relative precision in the tail.
fn erfc(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x < 0.0 {
        return 2.0 - erfc(-x);
    }
    if x < 3.0 {
        let two_x2 = 2.0 * x * x;
        let (mut term, mut sum) = (x, x);
        let mut n = 0.0;
        while term > 1e-17 * sum {
            n += 1.0;
            term *= two_x2 / (2.0 * n + 1.0);
            sum += term;
        }
        1.0 - FRAC_2_SQRT_PI * (-x * x).exp() * sum
    } else {
        let mut fraction = x;
        for k in (1..=60).rev() {
            fraction = x + 0.5 * k as f64 / fraction;
        }
        0.5 * FRAC_2_SQRT_PI * (-x * x).exp() / fraction
    }
}

#[cfg(test)]
mod tests;
