//! Votes and certificates (§3, §3.2, §3.3, §3.4): what a validator signs, the three signature
//! schemes, the bounded cache of verified Merkle roots and checked BLS keys, certificate checks,
//! and the exchange's withdrawal check.
//!
//! The Merkle root is recomputed here rather than through
//! `walras_crypto::verify_merkle_batch_member`, because the cache needs the root itself and the
//! crypto crate keeps its root recomputation private. The recomputation uses the crypto crate's
//! domains and tree shape, and a test checks it accepts exactly what the crypto crate accepts.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use walras_crypto::{
    domain as crypto_domain, hash_in, sign_merkle_batch, verify, Hash, Hasher, Keypair,
    MerkleBatchSignature, MerkleProof, PublicKey, Signature,
};

use crate::bls::{
    aggregate_certificate, checked_key, verify_aggregate, verify_one, BlsCertificate, BlsError,
    BlsKeypair,
};
use crate::error::{CertError, VoteFault};
use crate::model::vote_message;
use crate::model::{
    output_id, BlsMember, ChainId, Committee, Epoch, Output, OutputId, PaymentId, ValidatorIndex,
    BLS_SIGNATURE_BYTES,
};

/// How validators sign votes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// One Ed25519 signature per output.
    Naive,
    /// One Ed25519 signature per Merkle tree of up to `batch_leaves_max` outputs.
    Merkle { batch_leaves_max: usize },
    /// One BLS12-381 signature per output; a certificate's votes verify as one aggregate.
    Bls,
}

/// The vote messages of a payment's outputs, in output order: what a validator signs and a
/// certificate's votes are checked against (one rule for both the core and the process).
pub fn payment_vote_messages(
    chain_id: ChainId,
    epoch: Epoch,
    payment: PaymentId,
    outputs: &[Output],
) -> Vec<Hash> {
    outputs
        .iter()
        .enumerate()
        .map(|(index, output)| {
            vote_message(chain_id, epoch, &output_id(&payment, index as u16), output)
        })
        .collect()
}

/// Checks validator `validator`'s votes on a payment: one signature per output, each over that
/// output's vote message ([`payment_vote_messages`]) under the validator's key in `committee`.
/// What a client and an aggregator both do with every vote they receive.
pub fn verify_payment_votes(
    committee: &Committee,
    validator: ValidatorIndex,
    payment: &crate::model::Payment,
    payment_id: PaymentId,
    signatures: &[VoteSignature],
    cache: &mut RootCache,
) -> Result<(), VoteFault> {
    if signatures.len() != payment.outputs.len() {
        return Err(VoteFault::WrongVoteCount);
    }
    let messages = payment_vote_messages(
        payment.chain_id,
        payment.epoch,
        payment_id,
        &payment.outputs,
    );
    for (message, signature) in messages.iter().zip(signatures) {
        verify_vote(committee, validator, message, signature, cache)?;
    }
    Ok(())
}

/// One validator's signature on one output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VoteSignature {
    Naive(Signature),
    Merkle {
        batch: MerkleBatchSignature,
        proof: MerkleProof,
    },
    /// A compressed BLS12-381 signature (G2) of the output's vote message.
    Bls([u8; BLS_SIGNATURE_BYTES]),
}

impl VoteSignature {
    /// Bytes this signature takes on the wire (signature, leaf count, index, siblings).
    pub fn wire_bytes(&self) -> usize {
        match self {
            VoteSignature::Naive(_) => 64,
            VoteSignature::Merkle { proof, .. } => 64 + 4 + 4 + 1 + 32 * proof.siblings.len(),
            VoteSignature::Bls(_) => BLS_SIGNATURE_BYTES,
        }
    }
}

/// A vote: who signed, and the signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vote {
    pub validator: ValidatorIndex,
    pub signature: VoteSignature,
}

/// A validator's signing keys: its Ed25519 key and the BLS key derived from it
/// ([`crate::bls::bls_seed`]), so one key file serves every scheme.
#[derive(Clone, Debug)]
pub struct VoteSigner {
    ed25519: Keypair,
    bls: BlsKeypair,
}

