//! Admission of submitted transactions: known source, signature, sequence window, duplicates,
//! capacity. Decoding (and so size and field ranges) happened before.
//!
//! The order keeps locks short: account facts come from the account view published for the
//! last committed block (`Shared::accounts`, an immutable value: the state, write-locked while
//! a block executes, is read only for payments deposits and withdrawals); signatures are
//! checked with no lock held (on a blocking thread for larger submissions) under
//! `walras_crypto`'s one acceptance rule — the function the engine calls when it produces,
//! checks and replays blocks, so what is admitted here is never dropped as badly signed later;
//! the mempool lock is then taken once for the whole submission, and the rule
//! (`walras_engine::admission`) is applied there against the view read under that lock.
//!
//! Each signature is checked once per node. The solo producer takes its batches from the
//! mempool, where only what admission accepted goes, so it takes admission's verdicts (and
//! hashes) with the batch (`walras_engine::ExchangeState::propose_admitted`); keys never
//! change, so they are still the verdicts under the source's key. In replicated mode,
//! admission also records its accepted verdicts in `Shared::accepted_signatures` (keyed by
//! key, signature and message bytes), where CheckTx and the proposal checks find them.
//! Recovery and replicas check everything; a verdict taken over is what the check would
//! return, so no path can differ.
//!
//! Two reads of the view, on purpose: keys never change, so the key the signature was checked
//! with (first read) is still the account's key; sequence numbers change with every block, and
//! the view is replaced only under the mempool lock (`Shared::committed`), so the second read,
//! under that lock, agrees with the mempool's pending slots. A block that commits while the
//! signatures are checked therefore turns a resubmission of one of its transactions into a
//! replay, never into a second pending copy.

use super::failure::Failure;
use super::mempool::{AdmitError, Mempool};
use super::node::Shared;
use super::overload::{Full, Overload};
use axum::http::StatusCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use walras_crypto::{AcceptedSignatures, Hash, PublicKey, Signature, SignedItem};
use walras_engine::transaction_hash;
use walras_engine::{self as engine, Rejection, SourceView};
use walras_engine::{AccountView, PaymentsBridge};
use walras_types::SignedTransaction;

/// Submissions this small verify inline; larger ones move to a blocking thread.
const INLINE_VERIFY_MAX: usize = 8;

/// Admits `transactions`; one result per transaction, in order.
///
/// What the mempool has no room for when the submission arrives is refused `mempool_full`
/// first, before any signature is checked: under overload the node spends no verification on
/// what it would refuse anyway. Room is the one rule of [`crate::overload`]: the mempool
/// holds no more than its capacity, nor more than it commits within the commit bound at the
/// measured rate (the same rule decides again under the mempool lock, after verification, for
/// the rest). A duplicate of a pending transaction that arrives while the mempool is full is
/// therefore answered `mempool_full`, not `duplicate`.
pub(crate) async fn admit(
    shared: &Shared,
    mut transactions: Vec<SignedTransaction>,
) -> Vec<(Hash, Result<(), Failure>)> {
    let (room, full) = {
        let mempool = shared.mempool();
        let pending = shared.pending_for_admission(mempool.len());
        let (room, full) = shared.overload().room(pending, transactions.len());
        shared.verifying.fetch_add(room, Ordering::Relaxed);
        (room, full)
    };
    let reserved = Reservation { shared, room };
    let shed = transactions.split_off(room.min(transactions.len()));
    let mut results = admit_within_room(shared, transactions).await;
    drop(reserved);
    if let (false, Some(full)) = (shed.is_empty(), full) {
        // One refusal for the whole tail, written and counted once: under overload most of
        // what arrives is this tail (per transaction, formatting and counting were about a
        // fifth of a refusal's cost in the test profile; within the noise in release).
        let refusal = full_failure(full);
        shared.metrics.count_rejected_many(refusal.code, shed.len());
        results.extend(
            shed.iter()
                .map(|signed| (transaction_hash(signed), Err(refusal.clone()))),
        );
    }
    results
}

/// Room reserved for a submission while its signatures are checked (see `Shared::verifying`);
/// given back when the submission is decided, or dropped (a client that hung up).
struct Reservation<'a> {
    shared: &'a Shared,
    room: usize,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.shared
            .verifying
            .fetch_sub(self.room, Ordering::Relaxed);
    }
}

