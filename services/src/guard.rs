//! What a web browser can make this API do: nothing its operator did not mean. A page on
//! another origin can send "simple" requests (form posts, `text/plain` bodies) to a loopback
//! server without asking, and a DNS-rebinding page reaches it under a name of its own. So
//! every request must name a host the server answers to, state-changing requests from
//! another origin are refused, and JSON routes take only `application/json` bodies (which a
//! browser will not send across origins without a preflight this server never grants).

use crate::api::AppState;
use crate::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The host part of a `Host` header or an origin's authority, lower-cased, without port.
fn host_of(authority: &str) -> &str {
    let a = authority.trim();
    if let Some(rest) = a.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("");
    }
    match a.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => a,
    }
}

/// This machine's host name, read once.
fn own_hostname() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        std::fs::read_to_string("/etc/hostname")
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase()
    })
}

/// A host the server answers to: any IP address (a rebinding page cannot arrive under one
/// it does not own), `localhost`, this machine's name, and `[server] allowed_hosts`.
pub fn host_allowed(host_header: &str, allowed: &[String]) -> bool {
    let host = host_of(host_header).to_ascii_lowercase();
    let host = host.trim_end_matches('.');
    if host.parse::<std::net::IpAddr>().is_ok() || host == "localhost" {
        return true;
    }
    if !own_hostname().is_empty() && host == own_hostname() {
        return true;
    }
    allowed
        .iter()
        .any(|a| a.trim().trim_end_matches('.').eq_ignore_ascii_case(host))
}

/// A request from another origin than the server's own, by `Origin` (or `Sec-Fetch-Site`,
/// which browsers send even where they leave `Origin` out).
fn cross_origin(headers: &HeaderMap) -> Option<String> {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok())
        && matches!(site, "cross-site" | "same-site")
    {
        return Some(format!("Sec-Fetch-Site: {site}"));
    }
    let origin = headers.get(header::ORIGIN)?;
    let Ok(origin) = origin.to_str() else {
        return Some("an Origin that is not text".into());
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let authority = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    match authority {
        Some(a) if !host.is_empty() && a.eq_ignore_ascii_case(host) => None,
        _ => Some(format!("Origin {:?}", crate::guard::clip(origin))),
    }
}

/// At most 80 characters of something a client sent, for an error message.
pub(crate) fn clip(s: &str) -> String {
    s.chars().take(80).collect()
}

/// Runs before the token check, on every route.
pub async fn check(State(s): State<AppState>, req: Request, next: Next) -> Response {
    let allowed = s.config.server.allowed_hosts.as_deref().unwrap_or(&[]);
    // A request without Host is no browser's (they always send one). `/healthz` answers any
    // name: load balancers and orchestrators probe it by theirs, and it changes nothing.
    let probe = req.uri().path() == "/healthz";
    if let Some(host) = req.headers().get(header::HOST)
        && !probe
    {
        let ok = host.to_str().is_ok_and(|h| host_allowed(h, allowed));
        if !ok {
            let e = ApiError::Forbidden(format!(
                "Host {:?} is not a name this server answers to (IP addresses, localhost, this machine's name, and [server] allowed_hosts are)",
                clip(&String::from_utf8_lossy(host.as_bytes()))
            ));
            return crate::dashboard::refusal(req.uri().path(), e);
        }
    }
    let changes_state = !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if changes_state && let Some(what) = cross_origin(req.headers()) {
        let e = ApiError::Forbidden(format!(
            "{what}: requests that change state must come from this server's own origin, or from a client that is not a browser"
        ));
        return crate::dashboard::refusal(req.uri().path(), e);
    }
    next.run(req).await
}

/// How long a JSON body (at most `server.max_body_bytes`) may take to arrive whole: a client
/// dripping a byte just inside the stall timeout cannot hold a connection for hours.
pub const JSON_BODY_DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);

/// On routes whose body is JSON: anything but `application/json` is a 415; the body is read
/// here, whole, within [`JSON_BODY_DEADLINE`] and the size limit (413 above it).
pub async fn require_json(State(s): State<AppState>, req: Request, next: Next) -> Response {
    let ct = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let essence = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let json = essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"));
    if json {
        let max = s.max_body();
        let (parts, body) = req.into_parts();
        let read = tokio::time::timeout(JSON_BODY_DEADLINE, axum::body::to_bytes(body, max));
        return match read.await {
            Ok(Ok(bytes)) => {
                next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                    .await
            }
            Ok(Err(e)) => {
                let too_large = std::error::Error::source(&e)
                    .is_some_and(|c| c.is::<http_body_util::LengthLimitError>());
                if too_large {
                    ApiError::TooLarge(format!("request body larger than {max} bytes"))
                        .into_response()
                } else {
                    ApiError::BadRequest(format!("the request body could not be read: {e}"))
                        .into_response()
                }
            }
            Err(_) => ApiError::RequestTimeout(format!(
                "the request body did not arrive within {} s",
                JSON_BODY_DEADLINE.as_secs()
            ))
            .into_response(),
        };
    }
    ApiError::UnsupportedMediaType(format!(
        "this route takes a JSON body: send Content-Type: application/json (got {})",
        if ct.is_empty() {
            "none".to_string()
        } else {
            format!("{:?}", clip(ct))
        }
    ))
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_origins() {
        let none: Vec<String> = vec![];
        for ok in [
            "127.0.0.1:8080",
            "localhost:1",
            "[::1]:80",
            "10.0.0.7",
            "LOCALHOST.",
        ] {
            assert!(host_allowed(ok, &none), "{ok}");
        }
        for bad in [
            "evil.example:8080",
            "127.0.0.1.nip.io",
            "localhost.evil.com",
            "",
        ] {
            assert!(!host_allowed(bad, &none), "{bad}");
        }
        assert!(host_allowed(
            "lake.example.org:443",
            &["Lake.Example.org".into()]
        ));
        let mut h = HeaderMap::new();
        h.insert(header::HOST, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(cross_origin(&h), None);
        h.insert(header::ORIGIN, "http://127.0.0.1:8080".parse().unwrap());
        assert_eq!(cross_origin(&h), None);
        for o in [
            "http://evil.example",
            "null",
            "http://127.0.0.1:9999",
            "file://",
        ] {
            h.insert(header::ORIGIN, o.parse().unwrap());
            assert!(cross_origin(&h).is_some(), "{o}");
        }
        h.remove(header::ORIGIN);
        h.insert("sec-fetch-site", "cross-site".parse().unwrap());
        assert!(cross_origin(&h).is_some());
    }
}
