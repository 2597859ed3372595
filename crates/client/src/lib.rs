//! The client side of the node's HTTP API: [`NodeClient`] (typed requests returning the shared
//! [`wire`](walras_api::wire) bodies), key files and the server-sent-events parser. All
//! networking of the command-line client and the load generator lives here; the `cli`
//! commands only parse arguments and print.

#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod api;
pub mod keyfile;
pub mod sse;

pub use api::{ApiMethod, ApiRequest, ApiResponse, NodeApi, EVENTS_PATH, EVENTS_REQUEST};

use bytes::Bytes;
use futures_util::Stream;
use reqwest::header::{CONTENT_TYPE, RETRY_AFTER};
use reqwest::StatusCode;
use sse::SseParser;
use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;
use walras_api::wire::{ApiError, BlockEventJson};

/// Longest a single request may take, body included (the event stream has no limit).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest to wait for a TCP connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Idle connections kept per host: the load generator runs hundreds of requests at once.
const IDLE_CONNECTIONS_MAX: usize = 1024;

/// Why a request to the node failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The node answered with an error body (`ApiError`).
    #[error(
        "node refused {request} ({status} {code}): {message}{}",
        retry_note(*.retry_after_s)
    )]
    Api {
        /// What was asked, for the message: `the transaction`, `GET /v1/accounts/7`, ...
        request: String,
        status: u16,
        code: String,
        message: String,
        /// From a `Retry-After` header (503 `mempool_full`, 429 `rate_limited`).
        retry_after_s: Option<f64>,
    },
    /// No answer: connection refused, reset, or timed out.
    #[error(
        "cannot reach the node at {url}: {detail} (is `walras node` running there? set the \
         address with --node)"
    )]
    Unreachable { url: String, detail: String },
    /// An answer this client does not understand (wrong JSON, undecodable block, bad status).
    #[error("unexpected answer from {url}: {detail}")]
    Protocol { url: String, detail: String },
}

/// ` (retry after N s)` when the node said when to retry, else nothing.
fn retry_note(retry_after_s: Option<f64>) -> String {
    retry_after_s.map_or_else(String::new, |seconds| format!(" (retry after {seconds} s)"))
}

impl ClientError {
    /// The API's status code, when the node answered with an error body.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The API's error code (`replayed`, `unknown_account`, ...), when the node answered.
    pub fn code(&self) -> Option<&str> {
        match self {
            ClientError::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }
}

/// A typed client of one node's `/v1` API over HTTP. Cheap to clone (the connection pool is
/// shared). Its typed requests are [`NodeApi`]'s (import the trait to call them), written once
/// for HTTP and in-process callers alike.
#[derive(Clone, Debug)]
pub struct NodeClient {
    http: reqwest::Client,
    /// `http://host:port`, without a trailing slash.
    base_url: String,
}

impl NodeClient {
    /// A client of the node at `base_url` (`http://127.0.0.1:8080`). Only plain `http` is
    /// supported: the node serves no TLS.
    pub fn new(base_url: &str) -> Result<NodeClient, ClientError> {
        let base_url = normalise_base_url(base_url)?;
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .pool_max_idle_per_host(IDLE_CONNECTIONS_MAX)
            .tcp_nodelay(true)
            .build()
            .map_err(|error| ClientError::Protocol {
                url: base_url.clone(),
                detail: format!("cannot build the HTTP client: {error}"),
            })?;
        Ok(NodeClient { http, base_url })
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }
}

impl NodeApi for NodeClient {
    fn base_url(&self) -> &str {
        &self.base_url
    }

    async fn exchange(&self, request: ApiRequest) -> Result<ApiResponse, ClientError> {
        let url = self.url(&request.path);
        let mut builder = match request.method {
            ApiMethod::Get => self.http.get(&url),
            ApiMethod::Post => self.http.post(&url),
        };
        if let Some(content_type) = request.content_type {
            builder = builder.header(CONTENT_TYPE, content_type);
        }
        if !request.body.is_empty() {
            builder = builder.body(request.body);
        }
        let response = builder
            .timeout(REQUEST_TIMEOUT)
            .send()
            .await
            .map_err(|error| unreachable(&url, &error))?;
        let status = response.status().as_u16();
        let retry_after_s = retry_after(response.headers());
        let body = response
            .bytes()
            .await
            .map_err(|error| unreachable(&url, &error))?;
        Ok(ApiResponse {
            status,
            retry_after_s,
            body,
        })
    }

    async fn events(&self) -> Result<BlockEvents, ClientError> {
        let url = self.url(EVENTS_PATH);
        // No overall timeout: the stream lasts as long as the node does.
        let response = self
            .http
            .get(&url)
            .header("accept", "text/event-stream")
            .send()
            .await
            .map_err(|error| unreachable(&url, &error))?;
        if !response.status().is_success() {
            let status = response.status().as_u16();
            let retry_after_s = retry_after(response.headers());
            let body = response.bytes().await.unwrap_or_default();
            let answer = ApiResponse {
                status,
                retry_after_s,
                body,
            };
            return Err(answer.error(EVENTS_REQUEST, &url));
        }
        let chunk_url = url.clone();
        let chunks = futures_util::StreamExt::map(response.bytes_stream(), move |chunk| {
            chunk.map_err(|error| unreachable(&chunk_url, &error))
        });
        Ok(BlockEvents::new(url, Box::pin(chunks)))
    }
}

impl NodeClient {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }
}

