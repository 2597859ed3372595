//! `--block-source gateway`: the node cuts blocks only from batches sealed by `walras gateway`
//! (the fair-access gateway, `docs/gateway.md`), never on its own timer.
//!
//! The gateway posts each sealed batch to `POST /v1/gateway/seal` over loopback, signed with its
//! Ed25519 key ([`walras_gateway::link`]); the node accepts a batch only from a loopback peer,
//! only under the configured gateway key, and only for its next height (so a replayed body is
//! refused), executes it as one block (the producer thread, as in timer mode), and answers once
//! the block is durable with its header facts and drops. That answer is how the gateway learns
//! the block's publication: it seals the next block in delivery-clock time from it.
//!
//! In this mode the paths a participant could use to bypass the gateway's buffers answer a typed
//! refusal (`403 gateway_only`) on the public listener: submitting (`POST /v1/transactions`,
//! `/v1/transactions/batch`), and seeing block N before its release buffer delivers it
//! (`/v1/events`, `/v1/blocks/*`, `/v1/books/*`, `/v1/prices`, `/v1/offers/*/explain`). The operator gets them on a
//! separate listener (`--operator-listen`, loopback by default), except submitting: blocks
//! come only from the gateway, so a transaction in the mempool would never be committed.
//!
//! Each sealed batch carries the gateway's counters ([`GatewayStats`]); the node keeps the last
//! and serves them at `GET /v1/gateway` ([`walras_api::wire::GatewayStatusJson`]).

use super::failure::Failure;
use super::node::{produce_block, ProducerConfig, ProducerError, Shared};
use axum::body::Bytes;
use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::net::SocketAddr;
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use walras_api::wire::GatewayStatusJson;
use walras_crypto::{PublicKey, Signature};
use walras_engine::block::transaction_hash;
use walras_engine::BlockHeader;
use walras_engine::ExchangeState;
use walras_gateway::link::{
    seal_signing_message, GatewayStats, SealReply, SealedBatch, SEAL_SIGNATURE_HEADER,
};
use walras_gateway::market::{
    DepthLevel, MarketData, PairAmount, PairDepth, DEPTH_LEVELS_MAX, MARKET_PAIRS_MAX,
};
use walras_types::SignedTransaction;
use walras_types::{AssetId, PairId};

/// Largest sealed-batch body (50,000 transactions of a few hundred bytes fit many times over).
pub const SEAL_BODY_MAX_BYTES: usize = 64 * 1024 * 1024;
/// How often the producer looks at the shutdown flag while no batch comes.
const PRODUCER_POLL: Duration = Duration::from_millis(100);

/// The gateway link's configuration.
#[derive(Clone, Debug)]
pub struct GatewayLinkConfig {
    /// The key the gateway signs sealed batches with.
    pub gateway_key: PublicKey,
    /// Where the operator's listener binds (`127.0.0.1:0`: any free loopback port, printed on
    /// the second line of stdout): the paths closed to participants on the public listener.
    pub operator_listen: String,
}

/// A batch for the producer and where its answer goes.
pub(super) struct SealJob {
    height: u64,
    transactions: Vec<SignedTransaction>,
    reply: tokio::sync::oneshot::Sender<Result<SealReply, Failure>>,
}

/// The node's end of the link (in [`Shared`] when the node runs with `--block-source gateway`).
pub struct GatewayLink {
    key: PublicKey,
    pub(super) operator_listen: String,
    /// The counters of the last batch committed, and its height.
    last_seal: Mutex<Option<(GatewayStats, u64)>>,
    jobs: SyncSender<SealJob>,
    /// Taken by the producer thread when it starts.
    receiver: Mutex<Option<Receiver<SealJob>>>,
}

impl GatewayLink {
    pub fn new(config: &GatewayLinkConfig) -> GatewayLink {
        // One batch in flight: the gateway seals block N+1 only after block N's answer.
        let (jobs, receiver) = sync_channel(1);
        GatewayLink {
            key: config.gateway_key,
            operator_listen: config.operator_listen.clone(),
            last_seal: Mutex::new(None),
            jobs,
            receiver: Mutex::new(Some(receiver)),
        }
    }

    pub(super) fn take_receiver(&self) -> Option<Receiver<SealJob>> {
        self.receiver
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
    }
}

/// The refusal of submissions in gateway mode, on every listener: blocks hold only the
/// gateway's sealed batches, so a transaction taken into the mempool would never commit.
pub(super) fn refuse_if_gateway_only(shared: &Shared, what: &str) -> Result<(), Failure> {
    if shared.gateway.is_none() {
        return Ok(());
    }
    Err(gateway_only(what))
}

fn gateway_only(what: &str) -> Failure {
    Failure::new(
        StatusCode::FORBIDDEN,
        "gateway_only",
        format!(
            "this node cuts blocks only from the fair-access gateway (--block-source gateway): \
             {what} is closed to participants (it would bypass the gateway's buffers); connect \
             to `walras gateway` instead (operators: the --operator-listen address)"
        ),
    )
}

/// Whether a route (its matched path) is closed to participants in gateway mode: submitting,
/// the event stream, and everything that shows a block's contents or the books before the
/// participants' release buffers deliver the block (an offer's explanation says how it fared
/// in the newest block).
pub fn closed_to_participants(path: &str) -> bool {
    path == "/v1/transactions"
        || path == "/v1/transactions/batch"
        || path == "/v1/events"
        || path == "/v1/prices"
        || path.starts_with("/v1/blocks/")
        || path.starts_with("/v1/books/")
        || path.starts_with("/v1/offers/")
}

