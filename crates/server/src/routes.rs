//! The HTTP API under `/v1` (see [`walras_api::wire`] for the bodies). Each handler carries its
//! `#[utoipa::path]`: the document served at `/v1/openapi.json` is derived from them
//! (`openapi.rs`).

use super::admission::{admit, refuse_if_full};
use super::failure::{body_failure, Failure};
use super::gateway_seal::refuse_if_gateway_only;
use super::limits::{ClientSlot, ClientSlots, SlotRefusal, TurnRefusal, OFFER_SCANS_WAITING_MAX};
use super::node::{block_prices, reference_prices_json, Shared, StateCounts};
use super::oracle::OracleEvent;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use futures_util::{Stream, StreamExt};
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;
use tokio_stream::wrappers::BroadcastStream;
use walras_api::transaction_from_json;
use walras_api::wire::*;
use walras_crypto::Hash;
use walras_engine::{transaction_hash, BookSnapshot};
use walras_types::{AccountId, AssetId, OfferKey, PairId, SignedTransaction};

pub(crate) type AppState = Arc<Shared>;

/// Body limit of a single submission: the largest transaction is well under 1 KiB.
pub(crate) const SUBMIT_BODY_MAX_BYTES: usize = 16 * 1024;
/// Body limit of a batch submission.
pub(crate) const BATCH_BODY_MAX_BYTES: usize = 4 * 1024 * 1024;
/// Most transactions in one batch submission.
pub(crate) const BATCH_TRANSACTIONS_MAX: usize = 10_000;
/// Most price levels in a book answer.
pub(crate) const BOOK_LEVELS_MAX: usize = 1_000;
/// Most open event streams, all clients together (each client: `--event-streams-per-client`).
pub(crate) const SSE_SUBSCRIBERS_MAX: usize = 256;

#[utoipa::path(
    post,
    path = "/v1/transactions",
    summary = "Submit one transaction (JSON or canonical binary)",
    request_body(content((TransactionJson = "application/json"), (walras_api::wire::CanonicalBytes = "application/octet-stream"))),
    responses(
        (status = 202, description = "admitted to the mempool", body = SubmitResponse),
        (status = 400, description = "malformed (not a transaction), bad_signature", body = walras_api::wire::ApiError),
        (status = 403, description = "gateway_only: with --block-source gateway, read this on --operator-listen", body = walras_api::wire::ApiError),
        (status = 409, description = "replayed (sequence already used), duplicate (already pending)", body = walras_api::wire::ApiError),
        (status = 413, description = "too_large: the body is over 16 KiB", body = walras_api::wire::ApiError),
        (status = 415, description = "unsupported_media_type: neither JSON nor octet-stream", body = walras_api::wire::ApiError),
        (status = 422, description = "refused by the admission rule: unknown source account, sequence outside the window, payments certificate or escrow; or insufficient_balance: the source has less of the asset available than the transaction takes", body = walras_api::wire::ApiError),
        (status = 503, description = "mempool_full: the mempool holds its capacity, or what the node commits within its commit bound; retry after Retry-After", body = walras_api::wire::ApiError)
    )
)]
pub(crate) async fn submit(
    State(shared): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<SubmitResponse>), Failure> {
    refuse_if_gateway_only(&shared, "POST /v1/transactions")?;
    let body = body.map_err(|rejection| body_failure(rejection, SUBMIT_BODY_MAX_BYTES))?;
    refuse_if_full(&shared)?;
    let signed = decode_submission(&headers, &body)?;
    let (hash, result) = admit(&shared, vec![signed])
        .await
        .pop()
        .ok_or_else(|| Failure::internal("admission returned no result"))?;
    result?;
    Ok((
        StatusCode::ACCEPTED,
        Json(SubmitResponse {
            hash: hash.to_string(),
            status: "pending".into(),
        }),
    ))
}

fn decode_submission(headers: &HeaderMap, body: &[u8]) -> Result<SignedTransaction, Failure> {
    match content_type(headers).as_deref() {
        Some("application/json") => {
            let json: TransactionJson = serde_json::from_slice(body)
                .map_err(|error| Failure::malformed(format!("transaction JSON: {error}")))?;
            transaction_from_json(&json)
                .map_err(|error| Failure::malformed(format!("transaction: {error}")))
        }
        Some("application/octet-stream") => SignedTransaction::decode(body)
            .map_err(|error| Failure::malformed(format!("transaction: {error}"))),
        other => Err(Failure::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!(
                "Content-Type {} is not accepted: send application/json or \
                 application/octet-stream (the canonical binary encoding)",
                other.unwrap_or("(none)")
            ),
        )),
    }
}

/// The media type without parameters, lowercased.
fn content_type(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    Some(value.split(';').next()?.trim().to_ascii_lowercase())
}

#[utoipa::path(
    post,
    path = "/v1/transactions/batch",
    summary = "Submit a list of transactions (binary: u16 count, then each encoded)",
    request_body(content((walras_api::wire::CanonicalBytes = "application/octet-stream"))),
    responses(
        (status = 200, description = "decoded; each item says whether it was admitted", body = BatchSubmitResponse),
        (status = 400, description = "malformed: the body is not a transaction list, or it is empty", body = walras_api::wire::ApiError),
        (status = 403, description = "gateway_only: with --block-source gateway, read this on --operator-listen", body = walras_api::wire::ApiError),
        (status = 413, description = "too_large: over 4 MiB or 10,000 transactions", body = walras_api::wire::ApiError),
        (status = 415, description = "unsupported_media_type: a batch is application/octet-stream", body = walras_api::wire::ApiError),
        (status = 503, description = "mempool_full: the mempool has no room for any transaction (its capacity, or what it commits within the commit bound); nothing was decoded; retry after Retry-After", body = walras_api::wire::ApiError)
    )
)]
pub(crate) async fn submit_batch(
    State(shared): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<BatchSubmitResponse>, Failure> {
    refuse_if_gateway_only(&shared, "POST /v1/transactions/batch")?;
    let body = body.map_err(|rejection| body_failure(rejection, BATCH_BODY_MAX_BYTES))?;
    if content_type(&headers).as_deref() != Some("application/octet-stream") {
        return Err(Failure::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "a batch is application/octet-stream: a u16 count then the encoded transactions",
        ));
    }
    // Under overload the whole request is refused before its body is decoded.
    refuse_if_full(&shared)?;
    let transactions = SignedTransaction::decode_list(&body)
        .map_err(|error| Failure::malformed(format!("transaction list: {error}")))?;
    if transactions.is_empty() {
        return Err(Failure::malformed("the batch holds no transaction"));
    }
    if transactions.len() > BATCH_TRANSACTIONS_MAX {
        return Err(Failure::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!(
                "{} transactions in one batch; at most {BATCH_TRANSACTIONS_MAX}",
                transactions.len()
            ),
        ));
    }
    let results = admit(&shared, transactions).await;
    let admitted = results.iter().filter(|(_, result)| result.is_ok()).count() as u32;
    let results: Vec<BatchItemResult> = results
        .into_iter()
        .map(|(hash, result)| {
            let failure = result.err();
            BatchItemResult {
                hash: hash.to_string(),
                status: failure.as_ref().map(|failure| failure.status.as_u16()),
                error: failure.map(|failure| failure.body()),
            }
        })
        .collect();
    Ok(Json(BatchSubmitResponse {
        admitted,
        rejected: results.len() as u32 - admitted,
        results,
    }))
}

