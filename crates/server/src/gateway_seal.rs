//! The node's side of the gateway link that needs the node itself: the producer loop in gateway
//! mode (one block per sealed batch), `POST /v1/gateway/seal`, `GET /v1/gateway`, and the refusal
//! of submissions. The link's own state, limits and the participant-path rule are in
//! [`crate::gateway_link`], which the node's shared state holds (so that module does not depend
//! on this one's user, the node).
//!
//! The link is not a client: a seal whose signature verifies ([`authenticate_link`], before
//! the per-client rate limit) is never rate limited, so no burst of other requests from the
//! loopback address can make the node refuse a block. A batch sent again after its answer was
//! lost (the gateway retries timeouts and busy answers) gets the same answer again.

use super::failure::Failure;
use super::gateway_link::{gateway_only, market_data, SealJob, SEAL_BODY_MAX_BYTES};
use super::node::{produce_block, ProducerConfig, ProducerError, Shared, Signatures};
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::net::SocketAddr;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;
use walras_api::wire::GatewayStatusJson;
use walras_crypto::Signature;
use walras_engine::transaction_hash;
use walras_gateway::{seal_signing_message, SealReply, SealedBatch, SEAL_SIGNATURE_HEADER};
use walras_types::SignedTransaction;

/// How often the producer looks at the shutdown flag while no batch comes.
const PRODUCER_POLL: Duration = Duration::from_millis(100);

/// The refusal of submissions in gateway mode, on every listener: blocks hold only the
/// gateway's sealed batches, so a transaction taken into the mempool would never commit.
pub(super) fn refuse_if_gateway_only(shared: &Shared, what: &str) -> Result<(), Failure> {
    if shared.gateway.is_none() {
        return Ok(());
    }
    Err(gateway_only(what))
}

/// `GET /v1/gateway`: the block source and the gateway's counters of its last committed batch.
#[utoipa::path(
    get,
    path = "/v1/gateway",
    summary = "Where blocks come from and the fair-access gateway's counters",
    responses(
        (status = 200, description = "every counter null in timer mode", body = GatewayStatusJson)
    )
)]
pub(crate) async fn status(State(shared): State<Arc<Shared>>) -> Json<GatewayStatusJson> {
    let Some(link) = &shared.gateway else {
        return Json(GatewayStatusJson {
            block_source: "timer".into(),
            participants_configured: None,
            participants_connected: None,
            stragglers: None,
            late_trades_total: None,
            queue_full_total: None,
            last_seal_delay_us: None,
            sealed_height: None,
        });
    };
    let last = *link
        .last_seal
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    Json(GatewayStatusJson {
        block_source: "gateway".into(),
        participants_configured: last.map(|(s, _)| s.participants_configured),
        participants_connected: last.map(|(s, _)| s.participants_connected),
        stragglers: last.map(|(s, _)| s.stragglers),
        late_trades_total: last.map(|(s, _)| s.late_trades_total),
        queue_full_total: last.map(|(s, _)| s.queue_full_total),
        last_seal_delay_us: last.map(|(s, _)| s.last_seal_delay_us),
        sealed_height: last.map(|(_, height)| height),
    })
}

/// Marks a seal request whose gateway signature verified ([`authenticate_link`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct LinkAuthenticated;

/// The path of the gateway link's seal.
const SEAL_PATH: &str = "/v1/gateway/seal";

/// Middleware in front of the per-client rate limit: a `POST /v1/gateway/seal` from a loopback
/// peer, in gateway mode, whose signature header verifies over its body under the gateway key
/// is marked [`LinkAuthenticated`] (the rate limit lets it through, the handler does not
/// verify it again). Anything else passes unmarked and is limited as a client's request.
pub(super) async fn authenticate_link(
    State(shared): State<Arc<Shared>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(link) = &shared.gateway else {
        return next.run(request).await;
    };
    let candidate = request.method() == Method::POST
        && request.uri().path() == SEAL_PATH
        && request
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .is_some_and(|info| info.0.ip().is_loopback());
    let signature = request
        .headers()
        .get(SEAL_SIGNATURE_HEADER)
        .and_then(|value| value.to_str().ok())
        .and_then(|text| text.parse::<Signature>().ok());
    let (true, Some(signature)) = (candidate, signature) else {
        return next.run(request).await;
    };
    let (mut parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, SEAL_BODY_MAX_BYTES).await else {
        return too_large().into_response();
    };
    if walras_crypto::verify(&link.key, &seal_signing_message(&body), &signature).is_ok() {
        parts.extensions.insert(LinkAuthenticated);
    }
    next.run(Request::from_parts(parts, Body::from(body))).await
}

