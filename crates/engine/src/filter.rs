//! Deterministic filtering of a block's transactions (SPEEDEX §8, appendix I).
//!
//! A block is a set; its transactions cannot see each other's effects. So validity is decided
//! against the state at the start of the block, in three steps:
//!
//! 1. Each transaction alone (in parallel): its source exists, its signature verified, its
//!    sequence number is in `(last, last + 64]`, its assets exist, a payment's receiver exists, a
//!    cancel names an open offer of its source, a new account's id is free. Failing any of these
//!    drops that transaction only.
//! 2. Across the block: two creations of the same account id drop both; creations beyond the
//!    account cap (`ACCOUNTS_MAX`) are dropped, the highest new ids first; of several
//!    withdrawals of one payments output, the one with the lowest (source, sequence, index)
//!    stays and the others are dropped (`DuplicateWithdrawal`); per asset, withdrawals are kept
//!    by increasing output id while the escrow at the start of the block covers them, the rest
//!    dropped (`EscrowShort`).
//! 3. Per source account (accounts sharded by slot range over threads): if its remaining
//!    transactions reuse a sequence number, cancel one offer twice, or together debit some asset
//!    beyond its balance, *all* of them are dropped.
//!
//! Nothing else is dropped; the outcome does not depend on the order of transactions in the block
//! or on the number of threads.

use crate::accounts::CHUNK_ACCOUNTS;
use crate::admission::{self, Rejection};
use crate::parallel::{map_in_order, run_each};
use crate::state::{ExchangeState, ACCOUNTS_MAX};
use std::collections::HashSet;
use walras_types::{AccountId, AssetId, OfferKey, Operation, SignedTransaction};

pub(crate) use crate::drop_reason::DropReason;

/// An accepted transaction: (index in the block, source slot).
pub(crate) type Admitted = (u32, u32);

/// One shard's verdicts: accepted, and dropped with reasons.
type ShardVerdict = (Vec<Admitted>, Vec<(u32, DropReason)>);

/// Accepted transactions, grouped by the shard of their source and sorted by (slot, sequence),
/// and the dropped ones with their reasons (sorted by index).
pub struct Filtered {
    /// Per shard: (transaction index, source slot).
    pub accepted: Vec<Vec<Admitted>>,
    pub dropped: Vec<(u32, DropReason)>,
    /// Remaining amount of each offer a cancel will remove, by transaction index.
    pub cancel_amounts: Vec<(u32, u64)>,
}

impl Filtered {
    pub fn accepted_count(&self) -> usize {
        self.accepted.iter().map(Vec::len).sum()
    }
}

/// The width of the contiguous slot ranges of at most `threads` shards over `accounts`
/// accounts: a whole number of the accounts' shared chunks, so each shard writes its own.
pub(crate) fn shard_width(accounts: usize, threads: usize) -> usize {
    accounts
        .div_ceil(threads.max(1))
        .max(1)
        .next_multiple_of(CHUNK_ACCOUNTS)
}

/// Filters `transactions` against `state`; `signature_ok[i]` says whether transaction i's
/// signature verified (all true when verification is off).
pub fn filter(
    state: &ExchangeState,
    transactions: &[SignedTransaction],
    signature_ok: &[bool],
    threads: usize,
) -> Filtered {
    let threads = threads.max(1);
    let checked = check_each(state, transactions, signature_ok, threads);
    let mut dropped: Vec<(u32, DropReason)> = Vec::new();
    let mut candidates: Vec<(u32, u32)> = Vec::with_capacity(transactions.len());
    // (index, amount left of the offer it cancels) of each cancel that passed step 1, by index.
    let mut open_cancels: Vec<(u32, u64)> = Vec::new();
    for (index, outcome) in checked.iter().enumerate() {
        match outcome {
            Ok(Passed { slot, cancels }) => {
                candidates.push((index as u32, *slot));
                open_cancels.extend(cancels.map(|amount| (index as u32, amount)));
            }
            Err(reason) => dropped.push((index as u32, *reason)),
        }
    }
    drop_duplicate_creations(transactions, &mut candidates, &mut dropped);
    let room = ACCOUNTS_MAX.saturating_sub(state.accounts.len());
    drop_creations_beyond(room, transactions, &mut candidates, &mut dropped);
    drop_duplicate_withdrawals(transactions, &mut candidates, &mut dropped);
    if let Some(payments) = state.payments() {
        drop_withdrawals_beyond_escrow(
            payments.escrow(),
            transactions,
            &mut candidates,
            &mut dropped,
        );
    }
    let width = shard_width(state.accounts.len(), threads);
    let mut shards: Vec<Vec<(u32, u32)>> = vec![Vec::new(); threads];
    for (index, slot) in candidates {
        shards[slot as usize / width].push((index, slot));
    }
    let results: Vec<ShardVerdict> = run_each(shards, threads, |shard| {
        check_accounts(state, transactions, shard)
    });
    let mut accepted = Vec::with_capacity(threads);
    for (shard_accepted, shard_dropped) in results {
        accepted.push(shard_accepted);
        dropped.extend(shard_dropped);
    }
    dropped.sort_unstable();
    let cancel_amounts = accepted_cancels(open_cancels, &accepted, transactions.len());
    Filtered {
        accepted,
        dropped,
        cancel_amounts,
    }
}