/// `http://host:port` from what a user typed (`127.0.0.1:8080`, `http://h:1/`).
fn normalise_base_url(text: &str) -> Result<String, ClientError> {
    let trimmed = text.trim();
    let refuse = |detail: &str| ClientError::Protocol {
        url: text.to_string(),
        detail: detail.to_string(),
    };
    let address = match trimmed.strip_prefix("http://") {
        Some(address) => address,
        None if trimmed.contains("://") => {
            return Err(refuse(
                "only plain http:// node addresses are supported (the node serves no TLS)",
            ))
        }
        None => trimmed,
    };
    let address = address.trim_end_matches('/');
    if address.is_empty() {
        return Err(refuse("the node address has no host: use http://HOST:PORT"));
    }
    Ok(format!("http://{address}"))
}

/// A transport error, described by its innermost cause: reqwest's own text ("error sending
/// request for url ...") repeats the URL, the useful part ("Connection refused") is the root.
fn unreachable(url: &str, error: &reqwest::Error) -> ClientError {
    let detail = if error.is_timeout() {
        "timed out".to_string()
    } else {
        let mut root: &dyn std::error::Error = error;
        while let Some(cause) = root.source() {
            root = cause;
        }
        root.to_string()
    };
    ClientError::Unreachable {
        url: url.to_string(),
        detail,
    }
}

/// The `Retry-After` header in seconds, when present and a number.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<f64> {
    headers
        .get(RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .and_then(|text| text.trim().parse::<f64>().ok())
}

fn api_error(
    status: StatusCode,
    body: &[u8],
    what: &str,
    url: &str,
    retry_after_s: Option<f64>,
) -> ClientError {
    match serde_json::from_slice::<ApiError>(body) {
        Ok(error) => ClientError::Api {
            request: what.to_string(),
            status: status.as_u16(),
            code: error.error.code,
            message: error.error.message,
            retry_after_s,
        },
        Err(_) => ClientError::Protocol {
            url: url.to_string(),
            detail: format!(
                "status {status} with a body that is not an API error: {:?}",
                String::from_utf8_lossy(&body[..body.len().min(200)])
            ),
        },
    }
}

/// The body chunks of an event stream, from whichever transport opened it.
pub type EventChunks = Pin<Box<dyn Stream<Item = Result<Bytes, ClientError>> + Send>>;

/// The block events of `GET /v1/events`, parsed as they arrive.
pub struct BlockEvents {
    url: String,
    chunks: EventChunks,
    parser: SseParser,
    ready: VecDeque<BlockEventJson>,
}

impl BlockEvents {
    /// Events parsed from `chunks`, the body of a successful `GET /v1/events` at `url` (for
    /// error messages). Every transport parses the stream here, with the one SSE parser.
    pub fn new(url: String, chunks: EventChunks) -> BlockEvents {
        BlockEvents {
            url,
            chunks,
            parser: SseParser::default(),
            ready: VecDeque::new(),
        }
    }

    /// The next block event; `None` when the node closed the stream. Events other than `block`
    /// (and comments, used as keep-alives) are skipped.
    pub async fn next(&mut self) -> Option<Result<BlockEventJson, ClientError>> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Some(Ok(event));
            }
            let chunk = match std::future::poll_fn(|cx| self.chunks.as_mut().poll_next(cx)).await {
                Some(Ok(chunk)) => chunk,
                None => return None,
                Some(Err(error)) => return Some(Err(error)),
            };
            for event in self.parser.push(&chunk) {
                if event.name != "block" {
                    continue;
                }
                match serde_json::from_str::<BlockEventJson>(&event.data) {
                    Ok(block) => self.ready.push_back(block),
                    Err(error) => {
                        return Some(Err(ClientError::Protocol {
                            url: self.url.clone(),
                            detail: format!("a block event is not BlockEventJson: {error}"),
                        }))
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_are_normalised_and_tls_is_refused() {
        assert_eq!(
            normalise_base_url("127.0.0.1:8080").unwrap(),
            "http://127.0.0.1:8080"
        );
        assert_eq!(
            normalise_base_url("http://localhost:1/").unwrap(),
            "http://localhost:1"
        );
        assert!(normalise_base_url("https://example.com").is_err());
        assert!(normalise_base_url("http://").is_err());
    }

    #[test]
    fn api_errors_carry_status_code_and_message() {
        let body = br#"{"error":{"code":"replayed","message":"sequence 3 was used"}}"#;
        let error = api_error(
            StatusCode::CONFLICT,
            body,
            "the transaction",
            "http://x/v1/transactions",
            None,
        );
        assert_eq!(error.status(), Some(409));
        assert_eq!(error.code(), Some("replayed"));
        assert_eq!(
            error.to_string(),
            "node refused the transaction (409 replayed): sequence 3 was used"
        );
        let garbage = api_error(StatusCode::BAD_GATEWAY, b"<html>", "x", "http://x/", None);
        assert!(matches!(garbage, ClientError::Protocol { .. }));
        assert!(garbage.to_string().contains("502"));
    }
}
