//! The identifiers and limits every part of the payments core names: chains, epochs, outputs,
//! payments, validators. Kept apart from [`crate::model`] so that errors can name them without
//! an import cycle.

use walras_crypto::Hash;

/// Most inputs one payment spends.
pub const PAYMENT_INPUTS_MAX: usize = 16;
/// Most outputs one payment creates.
pub const PAYMENT_OUTPUTS_MAX: usize = 16;

/// Which chain (deployment) a vote belongs to; votes of one chain are worthless on another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChainId(pub u64);

/// Committee epoch: votes name the committee that made them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Epoch(pub u64);

/// Id of an output: `H(payment id ‖ index)` (or of a deposit or genesis entry).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OutputId(pub Hash);

/// Id of a payment: the hash of its canonical bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PaymentId(pub Hash);

/// Index of a validator in its committee.
pub type ValidatorIndex = u16;