/// What step 1 found of a transaction that passed it.
struct Passed {
    /// Its source's slot.
    slot: u32,
    /// For a cancel, the amount left of the open offer it names (read once, here).
    cancels: Option<u64>,
}

/// Step 1: each transaction alone.
fn check_each(
    state: &ExchangeState,
    transactions: &[SignedTransaction],
    signature_ok: &[bool],
    threads: usize,
) -> Vec<Result<Passed, DropReason>> {
    let indices: Vec<usize> = (0..transactions.len()).collect();
    map_in_order(&indices, threads, |index| {
        check_one(state, &transactions[*index], signature_ok[*index])
    })
}

fn check_one(
    state: &ExchangeState,
    signed: &SignedTransaction,
    signature_ok: bool,
) -> Result<Passed, DropReason> {
    let transaction = &signed.transaction;
    let slot = state.slot(transaction.source);
    let source = slot.map(|slot| state.accounts[slot as usize].admission_view());
    admission::admit(signed, source, state.payments(), |_| signature_ok)
        .map_err(Rejection::drop_reason)?;
    let slot = slot.ok_or(DropReason::UnknownSource)?;
    let known = |asset: AssetId| (asset.0 as usize) < state.assets;
    if !transaction.operation.assets().all(known) {
        return Err(DropReason::UnknownAsset);
    }
    match transaction.operation {
        Operation::CreateAccount { new_account, .. } if state.slot(new_account).is_some() => {
            return Err(DropReason::AccountExists);
        }
        Operation::Payment { to, .. } if state.slot(to).is_none() => {
            return Err(DropReason::UnknownReceiver);
        }
        _ => {}
    }
    let cancels = match transaction.cancelled_offer() {
        Some(cancel) => {
            let book = state.book_at(state.pair_index(cancel.sell, cancel.buy));
            Some(book.get(&cancel.key).ok_or(DropReason::UnknownOffer)?)
        }
        None => None,
    };
    Ok(Passed { slot, cancels })
}

/// Step 2: an account id created twice in the block is created by neither.
fn drop_duplicate_creations(
    transactions: &[SignedTransaction],
    candidates: &mut Vec<(u32, u32)>,
    dropped: &mut Vec<(u32, DropReason)>,
) {
    let creations = creations(transactions, candidates);
    let mut duplicated: HashSet<u32> = HashSet::new();
    for window in creations.windows(2) {
        if window[0].0 == window[1].0 {
            duplicated.insert(window[0].1);
            duplicated.insert(window[1].1);
        }
    }
    drop_all(
        duplicated,
        DropReason::DuplicateAccountCreation,
        candidates,
        dropped,
    );
}

/// The candidates' account creations: (new id, transaction index), sorted.
fn creations(
    transactions: &[SignedTransaction],
    candidates: &[(u32, u32)],
) -> Vec<(AccountId, u32)> {
    let mut creations: Vec<(AccountId, u32)> = candidates
        .iter()
        .filter_map(
            |(index, _)| match transactions[*index as usize].transaction.operation {
                Operation::CreateAccount { new_account, .. } => Some((new_account, *index)),
                _ => None,
            },
        )
        .collect();
    creations.sort_unstable();
    creations
}

/// Moves the candidates whose transaction index is in `indices` to `dropped`, for `reason`.
fn drop_all(
    indices: HashSet<u32>,
    reason: DropReason,
    candidates: &mut Vec<(u32, u32)>,
    dropped: &mut Vec<(u32, DropReason)>,
) {
    if indices.is_empty() {
        return;
    }
    candidates.retain(|(index, _)| {
        let keep = !indices.contains(index);
        if !keep {
            dropped.push((*index, reason));
        }
        keep
    });
}

