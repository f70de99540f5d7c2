//! `lakefish bench load`: many concurrent clients submit small jobs to a running API and poll
//! each to its end, for a bounded time. Reports throughput and latency percentiles, and checks
//! that every submitted job is accounted for in `GET /v1/jobs`. The reference, measured in the
//! same run with the same clients, is the cheapest request there is (`GET /healthz`).

use serde::Serialize;
use std::collections::HashSet;
use std::time::{Duration, Instant};

#[derive(Debug, Default, Serialize)]
pub struct Latency {
    pub count: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    pub(crate) fn of(mut v: Vec<f64>) -> Latency {
        if v.is_empty() {
            return Latency::default();
        }
        v.sort_by(f64::total_cmp);
        let at = |q: f64| v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1];
        Latency {
            count: v.len(),
            p50_ms: at(0.50),
            p99_ms: at(0.99),
            max_ms: *v.last().unwrap(),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct LoadReport {
    pub clients: usize,
    pub seconds: f64,
    pub submitted: usize,
    pub succeeded: usize,
    pub failed: usize,
    /// Requests that got a transport error or an unexpected status.
    pub errors: usize,
    /// Submitted jobs missing from `GET /v1/jobs` or not in a final state there.
    pub unaccounted: usize,
    pub jobs_per_s: f64,
    pub requests_per_s: f64,
    pub submit: Latency,
    pub poll: Latency,
    /// Submit to seeing the final state.
    pub job: Latency,
    /// The reference: `GET /healthz` with the same clients for the same time.
    pub healthz_requests_per_s: f64,
    pub healthz: Latency,
    pub first_errors: Vec<String>,
}

#[derive(Default)]
struct ClientLog {
    submit: Vec<f64>,
    poll: Vec<f64>,
    job: Vec<f64>,
    ids: Vec<String>,
    succeeded: usize,
    failed: usize,
    errors: Vec<String>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

async fn one_client(
    http: reqwest::Client,
    api: String,
    job: serde_json::Value,
    deadline: Instant,
) -> ClientLog {
    let mut log = ClientLog::default();
    while Instant::now() < deadline {
        let t0 = Instant::now();
        let resp = http.post(format!("{api}/v1/jobs")).json(&job).send().await;
        log.submit.push(ms(t0.elapsed()));
        let id = match resp {
            Ok(r) if r.status() == reqwest::StatusCode::ACCEPTED => {
                match r.json::<serde_json::Value>().await {
                    Ok(v) => v["id"].as_str().unwrap_or_default().to_string(),
                    Err(e) => {
                        log.errors.push(format!("submit: {e}"));
                        continue;
                    }
                }
            }
            Ok(r) => {
                let status = r.status();
                log.errors.push(format!(
                    "submit: HTTP {status}: {}",
                    r.text().await.unwrap_or_default()
                ));
                continue;
            }
            Err(e) => {
                log.errors.push(format!("submit: {e}"));
                continue;
            }
        };
        log.ids.push(id.clone());
        // Poll until final; a job still running at the deadline is waited for (bounded).
        let give_up = deadline + Duration::from_secs(60);
        loop {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let t = Instant::now();
            let r = http.get(format!("{api}/v1/jobs/{id}")).send().await;
            log.poll.push(ms(t.elapsed()));
            let state = match r {
                Ok(r) if r.status().is_success() => r
                    .json::<serde_json::Value>()
                    .await
                    .ok()
                    .and_then(|v| v["state"].as_str().map(str::to_string)),
                Ok(r) => {
                    log.errors.push(format!("poll {id}: HTTP {}", r.status()));
                    None
                }
                Err(e) => {
                    log.errors.push(format!("poll {id}: {e}"));
                    None
                }
            };
            match state.as_deref() {
                Some("succeeded") => log.succeeded += 1,
                Some("failed") => log.failed += 1,
                _ if Instant::now() > give_up => {
                    log.errors
                        .push(format!("job {id} not finished 60 s after the end"));
                    break;
                }
                _ => continue,
            }
            log.job.push(ms(t0.elapsed()));
            break;
        }
    }
    log
}

async fn healthz_client(http: reqwest::Client, api: String, deadline: Instant) -> Vec<f64> {
    let mut out = Vec::new();
    while Instant::now() < deadline {
        let t = Instant::now();
        if let Ok(r) = http.get(format!("{api}/healthz")).send().await {
            let _ = r.bytes().await;
        }
        out.push(ms(t.elapsed()));
    }
    out
}

pub async fn run(
    http: reqwest::Client,
    api: &str,
    job: serde_json::Value,
    clients: usize,
    duration: Duration,
    reference: Duration,
) -> anyhow::Result<LoadReport> {
    let api = api.trim_end_matches('/').to_string();
    // Reference first, on an idle service.
    let deadline = Instant::now() + reference;
    let t0 = Instant::now();
    let handles: Vec<_> = (0..clients)
        .map(|_| tokio::spawn(healthz_client(http.clone(), api.clone(), deadline)))
        .collect();
    let mut health = Vec::new();
    for h in handles {
        health.extend(h.await?);
    }
    let health_rps = health.len() as f64 / t0.elapsed().as_secs_f64();

    let t0 = Instant::now();
    let deadline = t0 + duration;
    let handles: Vec<_> = (0..clients)
        .map(|_| tokio::spawn(one_client(http.clone(), api.clone(), job.clone(), deadline)))
        .collect();
    let mut all = ClientLog::default();
    for h in handles {
        let l = h.await?;
        all.submit.extend(l.submit);
        all.poll.extend(l.poll);
        all.job.extend(l.job);
        all.ids.extend(l.ids);
        all.succeeded += l.succeeded;
        all.failed += l.failed;
        all.errors.extend(l.errors);
    }
    let seconds = t0.elapsed().as_secs_f64();

    // Accounting: every id we were given is in the job list (all its pages), in a final state.
    let mut finals: HashSet<String> = HashSet::new();
    let mut after: Option<String> = None;
    loop {
        let mut url = format!("{api}/v1/jobs?limit=1000");
        if let Some(a) = &after {
            url.push_str(&format!("&after={a}"));
        }
        let page: serde_json::Value = http
            .get(url)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        for j in page["jobs"]
            .as_array()
            .map(|a| a.as_slice())
            .unwrap_or_default()
        {
            if (j["state"] == "succeeded" || j["state"] == "failed")
                && let Some(id) = j["id"].as_str()
            {
                finals.insert(id.to_string());
            }
        }
        match page["next"].as_str() {
            Some(next) => after = Some(next.to_string()),
            None => break,
        }
    }
    let unaccounted = all
        .ids
        .iter()
        .filter(|id| !finals.contains(id.as_str()))
        .count();
    let requests = all.submit.len() + all.poll.len();
    Ok(LoadReport {
        clients,
        seconds,
        submitted: all.ids.len(),
        succeeded: all.succeeded,
        failed: all.failed,
        errors: all.errors.len(),
        unaccounted,
        jobs_per_s: (all.succeeded + all.failed) as f64 / seconds,
        requests_per_s: requests as f64 / seconds,
        submit: Latency::of(all.submit),
        poll: Latency::of(all.poll),
        job: Latency::of(all.job),
        healthz_requests_per_s: health_rps,
        healthz: Latency::of(health),
        first_errors: all.errors.into_iter().take(5).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let l = Latency::of((1..=100).map(f64::from).collect());
        assert_eq!(
            (l.count, l.p50_ms, l.p99_ms, l.max_ms),
            (100, 50.0, 99.0, 100.0)
        );
        let l = Latency::of(vec![5.0]);
        assert_eq!((l.p50_ms, l.p99_ms), (5.0, 5.0));
        assert_eq!(Latency::of(vec![]).count, 0);
    }
}