#[utoipa::path(
    get,
    path = "/v1/transactions/{hash}",
    summary = "Status of a transaction: pending, accepted or dropped",
    params(
        ("hash" = String, Path, description = "Transaction hash, 64 hex digits", pattern = "^[0-9a-fA-F]{64}$")
    ),
    responses(
        (status = 200, description = "pending, or committed with its block and index", body = TransactionStatusJson),
        (status = 400, description = "malformed: not a transaction hash", body = walras_api::wire::ApiError),
        (status = 404, description = "unknown_transaction: neither pending nor recently committed", body = walras_api::wire::ApiError)
    )
)]
pub(crate) async fn transaction_status(
    State(shared): State<AppState>,
    Path(hash): Path<String>,
) -> Result<Json<TransactionStatusJson>, Failure> {
    let hash: Hash = hash
        .parse()
        .map_err(|error| Failure::malformed(format!("transaction hash: {error}")))?;
    let mut status = TransactionStatusJson {
        hash: hash.to_string(),
        status: "pending".into(),
        height: None,
        index: None,
        reason: None,
    };
    // Index first: a transaction leaves the mempool just after it enters the index.
    if let Some(committed) = shared.recent().get(&hash) {
        status.status = if committed.dropped.is_some() {
            "dropped"
        } else {
            "accepted"
        }
        .into();
        status.height = Some(committed.height);
        status.index = Some(committed.index);
        status.reason = committed.dropped.map(|reason| reason.name().to_string());
        return Ok(Json(status));
    }
    if shared.mempool().contains(&hash) {
        return Ok(Json(status));
    }
    Err(Failure::not_found(
        "unknown_transaction",
        format!(
            "transaction {hash} is not pending and not among the recently committed ones \
             (at least the last {} are indexed); older ones are found in their block",
            super::recent::RECENT_TRANSACTIONS_MIN
        ),
    ))
}

pub(crate) fn parse_account(text: &str) -> Result<AccountId, Failure> {
    text.parse::<u64>()
        .map(AccountId)
        .map_err(|_| Failure::malformed(format!("account id {text:?} is not an unsigned integer")))
}

fn unknown_account(id: AccountId) -> Failure {
    Failure::not_found(
        "unknown_account",
        format!("account {} does not exist", id.0),
    )
}

#[utoipa::path(
    get,
    path = "/v1/accounts/{id}",
    summary = "An account: key, sequence numbers, balances",
    params(
        ("id" = u64, Path, description = "Account id")
    ),
    responses(
        (status = 200, description = "the account", body = AccountJson),
        (status = 400, description = "malformed: not an account id", body = walras_api::wire::ApiError),
        (status = 404, description = "unknown_account", body = walras_api::wire::ApiError)
    )
)]
pub(crate) async fn account(
    State(shared): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<AccountJson>, Failure> {
    let id = parse_account(&id)?;
    let state = shared.state.read().await;
    let account = state.account(id).ok_or_else(|| unknown_account(id))?;
    let last_sequence = account.last_sequence;
    let json = AccountJson {
        id: id.0,
        public_key: walras_api::hex(&account.public_key),
        last_sequence,
        next_sequence: last_sequence + 1,
        balances: account
            .balances()
            .iter()
            .map(|(asset, amount)| BalanceJson {
                asset: asset.0,
                amount: *amount,
            })
            .collect(),
    };
    drop(state);
    // The view and the mempool of one block (read under the mempool lock, see
    // `Shared::accounts`); the view may be one block behind the state read above, hence `max`.
    let pending_next = {
        let mempool = shared.mempool();
        let view = shared.accounts.load();
        view.source(id)
            .map(|source| mempool.next_sequence(id, source.last_sequence))
    };
    Ok(Json(AccountJson {
        next_sequence: pending_next.map_or(json.next_sequence, |next| next.max(json.next_sequence)),
        ..json
    }))
}

#[utoipa::path(
    get,
    path = "/v1/accounts/{id}/offers",
    summary = "The open offers of an account",
    params(
        ("id" = u64, Path, description = "Account id")
    ),
    responses(
        (status = 200, description = "its open offers", body = AccountOffersJson),
        (status = 400, description = "malformed: not an account id", body = walras_api::wire::ApiError),
        (status = 404, description = "unknown_account", body = walras_api::wire::ApiError),
        (status = 503, description = "offers_busy: this client's previous request for an account's offers is still waiting or running, or too many wait", body = walras_api::wire::ApiError)
    )
)]
pub(crate) async fn account_offers(
    State(shared): State<AppState>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path(id): Path<String>,
) -> Result<Json<AccountOffersJson>, Failure> {
    let id = parse_account(&id)?;
    // A scan of every open offer (there is no per-account offer index). At most
    // `limits::OFFER_SCANS_MAX` run at once, one per client waiting or running, the others in
    // arrival order (within the request timeout). The turn comes first: a request waiting
    // holds no share of the books (a share makes the next blocks copy the chunks they edit)
    // and the fallback below, under the state's lock, is bounded as well.
    let _turn = shared
        .offer_scans
        .enter(client.ip())
        .map_err(|refusal| offer_scan_refused(refusal, client))?
        .turn()
        .await;
    let state = shared.state.read().await;
    state.account(id).ok_or_else(|| unknown_account(id))?;
    // Done on the books shared with the state (a reference count per chunk), after the
    // state's lock is released, so that a scan of millions of offers never holds up the next
    // block.
    if let Some(books) = state.share_books() {
        drop(state);
        let offers = tokio::task::spawn_blocking(move || account_offers_in(&books, id))
            .await
            .map_err(|error| Failure::internal(format!("the offer scan stopped: {error}")))??;
        return Ok(Json(AccountOffersJson {
            account: id.0,
            offers,
        }));
    }
    // No books carried (no block yet since the node started): the state's own books.
    let assets = state.assets() as u16;
    let mut offers = Vec::new();
    for sell in 0..assets {
        for buy in (0..assets).filter(|buy| *buy != sell) {
            let pair = PairId {
                sell: AssetId(sell),
                buy: AssetId(buy),
            };
            for (key, amount) in state.book(pair).iter().filter(|(key, _)| key.account == id) {
                offers.push(OfferJson {
                    offer_id: key.id.0,
                    sell,
                    buy,
                    amount,
                    min_price: key.min_price.to_exact_decimal(),
                });
            }
        }
    }
    Ok(Json(AccountOffersJson {
        account: id.0,
        offers,
    }))
}

