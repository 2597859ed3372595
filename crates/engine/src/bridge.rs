//! The exchange's side of the bridge to the fast-payments lane (issue 14; FastPay's "primary",
//! made safe; see `docs/payments.md`).
//!
//! - The genesis names the payments committee: chain id, epoch, and per validator its ed25519
//!   key, its BLS key and the key's proof of possession. [`PaymentsBridge::new`] checks every
//!   proof once, at genesis (or checkpoint) load, so a rogue key can never enter an aggregate;
//!   every node then checks withdrawals against exactly this committee.
//! - A deposit (`Operation::DepositToPayments`) debits the source and credits the asset's
//!   escrow; the payments output it creates has id `deposit_output_id(transaction hash, 0)`.
//! - A withdrawal (`Operation::WithdrawFromPayments`) carries a BLS aggregate certificate (signer
//!   bitmap + one signature) over the payments vote message of the output. It is admitted when
//!   the source's key owns the output, the certificate is for this chain and epoch, the output id
//!   is not in the withdrawn set, the escrow covers it, and at least a quorum of distinct
//!   committee members signed. Then escrow −= amount, source += amount, the id joins the
//!   withdrawn set.
//! - The withdrawn set is keyed by output id (a trie in the state root), never a per-account
//!   counter: outputs can be withdrawn in any order and none is lost or redeemed twice.
//!
//! Conservation becomes: balances + offers + burned + escrow = issued, per asset.

use crate::drop_reason::DropReason;
use walras_crypto::{Domain, Hash, Hasher, PublicKey};
// The payments lane's certificate-checking interface, and nothing else of the lane.
use walras_payments::bridge::{
    deposit_output_id, withdrawal_owner, BlsError, BridgeValidator, CertificateChecker, ChainId,
    Epoch, OutputId, WithdrawalCertificate,
};
use walras_trie::Trie;
use walras_types::{
    AssetId, PaymentsCertificate, PaymentsGenesis, PaymentsOutput, SignedTransaction,
};

/// Why the bridge refuses a deposit or a withdrawal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PaymentsRejection {
    #[error("this exchange has no payments committee in its genesis: it takes no deposits or withdrawals")]
    Disabled,
    #[error(
        "the deposit's owner is not a valid ed25519 key: the payments output could never be spent"
    )]
    BadOwner,
    #[error("the output is owned by another key than the source account's: withdraw from the account whose key owns it")]
    NotOwner,
    #[error(
        "the certificate is for payments chain {found}, this exchange bridges chain {expected}"
    )]
    WrongChain { expected: u64, found: u64 },
    #[error(
        "the certificate is for committee epoch {found}, this exchange checks epoch {expected}"
    )]
    WrongEpoch { expected: u64, found: u64 },
    #[error("this output was already withdrawn")]
    AlreadyWithdrawn,
    #[error(
        "another withdrawal of this output in the same block wins (lowest source and sequence)"
    )]
    DuplicateWithdrawal,
    #[error("the escrow of asset {} holds {escrow}, less than the withdrawals ask", .asset.0)]
    EscrowShort { asset: AssetId, escrow: u64 },
    #[error(
        "the certificate has {signers} distinct signers, it needs {quorum}: gather more votes"
    )]
    ShortCertificate { signers: usize, quorum: usize },
    #[error("the certificate names a validator outside the committee or its aggregate signature does not verify over this output")]
    BadCertificate,
}

impl PaymentsRejection {
    /// The reason a block reports.
    pub fn drop_reason(self) -> DropReason {
        match self {
            PaymentsRejection::Disabled => DropReason::PaymentsDisabled,
            PaymentsRejection::BadOwner => DropReason::PaymentsBadOwner,
            PaymentsRejection::NotOwner => DropReason::WithdrawalNotOwner,
            PaymentsRejection::WrongChain { .. } => DropReason::WithdrawalWrongChain,
            PaymentsRejection::WrongEpoch { .. } => DropReason::WithdrawalWrongEpoch,
            PaymentsRejection::AlreadyWithdrawn => DropReason::AlreadyWithdrawn,
            PaymentsRejection::DuplicateWithdrawal => DropReason::DuplicateWithdrawal,
            PaymentsRejection::EscrowShort { .. } => DropReason::EscrowShort,
            PaymentsRejection::ShortCertificate { .. } => DropReason::ShortCertificate,
            PaymentsRejection::BadCertificate => DropReason::BadCertificate,
        }
    }
}

