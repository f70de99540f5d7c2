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
mod tests {
    use super::*;

    /// Asserts `|actual - expected| <= tol`.
    #[track_caller]
    fn close(actual: f64, expected: f64, tol: f64) {
        assert!(
            (actual - expected).abs() <= tol,
            "expected {expected} ± {tol}, got {actual}"
        );
    }

    /// Tolerance of fastchess's own tests: doctest `Approx(v).epsilon(0.01)`, that is 1% of
    /// `1 + |v|`. Its values are printed to two decimals and come from a looser solver
    /// (tolerances 1e-3 to 1e-4), so they are checked at that tolerance only.
    #[track_caller]
    fn fastchess_close(actual: f64, expected: f64) {
        close(actual, expected, 0.01 * (1.0 + expected.abs()));
    }

    fn penta(ll: u64, ld: u64, dd_wl: u64, wd: u64, ww: u64) -> Pentanomial {
        Pentanomial([ll, ld, dd_wl, wd, ww])
    }

    // ---- reference values --------------------------------------------------------------
    //
    // "fastchess": Disservin/fastchess app/tests/sprt_test.cpp and app/tests/elo_test.cpp
    // (published to two decimals). fastchess's `Stats(w, l, d)` takes wins, losses, draws;
    // `Stats(ll, ld, wl, dd, wd, ww)` takes the pair counts with WL and DD apart.
    //
    // "fishtest code": fishtest publishes no LLR test values, so these were computed to
    // 1e-10 by running the algorithm of official-stockfish/fishtest
    // server/fishtest/stats/LLRcalc.py (`LLR_logistic`, `LLR_normalized`, `regularize`) and
    // stat_util.py (`get_elo`, and the raw-statistics page's `t_conf` for nElo) under
    // Python 3.11 with scipy 1.17. The normalized-Elo values were cross-checked against a
    // general-purpose constrained optimizer (scipy SLSQP on the log-likelihood), which
    // agreed to 1e-9. The counts are fastchess's test inputs and the example in fishtest's
    // stat_util.py `__main__`.

    #[test]
    fn llr_normalized_trinomial_matches_references() {
        let cases = [
            // (W, D, L, nelo0, nelo1, fishtest code, fastchess)
            (36433, 68692, 36027, 0.0, 2.0, 0.923_293_450_9, 0.92),
            (10871, 20431, 10650, -1.75, 0.25, 2.297_500_407_1, 2.30),
            (13543, 34333, 13624, -3.0, 1.0, 0.634_792_342_1, f64::NAN),
        ];
        for (w, d, l, e0, e1, fishtest, fastchess) in cases {
            let llr = llr_normalized(Wdl::new(w, d, l), e0, e1).unwrap();
            close(llr, fishtest, 1e-4);
            if !fastchess.is_nan() {
                fastchess_close(llr, fastchess);
            }
        }
    }

    #[test]
    fn llr_normalized_pentanomial_matches_references() {
        let cases = [
            // fastchess Stats(365, 16618, 36029, 200, 16974, 390), [0, 2]
            (
                penta(365, 16618, 36229, 16974, 390),
                0.0,
                2.0,
                2.250_367_703_5,
                2.25,
            ),
            // fastchess Stats(127, 4883, 10311, 401, 5150, 104), [-1.75, 0.25]
            (
                penta(127, 4883, 10712, 5150, 104),
                -1.75,
                0.25,
                3.010_154_196_6,
                3.01,
            ),
            // fishtest stat_util.py `__main__` counts
            (
                penta(10789, 19328, 33806, 19402, 10543),
                -3.0,
                1.0,
                0.300_869_785_5,
                f64::NAN,
            ),
            (
                penta(39, 2226, 31451, 2412, 40),
                0.764,
                3.439,
                2.162_940_869_6,
                f64::NAN,
            ),
        ];
        for (counts, e0, e1, fishtest, fastchess) in cases {
            let llr = llr_normalized(counts, e0, e1).unwrap();
            close(llr, fishtest, 1e-4);
            if !fastchess.is_nan() {
                fastchess_close(llr, fastchess);
            }
        }
    }

