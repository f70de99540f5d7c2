//! The HTTP client side of `--api` commands: `submit`, `jobs`, uploads, waiting for a job.

use crate::cli::{IngestCommand, SubmitCommand, ingest_spec};
use crate::cli_progress;
use anyhow::{Context, bail};
use lakefish_schemas::{JobRecord, JobSpec, Source, raw_key};
use std::time::Duration;

/// The HTTP client of every `--api` command: sends `LAKEFISH_TOKEN` as a bearer token when set.
pub(crate) fn client() -> reqwest::Client {
    client_with_timeout(Some(Duration::from_secs(30)))
}

pub(crate) fn client_with_timeout(timeout: Option<Duration>) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Ok(token) = std::env::var("LAKEFISH_TOKEN")
        && let Ok(mut v) = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
    {
        v.set_sensitive(true);
        headers.insert(reqwest::header::AUTHORIZATION, v);
    }
    let mut b = reqwest::Client::builder().default_headers(headers);
    if let Some(t) = timeout {
        b = b.timeout(t);
    }
    b.build().expect("http client")
}

pub(crate) async fn check(resp: reqwest::Response) -> anyhow::Result<serde_json::Value> {
    let status = resp.status();
    let body: serde_json::Value = resp.json().await.unwrap_or(serde_json::Value::Null);
    if !status.is_success() {
        let msg = body
            .get("error")
            .and_then(|e| e.as_str())
            .unwrap_or("no message");
        bail!("the API answered {status}: {msg}");
    }
    Ok(body)
}

pub(crate) fn file_name(path: &str) -> anyhow::Result<&str> {
    std::path::Path::new(path)
        .file_name()
        .and_then(|n| n.to_str())
        .with_context(|| format!("{path} has no file name"))
}

/// A local file as a stream of 1 MiB pieces.
pub(crate) async fn file_stream(
    path: &str,
) -> anyhow::Result<
    impl futures::Stream<Item = std::io::Result<bytes::Bytes>> + Unpin + Send + 'static,
> {
    use tokio::io::AsyncReadExt;
    let file = tokio::fs::File::open(path)
        .await
        .with_context(|| format!("opening {path}"))?;
    Ok(Box::pin(futures::stream::try_unfold(
        file,
        |mut f| async move {
            let mut buf = vec![0u8; 1 << 20];
            let n = f.read(&mut buf).await?;
            buf.truncate(n);
            Ok((n > 0).then(|| (bytes::Bytes::from(buf), f)))
        },
    )))
}

pub(crate) async fn upload_via_api(
    api: &str,
    source: Source,
    path: &str,
    replace: bool,
) -> anyhow::Result<String> {
    let name = file_name(path)?;
    raw_key(source, name)?;
    let body = reqwest::Body::wrap_stream(file_stream(path).await?);
    // No overall timeout: an upload takes as long as the file needs.
    let resp = client_with_timeout(None)
        .put(format!("{api}/v1/raw/{source}/{name}?replace={replace}"))
        .body(body)
        .send()
        .await
        .with_context(|| format!("cannot reach the API at {api}"))?;
    let v = check(resp).await?;
    let input = v["input"].as_str().unwrap_or_default().to_string();
    let what = if v["created"] == true {
        "uploaded"
    } else {
        "already uploaded (same bytes)"
    };
    eprintln!("{what}: {path} as {input} ({} bytes)", v["bytes"]);
    Ok(input)
}

