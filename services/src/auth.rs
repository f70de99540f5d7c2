//! Bearer tokens with scopes, checked before any handler runs. Which scope a request needs
//! depends only on its method and path ([`needed_scope`]); tokens are compared by SHA-256.

use crate::api::AppState;
use crate::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use lakefish_schemas::config::Scope;

/// `None`: open to anyone (health checks, the login form). Reads need `read`; running a
/// pipeline by hand, promoting or rolling back the best net, and registering engines need
/// `admin`; anything else that changes state needs `submit`. Dashboard forms (`/ui/...`)
/// need what their API routes need.
pub fn needed_scope(method: &Method, path: &str) -> Option<Scope> {
    if path == "/healthz" || path == "/ui/login" || path == "/ui/logout" {
        return None;
    }
    if method == Method::GET || method == Method::HEAD {
        return Some(Scope::Read);
    }
    const ADMIN: [&str; 5] = [
        "/v1/pipelines/",
        "/v1/engines",
        "/v1/promotions",
        "/ui/pipelines/",
        "/ui/promotions",
    ];
    // Registered engines run on every worker: code execution, so admin only.
    if ADMIN.iter().any(|p| path.starts_with(p)) {
        return Some(Scope::Admin);
    }
    Some(Scope::Submit)
}

/// Routes that make workers run code (registering or removing an engine): without tokens
/// configured they answer only where the operator said so (`server.admin_without_tokens`).
pub fn runs_code_on_workers(method: &Method, path: &str) -> bool {
    !matches!(*method, Method::GET | Method::HEAD) && path.starts_with("/v1/engines")
}

/// A refusal: JSON for the API; a page for the dashboard, where a visitor without a token
/// who tries to read is sent to the login form.
fn refuse(req: &Request, e: ApiError) -> Response {
    let path = req.uri().path();
    if !crate::session::is_dashboard(path) {
        return e.into_response();
    }
    if matches!(e, ApiError::Unauthorized(_)) && req.method() == Method::GET {
        let next = req
            .uri()
            .path_and_query()
            .map_or(path, |p| p.as_str())
            .to_string();
        let query = serde_urlencoded::to_string([("next", next)]).unwrap_or_default();
        let to = format!("/ui/login?{query}");
        return axum::response::Redirect::to(&to).into_response();
    }
    crate::dashboard::refusal(path, e)
}

pub async fn check(State(s): State<AppState>, req: Request, next: Next) -> Response {
    let auth = &s.config.auth;
    let path = req.uri().path();
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|v| v.trim().to_string());
    // The login's cookie counts on dashboard routes only: the API stays header-only, so no
    // page elsewhere can make a browser call it with the user's rights.
    let cookie = crate::session::is_dashboard(path)
        .then(|| crate::session::cookie_token(req.headers()))
        .flatten();
    let presented = bearer.clone().or(cookie);
    let viewer = crate::session::Viewer::identify(auth, presented.as_deref());
    let Some(needed) = needed_scope(req.method(), path) else {
        return crate::session::with_viewer(viewer, next.run(req)).await;
    };
    if !auth.enabled()
        && runs_code_on_workers(req.method(), path)
        && s.config.server.admin_without_tokens != Some(true)
    {
        let e = ApiError::Forbidden(format!(
            "{} {} changes which code workers run, so it needs an admin token: configure [[auth.tokens]] with the admin scope (lakefish token new), or set [server] admin_without_tokens = true on a machine no browser uses",
            req.method(),
            path
        ));
        return crate::session::render_as(viewer, || refuse(&req, e));
    }
    if !auth.enabled() || (needed == Scope::Read && auth.anonymous_read) {
        return crate::session::with_viewer(viewer, next.run(req)).await;
    }
    let Some(presented) = presented else {
        let how = if crate::session::is_dashboard(path) {
            "this page needs a token: log in at /ui/login"
        } else {
            "this API needs a token: send `Authorization: Bearer <token>`"
        };
        return crate::session::render_as(viewer, || {
            refuse(&req, ApiError::Unauthorized(how.into()))
        });
    };
    let Some(token) = auth.find(&presented) else {
        let what = if bearer.is_some() {
            "unknown token"
        } else {
            "the token you logged in with is no longer configured: log in again at /ui/login"
        };
        return crate::session::render_as(viewer, || {
            refuse(&req, ApiError::Unauthorized(what.into()))
        });
    };
    if !token.allows(needed) {
        let e = ApiError::Forbidden(format!(
            "token {:?} lacks the {:?} scope needed for {} {}",
            token.name,
            needed.as_str(),
            req.method(),
            path
        ));
        return crate::session::render_as(viewer, || refuse(&req, e));
    }
    crate::session::with_viewer(viewer, next.run(req)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_by_route() {
        assert_eq!(needed_scope(&Method::GET, "/healthz"), None);
        assert_eq!(needed_scope(&Method::GET, "/v1/jobs"), Some(Scope::Read));
        assert_eq!(needed_scope(&Method::GET, "/metrics"), Some(Scope::Read));
        assert_eq!(needed_scope(&Method::POST, "/v1/jobs"), Some(Scope::Submit));
        assert_eq!(
            needed_scope(&Method::PUT, "/v1/raw/binpack/x"),
            Some(Scope::Submit)
        );
        assert_eq!(
            needed_scope(&Method::POST, "/v1/pipelines/nightly/run"),
            Some(Scope::Admin)
        );
        assert_eq!(
            needed_scope(&Method::POST, "/ui/promotions"),
            Some(Scope::Admin)
        );
        assert_eq!(
            needed_scope(&Method::POST, "/ui/sprt/x/stop"),
            Some(Scope::Submit)
        );
        assert_eq!(needed_scope(&Method::POST, "/ui/login"), None);
    }
}