    #[test]
    fn llr_logistic_matches_references() {
        // Trinomial: fastchess Stats(21404, 21184, 40708) [0.5, 2.5] and
        // Stats(57433, 57030, 106593) [0, 2]; fishtest stat_util.py `__main__` [-3, 1].
        let tri = [
            (
                Wdl::new(21404, 40708, 21184),
                0.5,
                2.5,
                -1.571_888_792_7,
                -1.57,
            ),
            (
                Wdl::new(57433, 106593, 57030),
                0.0,
                2.0,
                -2.593_024_163_5,
                -2.59,
            ),
            (
                Wdl::new(65388, 56553, 65804),
                -3.0,
                1.0,
                2.049_042_618_0,
                f64::NAN,
            ),
        ];
        // Pentanomial: fastchess Stats(223, 9863, 20279, 1000, 10037, 246) [0.5, 2.5] and
        // Stats(871, 26175, 55003, 980, 26678, 821) [0, 2]; fishtest `__main__` [-3, 1]
        // and [0.2, 0.9].
        let pen = [
            (
                penta(223, 9863, 21279, 10037, 246),
                0.5,
                2.5,
                -3.074_126_439_6,
                -3.07,
            ),
            (
                penta(871, 26175, 55983, 26678, 821),
                0.0,
                2.0,
                -4.978_672_863_4,
                -4.98,
            ),
            (
                penta(10789, 19328, 33806, 19402, 10543),
                -3.0,
                1.0,
                2.131_067_811_8,
                f64::NAN,
            ),
            (
                penta(39, 2226, 31451, 2412, 40),
                0.2,
                0.9,
                2.162_542_580_0,
                f64::NAN,
            ),
        ];
        let tri = tri.map(|(c, e0, e1, a, b)| (Counts::from(c), e0, e1, a, b));
        let pen = pen.map(|(c, e0, e1, a, b)| (Counts::from(c), e0, e1, a, b));
        for (counts, e0, e1, fishtest, fastchess) in tri.into_iter().chain(pen) {
            let llr = llr_logistic(counts, e0, e1).unwrap();
            close(llr, fishtest, 1e-4);
            if !fastchess.is_nan() {
                fastchess_close(llr, fastchess);
            }
        }
    }

    #[test]
    fn one_bin_only_is_regularized() {
        // fastchess Stats(4250, 0, 0) [0, 10] -> 120.56; fishtest code 120.5482677412.
        let llr = llr_normalized(Wdl::new(4250, 0, 0), 0.0, 10.0).unwrap();
        close(llr, 120.548_267_741_2, 1e-4);
        fastchess_close(llr, 120.56);
        // fastchess Stats(0, 0, 0, 0, 0, 5550) [0, 5] -> 111.82; fishtest code
        // 111.7975550867.
        let llr = llr_normalized(penta(0, 0, 0, 0, 5550), 0.0, 5.0).unwrap();
        close(llr, 111.797_555_086_7, 1e-4);
        fastchess_close(llr, 111.82);
        // A single WW pair, fishtest code 2.0949545276.
        let llr = llr_normalized(penta(0, 0, 0, 0, 104), 0.0, 5.0).unwrap();
        close(llr, 2.094_954_527_6, 1e-4);
    }

    #[test]
    fn all_draws() {
        // 16700 draws, nElo [0, 5]: fishtest code -3.4505397741. The empirical distribution
        // already has t = 0, so H0's profile likelihood is the unconstrained maximum and
        // the LLR has to be negative. (An older revision of fastchess's sprt_test.cpp
        // published +2.97 for these counts, from an earlier, approximate formula.)
        let llr = llr_normalized(Wdl::new(0, 16700, 0), 0.0, 5.0).unwrap();
        close(llr, -3.450_539_774_1, 1e-4);
        let estimate = elo_estimate(Wdl::new(0, 16700, 0)).unwrap();
        close(estimate.elo, 0.0, 1e-9);
        close(estimate.los, 0.5, 1e-9);
        close(estimate.nelo, 0.0, 1e-6);
        // fishtest code: get_elo -> elo95 = 0.0018235634; t_conf -> 5.2694359221.
        close(estimate.elo_error, 0.001_823_563_4, 1e-8);
        close(estimate.nelo_error, 5.269_435_922_1, 1e-4);
    }

