//! Request extractors that refuse in the API's one error shape (`{"error"}` JSON) where
//! axum's own answer plain text.

use crate::error::ApiError;
use axum::extract::{Path, Query};

/// A path parameter, refused like an unknown name (JSON 404) when it cannot be decoded (a
/// segment that is not UTF-8), instead of axum's plain-text 400.
pub struct ApiPath<T>(pub T);

impl<S, T> axum::extract::FromRequestParts<S> for ApiPath<T>
where
    T: serde::de::DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(t)) => Ok(ApiPath(t)),
            Err(e) => Err(ApiError::NotFound(format!("not found: {}", e.body_text()))),
        }
    }
}

/// A query string, refused as a JSON 400 naming what is wrong (axum's answers plain text).
pub struct ApiQuery<T>(pub T);

impl<S, T> axum::extract::FromRequestParts<S> for ApiQuery<T>
where
    T: serde::de::DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(t)) => Ok(ApiQuery(t)),
            Err(e) => Err(ApiError::BadRequest(e.body_text())),
        }
    }
}