/// The payments output id a deposit transaction creates: `deposit_output_id(transaction hash,
/// 0)` (the payments lane's domain for deposits, so it never collides with a payment's output).
pub fn deposit_output(signed: &SignedTransaction) -> OutputId {
    deposit_output_id(&crate::block::transaction_hash(signed), 0)
}

/// Hash domain of the bridge's part of the state root.
pub(crate) const BRIDGE_DOMAIN: Domain = Domain::new("walras/bridge");

/// Why a genesis's payments committee is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BridgeError {
    #[error("payments validator {validator}: its ed25519 key is not a valid key")]
    BadValidatorKey { validator: usize },
    #[error("payments validator {validator}: {error}")]
    Bls { validator: usize, error: BlsError },
}

/// The bridge's state: the committee, the escrow per asset, the withdrawn output ids.
pub struct PaymentsBridge {
    genesis: PaymentsGenesis,
    committee: CertificateChecker,
    /// Per asset: what deposits put in and withdrawals have not taken out.
    pub(crate) escrow: Vec<u64>,
    /// Withdrawn output ids; the value is the height of the block that withdrew it.
    pub(crate) withdrawn: Trie<32, [u8; 8]>,
}

impl PaymentsBridge {
    /// The bridge of a genesis committee over `assets` assets, every proof of possession
    /// checked; escrow empty, nothing withdrawn.
    pub fn new(genesis: &PaymentsGenesis, assets: usize) -> Result<PaymentsBridge, BridgeError> {
        let mut validators = Vec::with_capacity(genesis.validators.len());
        for (index, validator) in genesis.validators.iter().enumerate() {
            let key = PublicKey::from_bytes(&validator.key)
                .map_err(|_| BridgeError::BadValidatorKey { validator: index })?;
            validators.push(BridgeValidator {
                key,
                bls_key: validator.bls_key,
                bls_proof: validator.bls_proof,
            });
        }
        let chain = ChainId(genesis.chain_id);
        let epoch = Epoch(genesis.epoch);
        let committee = CertificateChecker::new(chain, epoch, genesis.shards, &validators)
            .map_err(|error| {
                let validator = match error {
                    BlsError::BadKey { validator }
                    | BlsError::BadProofOfPossession { validator }
                    | BlsError::BadVote { validator }
                    | BlsError::BadSigner { validator } => usize::from(validator),
                    _ => 0,
                };
                BridgeError::Bls { validator, error }
            })?;
        Ok(PaymentsBridge {
            genesis: genesis.clone(),
            committee,
            escrow: vec![0; assets],
            withdrawn: Trie::new(),
        })
    }

    /// The committee as the genesis named it.
    pub fn genesis(&self) -> &PaymentsGenesis {
        &self.genesis
    }

    pub fn chain_id(&self) -> u64 {
        self.genesis.chain_id
    }

    pub fn epoch(&self) -> u64 {
        self.genesis.epoch
    }

    /// Distinct signers a withdrawal certificate needs.
    pub fn quorum(&self) -> usize {
        self.committee.quorum()
    }

    /// The escrow of each asset.
    pub fn escrow(&self) -> &[u64] {
        &self.escrow
    }

    /// Whether output `id` has been withdrawn.
    pub fn is_withdrawn(&self, id: &[u8; 32]) -> bool {
        self.withdrawn.get(id).is_some()
    }

    /// How many outputs have been withdrawn.
    pub fn withdrawn_count(&self) -> usize {
        self.withdrawn.len()
    }

