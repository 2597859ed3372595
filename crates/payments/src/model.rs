//! Outputs, payments, the committee, and their canonical bytes.
//!
//! The encoding is hand-written rather than serde-derived: what is hashed and signed must be one
//! fixed byte string per value (fixed-width big-endian integers, counts before lists), and the
//! workspace's wire codec lives in `walras-api`, which this pure core may not depend on.

use std::collections::BTreeMap;

use walras_crypto::{hash_in, sign, verify, Domain, Hash, Hasher, Keypair, PublicKey, Signature};
use walras_types::AssetId;

use crate::error::RequestError;
pub use crate::ids::{
    ChainId, Epoch, OutputId, PaymentId, ValidatorIndex, PAYMENT_INPUTS_MAX, PAYMENT_OUTPUTS_MAX,
};

/// Hashing domains of this crate (16 bytes at most each; a test checks they differ from each
/// other and from `walras_crypto::domain::ALL`).
pub mod domain {
    use super::Domain;
    /// A payment body: its id.
    pub const PAYMENT: Domain = Domain::new("walras/pay/tx");
    /// What the owner signs: the payment id.
    pub const PAYMENT_SIG: Domain = Domain::new("walras/pay/txsig");
    /// An output id made by a payment: payment id ‖ index.
    pub const OUTPUT: Domain = Domain::new("walras/pay/out");
    /// An output id made by an exchange deposit: transaction id ‖ index.
    pub const DEPOSIT: Domain = Domain::new("walras/pay/dep");
    /// A genesis output id.
    pub const GENESIS: Domain = Domain::new("walras/pay/gen");
    /// A validator's vote on one output.
    pub const VOTE: Domain = Domain::new("walras/pay/vote");
    /// Shard assignment of an owner key.
    pub const SHARD: Domain = Domain::new("walras/pay/shard");
    /// The withdrawal address of an exchange account.
    pub const WITHDRAWAL: Domain = Domain::new("walras/pay/wdr");
    /// The seed of a validator's BLS key, from its Ed25519 key.
    pub const BLS_KEY: Domain = Domain::new("walras/pay/blsk");
    /// Every domain above.
    pub const ALL: [Domain; 9] = [
        PAYMENT,
        PAYMENT_SIG,
        OUTPUT,
        DEPOSIT,
        GENESIS,
        VOTE,
        SHARD,
        WITHDRAWAL,
        BLS_KEY,
    ];
}

/// A coin: `amount` units of `asset`, spendable by `owner`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Output {
    pub asset: AssetId,
    pub amount: u128,
    pub owner: PublicKey,
}

impl Output {
    fn encode_into(&self, bytes: &mut Vec<u8>) {
        bytes.extend_from_slice(&self.asset.0.to_be_bytes());
        bytes.extend_from_slice(&self.amount.to_be_bytes());
        bytes.extend_from_slice(self.owner.as_bytes());
    }
}

/// Id of output `index` of payment `payment`.
pub fn output_id(payment: &PaymentId, index: u16) -> OutputId {
    let mut hasher = Hasher::new(domain::OUTPUT);
    hasher
        .update(payment.0.as_bytes())
        .update(&index.to_be_bytes());
    OutputId(hasher.finalize())
}

/// Id of output `index` created by exchange transaction `transaction_id` (a deposit into the
/// payments escrow). A different domain from [`output_id`], so a deposit can never collide with
/// a payment's output.
pub fn deposit_output_id(transaction_id: &Hash, index: u16) -> OutputId {
    let mut hasher = Hasher::new(domain::DEPOSIT);
    hasher
        .update(transaction_id.as_bytes())
        .update(&index.to_be_bytes());
    OutputId(hasher.finalize())
}

/// The owner an output must have to be withdrawn into exchange account `account`: a curve point
/// derived by hashing (the first counter whose hash decodes as a valid public key), so nobody
/// knows its secret key and nobody can spend such an output in the payments lane. Paying a coin
/// to this owner is how it leaves the lane for good; only then can its certificate be redeemed
/// on the exchange, so a coin can never be both withdrawn and spent.
pub fn withdrawal_owner(chain_id: ChainId, account: u64) -> PublicKey {
    (0u32..)
        .find_map(|counter| {
            let mut hasher = Hasher::new(domain::WITHDRAWAL);
            hasher
                .update(&chain_id.0.to_be_bytes())
                .update(&account.to_be_bytes())
                .update(&counter.to_be_bytes());
            PublicKey::from_bytes(hasher.finalize().as_bytes()).ok()
        })
        .expect("about half of all hashes are curve points")
}