/// The whole submission's refusal when the mempool has no room at all: checked before the
/// body is decoded, so that under overload a request costs the node next to nothing. Counted
/// as `transactions` refusals.
pub(crate) fn refuse_if_full(shared: &Shared) -> Result<(), Failure> {
    let (room, full) = {
        let mempool = shared.mempool();
        let pending = shared.pending_for_admission(mempool.len());
        shared.overload().room(pending, 1)
    };
    match (room, full) {
        (0, Some(full)) => {
            shared.metrics.count_rejected("mempool_full");
            Err(full_failure(full))
        }
        _ => Ok(()),
    }
}

/// The refusal of a transaction the mempool has no room for (one code for either limit).
pub(crate) fn full_failure(full: Full) -> Failure {
    Failure::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "mempool_full",
        full.message(),
    )
    .retry_after(full.retry_after_s())
}

/// [`admit`] for the transactions the mempool had room for when they arrived.
async fn admit_within_room(
    shared: &Shared,
    transactions: Vec<SignedTransaction>,
) -> Vec<(Hash, Result<(), Failure>)> {
    let hashes: Vec<Hash> = transactions.iter().map(transaction_hash).collect();
    let sources = {
        let view = shared.accounts.load();
        read_sources(&view, &transactions)
    };
    let keys: Vec<Option<PublicKey>> = sources
        .iter()
        .map(|source| source.and_then(|source| source.key))
        .collect();
    let remembered = shared
        .record_admitted_verdicts
        .load(Ordering::Relaxed)
        .then(|| shared.accepted_signatures.clone());
    let signatures_ok = verify_signatures(&transactions, &keys, remembered).await;
    // A payments deposit or withdrawal is checked against the state's bridge (escrow,
    // withdrawn set, committee), so the state is read for it — before the mempool lock, the
    // order the producer takes them in. Other submissions do not touch the state here.
    let bridged = transactions
        .iter()
        .any(|signed| signed.transaction.operation.is_bridged());
    let state = if bridged {
        Some(shared.state.read().await)
    } else {
        None
    };
    let payments = state.as_ref().and_then(|state| state.payments());
    let mut mempool = shared.mempool();
    let overload = shared.overload().clone();
    let waiting_before = mempool.waiting();
    let view = shared.accounts.load();
    let submission = transactions
        .into_iter()
        .zip(hashes)
        .zip(sources.into_iter().zip(signatures_ok))
        .map(|((signed, hash), (source, signature_ok))| (hash, signed, source, signature_ok));
    let results = decide(&mut mempool, &view, payments, &overload, submission);
    let waiting_after = mempool.waiting();
    if waiting_after > 0 && (waiting_before == 0 || waiting_after >= shared.max_block_txs) {
        shared.producer_wake.notify_all();
    }
    drop(view);
    drop(mempool);
    drop(state);
    count_results(shared, &results);
    results
}

/// What the view says of each transaction's source (read before the signatures are checked:
/// their keys).
fn read_sources(view: &AccountView, transactions: &[SignedTransaction]) -> Vec<Option<SourceView>> {
    transactions
        .iter()
        .map(|signed| view.source(signed.transaction.source))
        .collect()
}

/// The admission rule, then the mempool's room ([`Overload::room`], read under the same
/// lock), then the mempool, for each (hash, transaction, source as first read, signature
/// verdict), in order. `view` must be the view read under the lock that `mempool` is borrowed
/// from (see the module documentation); a source the first read did not know is unknown even
/// if it was created since (its signature was not checked).
fn decide(
    mempool: &mut Mempool,
    view: &AccountView,
    payments: Option<&PaymentsBridge>,
    overload: &Overload,
    submission: impl Iterator<Item = (Hash, SignedTransaction, Option<SourceView>, bool)>,
) -> Vec<(Hash, Result<(), Failure>)> {
    let now = Instant::now();
    submission
        .map(|(hash, signed, first, signature_ok)| {
            let source = first.and(view.source(signed.transaction.source));
            let result = match engine::admit(&signed, source, payments, |_| signature_ok)
                .and_then(|()| check_funds(mempool, view, &signed))
            {
                Err(rejection) => Err(rejection_failure(rejection)),
                Ok(()) => match overload.room(mempool.len(), 1) {
                    (0, Some(full)) => Err(full_failure(full)),
                    _ => mempool.admit(hash, signed, now).map_err(admit_failure),
                },
            };
            (hash, result)
        })
        .collect()
}