impl VoteSigner {
    /// The signer whose Ed25519 key is `keypair`.
    pub fn new(keypair: Keypair) -> VoteSigner {
        let bls = BlsKeypair::derive(&keypair);
        VoteSigner {
            ed25519: keypair,
            bls,
        }
    }

    /// The Ed25519 public key (the committee's `validators` entry).
    pub fn public_key(&self) -> PublicKey {
        self.ed25519.public_key()
    }

    /// The BLS key and its proof of possession (the committee's `bls` entry).
    pub fn bls_member(&self) -> BlsMember {
        self.bls.member()
    }
}

/// Signs each message in `messages` under `scheme`: naive and BLS give one signature each,
/// Merkle one tree per `batch_leaves_max` consecutive messages.
pub fn sign_votes(signer: &VoteSigner, scheme: Scheme, messages: &[Hash]) -> Vec<VoteSignature> {
    let keypair = &signer.ed25519;
    match scheme {
        Scheme::Naive => messages
            .iter()
            .map(|message| VoteSignature::Naive(keypair.sign(message.as_bytes())))
            .collect(),
        Scheme::Bls => messages
            .iter()
            .map(|message| VoteSignature::Bls(signer.bls.sign_vote(message)))
            .collect(),
        Scheme::Merkle { batch_leaves_max } => {
            let mut signatures = Vec::with_capacity(messages.len());
            for chunk in messages.chunks(batch_leaves_max.max(1)) {
                // A chunk is never empty and never longer than u32::MAX.
                if let Ok((batch, proofs)) = sign_merkle_batch(keypair, chunk) {
                    signatures.extend(
                        proofs
                            .into_iter()
                            .map(|proof| VoteSignature::Merkle { batch, proof }),
                    );
                }
            }
            debug_assert_eq!(signatures.len(), messages.len());
            signatures
        }
    }
}

/// Most verified roots a [`RootCache`] remembers by default.
pub const ROOT_CACHE_ENTRIES_MAX: usize = 4096;

/// A bounded cache of Merkle roots whose signatures verified (§3.3: the root is checked the first
/// time it is seen, later leaves under it cost only hashes). Oldest entries leave first.
#[derive(Clone, Debug)]
pub struct RootCache {
    entries_max: usize,
    verified: BTreeSet<(PublicKey, Hash, [u8; 64])>,
    order: VecDeque<(PublicKey, Hash, [u8; 64])>,
    /// Committee BLS entries whose key decoded and whose proof of possession verified.
    bls_keys: BTreeMap<BlsMember, blst::min_pk::PublicKey>,
    /// Committee BLS entries whose last vote checked alone was bad: an aggregator checks their
    /// next votes alone at once instead of letting them spoil an aggregate (at most one entry
    /// per committee member).
    bls_suspects: BTreeSet<BlsMember>,
    /// Signature verifications performed (for benchmarks and tests).
    pub signature_checks: u64,
    /// Root hits that skipped a signature check.
    pub hits: u64,
}

impl Default for RootCache {
    fn default() -> RootCache {
        RootCache::new(ROOT_CACHE_ENTRIES_MAX)
    }
}

impl RootCache {
    /// A cache holding at most `entries_max` roots (0 disables caching).
    pub fn new(entries_max: usize) -> RootCache {
        RootCache {
            entries_max,
            verified: BTreeSet::new(),
            order: VecDeque::new(),
            bls_keys: BTreeMap::new(),
            bls_suspects: BTreeSet::new(),
            signature_checks: 0,
            hits: 0,
        }
    }

    /// Roots held now.
    pub fn len(&self) -> usize {
        self.verified.len()
    }

    /// Whether no root is held.
    pub fn is_empty(&self) -> bool {
        self.verified.is_empty()
    }