    #[test]
    fn lopsided_match_where_uniform_start_fails() {
        // Pairs [144, 3, 1, 0, 0] at nElo [-1500, -500] come from fastchess issue 879 (its
        // LLR came out NaN). Fishtest's iteration from the uniform distribution also fails
        // here. The reference -6.7212604 is a general constrained optimizer's maximum
        // (scipy SLSQP, several starts), computed outside this crate.
        let llr = llr_normalized(penta(144, 3, 1, 0, 0), -1500.0, -500.0).unwrap();
        close(llr, -6.721_260_4, 1e-4);
        // The same thread (Disservin/fastchess pull request 882) published the LLRs of two
        // more such matches from a fixed fastchess: -2.95 and -2.97 at nElo
        // [-1000, -500]. SLSQP gives -2.9524264010 and -2.9657551880.
        let llr = llr_normalized(penta(77, 1, 0, 0, 0), -1000.0, -500.0).unwrap();
        close(llr, -2.952_426_401_0, 1e-4);
        close(llr, -2.95, 0.005);
        let llr = llr_normalized(penta(72, 10, 0, 0, 0), -1000.0, -500.0).unwrap();
        close(llr, -2.965_755_188_0, 1e-4);
        close(llr, -2.97, 0.005);
    }

    #[test]
    fn elo_estimate_wdl_matches_references() {
        // fastchess Stats(76, 89, 123): nElo -20.76, LOS 15.53 %.
        // fishtest code: get_elo -> (-15.6935207054, 30.4580007170, 0.1553264349);
        // t_conf nElo -> (-20.7564497774, 40.2290413616).
        let e = elo_estimate(Wdl::new(76, 123, 89)).unwrap();
        assert_eq!(e.games, 288);
        fastchess_close(e.nelo, -20.76);
        close(e.los * 100.0, 15.53, 0.005);
        close(e.elo, -15.693_520_705_4, 1e-4);
        close(e.elo_error, 30.458_000_717_0, 1e-4);
        close(e.los, 0.155_326_434_9, 1e-4);
        close(e.nelo, -20.756_449_777_4, 1e-4);
        close(e.nelo_error, 40.229_041_361_6, 1e-4);

        // fastchess Stats(136, 96, 111): Elo 40.70 ± 30.43, nElo 49.77, LOS 99.60 %.
        // fishtest code: (40.7024581865, 30.4272179436, 0.9960102357), nElo
        // (49.7684153810, 37.3845114016).
        let e = elo_estimate(Wdl::new(136, 111, 96)).unwrap();
        fastchess_close(e.elo, 40.70);
        fastchess_close(e.elo_error, 30.43);
        fastchess_close(e.nelo, 49.77);
        close(e.los * 100.0, 99.60, 0.005);
        close(e.elo, 40.702_458_186_5, 1e-4);
        close(e.elo_error, 30.427_217_943_6, 1e-4);
        close(e.los, 0.996_010_235_7, 1e-4);
        close(e.nelo, 49.768_415_381_0, 1e-4);
        close(e.nelo_error, 37.384_511_401_6, 1e-4);

        // fastchess Stats(34, 356, 0): nElo -508.44 (no draws: regularization applies).
        // fishtest code: (-407.9861217031, 63.1637779184), nElo (-508.4332772809,
        // 108.3244662276). fastchess's plain-normal nElo error is 34.48 here; the skewness
        // correction triples it.
        let e = elo_estimate(Wdl::new(34, 0, 356)).unwrap();
        fastchess_close(e.nelo, -508.44);
        close(e.elo, -407.986_121_703_1, 1e-4);
        close(e.elo_error, 63.163_777_918_4, 1e-4);
        close(e.nelo, -508.433_277_280_9, 1e-4);
        close(e.nelo_error, 108.324_466_227_6, 1e-4);
        close(Z_975 * NELO_PER_T / 390f64.sqrt(), 34.48, 0.005);
    }

