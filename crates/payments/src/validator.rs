//! One shard of one validator (§3 steps 2–3, §4.3), in FastPay's authority style: no I/O, no
//! clock; each handler returns the effects to make durable and the replies to send, in that
//! order. State is exactly the fold of the effects it returned ([`ValidatorShard::apply`]), so
//! a restarted shard that replays its durable effects answers as before.

use std::collections::BTreeMap;

use walras_crypto::Keypair;

use crate::cert::Certificate;
use crate::cert::{
    payment_vote_messages, sign_votes, verify_certificate, RootCache, Scheme, VoteSignature,
    VoteSigner,
};
use crate::error::RequestError;
use crate::model::{
    payment_signing_hash, Committee, Output, OutputId, Payment, PaymentId, SignedPayment,
    ValidatorIndex,
};
use walras_crypto::{Hash, PublicKey, Signature, SignedItem, SIGNATURE_BYTES};

/// What a client sends to each validator's shard: the signed payment and a certificate for every
/// input that is not a committed root entry (genesis or exchange deposit).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PaymentRequest {
    pub signed: SignedPayment,
    pub certificates: Vec<Certificate>,
}

/// One validator's votes on every output of one payment, in output order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PaymentVotes {
    pub validator: ValidatorIndex,
    pub payment: PaymentId,
    pub signatures: Vec<VoteSignature>,
}

/// The signed payment that holds an input: proof that the owner signed another payment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    pub validator: ValidatorIndex,
    pub input: OutputId,
    pub holder: SignedPayment,
}

/// A validator shard's answer to a valid request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Votes(PaymentVotes),
    /// Recorded; the votes come with the next sealed Merkle batch.
    Pending {
        validator: ValidatorIndex,
        payment: PaymentId,
    },
    Conflict(Conflict),
}

/// A durable record; the shard's state is the fold of these.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Inputs of `signed` are spent by it; with the votes when already signed (naive and BLS
    /// schemes).
    RecordPayment {
        signed: SignedPayment,
        signatures: Option<Vec<VoteSignature>>,
    },
    /// Votes of a payment recorded earlier without them (a sealed Merkle batch).
    RecordVotes {
        payment: PaymentId,
        signatures: Vec<VoteSignature>,
    },
    /// A committed root entry (genesis or exchange deposit) became spendable.
    AdmitRoot { id: OutputId, output: Output },
}

/// Client-signature verdicts computed ahead of handling, for several requests at once
/// ([`ValidatorShard::check_client_signatures`]). Keyed by what a verdict is a function of: the
/// payment's id (which fixes its owner and the signed message) and the signature's bytes, so a
/// verdict answers only for the signature it was computed on.
#[derive(Clone, Debug, Default)]
pub struct ClientSignatures {
    verdicts: BTreeMap<(PaymentId, [u8; SIGNATURE_BYTES]), bool>,
}

impl ClientSignatures {
    /// The verdict on `signature` over payment `id`, if it was checked.
    pub fn verdict(&self, id: &PaymentId, signature: &Signature) -> Option<bool> {
        self.verdicts.get(&(*id, *signature.as_bytes())).copied()
    }

    /// How many signatures were checked.
    pub fn len(&self) -> usize {
        self.verdicts.len()
    }

    /// Whether no signature was checked.
    pub fn is_empty(&self) -> bool {
        self.verdicts.is_empty()
    }
}

/// What a handler hands back: make `effects` durable (group commit allowed), then send `replies`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub effects: Vec<Effect>,
    pub replies: Vec<Reply>,
}

#[derive(Clone, Debug)]
struct Held {
    signed: SignedPayment,
    signatures: Option<Vec<VoteSignature>>,
}

/// One shard of one validator.
#[derive(Clone, Debug)]
pub struct ValidatorShard {
    committee: Committee,
    index: ValidatorIndex,
    shard: u32,
    signer: VoteSigner,
    scheme: Scheme,
    roots: BTreeMap<OutputId, Output>,
    spent: BTreeMap<OutputId, PaymentId>,
    held: BTreeMap<PaymentId, Held>,
    /// Payments recorded, waiting for the next Merkle batch, in arrival order.
    pool: Vec<PaymentId>,
    cache: RootCache,
}

