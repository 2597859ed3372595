//! Why a transaction of a block took no effect: the reasons a block reports.

/// Why a transaction took no effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// Fields no encoded transaction can have (same-asset offer, zero or over-cap amount, limit
    /// price out of range): only possible for transactions built in memory.
    Malformed,
    UnknownSource,
    BadSignature,
    /// The sequence number is at or below the source's last committed one.
    Replayed,
    /// The sequence number is more than `SEQUENCE_WINDOW` above the source's last one.
    SequenceOutOfWindow,
    UnknownAsset,
    UnknownReceiver,
    UnknownOffer,
    AccountExists,
    DuplicateAccountCreation,
    /// The source's transactions together overdraw an asset (in the serial order book: this
    /// transaction's debit exceeds the balance at the moment it runs).
    AccountOverdraft,
    /// The source's transactions reuse a sequence number.
    AccountReusedSequence,
    /// The source's transactions cancel one offer twice.
    AccountDoubleCancel,
    /// The exchange already holds `ACCOUNTS_MAX` accounts (with the block's other creations):
    /// no slot is left for a new one.
    AccountsFull,
    /// A payments deposit or withdrawal on an exchange whose genesis names no payments
    /// committee.
    PaymentsDisabled,
    /// A deposit's owner is not a valid ed25519 key: the output could never be spent.
    PaymentsBadOwner,
    /// A withdrawal of an output the source's key does not own.
    WithdrawalNotOwner,
    /// A withdrawal certificate for another payments chain.
    WithdrawalWrongChain,
    /// A withdrawal certificate under another committee epoch.
    WithdrawalWrongEpoch,
    /// The output was withdrawn by an earlier block.
    AlreadyWithdrawn,
    /// Another withdrawal of the same output in this block won (the lowest (source, sequence)
    /// wins).
    DuplicateWithdrawal,
    /// The escrow of the asset holds less than the withdrawals ask (never with at most `f`
    /// faulty validators: the payments lane conserves what was deposited).
    EscrowShort,
    /// Fewer distinct committee signers than the quorum.
    ShortCertificate,
    /// The certificate names a signer outside the committee, or its aggregate signature does
    /// not verify over the output.
    BadCertificate,
}

impl DropReason {
    /// Every reason, in the order of their stored codes (a reason's position here is its
    /// byte in the store's block results): append new reasons at the end, never reorder.
    pub const ALL: [DropReason; 24] = [
        DropReason::Malformed,
        DropReason::UnknownSource,
        DropReason::BadSignature,
        DropReason::SequenceOutOfWindow,
        DropReason::UnknownAsset,
        DropReason::UnknownReceiver,
        DropReason::UnknownOffer,
        DropReason::AccountExists,
        DropReason::DuplicateAccountCreation,
        DropReason::AccountOverdraft,
        DropReason::AccountReusedSequence,
        DropReason::AccountDoubleCancel,
        DropReason::Replayed,
        DropReason::AccountsFull,
        DropReason::PaymentsDisabled,
        DropReason::PaymentsBadOwner,
        DropReason::WithdrawalNotOwner,
        DropReason::WithdrawalWrongChain,
        DropReason::WithdrawalWrongEpoch,
        DropReason::AlreadyWithdrawn,
        DropReason::DuplicateWithdrawal,
        DropReason::EscrowShort,
        DropReason::ShortCertificate,
        DropReason::BadCertificate,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DropReason::Malformed => "malformed",
            DropReason::UnknownSource => "unknown_account",
            DropReason::BadSignature => "bad_signature",
            DropReason::Replayed => "replayed",
            DropReason::SequenceOutOfWindow => "sequence_out_of_window",
            DropReason::UnknownAsset => "unknown_asset",
            DropReason::UnknownReceiver => "unknown_receiver",
            DropReason::UnknownOffer => "unknown_offer",
            DropReason::AccountExists => "account_exists",
            DropReason::DuplicateAccountCreation => "duplicate_account_creation",
            DropReason::AccountOverdraft => "account_overdraft",
            DropReason::AccountReusedSequence => "account_reused_sequence",
            DropReason::AccountDoubleCancel => "account_double_cancel",
            DropReason::AccountsFull => "accounts_full",
            DropReason::PaymentsDisabled => "payments_disabled",
            DropReason::PaymentsBadOwner => "payments_bad_owner",
            DropReason::WithdrawalNotOwner => "withdrawal_not_owner",
            DropReason::WithdrawalWrongChain => "withdrawal_wrong_chain",
            DropReason::WithdrawalWrongEpoch => "withdrawal_wrong_epoch",
            DropReason::AlreadyWithdrawn => "already_withdrawn",
            DropReason::DuplicateWithdrawal => "duplicate_withdrawal",
            DropReason::EscrowShort => "escrow_short",
            DropReason::ShortCertificate => "short_certificate",
            DropReason::BadCertificate => "bad_certificate",
        }
    }
}
