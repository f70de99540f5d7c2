//! Nightly retraining as a pipeline: every step a queued job, in order; the best pointer
//! moves only on an accepted SPRT; a second run ingests nothing old and warm-starts from the
//! best net; a cron-scheduled pipeline starts on its own and fails with its reason. Then
//! headless Chromium walks the dashboard over everything those runs left behind.

use lakefish_tests::*;
use std::time::{Duration, Instant};

const CONFIG: &str = r#"
version = 1

[pipelines.retrain]
mask = "quiet"
[[pipelines.retrain.inputs]]
source = "binpack"
prefix = "raw/binpack/"
[pipelines.retrain.datagen]
net = "best"
games = 400
nodes = 300
[pipelines.retrain.shuffle]
chunks = 4
seed = 3
[pipelines.retrain.train]
warm_start = true
arch = "32x2-8"
batch_size = 1024
epochs = 10
device = "cpu"
[pipelines.retrain.train.warm]
epochs = 1
[pipelines.retrain.quantize]
max_mean_cp = 1000.0
max_p99_cp = 1000.0
[pipelines.retrain.sprt]
book = "lake:raw/books/book.epd"
nodes = 200
# Bounds far below any real difference: the first run's SPRT accepts as soon as the little
# net scores a few half points, which exercises the promotion. (A net that loses every game
# cannot be accepted under any bounds; with -1000/-700 and 40 pairs a run scoring one draw in
# 80 games ended inconclusive.)
model = "logistic"
elo0 = -1500.0
elo1 = -1000.0
batch_pairs = 2
max_pairs = 80
concurrency = 1

[pipelines.every2s]
schedule = "*/2 * * * * *"
[[pipelines.every2s.inputs]]
source = "lichess"
prefix = "raw/lichess/nothing-here/"
[pipelines.every2s.shuffle]
chunks = 2
[pipelines.every2s.train]
[pipelines.every2s.sprt]
book = "lake:raw/books/book.epd"
"#;

const BOOK: &str = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -\n\
rnbqkbnr/pppppppp/8/8/3P4/8/PPP1PPPP/RNBQKBNR b KQkq -\n\
rnbqkbnr/pppppppp/8/8/2P5/8/PP1PPPPP/RNBQKBNR b KQkq -\n";

async fn get(url: String) -> serde_json::Value {
    let r = reqwest::get(&url).await.unwrap();
    assert!(r.status().is_success(), "{url}: {}", r.status());
    r.json().await.unwrap()
}