/// The 503 for a request for an account's offers that may not wait.
fn offer_scan_refused(refusal: TurnRefusal, client: SocketAddr) -> Failure {
    let message = match refusal {
        TurnRefusal::ClientBusy => format!(
            "{} already has a request for an account's offers waiting or running (one at a \
             time per client: each scans every open offer); ask again once it is answered",
            client.ip()
        ),
        TurnRefusal::QueueFull => format!(
            "{OFFER_SCANS_WAITING_MAX} requests for accounts' offers are waiting; retry shortly"
        ),
    };
    Failure::new(StatusCode::SERVICE_UNAVAILABLE, "offers_busy", message).retry_after(1.0)
}

/// The open offers of account `id` in `books`, in pair then key order.
fn account_offers_in(books: &BookSnapshot, id: AccountId) -> Result<Vec<OfferJson>, Failure> {
    let mut offers = Vec::new();
    books
        .for_each_offer(|pair, key, amount| {
            if key.account == id {
                offers.push(OfferJson {
                    offer_id: key.id.0,
                    sell: pair.sell.0,
                    buy: pair.buy.0,
                    amount,
                    min_price: key.min_price.to_exact_decimal(),
                });
            }
        })
        .map_err(|error| Failure::internal(error.to_string()))?;
    Ok(offers)
}

