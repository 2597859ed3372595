//! The one admission rule: whether a signed transaction, taken alone, may take effect against
//! the state at the start of a block. Every path applies this function and no other: the HTTP
//! API's admission, CometBFT's `CheckTx`, the block filter of the proposer, follower and
//! replay ([`crate::filter`]), and the serial order-book baseline (`walras_bench::orderbook`).
//!
//! The checks run cheapest first, and the first that fails decides:
//!
//! 1. the operation's fields are in range (decoding guarantees it; built-in-memory
//!    transactions are checked again) — [`Rejection::Malformed`];
//! 2. the source account exists — [`Rejection::UnknownSource`];
//! 3. the sequence number is above the account's last committed one
//!    ([`Rejection::Replayed`]) and at most [`SEQUENCE_WINDOW`] above it
//!    ([`Rejection::SequenceOutOfWindow`]);
//! 4. the signature verifies under `walras_crypto`'s one acceptance rule with the account's
//!    key ([`Rejection::BadSignature`]); the caller supplies the verdict (signatures are
//!    verified in parallel batches, or not again when already verified by this node);
//! 5. a payments deposit or withdrawal is checked against the bridge of the state at the
//!    start of the block ([`Rejection::Payments`], see [`crate::bridge`]): the exchange has a
//!    payments committee, a deposit's owner is a valid key; a withdrawal's output is owned by
//!    the source's key, its certificate is for this chain and epoch, the output was not
//!    withdrawn, the escrow covers it, a quorum signed and the aggregate verifies (last: two
//!    pairings).
//!
//! What is not decided here depends on more than one transaction or on a node's own queue:
//! the block-wide rules of [`crate::filter`] (overdrafts, reused sequence numbers, double
//! cancels, duplicate creations, two withdrawals of one output, withdrawals beyond the escrow)
//! and the mempool's duplicates and capacity.
//!
//! One more check runs at admission only, after the rule: [`check_funds`], the advisory
//! pre-check of the balance a transaction debits ([`debit`]) against what its source has
//! available at admission ([`Rejection::InsufficientBalance`], code `insufficient_balance`).
//! Admission paths apply it (the HTTP API and `CheckTx` against the account view minus what
//! the source has pending in the node's mempool; the gateway against the balance it read from
//! the node); the block filter does not: what a block accepts is decided by its overdraft rule
//! alone ([`crate::filter`], `account_overdraft`), which sums the same [`debit`]s.

use crate::bridge::PaymentsBridge;
use crate::bridge::PaymentsRejection;
use crate::drop_reason::DropReason;
use walras_crypto::PublicKey;
use walras_types::transaction::SEQUENCE_WINDOW;
use walras_types::SignedTransaction;
use walras_types::{AssetId, Operation, Price, MAX_AMOUNT};

/// What the rule reads of the source account, from the state at the start of a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceView {
    /// The account's key; `None` when its stored bytes are not a valid key (nothing it
    /// signs verifies).
    pub key: Option<PublicKey>,
    /// The highest sequence number of the account's committed transactions.
    pub last_sequence: u64,
}

/// Why a transaction may not take effect, with a stable code for every interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    #[error("the operation's fields are out of range (same-asset offer, zero or over-cap amount, or limit price out of range)")]
    Malformed,
    #[error("the source account does not exist (a new account exists once the block creating it commits)")]
    UnknownSource,
    #[error("sequence number already used: the account's last committed sequence is {last_sequence}; sign with a higher one")]
    Replayed { last_sequence: u64 },
    #[error("sequence number too far ahead: it must lie in ({last_sequence}, {}]; wait for pending transactions to commit", last_sequence.saturating_add(SEQUENCE_WINDOW))]
    SequenceOutOfWindow { last_sequence: u64 },
    #[error("the signature does not verify with the source account's key over the transaction's canonical encoding")]
    BadSignature,
    /// A payments deposit or withdrawal the bridge refuses.
    #[error("{0}")]
    Payments(PaymentsRejection),
    /// Admission's advisory pre-check ([`check_funds`]): the transaction debits more of an
    /// asset than its source has available (its balance as of the last committed block, less
    /// what its pending transactions debit). Never a block's verdict: a block drops an
    /// overdraft as `account_overdraft`.
    #[error("insufficient balance: the transaction takes {asked} of asset {}, and its source has {available} available (its balance at the last committed block, less what its transactions waiting for a block take); lower the amount, or wait until the funds arrive", asset.0)]
    InsufficientBalance {
        asset: AssetId,
        available: u64,
        asked: u64,
    },
}

