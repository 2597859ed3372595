//! The gateway's end of the loopback link to a node run with `--block-source gateway`: reads
//! the node's tip at start, then posts each sealed batch, signed, and waits for the committed
//! block's answer ([`walras_gateway::link`]).
//!
//! Refusals that can pass are retried, never turned into a stop: a sealed batch is sent again
//! after a 429 or 503 (busy), a 408 or a timeout, or a connection that failed, with a backoff
//! doubling from [`RETRY_PAUSE_MIN`] to [`RETRY_PAUSE_MAX`] (or the node's `Retry-After`, capped
//! the same), for as long as the refusals stay transient; each retry is logged and counted. This
//! is safe because the node answers a batch it already committed (same height, same bytes) with
//! the same answer. Only a refusal that cannot pass (a bad signature, a malformed or oversized
//! batch, another height) stops the gateway. Account lookups are retried a few times, briefly:
//! they hold one participant's uplink, and the trade can be sent again.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use walras_gateway::{
    seal_signing_message, GatewayStats, SealReply, SealedBatch, SEAL_SIGNATURE_HEADER,
};

/// A sealed block may wait for the block before it and for clearing: generous, but bounded.
const COMMIT_TIMEOUT: Duration = Duration::from_secs(60);
/// The first pause before a sealed batch is sent again; it doubles up to [`RETRY_PAUSE_MAX`].
pub(crate) const RETRY_PAUSE_MIN: Duration = Duration::from_millis(10);
pub(crate) const RETRY_PAUSE_MAX: Duration = Duration::from_secs(1);
/// An account lookup holds one participant's uplink: short, and tried at most this often.
const ACCOUNT_TIMEOUT: Duration = Duration::from_secs(2);
const ACCOUNT_ATTEMPTS: u32 = 3;

/// Whether an HTTP status is a refusal that can pass (the same request may succeed later).
pub(crate) fn transient_status(status: u16) -> bool {
    matches!(status, 408 | 429 | 502 | 503 | 504)
}

/// The pause before retry number `attempt` (1: the first retry): doubling from
/// [`RETRY_PAUSE_MIN`], at most [`RETRY_PAUSE_MAX`]; a `Retry-After` the node sent replaces it
/// (capped the same).
pub(crate) fn retry_pause(attempt: u32, retry_after: Option<Duration>) -> Duration {
    let doubling = RETRY_PAUSE_MIN.saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
    retry_after.unwrap_or(doubling).min(RETRY_PAUSE_MAX)
}

fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let text = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    let seconds: f64 = text.trim().parse().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds.min(60.0)))
}

/// What the node says of an account at its tip.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AccountFacts {
    /// `None` when the stored key is not a valid Ed25519 key (nothing it signs verifies).
    pub key: Option<walras_crypto::PublicKey>,
    /// The highest sequence number of the account's committed transactions.
    pub last_sequence: u64,
    /// Its balances (asset, amount), sorted by asset, positive only.
    pub balances: Vec<(walras_types::AssetId, u64)>,
}

#[derive(Debug, thiserror::Error)]
pub enum NodeLinkError {
    #[error("the node URL {url:?}: {cause}")]
    Url { url: String, cause: String },
    #[error("the node at {url} did not answer: {cause}")]
    Unreachable { url: String, cause: String },
    #[error("the node refused block {height} ({status}): {body}; is it running with --block-source gateway and this gateway's --gateway-key?")]
    Refused {
        height: u64,
        status: u16,
        body: String,
    },
    #[error("the node's answer could not be read: {0}")]
    BadAnswer(String),
    #[error("block {height} exceeds the link's limits")]
    TooLarge { height: u64 },
    #[error("the node is busy ({cause}) after {attempts} attempts; send the trade again")]
    Busy { cause: String, attempts: u32 },
}

pub(crate) struct NodeLink {
    base: String,
    client: reqwest::Client,
    key: walras_crypto::Keypair,
    /// Sealed batches sent again after a transient refusal (`/metrics`).
    retries: AtomicU64,
}

