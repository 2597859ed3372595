//! [`InProcessNode`]: a node inside the test process, reached through
//! [`walras_client::NodeApi`] like a `walras node` process is through `NodeClient` (FastPay's
//! `LocalAuthorityClient` pattern).
//!
//! It is `walras_server::in_process::InProcess` (the node's store, recovery, mempool,
//! admission and solo producer) with its axum router driven by `tower::ServiceExt::oneshot`:
//! every request goes through the same routes, codecs, body limits and error bodies as over
//! HTTP, and every answer through the same decoding (`NodeApi`'s provided methods). What it
//! leaves out is the process (arguments, exit codes, signals, crash and restart) and the
//! connection loop; tests of those stay process-level (`NodeProcess`).
//!
//! It lives here, not in `walras-client` (which must not depend on the server) nor in
//! `walras-server` (which must not link the development genesis builder of `walras-devnet`).

use crate::{TempDir, DEV_ACCOUNTS, DEV_SEED};
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{header, Method, Request, Response};
use axum::Router;
use futures_util::StreamExt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;
use walras_api::wire::DevGenesisJson;
use walras_client::{
    ApiMethod, ApiRequest, ApiResponse, BlockEvents, ClientError, NodeApi, EVENTS_PATH,
    EVENTS_REQUEST,
};
use walras_server::in_process::InProcess;
use walras_server::NodeConfig;

/// What the in-process node calls itself in messages (`base_url`).
const BASE_URL: &str = "in-process:";

/// A node in this process; clones share it, and the last one dropped stops it.
#[derive(Clone)]
pub struct InProcessNode {
    inner: Arc<Inner>,
}

struct Inner {
    router: Router,
    node: InProcess,
    /// The store's directory, removed after the node stopped (fields drop in order).
    _data: Option<TempDir>,
}

impl InProcessNode {
    /// The node `NodeProcess::start(data, &[])` runs, in process: the development genesis
    /// (`DEV_ACCOUNTS` accounts, 4 assets, seed `DEV_SEED`), blocks every 50 ms, and
    /// `walras node`'s defaults otherwise (rate limit included), on a fresh temporary store.
    pub fn start() -> InProcessNode {
        let data = TempDir::new("in-process-node");
        let config = process_like_config(data.path());
        InProcessNode::start_with(&config, Some(data)).expect("the in-process node starts")
    }

    /// A node on `config` (solo, no oracle); `data`, when given, is removed after it stops.
    pub fn start_with(
        config: &NodeConfig,
        data: Option<TempDir>,
    ) -> Result<InProcessNode, walras_server::NodeError> {
        let node = InProcess::start(config)?;
        Ok(InProcessNode {
            inner: Arc::new(Inner {
                router: node.router(),
                node,
                _data: data,
            }),
        })
    }

    /// The height of the last durable block.
    pub fn height(&self) -> u64 {
        self.inner.node.height()
    }

    async fn call(&self, request: Request<Body>) -> Response<Body> {
        let Ok(response) = self.inner.router.clone().oneshot(request).await;
        response
    }
}

/// `walras node --dev --dev-accounts 200 --dev-assets 4 --block-interval-ms 50`'s settings.
pub fn process_like_config(data: &std::path::Path) -> NodeConfig {
    let dev = DevGenesisJson {
        seed: DEV_SEED,
        accounts: DEV_ACCOUNTS,
        assets: 4,
    };
    let mut config = crate::dev_node_config(data, dev);
    config.block_interval = Duration::from_millis(50);
    config.max_block_txs = 50_000;
    config.mempool_capacity = 200_000;
    config.threads = 2;
    config.clearing_timeout = Duration::from_millis(100);
    config.rate_limit_rps = 2_000;
    config.rate_limit_burst = 4_000;
    config
}

/// The request as the listener hands it to the router: with the peer's address (loopback).
fn http_request(request: &ApiRequest) -> Request<Body> {
    let method = match request.method {
        ApiMethod::Get => Method::GET,
        ApiMethod::Post => Method::POST,
    };
    let mut builder = Request::builder().method(method).uri(request.path.as_str());
    if let Some(content_type) = request.content_type {
        builder = builder.header(header::CONTENT_TYPE, content_type);
    }
    let mut http = builder
        .body(Body::from(request.body.clone()))
        .expect("a path and a content type make a valid request");
    http.extensions_mut()
        .insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 0))));
    http
}

async fn answer(response: Response<Body>, url: &str) -> Result<ApiResponse, ClientError> {
    let status = response.status().as_u16();
    let retry_after_s = response
        .headers()
        .get(header::RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .and_then(|text| text.trim().parse::<f64>().ok());
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .map_err(|error| ClientError::Protocol {
            url: url.to_string(),
            detail: format!("the body could not be read: {error}"),
        })?;
    Ok(ApiResponse {
        status,
        retry_after_s,
        body,
    })
}

impl NodeApi for InProcessNode {
    fn base_url(&self) -> &str {
        BASE_URL
    }

    async fn exchange(&self, request: ApiRequest) -> Result<ApiResponse, ClientError> {
        let url = format!("{BASE_URL}{}", request.path);
        let response = self.call(http_request(&request)).await;
        answer(response, &url).await
    }

    async fn events(&self) -> Result<BlockEvents, ClientError> {
        let url = format!("{BASE_URL}{EVENTS_PATH}");
        let mut request = http_request(&ApiRequest::get(EVENTS_PATH.to_string()));
        request.headers_mut().insert(
            header::ACCEPT,
            header::HeaderValue::from_static("text/event-stream"),
        );
        let response = self.call(request).await;
        if !response.status().is_success() {
            return Err(answer(response, &url).await?.error(EVENTS_REQUEST, &url));
        }
        let chunk_url = url.clone();
        let chunks = response.into_body().into_data_stream().map(move |chunk| {
            chunk.map_err(|error| ClientError::Protocol {
                url: chunk_url.clone(),
                detail: format!("the event stream failed: {error}"),
            })
        });
        Ok(BlockEvents::new(url, Box::pin(chunks)))
    }
}