/// Step 2, the cap: of the block's creations, only the `room` with the lowest new ids are
/// kept (by id, not by place in the block, so that the outcome does not depend on the order);
/// the rest are dropped as `AccountsFull`. Step 3 may drop more, never add any.
fn drop_creations_beyond(
    room: usize,
    transactions: &[SignedTransaction],
    candidates: &mut Vec<(u32, u32)>,
    dropped: &mut Vec<(u32, DropReason)>,
) {
    let creations = creations(transactions, candidates);
    let beyond = creations.get(room..).unwrap_or_default();
    drop_all(
        beyond.iter().map(|(_, index)| *index).collect(),
        DropReason::AccountsFull,
        candidates,
        dropped,
    );
}

/// The candidates' withdrawals: (output id, asset, amount, transaction index).
fn withdrawals(
    transactions: &[SignedTransaction],
    candidates: &[(u32, u32)],
) -> Vec<([u8; 32], AssetId, u64, u32)> {
    candidates
        .iter()
        .filter_map(
            |(index, _)| match transactions[*index as usize].transaction.operation {
                Operation::WithdrawFromPayments { output, .. } => {
                    Some((output.id, output.asset, output.amount, *index))
                }
                _ => None,
            },
        )
        .collect()
}

/// Step 2, withdrawals of one output: the lowest (source, sequence, index) stays, the others
/// are dropped. The index only separates byte-identical copies, so which one stays never
/// depends on the block's order.
fn drop_duplicate_withdrawals(
    transactions: &[SignedTransaction],
    candidates: &mut Vec<(u32, u32)>,
    dropped: &mut Vec<(u32, DropReason)>,
) {
    let mut by_output: Vec<([u8; 32], AccountId, u64, u32)> = withdrawals(transactions, candidates)
        .into_iter()
        .map(|(id, _, _, index)| {
            let transaction = &transactions[index as usize].transaction;
            (id, transaction.source, transaction.sequence, index)
        })
        .collect();
    by_output.sort_unstable();
    let losers: HashSet<u32> = by_output
        .windows(2)
        .filter(|pair| pair[0].0 == pair[1].0)
        .map(|pair| pair[1].3)
        .collect();
    drop_all(losers, DropReason::DuplicateWithdrawal, candidates, dropped);
}

/// Step 2, the escrow: per asset, withdrawals in increasing output id order, each kept if what
/// the escrow at the start of the block has left covers it, dropped otherwise. (With at most `f` faulty payments
/// validators this drops nothing: every certified output was paid for by a deposit.)
fn drop_withdrawals_beyond_escrow(
    escrow: &[u64],
    transactions: &[SignedTransaction],
    candidates: &mut Vec<(u32, u32)>,
    dropped: &mut Vec<(u32, DropReason)>,
) {
    let mut by_asset = withdrawals(transactions, candidates);
    by_asset.sort_unstable_by_key(|(id, asset, _, index)| (*asset, *id, *index));
    let mut beyond = HashSet::new();
    for run in by_asset.chunk_by(|a, b| a.1 == b.1) {
        let mut left = u128::from(escrow.get(usize::from(run[0].1 .0)).copied().unwrap_or(0));
        for (_, _, amount, index) in run {
            match left.checked_sub(u128::from(*amount)) {
                Some(rest) => left = rest,
                None => {
                    beyond.insert(*index);
                }
            }
        }
    }
    drop_all(beyond, DropReason::EscrowShort, candidates, dropped);
}

/// Step 3, for one shard: all-or-nothing per source account.
fn check_accounts(
    state: &ExchangeState,
    transactions: &[SignedTransaction],
    mut shard: Vec<(u32, u32)>,
) -> ShardVerdict {
    let sequence = |index: u32| transactions[index as usize].transaction.sequence;
    shard.sort_unstable_by_key(|(index, slot)| (*slot, sequence(*index), *index));
    let mut accepted = Vec::with_capacity(shard.len());
    let mut dropped = Vec::new();
    for group in shard.chunk_by(|a, b| a.1 == b.1) {
        match account_violation(state, transactions, group) {
            None => accepted.extend_from_slice(group),
            Some(reason) => dropped.extend(group.iter().map(|(index, _)| (*index, reason))),
        }
    }
    (accepted, dropped)
}