    /// The checks of a withdrawal that depend on the state at the start of a block, cheapest
    /// first: owner, chain, epoch, withdrawn set, escrow, quorum, then the aggregate signature
    /// (two pairings, about a millisecond). `source` is the signing account: the output must be
    /// owned by its withdrawal address ([`withdrawal_owner`]), which no key can spend in the
    /// payments lane; an output its holder could still spend there is refused (`NotOwner`).
    pub fn check_withdrawal(
        &self,
        source: walras_types::AccountId,
        output: &PaymentsOutput,
        certificate: &PaymentsCertificate,
    ) -> Result<(), PaymentsRejection> {
        let owner = withdrawal_owner(ChainId(self.genesis.chain_id), source.0);
        if output.owner != *owner.as_bytes() {
            return Err(PaymentsRejection::NotOwner);
        }
        if certificate.chain_id != self.genesis.chain_id {
            return Err(PaymentsRejection::WrongChain {
                expected: self.genesis.chain_id,
                found: certificate.chain_id,
            });
        }
        if certificate.epoch != self.genesis.epoch {
            return Err(PaymentsRejection::WrongEpoch {
                expected: self.genesis.epoch,
                found: certificate.epoch,
            });
        }
        if self.is_withdrawn(&output.id) {
            return Err(PaymentsRejection::AlreadyWithdrawn);
        }
        let escrow = self
            .escrow
            .get(usize::from(output.asset.0))
            .copied()
            .unwrap_or(0);
        if escrow < output.amount {
            return Err(PaymentsRejection::EscrowShort {
                asset: output.asset,
                escrow,
            });
        }
        let members = self.genesis.validators.len();
        // Bits at or above the committee size name no validator.
        if members < 128 && certificate.signers >> members != 0 {
            return Err(PaymentsRejection::BadCertificate);
        }
        let signers = certificate.signers.count_ones() as usize;
        if signers < self.quorum() {
            return Err(PaymentsRejection::ShortCertificate {
                signers,
                quorum: self.quorum(),
            });
        }
        let withdrawal = WithdrawalCertificate {
            chain_id: ChainId(certificate.chain_id),
            epoch: Epoch(certificate.epoch),
            output_id: OutputId(Hash(output.id)),
            asset: output.asset,
            amount: output.amount,
            owner,
            signers: certificate.signers,
            aggregate: certificate.aggregate,
        };
        self.committee
            .check(&withdrawal)
            .map_err(|error| match error {
                BlsError::TooFewSigners { signers, quorum } => {
                    PaymentsRejection::ShortCertificate { signers, quorum }
                }
                BlsError::WrongCommittee => PaymentsRejection::WrongEpoch {
                    expected: self.genesis.epoch,
                    found: certificate.epoch,
                },
                _ => PaymentsRejection::BadCertificate,
            })
    }

    /// The bridge's commitment: `H_bridge(chain ‖ epoch ‖ shards ‖ validators ‖ escrow per
    /// asset ‖ withdrawn-set root)`.
    pub(crate) fn root(&mut self) -> Hash {
        let mut writer = Hasher::new(BRIDGE_DOMAIN);
        writer.update(&self.genesis.chain_id.to_be_bytes());
        writer.update(&self.genesis.epoch.to_be_bytes());
        writer.update(&self.genesis.shards.to_be_bytes());
        for validator in &self.genesis.validators {
            writer.update(&validator.key);
            writer.update(&validator.bls_key);
            writer.update(&validator.bls_proof);
        }
        for escrow in &self.escrow {
            writer.update(&escrow.to_be_bytes());
        }
        writer.update(self.withdrawn.root_hash(1).as_bytes());
        writer.finalize()
    }

    /// Escrow of `asset` (zero for an unknown asset).
    pub fn escrow_of(&self, asset: AssetId) -> u64 {
        self.escrow.get(usize::from(asset.0)).copied().unwrap_or(0)
    }
}
