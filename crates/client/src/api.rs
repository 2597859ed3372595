//! [`NodeApi`]: the node's `/v1` API as typed requests, over any transport.
//!
//! A transport implements two things: [`NodeApi::exchange`] (one request in, status and body
//! out) and [`NodeApi::events`] (the event stream's body). Every typed request — its path, its
//! body's encoding, the decoding of the answer and of API errors — is a provided method written
//! once here, so [`NodeClient`](crate::NodeClient) (HTTP) and an in-process node
//! (`walras_testkit::InProcessNode`, which drives the server's own axum router without a
//! socket) differ only in how bytes travel: the same JSON codec and the same error mapping
//! on both (FastPay's `LocalAuthorityClient` pattern).
//!
//! Form: methods return `impl Future<Output = ..> + Send` (native `async fn` in a trait cannot
//! promise `Send`, and the load generator moves requests into `tokio::spawn`). Callers are
//! generic (`C: NodeApi`); nothing needs `dyn`, so the trait stays without boxing.

use crate::{api_error, BlockEvents, ClientError};
use bytes::Bytes;
use reqwest::StatusCode;
use serde::de::DeserializeOwned;
use std::future::Future;
use walras_api::transaction_to_json;
use walras_api::wire::{
    AccountJson, AccountOffersJson, AssetsJson, BatchSubmitResponse, BlockFillsJson, BlockJson,
    BookJson, DepositsJson, EscrowJson, OfferExplanationJson, PricesJson, StatusJson,
    SubmitResponse, TransactionStatusJson,
};
use walras_engine::Block;
use walras_types::SignedTransaction;

/// The event stream's path, and how its failures are named.
pub const EVENTS_PATH: &str = "/v1/events";
pub const EVENTS_REQUEST: &str = "GET /v1/events";

/// The two methods the API uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiMethod {
    Get,
    Post,
}

/// One request, as a transport sends it.
#[derive(Clone, Debug)]
pub struct ApiRequest {
    pub method: ApiMethod,
    /// Path and query (`/v1/books/0/1?levels=5`).
    pub path: String,
    pub content_type: Option<&'static str>,
    pub body: Bytes,
    /// What was asked, for error messages (`the transaction`, `GET /v1/status`).
    pub what: String,
}

impl ApiRequest {
    pub fn get(path: String) -> ApiRequest {
        ApiRequest {
            method: ApiMethod::Get,
            what: format!("GET {path}"),
            path,
            content_type: None,
            body: Bytes::new(),
        }
    }

    fn post(path: &str, content_type: &'static str, body: Vec<u8>, what: &str) -> ApiRequest {
        ApiRequest {
            method: ApiMethod::Post,
            path: path.to_string(),
            content_type: Some(content_type),
            body: Bytes::from(body),
            what: what.to_string(),
        }
    }
}

/// One answer: status, `Retry-After` in seconds, body.
#[derive(Clone, Debug)]
pub struct ApiResponse {
    pub status: u16,
    pub retry_after_s: Option<f64>,
    pub body: Bytes,
}

impl ApiResponse {
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The answer as [`ClientError::Api`] (or [`ClientError::Protocol`] when the body is not
    /// an `ApiError`).
    pub fn error(&self, what: &str, url: &str) -> ClientError {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::BAD_GATEWAY);
        api_error(status, &self.body, what, url, self.retry_after_s)
    }

    /// The body of a success; an error status becomes the API's error.
    pub fn success_body(self, what: &str, url: &str) -> Result<Bytes, ClientError> {
        if self.is_success() {
            Ok(self.body)
        } else {
            Err(self.error(what, url))
        }
    }

    /// A success body parsed as `T`.
    pub fn json<T: DeserializeOwned>(self, what: &str, url: &str) -> Result<T, ClientError> {
        let body = self.success_body(what, url)?;
        serde_json::from_slice(&body).map_err(|error| ClientError::Protocol {
            url: url.to_string(),
            detail: format!("the body is not the expected JSON: {error}"),
        })
    }
}

