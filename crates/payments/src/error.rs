//! Typed errors of the payments core.

use thiserror::Error;
use walras_types::AssetId;

use crate::ids::{ChainId, Epoch, OutputId, PaymentId, ValidatorIndex};

/// What is wrong with one validator's vote.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum VoteFault {
    #[error("the signature does not verify")]
    BadSignature,
    #[error("the Merkle inclusion path does not lead to a signed root")]
    BadMerklePath,
    #[error("the validator index is not in the committee")]
    UnknownValidator,
    #[error("the validator voted twice")]
    Duplicate,
    #[error("the reply carries the wrong number of votes")]
    WrongVoteCount,
    #[error("the reply is for another payment")]
    WrongPayment,
    #[error(
        "its address answered with validator {signer}'s votes (does the committee file list one \
         address twice?)"
    )]
    OtherValidatorsVotes { signer: ValidatorIndex },
    #[error("a BLS vote, but the committee lists no BLS key for this validator")]
    NoBlsKey,
    #[error("the committee's BLS key for this validator does not decode or its proof of possession does not verify")]
    BadBlsKey,
}

/// Why a certificate is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum CertError {
    #[error("certificate for chain {found:?}, expected {expected:?}")]
    WrongChain { expected: ChainId, found: ChainId },
    #[error("certificate for epoch {found:?}, expected {expected:?}")]
    WrongEpoch { expected: Epoch, found: Epoch },
    #[error("{votes} distinct valid votes, a certificate needs {quorum}")]
    TooFewVotes { votes: usize, quorum: usize },
    #[error("validator {validator}: {fault}")]
    BadVote {
        validator: ValidatorIndex,
        fault: VoteFault,
    },
}

/// Why a validator shard refuses a payment request (nothing is recorded).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum RequestError {
    #[error("a payment needs at least one input")]
    NoInputs,
    #[error("a payment needs at least one output")]
    NoOutputs,
    #[error("{inputs} inputs, at most {max}", max = crate::ids::PAYMENT_INPUTS_MAX)]
    TooManyInputs { inputs: usize },
    #[error("{outputs} outputs, at most {max}", max = crate::ids::PAYMENT_OUTPUTS_MAX)]
    TooManyOutputs { outputs: usize },
    #[error("{certificates} input certificates, at most one per input ({max})", max = crate::ids::PAYMENT_INPUTS_MAX)]
    TooManyCertificates { certificates: usize },
    #[error("inputs owned by more than one key")]
    MixedOwners,
    #[error("an input appears twice")]
    DuplicateInput,
    #[error("an amount is zero")]
    ZeroAmount,
    #[error("amounts of asset {asset:?} overflow u128")]
    AmountOverflow { asset: AssetId },
    #[error("inputs and outputs of asset {asset:?} differ")]
    NotConserved { asset: AssetId },
    #[error("payment for chain {found:?}, this committee is {expected:?}")]
    WrongChain { expected: ChainId, found: ChainId },
    #[error("payment for epoch {found:?}, this committee is {expected:?}")]
    WrongEpoch { expected: Epoch, found: Epoch },
    #[error("owner belongs to shard {expected}, this is shard {shard}")]
    WrongShard { expected: u32, shard: u32 },
    #[error("the owner's signature does not verify")]
    BadClientSignature,
    #[error("input {input:?} has neither a certificate nor a committed root entry")]
    UnknownInput { input: OutputId },
    #[error("the certificate of input {input:?} is refused: {error}")]
    BadInputCertificate { input: OutputId, error: CertError },
    #[error("the certificate of input {input:?} is for another output")]
    InputMismatch { input: OutputId },
}

/// Why a client refuses an operation or a reply.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ClientError {
    #[error("not enough unlocked funds of asset {asset:?}: have {have}, need {need}")]
    InsufficientFunds {
        asset: AssetId,
        have: u128,
        need: u128,
    },
    #[error("coin {0:?} is in a pending payment or stuck: signing another payment over it would equivocate")]
    CoinLocked(OutputId),
    #[error("the payment is invalid: {0}")]
    Invalid(#[from] RequestError),
    #[error("no pending payment {0:?}")]
    UnknownPayment(PaymentId),
    #[error("validator {validator}: {fault}")]
    BadVote {
        validator: ValidatorIndex,
        fault: VoteFault,
    },
    #[error("the certificate is refused: {0}")]
    BadCertificate(#[from] CertError),
    #[error("the certificate is for key {0:?}'s output, not ours")]
    NotOurs(OutputId),
}