#[utoipa::path(
    get,
    path = "/v1/books/{sell}/{buy}",
    summary = "Depth of the book selling `sell` for `buy`, by limit price",
    params(
        ("sell" = u16, Path, description = "Asset sold"),
        ("buy" = u16, Path, description = "Asset bought"),
        ("levels" = Option<u32>, Query, description = "Price levels to return (default 20)", minimum = 1, maximum = 1000)
    ),
    responses(
        (status = 200, description = "the book's levels, lowest limit price first", body = BookJson),
        (status = 400, description = "malformed: the same asset twice, or levels out of range", body = walras_api::wire::ApiError),
        (status = 403, description = "gateway_only: with --block-source gateway, read this on --operator-listen", body = walras_api::wire::ApiError),
        (status = 404, description = "unknown_asset", body = walras_api::wire::ApiError)
    )
)]
pub(crate) async fn book(
    State(shared): State<AppState>,
    Path((sell, buy)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<BookJson>, Failure> {
    let sell = parse_asset(&shared, &sell)?;
    let buy = parse_asset(&shared, &buy)?;
    if sell == buy {
        return Err(Failure::malformed("a book needs two different assets"));
    }
    let levels_max = match query.get("levels") {
        None => 20,
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|levels| (1..=BOOK_LEVELS_MAX).contains(levels))
            .ok_or_else(|| {
                Failure::malformed(format!(
                    "levels must be 1..={BOOK_LEVELS_MAX}, got {text:?}"
                ))
            })?,
    };
    let pair = PairId {
        sell: AssetId(sell),
        buy: AssetId(buy),
    };
    let state = shared.state.read().await;
    // Every offer of the pair is read (for its total amount): on the pair's books shared with
    // the state (a reference count per chunk of the pair), after the state's lock is released,
    // so that a book of millions of offers never holds up the next block.
    let depth = match state.share_book(pair) {
        Some(book) => {
            drop(state);
            tokio::task::spawn_blocking(move || {
                let mut depth = BookDepth::new(levels_max);
                book.for_each_offer(|_, key, amount| depth.add(key, amount))
                    .map(|()| depth)
                    .map_err(|error| Failure::internal(error.to_string()))
            })
            .await
            .map_err(|error| Failure::internal(format!("the book scan stopped: {error}")))??
        }
        // No books carried (no block yet since the node started): the state's own.
        None => {
            let mut depth = BookDepth::new(levels_max);
            for (key, amount) in state.book(pair) {
                depth.add(key, amount);
            }
            depth
        }
    };
    Ok(Json(depth.into_json(sell, buy)))
}

/// A book's offers summed by limit price, the lowest `levels_max` prices kept, and in all.
struct BookDepth {
    levels_max: usize,
    /// (limit, amount, offers), ascending limit.
    levels: Vec<(walras_types::Price, u64, u32)>,
    offers: u64,
    amount: u64,
}

impl BookDepth {
    fn new(levels_max: usize) -> BookDepth {
        BookDepth {
            levels_max,
            levels: Vec::new(),
            offers: 0,
            amount: 0,
        }
    }

    /// Adds the book's next offer. They come in key order, ascending limit: an offer joins the
    /// last level or opens the next one (while fewer than `levels_max` are open).
    fn add(&mut self, key: OfferKey, amount: u64) {
        self.offers += 1;
        self.amount = self.amount.saturating_add(amount);
        if let Some(level) = self
            .levels
            .last_mut()
            .filter(|level| level.0 == key.min_price)
        {
            level.1 = level.1.saturating_add(amount);
            level.2 += 1;
        } else if self.levels.len() < self.levels_max {
            self.levels.push((key.min_price, amount, 1));
        }
    }

    fn into_json(self, sell: u16, buy: u16) -> BookJson {
        BookJson {
            sell,
            buy,
            offers: self.offers,
            amount: self.amount,
            levels: self
                .levels
                .into_iter()
                .map(|(price, amount, offers)| LevelJson {
                    min_price: price.to_exact_decimal(),
                    amount,
                    offers,
                })
                .collect(),
        }
    }
}

fn parse_asset(shared: &Shared, text: &str) -> Result<u16, Failure> {
    text.parse::<u16>()
        .ok()
        .filter(|asset| *asset < shared.assets)
        .ok_or_else(|| {
            Failure::not_found(
                "unknown_asset",
                format!(
                    "asset {text:?} does not exist: assets are 0..{}",
                    shared.assets
                ),
            )
        })
}

fn parse_height(text: &str) -> Result<u64, Failure> {
    text.parse::<u64>()
        .map_err(|_| Failure::malformed(format!("height {text:?} is not an unsigned integer")))
}

fn load_block(shared: &Shared, height: u64) -> Result<walras_engine::Block, Failure> {
    shared
        .store
        .block(height)
        .map_err(|error| Failure::internal(format!("reading block {height}: {error}")))?
        .ok_or_else(|| {
            Failure::not_found(
                "unknown_block",
                format!(
                    "no block at height {height}; the last is {}",
                    shared.tip().height
                ),
            )
        })
}

#[utoipa::path(
    get,
    path = "/v1/blocks/{height}",
    summary = "A committed block's header and results",
    params(
        ("height" = u64, Path, description = "Block height")
    ),
    responses(
        (status = 200, description = "the block", body = BlockJson),
        (status = 400, description = "malformed: not a height", body = walras_api::wire::ApiError),
        (status = 403, description = "gateway_only: with --block-source gateway, read this on --operator-listen", body = walras_api::wire::ApiError),
        (status = 404, description = "unknown_block", body = walras_api::wire::ApiError)
    )
)]
pub(crate) async fn block(
    State(shared): State<AppState>,
    Path(height): Path<String>,
) -> Result<Json<BlockJson>, Failure> {
    let height = parse_height(&height)?;
    let block = load_block(&shared, height)?;
    let dropped = shared
        .store
        .dropped(height)
        .map_err(|error| Failure::internal(format!("reading block {height}'s results: {error}")))?
        .unwrap_or_default();
    let clearing = shared
        .store
        .clearing_report(height)
        .map_err(|error| Failure::internal(format!("reading block {height}'s results: {error}")))?;
    let header = &block.header;
    let transactions = block.transactions.len() as u32;
    Ok(Json(BlockJson {
        height,
        hash: header.hash().to_string(),
        previous: header.previous.to_string(),
        transactions_root: header.transactions_root.to_string(),
        state_root: header.state_root.to_string(),
        transactions,
        accepted: transactions - dropped.len() as u32,
        dropped: dropped
            .iter()
            .map(|(index, reason)| DroppedJson {
                index: *index,
                hash: block
                    .transactions
                    .get(*index as usize)
                    .map(|signed| transaction_hash(signed).to_string())
                    .unwrap_or_default(),
                reason: reason.name().to_string(),
            })
            .collect(),
        valuations: header.valuations.clone(),
        prices: block_prices(header),
        trades: header
            .trades
            .iter()
            .map(|trade| TradeJson {
                sell: trade.sell.0,
                buy: trade.buy.0,
                sold: trade.sold,
                last_offer_account: trade.last_offer.account.0,
                last_offer_id: trade.last_offer.id.0,
                last_offer_min_price: trade.last_offer.min_price.to_exact_decimal(),
            })
            .collect(),
        clearing: clearing.as_ref().map(crate::node::clearing_quality_json),
    }))
}

/// `GET /v1/payments/escrow`: the bridge's committee, escrow and withdrawn count now.
#[utoipa::path(
    get,
    path = "/v1/payments/escrow",
    summary = "The payments bridge: committee chain and epoch, escrow per asset, outputs withdrawn",
    responses(
        (status = 200, description = "the bridge now", body = EscrowJson),
        (status = 404, description = "payments_disabled: the genesis names no payments committee", body = walras_api::wire::ApiError)
    )
)]
pub(crate) async fn payments_escrow(
    State(shared): State<AppState>,
) -> Result<Json<EscrowJson>, Failure> {
    let state = shared.state.read().await;
    let payments = state.payments().ok_or_else(|| {
        Failure::new(
            StatusCode::NOT_FOUND,
            "payments_disabled",
            "this exchange's genesis names no payments committee",
        )
    })?;
    Ok(Json(EscrowJson {
        height: state.height(),
        chain_id: payments.chain_id(),
        epoch: payments.epoch(),
        escrow: payments.escrow().to_vec(),
        withdrawn: payments.withdrawn_count() as u64,
    }))
}

/// Most blocks one `GET /v1/payments/deposits` reads (the answer says how far it got).
pub(crate) const DEPOSIT_SCAN_BLOCKS_MAX: u64 = 256;