/// The node's API, over some transport. See the module header.
pub trait NodeApi: Clone + Send + Sync + 'static {
    /// Where requests go, for messages (`http://127.0.0.1:8080`, `in-process:`).
    fn base_url(&self) -> &str;

    /// Sends one request and returns the answer, whatever its status (transport failures are
    /// errors; an API error is an answer).
    fn exchange(
        &self,
        request: ApiRequest,
    ) -> impl Future<Output = Result<ApiResponse, ClientError>> + Send;

    /// Subscribes to `GET /v1/events`: one block event per committed block, from now on.
    fn events(&self) -> impl Future<Output = Result<BlockEvents, ClientError>> + Send;

    fn status(&self) -> impl Future<Output = Result<StatusJson, ClientError>> + Send {
        get_json(self, "/v1/status".to_string())
    }

    fn account(
        &self,
        account: u64,
    ) -> impl Future<Output = Result<AccountJson, ClientError>> + Send {
        get_json(self, format!("/v1/accounts/{account}"))
    }

    fn account_offers(
        &self,
        account: u64,
    ) -> impl Future<Output = Result<AccountOffersJson, ClientError>> + Send {
        get_json(self, format!("/v1/accounts/{account}/offers"))
    }

    /// The book of offers selling `sell` for `buy`; `levels` limits the price levels listed.
    fn book(
        &self,
        sell: u16,
        buy: u16,
        levels: Option<u32>,
    ) -> impl Future<Output = Result<BookJson, ClientError>> + Send {
        let path = match levels {
            Some(levels) => format!("/v1/books/{sell}/{buy}?levels={levels}"),
            None => format!("/v1/books/{sell}/{buy}"),
        };
        get_json(self, path)
    }

    fn block(&self, height: u64) -> impl Future<Output = Result<BlockJson, ClientError>> + Send {
        get_json(self, format!("/v1/blocks/{height}"))
    }

    /// What each offer sold and received in block `height`; only `account`'s when given.
    fn block_fills(
        &self,
        height: u64,
        account: Option<u64>,
    ) -> impl Future<Output = Result<BlockFillsJson, ClientError>> + Send {
        let filter = account.map_or_else(String::new, |account| format!("?account={account}"));
        get_json(self, format!("/v1/blocks/{height}/fills{filter}"))
    }

    /// The block as committed (`Block::encode`), decoded.
    fn block_raw(&self, height: u64) -> impl Future<Output = Result<Block, ClientError>> + Send {
        async move {
            let path = format!("/v1/blocks/{height}/raw");
            let url = format!("{}{path}", self.base_url());
            let bytes = get_bytes(self, path).await?;
            Block::decode(&bytes).map_err(|error| ClientError::Protocol {
                url,
                detail: format!("block {height} does not decode: {error}"),
            })
        }
    }

    /// Committed deposits into the payments escrow of blocks after `after_height` (a bounded
    /// scan: ask again from the answer's `scanned_to`).
    fn payments_deposits(
        &self,
        after_height: u64,
    ) -> impl Future<Output = Result<DepositsJson, ClientError>> + Send {
        get_json(
            self,
            format!("/v1/payments/deposits?after_height={after_height}"),
        )
    }

    /// The payments bridge's escrow per asset and withdrawn count now.
    fn payments_escrow(&self) -> impl Future<Output = Result<EscrowJson, ClientError>> + Send {
        get_json(self, "/v1/payments/escrow".to_string())
    }

    /// Why offer `id` (of `account`, needed when several accounts used the id) traded or not.
    fn offer_explanation(
        &self,
        id: u64,
        account: Option<u64>,
    ) -> impl Future<Output = Result<OfferExplanationJson, ClientError>> + Send {
        let path = match account {
            Some(account) => format!("/v1/offers/{id}/explain?account={account}"),
            None => format!("/v1/offers/{id}/explain"),
        };
        get_json(self, path)
    }

    /// Asset symbols and decimals (from the genesis).
    fn assets(&self) -> impl Future<Output = Result<AssetsJson, ClientError>> + Send {
        get_json(self, "/v1/assets".to_string())
    }

    fn prices(&self) -> impl Future<Output = Result<PricesJson, ClientError>> + Send {
        get_json(self, "/v1/prices".to_string())
    }

    /// The fate of a transaction by its hash (lowercase hex).
    fn transaction(
        &self,
        hash_hex: &str,
    ) -> impl Future<Output = Result<TransactionStatusJson, ClientError>> + Send {
        get_json(self, format!("/v1/transactions/{hash_hex}"))
    }

    /// The Prometheus text of `GET /metrics`.
    fn metrics(&self) -> impl Future<Output = Result<String, ClientError>> + Send {
        async move {
            let bytes = get_bytes(self, "/metrics".to_string()).await?;
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        }
    }

    /// Submits one transaction in its binary form.
    fn submit(
        &self,
        signed: &SignedTransaction,
    ) -> impl Future<Output = Result<SubmitResponse, ClientError>> + Send {
        let request = ApiRequest::post(
            "/v1/transactions",
            "application/octet-stream",
            signed.encode(),
            "the transaction",
        );
        send_json(self, request)
    }

    /// Submits one transaction in its JSON form (same acceptance as the binary form).
    fn submit_json(
        &self,
        signed: &SignedTransaction,
    ) -> impl Future<Output = Result<SubmitResponse, ClientError>> + Send {
        let body = serde_json::to_vec(&transaction_to_json(signed))
            .expect("a transaction's JSON form always serialises");
        let request = ApiRequest::post(
            "/v1/transactions",
            "application/json",
            body,
            "the transaction",
        );
        send_json(self, request)
    }

    /// Submits transactions as one batch (`SignedTransaction::encode_list`); the answer says
    /// per item whether it was admitted. The node takes at most 10,000 items in a body of at
    /// most 4 MiB; a larger batch is sent as is and refused by the node (`ClientError::Api`,
    /// `413 too_large` or `400`), so the limit lives in one place.
    fn submit_batch(
        &self,
        batch: &[SignedTransaction],
    ) -> impl Future<Output = Result<BatchSubmitResponse, ClientError>> + Send {
        let request = ApiRequest::post(
            "/v1/transactions/batch",
            "application/octet-stream",
            SignedTransaction::encode_list(batch),
            "the batch",
        );
        send_json(self, request)
    }
}

async fn send_json<C: NodeApi, T: DeserializeOwned>(
    client: &C,
    request: ApiRequest,
) -> Result<T, ClientError> {
    let url = format!("{}{}", client.base_url(), request.path);
    let what = request.what.clone();
    client.exchange(request).await?.json(&what, &url)
}

async fn get_json<C: NodeApi, T: DeserializeOwned>(
    client: &C,
    path: String,
) -> Result<T, ClientError> {
    send_json(client, ApiRequest::get(path)).await
}

async fn get_bytes<C: NodeApi>(client: &C, path: String) -> Result<Bytes, ClientError> {
    let url = format!("{}{path}", client.base_url());
    let request = ApiRequest::get(path);
    let what = request.what.clone();
    client.exchange(request).await?.success_body(&what, &url)
}
