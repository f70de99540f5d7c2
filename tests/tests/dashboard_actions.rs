//! The dashboard as people act from it, in headless Chromium: log in with a token, create an
//! SPRT from the form and watch it finish, stop another, cancel a job, promote a net and roll
//! `best` back — each with and without the scope it needs — and a form posted from another
//! site refused. Screenshots go to `target/dashboard-screenshots/actions-*.png`.

use lakefish_tests::cdp::Chrome;
use lakefish_tests::*;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

const TOKENS: [(&str, &str, &str); 3] = [
    ("reader", "reader-token-0001", r#"["read"]"#),
    ("tester", "tester-token-0002", r#"["read", "submit"]"#),
    ("boss", "boss-token-0003", r#"["admin"]"#),
];

const BOOK: &str = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq -\n\
rnbqkbnr/pppppppp/8/8/3P4/8/PPP1PPPP/RNBQKBNR b KQkq -\n";

fn config() -> String {
    let mut c = String::from("version = 1\n[auth]\nanonymous_read = true\n");
    for (name, token, scopes) in TOKENS {
        c.push_str(&format!(
            "[[auth.tokens]]\nname = \"{name}\"\nsha256 = \"{}\"\nscopes = {scopes}\n",
            lakefish_schemas::config::token_sha256(token)
        ));
    }
    c
}

/// A bullet `1_simple` net (768 → 128 × 2 → 1) with small weights drawn from `seed`, as the
/// bytes bullet saves, imported into the lake: a registered net without a training run.
fn import_net(dir: &Path, seed: u64) -> String {
    let n = 768 * 128 + 128 + 2 * 128 + 1;
    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut bytes = Vec::with_capacity(2 * n + 64);
    for _ in 0..n {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        bytes.extend_from_slice(&(((rng % 121) as i16) - 60).to_le_bytes());
    }
    let pad = (64 - bytes.len() % 64) % 64;
    bytes.extend(b"bullet".iter().cycle().take(pad));
    let file = dir.join(format!("net-{seed}.bin"));
    std::fs::write(&file, bytes).unwrap();
    let out = std::process::Command::new(lakefish_bin())
        .current_dir(dir)
        .args(["--lake", "lake", "nets", "import"])
        .arg(&file)
        .args(["--layout", "bullet-1-simple", "--spec", "bullet-1-simple"])
        .output()
        .unwrap();
    assert_success(&out);
    String::from_utf8(out.stdout)
        .unwrap()
        .split('\t')
        .next()
        .unwrap()
        .to_string()
}

struct Api {
    url: String,
    rt: tokio::runtime::Runtime,
    http: reqwest::Client,
}

impl Api {
    fn get(&self, path: &str) -> Value {
        self.rt.block_on(async {
            let r = self
                .http
                .get(format!("{}{path}", self.url))
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success(), "GET {path}: {}", r.status());
            r.json().await.unwrap()
        })
    }

    /// A request with a token, as a script would send it: its status and body.
    fn send(&self, method: &str, path: &str, token: &str, body: Option<Value>) -> (u16, Value) {
        self.rt.block_on(async {
            let mut req = self
                .http
                .request(method.parse().unwrap(), format!("{}{path}", self.url))
                .bearer_auth(token);
            if let Some(b) = body {
                req = req.json(&b);
            }
            let r = req.send().await.unwrap();
            let status = r.status().as_u16();
            (status, r.json().await.unwrap_or(Value::Null))
        })
    }

    fn wait_sprt(&self, id: &str, until: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let st = self.get(&format!("/v1/sprt/{id}"));
            if until(&st) {
                return st;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "sprt {id}: {st:#}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// Serves one page at `http://localhost:PORT/` (another site than `127.0.0.1`): a form that
/// posts to the dashboard, as a hostile page would.
fn hostile_site(html: String) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            use std::io::{Read, Write};
            let mut s = stream;
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{html}",
                html.len()
            );
        }
    });
    format!("http://localhost:{port}/")
}

