//! A value that moves over the steps of a training run: the learning rate (`lr_schedule`) or
//! the score's weight λ in the target (`lambda_schedule`). The kinds are bullet's and
//! nnue-pytorch's: constant, linear, step drops, exponential, cosine decay, a linear warm-up
//! before another, and a sequence of them. A schedule is a function of the step alone, so a
//! run resumed from a checkpoint continues on the same curve.

use serde::{Deserialize, Serialize};

/// The value at each step (from 0). `steps` left out of a kind that needs a length means "to
/// the end of the run" (its planned steps).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Schedule {
    /// `value` throughout.
    Constant { value: f64 },
    /// From `start` to `end` in a straight line over `steps`, then `end`.
    Linear {
        start: f64,
        end: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        steps: Option<u64>,
    },
    /// `start · gamma^⌊step / every⌋` (bullet's StepLR).
    Step { start: f64, gamma: f64, every: u64 },
    /// `start · gamma^step`.
    Exponential { start: f64, gamma: f64 },
    /// From `start` to `end` along half a cosine over `steps`, then `end` (bullet's
    /// CosineDecayLR).
    Cosine {
        start: f64,
        end: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        steps: Option<u64>,
    },
    /// Rises in a straight line from `then`'s first value × `from` (default 0) to that value
    /// over `steps`, then follows `then`, its steps counted from the end of the warm-up.
    Warmup {
        steps: u64,
        #[serde(default)]
        from: f64,
        then: Box<Schedule>,
    },
    /// Each part for its `steps`, then the next; each part counts its steps from its own start;
    /// the last part (its `steps` may be left out) runs to the end.
    Sequence { parts: Vec<SchedulePart> },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SchedulePart {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<u64>,
    pub schedule: Schedule,
}

impl Schedule {
    /// The value at `step` of a run of `total` steps.
    pub fn at(&self, step: u64, total: u64) -> f64 {
        let along = |steps: Option<u64>| {
            let n = steps.unwrap_or(total).max(1);
            (step.min(n) as f64) / n as f64
        };
        match self {
            Schedule::Constant { value } => *value,
            Schedule::Linear { start, end, steps } => start + (end - start) * along(*steps),
            Schedule::Step {
                start,
                gamma,
                every,
            } => start * gamma.powi((step / (*every).max(1)).min(i32::MAX as u64) as i32),
            Schedule::Exponential { start, gamma } => start * gamma.powf(step as f64),
            Schedule::Cosine { start, end, steps } => {
                let t = along(*steps);
                end + (start - end) * 0.5 * (1.0 + (std::f64::consts::PI * t).cos())
            }
            Schedule::Warmup { steps, from, then } => {
                if step < *steps {
                    let top = then.at(0, total.saturating_sub(*steps));
                    let t = (step + 1) as f64 / *steps as f64;
                    top * (from + (1.0 - from) * t)
                } else {
                    then.at(step - steps, total.saturating_sub(*steps))
                }
            }
            Schedule::Sequence { parts } => {
                let mut begin = 0u64;
                for (i, p) in parts.iter().enumerate() {
                    let last = i + 1 == parts.len();
                    match p.steps {
                        Some(n) if !last && step >= begin + n => begin += n,
                        Some(n) => return p.schedule.at(step - begin, n),
                        None => return p.schedule.at(step - begin, total.saturating_sub(begin)),
                    }
                }
                f64::NAN
            }
        }
    }

