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

/// Games of one pairing of a round robin or a gauntlet, counted from player `a`'s side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pairing {
    pub a: usize,
    pub b: usize,
    pub wins: u64,
    pub draws: u64,
    pub losses: u64,
}

/// The rating difference at which the stronger side expects 76 % of the points: Elo's own
/// logistic scale (`1 / (1 + 10^(−d/400))`). Ordo's default is 202.
pub const ELO_76: f64 = 200.240_940_227_674_14;

/// A player's joint rating with half its 95 % interval, relative to the anchor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JointRating {
    pub elo: f64,
    /// Half the 95 % interval against the anchor (0 for the anchor itself).
    pub error: f64,
}

/// Maximum-likelihood ratings of `players` from all their pairings jointly, Ordo's model: a
/// draw is half a point, the expected score of a rating difference `d` is
/// `1 / (1 + e^(−k·d))` with `k = ln(0.76 / 0.24) / at_76` (`at_76` = [`ELO_76`] for Elo's
/// scale, 202 for Ordo's default), no white advantage, `anchor` fixed at 0. The intervals come
/// from the Fisher information of the points (each game a Bernoulli trial of its expected
/// score; draws are counted as half wins and half losses, so they widen it slightly).
/// Errors name what cannot be rated: a player or group not connected to the anchor by games,
/// a player (or group) that scored everything or nothing against the rest.
pub fn fit_joint(
    players: usize,
    pairings: &[Pairing],
    anchor: usize,
    at_76: f64,
) -> Result<Vec<JointRating>, String> {
    if anchor >= players {
        return Err(format!(
            "the anchor {anchor} is not one of the {players} players"
        ));
    }
    if let Some(p) = pairings
        .iter()
        .find(|p| p.a >= players || p.b >= players || p.a == p.b)
    {
        return Err(format!(
            "pairing {p:?} does not name two of the {players} players"
        ));
    }
    let k = (0.76f64 / 0.24).ln() / at_76;
    // Points and games per ordered pair.
    let mut points = vec![0.0; players * players];
    let mut games = vec![0.0; players * players];
    for p in pairings {
        let n = (p.wins + p.draws + p.losses) as f64;
        let s = p.wins as f64 + 0.5 * p.draws as f64;
        points[p.a * players + p.b] += s;
        points[p.b * players + p.a] += n - s;
        games[p.a * players + p.b] += n;
        games[p.b * players + p.a] += n;
    }
    // Every player must reach the anchor through games; ratings are only relative.
    let mut reached = vec![false; players];
    let mut stack = vec![anchor];
    reached[anchor] = true;
    while let Some(i) = stack.pop() {
        for j in 0..players {
            if games[i * players + j] > 0.0 && !reached[j] {
                reached[j] = true;
                stack.push(j);
            }
        }
    }
    if let Some(i) = reached.iter().position(|r| !r) {
        return Err(format!(
            "player {i} has no chain of games to the anchor {anchor}"
        ));
    }
    // A player who scored all or none of its points has no finite rating.
    for i in 0..players {
        let n: f64 = (0..players).map(|j| games[i * players + j]).sum();
        let s: f64 = (0..players).map(|j| points[i * players + j]).sum();
        if s == 0.0 || s == n {
            return Err(format!(
                "player {i} scored {s} of {n}: no finite rating (it needs a loss and a win, or a draw)"
            ));
        }
    }
    let free: Vec<usize> = (0..players).filter(|&i| i != anchor).collect();
    let m = free.len();
    let mut r = vec![0.0; players];
    let expected = |d: f64| 1.0 / (1.0 + (-k * d).exp());
    let hessian = |r: &[f64]| -> Vec<f64> {
        // −∂²L/∂r_i∂r_j over the free players: the games' weighted Laplacian.
        let mut h = vec![0.0; m * m];
        for (x, &i) in free.iter().enumerate() {
            for j in 0..players {
                let n = games[i * players + j];
                if n == 0.0 {
                    continue;
                }
                let e = expected(r[i] - r[j]);
                let w = k * k * n * e * (1.0 - e);
                h[x * m + x] += w;
                if let Some(y) = free.iter().position(|&f| f == j) {
                    h[x * m + y] -= w;
                }
            }
        }
        h
    };
    for round in 0.. {
        // ∂L/∂r_i = k Σ_j (points_ij − games_ij · E(r_i − r_j)).
        let g: Vec<f64> = free
            .iter()
            .map(|&i| {
                (0..players)
                    .map(|j| {
                        k * (points[i * players + j]
                            - games[i * players + j] * expected(r[i] - r[j]))
                    })
                    .sum()
            })
            .collect();
        let step = solve(hessian(&r), g).ok_or("the ratings' equations are singular")?;
        // Newton's step, at most 400 points of rating at a time (far starts stay stable).
        let longest = step.iter().fold(0.0f64, |a, d| a.max(d.abs()));
        let scale = if longest > 400.0 {
            400.0 / longest
        } else {
            1.0
        };
        for (x, &i) in free.iter().enumerate() {
            r[i] += scale * step[x];
        }
        if longest < 1e-10 {
            break;
        }
        if round == 500 {
            return Err("the ratings did not converge in 500 rounds".into());
        }
    }
    let covariance = invert(hessian(&r)).ok_or("the ratings' information is singular")?;
    Ok((0..players)
        .map(|i| JointRating {
            elo: r[i],
            error: free
                .iter()
                .position(|&f| f == i)
                .map_or(0.0, |x| 1.959_964 * covariance[x * m + x].sqrt()),
        })
        .collect())
}