/// Why one account's transactions must all be dropped, if they must. `group` is sorted by
/// sequence number.
fn account_violation(
    state: &ExchangeState,
    transactions: &[SignedTransaction],
    group: &[(u32, u32)],
) -> Option<DropReason> {
    let operations = || {
        group
            .iter()
            .map(|(index, _)| &transactions[*index as usize].transaction)
    };
    let reused = group.windows(2).any(|pair| {
        transactions[pair[0].0 as usize].transaction.sequence
            == transactions[pair[1].0 as usize].transaction.sequence
    });
    if reused {
        return Some(DropReason::AccountReusedSequence);
    }
    let mut cancelled: Vec<(AssetId, AssetId, OfferKey)> = operations()
        .filter_map(|transaction| match transaction.operation {
            Operation::CancelOffer {
                sell,
                buy,
                min_price,
                offer_id,
            } => Some((
                sell,
                buy,
                OfferKey {
                    min_price,
                    account: transaction.source,
                    id: offer_id,
                },
            )),
            _ => None,
        })
        .collect();
    cancelled.sort_unstable();
    if cancelled.windows(2).any(|pair| pair[0] == pair[1]) {
        return Some(DropReason::AccountDoubleCancel);
    }
    let mut debits: Vec<(AssetId, u128)> = operations()
        .filter_map(|transaction| admission::debit(&transaction.operation))
        .map(|(asset, amount)| (asset, u128::from(amount)))
        .collect();
    debits.sort_unstable_by_key(|(asset, _)| *asset);
    let account = &state.accounts[group[0].1 as usize];
    for run in debits.chunk_by(|a, b| a.0 == b.0) {
        let total: u128 = run.iter().map(|(_, amount)| amount).sum();
        if total > account.balance(run[0].0) as u128 {
            return Some(DropReason::AccountOverdraft);
        }
    }
    None
}

/// Of `open_cancels` (index, amount left of the offer it cancels; ascending index), those of
/// accepted transactions: the amount each accepted cancel removes from the books, by index.
fn accepted_cancels(
    mut open_cancels: Vec<(u32, u64)>,
    accepted: &[Vec<Admitted>],
    transactions: usize,
) -> Vec<(u32, u64)> {
    let mut is_accepted = vec![false; transactions];
    for (index, _) in accepted.iter().flatten() {
        is_accepted[*index as usize] = true;
    }
    open_cancels.retain(|(index, _)| is_accepted[*index as usize]);
    open_cancels
}

#[cfg(test)]
mod tests {
    use super::*;
    use walras_types::Transaction;

    fn creation(source: u64, new_account: u64) -> SignedTransaction {
        SignedTransaction {
            transaction: Transaction {
                source: AccountId(source),
                sequence: 1,
                operation: Operation::CreateAccount {
                    new_account: AccountId(new_account),
                    public_key: [7; 32],
                },
            },
            signature: [0; 64],
        }
    }

    /// The cap with a small room: the lowest new ids are kept whatever the block's order, the
    /// rest dropped as `AccountsFull`, and other transactions are left alone.
    #[test]
    fn creations_beyond_the_room_are_dropped_highest_ids_first_in_any_order() {
        let block = [
            creation(1, 50),
            creation(2, 10),
            SignedTransaction {
                transaction: Transaction {
                    source: AccountId(3),
                    sequence: 1,
                    operation: Operation::CancelOffer {
                        sell: walras_types::AssetId(0),
                        buy: walras_types::AssetId(1),
                        min_price: walras_types::Price(1),
                        offer_id: walras_types::OfferId(1),
                    },
                },
                signature: [0; 64],
            },
            creation(4, 30),
        ];
        for order in [[0, 1, 2, 3], [3, 2, 1, 0], [1, 3, 0, 2]] {
            let transactions: Vec<SignedTransaction> = order.iter().map(|i| block[*i]).collect();
            let position = |new_account: u64| {
                transactions
                    .iter()
                    .position(|signed| match signed.transaction.operation {
                        Operation::CreateAccount {
                            new_account: id, ..
                        } => id.0 == new_account,
                        _ => false,
                    })
                    .map(|index| index as u32)
            };
            for room in 0..=4 {
                let mut candidates: Vec<(u32, u32)> = (0..4).map(|index| (index, index)).collect();
                let mut dropped = Vec::new();
                drop_creations_beyond(room, &transactions, &mut candidates, &mut dropped);
                let kept_ids: Vec<u64> = [10, 30, 50]
                    .into_iter()
                    .filter(|id| {
                        candidates
                            .iter()
                            .any(|(index, _)| Some(*index) == position(*id))
                    })
                    .collect();
                assert_eq!(
                    kept_ids,
                    [10, 30, 50][..room.min(3)],
                    "room {room} {order:?}"
                );
                assert_eq!(candidates.len() + dropped.len(), 4);
                assert_eq!(candidates.len(), 1 + room.min(3));
                assert!(dropped
                    .iter()
                    .all(|(_, reason)| *reason == DropReason::AccountsFull));
            }
        }
    }
}
