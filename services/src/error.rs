//! The one mapping from errors to HTTP: every handler, the dashboard and the token check
//! answer through [`ApiError`], as `{"error": message}` (pages wrap the same status in HTML).

use axum::Json;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use lakefish_jobs::JobError;

#[derive(Debug)]
pub enum ApiError {
    BadRequest(String),
    /// No token, or one the config does not know.
    Unauthorized(String),
    /// A known token without the scope the request needs.
    Forbidden(String),
    TooLarge(String),
    /// A body that did not arrive in time.
    RequestTimeout(String),
    /// A body of a media type the route does not take.
    UnsupportedMediaType(String),
    NotFound(String),
    /// A known path with a method it does not serve.
    MethodNotAllowed(String),
    /// The request contradicts what is stored (other bytes under an immutable name, a
    /// dataset name taken): nothing was changed.
    Conflict(String),
    /// The lake (or another backend) did not answer: try again later.
    Unavailable(String),
    Internal(String),
}

impl ApiError {
    pub fn status_and_message(self) -> (StatusCode, String) {
        match self {
            ApiError::BadRequest(m) => (StatusCode::BAD_REQUEST, m),
            ApiError::Unauthorized(m) => (StatusCode::UNAUTHORIZED, m),
            ApiError::Forbidden(m) => (StatusCode::FORBIDDEN, m),
            ApiError::TooLarge(m) => (StatusCode::PAYLOAD_TOO_LARGE, m),
            ApiError::UnsupportedMediaType(m) => (StatusCode::UNSUPPORTED_MEDIA_TYPE, m),
            ApiError::RequestTimeout(m) => (StatusCode::REQUEST_TIMEOUT, m),
            ApiError::NotFound(m) => (StatusCode::NOT_FOUND, m),
            ApiError::MethodNotAllowed(m) => (StatusCode::METHOD_NOT_ALLOWED, m),
            ApiError::Conflict(m) => (StatusCode::CONFLICT, m),
            ApiError::Unavailable(m) => (StatusCode::SERVICE_UNAVAILABLE, m),
            ApiError::Internal(m) => (StatusCode::INTERNAL_SERVER_ERROR, m),
        }
    }
}

/// What the caller did wrong is a 4xx; storage that did not answer is a 503 (transient,
/// the same rule `JobError::is_transient` gives the queue); anything else is a 500.
impl From<JobError> for ApiError {
    fn from(e: JobError) -> Self {
        match e {
            JobError::Name(_)
            | JobError::Input { .. }
            | JobError::Payload(_)
            | JobError::Invalid(_) => ApiError::BadRequest(e.to_string()),
            JobError::NotFound(_) => ApiError::NotFound(e.to_string()),
            JobError::Forbidden(_) => ApiError::Forbidden(e.to_string()),
            JobError::DatasetExists { .. }
            | JobError::ObjectExists { .. }
            | JobError::DatasetBusy { .. }
            | JobError::MaskExists { .. }
            | JobError::EngineExists { .. } => ApiError::Conflict(e.to_string()),
            JobError::TooLarge { .. } => ApiError::TooLarge(e.to_string()),
            JobError::Lake { .. } => ApiError::Unavailable(e.to_string()),
            _ => ApiError::Internal(e.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, message) = self.status_and_message();
        if status.is_server_error() {
            tracing::error!(%status, "{message}");
        }
        let mut r = (status, Json(crate::bodies::ErrorBody { error: message })).into_response();
        if status == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer realm=\"lakefish\""),
            );
        }
        r
    }
}
