//! The one quorum rule for a payment's votes (FastPay's `communicate_with_quorum`, pure): feed
//! a [`QuorumCollector`] each validator's answer as it arrives and it says whether it needs
//! more, has the certificates, or can no longer reach a quorum (and why). The wallet state
//! machine ([`crate::Client`]) and the network client's `certify` (the benchmark) both use it,
//! so the benchmark measures the path wallets take.
//!
//! Strategy: Ed25519 votes (naive, Merkle) are checked alone on arrival. BLS votes wait
//! unchecked until, with the verified ones, they reach the quorum; then each output's
//! certificate is checked as one aggregate (one pairing check instead of one per vote). Only if
//! an aggregate fails is each waiting vote checked alone, which names the bad validator; a
//! validator whose vote was bad alone becomes a suspect in the [`RootCache`] and its next votes
//! are checked alone on arrival, so one Byzantine validator cannot spoil every aggregate. The
//! verdict is the one checking each vote alone would give: a certificate iff a quorum of
//! distinct committee members sent valid votes.

use std::collections::{BTreeMap, BTreeSet};

use walras_crypto::Hash;

use crate::cert::{
    bls_aggregate_verifies, payment_vote_messages, verify_vote, Certificate, RootCache,
    VoteSignature,
};
use crate::error::VoteFault;
use crate::model::{Committee, Payment, PaymentId, ValidatorIndex};
use crate::validator::PaymentVotes;

/// Why a validator gave no vote in this round (what the I/O layer knows beyond that stays
/// with it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Absence {
    /// It holds an input for another payment.
    Conflict,
    /// No usable reply: timed out, connection closed, overloaded, held back, unexpected reply.
    Unavailable,
}

/// Why a payment did not certify in this round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumFailure {
    /// Distinct validators whose votes verified.
    pub valid: usize,
    pub quorum: usize,
    /// Validators whose votes were refused, with the reason (latest per validator).
    pub faults: Vec<(ValidatorIndex, VoteFault)>,
    /// Validators that answered without votes.
    pub absent: Vec<(ValidatorIndex, Absence)>,
    /// Committee members not heard from (only when the caller ended the round early).
    pub unheard: Vec<ValidatorIndex>,
}

/// What the collector says after an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No quorum yet, and some committee member has not answered in this round.
    NeedMore,
    /// A quorum of verified votes: one certificate per output, in output order (returned once).
    Certified(Vec<Certificate>),
    /// Every committee member answered in this round (or the caller ended it) and no quorum
    /// of valid votes formed.
    Failed(QuorumFailure),
    /// Already certified or failed; this answer changes nothing.
    Finished,
}

/// One step of the collector: the votes refused during it (possibly of earlier answers, found
/// when an aggregate failed) and the verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub refused: Vec<(ValidatorIndex, VoteFault)>,
    pub verdict: Verdict,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Open,
    Certified,
    Failed,
}

/// Collects one payment's votes until the quorum (see the module documentation).
#[derive(Clone, Debug)]
pub struct QuorumCollector {
    payment: Payment,
    payment_id: PaymentId,
    /// The vote message of each output, in output order.
    messages: Vec<Hash>,
    verified: BTreeMap<ValidatorIndex, Vec<VoteSignature>>,
    /// BLS votes of the right shape, not checked yet: they wait for an aggregate check.
    waiting: BTreeMap<ValidatorIndex, Vec<VoteSignature>>,
    faults: BTreeMap<ValidatorIndex, VoteFault>,
    absent: BTreeMap<ValidatorIndex, Absence>,
    state: State,
}

impl QuorumCollector {
    /// A collector for `payment`'s votes.
    pub fn new(payment: &Payment) -> QuorumCollector {
        let payment_id = payment.id();
        QuorumCollector {
            messages: payment_vote_messages(
                payment.chain_id,
                payment.epoch,
                payment_id,
                &payment.outputs,
            ),
            payment: payment.clone(),
            payment_id,
            verified: BTreeMap::new(),
            waiting: BTreeMap::new(),
            faults: BTreeMap::new(),
            absent: BTreeMap::new(),
            state: State::Open,
        }
    }

    /// The payment whose votes this collects.
    pub fn payment_id(&self) -> PaymentId {
        self.payment_id
    }

    /// Distinct validators whose votes verified so far.
    pub fn valid(&self) -> usize {
        self.verified.len()
    }