impl Rejection {
    /// The stable code: the HTTP error code, the ABCI log's code, the block's drop reason.
    pub fn code(self) -> &'static str {
        match self {
            Rejection::InsufficientBalance { .. } => "insufficient_balance",
            other => other.drop_reason().name(),
        }
    }

    /// The reason a block reports for a transaction this rule refused.
    pub fn drop_reason(self) -> DropReason {
        match self {
            Rejection::Malformed => DropReason::Malformed,
            Rejection::UnknownSource => DropReason::UnknownSource,
            Rejection::Replayed { .. } => DropReason::Replayed,
            Rejection::SequenceOutOfWindow { .. } => DropReason::SequenceOutOfWindow,
            Rejection::BadSignature => DropReason::BadSignature,
            Rejection::Payments(rejection) => rejection.drop_reason(),
            // What a block says of a transaction that overdraws.
            Rejection::InsufficientBalance { .. } => DropReason::AccountOverdraft,
        }
    }
}

/// The asset and amount a transaction takes from its source's balance when it executes
/// (an offer locks what it sells; a payment or deposit moves what it pays): what the block's
/// overdraft rule sums per asset and what admission's [`check_funds`] compares.
pub fn debit(operation: &Operation) -> Option<(AssetId, u64)> {
    match *operation {
        Operation::CreateOffer { sell, amount, .. } => Some((sell, amount)),
        Operation::Payment { asset, amount, .. }
        | Operation::DepositToPayments { asset, amount, .. } => Some((asset, amount)),
        Operation::CreateAccount { .. }
        | Operation::CancelOffer { .. }
        | Operation::WithdrawFromPayments { .. } => None,
    }
}

/// Admission's advisory pre-check: refuses a transaction whose [`debit`] exceeds
/// `available(asset)`, what its source has available of that asset as the admission path
/// knows it. Advisory: an admitted transaction may still be dropped as `account_overdraft`
/// (other transactions of its source in the same block), and the block rule alone decides.
pub fn check_funds(
    operation: &Operation,
    available: impl FnOnce(AssetId) -> u64,
) -> Result<(), Rejection> {
    let Some((asset, asked)) = debit(operation) else {
        return Ok(());
    };
    let available = available(asset);
    if asked > available {
        return Err(Rejection::InsufficientBalance {
            asset,
            available,
            asked,
        });
    }
    Ok(())
}

/// Applies the rule (see the module documentation for the order of checks). `signature_ok`
/// is called only when every cheaper check passed, with the source's key. `payments` is the
/// state's bridge ([`crate::ExchangeState::payments`]; `None` when its genesis names no
/// committee).
pub fn admit(
    signed: &SignedTransaction,
    source: Option<SourceView>,
    payments: Option<&PaymentsBridge>,
    signature_ok: impl FnOnce(&PublicKey) -> bool,
) -> Result<(), Rejection> {
    admit_source(signed, source, signature_ok)?;
    let transaction = &signed.transaction;
    admit_payments(&transaction.operation, transaction.source, payments)
        .map_err(Rejection::Payments)
}