#[test]
fn people_act_from_the_dashboard_with_the_scopes_their_tokens_give() {
    let dir = tempfile::tempdir().unwrap();
    let (_serve, url) = serve_embedded(dir.path(), Some(&config()));
    let api = Api {
        url: url.clone(),
        rt: tokio::runtime::Runtime::new().unwrap(),
        http: reqwest::Client::new(),
    };
    let (tester, boss) = (TOKENS[1].1, TOKENS[2].1);
    let net_a = import_net(dir.path(), 1);
    let net_b = import_net(dir.path(), 2);
    let book = api.rt.block_on(async {
        reqwest::Client::new()
            .put(format!("{url}/v1/books/book.epd"))
            .bearer_auth(tester)
            .body(BOOK)
            .send()
            .await
            .unwrap()
            .status()
    });
    assert!(book.is_success(), "{book}");
    let shots = workspace_root().join("target/dashboard-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let mut c = Chrome::launch();
    let shot =
        |c: &mut Chrome, name: &str| c.screenshot(&shots.join(format!("actions-{name}.png")));

    // Anonymous: reads, but no buttons, and the form asks for a login.
    c.goto(&format!("{url}/ui/nets"));
    let html = c.html();
    assert!(
        html.contains(&net_a) && !html.contains("Make best"),
        "{html}"
    );
    assert!(html.contains("Log in"), "{html}");
    c.goto(&format!("{url}/ui/sprt/new"));
    assert!(c.html().contains("needs a token with the submit scope"));

    // A wrong token is refused on the login form; the reader sees no buttons either.
    c.goto(&format!("{url}/ui/login?next=/ui/nets"));
    c.submit("form.stack", &[("token", "not-a-token")]);
    assert!(c.html().contains("not one this server knows"));
    c.submit("form.stack", &[("token", TOKENS[0].1)]);
    assert!(c.url().ends_with("/ui/nets"), "{}", c.url());
    let html = c.html();
    assert!(
        html.contains("reader") && html.contains("Log out"),
        "{html}"
    );
    assert!(!html.contains("Make best"), "{html}");

    // The tester creates an SPRT from the form and watches it finish.
    c.goto(&format!("{url}/ui/login?next=/ui/sprt/new"));
    c.submit("form.act", &[]); // log out first
    c.goto(&format!("{url}/ui/login?next=/ui/sprt/new"));
    c.submit("form.stack", &[("token", tester)]);
    assert!(c.url().ends_with("/ui/sprt/new"), "{}", c.url());
    shot(&mut c, "sprt-new");
    // A value the API refuses is refused here, naming the field; nothing is queued.
    c.submit(
        "form.stack",
        &[
            ("new", &net_a),
            ("base", &net_b),
            ("nodes", "40"),
            ("elo1", "abc"),
        ],
    );
    assert!(c.html().contains("elo1"), "{}", c.html());
    assert_eq!(api.get("/v1/sprt")["tests"].as_array().unwrap().len(), 0);
    c.goto(&format!("{url}/ui/sprt/new"));
    c.submit(
        "form.stack",
        &[
            ("new", &net_a),
            ("base", &net_b),
            ("nodes", "40"),
            ("elo0", "-1500"),
            ("elo1", "-1000"),
            ("model", "logistic"),
            ("max_pairs", "4"),
            ("batch_pairs", "2"),
        ],
    );
    let page = c.url();
    let id = page.rsplit('/').next().unwrap().to_string();
    assert!(id.starts_with("sprt-"), "{page}");
    let done = api.wait_sprt(&id, |s| s["state"] != "running");
    assert!(done["finished"].is_string(), "{done:#}");
    c.goto(&page);
    let html = c.html();
    for want in [
        "40 nodes a move",
        "lake:raw/books/book.epd",
        "[-1500, -1000] Elo, logistic model",
        "<th>duration</th>",
        "/games/1\"",
    ] {
        assert!(
            html.contains(want),
            "{want} missing from the test's page: {html}"
        );
    }
    assert!(!html.contains("Stop this test"), "{html}");
    shot(&mut c, "sprt-finished");

    // A long test, stopped from its page: the games so far are its result, with who.
    c.goto(&format!("{url}/ui/sprt/new"));
    c.submit(
        "form.stack",
        &[
            ("new", &net_b),
            ("base", &net_a),
            ("nodes", "40"),
            ("max_pairs", "20000"),
            ("batch_pairs", "1"),
        ],
    );
    let long_page = c.url();
    let long = long_page.rsplit('/').next().unwrap().to_string();
    api.wait_sprt(&long, |s| s["games"].as_u64() >= Some(2));
    c.goto(&long_page);
    assert!(c.html().contains("Stop this test"));
    c.submit("form.act[action$=\"/stop\"]", &[]);
    let stopped = api.get(&format!("/v1/sprt/{long}"));
    assert_eq!(stopped["state"], "stopped", "{stopped:#}");
    assert!(stopped["games"].as_u64() >= Some(2), "{stopped:#}");
    assert_eq!(stopped["stopped"]["by"], "tester");
    assert!(c.html().contains("stopped by"), "{}", c.html());
    // Batches still in flight count nothing more, and a second stop is a conflict.
    std::thread::sleep(Duration::from_millis(1500));
    let later = api.get(&format!("/v1/sprt/{long}"));
    assert_eq!(
        (later["state"].clone(), later["games"].clone()),
        (stopped["state"].clone(), stopped["games"].clone())
    );
    let (status, _) = api.send("POST", &format!("/v1/sprt/{long}/stop"), tester, None);
    assert_eq!(status, 409);
    shot(&mut c, "sprt-stopped");

    // A job cancelled from its page: a self-play job far too long to finish here.
    let (status, body) = api.send(
        "POST",
        "/v1/jobs",
        tester,
        Some(json!({"kind": "datagen", "spec": {
            "net": "classical", "dataset": "never", "games": 100000, "nodes": 2000
        }})),
    );
    assert_eq!(status, 202, "{body}");
    let job = body["id"].as_str().unwrap().to_string();
    // Running, so that it is told at its worker's beat and stops between games.
    let start = Instant::now();
    while api.get(&format!("/v1/jobs/{job}"))["state"] != "running" {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the job never started"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    c.goto(&format!("{url}/ui/jobs/{job}"));
    c.submit("form.act[action$=\"/cancel\"]", &[]);
    let start = Instant::now();
    let rec = loop {
        let rec = api.get(&format!("/v1/jobs/{job}"));
        if rec["state"] == "cancelled" {
            break rec;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{rec:#}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(rec["cancel"]["by"], "tester", "{rec:#}");
    assert_eq!(
        rec["attempts"], 1,
        "it ran, and was not started again: {rec:#}"
    );
    c.goto(&format!("{url}/ui/jobs/{job}"));
    assert!(c.html().contains("cancelled by tester"), "{}", c.html());
    shot(&mut c, "job-cancelled");

    // A gauntlet queued from its form against Stockfish (registered by an admin): one level,
    // played by a worker, its test linked from the job's page.
    let (status, body) = api.send(
        "POST",
        "/v1/engines",
        boss,
        Some(
            json!({"name": "stockfish", "command": "/usr/games/stockfish",
            "options": {"Threads": "1", "Hash": "8"},
            "allow": {"UCI_LimitStrength": {}, "UCI_Elo": {}}}),
        ),
    );
    assert_eq!(status, 201, "{body}");
    c.goto(&format!("{url}/ui/gauntlet/new"));
    c.submit(
        "form.stack",
        &[
            ("engine", "classical"),
            ("levels", "1350"),
            ("nodes", "200"),
            ("pairs", "1"),
        ],
    );
    let job_page = c.url();
    assert!(job_page.contains("/ui/jobs/"), "{job_page}: {}", c.html());
    let gauntlet = job_page.rsplit('/').next().unwrap().to_string();
    let start = Instant::now();
    let rec = loop {
        let rec = api.get(&format!("/v1/jobs/{gauntlet}"));
        if rec["state"] != "queued" && rec["state"] != "running" {
            break rec;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{rec:#}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(rec["state"], "succeeded", "{rec:#}");
    assert_eq!(rec["result"]["games"], 2, "{rec:#}");
    c.goto(&job_page);
    assert!(
        c.html().contains("UCI_Elo 1350: <a href=\"/ui/sprt/sprt-"),
        "{}",
        c.html()
    );
    shot(&mut c, "gauntlet-done");

    // The tests list filters by state (a GET form) and pages with the filter kept.
    c.goto(&format!("{url}/ui/sprt"));
    c.submit("form.filter", &[("state", "stopped")]);
    let html = c.html();
    assert!(c.url().contains("state=stopped"), "{}", c.url());
    assert!(html.contains(&long) && !html.contains(&id), "{html}");
    c.goto(&format!("{url}/ui/sprt?limit=1"));
    let first = c.html();
    let next = first
        .split("class=\"paging\"><a href=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("a next page")
        .replace("&amp;", "&");
    c.goto(&format!("{url}{next}"));
    let second = c.html();
    let shown = |h: &str| h.matches("<a href=\"/ui/sprt/sprt-").count();
    assert_eq!((shown(&first), shown(&second)), (1, 1));
    assert_ne!(
        first.split("/ui/sprt/sprt-").nth(1).map(|s| &s[..12]),
        second.split("/ui/sprt/sprt-").nth(1).map(|s| &s[..12])
    );
    shot(&mut c, "sprt-list-filtered");

    // Without the admin scope, a promotion posted with the tester's own CSRF value is refused.
    let csrf = c.eval("document.querySelector('input[name=csrf]') && document.querySelector('input[name=csrf]').value");
    assert!(csrf.is_null(), "a finished job's page has no form");
    c.goto(&format!("{url}/ui/sprt/new"));
    let csrf = c.eval("document.querySelector('input[name=csrf]').value");
    let forged = format!(
        "var f=document.createElement('form');f.method='post';f.action='/ui/promotions';f.className='forged';\
         f.innerHTML='<input name=name value={net_a}><input name=csrf value={}>';document.body.appendChild(f)",
        csrf.as_str().unwrap()
    );
    c.eval(&forged);
    c.submit("form.forged", &[]);
    let html = c.html();
    assert!(
        html.contains("lacks the \"admin\" scope") || html.contains("lacks the admin scope"),
        "{html}"
    );
    assert!(
        api.get("/v1/promotions")["promotions"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // The boss promotes A, then B, then rolls back to A, all from the nets page.
    c.goto(&format!("{url}/ui/login?next=/ui/nets"));
    c.submit("form.act", &[]);
    c.goto(&format!("{url}/ui/login?next=/ui/nets"));
    c.submit("form.stack", &[("token", boss)]);
    for net in [&net_a, &net_b] {
        let sel = format!("form.act:has(input[value=\"{net}\"])");
        c.submit(&sel, &[]);
        assert!(c.url().ends_with("/ui/nets"), "{}", c.url());
    }
    assert_eq!(api.get("/v1/nets/best")["name"], net_b.as_str());
    c.submit("table.promotions form.act", &[]);
    let history = api.get("/v1/promotions")["promotions"].clone();
    let names: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, [net_a.as_str(), net_b.as_str(), net_a.as_str()]);
    assert_eq!(history[0]["by"], "boss");
    assert_eq!(history[0]["previous"], net_b.as_str());
    assert!(history[0]["reason"].as_str().unwrap().contains("roll back"));
    assert_eq!(api.get("/v1/nets/best")["name"], net_a.as_str());
    shot(&mut c, "nets-promotions");

    // A page on another site posts the same form with the boss's CSRF value: refused by
    // its origin before the cookie or the value count, and nothing changes.
    c.goto(&format!("{url}/ui/nets"));
    let csrf = c.eval("document.querySelector('input[name=csrf]').value");
    let evil = hostile_site(format!(
        r#"<html><body><form method="post" action="{url}/ui/promotions"><input name="name" value="{net_b}"><input name="csrf" value="{}"><button>win a prize</button></form></body></html>"#,
        csrf.as_str().unwrap()
    ));
    c.goto(&evil);
    c.submit("form", &[]);
    let html = c.html();
    assert!(
        html.contains("must come from this server's own origin"),
        "{html}"
    );
    assert_eq!(api.get("/v1/nets/best")["name"], net_a.as_str());
    assert_eq!(
        api.get("/v1/promotions")["promotions"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
}