fn too_large() -> Failure {
    Failure::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
        format!("a sealed batch is at most {SEAL_BODY_MAX_BYTES} bytes"),
    )
}

/// The producer in gateway mode: one block per sealed batch, until shutdown.
pub(super) fn run_gateway_producer(
    shared: &Shared,
    config: &ProducerConfig,
    jobs: &Receiver<SealJob>,
) -> Result<(), ProducerError> {
    // The last block's batch digest and answer: the same batch sent again (its answer was
    // lost to a timeout) is answered again, not refused as the wrong height.
    let mut last: Option<(u64, [u8; 32], SealReply)> = None;
    loop {
        if shared.is_shutting_down() {
            return Ok(());
        }
        let job = match jobs.recv_timeout(PRODUCER_POLL) {
            Ok(job) => job,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return Ok(()),
        };
        let expected = shared.tip().height + 1;
        if let Some((_, _, reply)) = last
            .as_ref()
            .filter(|(height, digest, _)| *height == job.height && *digest == job.digest)
        {
            let _ = job.reply.send(Ok(reply.clone()));
            continue;
        }
        // A node restarted after committing this batch (its answer lost with the process):
        // the block at the tip is that batch's, so its answer is rebuilt from the store.
        if last.is_none() && job.height + 1 == expected {
            if let Some(reply) = stored_reply(shared, &job)? {
                last = Some((job.height, job.digest, reply.clone()));
                let _ = job.reply.send(Ok(reply));
                continue;
            }
        }
        if job.height != expected {
            let _ = job.reply.send(Err(Failure::new(
                StatusCode::CONFLICT,
                "wrong_height",
                format!(
                    "the sealed batch is for height {}, the node's next block is {expected}",
                    job.height
                ),
            )));
            continue;
        }
        if job.transactions.len() > config.max_block_txs {
            let _ = job.reply.send(Err(Failure::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                format!(
                    "the sealed batch holds {} transactions, the node's --max-block-txs is {}; \
                     give the gateway the same limit",
                    job.transactions.len(),
                    config.max_block_txs
                ),
            )));
            continue;
        }
        let batch = job
            .transactions
            .into_iter()
            .map(|signed| (transaction_hash(&signed), signed))
            .collect();
        // A failure here stops the node (as in timer mode); the gateway sees its request fail.
        let outcome = produce_block(shared, config, batch, Signatures::Unchecked)?;
        let dropped: Vec<(u32, String)> = outcome
            .dropped
            .iter()
            .map(|(index, reason)| (*index, reason.name().to_string()))
            .collect();
        let transactions = outcome.accepted + outcome.dropped.len();
        let reply = committed_reply(shared, &outcome.header, transactions, dropped);
        last = Some((job.height, job.digest, reply.clone()));
        let _ = job.reply.send(Ok(reply));
    }
}

/// The answer for the committed block `header` (the tip): in gateway mode nothing else writes,
/// so the books read now are the books at this height.
fn committed_reply(
    shared: &Shared,
    header: &walras_engine::BlockHeader,
    transactions: usize,
    dropped: Vec<(u32, String)>,
) -> SealReply {
    let market = {
        let state = shared.state.blocking_read();
        market_data(&state, header)
    };
    SealReply {
        height: header.height,
        block_hash: *header.hash().as_bytes(),
        state_root: *header.state_root.as_bytes(),
        valuations: header.valuations.clone(),
        transactions: transactions as u32,
        dropped,
        market,
    }
}

/// The answer to `job` rebuilt from the store, when the tip block holds exactly `job`'s
/// transactions (the batch was committed, then the node stopped before answering); `None`
/// otherwise.
fn stored_reply(shared: &Shared, job: &SealJob) -> Result<Option<SealReply>, ProducerError> {
    let height = job.height;
    let Some(block) = shared.store.block(height).map_err(ProducerError::Store)? else {
        return Ok(None);
    };
    if block.transactions != job.transactions {
        return Ok(None);
    }
    let dropped = shared
        .store
        .dropped(height)
        .map_err(ProducerError::Store)?
        .unwrap_or_default()
        .iter()
        .map(|(index, reason)| (*index, reason.name().to_string()))
        .collect();
    Ok(Some(committed_reply(
        shared,
        &block.header,
        block.transactions.len(),
        dropped,
    )))
}