/// Steps 1–4 of the rule: everything but the bridge's checks, for a caller that holds the
/// source account's view but not the state's bridge (the fair-access gateway, which refuses
/// before buffering what the node would refuse, and leaves step 5 to the node's block filter).
pub fn admit_source(
    signed: &SignedTransaction,
    source: Option<SourceView>,
    signature_ok: impl FnOnce(&PublicKey) -> bool,
) -> Result<(), Rejection> {
    let transaction = &signed.transaction;
    if !well_formed(&transaction.operation) {
        return Err(Rejection::Malformed);
    }
    let source = source.ok_or(Rejection::UnknownSource)?;
    let last_sequence = source.last_sequence;
    if transaction.sequence <= last_sequence {
        return Err(Rejection::Replayed { last_sequence });
    }
    if transaction.sequence - last_sequence > SEQUENCE_WINDOW {
        return Err(Rejection::SequenceOutOfWindow { last_sequence });
    }
    match source.key {
        Some(key) if signature_ok(&key) => Ok(()),
        _ => Err(Rejection::BadSignature),
    }
}

/// Step 5: the bridge's checks of a deposit or withdrawal (nothing for other operations).
fn admit_payments(
    operation: &Operation,
    source: walras_types::AccountId,
    payments: Option<&PaymentsBridge>,
) -> Result<(), PaymentsRejection> {
    match operation {
        Operation::DepositToPayments { owner, .. } => {
            payments.ok_or(PaymentsRejection::Disabled)?;
            PublicKey::from_bytes(owner).map_err(|_| PaymentsRejection::BadOwner)?;
            Ok(())
        }
        Operation::WithdrawFromPayments {
            output,
            certificate,
        } => payments
            .ok_or(PaymentsRejection::Disabled)?
            .check_withdrawal(source, output, certificate),
        _ => Ok(()),
    }
}