impl NodeLink {
    pub(crate) fn new(base: &str, key: walras_crypto::Keypair) -> Result<NodeLink, NodeLinkError> {
        let base = base.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(NodeLinkError::Url {
                url: base,
                cause: "must start with http:// (the link runs over loopback)".into(),
            });
        }
        let client = reqwest::Client::builder()
            .timeout(COMMIT_TIMEOUT)
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(|error| NodeLinkError::Url {
                url: base.clone(),
                cause: error.to_string(),
            })?;
        Ok(NodeLink {
            base,
            client,
            key,
            retries: AtomicU64::new(0),
        })
    }

    /// Sealed batches sent again after a transient refusal, since start.
    pub(crate) fn seal_retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    /// The node's current height (`GET /v1/status`).
    pub(crate) async fn status_height(&self) -> Result<u64, NodeLinkError> {
        let (_, body) = self.get(&format!("{}/v1/status", self.base), None).await?;
        let status: walras_api::wire::StatusJson = serde_json::from_slice(&body)
            .map_err(|e| NodeLinkError::BadAnswer(format!("status: {e}")))?;
        Ok(status.height)
    }

    /// Account `id` at the node's tip (`GET /v1/accounts/{id}`): `Ok(None)` when the account
    /// does not exist (404). A transient refusal or failure is tried again, at most
    /// [`ACCOUNT_ATTEMPTS`] times in all, then reported as [`NodeLinkError::Busy`].
    pub(crate) async fn account(&self, id: u64) -> Result<Option<AccountFacts>, NodeLinkError> {
        let url = format!("{}/v1/accounts/{id}", self.base);
        let mut attempt = 0;
        let (status, body) = loop {
            attempt += 1;
            let cause = match self.get(&url, Some(ACCOUNT_TIMEOUT)).await {
                Ok((status, _)) if transient_status(status.as_u16()) => status.to_string(),
                Ok(answer) => break answer,
                Err(error) => error.to_string(),
            };
            if attempt >= ACCOUNT_ATTEMPTS {
                return Err(NodeLinkError::Busy {
                    cause: format!("account {id}: {cause}"),
                    attempts: attempt,
                });
            }
            tokio::time::sleep(retry_pause(attempt, None)).await;
        };
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(NodeLinkError::BadAnswer(format!(
                "account {id}: {status}: {}",
                String::from_utf8_lossy(&body)
                    .chars()
                    .take(300)
                    .collect::<String>()
            )));
        }
        let account: walras_api::wire::AccountJson = serde_json::from_slice(&body)
            .map_err(|e| NodeLinkError::BadAnswer(format!("account {id}: {e}")))?;
        let bytes = hex::decode(&account.public_key)
            .map_err(|e| NodeLinkError::BadAnswer(format!("account {id}'s key: {e}")))?;
        let mut balances: Vec<(walras_types::AssetId, u64)> = account
            .balances
            .iter()
            .filter(|balance| balance.amount > 0)
            .map(|balance| (walras_types::AssetId(balance.asset), balance.amount))
            .collect();
        balances.sort_unstable();
        Ok(Some(AccountFacts {
            key: walras_crypto::PublicKey::from_bytes(&bytes).ok(),
            last_sequence: account.last_sequence,
            balances,
        }))
    }

    /// `GET url`: the status and the whole body, or `Unreachable` naming the URL.
    async fn get(
        &self,
        url: &str,
        timeout: Option<std::time::Duration>,
    ) -> Result<(reqwest::StatusCode, Vec<u8>), NodeLinkError> {
        let unreachable = |cause: String| NodeLinkError::Unreachable {
            url: url.to_string(),
            cause,
        };
        let mut request = self.client.get(url);
        if let Some(timeout) = timeout {
            request = request.timeout(timeout);
        }
        let response = request
            .send()
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        Ok((status, body.to_vec()))
    }

    /// Sends block `height`, with the gateway's counters, and waits until the node committed it.
    /// Transient refusals and failures are retried (see the module documentation) until the
    /// node answers; an error means a refusal that cannot pass.
    pub(crate) async fn commit(
        &self,
        height: u64,
        stats: GatewayStats,
        transactions: Vec<Vec<u8>>,
    ) -> Result<SealReply, NodeLinkError> {
        let body = SealedBatch {
            height,
            stats,
            transactions,
        }
        .encode()
        .ok_or(NodeLinkError::TooLarge { height })?;
        let signature = self.key.sign(&seal_signing_message(&body));
        let url = format!("{}/v1/gateway/seal", self.base);
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let sent = self
                .client
                .post(&url)
                .header("content-type", "application/octet-stream")
                .header(SEAL_SIGNATURE_HEADER, signature.to_string())
                .body(body.clone())
                .send()
                .await;
            // Every failure to get an answer may pass: the node answers a batch it already
            // committed with the same answer, so sending it again is safe.
            let (cause, after) = match sent {
                Err(error) => (error.to_string(), None),
                Ok(response) if transient_status(response.status().as_u16()) => {
                    let after = retry_after(response.headers());
                    let status = response.status();
                    let text = response.text().await.unwrap_or_default();
                    (
                        format!("{status}: {}", text.chars().take(200).collect::<String>()),
                        after,
                    )
                }
                Ok(response) => {
                    let status = response.status();
                    match response.bytes().await {
                        Ok(bytes) => break self.answer(height, status, &bytes),
                        Err(error) => (error.to_string(), None),
                    }
                }
            };
            let pause = retry_pause(attempt, after);
            self.retries.fetch_add(1, Ordering::Relaxed);
            if attempt == 1 || attempt.is_power_of_two() {
                tracing::warn!(
                    "block {height}: the node did not take it ({cause}); attempt {attempt}, \
                     sending it again in {pause:?}"
                );
            }
            tokio::time::sleep(pause).await;
        }
    }

    /// The node's answer to block `height`: its reply, or the refusal that cannot pass.
    fn answer(
        &self,
        height: u64,
        status: reqwest::StatusCode,
        bytes: &[u8],
    ) -> Result<SealReply, NodeLinkError> {
        if !status.is_success() {
            return Err(NodeLinkError::Refused {
                height,
                status: status.as_u16(),
                body: String::from_utf8_lossy(bytes).chars().take(500).collect(),
            });
        }
        let reply =
            SealReply::decode(bytes).map_err(|e| NodeLinkError::BadAnswer(e.to_string()))?;
        if reply.height != height {
            return Err(NodeLinkError::BadAnswer(format!(
                "asked for block {height}, the node committed {}",
                reply.height
            )));
        }
        Ok(reply)
    }
}