/// `GET /v1/payments/deposits?after_height=H`: the deposits of committed blocks after `H`,
/// for the payments validators, which admit a deposit's output only once its block is here.
#[utoipa::path(
    get,
    path = "/v1/payments/deposits",
    summary = "Committed deposits into the payments escrow after `after_height` (the payments lane admits them)",
    params(
        ("after_height" = Option<u64>, Query, description = "Blocks after this height (default 0); at most 256 blocks are scanned per request")
    ),
    responses(
        (status = 200, description = "deposits of blocks after_height+1 ..= scanned_to", body = DepositsJson),
        (status = 400, description = "malformed: after_height is not a height", body = walras_api::wire::ApiError)
    )
)]
pub(crate) async fn payments_deposits(
    State(shared): State<AppState>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<DepositsJson>, Failure> {
    let after = match query.get("after_height") {
        Some(text) => parse_height(text)?,
        None => 0,
    };
    let tip = shared.tip().height;
    let scanned_to = tip.min(after.saturating_add(DEPOSIT_SCAN_BLOCKS_MAX));
    let mut deposits = Vec::new();
    for height in after.saturating_add(1)..=scanned_to {
        let block = load_block(&shared, height)?;
        let dropped: std::collections::BTreeSet<u32> = shared
            .store
            .dropped(height)
            .map_err(|error| {
                Failure::internal(format!("reading block {height}'s results: {error}"))
            })?
            .unwrap_or_default()
            .into_iter()
            .map(|(index, _)| index)
            .collect();
        for (index, signed) in block.transactions.iter().enumerate() {
            let walras_types::Operation::DepositToPayments {
                asset,
                amount,
                owner,
            } = signed.transaction.operation
            else {
                continue;
            };
            if dropped.contains(&(index as u32)) {
                continue;
            }
            let hash = transaction_hash(signed);
            deposits.push(DepositJson {
                height,
                transaction: hash.to_string(),
                output_id: walras_engine::deposit_output(signed).0.to_string(),
                asset: asset.0,
                amount,
                owner: walras_api::hex(&owner),
            });
        }
    }
    Ok(Json(DepositsJson {
        scanned_to,
        deposits,
    }))
}

#[utoipa::path(
    get,
    path = "/v1/blocks/{height}/raw",
    summary = "A committed block in its canonical encoding",
    params(
        ("height" = u64, Path, description = "Block height")
    ),
    responses(
        (status = 200, description = "the encoded block", content((walras_api::wire::CanonicalBytes = "application/octet-stream"))),
        (status = 400, description = "malformed: not a height", body = walras_api::wire::ApiError),
        (status = 403, description = "gateway_only: with --block-source gateway, read this on --operator-listen", body = walras_api::wire::ApiError),
        (status = 404, description = "unknown_block", body = walras_api::wire::ApiError)
    )
)]
pub(crate) async fn block_raw(
    State(shared): State<AppState>,
    Path(height): Path<String>,
) -> Result<Response, Failure> {
    let height = parse_height(&height)?;
    let block = load_block(&shared, height)?;
    Ok((
        [(header::CONTENT_TYPE, "application/octet-stream")],
        block.encode(),
    )
        .into_response())
}

#[utoipa::path(
    get,
    path = "/v1/blocks/{height}/fills",
    summary = "What each offer sold and received in a block",
    params(
        ("height" = u64, Path, description = "Block height"),
        ("account" = Option<u64>, Query, description = "Only this account's fills")
    ),
    responses(
        (status = 200, description = "the block's fills, by pair, offers in canonical order", body = BlockFillsJson),
        (status = 400, description = "malformed: not a height or not an account id", body = walras_api::wire::ApiError),
        (status = 403, description = "gateway_only: with --block-source gateway, read this on --operator-listen", body = walras_api::wire::ApiError),
        (status = 404, description = "unknown_block, or fills_unknown: the block was stored before fills were kept", body = walras_api::wire::ApiError)
    )
)]
pub(crate) async fn block_fills(
    State(shared): State<AppState>,
    Path(height): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<BlockFillsJson>, Failure> {
    let height = parse_height(&height)?;
    let account = query
        .get("account")
        .map(|text| parse_account(text))
        .transpose()?;
    load_block(&shared, height)?;
    let fills = shared
        .store
        .fills(height)
        .map_err(|error| Failure::internal(format!("reading block {height}'s results: {error}")))?
        .ok_or_else(|| {
            Failure::not_found(
                "fills_unknown",
                format!(
                    "block {height} was stored before this node kept fills; \
                     `walras offer explain ID --account A` recomputes an offer's"
                ),
            )
        })?;
    Ok(Json(BlockFillsJson {
        height,
        fills: fills
            .iter()
            .filter(|fill| account.is_none_or(|account| fill.account == account))
            .map(fill_json)
            .collect(),
    }))
}

fn fill_json(fill: &walras_engine::OfferFill) -> FillJson {
    let rate = walras_types::Valuation(u128::from(fill.bought))
        .rate_to(walras_types::Valuation(u128::from(fill.sold)));
    FillJson {
        account: fill.account.0,
        offer_id: fill.offer_id.0,
        sell: fill.sell.0,
        buy: fill.buy.0,
        sold: fill.sold,
        bought: fill.bought,
        returned: fill.returned,
        rate: rate.to_string(),
    }
}

#[utoipa::path(
    get,
    path = "/v1/prices",
    summary = "Last traded prices, and the latest block's clearing",
    responses(
        (status = 200, description = "reference prices carried forward, and the latest block's valuations", body = PricesJson),
        (status = 403, description = "gateway_only: with --block-source gateway, read this on --operator-listen", body = walras_api::wire::ApiError)
    )
)]
pub(crate) async fn prices(State(shared): State<AppState>) -> Json<PricesJson> {
    let tip = shared.tip();
    let latest = |height: Option<u64>| tip.height > 0 && height == Some(tip.height);
    let assets = tip.market.assets();
    Json(PricesJson {
        height: tip.height,
        prices: tip.prices,
        traded: assets
            .iter()
            .map(|asset| latest(asset.last_traded_height))
            .collect(),
        reference: reference_prices_json(&tip.market),
        valuations: tip.valuations,
    })
}

#[utoipa::path(
    get,
    path = "/v1/assets",
    summary = "Asset symbols and decimals, from the genesis",
    responses(
        (status = 200, description = "one entry per asset, in asset order", body = AssetsJson)
    )
)]
pub(crate) async fn assets(State(shared): State<AppState>) -> Json<AssetsJson> {
    Json(shared.asset_names.clone())
}

#[utoipa::path(
    get,
    path = "/v1/status",
    summary = "Height, state root, mempool",
    responses(
        (status = 200, description = "the node's committed tip", body = StatusJson)
    )
)]
pub(crate) async fn status(State(shared): State<AppState>) -> Json<StatusJson> {
    let tip = shared.tip();
    let (mempool_transactions, mempool_capacity) = {
        let mempool = shared.mempool();
        (mempool.len() as u64, mempool.capacity() as u64)
    };
    // As of the tip's block: read without the state's lock, which a block holds while it
    // executes.
    let StateCounts {
        accounts,
        open_offers,
        ..
    } = tip.counts;
    Json(StatusJson {
        version: env!("CARGO_PKG_VERSION").to_string(),
        height: tip.height,
        block_hash: tip.block_hash.to_string(),
        state_root: tip.state_root.to_string(),
        assets: shared.assets,
        accounts,
        open_offers,
        mempool_transactions,
        mempool_capacity,
        commit_bound_ms: Some(shared.overload().commit_bound.as_millis() as u64),
        dev_genesis: shared.dev_genesis,
    })
}