    #[test]
    fn elo_estimate_pentanomial_matches_references() {
        let cases = [
            // fastchess Stats(34, 54, 31, 32, 64, 75): Elo 55.58 ± 27.65, nElo 57.94,
            // LOS 100.00 %; fishtest code (55.5797804204, 27.6534295064, 0.9999703930),
            // nElo (57.9355999381, 29.2328784583).
            (
                penta(34, 54, 63, 64, 75),
                [55.58, 27.65, 57.94],
                [55.579_780_420_4, 27.653_429_506_4, 0.999_970_393_0],
                [57.935_599_938_1, 29.232_878_458_3],
            ),
            // fastchess Stats(332, 433, 457, 41, 333, 334): Elo -8.64 ± 10.33, nElo -9.17,
            // LOS 5.05 %; fishtest code (-8.6426672680, 10.3341944244, 0.0504700670), nElo
            // (-9.1729142700, 10.9812926040).
            (
                penta(332, 433, 498, 333, 334),
                [-8.64, 10.33, -9.17],
                [-8.642_667_268_0, 10.334_194_424_4, 0.050_470_067_0],
                [-9.172_914_270_0, 10.981_292_604_0],
            ),
            // fastchess Stats(7895, 8757, 5485, 200, 568, 9999): Elo -21.04 ± 2.95, nElo
            // -19.01; fishtest code (-21.0435205782, 2.9452808685, 0.0), nElo
            // (-19.0128342789, 2.6863830207).
            (
                penta(7895, 8757, 5685, 568, 9999),
                [-21.04, 2.95, -19.01],
                [-21.043_520_578_2, 2.945_280_868_5, 0.0],
                [-19.012_834_278_9, 2.686_383_020_7],
            ),
        ];
        for (counts, fastchess, [elo, elo_error, los], [nelo, nelo_error]) in cases {
            let e = elo_estimate(counts).unwrap();
            assert_eq!(e.games, counts.games());
            fastchess_close(e.elo, fastchess[0]);
            fastchess_close(e.elo_error, fastchess[1]);
            fastchess_close(e.nelo, fastchess[2]);
            close(e.elo, elo, 1e-4);
            close(e.elo_error, elo_error, 1e-4);
            close(e.los, los, 1e-4);
            close(e.nelo, nelo, 1e-4);
            close(e.nelo_error, nelo_error, 1e-4);
        }
    }

    #[test]
    fn one_bin_elo_is_clamped_like_fishtest() {
        // Only WW pairs: fishtest's get_elo clamps the score to 1 - 1e-3, so the estimate
        // is 1199.8261952904 with a zero-width interval (fishtest code).
        let e = elo_estimate(penta(0, 0, 0, 0, 104)).unwrap();
        close(e.elo, 1_199.826_195_290_4, 1e-4);
        close(e.elo_error, 0.0, 1e-9);
        close(e.los, 1.0, 1e-12);
    }

    // ---- independent checks by brute force ---------------------------------------------
    //
    // For three outcomes each hypothesis leaves a one-parameter family of distributions,
    // so the profile likelihood can be maximized by a plain grid plus golden-section
    // search, without the Lagrange/secular machinery used above.

    /// Maximizes `f` on `(lo, hi)`: coarse grid, then golden section around the best point.
    fn maximize_1d(f: impl Fn(f64) -> f64, lo: f64, hi: f64) -> f64 {
        let n = 20_000;
        let h = (hi - lo) / n as f64;
        let best = (1..n)
            .map(|i| lo + i as f64 * h)
            .max_by(|a, b| f(*a).total_cmp(&f(*b)))
            .unwrap();
        let (mut a, mut b) = ((best - h).max(lo), (best + h).min(hi));
        let g = (5f64.sqrt() - 1.0) / 2.0;
        for _ in 0..200 {
            let (c, d) = (b - g * (b - a), a + g * (b - a));
            if f(c) > f(d) {
                b = d;
            } else {
                a = c;
            }
        }
        f(0.5 * (a + b))
    }

    fn log_lik(q: [f64; 3], p: [f64; 3]) -> f64 {
        if p.iter().any(|&v| v <= 0.0) {
            return f64::NEG_INFINITY;
        }
        q.iter().zip(&p).map(|(q, p)| q * p.ln()).sum()
    }

    fn regularized(wdl: Wdl) -> (f64, [f64; 3]) {
        let r = [wdl.losses, wdl.draws, wdl.wins].map(|n| if n == 0 { 1e-3 } else { n as f64 });
        let total: f64 = r.iter().sum();
        (total, r.map(|n| n / total))
    }

    /// Profile log-likelihood for expected score `s`: parametrized by the draw rate.
    fn brute_expected(q: [f64; 3], s: f64) -> f64 {
        let f = |d: f64| log_lik(q, [1.0 - s - d / 2.0, d, s - d / 2.0]);
        maximize_1d(f, 0.0, 2.0 * s.min(1.0 - s))
    }

