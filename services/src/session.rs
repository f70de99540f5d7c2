//! Who is looking at the dashboard, and the checks its forms pass.
//!
//! The API takes only `Authorization: Bearer`; dashboard routes (`/` and `/ui/...`) also take
//! the `lakefish_token` cookie that `/ui/login` sets from a token (HttpOnly, SameSite=Strict),
//! so a browser can act without a header. A cookie rides along with any request the browser
//! makes, so every form post carries a CSRF value derived from the cookie's token (or, without
//! tokens configured, from a secret of this process) that a page on another origin cannot
//! read; the host and origin check in [`crate::guard`] refuses cross-site posts before that.

use crate::api::ApiError;
use lakefish_schemas::config::{AuthConfig, Scope};
use std::io::Read;

/// The cookie the login sets.
pub const COOKIE: &str = "lakefish_token";
/// The hidden form field that carries the CSRF value.
pub const CSRF_FIELD: &str = "csrf";

/// The one looking: a token's name and scopes, or an anonymous visitor.
#[derive(Clone, Debug)]
pub struct Viewer {
    /// The token's name, or `anonymous`.
    pub name: String,
    scopes: Vec<Scope>,
    /// Tokens are configured (without them everyone may act, as the API allows).
    auth_enabled: bool,
    /// The presented token's SHA-256 (the CSRF value is derived from it).
    token_sha256: Option<String>,
}

impl Viewer {
    /// Who presents `token` (or nothing) to a server with `auth`.
    pub fn identify(auth: &AuthConfig, token: Option<&str>) -> Viewer {
        let found = token.and_then(|t| auth.find(t));
        match found {
            Some(t) => Viewer {
                name: t.name.clone(),
                scopes: t.scopes.clone(),
                auth_enabled: true,
                token_sha256: Some(t.sha256.clone()),
            },
            None => Viewer {
                name: "anonymous".into(),
                scopes: Vec::new(),
                auth_enabled: auth.enabled(),
                token_sha256: None,
            },
        }
    }

    /// Whether this viewer may do what needs `scope` (everyone may without tokens).
    pub fn can(&self, scope: Scope) -> bool {
        !self.auth_enabled || self.scopes.contains(&scope) || self.scopes.contains(&Scope::Admin)
    }

    pub fn logged_in(&self) -> bool {
        self.token_sha256.is_some()
    }

    pub fn auth_enabled(&self) -> bool {
        self.auth_enabled
    }

    /// What the viewer's forms must carry: a hash of their token (which another origin
    /// cannot read), or of this process's secret where no token is in play.
    pub fn csrf(&self) -> String {
        let basis = self
            .token_sha256
            .clone()
            .unwrap_or_else(|| process_secret().to_string());
        lakefish_schemas::sha256_hex(format!("lakefish-csrf\0{basis}").as_bytes())[..32].to_string()
    }

    /// The hidden input every form of this viewer's carries.
    pub fn csrf_input(&self) -> String {
        format!(
            r#"<input type="hidden" name="{CSRF_FIELD}" value="{}">"#,
            self.csrf()
        )
    }

    /// Refuses a form whose CSRF value is not this viewer's.
    pub fn check_csrf(&self, presented: Option<&str>) -> Result<(), ApiError> {
        match presented {
            Some(v) if same(v.as_bytes(), self.csrf().as_bytes()) => Ok(()),
            Some(_) => Err(ApiError::Forbidden(
                "the form's CSRF value is not this session's: the page is older than your login or the server's restart — reload it and submit again".into(),
            )),
            None => Err(ApiError::Forbidden(
                "the form carries no CSRF value: post it from the dashboard's own pages".into(),
            )),
        }
    }
}

/// Equal bytes, compared in a time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

tokio::task_local! {
    static VIEWER: Viewer;
}

/// Renders `f` (a refusal's page) with `viewer` as the one looking.
pub fn render_as<R>(viewer: Viewer, f: impl FnOnce() -> R) -> R {
    VIEWER.sync_scope(viewer, f)
}

/// Runs `f` (a request's handling) with `viewer` as the one looking.
pub async fn with_viewer<F: std::future::Future>(viewer: Viewer, f: F) -> F::Output {
    VIEWER.scope(viewer, f).await
}

/// The viewer of the request being handled (anonymous outside one).
pub fn viewer() -> Viewer {
    VIEWER.try_with(Clone::clone).unwrap_or_else(|_| Viewer {
        name: "anonymous".into(),
        scopes: Vec::new(),
        auth_enabled: true,
        token_sha256: None,
    })
}

/// Random bytes drawn once per process: the CSRF basis of viewers without a token.
fn process_secret() -> &'static str {
    static SECRET: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SECRET.get_or_init(|| {
        let mut bytes = [0u8; 32];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut bytes))
            .expect("/dev/urandom");
        lakefish_schemas::sha256_hex(&bytes)
    })
}

/// The token in a request's `Cookie` header, if the login set one.
pub fn cookie_token(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// `Set-Cookie` for a login (`Some(token)`) or a logout (`None`); `secure` when the browser
/// reached the server over https (a proxy's `X-Forwarded-Proto`).
pub fn set_cookie(token: Option<&str>, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    match token {
        Some(t) => {
            format!("{COOKIE}={t}; Path=/; HttpOnly; SameSite=Strict; Max-Age=2592000{secure}")
        }
        None => format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{secure}"),
    }
}

/// Dashboard routes: the ones a cookie counts on.
pub fn is_dashboard(path: &str) -> bool {
    path == "/" || path == "/ui" || path.starts_with("/ui/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use lakefish_schemas::config::TokenConfig;

    fn auth() -> AuthConfig {
        AuthConfig {
            anonymous_read: true,
            tokens: vec![TokenConfig {
                name: "ana".into(),
                sha256: lakefish_schemas::config::token_sha256("secret-1"),
                scopes: vec![Scope::Read, Scope::Submit],
            }],
        }
    }

    #[test]
    fn a_viewer_is_who_their_token_says() {
        let a = auth();
        let v = Viewer::identify(&a, Some("secret-1"));
        assert_eq!(v.name, "ana");
        assert!(v.can(Scope::Submit) && !v.can(Scope::Admin));
        let nobody = Viewer::identify(&a, Some("wrong"));
        assert!(!nobody.can(Scope::Read) && !nobody.logged_in());
        let open = Viewer::identify(&AuthConfig::default(), None);
        assert!(open.can(Scope::Admin));
    }

    #[test]
    fn csrf_values_differ_by_token_and_are_checked() {
        let a = auth();
        let v = Viewer::identify(&a, Some("secret-1"));
        let anon = Viewer::identify(&a, None);
        assert_ne!(v.csrf(), anon.csrf());
        assert!(v.check_csrf(Some(&v.csrf())).is_ok());
        assert!(v.check_csrf(Some(&anon.csrf())).is_err());
        assert!(v.check_csrf(None).is_err());
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut h = axum::http::HeaderMap::new();
        h.insert(
            axum::http::header::COOKIE,
            "a=1; lakefish_token=tok; b=2".parse().unwrap(),
        );
        assert_eq!(cookie_token(&h).as_deref(), Some("tok"));
        assert!(is_dashboard("/ui/jobs") && is_dashboard("/") && !is_dashboard("/v1/jobs"));
        assert!(set_cookie(Some("t"), true).ends_with("; Secure"));
        assert!(!set_cookie(Some("t"), false).contains("Secure"));
        assert!(same(b"abc", b"abc") && !same(b"abc", b"abd") && !same(b"abc", b"ab"));
        assert!(!is_dashboard("/uix"));
    }
}
