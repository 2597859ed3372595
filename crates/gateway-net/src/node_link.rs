//! The gateway's end of the loopback link to a node run with `--block-source gateway`: reads
//! the node's tip at start, then posts each sealed batch, signed, and waits for the committed
//! block's answer ([`walras_gateway::link`]).

use std::time::Duration;
use walras_gateway::link::{
    seal_signing_message, GatewayStats, SealReply, SealedBatch, SEAL_SIGNATURE_HEADER,
};

/// A sealed block may wait for the block before it and for clearing: generous, but bounded.
const COMMIT_TIMEOUT: Duration = Duration::from_secs(60);
/// Network failures (not refusals) are retried this many times, this far apart.
const RETRIES: usize = 50;
const RETRY_PAUSE: Duration = Duration::from_millis(100);
/// An account lookup holds one participant's uplink: short.
const ACCOUNT_TIMEOUT: Duration = Duration::from_secs(5);

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
}

pub struct NodeLink {
    base: String,
    client: reqwest::Client,
    key: walras_crypto::Keypair,
}

impl NodeLink {
    pub fn new(base: &str, key: walras_crypto::Keypair) -> Result<NodeLink, NodeLinkError> {
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
        Ok(NodeLink { base, client, key })
    }

    /// The node's current height (`GET /v1/status`).
    pub async fn status_height(&self) -> Result<u64, NodeLinkError> {
        let (_, body) = self.get(&format!("{}/v1/status", self.base), None).await?;
        let status: walras_api::wire::StatusJson = serde_json::from_slice(&body)
            .map_err(|e| NodeLinkError::BadAnswer(format!("status: {e}")))?;
        Ok(status.height)
    }

    /// The key of account `id` at the node's tip (`GET /v1/accounts/{id}`): `Ok(None)` when the
    /// account does not exist (404), `Ok(Some(None))` when its stored key is not a valid Ed25519
    /// key (nothing it signs verifies).
    pub async fn account_key(
        &self,
        id: u64,
    ) -> Result<Option<Option<walras_crypto::PublicKey>>, NodeLinkError> {
        let url = format!("{}/v1/accounts/{id}", self.base);
        let (status, body) = self.get(&url, Some(ACCOUNT_TIMEOUT)).await?;
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
        Ok(Some(walras_crypto::PublicKey::from_bytes(&bytes).ok()))
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
    pub async fn commit(
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
        let mut attempt = 0;
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
            let response = match sent {
                Ok(response) => response,
                // Not connected: nothing reached the node, so sending again is safe. (A
                // timeout after sending is not retried blindly: the next attempt would be
                // refused as the wrong height if the first one committed.)
                Err(error) if error.is_connect() && attempt < RETRIES => {
                    tokio::time::sleep(RETRY_PAUSE).await;
                    continue;
                }
                Err(error) => {
                    return Err(NodeLinkError::Unreachable {
                        url,
                        cause: error.to_string(),
                    })
                }
            };
            let status = response.status();
            let bytes = response
                .bytes()
                .await
                .map_err(|e| NodeLinkError::BadAnswer(e.to_string()))?;
            if !status.is_success() {
                return Err(NodeLinkError::Refused {
                    height,
                    status: status.as_u16(),
                    body: String::from_utf8_lossy(&bytes).chars().take(500).collect(),
                });
            }
            let reply =
                SealReply::decode(&bytes).map_err(|e| NodeLinkError::BadAnswer(e.to_string()))?;
            if reply.height != height {
                return Err(NodeLinkError::BadAnswer(format!(
                    "asked for block {height}, the node committed {}",
                    reply.height
                )));
            }
            return Ok(reply);
        }
    }
}