    /// Profile log-likelihood for t-value `t` around 1/2: parametrized by the mean, which
    /// fixes sigma and so the whole distribution; for `t = 0` by the draw rate.
    fn brute_t(q: [f64; 3], t: f64) -> f64 {
        if t == 0.0 {
            return maximize_1d(
                |d| log_lik(q, [(1.0 - d) / 2.0, d, (1.0 - d) / 2.0]),
                0.0,
                1.0,
            );
        }
        let f = |mu: f64| {
            let sigma = (mu - 0.5) / t;
            let draws = 4.0 * (mu - mu * mu - sigma * sigma);
            let wins = mu - draws / 2.0;
            log_lik(q, [1.0 - wins - draws, draws, wins])
        };
        if t > 0.0 {
            maximize_1d(f, 0.5, 1.0)
        } else {
            maximize_1d(f, 0.0, 0.5)
        }
    }

    #[test]
    fn trinomial_llrs_agree_with_brute_force() {
        let samples = [
            Wdl::new(36433, 68692, 36027),
            Wdl::new(120, 300, 95),
            Wdl::new(30, 5, 12),
            Wdl::new(0, 500, 3),
            Wdl::new(7, 0, 0),
        ];
        for wdl in samples {
            let (total, q) = regularized(wdl);
            for (e0, e1) in [(0.0, 2.0), (-5.0, 5.0), (-20.0, -3.0), (40.0, 60.0)] {
                let brute = total
                    * (brute_expected(q, logistic_elo_to_score(e1))
                        - brute_expected(q, logistic_elo_to_score(e0)));
                close(llr_logistic(wdl, e0, e1).unwrap(), brute, 1e-4);

                let brute = total * (brute_t(q, e1 / NELO_PER_T) - brute_t(q, e0 / NELO_PER_T));
                close(llr_normalized(wdl, e0, e1).unwrap(), brute, 1e-4);
            }
        }
    }

    // ---- conversions, bounds, errors ---------------------------------------------------

    #[test]
    fn sprt_bounds_from_error_rates() {
        // Wald: ±ln(19) for alpha = beta = 0.05, fishtest's and fastchess's (-2.94, 2.94).
        let b = SprtBounds::new(0.05, 0.05).unwrap();
        close(b.upper, 19f64.ln(), 1e-12);
        close(b.lower, -19f64.ln(), 1e-12);
        close(b.upper, 2.944_438_979_166_44, 1e-12);
        let b = SprtBounds::new(0.05, 0.1).unwrap();
        close(b.lower, (0.1f64 / 0.95).ln(), 1e-12);
        close(b.upper, (0.9f64 / 0.05).ln(), 1e-12);
        assert_eq!(b.decide(b.upper), SprtDecision::AcceptH1);
        assert_eq!(b.decide(b.lower), SprtDecision::AcceptH0);
        assert_eq!(b.decide(0.0), SprtDecision::Continue);
        assert_eq!(
            SprtBounds::new(0.0, 0.05),
            Err(SprtError::InvalidErrorRates)
        );
        assert_eq!(SprtBounds::new(0.6, 0.5), Err(SprtError::InvalidErrorRates));
        assert!(matches!(
            SprtBounds::new(f64::NAN, 0.05),
            Err(SprtError::NonFinite { name: "alpha", .. })
        ));
    }

    #[test]
    fn elo_conversions() {
        close(logistic_elo_to_score(0.0), 0.5, 1e-15);
        // 400 Elo is odds of 10 to 1.
        close(logistic_elo_to_score(400.0), 10.0 / 11.0, 1e-15);
        for elo in [-700.0, -35.5, 0.0, 3.0, 250.0] {
            close(score_to_logistic_elo(logistic_elo_to_score(elo)), elo, 1e-9);
        }
        assert_eq!(score_to_logistic_elo(1.0), f64::INFINITY);
        close(NELO_PER_T, 347.435_585_522_601_46, 1e-12);
        // Without draws and near equality nElo and logistic Elo agree (sigma = 1/2).
        let s = logistic_elo_to_score(1.0);
        close(score_to_nelo(s, 0.5), 1.0, 1e-4);
        close(nelo_to_score(score_to_nelo(0.53, 0.37), 0.37), 0.53, 1e-15);
        // The fishtest stats page converts nElo bounds to scores this way:
        // score = nelo / NELO_PER_T * sigma + 1/2.
        close(nelo_to_score(2.0, 0.4), 0.5 + 2.0 * 0.4 / NELO_PER_T, 1e-15);
    }

