//! An engine's Elo on an external scale from games against reference players of known
//! rating (a gauntlet against Stockfish at several `UCI_Elo` settings): the maximum-likelihood
//! rating under the logistic model, with a 95 % interval from a sandwich variance (the
//! observed spread of game scores, so draws narrow it as they should).

/// Games against one reference player.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LevelResult {
    /// The reference player's rating.
    pub rating: f64,
    pub wins: u64,
    pub draws: u64,
    pub losses: u64,
}

impl LevelResult {
    fn games(&self) -> f64 {
        (self.wins + self.draws + self.losses) as f64
    }

    fn mean_score(&self) -> f64 {
        (self.wins as f64 + 0.5 * self.draws as f64) / self.games()
    }

    /// Variance of one game's score (0, ½ or 1).
    fn score_variance(&self) -> f64 {
        let n = self.games();
        let m = self.mean_score();
        (self.wins as f64 * (1.0 - m).powi(2)
            + self.draws as f64 * (0.5 - m).powi(2)
            + self.losses as f64 * m.powi(2))
            / n
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatingEstimate {
    pub elo: f64,
    /// Half the 95 % interval.
    pub error: f64,
    pub games: u64,
}

fn expected(rating: f64, opponent: f64) -> f64 {
    1.0 / (1.0 + 10f64.powf((opponent - rating) / 400.0))
}

/// The rating that makes the expected scores match the observed ones over all levels. `None`
/// without games, or when every game was won (or every one lost): the rating is then only
/// bounded on one side; add a stronger (weaker) level.
pub fn estimate(levels: &[LevelResult]) -> Option<RatingEstimate> {
    let levels: Vec<&LevelResult> = levels.iter().filter(|l| l.games() > 0.0).collect();
    let games: f64 = levels.iter().map(|l| l.games()).sum();
    if games == 0.0 {
        return None;
    }
    let points: f64 = levels.iter().map(|l| l.mean_score() * l.games()).sum();
    if points <= 0.0 || points >= games {
        return None;
    }
    let k = std::f64::consts::LN_10 / 400.0;
    // U(R) = Σ n (s̄ − E(R)) is decreasing in R: Newton from the mean level, kept in a bracket.
    let mean_level = levels.iter().map(|l| l.rating * l.games()).sum::<f64>() / games;
    let (mut lo, mut hi) = (mean_level - 4000.0, mean_level + 4000.0);
    let mut r = mean_level;
    for _ in 0..200 {
        let u: f64 = levels
            .iter()
            .map(|l| l.games() * (l.mean_score() - expected(r, l.rating)))
            .sum();
        let slope: f64 = levels
            .iter()
            .map(|l| {
                let e = expected(r, l.rating);
                l.games() * k * e * (1.0 - e)
            })
            .sum();
        if u > 0.0 {
            lo = r;
        } else {
            hi = r;
        }
        let mut next = r + u / slope;
        if !(next > lo && next < hi) {
            next = 0.5 * (lo + hi);
        }
        if (next - r).abs() < 1e-9 {
            r = next;
            break;
        }
        r = next;
    }
    let information: f64 = levels
        .iter()
        .map(|l| {
            let e = expected(r, l.rating);
            l.games() * k * e * (1.0 - e)
        })
        .sum();
    // Observed spread of scores; at a level with one kind of result, the model's.
    let spread: f64 = levels
        .iter()
        .map(|l| {
            let e = expected(r, l.rating);
            l.games() * l.score_variance().max(e * (1.0 - e) / 4.0)
        })
        .sum();
    Some(RatingEstimate {
        elo: r,
        error: 1.959964 * spread.sqrt() / information,
        games: games as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_a_known_rating_from_expected_results() {
        // A 1900 player against 1500, 1800 and 2100, scoring exactly what the model expects.
        let levels: Vec<LevelResult> = [1500.0, 1800.0, 2100.0]
            .iter()
            .map(|&rating| {
                let e = expected(1900.0, rating);
                let wins = (e * 10_000.0).round() as u64;
                LevelResult {
                    rating,
                    wins,
                    draws: 0,
                    losses: 10_000 - wins,
                }
            })
            .collect();
        let r = estimate(&levels).unwrap();
        assert!((r.elo - 1900.0).abs() < 1.0, "{r:?}");
        assert!(r.error > 0.0 && r.error < 15.0, "{r:?}");
        // One level at an even score: its rating, with the textbook interval for 100 games of
        // wins and losses (±1.96·sqrt(0.25/100)/(k/4) ≈ ±68 Elo).
        let even = estimate(&[LevelResult {
            rating: 2000.0,
            wins: 50,
            draws: 0,
            losses: 50,
        }])
        .unwrap();
        assert!((even.elo - 2000.0).abs() < 1e-6);
        assert!((even.error - 68.1).abs() < 0.5, "{even:?}");
        // Draws narrow the interval.
        let drawn = estimate(&[LevelResult {
            rating: 2000.0,
            wins: 25,
            draws: 50,
            losses: 25,
        }])
        .unwrap();
        assert!(drawn.error < even.error);
        // Score 75 % against 1600: 1600 + 400·log10(3) ≈ 1790.8.
        let r = estimate(&[LevelResult {
            rating: 1600.0,
            wins: 75,
            draws: 0,
            losses: 25,
        }])
        .unwrap();
        assert!((r.elo - 1790.85).abs() < 0.1, "{r:?}");
    }

    #[test]
    fn one_sided_results_have_no_estimate() {
        let all_won = LevelResult {
            rating: 1500.0,
            wins: 10,
            draws: 0,
            losses: 0,
        };
        assert_eq!(estimate(&[all_won]), None);
        assert_eq!(estimate(&[]), None);
        let none = LevelResult {
            rating: 1500.0,
            wins: 0,
            draws: 0,
            losses: 0,
        };
        assert_eq!(estimate(&[none]), None);
        // With a level it lost, there is one.
        let lost = LevelResult {
            rating: 2500.0,
            wins: 0,
            draws: 2,
            losses: 8,
        };
        let r = estimate(&[all_won, lost]).unwrap();
        assert!(r.elo > 1500.0 && r.elo < 2500.0, "{r:?}");
    }
}