pub(crate) async fn submit(
    api: &str,
    wait: bool,
    upload: bool,
    replace: bool,
    what: SubmitCommand,
) -> anyhow::Result<()> {
    let body = match what {
        SubmitCommand::Json { file } => {
            std::fs::read(&file).with_context(|| format!("reading {file}"))?
        }
        SubmitCommand::Ingest { what } => {
            let (source, mut a) = match what {
                IngestCommand::Binpack(a) => (Source::Binpack, a),
                IngestCommand::Pgn(a) => (Source::Lichess, a),
                IngestCommand::Plain(a) => (Source::Plain, a),
                IngestCommand::Bullet(a) => (Source::Bullet, a),
            };
            if upload {
                for f in a.files.iter_mut() {
                    if !f.starts_with(lakefish_lake::input::LAKE_PREFIX) {
                        *f = upload_via_api(api, source, f, replace).await?;
                    }
                }
            }
            let spec = ingest_spec(&a, true)?;
            serde_json::to_vec(&match source {
                Source::Binpack | Source::Selfplay => JobSpec::IngestBinpack(spec),
                Source::Lichess => JobSpec::IngestPgn(spec),
                Source::Plain => JobSpec::IngestPlain(spec),
                Source::Bullet => JobSpec::IngestBullet(spec),
            })?
        }
        SubmitCommand::Mask(a) => serde_json::to_vec(&JobSpec::Mask(a.spec()?))?,
        SubmitCommand::Transform { what } => serde_json::to_vec(&JobSpec::Transform(what.spec()?))?,
        SubmitCommand::Shuffle(a) => serde_json::to_vec(&JobSpec::Shuffle(a.spec()?))?,
        SubmitCommand::Train(a) => serde_json::to_vec(&JobSpec::Train(a.spec()?))?,
        SubmitCommand::Quantize(a) => serde_json::to_vec(&JobSpec::Quantize(a.spec()?))?,
        SubmitCommand::Register(a) => serde_json::to_vec(&JobSpec::Register(a.spec()?))?,
    };
    let resp = client()
        .post(format!("{api}/v1/jobs"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .with_context(|| format!("cannot reach the API at {api}"))?;
    let accepted = check(resp).await?;
    let id = accepted["id"].as_str().unwrap_or_default().to_string();
    eprintln!("queued job {id}");
    if !wait {
        return Ok(());
    }
    let bar = cli_progress::Bar::new();
    loop {
        let rec: JobRecord = serde_json::from_value(
            check(client().get(format!("{api}/v1/jobs/{id}")).send().await?).await?,
        )?;
        bar.show(&rec.progress);
        if rec.state.is_final() {
            if rec.state.ended_without_result() {
                bar.finish();
                println!("{}", serde_json::to_string_pretty(&rec)?);
                bail!(
                    "job {id} {}: {}",
                    rec.state.as_str(),
                    rec.error.unwrap_or_default()
                );
            }
            // A shuffle fans its passes out as jobs of their own: follow it to the commit.
            let fanned = rec.result.as_ref().and_then(|r| r["shuffle"].as_str());
            if let (Some(shuffle), "shuffle") = (fanned, rec.kind.as_str()) {
                let manifest = wait_for_shuffle(api, shuffle, &bar).await?;
                bar.finish();
                println!("{}", serde_json::to_string_pretty(&manifest)?);
                return Ok(());
            }
            bar.finish();
            println!("{}", serde_json::to_string_pretty(&rec)?);
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Polls `GET /v1/shuffles/{id}` until the shuffle is committed; returns its manifest.
pub(crate) async fn wait_for_shuffle(
    api: &str,
    id: &str,
    bar: &cli_progress::Bar,
) -> anyhow::Result<serde_json::Value> {
    loop {
        let v = check(
            client()
                .get(format!("{api}/v1/shuffles/{id}"))
                .send()
                .await?,
        )
        .await?;
        if v["state"] == "committed" {
            return Ok(v);
        }
        let n = |k: &str| v[k].as_u64().unwrap_or(0);
        bar.show(&lakefish_schemas::Progress {
            stage: format!(
                "shuffle {id}: deal {}/{}, piles {}/{}",
                n("dealt"),
                n("parts"),
                n("piles_done"),
                n("chunks")
            ),
            done: n("dealt") + n("piles_done"),
            total: Some(n("parts") + n("chunks")),
            unit: "tasks".into(),
            rows: 0,
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// `lakefish jobs [--state S] [--kind K] [--json]`, newest first as a table, or `jobs ID`: one
/// job's record as JSON.
pub(crate) async fn show_jobs(
    api: &str,
    state: Option<String>,
    kind: Option<lakefish_schemas::JobKind>,
    id: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    let get = |url: String| async move {
        check(
            client()
                .get(url)
                .send()
                .await
                .with_context(|| format!("cannot reach the API at {api}"))?,
        )
        .await
    };
    if let Some(id) = id {
        println!(
            "{}",
            serde_json::to_string_pretty(&get(format!("{api}/v1/jobs/{id}")).await?)?
        );
        return Ok(());
    }
    let mut query = vec![];
    if let Some(s) = &state {
        query.push(format!("state={s}"));
    }
    if let Some(k) = &kind {
        query.push(format!("kind={k}"));
    }
    let body = get(format!("{api}/v1/jobs?{}", query.join("&"))).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&body)?);
        return Ok(());
    }
    let jobs: Vec<JobRecord> = serde_json::from_value(body["jobs"].clone())
        .context("the API's job list is not what this lakefish reads")?;
    if jobs.is_empty() {
        println!("no jobs");
    }
    for j in &jobs {
        let p = &j.progress;
        let progress = match p.total {
            Some(t) if t > 0 => format!("{}/{} {}", p.done, t, p.unit),
            _ if p.done > 0 => format!("{} {}", p.done, p.unit),
            _ => String::new(),
        };
        println!(
            "{}  {:<14} {:<9} {:<24} {}{}",
            j.id,
            j.kind,
            j.state.as_str(),
            progress,
            j.created,
            j.error
                .as_ref()
                .map(|e| format!("\n    error: {e}"))
                .unwrap_or_default()
        );
    }
    if body["next"].is_string() {
        println!(
            "(newest {} shown; --json gives the cursor of the next page)",
            jobs.len()
        );
    }
    Ok(())
}

/// `lakefish jobs ID --cancel`: asks the service to cancel a job and prints its record.
pub(crate) async fn cancel_job(api: &str, id: &str) -> anyhow::Result<()> {
    let resp = client()
        .post(format!("{api}/v1/jobs/{id}/cancel"))
        .send()
        .await
        .with_context(|| format!("cannot reach the API at {api}"))?;
    let rec: lakefish_schemas::JobRecord = serde_json::from_value(check(resp).await?)?;
    let what = if rec.state == lakefish_schemas::JobState::Cancelled {
        "cancelled"
    } else {
        "cancel requested: it stops at its next progress report"
    };
    println!("job {} ({}): {what}", rec.id, rec.kind.as_str());
    Ok(())
}
