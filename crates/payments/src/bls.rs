//! BLS12-381 votes and aggregate certificates (§3.4), with the `blst` crate.
//!
//! Two uses. In the payment lane (`Scheme::Bls`) a validator signs each output's vote message
//! with its BLS key; a certificate's votes are checked as one aggregate first (one pairing check
//! whatever the quorum), each vote alone only when the aggregate fails, to name the bad
//! validator. At the exchange a withdrawal carries a [`BlsCertificate`]: one 96-byte aggregate
//! and the signer indices, checked against the committee stored in exchange state.
//!
//! Departure from the paper: the paper uses threshold BLS (a master key from Shamir shares, one
//! constant-size signature whoever signed). We use plain multi-signature aggregation with a signer
//! list instead: no distributed key generation is needed, the certificate is still one 96-byte
//! signature plus the signer indices, and verification is one aggregate of `q` public keys (point
//! additions) and two pairings. Rogue-key attacks are prevented by proof of possession: a committee
//! key is accepted only with a valid signature of the key itself under a separate DST
//! ([`checked_key`], the one rule every path uses).
//!
//! Keys: public keys in G1 (48 bytes), signatures in G2 (96 bytes), the IETF "min_pk" variant.
//! A validator's BLS key is derived from its Ed25519 key ([`bls_seed`]), so one key file serves
//! both.

use blst::min_pk::{AggregateSignature, PublicKey, SecretKey, Signature};
use blst::BLST_ERROR;
use thiserror::Error;
use walras_crypto::{hash_in, Hash, Keypair};

use crate::model::{
    domain, vote_message, BlsMember, ChainId, Committee, Epoch, Output, OutputId, ValidatorIndex,
};
pub use crate::model::{BLS_PUBLIC_KEY_BYTES, BLS_SIGNATURE_BYTES};

/// Domain separation tag of votes (proof-of-possession ciphersuite).
pub const BLS_VOTE_DST: &[u8] = b"BLS_SIG_BLS12381G2_XMD:SHA-256_SSWU_RO_POP_";
/// Domain separation tag of proofs of possession.
pub const BLS_POP_DST: &[u8] = b"BLS_POP_BLS12381G2_XMD:SHA-256_SSWU_RO_POP_";

/// The seed of a validator's BLS key, derived from its Ed25519 key (one key file per
/// validator): `H("walras/pay/blsk" ‖ Ed25519 signature of "walras payments BLS key")`. Ed25519
/// signatures are deterministic, so this is a function of the secret key that only its holder
/// can compute.
pub fn bls_seed(keypair: &Keypair) -> [u8; 32] {
    let signature = keypair.sign(b"walras payments BLS key");
    hash_in(domain::BLS_KEY, signature.as_bytes()).0
}

/// Why a BLS key, vote or certificate is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum BlsError {
    #[error("validator {validator}: the public key does not decode")]
    BadKey { validator: ValidatorIndex },
    #[error("validator {validator}: the proof of possession does not verify")]
    BadProofOfPossession { validator: ValidatorIndex },
    #[error("validator {validator}: the vote does not verify")]
    BadVote { validator: ValidatorIndex },
    #[error("validator {validator} is not in the committee or signed twice")]
    BadSigner { validator: ValidatorIndex },
    #[error("{signers} signers, a certificate needs {quorum}")]
    TooFewSigners { signers: usize, quorum: usize },
    #[error("the aggregate signature does not verify")]
    BadAggregate,
    #[error("certificate for another chain or epoch")]
    WrongCommittee,
    #[error("a BLS key needs at least 32 bytes of seed")]
    ShortSeed,
}

/// A validator's BLS key.
#[derive(Clone)]
pub struct BlsKeypair {
    secret: SecretKey,
    public: PublicKey,
}

impl std::fmt::Debug for BlsKeypair {
    /// The public key only: a secret never reaches a log.
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("BlsKeypair")
            .field("public", &self.public)
            .finish_non_exhaustive()
    }
}

impl BlsKeypair {
    /// The BLS key of the validator whose Ed25519 key is `keypair` ([`bls_seed`]).
    pub fn derive(keypair: &Keypair) -> BlsKeypair {
        let secret = SecretKey::key_gen(&bls_seed(keypair), &[])
            .expect("KeyGen refuses only seeds shorter than 32 bytes");
        let public = secret.sk_to_pk();
        BlsKeypair { secret, public }
    }