/// What decoding guarantees, checked again for transactions that were never encoded.
pub(crate) fn well_formed(operation: &Operation) -> bool {
    let amount_ok = |amount: u64| (1..=MAX_AMOUNT).contains(&amount);
    let price_ok = |price: Price| (Price::MIN_LIMIT..=Price::MAX_LIMIT).contains(&price);
    match *operation {
        Operation::CreateAccount { .. } => true,
        Operation::CreateOffer {
            sell,
            buy,
            amount,
            min_price,
        } => sell != buy && amount_ok(amount) && price_ok(min_price),
        Operation::CancelOffer {
            sell,
            buy,
            min_price,
            ..
        } => sell != buy && price_ok(min_price),
        Operation::Payment { amount, .. } | Operation::DepositToPayments { amount, .. } => {
            amount_ok(amount)
        }
        Operation::WithdrawFromPayments { output, .. } => amount_ok(output.amount),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use walras_crypto::Keypair;
    use walras_types::{AccountId, AssetId, Operation, Transaction};

    fn payment(sequence: u64, amount: u64) -> SignedTransaction {
        SignedTransaction {
            transaction: Transaction {
                source: AccountId(1),
                sequence,
                operation: Operation::Payment {
                    to: AccountId(2),
                    asset: AssetId(0),
                    amount,
                },
            },
            signature: [0; 64],
        }
    }

    fn view(last_sequence: u64) -> Option<SourceView> {
        Some(SourceView {
            key: Some(Keypair::from_seed([3; 32]).public_key()),
            last_sequence,
        })
    }

    #[test]
    fn the_first_failing_check_decides_cheapest_first() {
        let never = |_: &PublicKey| -> bool { panic!("the signature is checked last") };
        assert_eq!(
            admit(&payment(1, 0), view(0), None, never),
            Err(Rejection::Malformed)
        );
        assert_eq!(
            admit(&payment(1, 5), None, None, never),
            Err(Rejection::UnknownSource)
        );
        assert_eq!(
            admit(&payment(7, 5), view(7), None, never),
            Err(Rejection::Replayed { last_sequence: 7 })
        );
        assert_eq!(
            admit(&payment(8 + SEQUENCE_WINDOW, 5), view(7), None, never),
            Err(Rejection::SequenceOutOfWindow { last_sequence: 7 })
        );
        assert_eq!(
            admit(&payment(7 + SEQUENCE_WINDOW, 5), view(7), None, |_| false),
            Err(Rejection::BadSignature)
        );
        assert_eq!(admit(&payment(8, 5), view(7), None, |_| true), Ok(()));
    }

    #[test]
    fn an_account_without_a_valid_key_admits_nothing() {
        let keyless = Some(SourceView {
            key: None,
            last_sequence: 0,
        });
        assert_eq!(
            admit(&payment(1, 5), keyless, None, |_| true),
            Err(Rejection::BadSignature)
        );
    }

    #[test]
    fn every_rejection_has_a_distinct_code() {
        let all = [
            Rejection::Malformed,
            Rejection::UnknownSource,
            Rejection::Replayed { last_sequence: 0 },
            Rejection::SequenceOutOfWindow { last_sequence: 0 },
            Rejection::BadSignature,
            Rejection::Payments(PaymentsRejection::Disabled),
            Rejection::Payments(PaymentsRejection::BadOwner),
            Rejection::Payments(PaymentsRejection::NotOwner),
            Rejection::Payments(PaymentsRejection::WrongChain {
                expected: 0,
                found: 1,
            }),
            Rejection::Payments(PaymentsRejection::WrongEpoch {
                expected: 0,
                found: 1,
            }),
            Rejection::Payments(PaymentsRejection::AlreadyWithdrawn),
            Rejection::Payments(PaymentsRejection::DuplicateWithdrawal),
            Rejection::Payments(PaymentsRejection::EscrowShort {
                asset: AssetId(0),
                escrow: 0,
            }),
            Rejection::Payments(PaymentsRejection::ShortCertificate {
                signers: 0,
                quorum: 3,
            }),
            Rejection::Payments(PaymentsRejection::BadCertificate),
            Rejection::InsufficientBalance {
                asset: AssetId(0),
                available: 0,
                asked: 1,
            },
        ];
        let codes: std::collections::BTreeSet<&str> = all.iter().map(|r| r.code()).collect();
        assert_eq!(codes.len(), all.len());
    }

    /// Issue 28 item 8: an overdraft was admitted (`202`) and only dropped in its block. The
    /// pre-check refuses a debit beyond what is available with both amounts in the message,
    /// admits one exactly at it, and lets through what debits nothing.
    #[test]
    fn a_debit_beyond_the_available_balance_is_refused_saying_available_and_asked() {
        let pay = |amount| Operation::Payment {
            to: AccountId(2),
            asset: AssetId(3),
            amount,
        };
        let available = |asset: AssetId| if asset == AssetId(3) { 100 } else { 0 };
        assert_eq!(check_funds(&pay(100), available), Ok(()));
        let refused = check_funds(&pay(101), available).unwrap_err();
        assert_eq!(
            refused,
            Rejection::InsufficientBalance {
                asset: AssetId(3),
                available: 100,
                asked: 101
            }
        );
        assert_eq!(refused.code(), "insufficient_balance");
        let text = refused.to_string();
        assert!(
            text.contains("takes 101 of asset 3") && text.contains("100 available"),
            "{text}"
        );
        let offer = Operation::CreateOffer {
            sell: AssetId(1),
            buy: AssetId(3),
            amount: 1,
            min_price: Price::ONE,
        };
        assert_eq!(
            check_funds(&offer, available).map_err(Rejection::code),
            Err("insufficient_balance"),
            "an offer locks what it sells"
        );
        let cancel = Operation::CancelOffer {
            sell: AssetId(1),
            buy: AssetId(3),
            min_price: Price::ONE,
            offer_id: walras_types::OfferId(1),
        };
        assert_eq!(check_funds(&cancel, |_| 0), Ok(()));
    }
}
