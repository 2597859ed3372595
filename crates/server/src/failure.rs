//! API errors: a status, a stable code and a message a person can act on, sent as
//! [`ApiError`] JSON.

use axum::extract::rejection::BytesRejection;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use walras_api::wire::{ApiError, ErrorBody};

#[derive(Clone, Debug)]
pub(crate) struct Failure {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// Sent as `Retry-After` (whole seconds, at least 1).
    pub retry_after_s: Option<f64>,
}

impl Failure {
    pub(crate) fn new(
        status: StatusCode,
        code: &'static str,
        message: impl Into<String>,
    ) -> Failure {
        Failure {
            status,
            code,
            message: message.into(),
            retry_after_s: None,
        }
    }

    pub(crate) fn malformed(message: impl Into<String>) -> Failure {
        Failure::new(StatusCode::BAD_REQUEST, "malformed", message)
    }

    pub(crate) fn not_found(code: &'static str, message: impl Into<String>) -> Failure {
        Failure::new(StatusCode::NOT_FOUND, code, message)
    }

    pub(crate) fn internal(message: impl Into<String>) -> Failure {
        Failure::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    pub(crate) fn retry_after(mut self, seconds: f64) -> Failure {
        self.retry_after_s = Some(seconds);
        self
    }

    pub(crate) fn body(&self) -> ErrorBody {
        ErrorBody {
            code: self.code.to_string(),
            message: self.message.clone(),
        }
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(ApiError { error: self.body() })).into_response();
        if let Some(seconds) = self.retry_after_s {
            let whole = seconds.ceil().max(1.0) as u64;
            if let Ok(value) = HeaderValue::from_str(&whole.to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
        }
        response
    }
}

/// A body that could not be read: too large (413) or broken (400).
pub(crate) fn body_failure(rejection: BytesRejection, limit_bytes: usize) -> Failure {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        Failure::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("the request body exceeds {limit_bytes} bytes"),
        )
    } else {
        Failure::malformed(format!("the request body could not be read: {rejection}"))
    }
}