    #[test]
    fn counts_helpers() {
        let p = penta(1, 2, 3, 4, 5);
        assert_eq!(p.pairs(), 15);
        assert_eq!(p.games(), 30);
        close(
            p.score().unwrap(),
            (2.0 * 0.5 + 3.0 + 4.0 * 1.5 + 5.0 * 2.0) / 30.0,
            1e-15,
        );
        assert_eq!(Pentanomial::default().score(), None);
        let w = Wdl::new(3, 2, 1);
        assert_eq!(w.games(), 6);
        close(w.score().unwrap(), 4.0 / 6.0, 1e-15);
        assert_eq!(Wdl::default().score(), None);
        assert_eq!(Counts::from(p).games(), 30);
    }

    #[test]
    fn normal_cdf_values() {
        close(normal_cdf(0.0), 0.5, 1e-16);
        close(normal_cdf(Z_975), 0.975, 1e-14);
        close(normal_cdf(1.0), 0.841_344_746_068_542_9, 1e-14);
        close(normal_cdf(-1.0), 0.158_655_253_931_457_05, 1e-14);
        // Both sides of the switch from series to continued fraction.
        close(erfc(2.999_999), 2.209_063_625_205_517e-5, 1e-15);
        close(erfc(3.0), 2.209_049_699_858_544e-5, 1e-15);
        close(erfc(5.0), 1.537_459_794_428_035e-12, 1e-24);
        close(normal_cdf(-10.0), 7.619_853_024_160_527e-24, 1e-36);
        assert_eq!(normal_cdf(f64::INFINITY), 1.0);
    }

    #[test]
    fn invalid_input_is_rejected() {
        let wdl = Wdl::new(10, 10, 10);
        assert_eq!(llr_logistic(wdl, 2.0, 2.0), Err(SprtError::Elo1NotGreater));
        assert_eq!(
            llr_normalized(wdl, 3.0, -1.0),
            Err(SprtError::Elo1NotGreater)
        );
        assert_eq!(
            SprtError::Elo1NotGreater.to_string(),
            "elo1 must be greater than elo0"
        );
        assert_eq!(
            llr_logistic(Wdl::default(), 0.0, 2.0),
            Err(SprtError::NoGames)
        );
        assert_eq!(
            llr_normalized(Pentanomial::default(), 0.0, 2.0),
            Err(SprtError::NoGames)
        );
        assert_eq!(elo_estimate(Wdl::default()), Err(SprtError::NoGames));
        assert_eq!(SprtError::NoGames.to_string(), "no games");
        assert!(matches!(
            llr_normalized(wdl, f64::NAN, 2.0),
            Err(SprtError::NonFinite { name: "elo0", .. })
        ));
        assert!(matches!(
            llr_logistic(wdl, 0.0, f64::INFINITY),
            Err(SprtError::NonFinite { name: "elo1", .. })
        ));
        // A logistic hypothesis so extreme that its score rounds to 1.
        assert_eq!(
            llr_logistic(wdl, 0.0, 1e6),
            Err(SprtError::OutOfRange { elo: 1e6 })
        );
    }

    #[test]
    fn llr_is_antisymmetric_in_the_hypotheses_and_mirrors_with_colours() {
        // Swapping H0 and H1 is not allowed, but the mirrored match (wins and losses
        // exchanged) under mirrored hypotheses must give the same LLR.
        let counts = penta(365, 16618, 36229, 16974, 390);
        let mirrored = penta(390, 16974, 36229, 16618, 365);
        let a = llr_normalized(counts, 0.0, 2.0).unwrap();
        let b = llr_normalized(mirrored, -2.0, 0.0).unwrap();
        close(a, -b, 1e-9);
        let a = llr_logistic(counts, -1.0, 3.0).unwrap();
        let b = llr_logistic(mirrored, -3.0, 1.0).unwrap();
        close(a, -b, 1e-9);
    }
}