    fn check(
        &mut self,
        key: &PublicKey,
        signed: &Hash,
        signature: &Signature,
    ) -> Result<(), VoteFault> {
        let entry = (*key, *signed, *signature.as_bytes());
        if self.verified.contains(&entry) {
            self.hits += 1;
            return Ok(());
        }
        self.signature_checks += 1;
        verify(key, signed.as_bytes(), signature).map_err(|_| VoteFault::BadSignature)?;
        if self.entries_max > 0 {
            if self.order.len() >= self.entries_max {
                if let Some(oldest) = self.order.pop_front() {
                    self.verified.remove(&oldest);
                }
            }
            self.verified.insert(entry);
            self.order.push_back(entry);
        }
        debug_assert!(self.verified.len() <= self.entries_max);
        Ok(())
    }
}

impl RootCache {
    /// Validator `validator`'s BLS key, checked by [`checked_key`] the first time this cache
    /// sees the committee entry (kept while `entries_max > 0`).
    fn bls_key(
        &mut self,
        committee: &Committee,
        validator: ValidatorIndex,
    ) -> Result<blst::min_pk::PublicKey, VoteFault> {
        let member = committee.bls_member(validator).ok_or(VoteFault::NoBlsKey)?;
        if let Some(key) = self.bls_keys.get(member) {
            return Ok(*key);
        }
        let key = checked_key(member, validator).map_err(|_| VoteFault::BadBlsKey)?;
        if self.entries_max > 0 && self.bls_keys.len() < self.entries_max {
            self.bls_keys.insert(*member, key);
        }
        Ok(key)
    }
}

impl RootCache {
    /// Whether validator `validator`'s last BLS vote checked alone was bad.
    pub fn is_bls_suspect(&self, committee: &Committee, validator: ValidatorIndex) -> bool {
        committee
            .bls_member(validator)
            .is_some_and(|member| self.bls_suspects.contains(member))
    }

    /// Records the outcome of checking validator `validator`'s BLS votes alone: a bad vote makes
    /// it a suspect, a good one clears it.
    pub fn record_bls_check(&mut self, committee: &Committee, validator: ValidatorIndex, ok: bool) {
        let Some(member) = committee.bls_member(validator) else {
            return;
        };
        if ok {
            self.bls_suspects.remove(member);
        } else {
            self.bls_suspects.insert(*member);
        }
    }
}

/// Checks one vote by validator `validator` of `committee` on `message` (a [`vote_message`]):
/// Ed25519 votes under its `validators` key, BLS votes under its `bls` key.
pub fn verify_vote(
    committee: &Committee,
    validator: ValidatorIndex,
    message: &Hash,
    signature: &VoteSignature,
    cache: &mut RootCache,
) -> Result<(), VoteFault> {
    let key = committee
        .validator(validator)
        .ok_or(VoteFault::UnknownValidator)?;
    match signature {
        VoteSignature::Bls(signature) => {
            let key = cache.bls_key(committee, validator)?;
            cache.signature_checks += 1;
            verify_one(&key, message, signature)
                .then_some(())
                .ok_or(VoteFault::BadSignature)
        }
        VoteSignature::Naive(signature) => {
            cache.signature_checks += 1;
            verify(key, message.as_bytes(), signature).map_err(|_| VoteFault::BadSignature)
        }
        VoteSignature::Merkle { batch, proof } => {
            let root = merkle_root_from_proof(message, batch.leaf_count, proof)
                .ok_or(VoteFault::BadMerklePath)?;
            let signed = merkle_signed_root(batch.leaf_count, &root);
            cache.check(key, &signed, &batch.signature)
        }
    }
}

