//! The client state machine (§3 steps 1 and 4), pure: it builds payments, says what to persist
//! before anything is sent, collects votes through the one quorum rule
//! ([`crate::quorum::QuorumCollector`]: distinct validators, every counted vote verified, stop
//! at the quorum), resends the identical request after a crash, and reports inputs that are
//! stuck.
//!
//! The SDK makes equivocation hard: a coin in a pending payment is never chosen again, and the
//! only way to retry is [`Client::resend`], which returns the persisted request unchanged.

use std::collections::{BTreeMap, BTreeSet};

use walras_crypto::{Keypair, PublicKey};
use walras_types::AssetId;

use crate::cert::{verify_certificate, Certificate, RootCache};
use crate::error::{ClientError, VoteFault};
use crate::model::{
    ChainId, Committee, Input, Output, OutputId, Payment, PaymentId, SignedPayment, ValidatorIndex,
    PAYMENT_INPUTS_MAX,
};
use crate::quorum::{Absence, QuorumCollector, QuorumFailure, Step, Verdict};
use crate::validator::{Conflict, PaymentRequest, PaymentVotes};

/// What the I/O layer must do, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientEffect {
    /// Make this request durable before sending it (a crash after sending must find it).
    Persist(PaymentRequest),
    /// Send the request to shard `shard` of every validator.
    Broadcast { shard: u32, request: PaymentRequest },
    /// The payment is certified: hand each payee its certificate; the persisted request may go.
    Certified {
        payment: PaymentId,
        certificates: Vec<Certificate>,
    },
    /// A validator's votes on `payment` were refused (nothing counted for it).
    VoteRefused {
        payment: PaymentId,
        validator: ValidatorIndex,
        fault: VoteFault,
    },
    /// Every validator answered in this round and no quorum formed; the request stays pending and
    /// may be resent unchanged ([`Client::resend`]).
    NoQuorum {
        payment: PaymentId,
        failure: QuorumFailure,
    },
}

/// Why an input cannot be spent now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StuckReason {
    /// Validators hold the input for another payment signed by this key (the key equivocated,
    /// or lost its persisted state). `validators` have said so; with more than `f` of them the
    /// payment this client sent can never certify.
    HeldByOther {
        holder: Box<SignedPayment>,
        validators: BTreeSet<ValidatorIndex>,
    },
}

/// A coin the client can spend: a committed root entry (no certificate) or a certified output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Coin {
    pub id: OutputId,
    pub output: Output,
    pub certificate: Option<Certificate>,
}

#[derive(Clone, Debug)]
struct Pending {
    request: PaymentRequest,
    collector: QuorumCollector,
}

impl Pending {
    fn new(request: PaymentRequest) -> Pending {
        let collector = QuorumCollector::new(&request.signed.payment);
        Pending { request, collector }
    }
}

/// One key's wallet.
#[derive(Clone, Debug)]
pub struct Client {
    keypair: Keypair,
    committee: Committee,
    cache: RootCache,
    coins: BTreeMap<OutputId, Coin>,
    pending: BTreeMap<PaymentId, Pending>,
    stuck: BTreeMap<OutputId, StuckReason>,
}

impl Client {
    /// A wallet for `keypair` under `committee`.
    pub fn new(keypair: Keypair, committee: Committee) -> Client {
        Client {
            keypair,
            committee,
            cache: RootCache::default(),
            coins: BTreeMap::new(),
            pending: BTreeMap::new(),
            stuck: BTreeMap::new(),
        }
    }

    /// This wallet's key.
    pub fn public_key(&self) -> PublicKey {
        self.keypair.public_key()
    }

    /// Chain of the committee.
    pub fn chain_id(&self) -> ChainId {
        self.committee.chain_id
    }

    /// Adds a committed root entry (genesis or deposit) owned by this key.
    pub fn add_root(&mut self, id: OutputId, output: Output) -> Result<(), ClientError> {
        if output.owner != self.public_key() {
            return Err(ClientError::NotOurs(id));
        }
        self.coins.insert(
            id,
            Coin {
                id,
                output,
                certificate: None,
            },
        );
        Ok(())
    }