impl ValidatorShard {
    /// Shard `shard` of validator `index`, whose key must be `committee.validators[index]`.
    pub fn new(
        committee: Committee,
        index: ValidatorIndex,
        shard: u32,
        keypair: Keypair,
        scheme: Scheme,
    ) -> ValidatorShard {
        ValidatorShard {
            committee,
            index,
            shard,
            signer: VoteSigner::new(keypair),
            scheme,
            roots: BTreeMap::new(),
            spent: BTreeMap::new(),
            held: BTreeMap::new(),
            pool: Vec::new(),
            cache: RootCache::default(),
        }
    }

    /// This shard's validator index.
    pub fn index(&self) -> ValidatorIndex {
        self.index
    }

    /// This shard's number.
    pub fn shard(&self) -> u32 {
        self.shard
    }

    /// Number of inputs recorded as spent.
    pub fn spent_count(&self) -> usize {
        self.spent.len()
    }

    /// The signed payment holding `input`, if any: how a crashed client learns what it signed.
    pub fn holder_of(&self, input: &OutputId) -> Option<&SignedPayment> {
        self.spent
            .get(input)
            .and_then(|payment| self.held.get(payment))
            .map(|held| &held.signed)
    }

    /// Votes already given for `payment`, if any.
    pub fn votes_for(&self, payment: &PaymentId) -> Option<PaymentVotes> {
        let held = self.held.get(payment)?;
        held.signatures.as_ref().map(|signatures| PaymentVotes {
            validator: self.index,
            payment: *payment,
            signatures: signatures.clone(),
        })
    }

    /// Makes a committed root entry spendable (genesis, or a deposit whose exchange block is
    /// committed). Outputs owned by another shard's keys are ignored.
    pub fn admit_root(&mut self, id: OutputId, output: Output) -> Outcome {
        if self.committee.shard_of(&output.owner) != self.shard || self.roots.contains_key(&id) {
            return Outcome::default();
        }
        let effect = Effect::AdmitRoot { id, output };
        self.apply(&effect);
        Outcome {
            effects: vec![effect],
            replies: Vec::new(),
        }
    }

    /// Replays one durable effect (restart) or applies a fresh one.
    pub fn apply(&mut self, effect: &Effect) {
        match effect {
            Effect::RecordPayment { signed, signatures } => {
                let id = signed.payment.id();
                for input in &signed.payment.inputs {
                    // The spent set's invariant at its one point of mutation: an input holds at
                    // most one payment. `handle` refuses a conflicting payment before this, and
                    // a durable log only replays what `handle` recorded; a second holder here
                    // would let this validator vote for two spends of one input.
                    let previous = self.spent.insert(input.id, id);
                    assert!(
                        previous.is_none_or(|holder| holder == id),
                        "input {:?} already holds payment {:?}; recording payment {id:?} over it \
                         would vote for a double spend",
                        input.id,
                        previous
                    );
                }
                if signatures.is_none() && !self.pool.contains(&id) {
                    self.pool.push(id);
                }
                self.held.insert(
                    id,
                    Held {
                        signed: signed.clone(),
                        signatures: signatures.clone(),
                    },
                );
            }
            Effect::RecordVotes {
                payment,
                signatures,
            } => {
                self.pool.retain(|pooled| pooled != payment);
                if let Some(held) = self.held.get_mut(payment) {
                    held.signatures = Some(signatures.clone());
                }
            }
            Effect::AdmitRoot { id, output } => {
                self.roots.insert(*id, *output);
            }
        }
    }

    /// Handles a payment request: checks chain, epoch, shape, shard, owner signature, input
    /// certificates and conservation, then the spent-set step, all-or-nothing over the inputs.
    pub fn handle(&mut self, request: &PaymentRequest) -> Result<Outcome, RequestError> {
        self.handle_checked(request, &ClientSignatures::default())
    }