/// An open event stream: gives its slot back and decrements the subscriber gauge when the
/// stream is dropped.
struct Subscriber {
    shared: AppState,
    _slot: Arc<ClientSlot>,
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.shared.metrics.sse_subscribers.dec();
    }
}

/// Block events as server-sent events, until the client leaves or the node stops.
#[utoipa::path(
    get,
    path = "/v1/events",
    summary = "Server-sent events",
    description = "One `block` event per committed block (data: BlockEvent); with an oracle, an `oracle` event at most once a second (data: OraclePrices) and an `oracle_band` warning when a block's clearing leaves the band (data: OracleBand); `lagged` (text) when this client missed block events.",
    responses(
        (status = 200, description = "the event stream", content(("text/event-stream"))),
        (status = 403, description = "gateway_only: with --block-source gateway, read this on --operator-listen", body = walras_api::wire::ApiError),
        (status = 429, description = "too_many_streams: this client IP holds --event-streams-per-client streams", body = walras_api::wire::ApiError),
        (status = 503, description = "too_many_subscribers: 256 streams are open", body = walras_api::wire::ApiError)
    )
)]
pub(crate) async fn events(
    State(shared): State<AppState>,
    Extension(slots): Extension<Arc<ClientSlots>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, Failure> {
    let slot = Arc::new(
        slots
            .take(client.ip())
            .map_err(|refusal| stream_refused(refusal, client.ip()))?,
    );
    shared.metrics.sse_subscribers.inc();
    let subscriber = Subscriber {
        shared: shared.clone(),
        _slot: slot.clone(),
    };
    let receiver = shared.events.subscribe();
    let stopping = shared.clone();
    // The oracle's events (prices at most once a second, band warnings) beside the blocks'.
    // A client too slow for them misses some: the next `oracle` event replaces the last.
    let oracle_events = match shared.oracle.as_ref() {
        Some(oracle) => BroadcastStream::new(oracle.events.subscribe())
            .filter_map(|item| async move { item.ok().map(|event| Ok(oracle_event(&event))) })
            .boxed(),
        None => futures_util::stream::empty().boxed(),
    };
    let blocks = BroadcastStream::new(receiver).map(move |item| {
        let _keep = &subscriber;
        Ok(match item {
            Ok(event) => Event::default()
                .event("block")
                .json_data(&*event)
                .unwrap_or_else(|_| Event::default().event("error")),
            Err(BroadcastStreamRecvError::Lagged(missed)) => Event::default().event("lagged").data(
                format!("{missed} block events were skipped: this client reads too slowly"),
            ),
        })
    });
    let stream = futures_util::stream::select(blocks, oracle_events)
        // A stopping node ends its streams, so that their connections close at once; a stream
        // whose slot went to another address (a fair share, see `ClientSlots`) ends too.
        .take_until(async move {
            tokio::select! {
                () = stopping.stopped() => {},
                () = slot.evicted() => {},
            }
        });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

fn oracle_event(event: &OracleEvent) -> Event {
    let (name, data) = match event {
        OracleEvent::Prices(prices) => ("oracle", Event::default().json_data(&**prices)),
        OracleEvent::Band(band) => ("oracle_band", Event::default().json_data(&**band)),
    };
    data.map_or_else(|_| Event::default().event("error"), |data| data.event(name))
}

/// `GET /v1/oracle/prices`: the oracle's latest publication.
#[utoipa::path(
    get,
    path = "/v1/oracle/prices",
    summary = "The node's oracle prices per exchange asset, with status, age, dispersion and venues",
    description = "Advisory: nothing committed depends on it.",
    responses(
        (status = 200, description = "the latest publication", body = OraclePricesJson),
        (status = 404, description = "oracle_not_configured: started without --oracle-feed/--oracle-venue", body = walras_api::wire::ApiError),
        (status = 503, description = "oracle_no_price: no asset has a healthy price yet", body = walras_api::wire::ApiError)
    )
)]
pub(crate) async fn oracle_prices(
    State(shared): State<AppState>,
) -> Result<Json<OraclePricesJson>, Failure> {
    let oracle = shared.oracle.as_ref().ok_or_else(|| {
        Failure::not_found(
            "oracle_not_configured",
            "this node runs no valuation oracle: start it with --oracle-feed FILE",
        )
    })?;
    let no_price = |why: String| {
        Failure::new(StatusCode::SERVICE_UNAVAILABLE, "oracle_no_price", why).retry_after(1.0)
    };
    let latest = oracle.latest().ok_or_else(|| {
        no_price(format!(
            "the oracle ({}) has not published yet",
            oracle.source
        ))
    })?;
    if latest.per_unit.is_empty() {
        let books: u64 = latest.json.venues.iter().map(|v| v.synced).sum();
        let total: u64 = latest
            .json
            .venues
            .iter()
            .map(|v| v.synced + v.resyncing + v.crossed + v.stale + v.thin)
            .sum();
        return Err(no_price(format!(
            "the oracle ({}) has no healthy price for any mapped asset yet ({books} of {total} \
             venue books synced); retry shortly",
            oracle.source
        )));
    }
    Ok(Json(latest.json.clone()))
}

fn stream_refused(refusal: SlotRefusal, client: IpAddr) -> Failure {
    match refusal {
        SlotRefusal::Client { open, max } => Failure::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_streams",
            format!(
                "{client} already holds {open} event streams, the most one client may hold \
                 ({max}); close one first"
            ),
        )
        .retry_after(5.0),
        SlotRefusal::Total { max } => Failure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_subscribers",
            format!("{max} event streams are open; retry later"),
        )
        .retry_after(5.0),
    }
}