/// The message a validator signs for one output: chain, epoch, output id, asset, amount, owner.
pub fn vote_message(chain_id: ChainId, epoch: Epoch, id: &OutputId, output: &Output) -> Hash {
    let mut hasher = Hasher::new(domain::VOTE);
    hasher
        .update(&chain_id.0.to_be_bytes())
        .update(&epoch.0.to_be_bytes())
        .update(id.0.as_bytes())
        .update(&output.asset.0.to_be_bytes())
        .update(&output.amount.to_be_bytes())
        .update(output.owner.as_bytes());
    hasher.finalize()
}

/// Id of genesis entry `index`.
pub fn genesis_output_id(chain_id: ChainId, index: u32) -> OutputId {
    let mut hasher = Hasher::new(domain::GENESIS);
    hasher
        .update(&chain_id.0.to_be_bytes())
        .update(&index.to_be_bytes());
    OutputId(hasher.finalize())
}

/// An output the exchange created by a committed deposit: the bridge hands it to every validator
/// shard ([`crate::ValidatorShard::admit_root`]) once its block is committed, never before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DepositOutput {
    pub id: OutputId,
    pub output: Output,
}

impl DepositOutput {
    /// Deposit output `index` of exchange transaction `transaction_id`.
    pub fn new(transaction_id: &Hash, index: u16, output: Output) -> DepositOutput {
        DepositOutput {
            id: deposit_output_id(transaction_id, index),
            output,
        }
    }
}

/// One spent input: its id and the output it names (the validator checks them against the
/// input's certificate or its root set).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Input {
    pub id: OutputId,
    pub output: Output,
}

/// A payment body: spends `inputs` (all owned by one key), creates `outputs`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Payment {
    pub chain_id: ChainId,
    pub epoch: Epoch,
    pub inputs: Vec<Input>,
    pub outputs: Vec<Output>,
}

impl Payment {
    /// Canonical bytes: chain, epoch, input count, inputs, output count, outputs.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(24 + 98 * (self.inputs.len() + self.outputs.len()));
        bytes.extend_from_slice(&self.chain_id.0.to_be_bytes());
        bytes.extend_from_slice(&self.epoch.0.to_be_bytes());
        bytes.extend_from_slice(&(self.inputs.len() as u32).to_be_bytes());
        for input in &self.inputs {
            bytes.extend_from_slice(input.id.0.as_bytes());
            input.output.encode_into(&mut bytes);
        }
        bytes.extend_from_slice(&(self.outputs.len() as u32).to_be_bytes());
        for output in &self.outputs {
            output.encode_into(&mut bytes);
        }
        bytes
    }

    /// The payment's id.
    pub fn id(&self) -> PaymentId {
        PaymentId(hash_in(domain::PAYMENT, &self.encode()))
    }

    /// The message its owner signs: the id under the payment-signature domain.
    pub fn signing_hash(&self) -> Hash {
        payment_signing_hash(&self.id())
    }

    /// The one owner of every input, or an error.
    pub fn owner(&self) -> Result<PublicKey, RequestError> {
        let first = self.inputs.first().ok_or(RequestError::NoInputs)?;
        let owner = first.output.owner;
        if self.inputs.iter().any(|input| input.output.owner != owner) {
            return Err(RequestError::MixedOwners);
        }
        Ok(owner)
    }

    /// Shape checks that need no state: limits, one owner, distinct inputs, positive amounts,
    /// per-asset conservation in checked `u128`.
    pub fn check_shape(&self) -> Result<PublicKey, RequestError> {
        if self.inputs.len() > PAYMENT_INPUTS_MAX {
            return Err(RequestError::TooManyInputs {
                inputs: self.inputs.len(),
            });
        }
        if self.outputs.len() > PAYMENT_OUTPUTS_MAX {
            return Err(RequestError::TooManyOutputs {
                outputs: self.outputs.len(),
            });
        }
        if self.outputs.is_empty() {
            return Err(RequestError::NoOutputs);
        }
        let owner = self.owner()?;
        let mut seen = std::collections::BTreeSet::new();
        if !self.inputs.iter().all(|input| seen.insert(input.id)) {
            return Err(RequestError::DuplicateInput);
        }
        if self
            .inputs
            .iter()
            .map(|input| &input.output)
            .chain(&self.outputs)
            .any(|output| output.amount == 0)
        {
            return Err(RequestError::ZeroAmount);
        }
        let sum = |outputs: &mut dyn Iterator<Item = &Output>| {
            let mut totals: BTreeMap<AssetId, u128> = BTreeMap::new();
            for output in outputs {
                let total = totals.entry(output.asset).or_default();
                *total = total
                    .checked_add(output.amount)
                    .ok_or(RequestError::AmountOverflow {
                        asset: output.asset,
                    })?;
            }
            Ok::<_, RequestError>(totals)
        };
        let spent = sum(&mut self.inputs.iter().map(|input| &input.output))?;
        let created = sum(&mut self.outputs.iter())?;
        if spent != created {
            let asset = spent
                .keys()
                .chain(created.keys())
                .find(|asset| spent.get(asset) != created.get(asset))
                .copied()
                .unwrap_or(AssetId(0));
            return Err(RequestError::NotConserved { asset });
        }
        Ok(owner)
    }
}