    /// Verifies a certificate received from a payer and adds the coin.
    pub fn receive(&mut self, certificate: Certificate) -> Result<(), ClientError> {
        verify_certificate(&certificate, &self.committee, &mut self.cache)?;
        if certificate.output.owner != self.public_key() {
            return Err(ClientError::NotOurs(certificate.id));
        }
        self.coins.insert(
            certificate.id,
            Coin {
                id: certificate.id,
                output: certificate.output,
                certificate: Some(certificate),
            },
        );
        Ok(())
    }

    /// Every coin held, locked or not, in id order.
    pub fn coins(&self) -> Vec<Coin> {
        self.coins.values().cloned().collect()
    }

    /// Unlocked balance of `asset` (coins in no pending payment and not stuck).
    pub fn balance(&self, asset: AssetId) -> u128 {
        self.spendable(asset)
            .map(|coin| coin.output.amount)
            .fold(0u128, u128::saturating_add)
    }

    fn locked(&self) -> BTreeSet<OutputId> {
        self.pending
            .values()
            .flat_map(|pending| pending.request.signed.payment.inputs.iter().map(|i| i.id))
            .chain(self.stuck.keys().copied())
            .collect()
    }

    fn spendable(&self, asset: AssetId) -> impl Iterator<Item = &Coin> {
        let locked = self.locked();
        self.coins
            .values()
            .filter(move |coin| coin.output.asset == asset && !locked.contains(&coin.id))
    }

    /// Builds a payment of `amount` of `asset` to `payee`, change back to this key. Returns the
    /// payment id and the effects: persist, then broadcast.
    pub fn pay(
        &mut self,
        payee: PublicKey,
        asset: AssetId,
        amount: u128,
    ) -> Result<(PaymentId, Vec<ClientEffect>), ClientError> {
        let mut chosen: Vec<Coin> = Vec::new();
        let mut total = 0u128;
        for coin in self.spendable(asset) {
            if total >= amount || chosen.len() == PAYMENT_INPUTS_MAX {
                break;
            }
            total = total.saturating_add(coin.output.amount);
            chosen.push(coin.clone());
        }
        if total < amount || amount == 0 {
            return Err(ClientError::InsufficientFunds {
                asset,
                have: total,
                need: amount,
            });
        }
        let mut outputs = vec![Output {
            asset,
            amount,
            owner: payee,
        }];
        if total > amount {
            outputs.push(Output {
                asset,
                amount: total - amount,
                owner: self.public_key(),
            });
        }
        self.pay_with(chosen, outputs)
    }

    /// Builds a payment spending `coins` (owned by this key) into `outputs`.
    pub fn pay_with(
        &mut self,
        coins: Vec<Coin>,
        outputs: Vec<Output>,
    ) -> Result<(PaymentId, Vec<ClientEffect>), ClientError> {
        let payment = Payment {
            chain_id: self.committee.chain_id,
            epoch: self.committee.epoch,
            inputs: coins
                .iter()
                .map(|coin| Input {
                    id: coin.id,
                    output: coin.output,
                })
                .collect(),
            outputs,
        };
        payment.check_shape()?;
        let locked = self.locked();
        if let Some(coin) = coins.iter().find(|coin| locked.contains(&coin.id)) {
            // Never sign a second payment over a pending or stuck coin.
            return Err(ClientError::CoinLocked(coin.id));
        }
        let signed = SignedPayment::sign(payment, &self.keypair);
        let id = signed.payment.id();
        let request = PaymentRequest {
            signed,
            certificates: coins
                .into_iter()
                .filter_map(|coin| coin.certificate)
                .collect(),
        };
        self.pending.insert(id, Pending::new(request.clone()));
        Ok((id, self.effects_for(&request)))
    }