/// The root a proof leads to, or `None` if it does not fit a tree of `leaf_count` leaves. Same
/// tree as `walras_crypto::MerkleTree` (unpaired nodes move up unchanged).
pub fn merkle_root_from_proof(
    message_hash: &Hash,
    leaf_count: u32,
    proof: &MerkleProof,
) -> Option<Hash> {
    if proof.leaf_index >= leaf_count {
        return None;
    }
    let mut siblings = proof.siblings.iter();
    let (mut index, mut width) = (proof.leaf_index, leaf_count);
    let mut node = hash_in(crypto_domain::MERKLE_LEAF, message_hash.as_bytes());
    while width > 1 {
        if index % 2 == 1 || index + 1 < width {
            let sibling = siblings.next()?;
            let (left, right) = if index % 2 == 0 {
                (&node, sibling)
            } else {
                (sibling, &node)
            };
            let mut hasher = Hasher::new(crypto_domain::MERKLE_NODE);
            hasher.update(left.as_bytes()).update(right.as_bytes());
            node = hasher.finalize();
        }
        index /= 2;
        width = width.div_ceil(2);
    }
    siblings.next().is_none().then_some(node)
}

fn merkle_signed_root(leaf_count: u32, root: &Hash) -> Hash {
    let mut hasher = Hasher::new(crypto_domain::MERKLE_ROOT);
    hasher
        .update(&leaf_count.to_be_bytes())
        .update(root.as_bytes());
    hasher.finalize()
}

/// Bytes a certificate spends per vote besides the signature: index (2), signature count (4),
/// signature tag (1).
pub const VOTE_OVERHEAD_BYTES: usize = 2 + 4 + 1;

/// A certificate: a quorum of distinct valid votes on one output. The payee holds it; a payment
/// is final for the payee once the payee has verified it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Certificate {
    pub chain_id: ChainId,
    pub epoch: Epoch,
    pub id: OutputId,
    pub output: Output,
    pub votes: Vec<Vote>,
}

impl Certificate {
    /// One certificate per output of `payment`, from quorum-many validators' votes on the whole
    /// payment (each voter's signatures in output order): the one way certificates are
    /// assembled, by the wallet state machine and by the network client alike.
    pub fn for_payment<'v>(
        payment: &crate::model::Payment,
        voters: impl Iterator<Item = (ValidatorIndex, &'v [VoteSignature])> + Clone,
    ) -> Vec<Certificate> {
        let id = payment.id();
        payment
            .outputs
            .iter()
            .enumerate()
            .map(|(index, output)| Certificate {
                chain_id: payment.chain_id,
                epoch: payment.epoch,
                id: output_id(&id, index as u16),
                output: *output,
                votes: voters
                    .clone()
                    .map(|(validator, signatures)| Vote {
                        validator,
                        signature: signatures[index].clone(),
                    })
                    .collect(),
            })
            .collect()
    }

    /// The compact form of a certificate whose votes are all BLS: one aggregate signature and
    /// the sorted signer indices (what a wallet downloads or the exchange checks). The votes are
    /// taken as they are; [`crate::bls::verify_bls_certificate`] checks the result.
    pub fn compact(&self) -> Result<BlsCertificate, BlsError> {
        let mut votes = Vec::with_capacity(self.votes.len());
        for vote in &self.votes {
            match &vote.signature {
                VoteSignature::Bls(signature) => votes.push((vote.validator, *signature)),
                _ => {
                    return Err(BlsError::BadVote {
                        validator: vote.validator,
                    })
                }
            }
        }
        aggregate_certificate(self.chain_id, self.epoch, self.id, self.output, &votes)
    }

    /// Bytes on the wire, exactly `codec::certificate_bytes(self).len()`: header
    /// (8 + 8 + 32 + 2 + 16 + 32), vote count, and per vote its index, its signature count (always
    /// 1), the signature's tag and the signature.
    pub fn wire_bytes(&self) -> usize {
        98 + 4
            + self
                .votes
                .iter()
                .map(|vote| VOTE_OVERHEAD_BYTES + vote.signature.wire_bytes())
                .sum::<usize>()
    }
}

