//! The client side of the node's HTTP API: [`NodeClient`] (typed requests returning the shared
//! [`wire`](walras_api::wire) bodies), key files and the server-sent-events parser. All
//! networking of the command-line client and the load generator lives here; the `cli`
//! commands only parse arguments and print.

pub mod keyfile;
pub mod sse;

use reqwest::header::{CONTENT_TYPE, RETRY_AFTER};
use reqwest::{Response, StatusCode};
use serde::de::DeserializeOwned;
use sse::SseParser;
use std::collections::VecDeque;
use std::time::Duration;
use walras_api::transaction_to_json;
use walras_api::wire::{
    AccountJson, AccountOffersJson, ApiError, BatchSubmitResponse, BlockEventJson, BlockJson,
    BookJson, DepositsJson, EscrowJson, OfferExplanationJson, PricesJson, StatusJson,
    SubmitResponse, TransactionStatusJson,
};
use walras_engine::Block;
use walras_types::SignedTransaction;

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

/// A typed client of one node's `/v1` API. Cheap to clone (the connection pool is shared).
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

    pub async fn status(&self) -> Result<StatusJson, ClientError> {
        self.get_json("/v1/status").await
    }

    pub async fn account(&self, account: u64) -> Result<AccountJson, ClientError> {
        self.get_json(&format!("/v1/accounts/{account}")).await
    }

    pub async fn account_offers(&self, account: u64) -> Result<AccountOffersJson, ClientError> {
        self.get_json(&format!("/v1/accounts/{account}/offers"))
            .await
    }

    /// The book of offers selling `sell` for `buy`; `levels` limits the price levels listed.
    pub async fn book(
        &self,
        sell: u16,
        buy: u16,
        levels: Option<u32>,
    ) -> Result<BookJson, ClientError> {
        let path = match levels {
            Some(levels) => format!("/v1/books/{sell}/{buy}?levels={levels}"),
            None => format!("/v1/books/{sell}/{buy}"),
        };
        self.get_json(&path).await
    }

    pub async fn block(&self, height: u64) -> Result<BlockJson, ClientError> {
        self.get_json(&format!("/v1/blocks/{height}")).await
    }

    /// The block as committed (`Block::encode`), decoded.
    pub async fn block_raw(&self, height: u64) -> Result<Block, ClientError> {
        let path = format!("/v1/blocks/{height}/raw");
        let bytes = self.get_bytes(&path).await?;
        Block::decode(&bytes).map_err(|error| ClientError::Protocol {
            url: self.url(&path),
            detail: format!("block {height} does not decode: {error}"),
        })
    }

    /// Committed deposits into the payments escrow of blocks after `after_height` (a bounded
    /// scan: ask again from the answer's `scanned_to`).
    pub async fn payments_deposits(&self, after_height: u64) -> Result<DepositsJson, ClientError> {
        self.get_json(&format!(
            "/v1/payments/deposits?after_height={after_height}"
        ))
        .await
    }

    /// The payments bridge's escrow per asset and withdrawn count now.
    pub async fn payments_escrow(&self) -> Result<EscrowJson, ClientError> {
        self.get_json("/v1/payments/escrow").await
    }

    /// Why offer `id` (of `account`, needed when several accounts used the id) traded or not.
    pub async fn offer_explanation(
        &self,
        id: u64,
        account: Option<u64>,
    ) -> Result<OfferExplanationJson, ClientError> {
        let path = match account {
            Some(account) => format!("/v1/offers/{id}/explain?account={account}"),
            None => format!("/v1/offers/{id}/explain"),
        };
        self.get_json(&path).await
    }

    pub async fn prices(&self) -> Result<PricesJson, ClientError> {
        self.get_json("/v1/prices").await
    }

    /// The fate of a transaction by its hash (lowercase hex).
    pub async fn transaction(&self, hash_hex: &str) -> Result<TransactionStatusJson, ClientError> {
        self.get_json(&format!("/v1/transactions/{hash_hex}")).await
    }

    /// The Prometheus text of `GET /metrics`.
    pub async fn metrics(&self) -> Result<String, ClientError> {
        let bytes = self.get_bytes("/metrics").await?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Submits one transaction in its binary form.
    pub async fn submit(&self, signed: &SignedTransaction) -> Result<SubmitResponse, ClientError> {
        let request = self
            .http
            .post(self.url("/v1/transactions"))
            .header(CONTENT_TYPE, "application/octet-stream")
            .body(signed.encode());
        self.send_json(request, "/v1/transactions", "the transaction")
            .await
    }

    /// Submits one transaction in its JSON form (same acceptance as the binary form).
    pub async fn submit_json(
        &self,
        signed: &SignedTransaction,
    ) -> Result<SubmitResponse, ClientError> {
        let request = self
            .http
            .post(self.url("/v1/transactions"))
            .json(&transaction_to_json(signed));
        self.send_json(request, "/v1/transactions", "the transaction")
            .await
    }

    /// Submits transactions as one batch (`SignedTransaction::encode_list`); the answer says
    /// per item whether it was admitted. At most 65,535 items fit the encoding; the node takes
    /// at most 10,000.
    pub async fn submit_batch(
        &self,
        batch: &[SignedTransaction],
    ) -> Result<BatchSubmitResponse, ClientError> {
        assert!(
            batch.len() <= usize::from(u16::MAX),
            "a batch holds at most 65535 transactions"
        );
        let request = self
            .http
            .post(self.url("/v1/transactions/batch"))
            .header(CONTENT_TYPE, "application/octet-stream")
            .body(SignedTransaction::encode_list(batch));
        self.send_json(request, "/v1/transactions/batch", "the batch")
            .await
    }

    /// Subscribes to `GET /v1/events`: one [`BlockEventJson`] per committed block, from now on.
    pub async fn events(&self) -> Result<BlockEvents, ClientError> {
        let url = self.url("/v1/events");
        // No overall timeout: the stream lasts as long as the node does.
        let response = self
            .http
            .get(&url)
            .header("accept", "text/event-stream")
            .send()
            .await
            .map_err(|error| unreachable(&url, &error))?;
        let response = check_status(response, "GET /v1/events").await?;
        Ok(BlockEvents {
            url,
            response,
            parser: SseParser::default(),
            ready: VecDeque::new(),
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    async fn get_json<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        let request = self.http.get(self.url(path));
        self.send_json(request, path, &format!("GET {path}")).await
    }

    async fn get_bytes(&self, path: &str) -> Result<bytes::Bytes, ClientError> {
        let url = self.url(path);
        let response = self
            .http
            .get(&url)
            .timeout(REQUEST_TIMEOUT)
            .send()
            .await
            .map_err(|error| unreachable(&url, &error))?;
        let response = check_status(response, &format!("GET {path}")).await?;
        response
            .bytes()
            .await
            .map_err(|error| unreachable(&url, &error))
    }

    /// Sends `request` and parses a success body as `T`; an error status becomes
    /// [`ClientError::Api`] naming `what`.
    async fn send_json<T: DeserializeOwned>(
        &self,
        request: reqwest::RequestBuilder,
        path: &str,
        what: &str,
    ) -> Result<T, ClientError> {
        let url = self.url(path);
        let response = request
            .timeout(REQUEST_TIMEOUT)
            .send()
            .await
            .map_err(|error| unreachable(&url, &error))?;
        let response = check_status(response, what).await?;
        let body = response
            .bytes()
            .await
            .map_err(|error| unreachable(&url, &error))?;
        serde_json::from_slice(&body).map_err(|error| ClientError::Protocol {
            url,
            detail: format!("the body is not the expected JSON: {error}"),
        })
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

/// Passes a success through; turns an error status into [`ClientError::Api`] (or
/// [`ClientError::Protocol`] when the body is not an `ApiError`).
async fn check_status(response: Response, what: &str) -> Result<Response, ClientError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let url = response.url().to_string();
    let retry_after_s = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .and_then(|text| text.trim().parse::<f64>().ok());
    let body = response.bytes().await.unwrap_or_default();
    Err(api_error(status, &body, what, &url, retry_after_s))
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

/// The block events of `GET /v1/events`, parsed as they arrive.
pub struct BlockEvents {
    url: String,
    response: Response,
    parser: SseParser,
    ready: VecDeque<BlockEventJson>,
}

impl BlockEvents {
    /// The next block event; `None` when the node closed the stream. Events other than `block`
    /// (and comments, used as keep-alives) are skipped.
    pub async fn next(&mut self) -> Option<Result<BlockEventJson, ClientError>> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Some(Ok(event));
            }
            let chunk = match self.response.chunk().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => return None,
                Err(error) => return Some(Err(unreachable(&self.url, &error))),
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