/// A stand-in node's answer to the sealed batch `body` (tests): committed whole, nothing
/// dropped.
#[cfg(test)]
pub(crate) fn stand_in_reply(body: &[u8]) -> Vec<u8> {
    let batch = SealedBatch::decode(body).expect("the gateway's batch decodes");
    SealReply {
        height: batch.height,
        block_hash: [1; 32],
        state_root: [2; 32],
        valuations: Vec::new(),
        transactions: batch.transactions.len() as u32,
        dropped: Vec::new(),
        market: walras_gateway::MarketData::default(),
    }
    .encode()
    .expect("the reply encodes")
}

/// A stand-in node at height 0 (tests): `GET /v1/status`; `GET /v1/accounts/{id}`, every
/// account held by `owner` with 1,000,000 of asset 0 and no sequence number used; and
/// `POST /v1/gateway/seal`, answered after `commit_time` with [`stand_in_reply`]. Returns its
/// URL and the counts of seal requests received and answered.
#[cfg(test)]
pub(crate) async fn stand_in_node(
    commit_time: std::time::Duration,
    owner: walras_crypto::PublicKey,
) -> (
    String,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use walras_api::wire::{AccountJson, BalanceJson, StatusJson};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let received = Arc::new(AtomicUsize::new(0));
    let answered = Arc::new(AtomicUsize::new(0));
    let (r, a) = (received.clone(), answered.clone());
    let status = StatusJson {
        version: "test".into(),
        height: 0,
        block_hash: "00".repeat(32),
        state_root: "00".repeat(32),
        assets: 2,
        accounts: 0,
        open_offers: 0,
        mempool_transactions: 0,
        mempool_capacity: 0,
        commit_bound_ms: None,
        dev_genesis: None,
    };
    let account = move |id: u64| AccountJson {
        id,
        public_key: hex::encode(owner.as_bytes()),
        last_sequence: 0,
        next_sequence: 1,
        balances: vec![BalanceJson {
            asset: 0,
            amount: 1_000_000,
        }],
    };
    let app = axum::Router::new()
        .route(
            "/v1/status",
            axum::routing::get(move || {
                let status = status.clone();
                async move { serde_json::to_vec(&status).unwrap() }
            }),
        )
        .route(
            "/v1/accounts/{id}",
            axum::routing::get(
                move |axum::extract::Path(id): axum::extract::Path<u64>| async move {
                    serde_json::to_vec(&account(id)).unwrap()
                },
            ),
        )
        .route(
            "/v1/gateway/seal",
            axum::routing::post(move |body: axum::body::Bytes| {
                let (received, answered) = (r.clone(), a.clone());
                async move {
                    received.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(commit_time).await;
                    answered.fetch_add(1, Ordering::SeqCst);
                    stand_in_reply(&body)
                }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, received, answered)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    /// A stand-in node on loopback whose `POST /v1/gateway/seal` answers `refusals` (status,
    /// body) in turn, then the committed block's reply; returns its URL and the request count.
    async fn fake_node(refusals: Vec<(u16, &'static str)>) -> (String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let count = Arc::new(AtomicUsize::new(0));
        let seen = count.clone();
        let app = axum::Router::new().route(
            "/v1/gateway/seal",
            axum::routing::post(move |body: axum::body::Bytes| {
                let seen = seen.clone();
                let refusals = refusals.clone();
                async move {
                    let n = seen.fetch_add(1, Ordering::SeqCst);
                    if let Some((status, text)) = refusals.get(n) {
                        let status = axum::http::StatusCode::from_u16(*status).unwrap();
                        return (status, text.as_bytes().to_vec());
                    }
                    (axum::http::StatusCode::OK, stand_in_reply(&body))
                }
            }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, count)
    }

    fn link(url: &str) -> NodeLink {
        NodeLink::new(url, walras_crypto::Keypair::from_seed([5; 32])).unwrap()
    }

    /// Issue 26, item 3. Trigger: the node's per-IP rate limit answered a seal with 429 (a local
    /// client had spent the loopback address's budget); the gateway stopped with "the node
    /// refused block N (429)". Refusals that can pass (429, 503, 408) are now sent again with
    /// backoff until the node takes the block.
    #[tokio::test]
    async fn a_sealed_batch_refused_as_busy_is_sent_again_until_the_node_takes_it() {
        let (url, count) = fake_node(vec![
            (429, "rate_limited"),
            (503, "busy"),
            (408, "timeout"),
            (429, "rate_limited"),
        ])
        .await;
        let node = link(&url);
        let started = std::time::Instant::now();
        let reply = node
            .commit(7, GatewayStats::default(), vec![vec![1, 2, 3]])
            .await
            .expect("the block is taken once the refusals pass");
        assert_eq!((reply.height, reply.transactions), (7, 1));
        assert_eq!(count.load(Ordering::SeqCst), 5);
        assert_eq!(node.seal_retries(), 4);
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "backoff is short"
        );
    }

    /// A refusal that cannot pass (a bad signature: the node's 401) is not retried: it stops
    /// the gateway with the node's words.
    #[tokio::test]
    async fn a_refusal_that_cannot_pass_is_reported_at_once() {
        let (url, count) = fake_node(vec![(401, "bad_gateway_signature")]).await;
        let error = link(&url)
            .commit(7, GatewayStats::default(), Vec::new())
            .await
            .unwrap_err();
        assert!(
            matches!(error, NodeLinkError::Refused { height: 7, status: 401, ref body } if body.contains("bad_gateway_signature")),
            "{error}"
        );
        assert_eq!(count.load(Ordering::SeqCst), 1);
    }

    /// A node that is not listening yet (connection refused) is waited for.
    #[tokio::test]
    async fn a_node_that_is_not_listening_yet_is_waited_for() {
        // Bound but not listening: connections are refused, and no other process can take
        // the port before the node listens on it (a released port could be).
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let address = socket.local_addr().unwrap();
        let node = link(&format!("http://{address}"));
        let commit =
            tokio::spawn(async move { node.commit(3, GatewayStats::default(), Vec::new()).await });
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(!commit.is_finished(), "still retrying, not stopped");
        // The node comes up on that address.
        let listener = socket.listen(1024).unwrap();
        let app = axum::Router::new().route(
            "/v1/gateway/seal",
            axum::routing::post(|body: axum::body::Bytes| async move { stand_in_reply(&body) }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        let reply = tokio::time::timeout(Duration::from_secs(5), commit)
            .await
            .expect("taken within the backoff cap")
            .unwrap()
            .unwrap();
        assert_eq!(reply.height, 3);
    }

    #[test]
    fn the_backoff_doubles_and_is_capped() {
        assert_eq!(retry_pause(1, None), RETRY_PAUSE_MIN);
        assert_eq!(retry_pause(2, None), RETRY_PAUSE_MIN * 2);
        assert_eq!(retry_pause(40, None), RETRY_PAUSE_MAX);
        assert_eq!(
            retry_pause(1, Some(Duration::from_secs(30))),
            RETRY_PAUSE_MAX
        );
        assert!(transient_status(429) && transient_status(503) && !transient_status(409));
    }
}