#[utoipa::path(
    get,
    path = "/metrics",
    summary = "Prometheus metrics",
    responses(
        (status = 200, description = "Prometheus text format 0.0.4", content(("text/plain")))
    )
)]
pub(crate) async fn metrics(State(shared): State<AppState>) -> Response {
    let mempool = {
        let mempool = shared.mempool();
        (mempool.len(), mempool.capacity())
    };
    let mut text = shared.metrics.render(mempool);
    if let Some(oracle) = shared.oracle.as_ref() {
        let age = oracle.latest().map(|latest| latest.published.elapsed());
        text.push_str(&oracle.metrics.render(age));
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

pub(crate) async fn not_found() -> Failure {
    Failure::not_found(
        "no_such_endpoint",
        "no such endpoint: the API is described at /v1/openapi.json",
    )
}

pub(crate) async fn method_not_allowed() -> Failure {
    Failure::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this endpoint does not take that method: see /v1/openapi.json",
    )
}

/// How long `GET /v1/node` waits for CometBFT's RPC before reporting it silent.
const COMETBFT_RPC_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// `GET /v1/node`: what this node runs (so a dashboard asks only for configured parts) and
/// how it is doing: mempool, event streams, store commit time, CometBFT in replicated mode.
#[utoipa::path(
    get,
    path = "/v1/node",
    summary = "What the node runs (consensus, block source, oracle, payments) and its health",
    description = "Mempool, event streams, mean store commit time, CometBFT height and peers when replicated.",
    responses(
        (status = 200, description = "configuration and health", body = NodeJson)
    )
)]
pub(crate) async fn node(State(shared): State<AppState>) -> Json<NodeJson> {
    let tip = shared.tip();
    let (mempool_transactions, mempool_capacity) = {
        let mempool = shared.mempool();
        (mempool.len() as u64, mempool.capacity() as u64)
    };
    let payments = shared.state.read().await.payments().is_some();
    let blocks_committed = shared.metrics.blocks_total.get();
    let persist_ms_mean = (blocks_committed > 0)
        .then(|| shared.metrics.block_persist_seconds_total.get() * 1e3 / blocks_committed as f64);
    let cometbft = match shared.cometbft_rpc.get() {
        Some(rpc) => Some(cometbft_health(rpc).await),
        None => None,
    };
    Json(NodeJson {
        version: env!("CARGO_PKG_VERSION").to_string(),
        consensus: if shared.cometbft_rpc.get().is_some() {
            "cometbft"
        } else {
            "solo"
        }
        .into(),
        block_source: if shared.gateway.is_some() {
            "gateway"
        } else if shared.cometbft_rpc.get().is_some() {
            "cometbft"
        } else {
            "timer"
        }
        .into(),
        oracle: shared.oracle.is_some(),
        payments,
        height: tip.height,
        mempool_transactions,
        mempool_capacity,
        event_streams: shared.metrics.sse_subscribers.get().max(0) as u64,
        event_streams_max: SSE_SUBSCRIBERS_MAX as u64,
        blocks_committed,
        persist_ms_mean,
        cometbft,
    })
}

