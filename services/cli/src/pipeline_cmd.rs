//! `lakefish pipeline`: list pipelines, trigger a run and follow it step by step with a
//! progress bar per job, then print what it produced (net, SPRT result, promotion).

use crate::cli_progress::Bar;
use crate::client::{check, client};
use anyhow::Context;
use lakefish_schemas::Progress;
use std::time::Duration;

#[derive(clap::Args)]
pub(crate) struct PipelineArgs {
    /// The API's base URL.
    #[arg(long, env = "LAKEFISH_API", default_value = "http://127.0.0.1:8080")]
    api: String,
    #[command(subcommand)]
    what: PipelineCommand,
}

#[derive(clap::Subcommand)]
enum PipelineCommand {
    /// The configured pipelines, their schedules and latest runs.
    Ls,
    /// Start a run now (or join the one in progress).
    Run {
        /// The pipeline's name in the config ([pipelines.NAME]).
        name: String,
        /// Follow the run to its end with progress bars; exit non-zero if it fails.
        #[arg(long)]
        wait: bool,
    },
}

pub(crate) async fn run(args: PipelineArgs) -> anyhow::Result<()> {
    let api = args.api.trim_end_matches('/');
    let c = client();
    match args.what {
        PipelineCommand::Ls => {
            let v = check(c.get(format!("{api}/v1/pipelines")).send().await?).await?;
            for p in v["pipelines"].as_array().into_iter().flatten() {
                println!(
                    "{}  schedule {}  next {}",
                    p["name"].as_str().unwrap_or("?"),
                    p["schedule"].as_str().unwrap_or("(manual)"),
                    p["next_run"].as_str().unwrap_or("-")
                );
                for r in p["runs"].as_array().into_iter().flatten().take(5) {
                    println!(
                        "  {}  {:<9} {:<8} net {}  sprt {}  promoted {}{}",
                        r["id"].as_str().unwrap_or("?"),
                        r["state"].as_str().unwrap_or("?"),
                        r["trigger"].as_str().unwrap_or("?"),
                        r["net"].as_str().unwrap_or("-"),
                        r["sprt_state"].as_str().unwrap_or("-"),
                        r["promoted"],
                        r["error"]
                            .as_str()
                            .map(|e| format!("  ({e})"))
                            .unwrap_or_default()
                    );
                }
            }
            Ok(())
        }
        PipelineCommand::Run { name, wait } => {
            let resp = c
                .post(format!("{api}/v1/pipelines/{name}/run"))
                .send()
                .await
                .with_context(|| format!("cannot reach the API at {api}"))?;
            let v = check(resp).await?;
            let url = format!("{api}{}", v["url"].as_str().unwrap_or_default());
            let id = v["run"]["id"].as_str().unwrap_or("?").to_string();
            eprintln!(
                "{} run {id}",
                if v["started"] == true {
                    "started"
                } else {
                    "joined the running"
                }
            );
            if !wait {
                println!("{}", serde_json::to_string_pretty(&v["run"])?);
                return Ok(());
            }
            follow(api, &url).await
        }
    }
}

/// An SPRT's status as a progress line: games of the most it may play, LLR and W/D/L.
fn sprt_progress(id: &str, s: &serde_json::Value) -> Progress {
    let f = |k: &str| s[k].as_f64().unwrap_or(0.0);
    let n = |k: &str| s[k].as_u64().unwrap_or(0);
    Progress {
        stage: format!(
            "sprt {id}: LLR {:.2} in ({:.2}, {:.2}), W/D/L {}/{}/{}",
            f("llr"),
            f("lower"),
            f("upper"),
            n("wins"),
            n("draws"),
            n("losses")
        ),
        done: n("games"),
        total: s["spec"]["max_pairs"].as_u64().map(|p| 2 * p),
        unit: "games".into(),
        rows: 0,
    }
}