/// Middleware of the public listener in gateway mode: refuses the routes
/// [`closed_to_participants`] with `403 gateway_only` before their handlers run.
pub(super) async fn close_participant_paths(request: Request, next: Next) -> Response {
    let closed = request
        .extensions()
        .get::<MatchedPath>()
        .map(|path| path.as_str().to_string())
        .filter(|path| closed_to_participants(path));
    match closed {
        Some(path) => gateway_only(&format!("{} {path}", request.method())).into_response(),
        None => next.run(request).await,
    }
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
pub async fn status(State(shared): State<Arc<Shared>>) -> Json<GatewayStatusJson> {
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

/// The producer in gateway mode: one block per sealed batch, until shutdown.
pub(super) fn run_gateway_producer(
    shared: &Shared,
    config: &ProducerConfig,
    jobs: &Receiver<SealJob>,
) -> Result<(), ProducerError> {
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
        let outcome = produce_block(shared, config, batch)?;
        let header = &outcome.header;
        let market = {
            // The block is committed and nothing else writes in gateway mode: the books read
            // here are the books at this height.
            let state = shared.state.blocking_read();
            market_data(&state, header)
        };
        let reply = SealReply {
            height: header.height,
            block_hash: *header.hash().as_bytes(),
            state_root: *header.state_root.as_bytes(),
            valuations: header.valuations.clone(),
            transactions: outcome.accepted as u32 + outcome.dropped.len() as u32,
            dropped: outcome
                .dropped
                .iter()
                .map(|(index, reason)| (*index, reason.name().to_string()))
                .collect(),
            market,
        };
        let _ = job.reply.send(Ok(reply));
    }
}

/// The feed's market data for the block just committed: what each pair sold (from the header)
/// and, for every pair with resting offers, the count and the [`DEPTH_LEVELS_MAX`] lowest limit
/// prices with their amounts. Pairs in (sell, buy) order, at most [`MARKET_PAIRS_MAX`] of each.
fn market_data(state: &ExchangeState, header: &BlockHeader) -> MarketData {
    let trades: Vec<PairAmount> = header
        .trades
        .iter()
        .take(MARKET_PAIRS_MAX)
        .map(|trade| PairAmount {
            sell: trade.sell.0,
            buy: trade.buy.0,
            sold: trade.sold,
        })
        .collect();
    let assets = state.assets() as u16;
    let mut depth = Vec::new();
    let mut depth_truncated = false;
    'pairs: for sell in 0..assets {
        for buy in (0..assets).filter(|buy| *buy != sell) {
            let book = state.book(PairId {
                sell: AssetId(sell),
                buy: AssetId(buy),
            });
            if book.is_empty() {
                continue;
            }
            if depth.len() == MARKET_PAIRS_MAX {
                depth_truncated = true;
                break 'pairs;
            }
            let mut levels: Vec<DepthLevel> = Vec::with_capacity(DEPTH_LEVELS_MAX);
            for (key, amount) in book {
                let full = levels.len() == DEPTH_LEVELS_MAX;
                match levels.last_mut() {
                    Some(level) if level.min_price == key.min_price.0 => {
                        level.amount = level.amount.saturating_add(*amount);
                        level.offers = level.offers.saturating_add(1);
                    }
                    _ if full => break,
                    _ => levels.push(DepthLevel {
                        min_price: key.min_price.0,
                        amount: *amount,
                        offers: 1,
                    }),
                }
            }
            depth.push(PairDepth {
                sell,
                buy,
                offers: book.len() as u64,
                levels,
            });
        }
    }
    MarketData {
        trades,
        depth,
        depth_truncated,
    }
}

/// `POST /v1/gateway/seal`: a sealed batch from the gateway (loopback, signed, next height).
#[utoipa::path(
    post,
    path = "/v1/gateway/seal",
    summary = "A sealed batch from the fair-access gateway (loopback peers only)",
    description = "The body is the gateway link's sealed batch, signed in a header by the gateway's key; see docs/gateway.md.",
    request_body(content((crate::openapi::CanonicalBytes = "application/octet-stream"))),
    responses(
        (status = 200, description = "durable: the block's canonical answer", content((crate::openapi::CanonicalBytes = "application/octet-stream"))),
        (status = 400, description = "malformed: not a sealed batch", body = walras_api::wire::ApiError),
        (status = 403, description = "not_loopback, or the signature (header) is not the gateway's", body = walras_api::wire::ApiError),
        (status = 404, description = "no_gateway_link: the node runs with its own timer", body = walras_api::wire::ApiError),
        (status = 413, description = "too_large", body = walras_api::wire::ApiError)
    )
)]
pub async fn seal(State(shared): State<Arc<Shared>>, request: Request) -> Response {
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
    let signature = request
        .headers()
        .get(SEAL_SIGNATURE_HEADER)
        .and_then(|value| value.to_str().ok())
        .and_then(|text| text.parse::<Signature>().ok());
    let body: Bytes = axum::body::to_bytes(request.into_body(), SEAL_BODY_MAX_BYTES)
        .await
        .map_err(|_| {
            Failure::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                format!("a sealed batch is at most {SEAL_BODY_MAX_BYTES} bytes"),
            )
        })?;
    let authentic = signature.is_some_and(|signature| {
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