    /// Every value it can take lies in `range` (named `what` in the error), and its shape
    /// holds together.
    pub fn validate(&self, what: &str, range: std::ops::RangeInclusive<f64>) -> Result<(), String> {
        let check = |name: &str, v: f64| {
            if v.is_finite() && range.contains(&v) {
                Ok(())
            } else {
                Err(format!(
                    "{what}.{name} must be between {} and {}, not {v}",
                    range.start(),
                    range.end()
                ))
            }
        };
        match self {
            Schedule::Constant { value } => check("value", *value),
            Schedule::Linear { start, end, steps } | Schedule::Cosine { start, end, steps } => {
                check("start", *start)?;
                check("end", *end)?;
                if *steps == Some(0) {
                    return Err(format!("{what}.steps must be at least 1"));
                }
                Ok(())
            }
            Schedule::Step {
                start,
                gamma,
                every,
            } => {
                check("start", *start)?;
                if *every == 0 {
                    return Err(format!("{what}.every must be at least 1"));
                }
                if !(*gamma > 0.0 && *gamma <= 1.0) {
                    return Err(format!("{what}.gamma must be in (0, 1], not {gamma}"));
                }
                Ok(())
            }
            Schedule::Exponential { start, gamma } => {
                check("start", *start)?;
                if !(*gamma > 0.0 && *gamma <= 1.0) {
                    return Err(format!("{what}.gamma must be in (0, 1], not {gamma}"));
                }
                Ok(())
            }
            Schedule::Warmup { steps, from, then } => {
                if *steps == 0 {
                    return Err(format!("{what}.steps must be at least 1"));
                }
                if !(0.0..=1.0).contains(from) {
                    return Err(format!("{what}.from must be between 0 and 1, not {from}"));
                }
                then.validate(&format!("{what}.then"), range)
            }
            Schedule::Sequence { parts } => {
                if parts.is_empty() || parts.len() > 32 {
                    return Err(format!("{what}.parts must hold 1 to 32 schedules"));
                }
                for (i, p) in parts.iter().enumerate() {
                    let last = i + 1 == parts.len();
                    match p.steps {
                        None if !last => {
                            return Err(format!(
                                "{what}.parts[{i}].steps: every part but the last needs its steps"
                            ));
                        }
                        Some(0) => {
                            return Err(format!("{what}.parts[{i}].steps must be at least 1"));
                        }
                        _ => {}
                    }
                    p.schedule
                        .validate(&format!("{what}.parts[{i}].schedule"), range.clone())?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Schedule {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn each_kind_follows_its_formula() {
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12 * b.abs().max(1.0);
        let s = parse(r#"{"kind":"step","start":0.001,"gamma":0.1,"every":10}"#);
        assert!(close(s.at(9, 100), 0.001) && close(s.at(10, 100), 0.0001));
        assert!(close(s.at(25, 100), 0.00001));
        let c = parse(r#"{"kind":"cosine","start":1.0,"end":0.1}"#);
        assert!(close(c.at(0, 100), 1.0) && close(c.at(100, 100), 0.1));
        assert!(close(c.at(50, 100), 0.55) && close(c.at(500, 100), 0.1));
        let l = parse(r#"{"kind":"linear","start":1.0,"end":0.5,"steps":10}"#);
        assert!(close(l.at(5, 1000), 0.75) && close(l.at(20, 1000), 0.5));
        let e = parse(r#"{"kind":"exponential","start":2.0,"gamma":0.5}"#);
        assert!(close(e.at(3, 10), 0.25));
        // Warm-up: rises to the cosine's first value, then the cosine over the rest.
        let w =
            parse(r#"{"kind":"warmup","steps":4,"then":{"kind":"cosine","start":1.0,"end":0.0}}"#);
        assert!(close(w.at(0, 104), 0.25) && close(w.at(3, 104), 1.0));
        assert!(close(w.at(4, 104), 1.0) && close(w.at(54, 104), 0.5));
        let q = parse(
            r#"{"kind":"sequence","parts":[{"steps":10,"schedule":{"kind":"constant","value":0.3}},
                {"schedule":{"kind":"linear","start":0.3,"end":0.9}}]}"#,
        );
        assert!(close(q.at(9, 110), 0.3) && close(q.at(60, 110), 0.6));
        assert!(close(q.at(110, 110), 0.9));
    }

    #[test]
    fn bad_schedules_are_named() {
        let err = |json: &str| parse(json).validate("lr_schedule", 0.0..=1.0).unwrap_err();
        assert!(err(r#"{"kind":"constant","value":2}"#).contains("lr_schedule.value"));
        assert!(err(r#"{"kind":"step","start":0.1,"gamma":0.1,"every":0}"#).contains("every"));
        assert!(err(r#"{"kind":"exponential","start":0.1,"gamma":1.5}"#).contains("gamma"));
        let e = err(
            r#"{"kind":"sequence","parts":[{"schedule":{"kind":"constant","value":0.1}},{"schedule":{"kind":"constant","value":0.1}}]}"#,
        );
        assert!(e.contains("parts[0].steps"), "{e}");
        let e = err(r#"{"kind":"warmup","steps":3,"then":{"kind":"cosine","start":0.1,"end":-1}}"#);
        assert!(e.contains("lr_schedule.then.end"), "{e}");
        assert!(serde_json::from_str::<Schedule>(r#"{"kind":"newbob"}"#).is_err());
    }
}