/// Triggers a run and follows it to its end.
async fn run_to_end(api: &str) -> serde_json::Value {
    let c = reqwest::Client::new();
    let r = c
        .post(format!("{api}/v1/pipelines/retrain/run"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let started: serde_json::Value = r.json().await.unwrap();
    let url = format!("{api}{}", started["url"].as_str().unwrap());
    // A second trigger while it runs gets the same run, not another.
    let again = c
        .post(format!("{api}/v1/pipelines/retrain/run"))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 200);
    let again: serde_json::Value = again.json().await.unwrap();
    assert_eq!(again["run"]["id"], started["run"]["id"]);

    let t0 = Instant::now();
    loop {
        let run = get(url.clone()).await;
        if run["state"] != "running" {
            return run;
        }
        assert!(t0.elapsed() < Duration::from_secs(400), "run stuck: {run}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn nightly_pipeline_promotes_on_accept_and_warm_starts() {
    let dir = tempfile::tempdir().unwrap();
    let input = binpack_input(dir.path());
    let (_serve, api) = serve_embedded(dir.path(), Some(CONFIG));
    put_created(
        format!("{api}/v1/raw/binpack/first.binpack"),
        std::fs::read(&input).unwrap(),
    )
    .await;
    put_created(format!("{api}/v1/books/book.epd"), BOOK.as_bytes().to_vec()).await;

    let run = run_to_end(&api).await;
    assert_eq!(run["state"], "succeeded", "{run:#}");
    assert_eq!(
        steps_of(&run),
        [
            "datagen", "ingest", "mask", "shuffle", "train", "quantize", "register", "sprt"
        ]
    );
    // Every step's jobs are ordinary jobs in the API, all succeeded.
    for j in run["jobs"].as_array().unwrap() {
        let rec = get(format!("{api}/v1/jobs/{}", j["job"].as_str().unwrap())).await;
        assert_eq!(rec["state"], "succeeded", "{rec:#}");
        assert_eq!(rec["kind"], j["kind"]);
    }
    let datasets: Vec<&str> = run["datasets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    assert!(
        datasets.iter().any(|d| d.starts_with("binpack/first-")),
        "{datasets:?}"
    );
    assert!(
        datasets
            .iter()
            .any(|d| d.starts_with("selfplay/retrain-sp-")),
        "{datasets:?}"
    );
    assert_eq!(run["base"], "classical");
    if run["sprt_state"] != "accepted" {
        let sprt = get(format!("{api}/v1/sprt/{}", run["sprt"].as_str().unwrap())).await;
        panic!("SPRT not accepted: {sprt:#}");
    }
    assert_eq!(run["promoted"], true);
    let net = run["net"].as_str().unwrap().to_string();
    let shown = get(format!("{api}/v1/nets/{net}")).await;
    assert_eq!(shown["name"], net.as_str());
    let best: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("lake/registry/best.json")).unwrap())
            .unwrap();
    assert_eq!(best["name"], net.as_str());
    // The promotion is in the history: by the pipeline, with its test and the Elo it measured.
    let history = get(format!("{api}/v1/promotions")).await;
    let first = &history["promotions"][0];
    assert_eq!(first["name"], net.as_str(), "{history:#}");
    assert_eq!(first["by"], "pipeline:retrain");
    assert_eq!(first["sprt"], run["sprt"]);
    assert!(
        first["elo"].is_number() && first.get("previous").is_none(),
        "{first:#}"
    );
    // `best` names it wherever a net name is taken: the list, the manifest, the file, the CLI.
    assert_eq!(
        get(format!("{api}/v1/nets")).await["best"]["name"],
        net.as_str()
    );
    assert_eq!(
        get(format!("{api}/v1/nets/best")).await["name"],
        net.as_str()
    );
    let file = reqwest::get(format!("{api}/v1/nets/best/file"))
        .await
        .unwrap();
    assert_eq!(file.status(), 200);
    assert_eq!(
        file.headers()["x-sha256"],
        shown["sha256"].as_str().unwrap()
    );
    let out = std::process::Command::new(lakefish_tests::lakefish_bin())
        .args(["--lake", "lake", "nets", "pull", "best", "-o", "best.nnue"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    lakefish_tests::assert_success(&out);
    let out = std::process::Command::new(lakefish_tests::lakefish_bin())
        .args(["--lake", "lake", "nets", "ls"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    lakefish_tests::assert_success(&out);
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l.starts_with(&net) && l.ends_with("(best)")),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(
        lakefish_jobs::nets::sha256_hex(&std::fs::read(dir.path().join("best.nnue")).unwrap()),
        shown["sha256"].as_str().unwrap()
    );
    // `runs RUN` shows the run with its last metrics rows, not all of them (issue 35, item
    // 10); `--metrics` gives every row.
    let run_id = shown["run"].as_str().unwrap();
    let metrics_rows = |extra: &[&str]| {
        let out = std::process::Command::new(lakefish_tests::lakefish_bin())
            .args(["--lake", "lake", "runs", run_id])
            .args(extra)
            .current_dir(dir.path())
            .output()
            .unwrap();
        lakefish_tests::assert_success(&out);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["id"], run_id);
        v["metrics"].as_array().unwrap().len()
    };
    let (some, all) = (metrics_rows(&[]), metrics_rows(&["--metrics"]));
    assert!(some <= 5 && some <= all && all > 0, "{some} of {all}");

    // The second run: the binpack is not ingested again, training warm-starts from the best
    // net, and the SPRT is against it.
    let second = run_to_end(&api).await;
    assert_eq!(second["state"], "succeeded", "{second:#}");
    assert!(
        !steps_of(&second).contains(&"ingest".to_string()),
        "{second:#}"
    );
    assert_eq!(second["base"], net.as_str());
    let train = second["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["step"] == "train")
        .unwrap();
    let rec = get(format!("{api}/v1/jobs/{}", train["job"].as_str().unwrap())).await;
    assert_eq!(
        rec["spec"]["spec"]["init_from"]["run"], run["train_run"],
        "{rec:#}"
    );
    // The warm round trains with `train.warm`'s settings.
    assert_eq!(rec["spec"]["spec"]["epochs"], 1, "{rec:#}");

    // The scheduled pipeline started by itself and failed, saying why.
    let all = get(format!("{api}/v1/pipelines")).await;
    let every = all["pipelines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "every2s")
        .unwrap();
    assert!(every["next_run"].as_str().is_some());
    let runs = every["runs"].as_array().unwrap();
    assert!(runs.iter().all(|r| r["trigger"] == "schedule"), "{every:#}");
    // The newest may have just started; the ones before it have ended, and failed saying why.
    let ended = runs
        .iter()
        .find(|r| r["state"] != "running")
        .unwrap_or_else(|| panic!("no scheduled run has ended: {every:#}"));
    assert_eq!(ended["state"], "failed");
    assert!(
        ended["error"].as_str().unwrap().contains("no data"),
        "{every:#}"
    );
    let retrain = all["pipelines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "retrain")
        .unwrap();
    assert_eq!(retrain["runs"].as_array().unwrap().len(), 2);
    assert!(retrain["next_run"].is_null());

    // One pipeline's runs, a page at a time, newest first, filtered by state.
    let first = get(format!("{api}/v1/pipelines/retrain/runs?limit=1")).await;
    assert_eq!(first["runs"][0]["id"], second["id"], "{first:#}");
    let next = first["next"].as_str().expect("a second page");
    let rest = get(format!(
        "{api}/v1/pipelines/retrain/runs?limit=1&after={next}"
    ))
    .await;
    assert_eq!(rest["runs"][0]["id"], run["id"], "{rest:#}");
    assert!(rest.get("next").is_none(), "{rest:#}");
    let failed = get(format!("{api}/v1/pipelines/every2s/runs?state=failed")).await;
    let failed = failed["runs"].as_array().unwrap();
    assert!(!failed.is_empty());
    assert!(
        failed
            .iter()
            .all(|r| r["state"] == "failed" && r["pipeline"] == "every2s")
    );
    let none = get(format!("{api}/v1/pipelines/retrain/runs?state=failed")).await;
    assert_eq!(none["runs"].as_array().unwrap().len(), 0, "{none:#}");
    for (url, status) in [
        ("/v1/pipelines/retrain/runs?state=sleeping", 400),
        ("/v1/pipelines/nope/runs", 404),
    ] {
        let r = reqwest::get(format!("{api}{url}")).await.unwrap();
        assert_eq!(r.status(), status, "{url}");
    }

    // Unknown pipelines are 404s.
    let r = reqwest::Client::new()
        .post(format!("{api}/v1/pipelines/nope/run"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);

    walk_dashboard(&api, &run, &second).await;
}

/// Loads every dashboard page in headless Chromium, following the links the pages render,
/// checks each against the JSON API and keeps a screenshot of each in
/// `target/dashboard-screenshots/`.
async fn walk_dashboard(api: &str, first: &serde_json::Value, second: &serde_json::Value) {
    let browser = Browser::new();
    let shots = workspace_root().join("target/dashboard-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let b = &browser;
    let page = |path: &str, shot: &str| {
        let url = format!("{api}{path}");
        let dom = b.dom(&url);
        assert!(dom.contains("lakefish</title>"), "{path}: {dom}");
        b.screenshot(&url, &shots.join(format!("{shot}.png")));
        dom
    };
    let net1 = first["net"].as_str().unwrap();
    let net2 = second["net"].as_str().unwrap();

    // Overview: job counts, the best net, and links to every section.
    let jobs = get(format!("{api}/v1/jobs?limit=10000")).await;
    let jobs = jobs["jobs"].as_array().unwrap();
    let overview = page("/", "overview");
    let succeeded = jobs.iter().filter(|j| j["state"] == "succeeded").count();
    assert!(
        overview.contains(&format!("jobs succeeded<b>{succeeded}</b>")),
        "{overview}"
    );
    let best = get(format!("{api}/v1/nets")).await;
    assert!(best["nets"].as_array().unwrap().len() >= 2);
    assert!(
        overview.contains("Best net: <a href=\"/ui/nets/"),
        "{overview}"
    );
    let nav = links(&overview);
    for section in [
        "/ui/jobs",
        "/ui/datasets",
        "/ui/runs",
        "/ui/nets",
        "/ui/sprt",
        "/ui/pipelines",
    ] {
        assert!(
            nav.iter().any(|l| l == section),
            "{section} not linked: {nav:?}"
        );
    }

    // Jobs: one row per job lakefish did not queue itself; its own tasks (the SPRT's
    // batches, the shuffle's deals and piles) are counted below, a link away.
    let internal = ["sprt_batch", "shuffle_deal", "shuffle_pile"];
    let is_internal = |j: &&serde_json::Value| internal.contains(&j["kind"].as_str().unwrap());
    let jobs_page = page("/ui/jobs?limit=1000", "jobs");
    let rows = |html: &str| html.matches("<tr><td><a href=\"/ui/jobs/").count();
    assert_eq!(
        rows(&jobs_page),
        jobs.iter().filter(|j| !is_internal(j)).count()
    );
    let batches = jobs.iter().filter(|j| j["kind"] == "sprt_batch").count();
    assert!(batches > 0);
    assert!(
        jobs_page.contains(&format!(
            r#"<a href="/ui/jobs?kind=sprt_batch">{batches} sprt_batch</a>"#
        )),
        "{jobs_page}"
    );
    let batch_page = page("/ui/jobs?kind=sprt_batch&limit=1000", "jobs-sprt-batch");
    assert_eq!(rows(&batch_page), batches);
    assert!(batch_page.contains(r#"<option value="sprt_batch" selected"#));
    // Pages of two, followed by their "next" links, hold every job once.
    let (mut seen, mut next) = (0, Some("/ui/jobs?limit=2".to_string()));
    while let Some(link) = next.take() {
        let url = format!("{api}{}", link.replace("&amp;", "&"));
        let html = reqwest::get(url).await.unwrap().text().await.unwrap();
        seen += rows(&html);
        // A page's limit counts the jobs it lists (lakefish's own tasks are left out by the
        // store, not after it).
        if html.contains("<a id=\"next\"") {
            assert_eq!(rows(&html), 2, "{html}");
        }
        next = html
            .split("<a id=\"next\" href=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .map(str::to_string);
        assert!(seen <= jobs.len(), "paging never ends");
    }
    assert_eq!(seen, jobs.iter().filter(|j| !is_internal(j)).count());
    // A filter that names no state is a 400 page saying which ones there are.
    let bad = reqwest::get(format!("{api}/ui/jobs?state=done"))
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    assert!(bad.text().await.unwrap().contains("unknown state"));
    // A job's link opens its page, not JSON: what it was asked, its state, what it made.
    let train_job = jobs.iter().find(|j| j["kind"] == "train").unwrap();
    let job_page = page(
        &format!("/ui/jobs/{}", train_job["id"].as_str().unwrap()),
        "job",
    );
    assert!(
        job_page.contains("<tr><th>kind</th><td>train</td></tr>"),
        "{job_page}"
    );
    assert!(job_page.contains("<h3>Asked</h3><pre>"), "{job_page}");
    assert!(
        job_page.contains(&format!(
            "run <a href=\"/ui/runs/{r}\">{r}</a>",
            r = train_job["result"]["id"].as_str().unwrap()
        )),
        "{job_page}"
    );
    let missing = reqwest::get(format!("{api}/ui/jobs/not-a-uuid"))
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    // `best` resolves on the dashboard as in the API.
    let best_page = page("/ui/nets/best", "net-best");
    let best_name = get(format!("{api}/v1/nets/best")).await;
    assert!(
        best_page.contains(best_name["name"].as_str().unwrap()),
        "{best_page}"
    );
    for j in jobs.iter().filter(|j| !is_internal(j)) {
        let id = j["id"].as_str().unwrap();
        assert!(jobs_page.contains(&id[..8]), "job {id} missing");
    }

    // Datasets, with their masks.
    let datasets = page("/ui/datasets", "datasets");
    for d in get(format!("{api}/v1/datasets")).await["datasets"]
        .as_array()
        .unwrap()
    {
        assert!(datasets.contains(d["name"].as_str().unwrap()), "{d}");
    }
    assert!(datasets.contains("quiet"));

    // Training: follow the second run's link; its page plots both loss curves with one point
    // per metrics row.
    let runs = page("/ui/runs", "runs");
    let train_run = second["train_run"].as_str().unwrap();
    let link = format!("/ui/runs/{train_run}");
    assert!(links(&runs).contains(&link), "{runs}");
    let run_page = page(&link, "run");
    let metrics = get(format!("{api}/v1/runs/{train_run}")).await;
    let rows = metrics["metrics"].as_array().unwrap();
    assert!(!rows.is_empty());
    for (name, key) in [
        ("train loss", "train_loss"),
        ("validation loss", "val_loss"),
    ] {
        let drawn = polyline_points(&run_page, name);
        let expected = rows.iter().filter(|r| r[key].is_f64()).count();
        assert_eq!(drawn, expected, "{name} in {run_page}");
        assert!(expected > 0, "{name}");
    }
    // A warm-started run says where it started from; its checkpoint that became a net links
    // to it; the loss is drawn on a log axis.
    assert!(run_page.contains("Warm start from run"), "{run_page}");
    assert!(run_page.contains("loss (log)"), "{run_page}");
    assert!(
        run_page.contains(&format!("<a href=\"/ui/nets/{net2}\">")),
        "the checkpoint's net: {run_page}"
    );
    // Both runs overlaid: one validation and one training line each.
    let first_run = first["train_run"].as_str().unwrap();
    let compare = page(
        &format!("/ui/runs/compare?run={first_run}&run={train_run}"),
        "runs-compared",
    );
    for run in [first_run, train_run] {
        assert_eq!(
            compare.matches(&format!("data-name=\"{run}\"")).count(),
            2,
            "{compare}"
        );
    }

    // Nets: the second net's page shows its lineage back to the first; the nets page draws
    // the best net's Elo over its promotions.
    let nets = page("/ui/nets", "nets");
    assert!(nets.contains(net1) && nets.contains(net2));
    assert!(
        nets.contains("Elo history") && polyline_points(&nets, "best") >= 1,
        "{nets}"
    );
    // Filtered by what they were trained on: the second net's shuffle finds it alone; the
    // runs list filters by shuffle the same way, in the API too.
    let shuffle = second["shuffle"].as_str().unwrap();
    let by_shuffle = page(&format!("/ui/nets?dataset={shuffle}"), "nets-filtered");
    assert_eq!(
        by_shuffle.matches("<tr><td><a href=\"/ui/nets/").count(),
        1,
        "{by_shuffle}"
    );
    assert!(
        by_shuffle.contains(&format!("<tr><td><a href=\"/ui/nets/{net2}\">")),
        "{by_shuffle}"
    );
    let api_nets = get(format!("{api}/v1/nets?dataset={shuffle}")).await;
    assert_eq!(
        api_nets["nets"].as_array().unwrap().len(),
        1,
        "{api_nets:#}"
    );
    let none = get(format!("{api}/v1/nets?dataset=binpack/nothing")).await;
    assert!(none["nets"].as_array().unwrap().is_empty());
    let runs_of = get(format!("{api}/v1/runs?shuffle={shuffle}")).await;
    let ids: Vec<&str> = runs_of["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [second["train_run"].as_str().unwrap()], "{runs_of:#}");
    let net_page = page(&format!("/ui/nets/{net2}"), "net");
    assert!(
        net_page.contains(&format!(
            "{net2}</a> ← <a href=\"/ui/nets/{net1}\">{net1}</a>"
        )),
        "{net_page}"
    );

    // SPRT: the first run's test, its LLR drawn after every batch between both bounds.
    let sprt_list = page("/ui/sprt", "sprt-tests");
    let sprt_id = first["sprt"].as_str().unwrap();
    let link = format!("/ui/sprt/{sprt_id}");
    assert!(links(&sprt_list).contains(&link));
    let sprt = get(format!("{api}/v1/sprt/{sprt_id}")).await;
    let sprt_page = page(&link, "sprt");
    assert_eq!(
        polyline_points(&sprt_page, "LLR"),
        sprt["llr_history"].as_array().unwrap().len() + 1
    );
    assert_eq!(sprt_page.matches("class=\"level\"").count(), 2);
    assert!(sprt_page.contains("<span class=\"state accepted\">accepted</span>"));
    assert!(sprt_page.contains(&format!("LLR <b>{:.3}</b>", sprt["llr"].as_f64().unwrap())));
    // The gate asked for nodes: labelled as not on the clock in the API, the page and the list.
    let node_limited = "200 nodes a move (fixed nodes, not on the clock)";
    assert_eq!(sprt["conditions"], node_limited, "{sprt:#}");
    assert_eq!(sprt["on_the_clock"], false);
    for html in [&sprt_page, &sprt_list] {
        assert!(
            html.contains(r#"class="warn""#) && html.contains(node_limited),
            "{html}"
        );
    }
    // Per-engine integrity counts: lakefish's own engine on both sides, no faults.
    assert!(
        sprt_page.contains("<h3>Match integrity</h3>"),
        "{sprt_page}"
    );
    assert_eq!(
        sprt_page
            .matches("<td>lakefish</td><td class=\"num\">0</td>")
            .count(),
        2
    );

    // The conditions it was played under, and every counted game with its PGN.
    let spec = &sprt["spec"];
    let f = |v: &serde_json::Value| v.as_f64().unwrap();
    for row in [
        format!(
            "<tr><th>book</th><td>{}</td></tr>",
            spec["book"].as_str().unwrap()
        ),
        format!(
            "<tr><th>α / β</th><td>{} / {}</td></tr>",
            f(&spec["alpha"]),
            f(&spec["beta"])
        ),
        format!(
            "<tr><th>bounds</th><td>[{}, {}] Elo, {} model</td></tr>",
            f(&spec["elo0"]),
            f(&spec["elo1"]),
            spec["model"].as_str().unwrap()
        ),
    ] {
        assert!(sprt_page.contains(&row), "{row} not in {sprt_page}");
    }
    let game_link = format!("href=\"/ui/sprt/{sprt_id}/games/");
    let games = sprt["games"].as_u64().unwrap() as usize;
    assert!(games > 0);
    assert_eq!(sprt_page.matches(&game_link).count(), games, "{sprt_page}");
    let first_game = reqwest::get(format!("{api}/ui/sprt/{sprt_id}/games/1"))
        .await
        .unwrap();
    assert_eq!(first_game.status(), 200);
    assert_eq!(
        first_game.headers()["content-disposition"],
        format!("attachment; filename=\"{sprt_id}-game-1.pgn\"").as_str()
    );
    let text = first_game.text().await.unwrap();
    assert!(
        text.starts_with("[Event ") && text.matches("[Event ").count() == 1,
        "{text}"
    );
    // As fastchess writes it: start time and duration, each move's score, depth and time.
    for want in [
        "[GameStartTime \"",
        "[GameDuration \"",
        "[Termination \"",
        "s}",
    ] {
        assert!(text.contains(want), "{want} not in {text}");
    }
    let result = text
        .lines()
        .find_map(|l| l.strip_prefix("[Result \"")?.strip_suffix("\"]"))
        .unwrap();
    assert!(
        sprt_page.contains(&format!("<td>{result}</td>")),
        "{result} of game 1 not shown"
    );
    let all = reqwest::get(format!("{api}/v1/sprt/{sprt_id}/pgn"))
        .await
        .unwrap();
    assert_eq!(
        all.headers()["content-disposition"],
        format!("attachment; filename=\"{sprt_id}.pgn\"").as_str()
    );
    assert_eq!(all.text().await.unwrap().matches("[Event ").count(), games);
    // No game 0, none past the last, no game "x", no such test: a 404 that says so.
    for bad in [
        format!("{sprt_id}/games/0"),
        format!("{sprt_id}/games/{}", games + 1),
        format!("{sprt_id}/games/x"),
        "sprt-000000000000/games/1".to_string(),
    ] {
        let r = reqwest::get(format!("{api}/ui/sprt/{bad}")).await.unwrap();
        assert_eq!(r.status(), 404, "{bad}");
        assert!(r.text().await.unwrap().contains("no game"), "{bad}");
    }

    // Pipelines: both, with the runs and the scheduled one's failure.
    let pipelines = page("/ui/pipelines", "pipelines");
    assert!(
        pipelines.contains("Promotion gate: an SPRT played at <span class=\"warn\""),
        "{pipelines}"
    );
    for id in [&first["id"], &second["id"]] {
        assert!(pipelines.contains(id.as_str().unwrap()));
    }
    assert!(pipelines.contains("every2s") && pipelines.contains("no data"));
    // "Run now" posts the page's form (no tokens here: anyone may act, with the page's CSRF
    // value); the run it starts says who asked.
    let action = "action=\"/ui/pipelines/every2s/run\"";
    let csrf = pipelines
        .split(action)
        .nth(1)
        .and_then(|f| f.split("name=\"csrf\" value=\"").nth(1))
        .and_then(|v| v.split('"').next())
        .expect("a Run now form with its CSRF value")
        .to_string();
    let no_redirect = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = no_redirect
        .post(format!("{api}/ui/pipelines/every2s/run"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    // To the run it started (or joined: this pipeline also starts itself every 2 s).
    let to = r.headers()["location"].to_str().unwrap().to_string();
    let run_id = to.split("#run-").nth(1).expect("the run's anchor");
    let run = get(format!("{api}/v1/pipelines/every2s/runs/{run_id}")).await;
    assert_eq!(run["pipeline"], "every2s", "{run:#}");
    let trigger = run["trigger"].as_str().unwrap();
    assert!(
        trigger == "manual (anonymous)" || !trigger.starts_with("manual"),
        "{run:#}"
    );

    // A page that does not exist is an HTML 404 that says what was not found.
    let r = reqwest::get(format!("{api}/ui/nets/nn-000000000000.nnue"))
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert!(r.text().await.unwrap().contains("is not registered"));
}

/// How many points the chart's polyline named `name` has.
fn polyline_points(html: &str, name: &str) -> usize {
    let marker = format!("data-name=\"{name}\"");
    let rest = html
        .split(&marker)
        .nth(1)
        .unwrap_or_else(|| panic!("no series {name}"));
    let points = rest
        .split("points=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    points.split_whitespace().count()
}