    /// The client-signature verdicts [`Self::handle_checked`] would need for `requests`, checked
    /// together as batches ([`walras_crypto::verify_each_parallel`] on this thread: every
    /// verdict is the one the signature gets alone, so a batch changes only the cost, about
    /// half a single check's per signature). Cheapest first, as in `handle`: a request that a
    /// check before the signature refuses (chain, epoch, shape, shard), and a resend of a
    /// payment this shard holds with the same signature (checked when it was recorded), buy no
    /// verification. Pure: nothing in the shard changes.
    pub fn check_client_signatures(&self, requests: &[&PaymentRequest]) -> ClientSignatures {
        let mut wanted: BTreeMap<(PaymentId, [u8; SIGNATURE_BYTES]), (PublicKey, Signature)> =
            BTreeMap::new();
        for request in requests {
            let Ok(owner) = self.check_before_signature(request) else {
                continue;
            };
            let id = request.signed.payment.id();
            if self.holds_signed(&id, &request.signed) {
                continue;
            }
            let signature = request.signed.signature;
            wanted.insert((id, *signature.as_bytes()), (owner, signature));
        }
        let messages: Vec<Hash> = wanted
            .keys()
            .map(|(id, _)| payment_signing_hash(id))
            .collect();
        let items: Vec<SignedItem<'_>> = wanted
            .iter()
            .zip(&messages)
            .map(|((_, (owner, signature)), message)| {
                (message.as_bytes().as_slice(), owner, signature)
            })
            .collect();
        let verdicts = walras_crypto::verify_each_parallel(&items, 1);
        ClientSignatures {
            verdicts: wanted.into_keys().zip(verdicts).collect(),
        }
    }

    /// [`Self::handle`], taking the client signature's verdict from `checked` when it holds
    /// one for this payment and signature (from [`Self::check_client_signatures`]) and
    /// checking it alone otherwise: the same outcome either way.
    pub fn handle_checked(
        &mut self,
        request: &PaymentRequest,
        checked: &ClientSignatures,
    ) -> Result<Outcome, RequestError> {
        let payment = &request.signed.payment;
        let owner = self.check_before_signature(request)?;
        let id = payment.id();
        if !self.holds_signed(&id, &request.signed) {
            match checked.verdict(&id, &request.signed.signature) {
                Some(true) => {}
                Some(false) => return Err(RequestError::BadClientSignature),
                None => request.signed.verify(&owner)?,
            }
        }
        self.handle_signed(request, id)
    }

    /// Whether this shard holds payment `id` with exactly `signed`: its signature was checked
    /// when it was recorded (only `handle_checked` records payments, and replayed effects are
    /// what it recorded), so a resend needs no check.
    fn holds_signed(&self, id: &PaymentId, signed: &SignedPayment) -> bool {
        self.held.get(id).is_some_and(|held| held.signed == *signed)
    }

    /// The checks before the owner's signature, cheapest first: chain, epoch, shape,
    /// certificate count, shard. Returns the owner whose signature the payment needs.
    fn check_before_signature(&self, request: &PaymentRequest) -> Result<PublicKey, RequestError> {
        let payment = &request.signed.payment;
        if payment.chain_id != self.committee.chain_id {
            return Err(RequestError::WrongChain {
                expected: self.committee.chain_id,
                found: payment.chain_id,
            });
        }
        if payment.epoch != self.committee.epoch {
            return Err(RequestError::WrongEpoch {
                expected: self.committee.epoch,
                found: payment.epoch,
            });
        }
        let owner = payment.check_shape()?;
        if request.certificates.len() > payment.inputs.len() {
            return Err(RequestError::TooManyCertificates {
                certificates: request.certificates.len(),
            });
        }
        let expected = self.committee.shard_of(&owner);
        if expected != self.shard {
            return Err(RequestError::WrongShard {
                expected,
                shard: self.shard,
            });
        }
        Ok(owner)
    }

