//! Prometheus metrics, computed on each scrape from the job record store and the lake, which
//! hold every job, dataset, run and SPRT test of all processes on all machines: any API
//! replica reports the same numbers, and they survive restarts (in-process counters would
//! do neither).

use crate::{JobError, Lake};
use lakefish_lake::catalog::{CatalogKind, CatalogQuery};
use lakefish_lake::records::JobStore;
use lakefish_schemas::JobState;
use std::collections::BTreeMap;
use std::fmt::Write;

fn seconds_between(start: &str, end: &str) -> Option<f64> {
    let a = chrono::DateTime::parse_from_rfc3339(start).ok()?;
    let b = chrono::DateTime::parse_from_rfc3339(end).ok()?;
    Some((b - a).num_milliseconds() as f64 / 1000.0)
}

/// Label values are escaped as the text format asks (backslash, quote, newline).
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

struct Out(String);

impl Out {
    fn help(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }
    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        let labels: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", label(v)))
            .collect();
        let labels = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{}}}", labels.join(","))
        };
        let _ = writeln!(self.0, "{name}{labels} {value}");
    }
}

/// The metrics in Prometheus text format (version 0.0.4). Job counts come from the record
/// store's tally (one aggregate query in a database), the rest from the lake's catalogue.
pub async fn prometheus(lake: &Lake, jobs: &JobStore) -> Result<String, JobError> {
    let mut out = Out(String::new());
    let tally = jobs.tally().await?;

    let mut by_kind_state: BTreeMap<(String, &'static str), u64> = BTreeMap::new();
    let mut durations: BTreeMap<String, (f64, u64)> = BTreeMap::new();
    for t in &tally {
        *by_kind_state
            .entry((t.kind.as_str().to_string(), t.state.as_str()))
            .or_default() += t.count;
        if t.timed > 0 {
            let d = durations.entry(t.kind.as_str().to_string()).or_default();
            d.0 += t.seconds;
            d.1 += t.timed;
        }
    }
    out.help("lakefish_jobs", "gauge", "Job records by kind and state.");
    let kinds: std::collections::BTreeSet<&String> = by_kind_state.keys().map(|(k, _)| k).collect();
    for kind in kinds {
        for st in JobState::ALL {
            let n = by_kind_state
                .get(&(kind.clone(), st.as_str()))
                .copied()
                .unwrap_or(0);
            out.sample(
                "lakefish_jobs",
                &[("kind", kind), ("state", st.as_str())],
                n as f64,
            );
        }
    }
    out.help(
        "lakefish_queue_depth",
        "gauge",
        "Jobs waiting for a worker (records in state queued).",
    );
    let queued: u64 = tally
        .iter()
        .filter(|t| t.state == JobState::Queued)
        .map(|t| t.count)
        .sum();
    out.sample("lakefish_queue_depth", &[], queued as f64);
    out.help(
        "lakefish_job_duration_seconds",
        "summary",
        "Time from start to finish of finished jobs, by kind.",
    );
    for (kind, (sum, count)) in &durations {
        out.sample("lakefish_job_duration_seconds_sum", &[("kind", kind)], *sum);
        out.sample(
            "lakefish_job_duration_seconds_count",
            &[("kind", kind)],
            *count as f64,
        );
    }

    out.help(
        "lakefish_rows_ingested",
        "gauge",
        "Position rows in committed datasets, by source.",
    );
    let sums = CatalogSums::read(lake).await?;
    for (source, n) in &sums.rows_by_source {
        out.sample("lakefish_rows_ingested", &[("source", source)], *n as f64);
    }
    out.help("lakefish_datasets", "gauge", "Committed datasets.");
    out.sample("lakefish_datasets", &[], sums.datasets as f64);

    out.help(
        "lakefish_training_positions_per_second",
        "gauge",
        "Training throughput of the most recent runs: positions seen over the run's wall time.",
    );
    for run in &sums.training {
        let positions = run.step as f64 * run.spec.batch_size as f64;
        if let Some(secs) = seconds_between(&run.created, &run.updated)
            && secs > 0.0
        {
            out.sample(
                "lakefish_training_positions_per_second",
                &[("run", &run.id)],
                positions / secs,
            );
        }
    }

    out.help(
        "lakefish_sprt_games",
        "counter",
        "Games played in SPRT tests, by the tests' state.",
    );
    for (state, n) in &sums.sprt_games {
        out.sample("lakefish_sprt_games", &[("state", state)], *n as f64);
    }
    Ok(out.0)
}

/// Runs whose training throughput `/metrics` reports (newest first): a bounded number of
/// series, whatever the history.
const RECENT_RUNS: usize = 20;

/// What `/metrics` reports of the lake's catalogue: aggregate queries with a catalogue (a
/// scrape costs the same at any history), the lake's lists without one.
struct CatalogSums {
    rows_by_source: BTreeMap<String, u64>,
    datasets: u64,
    /// The most recent runs ([`RECENT_RUNS`]).
    training: Vec<lakefish_schemas::RunRecord>,
    sprt_games: BTreeMap<String, u64>,
}

impl CatalogSums {
    async fn read(lake: &Lake) -> Result<Self, JobError> {
        let mut sums = CatalogSums {
            rows_by_source: BTreeMap::new(),
            datasets: 0,
            training: Vec::new(),
            sprt_games: BTreeMap::new(),
        };
        if let Some(catalog) = lake.catalog() {
            for t in catalog.0.totals(CatalogKind::Dataset).await? {
                sums.datasets += t.count;
                let source = t.state.unwrap_or_default();
                *sums.rows_by_source.entry(source).or_default() += t.weight.max(0) as u64;
            }
            let mut recent = CatalogQuery::all(CatalogKind::Run);
            recent.limit = RECENT_RUNS;
            sums.training = catalog
                .0
                .page(&recent)
                .await?
                .entries
                .iter()
                .map(|e| e.decode())
                .collect::<Result<_, _>>()?;
            for t in catalog.0.totals(CatalogKind::Sprt).await? {
                let state = t.state.unwrap_or_default();
                *sums.sprt_games.entry(state).or_default() += t.weight.max(0) as u64;
            }
            return Ok(sums);
        }
        for d in lakefish_lake::datasets::list_datasets(lake).await? {
            sums.datasets += 1;
            *sums
                .rows_by_source
                .entry(d.source.as_str().to_string())
                .or_default() += d.rows;
        }
        sums.training = crate::nets::list_runs(lake).await?;
        sums.training.truncate(RECENT_RUNS);
        for t in crate::sprt::list(lake, None, None).await? {
            *sums
                .sprt_games
                .entry(t.state.as_str().to_string())
                .or_default() += t.games;
        }
        Ok(sums)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_format_details() {
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(
            seconds_between("2026-11-22T04:38:11.572Z", "2026-11-22T04:38:13.072Z"),
            Some(1.5)
        );
        let mut o = Out(String::new());
        o.sample("m", &[("kind", "ingest")], 2.0);
        o.sample("n", &[], 0.5);
        assert_eq!(o.0, "m{kind=\"ingest\"} 2\nn 0.5\n");
    }
}