/// A payment with its owner's signature over its id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedPayment {
    pub payment: Payment,
    pub signature: Signature,
}

impl SignedPayment {
    /// Signs `payment` with `keypair` (which must own its inputs; checked by validators).
    pub fn sign(payment: Payment, keypair: &Keypair) -> SignedPayment {
        let signature = sign(keypair, payment_signing_hash(&payment.id()).as_bytes());
        SignedPayment { payment, signature }
    }

    /// Checks the signature against the inputs' owner.
    pub fn verify(&self, owner: &PublicKey) -> Result<(), RequestError> {
        verify(
            owner,
            payment_signing_hash(&self.payment.id()).as_bytes(),
            &self.signature,
        )
        .map_err(|_| RequestError::BadClientSignature)
    }
}

/// The message a payment's owner signs: the payment's id under its own domain.
pub(crate) fn payment_signing_hash(id: &PaymentId) -> Hash {
    hash_in(domain::PAYMENT_SIG, id.0.as_bytes())
}

/// Bytes of a compressed BLS12-381 public key (G1).
pub const BLS_PUBLIC_KEY_BYTES: usize = 48;
/// Bytes of a compressed BLS12-381 signature (G2).
pub const BLS_SIGNATURE_BYTES: usize = 96;

/// A validator's BLS12-381 public key and its proof of possession (a signature of the key under
/// a separate tag, which rules out rogue-key aggregates). Checked when first used
/// ([`crate::bls::checked_key`]), never trusted as listed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct BlsMember {
    pub key: [u8; BLS_PUBLIC_KEY_BYTES],
    pub proof: [u8; BLS_SIGNATURE_BYTES],
}

/// The validator committee of one epoch: `n` keys, each validator split into `shards` shards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committee {
    pub chain_id: ChainId,
    pub epoch: Epoch,
    pub validators: Vec<PublicKey>,
    pub shards: u32,
    /// BLS keys in validator order, one per validator, for the `bls` scheme; empty for a
    /// committee that signs with Ed25519 only (its BLS votes are then refused as
    /// [`crate::VoteFault::NoBlsKey`]).
    pub bls: Vec<BlsMember>,
}

impl Committee {
    /// Most faulty validators tolerated: `f = ⌊(n − 1) / 3⌋`.
    pub fn faults_max(&self) -> usize {
        self.validators.len().saturating_sub(1) / 3
    }

    /// Votes that make a certificate: `⌊2n/3⌋ + 1`, which is `2f + 1` when `n = 3f + 1` and
    /// keeps any two quorums overlapping in an honest validator for every `n`.
    pub fn quorum(&self) -> usize {
        self.validators.len() * 2 / 3 + 1
    }

    /// The shard that holds `owner`'s coins: `H(owner) mod S`.
    pub fn shard_of(&self, owner: &PublicKey) -> u32 {
        let digest = hash_in(domain::SHARD, owner.as_bytes());
        let mut head = [0u8; 8];
        head.copy_from_slice(&digest.0[..8]);
        (u64::from_be_bytes(head) % u64::from(self.shards.max(1))) as u32
    }

    /// Key of validator `index`, if any.
    pub fn validator(&self, index: ValidatorIndex) -> Option<&PublicKey> {
        self.validators.get(usize::from(index))
    }

    /// BLS key of validator `index`, if the committee lists BLS keys and has that validator.
    pub fn bls_member(&self, index: ValidatorIndex) -> Option<&BlsMember> {
        self.bls.get(usize::from(index))
    }
}
