//! `GET /v1/offers/{id}/explain`: why an offer traded or not, recomputed from the committed
//! block log by [`walras_explain::explain_committed`] (so it survives restarts), formatted
//! as [`OfferExplanationJson`].
//!
//! An offer id is the sequence number of the transaction that created it, so ids are per
//! account: `?account=A` names the account; without it the id must belong to one account only
//! (409 `ambiguous_offer` lists the accounts otherwise). The store's per-offer index answers
//! which accounts used an id, and whether any block created the offer, in one B-tree descent;
//! a created offer is replayed from the newest book snapshot before its creation to its end
//! (see `walras_explain`), so its cost is its life plus at most one snapshot interval, not
//! the length of the log. That is still unbounded for an offer open since early in the chain,
//! so explanations still run one at a time in the blocking pool, in a fair queue
//! ([`super::limits::ExplainGate`]): each client address may have one waiting or running (a
//! second is answered 503 `explain_busy` at once), and the others wait their turn first come,
//! first served, up to `EXPLAIN_WAITING_MAX` of them.

use super::failure::Failure;
use super::limits::TurnRefusal;
use super::node::Shared;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use walras_api::wire::OfferExplanationJson;
use walras_explain::{explain_committed, offer_accounts, OfferRef, OfferStatus, ReadError};
use walras_types::{AccountId, OfferId};

/// Most accounts an `ambiguous_offer` answer lists.
const AMBIGUOUS_LISTED_MAX: usize = 10;

#[utoipa::path(
    get,
    path = "/v1/offers/{id}/explain",
    summary = "Why an offer traded or not",
    description = "Status, the block's clearing rate against its limit, amounts, and the reason (out of the money by x bp, volume ran out ahead of it, at the money, dropped by a filter rule, cancelled, pending).",
    params(
        ("id" = u64, Path, description = "Offer id: the creating transaction's sequence number"),
        ("account" = Option<u64>, Query, description = "The account that created it, when several used the id")
    ),
    responses(
        (status = 200, description = "the explanation", body = OfferExplanationJson),
        (status = 400, description = "malformed: not an offer or account id", body = walras_api::wire::ApiError),
        (status = 403, description = "gateway_only: with --block-source gateway, read this on --operator-listen", body = walras_api::wire::ApiError),
        (status = 404, description = "unknown_offer", body = walras_api::wire::ApiError),
        (status = 409, description = "ambiguous_offer: several accounts used this offer id; name one with `account`", body = walras_api::wire::ApiError),
        (status = 503, description = "explain_busy: this client's previous explanation is still waiting or running, or too many wait", body = walras_api::wire::ApiError)
    )
)]
pub(crate) async fn offer_explain(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<OfferExplanationJson>, Failure> {
    let id = id.parse::<u64>().map_err(|_| {
        Failure::malformed(format!(
            "offer id {id:?} is not an unsigned integer (an offer's id is the sequence number \
             of the transaction that created it)"
        ))
    })?;
    let account = query
        .get("account")
        .map(|text| super::routes::parse_account(text))
        .transpose()?;
    let ticket = shared
        .explain
        .enter(client.ip())
        .map_err(|refusal| explain_refused(refusal, client))?;
    let permit = ticket.turn().await;
    let reader = shared.clone();
    let explanation = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        explain(&reader, id, account)
    })
    .await
    .map_err(|error| Failure::internal(format!("the explanation stopped: {error}")))??;
    Ok(Json(explanation))
}

/// The 503 for an explanation that may not wait.
fn explain_refused(refusal: TurnRefusal, client: SocketAddr) -> Failure {
    let message = match refusal {
        TurnRefusal::ClientBusy => format!(
            "{} already has an offer explanation waiting or running (one at a time per \
             client); ask again once it is answered",
            client.ip()
        ),
        TurnRefusal::QueueFull => format!(
            "{} offer explanations are waiting for the block log; retry shortly",
            super::limits::EXPLAIN_WAITING_MAX
        ),
    };
    Failure::new(StatusCode::SERVICE_UNAVAILABLE, "explain_busy", message).retry_after(1.0)
}

/// Reads the log and the mempool; errors are the HTTP answers.
fn explain(
    shared: &Shared,
    id: u64,
    account: Option<AccountId>,
) -> Result<OfferExplanationJson, Failure> {
    let account = match account {
        Some(account) => account,
        None => only_account(shared, id)?,
    };
    let target = OfferRef {
        account,
        id: OfferId(id),
    };
    // The mempool before the tip: a transaction that commits in between is then found in the
    // log (a creation found there outranks "pending"), never missed by both.
    let pending = shared.mempool().pending_offer(account, id);
    let tip = shared.tip().height;
    let chain = (usize::from(shared.assets), shared.explain.epsilon());
    let explanation = explain_committed(&shared.store, target, chain, tip, pending, || {
        !shared.is_shutting_down()
    })
    .map_err(read_failure)?;
    if explanation.status == OfferStatus::Unknown {
        return Err(unknown(account, id));
    }
    Ok(OfferExplanationJson::from(&explanation))
}

/// A log that cannot be read is the node's fault (500), a stopping node's 503 aside.
fn read_failure(error: ReadError) -> Failure {
    match error {
        ReadError::Stopped => Failure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the node is stopping; ask again once it is back",
        ),
        error => Failure::internal(error.to_string()),
    }
}

fn unknown(account: AccountId, id: u64) -> Failure {
    Failure::not_found(
        "unknown_offer",
        format!(
            "no committed block and no pending transaction creates offer {id} of account {}",
            account.0
        ),
    )
}

/// The one account with an offer creation of sequence number `id` (committed, dropped or
/// pending); 404 when none, 409 when several.
fn only_account(shared: &Shared, id: u64) -> Result<AccountId, Failure> {
    let mut accounts: BTreeSet<AccountId> =
        shared.mempool().offer_sources(id).into_iter().collect();
    let tip = shared.tip().height;
    // One more than are listed: enough to say "..." after them.
    let committed = offer_accounts(&shared.store, OfferId(id), tip, AMBIGUOUS_LISTED_MAX + 1)
        .map_err(read_failure)?;
    accounts.extend(committed);
    let total = accounts.len();
    let mut found = accounts.into_iter();
    match (found.next(), found.next()) {
        (None, _) => Err(Failure::not_found(
            "unknown_offer",
            format!("no committed block and no pending transaction creates an offer with id {id}"),
        )),
        (Some(account), None) => Ok(account),
        (Some(first), Some(second)) => {
            let listed: Vec<String> = [first, second]
                .into_iter()
                .chain(found)
                .take(AMBIGUOUS_LISTED_MAX)
                .map(|account| account.0.to_string())
                .collect();
            Err(Failure::new(
                StatusCode::CONFLICT,
                "ambiguous_offer",
                format!(
                    "offer ids are per account (the creating transaction's sequence number) and \
                     accounts {}{} have an offer {id}: ask with ?account=ACCOUNT",
                    listed.join(", "),
                    if total > AMBIGUOUS_LISTED_MAX {
                        ", ..."
                    } else {
                        ""
                    }
                ),
            ))
        }
    }
}