/// `POST /v1/gateway/seal`: a sealed batch from the gateway (loopback, signed, next height).
#[utoipa::path(
    post,
    path = "/v1/gateway/seal",
    summary = "A sealed batch from the fair-access gateway (loopback peers only)",
    description = "The body is the gateway link's sealed batch, signed in a header by the gateway's key; see docs/gateway.md.",
    request_body(content((walras_api::wire::CanonicalBytes = "application/octet-stream"))),
    responses(
        (status = 200, description = "durable: the block's canonical answer", content((walras_api::wire::CanonicalBytes = "application/octet-stream"))),
        (status = 400, description = "malformed: not a sealed batch", body = walras_api::wire::ApiError),
        (status = 403, description = "not_loopback, or the signature (header) is not the gateway's", body = walras_api::wire::ApiError),
        (status = 404, description = "no_gateway_link: the node runs with its own timer", body = walras_api::wire::ApiError),
        (status = 413, description = "too_large", body = walras_api::wire::ApiError)
    )
)]
pub(crate) async fn seal(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    match seal_inner(&shared, request).await {
        Ok(bytes) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/octet-stream")],
            bytes,
        )
            .into_response(),
        Err(failure) => failure.into_response(),
    }
}

async fn seal_inner(shared: &Shared, request: Request) -> Result<Vec<u8>, Failure> {
    let Some(link) = &shared.gateway else {
        return Err(Failure::not_found(
            "no_gateway_link",
            "this node cuts blocks on its own timer; the gateway link exists only with \
             --block-source gateway",
        ));
    };
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|info| info.0);
    if !peer.is_some_and(|peer| peer.ip().is_loopback()) {
        return Err(Failure::new(
            StatusCode::FORBIDDEN,
            "not_loopback",
            "the gateway link is served to loopback peers only: run the gateway on this host",
        ));
    }
    let verified = request.extensions().get::<LinkAuthenticated>().is_some();
    let signature = request
        .headers()
        .get(SEAL_SIGNATURE_HEADER)
        .and_then(|value| value.to_str().ok())
        .and_then(|text| text.parse::<Signature>().ok());
    let body: Bytes = axum::body::to_bytes(request.into_body(), SEAL_BODY_MAX_BYTES)
        .await
        .map_err(|_| too_large())?;
    let authentic = verified
        || signature.is_some_and(|signature| {
            walras_crypto::verify(&link.key, &seal_signing_message(&body), &signature).is_ok()
        });
    if !authentic {
        return Err(Failure::new(
            StatusCode::UNAUTHORIZED,
            "bad_gateway_signature",
            format!(
                "the sealed batch carries no valid {SEAL_SIGNATURE_HEADER} under the configured \
                 gateway key: check --gateway-key against the gateway's key file"
            ),
        ));
    }
    let batch = SealedBatch::decode(&body)
        .map_err(|error| Failure::malformed(format!("sealed batch: {error}")))?;
    let transactions = batch
        .transactions
        .iter()
        .enumerate()
        .map(|(index, bytes)| {
            SignedTransaction::decode(bytes)
                .map_err(|error| Failure::malformed(format!("sealed transaction {index}: {error}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let (reply, answer) = tokio::sync::oneshot::channel();
    let job = SealJob {
        height: batch.height,
        digest: *walras_crypto::hash(&body).as_bytes(),
        transactions,
        reply,
    };
    // The channel holds one job; a second concurrent post waits here, not in the producer.
    let jobs = link.jobs.clone();
    tokio::task::spawn_blocking(move || jobs.send(job))
        .await
        .map_err(|_| Failure::internal("handing the batch to the producer failed"))?
        .map_err(|_| Failure::internal("the block producer stopped"))?;
    let reply = answer
        .await
        .map_err(|_| Failure::internal("the block producer stopped before answering"))??;
    *link
        .last_seal
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some((batch.stats, reply.height));
    reply
        .encode()
        .ok_or_else(|| Failure::internal("the block's answer exceeds the link's limits"))
}