/// CometBFT's height and peer count from its RPC; what failed, when something did.
async fn cometbft_health(rpc: &str) -> CometbftJson {
    static CLIENT: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    let client = CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .timeout(COMETBFT_RPC_TIMEOUT)
            .build()
            .unwrap_or_default()
    });
    let fetch = |path: &'static str| {
        let url = format!("{rpc}/{path}");
        async move {
            let response = client
                .get(&url)
                .send()
                .await
                .map_err(|error| format!("{url}: {error}"))?;
            response
                .json::<serde_json::Value>()
                .await
                .map_err(|error| format!("{url}: {error}"))
        }
    };
    let mut health = CometbftJson {
        rpc: rpc.to_string(),
        height: None,
        catching_up: None,
        peers: None,
        error: None,
    };
    let mut errors = Vec::new();
    // CometBFT writes its integers as JSON strings.
    let number = |value: &serde_json::Value| value.as_str().and_then(|text| text.parse().ok());
    match fetch("status").await {
        Ok(status) => {
            let sync = &status["result"]["sync_info"];
            health.height = number(&sync["latest_block_height"]);
            health.catching_up = sync["catching_up"].as_bool();
        }
        Err(error) => errors.push(error),
    }
    match fetch("net_info").await {
        Ok(net) => health.peers = number(&net["result"]["n_peers"]),
        Err(error) => errors.push(error),
    }
    if !errors.is_empty() {
        health.error = Some(errors.join("; "));
    }
    health
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::tests::{node, DEV};
    use std::time::Duration;
    use walras_testkit::TempDir;

    /// Trigger: `GET /v1/status` read the state's account and offer counts under its read
    /// lock, so it waited for the whole block being executed, and the producer waited for it
    /// (0.7-0.9 ms of each block of 1,000 payments while the overload test sampled status
    /// every 20 ms). The counts are now published with the tip.
    #[test]
    fn status_answers_while_a_block_holds_the_state() {
        let dir = TempDir::new("status-during-a-block");
        let (shared, _) = node(&dir);
        let shared = Arc::new(shared);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime");
        let executing = shared.state.blocking_write();
        let answer = runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(5), status(State(shared.clone()))).await
        });
        drop(executing);
        let Json(status) = answer.expect("status answered while a block held the state");
        assert_eq!(status.accounts, DEV.accounts);
        assert_eq!(status.open_offers, 0);
        assert_eq!(status.height, 0);
    }

    /// A block of offers on both sides of one pair (limits around 1, so some trade in full,
    /// some in part and some rest) and cancels of offers of the block before.
    fn offer_block(height: u64) -> Vec<SignedTransaction> {
        use walras_types::{OfferId, Operation, Price, Transaction};
        (0..DEV.accounts)
            .map(|account| {
                let mix = height * 7 + account * 13;
                let operation = if height > 1 && mix.is_multiple_of(4) {
                    let sell = AssetId(((account + height - 1) % 2) as u16);
                    Operation::CancelOffer {
                        sell,
                        buy: AssetId(1 - sell.0),
                        min_price: Price::from_f64(
                            0.8 + ((height - 1) * 7 + account * 13) as f64 % 5.0 / 10.0,
                        ),
                        offer_id: OfferId(height - 1),
                    }
                } else {
                    let sell = AssetId(((account + height) % 2) as u16);
                    Operation::CreateOffer {
                        sell,
                        buy: AssetId(1 - sell.0),
                        amount: 100 + mix % 900,
                        min_price: Price::from_f64(0.8 + mix as f64 % 5.0 / 10.0),
                    }
                };
                let transaction = Transaction {
                    source: AccountId(account),
                    sequence: height,
                    operation,
                };
                let signature = walras_devnet::dev_keypair(&DEV, transaction.source)
                    .sign(&transaction.encode());
                SignedTransaction {
                    transaction,
                    signature: *signature.as_bytes(),
                }
            })
            .collect()
    }

    /// A test node's shared state, and a runtime to call its routes on.
    fn node_and_runtime(dir: &TempDir) -> (AppState, tokio::runtime::Runtime) {
        let (shared, _) = node(dir);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        (Arc::new(shared), runtime)
    }

    /// Trigger: `GET /v1/accounts/{id}/offers` scanned every book under the state's read
    /// lock: O(open offers) a request (~0.1-0.2 s at 10M open offers), while the next block
    /// waited for the write lock. It now scans the books shared with the state once the lock
    /// is released; the answer must still be every open offer of the account, in pair and key
    /// order, at the amount left after partial fills.
    #[test]
    fn an_accounts_offers_come_from_the_shared_books_at_their_amounts_left() {
        let dir = TempDir::new("account-offers");
        let (shared, runtime) = node_and_runtime(&dir);
        let config = walras_engine::EngineConfig::default();
        let mut partly_filled = 0;
        for height in 1..=4 {
            let expected: Vec<Vec<(u64, u16, u64)>> = {
                let mut state = shared.state.blocking_write();
                state
                    .propose(offer_block(height), &config)
                    .expect("the block executes");
                assert!(
                    state.share_books().is_some(),
                    "an executed block carries its books"
                );
                (0..DEV.accounts)
                    .map(|account| {
                        let mut offers = Vec::new();
                        for sell in 0..2u16 {
                            let pair = PairId {
                                sell: AssetId(sell),
                                buy: AssetId(1 - sell),
                            };
                            for (key, amount) in state.book(pair) {
                                if key.account == AccountId(account) {
                                    offers.push((key.id.0, sell, amount));
                                }
                            }
                        }
                        offers
                    })
                    .collect()
            };
            for (account, expected) in expected.iter().enumerate() {
                let answer = runtime.block_on(account_offers(
                    State(shared.clone()),
                    ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 9))),
                    Path(account.to_string()),
                ));
                let Ok(Json(answer)) = answer else {
                    panic!("account {account} has an answer");
                };
                let got: Vec<(u64, u16, u64)> = answer
                    .offers
                    .iter()
                    .map(|offer| (offer.offer_id, offer.sell, offer.amount))
                    .collect();
                assert_eq!(&got, expected, "account {account} after block {height}");
                // Offer `id` of `account` was created selling `100 + (7 id + 13 account) % 900`.
                let created = |id: u64| 100 + (id * 7 + account as u64 * 13) % 900;
                partly_filled += answer
                    .offers
                    .iter()
                    .filter(|offer| offer.amount < created(offer.offer_id))
                    .count();
            }
        }
        assert!(partly_filled > 0, "some offers rest after a partial fill");
    }

    /// A book's offer count, total amount and levels (limit, amount, offers), lowest first.
    type ExpectedDepth = (u64, u64, Vec<(u128, u64, u32)>);

    /// Trigger: `GET /v1/books/{sell}/{buy}` summed the pair's every offer under the state's
    /// read lock (O(offers in the pair) a request while the next block waited), and reading
    /// the state's offers became a trie walk. It now reads the pair's books shared with the
    /// state once the lock is released; the answer must still be the state's book: its offer
    /// count, total amount and lowest levels, at the amounts left after partial fills.
    #[test]
    fn a_books_depth_comes_from_the_shared_pair_at_its_amounts_left() {
        let dir = TempDir::new("book-depth");
        let (shared, runtime) = node_and_runtime(&dir);
        let config = walras_engine::EngineConfig::default();
        for height in 1..=4 {
            let expected: Vec<ExpectedDepth> = {
                let mut state = shared.state.blocking_write();
                state
                    .propose(offer_block(height), &config)
                    .expect("the block executes");
                (0..2u16)
                    .map(|sell| {
                        let pair = PairId {
                            sell: AssetId(sell),
                            buy: AssetId(1 - sell),
                        };
                        assert!(state.share_book(pair).is_some(), "the pair is shared");
                        let mut levels: Vec<(u128, u64, u32)> = Vec::new();
                        let (mut offers, mut amount_total) = (0, 0);
                        for (key, amount) in state.book(pair) {
                            offers += 1;
                            amount_total += amount;
                            match levels.last_mut() {
                                Some(level) if level.0 == key.min_price.0 => {
                                    level.1 += amount;
                                    level.2 += 1;
                                }
                                _ => levels.push((key.min_price.0, amount, 1)),
                            }
                        }
                        (offers, amount_total, levels)
                    })
                    .collect()
            };
            for (sell, (offers, amount, levels)) in expected.iter().enumerate() {
                assert!(
                    *offers > 0,
                    "offers rest on pair {sell} after block {height}"
                );
                for levels_max in [1, 3, 1_000] {
                    let answer = runtime.block_on(book(
                        State(shared.clone()),
                        Path((sell.to_string(), (1 - sell).to_string())),
                        Query(HashMap::from([("levels".into(), levels_max.to_string())])),
                    ));
                    let Ok(Json(answer)) = answer else {
                        panic!("pair {sell} has an answer");
                    };
                    assert_eq!((answer.offers, answer.amount), (*offers, *amount));
                    let got: Vec<(String, u64, u32)> = answer
                        .levels
                        .iter()
                        .map(|level| (level.min_price.clone(), level.amount, level.offers))
                        .collect();
                    let wanted: Vec<(String, u64, u32)> = levels
                        .iter()
                        .take(levels_max)
                        .map(|(price, amount, count)| {
                            (
                                walras_types::Price(*price).to_exact_decimal(),
                                *amount,
                                *count,
                            )
                        })
                        .collect();
                    assert_eq!(got, wanted, "pair {sell} after block {height}");
                }
            }
        }
    }
}
