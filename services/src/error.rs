//! The one mapping from errors to HTTP: every handler, the dashboard and the token check
//! answer through [`ApiError`], as `{"error": message}` (pages wrap the same status in HTML).

use axum::Json;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use lakefish_jobs::{ErrorCode, JobError};

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

/// By the error's one [`ErrorCode`]: what the caller did wrong is a 4xx, storage that did
/// not answer or a state about to change a 503 (the errors the queue retries), a failure or
/// a bug a 500.
impl From<JobError> for ApiError {
    fn from(e: JobError) -> Self {
        let m = e.to_string();
        match e.code() {
            ErrorCode::Invalid => ApiError::BadRequest(m),
            ErrorCode::Forbidden => ApiError::Forbidden(m),
            ErrorCode::NotFound => ApiError::NotFound(m),
            ErrorCode::Conflict => ApiError::Conflict(m),
            ErrorCode::TooLarge => ApiError::TooLarge(m),
            ErrorCode::Unavailable => ApiError::Unavailable(m),
            ErrorCode::Failed | ErrorCode::Internal => ApiError::Internal(m),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The queue retries exactly the errors HTTP calls unavailable: one code decides both.
    #[test]
    fn retried_errors_are_503_and_only_they() {
        let samples = [
            JobError::Retry("pile 3 is not done".into()),
            JobError::Payload("bad".into()),
            JobError::NotFound("x".into()),
            JobError::Forbidden("x".into()),
            JobError::MaskExists {
                mask: "m".into(),
                existing: "e".into(),
            },
            JobError::Failed("trainer".into()),
            JobError::NothingIngested("empty".into()),
            JobError::Panic("loader".into()),
            JobError::Internal("bug".into()),
        ];
        for e in samples {
            let transient = e.is_transient();
            let what = e.to_string();
            let (status, _) = ApiError::from(e).status_and_message();
            assert_eq!(
                transient,
                status == StatusCode::SERVICE_UNAVAILABLE,
                "{what}: {status}"
            );
        }
        let (status, _) = ApiError::from(JobError::Retry("x".into())).status_and_message();
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    }
}