/// Admission's advisory funds check: the source's balance in `view` less what its pending
/// transactions in `mempool` debit (the block's overdraft rule still decides).
fn check_funds(
    mempool: &Mempool,
    view: &AccountView,
    signed: &SignedTransaction,
) -> Result<(), Rejection> {
    let source = signed.transaction.source;
    engine::check_funds(&signed.transaction.operation, |asset| {
        view.balance(source, asset)
            .saturating_sub(mempool.pending_debit(source, asset))
    })
}

/// Each transaction's verdict under the acceptance rule, in order; recorded in `remembered`
/// when something will look for it there (replicated mode).
async fn verify_signatures(
    transactions: &[SignedTransaction],
    keys: &[Option<PublicKey>],
    remembered: Option<Arc<AcceptedSignatures>>,
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
        verify_all(&work, remembered.as_deref())
    } else {
        let moved = work;
        match tokio::task::spawn_blocking(move || verify_all(&moved, remembered.as_deref())).await {
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

/// The verdicts, in batches on this thread, taken from and recorded in `remembered` if given.
fn verify_all(
    work: &[(Vec<u8>, PublicKey, Signature)],
    remembered: Option<&AcceptedSignatures>,
) -> Vec<bool> {
    let items: Vec<SignedItem<'_>> = work
        .iter()
        .map(|(message, key, signature)| (message.as_slice(), key, signature))
        .collect();
    match remembered {
        Some(remembered) => remembered.verify_each_parallel(&items, 1),
        None => walras_crypto::verify_each_parallel(&items, 1),
    }
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
pub(crate) fn rejection_failure(rejection: Rejection) -> Failure {
    let status = match rejection {
        Rejection::Malformed | Rejection::BadSignature => StatusCode::BAD_REQUEST,
        Rejection::UnknownSource | Rejection::SequenceOutOfWindow { .. } => {
            StatusCode::UNPROCESSABLE_ENTITY
        }
        Rejection::Replayed { .. } => StatusCode::CONFLICT,
        Rejection::Payments(_) | Rejection::InsufficientBalance { .. } => {
            StatusCode::UNPROCESSABLE_ENTITY
        }
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
        AdmitError::Full { capacity } => full_failure(Full::Capacity { capacity }),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::node::{produce_block, ProducerConfig, Shared, Signatures};
    use std::time::Duration;
    use walras_api::wire::DevGenesisJson;
    use walras_devnet::dev_keypair;
    use walras_testkit::TempDir;
    use walras_types::transaction::SEQUENCE_WINDOW;
    use walras_types::{AccountId, AssetId, Operation, Transaction};

    pub(crate) const DEV: DevGenesisJson = DevGenesisJson {
        seed: 9,
        accounts: 20,
        assets: 2,
    };

    fn payment(source: u64, sequence: u64) -> SignedTransaction {
        payment_of(source, sequence, AssetId(0), 1)
    }

    fn payment_of(source: u64, sequence: u64, asset: AssetId, amount: u64) -> SignedTransaction {
        let transaction = Transaction {
            source: AccountId(source),
            sequence,
            operation: Operation::Payment {
                to: AccountId(source + 1),
                asset,
                amount,
            },
        };
        let signature = dev_keypair(&DEV, transaction.source).sign(&transaction.encode());
        SignedTransaction {
            transaction,
            signature: *signature.as_bytes(),
        }
    }

    /// A recovered node with nothing started, and what its producer would use.
    pub(crate) fn node(dir: &TempDir) -> (Shared, ProducerConfig) {
        let config = node_config(dir);
        let shared = crate::recovery::open_and_recover(&config).unwrap();
        let producer = ProducerConfig {
            block_interval: config.block_interval,
            max_block_txs: config.max_block_txs,
            engine: crate::config::proposer_engine_config(&config),
            warm_start: config.warm_start,
        };
        (shared, producer)
    }

    fn node_config(dir: &TempDir) -> crate::NodeConfig {
        // As `walras_testkit::dev_node_config` (which names the other copy of this crate).
        crate::NodeConfig {
            data_dir: dir.path().join("node"),
            listen: "127.0.0.1:0".into(),
            genesis: crate::GenesisSource::Dev(DEV, walras_devnet::dev_genesis_builder),
            block_interval: std::time::Duration::from_millis(100),
            max_block_txs: 1000,
            mempool_capacity: 1000,
            threads: 1,
            clearing_timeout: std::time::Duration::from_millis(500),
            rate_limit_rps: 0,
            rate_limit_burst: 1,
            consensus: crate::Consensus::Solo,
            serve: Default::default(),
            oracle: None,
            warm_start: Default::default(),
            commit_bound: crate::overload::COMMIT_BOUND_DEFAULT,
        }
    }

    fn submit(shared: &Shared, transactions: Vec<SignedTransaction>) -> Vec<Result<(), &str>> {
        submit_for_failures(shared, transactions)
            .into_iter()
            .map(|result| result.map_err(|failure| failure.code))
            .collect()
    }

    fn submit_for_failures(
        shared: &Shared,
        transactions: Vec<SignedTransaction>,
    ) -> Vec<Result<(), Failure>> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime
            .block_on(admit(shared, transactions))
            .into_iter()
            .map(|(_, result)| result)
            .collect()
    }

    /// Commits whatever the mempool holds as one block, as the solo producer does.
    fn commit_block(shared: &Shared, producer: &ProducerConfig) {
        let batch = shared.mempool().take(100);
        produce_block(shared, producer, batch, Signatures::AcceptedAtAdmission).unwrap();
    }

    /// Trigger (issue 31): past saturation the node verified every signature of a submission
    /// before finding the mempool full (593k `mempool_full` refusals at 120k tx/s offered on
    /// 16 cores, each after a signature check). What the mempool has no room for is now refused
    /// before its signature is looked at: a badly signed transaction beyond the room is
    /// answered `mempool_full`, not `bad_signature`.
    #[test]
    fn what_the_mempool_has_no_room_for_is_refused_before_its_signature_is_checked() {
        let dir = TempDir::new("shed-before-signatures");
        let (shared, _) = node(&dir);
        // Fill the mempool (capacity 1,000) up to 2 free slots.
        let mut filler = Vec::new();
        for source in 1..=18u64 {
            for sequence in 1..=SEQUENCE_WINDOW.min(56) {
                filler.push(payment(source, sequence));
            }
        }
        filler.truncate(998);
        assert!(submit(&shared, filler).iter().all(Result::is_ok));
        let mut forged = payment(19, 2);
        forged.signature[0] ^= 1;
        let results = submit(
            &shared,
            vec![payment(19, 1), forged, payment(19, 3), payment(19, 4)],
        );
        assert_eq!(
            results,
            vec![
                Ok(()),
                Err("bad_signature"),
                Err("mempool_full"),
                Err("mempool_full")
            ]
        );
        assert_eq!(shared.mempool().len(), 999);
    }

    /// In CometBFT mode admission counts the network's pending set (what this node's CheckTx
    /// holds), not only its own mempool: with CometBFT's mempool full, an empty node mempool
    /// admits nothing. Trigger: see `Shared::replicated_pending` (node 0 of a localnet
    /// admitted all it was offered at 3x while CometBFT held a backlog that expired).
    #[test]
    fn a_node_admits_nothing_while_the_network_s_pending_set_is_full() {
        let dir = TempDir::new("replicated-pending");
        let (shared, _) = node(&dir);
        shared
            .replicated_pending
            .store(1_000, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(
            submit(&shared, vec![payment(1, 1)]),
            vec![Err("mempool_full")]
        );
        assert!(refuse_if_full(&shared).is_err());
        shared
            .replicated_pending
            .store(10, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(submit(&shared, vec![payment(1, 1)]), vec![Ok(())]);
    }

    /// Trigger (issue 31): the producer took whatever waited, however long ago it was admitted
    /// (a solo node offered 120k/s on 16 cores committed at a p50 of 4.2 s). Now, before it
    /// takes a block, it drops, oldest first, what that block would commit after the commit
    /// bound: never proposed, counted as shed, its (source, sequence) free again.
    #[test]
    fn the_producer_drops_what_waited_too_long_to_commit_within_the_bound_and_never_proposes_it() {
        let dir = TempDir::new("shed-old");
        let (shared, producer) = node(&dir);
        let long_ago = std::time::Instant::now() - 2 * crate::overload::COMMIT_BOUND_DEFAULT;
        for source in [1, 2] {
            let signed = payment(source, 1);
            let hash = transaction_hash(&signed);
            shared.mempool().admit(hash, signed, long_ago).unwrap();
        }
        assert_eq!(submit(&shared, vec![payment(3, 1)]), vec![Ok(())]);
        let mut last_cut = std::time::Instant::now() - producer.block_interval;
        let (batch, oldest) =
            crate::node::wait_for_batch(&shared, &producer, &mut last_cut).expect("a block is due");
        let sources: Vec<u64> = batch.iter().map(|(_, s)| s.transaction.source.0).collect();
        assert_eq!(sources, vec![3], "only the recent one is proposed");
        assert!(oldest.is_some_and(|oldest| oldest > long_ago));
        let metrics = shared.metrics.render((0, 0));
        assert!(
            metrics.contains("walras_transactions_shed_total{reason=\"expired\"} 2"),
            "{metrics}"
        );
        assert_eq!(
            shared.mempool().next_sequence(AccountId(1), 0),
            1,
            "free again"
        );
        assert_eq!(submit(&shared, vec![payment(1, 1)]), vec![Ok(())]);
    }

    /// Trigger (issue 31, the 2-core VM at 60k/s offered pre-signed): the mempool never
    /// filled, because the node verified every submission's signatures before its
    /// transactions counted as pending, so signature checks queued without bound (requests
    /// took seconds and nothing was refused). Room is now reserved when a submission passes
    /// the room check and counted as pending until it is decided: what other submissions
    /// hold in verification leaves this one no room.
    #[test]
    fn transactions_whose_signatures_are_being_checked_count_as_pending() {
        let dir = TempDir::new("verifying-pending");
        let (shared, _) = node(&dir);
        shared.verifying.store(999, Ordering::Relaxed);
        assert_eq!(
            submit(&shared, vec![payment(1, 1), payment(2, 1)]),
            vec![Ok(()), Err("mempool_full")]
        );
        shared.verifying.store(1000, Ordering::Relaxed);
        assert_eq!(
            refuse_if_full(&shared).map_err(|f| f.code),
            Err("mempool_full")
        );
        shared.verifying.store(0, Ordering::Relaxed);
        assert_eq!(submit(&shared, vec![payment(2, 1)]), vec![Ok(())]);
        assert_eq!(
            shared.verifying.load(Ordering::Relaxed),
            0,
            "reservations given back"
        );
    }

    /// A resubmission of a transaction that is in the block being executed: its submission
    /// read the view before the block committed (keys, signature check), the block commits,
    /// then the submission reaches the mempool lock. The sequence check must use the view
    /// published with the block, or the transaction would enter the mempool a second time
    /// (its slot was just freed) and be dropped as a replay in the next block.
    #[test]
    fn a_block_committing_while_a_submission_is_in_flight_makes_it_a_replay() {
        let dir = TempDir::new("account-view-in-flight");
        let (shared, producer) = node(&dir);
        let signed = payment(1, 1);
        assert_eq!(submit(&shared, vec![signed]), vec![Ok(())]);
        // The resubmission's first read, before the lock (the block has not committed).
        let stale = shared.accounts.load_full();
        let first = read_sources(&stale, &[signed]);
        assert_eq!(first[0].map(|source| source.last_sequence), Some(0));
        commit_block(&shared, &producer);
        assert_eq!(shared.accounts.load().height(), 1);
        let hash = transaction_hash(&signed);
        let decided = |mempool: &mut Mempool, view: &AccountView| {
            let submission = std::iter::once((hash, signed, first[0], true));
            let overload = Overload::new(Duration::from_secs(2), 1000, 1000);
            let results = decide(mempool, view, None, &overload, submission);
            results[0]
                .1
                .as_ref()
                .map_err(|failure| failure.code)
                .copied()
        };
        let mut mempool = shared.mempool();
        let view = shared.accounts.load();
        assert_eq!(decided(&mut mempool, &view), Err("replayed"));
        assert!(mempool.is_empty());
        // What the check against the first read would have done: admitted it again.
        assert_eq!(decided(&mut mempool, &stale), Ok(()));
    }

    /// The sequence window moves with the committed block: a sequence number one past the
    /// window is refused at genesis and admitted once the block using sequence 1 commits;
    /// the view agrees with the state after every block.
    #[test]
    fn the_sequence_window_moves_when_a_block_commits() {
        let dir = TempDir::new("account-view-window");
        let (shared, producer) = node(&dir);
        let far = payment(2, SEQUENCE_WINDOW + 1);
        assert_eq!(
            submit(&shared, vec![payment(2, 1), far]),
            vec![Ok(()), Err("sequence_out_of_window")]
        );
        assert_eq!(
            shared.mempool().next_sequence(AccountId(2), 0),
            2,
            "sequence 1 is pending"
        );
        commit_block(&shared, &producer);
        let view = shared.accounts.load_full();
        let state = shared.state.blocking_read();
        for id in 0..DEV.accounts {
            let id = AccountId(id);
            let expected = state.account(id).map(|account| account.admission_view());
            assert_eq!(view.source(id), expected, "{id:?}");
        }
        drop(state);
        assert_eq!(view.source(AccountId(2)).unwrap().last_sequence, 1);
        assert_eq!(
            submit(&shared, vec![far, payment(2, 1)]),
            vec![Ok(()), Err("replayed")]
        );
        assert_eq!(shared.mempool().next_sequence(AccountId(2), 1), 2);
    }

    /// Trigger: every signature was checked twice on a solo node, at HTTP admission and again
    /// in the producer's `propose` (`verify_signatures: true`); then the second check looked
    /// each admitted verdict up by a hash of the whole transaction, which still cost the block
    /// a third of its time at saturation. Now the producer's batch carries admission's
    /// verdicts: the block looks nothing up, and admission records nothing in solo mode.
    #[test]
    fn the_producer_takes_admissions_verdicts_instead_of_checking_signatures_again() {
        let dir = TempDir::new("verdicts-once");
        let (shared, producer) = node(&dir);
        let submitted: Vec<SignedTransaction> = (1..=5).map(|source| payment(source, 1)).collect();
        assert_eq!(submit(&shared, submitted.clone()), vec![Ok(()); 5]);
        let batch = shared.mempool().take(100);
        let outcome =
            produce_block(&shared, &producer, batch, Signatures::AcceptedAtAdmission).unwrap();
        assert_eq!((outcome.accepted, outcome.dropped.len()), (5, 0));
        assert_eq!(shared.accepted_signatures.found(), 0, "nothing looked up");
        let messages: Vec<Vec<u8>> = submitted.iter().map(|s| s.transaction.encode()).collect();
        let state = shared.state.blocking_read();
        let keys: Vec<&PublicKey> = submitted
            .iter()
            .map(|s| {
                state
                    .account(s.transaction.source)
                    .unwrap()
                    .verifying_key()
                    .unwrap()
            })
            .collect();
        let signatures: Vec<Signature> = submitted
            .iter()
            .map(|s| Signature::from_bytes(&s.signature).unwrap())
            .collect();
        let items: Vec<SignedItem<'_>> = (0..submitted.len())
            .map(|i| (messages[i].as_slice(), keys[i], &signatures[i]))
            .collect();
        shared.accepted_signatures.verify_each_parallel(&items, 1);
        assert_eq!(
            shared.accepted_signatures.found(),
            0,
            "solo admission recorded no verdict"
        );
    }

    /// Trigger: the producer stopped checking the signatures of its mempool's batches (it
    /// takes admission's verdicts). Whatever admission let in or refused (valid payments and
    /// offers, a forged signature, an unknown source, a payment beyond the balance), the blocks
    /// the producer commits are those a replay checking every signature commits from genesis:
    /// the same transactions accepted and dropped, the same state roots.
    #[test]
    fn the_producer_commits_what_a_replay_checking_every_signature_commits() {
        let dir = TempDir::new("verdicts-replayed");
        let (shared, producer) = node(&dir);
        let forged = SignedTransaction {
            signature: payment(4, 2).signature,
            ..payment(4, 1)
        };
        let unknown = SignedTransaction {
            transaction: Transaction {
                source: AccountId(DEV.accounts + 7),
                ..payment(1, 1).transaction
            },
            ..payment(1, 1)
        };
        let first = vec![
            payment(1, 1),
            forged,
            payment(2, 1),
            unknown,
            payment_of(3, 1, AssetId(1), u64::MAX / 2),
            payment(4, 1),
        ];
        let verdicts = submit(&shared, first);
        assert_eq!(verdicts[1], Err("bad_signature"));
        assert_eq!(verdicts[3], Err("unknown_account"));
        assert_eq!(verdicts[4], Err("insufficient_balance"));
        commit_block(&shared, &producer);
        assert_eq!(
            submit(&shared, (5..=9).map(|source| payment(source, 1)).collect()),
            vec![Ok(()); 5]
        );
        assert_eq!(submit(&shared, vec![payment(1, 2)]), vec![Ok(())]);
        commit_block(&shared, &producer);
        let replay_dir = TempDir::new("verdicts-replay");
        let (replayer, _) = node(&replay_dir);
        let checking = crate::config::recovery_engine_config(&node_config(&replay_dir));
        let mut replayed = replayer.state.blocking_write();
        for height in 1..=2 {
            let block = shared.store.block(height).unwrap().unwrap();
            let outcome = replayed.apply(&block, &checking).unwrap();
            assert_eq!(outcome.header, block.header, "block {height}");
            assert!(outcome.dropped.is_empty(), "block {height}: {outcome:?}");
        }
        assert_eq!(replayed.height(), 2);
        let mut produced = shared.state.blocking_write();
        assert_eq!(replayed.state_root(1), produced.state_root(1));
    }

    /// Trigger: a third party copies a payment before it reaches the node, adds a torsion point
    /// to its signature's R (a key-less change that the cofactored ZIP-215 check might be
    /// suspected to let through) and submits the copy first, to take the (source, sequence)
    /// slot so the original is refused as a duplicate (or, in one block, both are dropped for
    /// a reused sequence). Every such copy is refused as badly signed, and the original is
    /// admitted and committed.
    #[test]
    fn a_malleated_copy_submitted_first_does_not_keep_the_original_out() {
        let dir = TempDir::new("malleated-first");
        let (shared, producer) = node(&dir);
        let original = payment(3, 1);
        let signature = Signature::from_bytes(&original.signature).unwrap();
        for torsion in 1..8 {
            let copy = SignedTransaction {
                signature: *walras_crypto::testing::with_torsion_added_to_r(&signature, torsion)
                    .as_bytes(),
                ..original
            };
            assert_eq!(submit(&shared, vec![copy]), vec![Err("bad_signature")]);
        }
        assert_eq!(submit(&shared, vec![original]), vec![Ok(())]);
        let batch = shared.mempool().take(100);
        let outcome =
            produce_block(&shared, &producer, batch, Signatures::AcceptedAtAdmission).unwrap();
        assert_eq!((outcome.accepted, outcome.dropped.len()), (1, 0));
    }

    /// Trigger (issue 28 item 8): a payment beyond the source's balance was admitted (`202`)
    /// and only dropped in its block as `account_overdraft`. Admission now refuses it
    /// `insufficient_balance` (422, available and asked in the message), counting what the
    /// source's pending transactions already debit, and reads the balance after each block.
    #[test]
    fn an_overdraft_is_refused_at_admission_counting_what_is_pending() {
        let dir = TempDir::new("funds-check");
        let (shared, producer) = node(&dir);
        let source = AccountId(1);
        let (asset, balance) = {
            let state = shared.state.blocking_read();
            let held = state.account(source).unwrap().balances();
            *held.iter().max_by_key(|(_, amount)| *amount).unwrap()
        };
        assert!(balance > 3, "the development account holds {balance}");
        assert_eq!(shared.accounts.load().balance(source, asset), balance);
        let results = submit_for_failures(
            &shared,
            vec![
                payment_of(1, 1, asset, balance - 1),
                payment_of(1, 2, asset, 2),
                payment_of(1, 3, asset, 1),
            ],
        );
        assert!(results[0].is_ok() && results[2].is_ok(), "{results:?}");
        let refused = results[1].as_ref().unwrap_err();
        assert_eq!(
            (refused.status, refused.code),
            (StatusCode::UNPROCESSABLE_ENTITY, "insufficient_balance")
        );
        assert!(
            refused.message.contains("takes 2 of asset")
                && refused.message.contains("has 1 available"),
            "{}",
            refused.message
        );
        commit_block(&shared, &producer);
        assert_eq!(shared.accounts.load().balance(source, asset), 0);
        assert_eq!(
            shared.accounts.load().balance(AccountId(2), asset),
            shared
                .state
                .blocking_read()
                .account(AccountId(2))
                .unwrap()
                .balance(asset),
            "the receiver's balance is read again too"
        );
        assert_eq!(
            submit(&shared, vec![payment_of(1, 4, asset, 1)]),
            vec![Err("insufficient_balance")]
        );
    }
}