    /// Takes the votes that the connection of validator `sender` delivered. Votes signed in
    /// another validator's name, for another payment, of the wrong count or from outside the
    /// committee are refused without a signature check; a second answer of a validator already
    /// counted is ignored.
    pub fn add_votes(
        &mut self,
        committee: &Committee,
        cache: &mut RootCache,
        sender: ValidatorIndex,
        votes: &PaymentVotes,
    ) -> Step {
        if self.state != State::Open {
            return finished();
        }
        let mut refused = Vec::new();
        let validator = votes.validator;
        // The sender is checked before the duplicate test: votes of a validator already
        // counted, relayed by another member's address, are that member's fault, not a
        // duplicate to ignore (which would leave the member unheard).
        let counted =
            self.verified.contains_key(&validator) || self.waiting.contains_key(&validator);
        if counted && validator == sender {
            return Step {
                refused,
                verdict: Verdict::NeedMore,
            };
        }
        match self.check_shape(committee, sender, votes) {
            Err(fault) => self.refuse(&mut refused, sender, fault),
            Ok(()) if is_bls(&votes.signatures) && !cache.is_bls_suspect(committee, validator) => {
                self.absent.remove(&validator);
                self.waiting.insert(validator, votes.signatures.clone());
            }
            Ok(()) => {
                self.check_alone(committee, cache, validator, &votes.signatures, &mut refused)
            }
        }
        let verdict = self.progress(committee, cache, &mut refused);
        Step { refused, verdict }
    }

    /// Records that validator `validator` answered without votes in this round.
    pub fn add_absent(
        &mut self,
        committee: &Committee,
        cache: &mut RootCache,
        validator: ValidatorIndex,
        absence: Absence,
    ) -> Step {
        if self.state != State::Open {
            return finished();
        }
        if !self.verified.contains_key(&validator) && !self.waiting.contains_key(&validator) {
            self.absent.insert(validator, absence);
        }
        let mut refused = Vec::new();
        let verdict = self.progress(committee, cache, &mut refused);
        Step { refused, verdict }
    }

    /// Ends the round early (the caller expects no more answers): waiting votes are checked
    /// alone, and the verdict is the certificates or the failure, never `NeedMore`.
    pub fn finish(&mut self, committee: &Committee, cache: &mut RootCache) -> Step {
        if self.state != State::Open {
            return finished();
        }
        let mut refused = Vec::new();
        self.check_waiting(committee, cache, &mut refused);
        let verdict = match self.certify_verified(committee) {
            Some(verdict) => verdict,
            None => self.fail(committee),
        };
        Step { refused, verdict }
    }

    /// Starts a new round (the request is resent to every validator): absences and faults are
    /// forgotten, verified votes kept. A certified collector stays certified.
    pub fn new_round(&mut self) {
        self.absent.clear();
        self.faults.clear();
        if self.state == State::Failed {
            self.state = State::Open;
        }
    }

    fn check_shape(
        &self,
        committee: &Committee,
        sender: ValidatorIndex,
        votes: &PaymentVotes,
    ) -> Result<(), VoteFault> {
        if votes.validator != sender {
            return Err(VoteFault::OtherValidatorsVotes {
                signer: votes.validator,
            });
        }
        if committee.validator(votes.validator).is_none() {
            return Err(VoteFault::UnknownValidator);
        }
        if votes.payment != self.payment_id {
            return Err(VoteFault::WrongPayment);
        }
        if votes.signatures.len() != self.messages.len() {
            return Err(VoteFault::WrongVoteCount);
        }
        Ok(())
    }

    fn refuse(
        &mut self,
        refused: &mut Vec<(ValidatorIndex, VoteFault)>,
        validator: ValidatorIndex,
        fault: VoteFault,
    ) {
        self.faults.insert(validator, fault);
        refused.push((validator, fault));
    }

    /// Checks one validator's votes (shape already checked) each alone; BLS outcomes update the
    /// suspect list.
    fn check_alone(
        &mut self,
        committee: &Committee,
        cache: &mut RootCache,
        validator: ValidatorIndex,
        signatures: &[VoteSignature],
        refused: &mut Vec<(ValidatorIndex, VoteFault)>,
    ) {
        let result = self
            .messages
            .iter()
            .zip(signatures)
            .try_for_each(|(message, signature)| {
                verify_vote(committee, validator, message, signature, cache)
            });
        if is_bls(signatures) {
            cache.record_bls_check(committee, validator, result.is_ok());
        }
        match result {
            Ok(()) => {
                self.faults.remove(&validator);
                self.absent.remove(&validator);
                self.verified.insert(validator, signatures.to_vec());
            }
            Err(fault) => self.refuse(refused, validator, fault),
        }
    }

    fn check_waiting(
        &mut self,
        committee: &Committee,
        cache: &mut RootCache,
        refused: &mut Vec<(ValidatorIndex, VoteFault)>,
    ) {
        for (validator, signatures) in std::mem::take(&mut self.waiting) {
            self.check_alone(committee, cache, validator, &signatures, refused);
        }
    }

