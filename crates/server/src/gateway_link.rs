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
use axum::extract::{MatchedPath, Request};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Mutex;
use walras_crypto::PublicKey;
use walras_engine::BlockHeader;
use walras_engine::ExchangeState;
use walras_gateway::{
    DepthLevel, MarketData, PairAmount, PairDepth, DEPTH_LEVELS_MAX, MARKET_PAIRS_MAX,
};
use walras_gateway::{GatewayStats, SealReply};
use walras_types::SignedTransaction;
use walras_types::{AssetId, PairId};

/// Largest sealed-batch body (50,000 transactions of a few hundred bytes fit many times over).
pub(crate) const SEAL_BODY_MAX_BYTES: usize = 64 * 1024 * 1024;

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
pub(crate) struct SealJob {
    pub(crate) height: u64,
    /// The hash of the request body: a batch sent again after a lost answer is recognised.
    pub(crate) digest: [u8; 32],
    pub(crate) transactions: Vec<SignedTransaction>,
    pub(crate) reply: tokio::sync::oneshot::Sender<Result<SealReply, Failure>>,
}

/// The node's end of the link (in the node's shared state when it runs with `--block-source gateway`).
pub struct GatewayLink {
    pub(crate) key: PublicKey,
    pub(super) operator_listen: String,
    /// The counters of the last batch committed, and its height.
    pub(crate) last_seal: Mutex<Option<(GatewayStats, u64)>>,
    pub(crate) jobs: SyncSender<SealJob>,
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

pub(crate) fn gateway_only(what: &str) -> Failure {
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
pub(crate) fn closed_to_participants(path: &str) -> bool {
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

/// The feed's market data for the block just committed: what each pair sold (from the header)
/// and, for every pair with resting offers, the count and the [`DEPTH_LEVELS_MAX`] lowest limit
/// prices with their amounts. Pairs in (sell, buy) order, at most [`MARKET_PAIRS_MAX`] of each.
pub(crate) fn market_data(state: &ExchangeState, header: &BlockHeader) -> MarketData {
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
                        level.amount = level.amount.saturating_add(amount);
                        level.offers = level.offers.saturating_add(1);
                    }
                    _ if full => break,
                    _ => levels.push(DepthLevel {
                        min_price: key.min_price.0,
                        amount,
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