    /// The committee entry of this key: the public key and its proof of possession.
    pub fn member(&self) -> BlsMember {
        BlsMember {
            key: self.public_key(),
            proof: self.proof_of_possession(),
        }
    }

    /// Derives a key from a 32-byte seed (IETF KeyGen).
    pub fn from_seed(seed: &[u8; 32]) -> Result<BlsKeypair, BlsError> {
        let secret = SecretKey::key_gen(seed, &[]).map_err(|_| BlsError::ShortSeed)?;
        let public = secret.sk_to_pk();
        Ok(BlsKeypair { secret, public })
    }

    /// The compressed public key.
    pub fn public_key(&self) -> [u8; BLS_PUBLIC_KEY_BYTES] {
        self.public.compress()
    }

    /// Signature of the public key under [`BLS_POP_DST`].
    pub fn proof_of_possession(&self) -> [u8; BLS_SIGNATURE_BYTES] {
        self.secret
            .sign(&self.public.compress(), BLS_POP_DST, &[])
            .compress()
    }

    /// A vote on one output's [`vote_message`].
    pub fn sign_vote(&self, message: &Hash) -> [u8; BLS_SIGNATURE_BYTES] {
        self.secret
            .sign(message.as_bytes(), BLS_VOTE_DST, &[])
            .compress()
    }
}

/// The committee's BLS keys, each checked with its proof of possession.
pub struct BlsCommittee {
    pub committee: Committee,
    keys: Vec<PublicKey>,
}

impl BlsCommittee {
    /// Accepts `keys[i] = (public key, proof of possession)` of validator `i`.
    pub fn new(
        committee: Committee,
        keys: &[([u8; BLS_PUBLIC_KEY_BYTES], [u8; BLS_SIGNATURE_BYTES])],
    ) -> Result<BlsCommittee, BlsError> {
        let mut checked = Vec::with_capacity(keys.len());
        for (index, (key, proof)) in keys.iter().enumerate() {
            let member = BlsMember {
                key: *key,
                proof: *proof,
            };
            checked.push(checked_key(&member, index as ValidatorIndex)?);
        }
        Ok(BlsCommittee {
            committee,
            keys: checked,
        })
    }

    /// Checks one validator's vote (the client does this before aggregating, to name the bad
    /// validator; an aggregate alone cannot say who was wrong).
    pub fn verify_vote(
        &self,
        validator: ValidatorIndex,
        message: &Hash,
        signature: &[u8; BLS_SIGNATURE_BYTES],
    ) -> Result<(), BlsError> {
        let key = self
            .keys
            .get(usize::from(validator))
            .ok_or(BlsError::BadSigner { validator })?;
        verify_one(key, message, signature)
            .then_some(())
            .ok_or(BlsError::BadVote { validator })
    }
}

/// Decodes validator `validator`'s committee key and checks its proof of possession: the one
/// rule by which a listed BLS key becomes usable, for the lane and the exchange alike.
pub fn checked_key(member: &BlsMember, validator: ValidatorIndex) -> Result<PublicKey, BlsError> {
    let public =
        PublicKey::key_validate(&member.key).map_err(|_| BlsError::BadKey { validator })?;
    let proof = Signature::sig_validate(&member.proof, true)
        .map_err(|_| BlsError::BadProofOfPossession { validator })?;
    match proof.verify(false, &member.key, BLS_POP_DST, &[], &public, false) {
        BLST_ERROR::BLST_SUCCESS => Ok(public),
        _ => Err(BlsError::BadProofOfPossession { validator }),
    }
}

/// Whether `signature` is a valid vote on `message` under `key` (the signature is checked to lie
/// in the prime-order subgroup).
pub(crate) fn verify_one(
    key: &PublicKey,
    message: &Hash,
    signature: &[u8; BLS_SIGNATURE_BYTES],
) -> bool {
    Signature::sig_validate(signature, true).is_ok_and(|signature| {
        signature.verify(false, message.as_bytes(), BLS_VOTE_DST, &[], key, false)
            == BLST_ERROR::BLST_SUCCESS
    })
}