    fn effects_for(&self, request: &PaymentRequest) -> Vec<ClientEffect> {
        vec![
            ClientEffect::Persist(request.clone()),
            ClientEffect::Broadcast {
                shard: self.committee.shard_of(&self.public_key()),
                request: request.clone(),
            },
        ]
    }

    /// After a crash: reload the persisted requests; each is resent byte for byte.
    pub fn recover(&mut self, persisted: Vec<PaymentRequest>) -> Vec<ClientEffect> {
        let mut effects = Vec::new();
        for request in persisted {
            let id = request.signed.payment.id();
            effects.push(ClientEffect::Broadcast {
                shard: self.committee.shard_of(&self.public_key()),
                request: request.clone(),
            });
            self.pending.insert(id, Pending::new(request));
        }
        effects
    }

    /// The identical request again (retry after a timeout or a failed round): a new round of
    /// the quorum collector (votes already verified still count).
    pub fn resend(&mut self, payment: &PaymentId) -> Result<ClientEffect, ClientError> {
        let pending = self
            .pending
            .get_mut(payment)
            .ok_or(ClientError::UnknownPayment(*payment))?;
        pending.collector.new_round();
        let request = pending.request.clone();
        Ok(ClientEffect::Broadcast {
            shard: self.committee.shard_of(&self.public_key()),
            request,
        })
    }

    /// Payments sent and not yet certified.
    pub fn pending_payments(&self) -> Vec<PaymentId> {
        self.pending.keys().copied().collect()
    }

    /// Takes the votes validator `votes.validator` sent ([`Client::on_votes_from`] with that
    /// sender).
    pub fn on_votes(&mut self, votes: &PaymentVotes) -> Vec<ClientEffect> {
        self.on_votes_from(votes.validator, votes)
    }

    /// Takes the votes that validator `sender`'s connection delivered, through the payment's
    /// [`QuorumCollector`] (the one quorum rule). Returns a [`ClientEffect::VoteRefused`] for
    /// each vote refused (this one, or waiting ones an aggregate check found bad), then at the
    /// quorum [`ClientEffect::Certified`] (once), or [`ClientEffect::NoQuorum`] when every
    /// validator has answered in this round without a quorum. Votes for a payment not pending (certified already,
    /// or never ours) change nothing.
    pub fn on_votes_from(
        &mut self,
        sender: ValidatorIndex,
        votes: &PaymentVotes,
    ) -> Vec<ClientEffect> {
        let Some(pending) = self.pending.get_mut(&votes.payment) else {
            return Vec::new();
        };
        let step = pending
            .collector
            .add_votes(&self.committee, &mut self.cache, sender, votes);
        self.after(votes.payment, step)
    }

    /// Records that validator `validator` gave no votes for `payment` in this round (timed
    /// out, overloaded, unreachable).
    pub fn on_unavailable(
        &mut self,
        payment: &PaymentId,
        validator: ValidatorIndex,
    ) -> Vec<ClientEffect> {
        self.absent(payment, validator, Absence::Unavailable)
    }

    /// Ends the round of `payment` early (no more answers are coming): the certificates or why
    /// not, never nothing (unless the payment is not pending).
    pub fn end_round(&mut self, payment: &PaymentId) -> Vec<ClientEffect> {
        let Some(pending) = self.pending.get_mut(payment) else {
            return Vec::new();
        };
        let step = pending.collector.finish(&self.committee, &mut self.cache);
        self.after(*payment, step)
    }

    fn absent(
        &mut self,
        payment: &PaymentId,
        validator: ValidatorIndex,
        absence: Absence,
    ) -> Vec<ClientEffect> {
        let Some(pending) = self.pending.get_mut(payment) else {
            return Vec::new();
        };
        let step =
            pending
                .collector
                .add_absent(&self.committee, &mut self.cache, validator, absence);
        self.after(*payment, step)
    }

