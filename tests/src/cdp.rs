//! Headless Chromium driven over the Chrome DevTools Protocol: one browser, one tab, kept
//! across steps so cookies (a dashboard login) carry from page to page. Enough to load a
//! page, fill a form, submit it as a user would (the browser sends the request, with its
//! Origin and cookies), read the page and take a screenshot.

use serde_json::{Value, json};
use std::collections::VecDeque;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

/// How long one page may take to load.
const LOAD_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Chrome {
    child: Child,
    ws: WebSocket<MaybeTlsStream<TcpStream>>,
    session: String,
    next_id: u64,
    events: VecDeque<Value>,
    _profile: tempfile::TempDir,
}

impl Chrome {
    /// Starts Chromium with a fresh profile and opens one tab.
    pub fn launch() -> Chrome {
        let profile = tempfile::tempdir().unwrap();
        let child = Command::new(crate::chromium())
            .args(crate::CHROMIUM_FLAGS)
            .arg("--remote-debugging-port=0")
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromium");
        // Chromium writes the port it listens on, and the browser's endpoint, here.
        let port_file = profile.path().join("DevToolsActivePort");
        let start = Instant::now();
        let text = loop {
            if let Ok(t) = std::fs::read_to_string(&port_file)
                && t.lines().count() >= 2
            {
                break t;
            }
            assert!(
                start.elapsed() < LOAD_TIMEOUT,
                "chromium did not open its DevTools port"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut lines = text.lines();
        let (port, path) = (lines.next().unwrap(), lines.next().unwrap());
        let (ws, _) = tungstenite::connect(format!("ws://127.0.0.1:{port}{path}"))
            .expect("connect to chromium's DevTools");
        if let MaybeTlsStream::Plain(s) = ws.get_ref() {
            s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        }
        let mut c = Chrome {
            child,
            ws,
            session: String::new(),
            next_id: 0,
            events: VecDeque::new(),
            _profile: profile,
        };
        let target = c.browser_call("Target.createTarget", json!({"url": "about:blank"}));
        let attached = c.browser_call(
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        );
        c.session = attached["sessionId"].as_str().unwrap().to_string();
        c.call("Page.enable", json!({}));
        c.call("Runtime.enable", json!({}));
        c
    }

    fn send(&mut self, method: &str, params: Value, session: bool) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if session {
            msg["sessionId"] = self.session.clone().into();
        }
        self.ws.send(Message::text(msg.to_string())).unwrap();
        let start = Instant::now();
        loop {
            let v = self.read().unwrap_or_else(|| {
                assert!(
                    start.elapsed() < LOAD_TIMEOUT,
                    "{method}: no answer from chromium"
                );
                Value::Null
            });
            if v.is_null() {
                continue;
            }
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
            if v.get("method").is_some() {
                self.events.push_back(v);
            }
        }
    }

    /// One message, or `None` after a second of silence.
    fn read(&mut self) -> Option<Value> {
        match self.ws.read() {
            Ok(Message::Text(t)) => Some(serde_json::from_str(t.as_str()).unwrap()),
            Ok(_) => Some(Value::Null),
            Err(tungstenite::Error::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                None
            }
            Err(e) => panic!("chromium's DevTools connection: {e}"),
        }
    }

    fn browser_call(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params, false)
    }

    /// A command to the tab.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params, true)
    }

    /// Waits for the tab's next `Page.loadEventFired`.
    fn wait_load(&mut self) {
        let start = Instant::now();
        loop {
            while let Some(e) = self.events.pop_front() {
                if e["method"] == "Page.loadEventFired" {
                    return;
                }
            }
            assert!(start.elapsed() < LOAD_TIMEOUT, "the page did not load");
            if let Some(v) = self.read()
                && v.get("method").is_some()
            {
                self.events.push_back(v);
            }
        }
    }

    /// Loads `url` and waits until it has loaded.
    pub fn goto(&mut self, url: &str) {
        self.events.clear();
        self.call("Page.navigate", json!({"url": url}));
        self.wait_load();
    }

    /// The value of a JavaScript expression in the page (the test's hands: the pages
    /// themselves run none).
    pub fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true}),
        );
        assert!(
            r.get("exceptionDetails").is_none(),
            "{expression}: {}",
            r["exceptionDetails"]
        );
        r["result"]["value"].clone()
    }

    /// Sets form fields (`name` → value) of the form `form` (a CSS selector) and submits it
    /// as a click on its button would; waits for the page the answer leads to.
    pub fn submit(&mut self, form: &str, fields: &[(&str, &str)]) {
        let sel = serde_json::to_string(form).unwrap();
        let found = self.eval(&format!("document.querySelector({sel}) !== null"));
        assert_eq!(found, true, "no form {form} on {}", self.url());
        for (name, value) in fields {
            let js = format!(
                "document.querySelector({sel}).elements[{}].value = {}",
                serde_json::to_string(name).unwrap(),
                serde_json::to_string(value).unwrap()
            );
            self.eval(&js);
        }
        self.events.clear();
        self.eval(&format!("document.querySelector({sel}).requestSubmit()"));
        self.wait_load();
    }

    /// The page as HTML, now.
    pub fn html(&mut self) -> String {
        self.eval("document.documentElement.outerHTML")
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The page's address, now.
    pub fn url(&mut self) -> String {
        self.eval("location.href")
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// A PNG of the page as shown.
    pub fn screenshot(&mut self, path: &Path) {
        use base64::Engine;
        let r = self.call("Page.captureScreenshot", json!({"format": "png"}));
        let png = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap())
            .unwrap();
        assert!(png.starts_with(b"\x89PNG") && png.len() > 5_000);
        std::fs::write(path, png).unwrap();
    }
}

impl Drop for Chrome {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