    /// The verdict after a change: certify when verified (or verified and waiting, as one
    /// aggregate per output) votes reach the quorum, fail when every member answered without.
    fn progress(
        &mut self,
        committee: &Committee,
        cache: &mut RootCache,
        refused: &mut Vec<(ValidatorIndex, VoteFault)>,
    ) -> Verdict {
        let quorum = committee.quorum();
        if let Some(verdict) = self.certify_verified(committee) {
            return verdict;
        }
        if self.verified.len() + self.waiting.len() >= quorum {
            if let Some(certificates) = self.aggregate_verifies(committee, cache) {
                self.state = State::Certified;
                return Verdict::Certified(certificates);
            }
            // Some waiting vote is bad: each alone names it. The waiting set is then empty,
            // so this recursion happens once.
            self.check_waiting(committee, cache, refused);
            return self.progress(committee, cache, refused);
        }
        if self.unheard(committee).is_empty() {
            // Every member answered and no quorum formed. Not earlier, when the missing answers
            // alone make a quorum impossible (FastPay stops at f + 1 errors): the report then
            // counts every answer, the same whatever the order they came in. Waiting votes are
            // checked alone so that it counts the valid ones and names the bad ones.
            self.check_waiting(committee, cache, refused);
            if let Some(verdict) = self.certify_verified(committee) {
                return verdict;
            }
            return self.fail(committee);
        }
        Verdict::NeedMore
    }

    fn certify_verified(&mut self, committee: &Committee) -> Option<Verdict> {
        let quorum = committee.quorum();
        if self.verified.len() < quorum {
            return None;
        }
        self.state = State::Certified;
        let voters = self
            .verified
            .iter()
            .take(quorum)
            .map(|(validator, signatures)| (*validator, signatures.as_slice()));
        Some(Verdict::Certified(Certificate::for_payment(
            &self.payment,
            voters,
        )))
    }

    /// The certificates of the first quorum of verified and waiting voters if each output's
    /// certificate verifies as one aggregate; the waiting voters used become verified.
    fn aggregate_verifies(
        &mut self,
        committee: &Committee,
        cache: &mut RootCache,
    ) -> Option<Vec<Certificate>> {
        let candidates: BTreeMap<ValidatorIndex, &[VoteSignature]> = self
            .verified
            .iter()
            .chain(self.waiting.iter())
            .map(|(validator, signatures)| (*validator, signatures.as_slice()))
            .collect();
        let voters: Vec<(ValidatorIndex, &[VoteSignature])> =
            candidates.into_iter().take(committee.quorum()).collect();
        let certificates = Certificate::for_payment(&self.payment, voters.iter().copied());
        let all_verify = certificates
            .iter()
            .zip(&self.messages)
            .all(|(certificate, message)| {
                bls_aggregate_verifies(certificate, committee, message, cache)
            });
        if !all_verify {
            return None;
        }
        let used: Vec<ValidatorIndex> = voters.iter().map(|(validator, _)| *validator).collect();
        for validator in used {
            if let Some(signatures) = self.waiting.remove(&validator) {
                self.verified.insert(validator, signatures);
            }
        }
        Some(certificates)
    }

    /// Committee members with no answer in this round.
    fn unheard(&self, committee: &Committee) -> Vec<ValidatorIndex> {
        let heard: BTreeSet<ValidatorIndex> = self
            .verified
            .keys()
            .chain(self.waiting.keys())
            .chain(self.faults.keys())
            .chain(self.absent.keys())
            .copied()
            .collect();
        (0..committee.validators.len())
            .filter_map(|index| ValidatorIndex::try_from(index).ok())
            .filter(|validator| !heard.contains(validator))
            .collect()
    }

    fn fail(&mut self, committee: &Committee) -> Verdict {
        self.state = State::Failed;
        Verdict::Failed(QuorumFailure {
            valid: self.verified.len(),
            quorum: committee.quorum(),
            faults: self.faults.iter().map(|(v, fault)| (*v, *fault)).collect(),
            absent: self
                .absent
                .iter()
                .map(|(v, absence)| (*v, *absence))
                .collect(),
            unheard: self.unheard(committee),
        })
    }
}

fn finished() -> Step {
    Step {
        refused: Vec::new(),
        verdict: Verdict::Finished,
    }
}

/// Whether every signature of a validator's answer is BLS (those wait for the aggregate check).
fn is_bls(signatures: &[VoteSignature]) -> bool {
    !signatures.is_empty()
        && signatures
            .iter()
            .all(|signature| matches!(signature, VoteSignature::Bls(_)))
}