/// `a⁻¹ · b` for a symmetric positive definite `a` (`n × n`, row-major), by Gauss–Jordan with
/// partial pivoting; `None` when singular.
fn solve(mut a: Vec<f64>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for c in 0..n {
        let p = (c..n).max_by(|&x, &y| a[x * n + c].abs().total_cmp(&a[y * n + c].abs()))?;
        if a[p * n + c].abs() < 1e-300 {
            return None;
        }
        if p != c {
            for j in 0..n {
                a.swap(p * n + j, c * n + j);
            }
            b.swap(p, c);
        }
        for row in 0..n {
            if row == c {
                continue;
            }
            let f = a[row * n + c] / a[c * n + c];
            for j in c..n {
                a[row * n + j] -= f * a[c * n + j];
            }
            b[row] -= f * b[c];
        }
    }
    Some((0..n).map(|i| b[i] / a[i * n + i]).collect())
}

/// The inverse of `a` (`n × n`, row-major), column by column.
fn invert(a: Vec<f64>) -> Option<Vec<f64>> {
    let n = (a.len() as f64).sqrt() as usize;
    let mut out = vec![0.0; n * n];
    for c in 0..n {
        let mut e = vec![0.0; n];
        e[c] = 1.0;
        let col = solve(a.clone(), e)?;
        for r in 0..n {
            out[r * n + c] = col[r];
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The joint fit equals Ordo 1.2.6's own ratings for the same games, at Ordo's default
    /// scale and at Elo's (tests/data/golden/ordo/README.md says how they were made).
    #[test]
    fn joint_ratings_equal_ordo_s() {
        let names = ["A", "B", "C", "D", "E"];
        let id = |n: &str| {
            names
                .iter()
                .position(|&x| x == n.trim_matches('"'))
                .unwrap()
        };
        let pairings: Vec<Pairing> = include_str!("../../tests/data/golden/ordo/pairings.csv")
            .lines()
            .skip(1)
            .map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                Pairing {
                    a: id(f[0]),
                    b: id(f[1]),
                    wins: f[2].parse().unwrap(),
                    draws: f[3].parse().unwrap(),
                    losses: f[4].parse().unwrap(),
                }
            })
            .collect();
        for (golden, at_76) in [
            (
                include_str!("../../tests/data/golden/ordo/ratings-default-scale.csv"),
                202.0,
            ),
            (
                include_str!("../../tests/data/golden/ordo/ratings-logistic-400.csv"),
                ELO_76,
            ),
        ] {
            let fit = fit_joint(5, &pairings, 0, at_76).unwrap();
            for l in golden.lines().skip(1) {
                let f: Vec<&str> = l.split(',').collect();
                let (who, want): (usize, f64) = (id(f[1]), f[2].parse().unwrap());
                assert!(
                    (fit[who].elo - want).abs() < 0.001,
                    "{} at scale {at_76}: {} against Ordo's {want}",
                    names[who],
                    fit[who].elo
                );
            }
            assert_eq!(fit[0].error, 0.0);
            // 100-400 games a player: intervals of tens of Elo, widest for the fewest games.
            assert!(
                fit[1..].iter().all(|r| r.error > 10.0 && r.error < 80.0),
                "{fit:?}"
            );
            assert!(fit[4].error > fit[1].error, "{fit:?}");
        }
        // Elo's scale: the expected score of each pairing at the fitted difference sums to
        // each player's points (the likelihood's own condition).
        let fit = fit_joint(5, &pairings, 0, ELO_76).unwrap();
        for i in 0..5 {
            let (mut got, mut want) = (0.0, 0.0);
            for p in &pairings {
                let n = (p.wins + p.draws + p.losses) as f64;
                let s = p.wins as f64 + 0.5 * p.draws as f64;
                if p.a == i {
                    got += n * expected(fit[i].elo, fit[p.b].elo);
                    want += s;
                } else if p.b == i {
                    got += n * expected(fit[i].elo, fit[p.a].elo);
                    want += n - s;
                }
            }
            assert!(
                (got - want).abs() < 1e-6,
                "player {i}: {got} expected, {want} scored"
            );
        }
    }

    /// What cannot be rated is named: an unconnected player, a perfect score, a bad anchor.
    #[test]
    fn joint_ratings_refuse_what_has_no_rating() {
        let p = |a, b, wins, draws, losses| Pairing {
            a,
            b,
            wins,
            draws,
            losses,
        };
        let apart = fit_joint(4, &[p(0, 1, 5, 5, 5), p(2, 3, 5, 5, 5)], 0, ELO_76).unwrap_err();
        assert!(apart.contains("player 2 has no chain"), "{apart}");
        let perfect = fit_joint(3, &[p(0, 1, 5, 5, 5), p(2, 0, 10, 0, 0)], 0, ELO_76).unwrap_err();
        assert!(perfect.contains("player 2 scored 10 of 10"), "{perfect}");
        assert!(fit_joint(2, &[p(0, 1, 1, 1, 1)], 5, ELO_76).is_err());
        assert!(fit_joint(2, &[p(0, 0, 1, 1, 1)], 0, ELO_76).is_err());
    }

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