/// Checks `certificate` against `committee`: right chain and epoch, at least a quorum of votes,
/// no validator twice, every vote valid. The first bad vote is named.
pub fn verify_certificate(
    certificate: &Certificate,
    committee: &Committee,
    cache: &mut RootCache,
) -> Result<(), CertError> {
    if certificate.chain_id != committee.chain_id {
        return Err(CertError::WrongChain {
            expected: committee.chain_id,
            found: certificate.chain_id,
        });
    }
    if certificate.epoch != committee.epoch {
        return Err(CertError::WrongEpoch {
            expected: committee.epoch,
            found: certificate.epoch,
        });
    }
    let message = vote_message(
        certificate.chain_id,
        certificate.epoch,
        &certificate.id,
        &certificate.output,
    );
    if bls_aggregate_verifies(certificate, committee, &message, cache) {
        return Ok(());
    }
    let mut voters = BTreeMap::new();
    for vote in &certificate.votes {
        if committee.validator(vote.validator).is_none() {
            return Err(CertError::BadVote {
                validator: vote.validator,
                fault: VoteFault::UnknownValidator,
            });
        }
        if voters.insert(vote.validator, ()).is_some() {
            return Err(CertError::BadVote {
                validator: vote.validator,
                fault: VoteFault::Duplicate,
            });
        }
        verify_vote(committee, vote.validator, &message, &vote.signature, cache).map_err(
            |fault| CertError::BadVote {
                validator: vote.validator,
                fault,
            },
        )?;
    }
    if voters.len() < committee.quorum() {
        return Err(CertError::TooFewVotes {
            votes: voters.len(),
            quorum: committee.quorum(),
        });
    }
    Ok(())
}

/// The aggregate-first check of a certificate whose votes are all BLS (§3.4): `true` when it is
/// for the committee's chain and epoch, the votes come from at least a quorum of distinct
/// committee members with usable BLS keys and their aggregate verifies, one pairing check for
/// the whole certificate. `false` decides nothing: the caller then checks each vote alone, which
/// names the bad validator ([`verify_certificate`] does both).
pub fn bls_aggregate_verifies(
    certificate: &Certificate,
    committee: &Committee,
    message: &Hash,
    cache: &mut RootCache,
) -> bool {
    if certificate.chain_id != committee.chain_id || certificate.epoch != committee.epoch {
        return false;
    }
    let mut voters = BTreeSet::new();
    let mut keys = Vec::with_capacity(certificate.votes.len());
    let mut signatures = Vec::with_capacity(certificate.votes.len());
    for vote in &certificate.votes {
        let VoteSignature::Bls(signature) = &vote.signature else {
            return false;
        };
        if committee.validator(vote.validator).is_none() || !voters.insert(vote.validator) {
            return false;
        }
        let Ok(key) = cache.bls_key(committee, vote.validator) else {
            return false;
        };
        keys.push(key);
        signatures.push(signature);
    }
    if voters.len() < committee.quorum() {
        return false;
    }
    cache.signature_checks += 1;
    let key_refs: Vec<&blst::min_pk::PublicKey> = keys.iter().collect();
    verify_aggregate(&key_refs, message, &signatures)
}

/// What the exchange learns from a valid withdrawal certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Withdrawal {
    pub id: OutputId,
    pub output: Output,
}

/// The exchange's deterministic withdrawal check: `certificate` must be for `chain_id` and
/// `epoch` and carry a quorum of `committee` (the committee stored in exchange state). The caller
/// then refuses the output id if it is already in its withdrawn set, and inserts it otherwise.
/// No cache is shared between calls, so the result depends on the arguments alone.
pub fn verify_withdrawal(
    certificate: &Certificate,
    committee: &Committee,
    chain_id: ChainId,
    epoch: Epoch,
) -> Result<Withdrawal, CertError> {
    if committee.chain_id != chain_id || certificate.chain_id != chain_id {
        return Err(CertError::WrongChain {
            expected: chain_id,
            found: certificate.chain_id,
        });
    }
    if committee.epoch != epoch || certificate.epoch != epoch {
        return Err(CertError::WrongEpoch {
            expected: epoch,
            found: certificate.epoch,
        });
    }
    verify_certificate(certificate, committee, &mut RootCache::new(0))?;
    Ok(Withdrawal {
        id: certificate.id,
        output: certificate.output,
    })
}
