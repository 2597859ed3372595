//! Admission of submitted transactions: known source, signature, sequence window, duplicates,
//! capacity. Decoding (and so size and field ranges) happened before.
//!
//! The order keeps locks short: account facts come from the mempool's cache (the state is read
//! only for accounts not seen before, under its read lock, which waits while a block
//! executes); signatures are checked with no lock held (on a blocking thread for larger
//! submissions), each on its own under `walras_crypto`'s one acceptance rule — the function the
//! engine calls when it produces, checks and replays blocks, so what is admitted here is never
//! dropped as badly signed later; the mempool lock is then taken once for the whole submission.

use super::failure::Failure;
use super::mempool::{AdmissionAccount, AdmitError};
use super::node::Shared;
use axum::http::StatusCode;
use std::collections::BTreeSet;
use walras_crypto::{verify_each, Hash, PublicKey, Signature, SignedItem};
use walras_engine::admission::{self, Rejection, SourceView};
use walras_engine::block::transaction_hash;
use walras_types::{AccountId, Operation, SignedTransaction};

/// Submissions this small verify inline; larger ones move to a blocking thread.
const INLINE_VERIFY_MAX: usize = 8;

/// Admits `transactions`; one result per transaction, in order.
pub async fn admit(
    shared: &Shared,
    transactions: Vec<SignedTransaction>,
) -> Vec<(Hash, Result<(), Failure>)> {
    let hashes: Vec<Hash> = transactions.iter().map(transaction_hash).collect();
    cache_sources(shared, &transactions).await;
    let keys = source_keys(shared, &transactions);
    let signatures_ok = verify_signatures(&transactions, &keys).await;
    // A payments deposit or withdrawal is checked against the state's bridge (escrow,
    // withdrawn set, committee), so the state is read for it — before the mempool lock, the
    // order the producer takes them in. Other submissions do not touch the state here.
    let bridged = transactions.iter().any(|signed| {
        matches!(
            signed.transaction.operation,
            Operation::DepositToPayments { .. } | Operation::WithdrawFromPayments { .. }
        )
    });
    let state = if bridged {
        Some(shared.state.read().await)
    } else {
        None
    };
    let payments = state.as_ref().and_then(|state| state.payments());
    let mut mempool = shared.mempool();
    let waiting_before = mempool.waiting();
    let results: Vec<(Hash, Result<(), Failure>)> = transactions
        .into_iter()
        .zip(hashes)
        .zip(keys.iter().zip(signatures_ok))
        .map(|((signed, hash), (key, signature_ok))| {
            let source = key.map(|key| SourceView {
                key: Some(key),
                last_sequence: mempool.last_sequence(signed.transaction.source),
            });
            let result = match admission::admit(&signed, source, payments, |_| signature_ok) {
                Err(rejection) => Err(rejection_failure(rejection)),
                Ok(()) => mempool.admit(hash, signed).map_err(admit_failure),
            };
            (hash, result)
        })
        .collect();
    let waiting_after = mempool.waiting();
    if waiting_after > 0 && (waiting_before == 0 || waiting_after >= shared.max_block_txs) {
        shared.producer_wake.notify_all();
    }
    drop(mempool);
    drop(state);
    count_results(shared, &results);
    results
}

/// Puts the admission facts of every source not yet cached into the mempool's cache.
async fn cache_sources(shared: &Shared, transactions: &[SignedTransaction]) {
    let missing: BTreeSet<AccountId> = {
        let mempool = shared.mempool();
        transactions
            .iter()
            .map(|signed| signed.transaction.source)
            .filter(|source| mempool.account(*source).is_none())
            .collect()
    };
    if missing.is_empty() {
        return;
    }
    let found: Vec<(AccountId, AdmissionAccount)> = {
        let state = shared.state.read().await;
        missing
            .into_iter()
            .filter_map(|id| {
                let account = state.account(id)?;
                let key = *account.verifying_key()?;
                Some((
                    id,
                    AdmissionAccount {
                        key,
                        last_sequence: account.last_sequence,
                    },
                ))
            })
            .collect()
    };
    let mut mempool = shared.mempool();
    for (id, facts) in found {
        mempool.remember(id, facts);
    }
}

fn source_keys(shared: &Shared, transactions: &[SignedTransaction]) -> Vec<Option<PublicKey>> {
    let mempool = shared.mempool();
    transactions
        .iter()
        .map(|signed| {
            mempool
                .account(signed.transaction.source)
                .map(|facts| facts.key)
        })
        .collect()
}

async fn verify_signatures(
    transactions: &[SignedTransaction],
    keys: &[Option<PublicKey>],
) -> Vec<bool> {
    let work: Vec<(Vec<u8>, PublicKey, Signature)> = transactions
        .iter()
        .zip(keys)
        .filter_map(|(signed, key)| {
            let signature = Signature::from_bytes(&signed.signature).ok()?;
            Some((signed.transaction.encode(), (*key)?, signature))
        })
        .collect();
    let checks = if work.len() <= INLINE_VERIFY_MAX {
        verify_all(&work)
    } else {
        let moved = work;
        match tokio::task::spawn_blocking(move || verify_all(&moved)).await {
            Ok(checks) => checks,
            // The verifier panicked: refuse everything rather than admit unchecked.
            Err(_) => vec![false; transactions.len()],
        }
    };
    // Re-align with the input: items without a key or with an unparsable signature failed.
    let mut checks = checks.into_iter();
    transactions
        .iter()
        .zip(keys)
        .map(|(signed, key)| {
            let checked = key.is_some() && Signature::from_bytes(&signed.signature).is_ok();
            checked && checks.next().unwrap_or(false)
        })
        .collect()
}

fn verify_all(work: &[(Vec<u8>, PublicKey, Signature)]) -> Vec<bool> {
    let items: Vec<SignedItem<'_>> = work
        .iter()
        .map(|(message, key, signature)| (message.as_slice(), key, signature))
        .collect();
    verify_each(&items)
}

fn count_results(shared: &Shared, results: &[(Hash, Result<(), Failure>)]) {
    let mut admitted = 0;
    for (_, result) in results {
        match result {
            Ok(()) => admitted += 1,
            Err(failure) => shared.metrics.count_rejected(failure.code),
        }
    }
    shared.metrics.transactions_admitted_total.inc_by(admitted);
}

/// The HTTP answer to a refusal by the admission rule: its code, its message.
pub fn rejection_failure(rejection: Rejection) -> Failure {
    let status = match rejection {
        Rejection::Malformed | Rejection::BadSignature => StatusCode::BAD_REQUEST,
        Rejection::UnknownSource | Rejection::SequenceOutOfWindow { .. } => {
            StatusCode::UNPROCESSABLE_ENTITY
        }
        Rejection::Replayed { .. } => StatusCode::CONFLICT,
        Rejection::Payments(_) => StatusCode::UNPROCESSABLE_ENTITY,
    };
    Failure::new(status, rejection.code(), rejection.to_string())
}

fn admit_failure(error: AdmitError) -> Failure {
    match error {
        AdmitError::Duplicate => Failure::new(
            StatusCode::CONFLICT,
            "duplicate",
            "a transaction with this source and sequence number is already pending",
        ),
        AdmitError::Full { capacity } => Failure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "mempool_full",
            format!("the mempool holds {capacity} transactions; retry shortly"),
        )
        .retry_after(1.0),
        AdmitError::NotCached => Failure::internal("account facts missing after lookup"),
    }
}
