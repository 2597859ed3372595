//! The exchange bridge's view of the payments lane: the one module `walras-engine` imports.
//!
//! Certificate checking and nothing else: a committee built from the genesis's validator keys
//! (each BLS proof of possession checked once, so no rogue key enters an aggregate), its
//! quorum, the exact check of a withdrawal certificate over one output, and the ids both sides
//! derive (a deposit's output id, the withdrawal owner of an exchange account). The lane's
//! validator and client state machines, its votes and its durable log stay behind this module:
//! the exchange never reaches into them. Pure and deterministic: integers, hashes and pairings,
//! no clock and no I/O.

use crate::bls::{verify_bls_certificate, BlsCertificate, BlsCommittee};
use crate::model::{BlsMember, Committee, Output, ValidatorIndex};
use walras_crypto::PublicKey;
use walras_types::AssetId;

pub use crate::bls::BlsError;
pub use crate::model::{
    deposit_output_id, withdrawal_owner, ChainId, Epoch, OutputId, BLS_PUBLIC_KEY_BYTES,
    BLS_SIGNATURE_BYTES,
};

/// One validator of the committee as a genesis names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BridgeValidator {
    /// Its ed25519 key (the lane's votes on payments).
    pub key: PublicKey,
    /// Its BLS key and that key's proof of possession (withdrawal certificates).
    pub bls_key: [u8; BLS_PUBLIC_KEY_BYTES],
    pub bls_proof: [u8; BLS_SIGNATURE_BYTES],
}

/// A withdrawal certificate over one output, as the exchange carries it: a signer bitmap
/// (bit `i`: validator `i` signed) and one aggregate BLS signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WithdrawalCertificate {
    pub chain_id: ChainId,
    pub epoch: Epoch,
    pub output_id: OutputId,
    pub asset: AssetId,
    pub amount: u64,
    pub owner: PublicKey,
    pub signers: u128,
    pub aggregate: [u8; BLS_SIGNATURE_BYTES],
}

/// The committee of one epoch, its keys checked, ready to check certificates.
pub struct CertificateChecker {
    committee: BlsCommittee,
}

impl CertificateChecker {
    /// Checks every validator's BLS key and proof of possession; the error names the first
    /// validator that fails.
    pub fn new(
        chain_id: ChainId,
        epoch: Epoch,
        shards: u32,
        validators: &[BridgeValidator],
    ) -> Result<CertificateChecker, BlsError> {
        let committee = Committee {
            chain_id,
            epoch,
            validators: validators.iter().map(|validator| validator.key).collect(),
            shards,
            bls: validators
                .iter()
                .map(|validator| BlsMember {
                    key: validator.bls_key,
                    proof: validator.bls_proof,
                })
                .collect(),
        };
        let keys: Vec<_> = validators
            .iter()
            .map(|validator| (validator.bls_key, validator.bls_proof))
            .collect();
        Ok(CertificateChecker {
            committee: BlsCommittee::new(committee, &keys)?,
        })
    }

    /// Distinct signers a certificate needs.
    pub fn quorum(&self) -> usize {
        self.committee.committee.quorum()
    }

    /// Whether at least a quorum of distinct members signed `certificate`'s output for this
    /// committee's chain and epoch, with a valid aggregate signature (two pairings). Bits of
    /// the signer bitmap at or above the committee's size name no one and are ignored here:
    /// the caller refuses them first.
    pub fn check(&self, certificate: &WithdrawalCertificate) -> Result<(), BlsError> {
        let members = self.committee.committee.validators.len();
        let bls = BlsCertificate {
            chain_id: certificate.chain_id,
            epoch: certificate.epoch,
            id: certificate.output_id,
            output: Output {
                asset: certificate.asset,
                amount: u128::from(certificate.amount),
                owner: certificate.owner,
            },
            signers: (0..members.min(128))
                .filter(|bit| certificate.signers >> bit & 1 == 1)
                .filter_map(|bit| ValidatorIndex::try_from(bit).ok())
                .collect(),
            aggregate: certificate.aggregate,
        };
        verify_bls_certificate(&bls, &self.committee)
    }
}
