//! Bearer tokens with scopes, checked before any handler runs. Which scope a request needs
//! depends only on its method and path ([`needed_scope`]); tokens are compared by SHA-256.

use crate::api::AppState;
use crate::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use lakefish_schemas::config::Scope;

/// `None`: open to anyone (health checks). Reads need `read`; running a pipeline by hand needs
/// `admin`; anything else that changes state needs `submit`.
pub fn needed_scope(method: &Method, path: &str) -> Option<Scope> {
    if path == "/healthz" {
        return None;
    }
    if method == Method::GET || method == Method::HEAD {
        return Some(Scope::Read);
    }
    // Registered engines run on every worker: code execution, so admin only.
    if path.starts_with("/v1/pipelines/") || path.starts_with("/v1/engines") {
        return Some(Scope::Admin);
    }
    Some(Scope::Submit)
}

/// Routes that make workers run code (registering or removing an engine): without tokens
/// configured they answer only where the operator said so (`server.admin_without_tokens`).
pub fn runs_code_on_workers(method: &Method, path: &str) -> bool {
    !matches!(*method, Method::GET | Method::HEAD) && path.starts_with("/v1/engines")
}

pub async fn check(State(s): State<AppState>, req: Request, next: Next) -> Response {
    let auth = &s.config.auth;
    let Some(needed) = needed_scope(req.method(), req.uri().path()) else {
        return next.run(req).await;
    };
    if !auth.enabled()
        && runs_code_on_workers(req.method(), req.uri().path())
        && s.config.server.admin_without_tokens != Some(true)
    {
        return ApiError::Forbidden(format!(
            "{} {} changes which code workers run, so it needs an admin token: configure [[auth.tokens]] with the admin scope (lakefish token new), or set [server] admin_without_tokens = true on a machine no browser uses",
            req.method(),
            req.uri().path()
        ))
        .into_response();
    }
    if !auth.enabled() || (needed == Scope::Read && auth.anonymous_read) {
        return next.run(req).await;
    }
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let Some(presented) = presented else {
        return ApiError::Unauthorized(
            "this API needs a token: send `Authorization: Bearer <token>`".into(),
        )
        .into_response();
    };
    let Some(token) = auth.find(presented) else {
        return ApiError::Unauthorized("unknown token".into()).into_response();
    };
    if !token.allows(needed) {
        return ApiError::Forbidden(format!(
            "token {:?} lacks the {:?} scope needed for {} {}",
            token.name,
            needed.as_str(),
            req.method(),
            req.uri().path()
        ))
        .into_response();
    }
    next.run(req).await
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
    }
}