/// Whether `signatures` (one per key, all on `message`) aggregate to a valid signature under the
/// aggregate of `keys`: one pairing check for the whole quorum. `false` says only that some vote
/// is bad, not which.
pub(crate) fn verify_aggregate(
    keys: &[&PublicKey],
    message: &Hash,
    signatures: &[&[u8; BLS_SIGNATURE_BYTES]],
) -> bool {
    if keys.is_empty() || keys.len() != signatures.len() {
        return false;
    }
    let Ok(decoded) = signatures
        .iter()
        .map(|bytes| Signature::sig_validate(*bytes, true))
        .collect::<Result<Vec<Signature>, _>>()
    else {
        return false;
    };
    let refs: Vec<&Signature> = decoded.iter().collect();
    AggregateSignature::aggregate(&refs, false).is_ok_and(|aggregate| {
        aggregate.to_signature().fast_aggregate_verify(
            false,
            message.as_bytes(),
            BLS_VOTE_DST,
            keys,
        ) == BLST_ERROR::BLST_SUCCESS
    })
}

/// A certificate as one aggregate signature and the sorted signer indices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlsCertificate {
    pub chain_id: ChainId,
    pub epoch: Epoch,
    pub id: OutputId,
    pub output: Output,
    pub signers: Vec<ValidatorIndex>,
    pub aggregate: [u8; BLS_SIGNATURE_BYTES],
}

impl BlsCertificate {
    /// Bytes on the wire: header, signer count and indices, one signature.
    pub fn wire_bytes(&self) -> usize {
        98 + 4 + 2 * self.signers.len() + BLS_SIGNATURE_BYTES
    }
}

/// Aggregates votes already checked with [`BlsCommittee::verify_vote`] into a certificate.
pub fn aggregate_certificate(
    chain_id: ChainId,
    epoch: Epoch,
    id: OutputId,
    output: Output,
    votes: &[(ValidatorIndex, [u8; BLS_SIGNATURE_BYTES])],
) -> Result<BlsCertificate, BlsError> {
    let mut sorted: Vec<_> = votes.to_vec();
    sorted.sort_by_key(|(validator, _)| *validator);
    let mut signatures = Vec::with_capacity(sorted.len());
    for (validator, bytes) in &sorted {
        signatures.push(
            Signature::sig_validate(bytes, true).map_err(|_| BlsError::BadVote {
                validator: *validator,
            })?,
        );
    }
    let refs: Vec<&Signature> = signatures.iter().collect();
    let aggregate =
        AggregateSignature::aggregate(&refs, false).map_err(|_| BlsError::BadAggregate)?;
    Ok(BlsCertificate {
        chain_id,
        epoch,
        id,
        output,
        signers: sorted.iter().map(|(validator, _)| *validator).collect(),
        aggregate: aggregate.to_signature().compress(),
    })
}

/// Checks a BLS certificate: committee chain and epoch, at least a quorum of distinct signers in
/// increasing order, and the aggregate over their keys.
pub fn verify_bls_certificate(
    certificate: &BlsCertificate,
    committee: &BlsCommittee,
) -> Result<(), BlsError> {
    if certificate.chain_id != committee.committee.chain_id
        || certificate.epoch != committee.committee.epoch
    {
        return Err(BlsError::WrongCommittee);
    }
    let mut keys = Vec::with_capacity(certificate.signers.len());
    let mut previous: Option<ValidatorIndex> = None;
    for validator in &certificate.signers {
        if previous.is_some_and(|previous| previous >= *validator) {
            return Err(BlsError::BadSigner {
                validator: *validator,
            });
        }
        previous = Some(*validator);
        keys.push(
            committee
                .keys
                .get(usize::from(*validator))
                .ok_or(BlsError::BadSigner {
                    validator: *validator,
                })?,
        );
    }
    let quorum = committee.committee.quorum();
    if keys.len() < quorum {
        return Err(BlsError::TooFewSigners {
            signers: keys.len(),
            quorum,
        });
    }
    let signature = Signature::sig_validate(&certificate.aggregate, true)
        .map_err(|_| BlsError::BadAggregate)?;
    let message = vote_message(
        certificate.chain_id,
        certificate.epoch,
        &certificate.id,
        &certificate.output,
    );
    match signature.fast_aggregate_verify(false, message.as_bytes(), BLS_VOTE_DST, &keys) {
        BLST_ERROR::BLST_SUCCESS => Ok(()),
        _ => Err(BlsError::BadAggregate),
    }
}