    /// The rest of `handle` once the owner's signature on payment `id` is accepted: input
    /// certificates, then the spent-set step.
    fn handle_signed(
        &mut self,
        request: &PaymentRequest,
        id: PaymentId,
    ) -> Result<Outcome, RequestError> {
        let payment = &request.signed.payment;
        // Same payment again: the same answer, nothing changes.
        if let Some(held) = self.held.get(&id) {
            let reply = match &held.signatures {
                Some(signatures) => Reply::Votes(PaymentVotes {
                    validator: self.index,
                    payment: id,
                    signatures: signatures.clone(),
                }),
                None => Reply::Pending {
                    validator: self.index,
                    payment: id,
                },
            };
            return Ok(Outcome {
                effects: Vec::new(),
                replies: vec![reply],
            });
        }
        for input in &payment.inputs {
            if let Some(root) = self.roots.get(&input.id) {
                if *root != input.output {
                    return Err(RequestError::InputMismatch { input: input.id });
                }
                continue;
            }
            let certificate = request
                .certificates
                .iter()
                .find(|certificate| certificate.id == input.id)
                .ok_or(RequestError::UnknownInput { input: input.id })?;
            if certificate.output != input.output {
                return Err(RequestError::InputMismatch { input: input.id });
            }
            verify_certificate(certificate, &self.committee, &mut self.cache).map_err(|error| {
                RequestError::BadInputCertificate {
                    input: input.id,
                    error,
                }
            })?;
        }
        // All-or-nothing: any input held by another payment refuses the whole payment.
        for input in &payment.inputs {
            if let Some(holder) = self.spent.get(&input.id) {
                if let Some(held) = self.held.get(holder) {
                    return Ok(Outcome {
                        effects: Vec::new(),
                        replies: vec![Reply::Conflict(Conflict {
                            validator: self.index,
                            input: input.id,
                            holder: held.signed.clone(),
                        })],
                    });
                }
            }
        }
        let (signatures, reply) = match self.scheme {
            Scheme::Naive | Scheme::Bls => {
                let signatures = sign_votes(&self.signer, self.scheme, &self.messages_of(request));
                let reply = Reply::Votes(PaymentVotes {
                    validator: self.index,
                    payment: id,
                    signatures: signatures.clone(),
                });
                (Some(signatures), reply)
            }
            Scheme::Merkle { .. } => (
                None,
                Reply::Pending {
                    validator: self.index,
                    payment: id,
                },
            ),
        };
        let effect = Effect::RecordPayment {
            signed: request.signed.clone(),
            signatures,
        };
        self.apply(&effect);
        // Postcondition of the effect, before any vote on it leaves: every input holds it.
        self.assert_holds(payment, id);
        let mut outcome = Outcome {
            effects: vec![effect],
            replies: vec![reply],
        };
        if let Scheme::Merkle { batch_leaves_max } = self.scheme {
            if self.pooled_leaves() >= batch_leaves_max {
                let sealed = self.seal_batch();
                outcome.effects.extend(sealed.effects);
                outcome.replies = sealed.replies;
            }
        }
        Ok(outcome)
    }

    /// Outputs waiting in the Merkle pool.
    pub fn pooled_leaves(&self) -> usize {
        self.pool
            .iter()
            .filter_map(|payment| self.held.get(payment))
            .map(|held| held.signed.payment.outputs.len())
            .sum()
    }

    /// Signs every pooled payment's outputs (Merkle scheme: one tree per `batch_leaves_max`
    /// leaves) and returns their votes. The I/O layer calls it when its queue is empty or the
    /// pool is full; nothing happens with an empty pool.
    pub fn seal_batch(&mut self) -> Outcome {
        let pooled: Vec<PaymentId> = std::mem::take(&mut self.pool);
        let mut messages = Vec::new();
        let mut spans = Vec::new();
        for payment in &pooled {
            if let Some(held) = self.held.get(payment) {
                // A vote is issued only for the payment its inputs hold.
                self.assert_holds(&held.signed.payment, *payment);
                let start = messages.len();
                messages.extend(self.output_messages(*payment, &held.signed.payment.outputs));
                spans.push((*payment, start, messages.len()));
            }
        }
        let signatures = sign_votes(&self.signer, self.scheme, &messages);
        let mut outcome = Outcome::default();
        for (payment, start, end) in spans {
            let effect = Effect::RecordVotes {
                payment,
                signatures: signatures[start..end].to_vec(),
            };
            self.apply(&effect);
            outcome.effects.push(effect);
            outcome.replies.push(Reply::Votes(PaymentVotes {
                validator: self.index,
                payment,
                signatures: signatures[start..end].to_vec(),
            }));
        }
        outcome
    }

    /// Panics unless every input of `payment` (whose id is `id`) is recorded as spent by it:
    /// checked before this shard's votes on `payment` leave (cheap: at most
    /// [`crate::PAYMENT_INPUTS_MAX`] lookups).
    fn assert_holds(&self, payment: &Payment, id: PaymentId) {
        for input in &payment.inputs {
            let holder = self.spent.get(&input.id);
            assert!(
                holder == Some(&id),
                "a vote on payment {id:?} while its input {:?} holds {holder:?}",
                input.id
            );
        }
    }

    fn messages_of(&self, request: &PaymentRequest) -> Vec<walras_crypto::Hash> {
        let payment = &request.signed.payment;
        self.output_messages(payment.id(), &payment.outputs)
    }

    fn output_messages(&self, payment: PaymentId, outputs: &[Output]) -> Vec<walras_crypto::Hash> {
        payment_vote_messages(
            self.committee.chain_id,
            self.committee.epoch,
            payment,
            outputs,
        )
    }
}