/// Polls the run; one bar per job, finished as its job finishes.
async fn follow(api: &str, url: &str) -> anyhow::Result<()> {
    let c = client();
    let mut bars: Vec<(String, Bar)> = Vec::new();
    let run = loop {
        let run = check(c.get(url).send().await?).await?;
        for j in run["jobs"].as_array().into_iter().flatten() {
            let job = j["job"].as_str().unwrap_or_default().to_string();
            if !bars.iter().any(|(id, _)| *id == job) {
                bars.push((job.clone(), Bar::new()));
            }
            let rec = check(c.get(format!("{api}/v1/jobs/{job}")).send().await?).await?;
            let mut p: Progress =
                serde_json::from_value(rec["progress"].clone()).unwrap_or_default();
            let label = format!(
                "{} {}",
                j["step"].as_str().unwrap_or(""),
                j["target"].as_str().unwrap_or("")
            );
            p.stage = if p.stage.is_empty() {
                label
            } else {
                format!("{label}: {}", p.stage)
            };
            let bar = &bars.iter().find(|(id, _)| *id == job).expect("added").1;
            bar.show(&p);
            if matches!(rec["state"].as_str(), Some("succeeded" | "failed")) {
                bar.finish();
            }
        }
        // The SPRT step's job only plans the test and queues its batches: the test's own
        // status is what moves for the minutes it plays.
        if let Some(sprt) = run["sprt"].as_str() {
            // Before its first batch is counted a test has no status yet (404), and an answer
            // that is not a status (a proxy's page) is no reason to stop following: no line.
            let resp = c.get(format!("{api}/v1/sprt/{sprt}")).send().await?;
            let status = match resp.status().is_success() {
                true => resp.json::<serde_json::Value>().await.ok(),
                false => None,
            };
            if let Some(s) = status {
                let key = format!("sprt:{sprt}");
                if !bars.iter().any(|(id, _)| *id == key) {
                    bars.push((key.clone(), Bar::new()));
                }
                let bar = &bars.iter().find(|(id, _)| *id == key).expect("added").1;
                bar.show(&sprt_progress(sprt, &s));
                if s["state"] != "running" {
                    bar.finish();
                }
            }
        }
        if run["state"] != "running" {
            break run;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    println!(
        "run {}: {}",
        run["id"].as_str().unwrap_or("?"),
        run["state"].as_str().unwrap_or("?")
    );
    // Each step's time (a server from before step times sends none).
    if let Ok(r) = serde_json::from_value::<lakefish_schemas::pipeline::PipelineRun>(run.clone()) {
        let now = chrono::Utc::now().to_rfc3339();
        let mut total = 0.0;
        for t in &r.steps {
            let secs = t.seconds(&now).unwrap_or(0.0);
            total += secs;
            println!(
                "  {:<9} {}",
                t.step.as_str(),
                lakefish_schemas::pipeline::duration_text(secs)
            );
        }
        if !r.steps.is_empty() {
            println!(
                "  {:<9} {}",
                "total",
                lakefish_schemas::pipeline::duration_text(total)
            );
        }
    }
    if let Some(e) = run["error"].as_str() {
        anyhow::bail!("{e}");
    }
    println!("new net   {}", run["net"].as_str().unwrap_or("-"));
    if let Some(sprt) = run["sprt"].as_str() {
        let s = check(c.get(format!("{api}/v1/sprt/{sprt}")).send().await?).await?;
        let elo = &s["elo"];
        println!(
            "sprt      {sprt}: {} vs {}: {} after {} games (W {} D {} L {})",
            s["new"]["name"].as_str().unwrap_or("?"),
            s["base"]["name"].as_str().unwrap_or("?"),
            s["state"].as_str().unwrap_or("?"),
            s["games"],
            s["wins"],
            s["draws"],
            s["losses"]
        );
        println!(
            "          Elo {:.1} ± {:.1}, LLR {:.3} in ({:.3}, {:.3}) [{} {}..{}]",
            elo["elo"].as_f64().unwrap_or(f64::NAN),
            elo["elo_error"].as_f64().unwrap_or(f64::NAN),
            s["llr"].as_f64().unwrap_or(f64::NAN),
            s["lower"].as_f64().unwrap_or(f64::NAN),
            s["upper"].as_f64().unwrap_or(f64::NAN),
            s["model"].as_str().unwrap_or(""),
            s["elo0"],
            s["elo1"]
        );
        // A server from before `conditions` still sends the spec it was played with.
        let conditions = s["conditions"].as_str().map(String::from).or_else(|| {
            serde_json::from_value::<lakefish_schemas::SprtSpec>(s["spec"].clone())
                .ok()
                .map(|spec| spec.conditions())
        });
        println!(
            "          played at {}",
            conditions.as_deref().unwrap_or("?")
        );
    } else if let Some(st) = run["sprt_state"].as_str() {
        println!("sprt      {st}");
    }
    println!(
        "promoted  {}",
        if run["promoted"] == true {
            "yes: it is the best net now"
        } else {
            "no: the best net stays"
        }
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_sprt_s_status_reads_as_games_of_the_most_it_may_play() {
        let s = serde_json::json!({
            "state": "running", "llr": 1.234, "lower": -2.944, "upper": 2.944,
            "wins": 5, "draws": 2, "losses": 1, "games": 8, "spec": {"max_pairs": 100},
        });
        let p = sprt_progress("sprt-0123456789ab", &s);
        assert_eq!(
            p.stage,
            "sprt sprt-0123456789ab: LLR 1.23 in (-2.94, 2.94), W/D/L 5/2/1"
        );
        assert_eq!((p.done, p.total, p.unit.as_str()), (8, Some(200), "games"));
        // A status without the fields (an older server, a garbled answer) still makes a line.
        let p = sprt_progress("sprt-x", &serde_json::json!({}));
        assert_eq!((p.done, p.total), (0, None));
    }
}