    /// The effects of one collector step.
    fn after(&mut self, payment: PaymentId, step: Step) -> Vec<ClientEffect> {
        let mut effects: Vec<ClientEffect> = step
            .refused
            .into_iter()
            .map(|(validator, fault)| ClientEffect::VoteRefused {
                payment,
                validator,
                fault,
            })
            .collect();
        match step.verdict {
            Verdict::Certified(certificates) => effects.push(self.certified(payment, certificates)),
            Verdict::Failed(failure) => effects.push(ClientEffect::NoQuorum { payment, failure }),
            Verdict::NeedMore | Verdict::Finished => {}
        }
        effects
    }

    /// The payment certified: its inputs are spent, its change is a coin, the request may go.
    fn certified(&mut self, payment: PaymentId, certificates: Vec<Certificate>) -> ClientEffect {
        if let Some(pending) = self.pending.remove(&payment) {
            for input in &pending.request.signed.payment.inputs {
                self.coins.remove(&input.id);
                self.stuck.remove(&input.id);
            }
        }
        let me = self.public_key();
        for certificate in &certificates {
            if certificate.output.owner == me {
                self.coins.insert(
                    certificate.id,
                    Coin {
                        id: certificate.id,
                        output: certificate.output,
                        certificate: Some(certificate.clone()),
                    },
                );
            }
        }
        ClientEffect::Certified {
            payment,
            certificates,
        }
    }

    /// Takes a validator's conflict reply. A holder signed by this key that is not the pending
    /// payment marks the input stuck (shown by [`Client::stuck_inputs`]) and counts the
    /// validator as giving no vote to the pending payment that spends the input (the effects
    /// say if that leaves too few for a quorum). Holders not signed by this key are refused,
    /// naming the validator.
    pub fn on_conflict(&mut self, conflict: &Conflict) -> Result<Vec<ClientEffect>, ClientError> {
        let me = self.public_key();
        let holder = &conflict.holder;
        let spends_input = holder
            .payment
            .inputs
            .iter()
            .any(|input| input.id == conflict.input && input.output.owner == me);
        if !spends_input || holder.verify(&me).is_err() {
            return Err(ClientError::BadVote {
                validator: conflict.validator,
                fault: VoteFault::BadSignature,
            });
        }
        if self.pending.contains_key(&holder.payment.id()) {
            return Ok(Vec::new());
        }
        let entry = self
            .stuck
            .entry(conflict.input)
            .or_insert_with(|| StuckReason::HeldByOther {
                holder: Box::new(holder.clone()),
                validators: BTreeSet::new(),
            });
        let StuckReason::HeldByOther { validators, .. } = entry;
        validators.insert(conflict.validator);
        let blocked: Vec<PaymentId> = self
            .pending
            .iter()
            .filter(|(_, pending)| {
                pending
                    .request
                    .signed
                    .payment
                    .inputs
                    .iter()
                    .any(|input| input.id == conflict.input)
            })
            .map(|(id, _)| *id)
            .collect();
        Ok(blocked
            .iter()
            .flat_map(|payment| self.absent(payment, conflict.validator, Absence::Conflict))
            .collect())
    }

    /// Inputs that cannot be spent now, with the reason.
    pub fn stuck_inputs(&self) -> Vec<(OutputId, StuckReason)> {
        self.stuck
            .iter()
            .map(|(id, reason)| (*id, reason.clone()))
            .collect()
    }

    /// The safe way out of a conflict whose holder may still certify: adopt the holder (a payment
    /// this key signed) as pending and resend it unchanged, so its inputs are not lost. Needs the
    /// holder's input certificates, which the client has for its own coins.
    pub fn adopt(&mut self, holder: SignedPayment) -> Result<Vec<ClientEffect>, ClientError> {
        holder.verify(&self.public_key())?;
        let certificates = holder
            .payment
            .inputs
            .iter()
            .filter_map(|input| self.coins.get(&input.id))
            .filter_map(|coin| coin.certificate.clone())
            .collect();
        let request = PaymentRequest {
            signed: holder,
            certificates,
        };
        let id = request.signed.payment.id();
        self.pending.insert(id, Pending::new(request.clone()));
        Ok(self.effects_for(&request))
    }
}
