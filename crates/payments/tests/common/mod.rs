//! An in-process network for the payments tests: `n` validators × `S` shards of the pure core,
//! each validator honest or faulty in one of the ways the issue lists, and clients that talk to
//! them. Messages are function calls; the harness counts every message by sender and receiver so
//! tests can assert that no validator shard ever sends to another shard.

#![allow(dead_code)]

use std::collections::BTreeMap;

use walras_crypto::{Keypair, PublicKey};
use walras_payments::{
    genesis_output_id, ChainId, Client, ClientEffect, ClientError, Committee, Epoch, Output,
    OutputId, PaymentRequest, PaymentVotes, Reply, RequestError, Scheme, ValidatorShard,
    VoteSignature,
};
use walras_types::AssetId;

/// How a validator misbehaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    Honest,
    /// Never replies.
    Silent,
    /// Records the first request it gets, then stops (its reply is lost).
    Crashing,
    /// Replies after every other validator.
    Slow,
    /// Votes for every well-formed payment, ignoring its spent set.
    Equivocating,
    /// Signs with a key that is not its committee key.
    WrongKey,
    /// Signs a different output (amount + 1).
    WrongMessage,
    /// Merkle scheme: corrupts a sibling of the inclusion path (naive: like `WrongMessage`).
    BadMerklePath,
    /// Answers with the votes it gave to an earlier payment, relabelled.
    Replaying,
}

pub(crate) const FAULTS_GARBAGE: [Fault; 4] = [
    Fault::WrongKey,
    Fault::WrongMessage,
    Fault::BadMerklePath,
    Fault::Replaying,
];

/// One validator: its honest shards, a root-only template (for equivocation), a rogue key.
pub(crate) struct Validator {
    pub fault: Fault,
    pub shards: Vec<ValidatorShard>,
    pub fresh: Vec<ValidatorShard>,
    pub rogue: Vec<ValidatorShard>,
    pub last_votes: Option<PaymentVotes>,
    pub crashed: bool,
}

/// A request's fate at one validator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    Reply(Reply),
    Refused(RequestError),
    Nothing,
}

pub(crate) struct Net {
    pub committee: Committee,
    pub scheme: Scheme,
    pub validators: Vec<Validator>,
    /// (sender, receiver) → count; names are "client", "v{i}s{s}".
    pub messages: BTreeMap<(String, String), u64>,
}

pub(crate) const CHAIN: ChainId = ChainId(7);
pub(crate) const EPOCH: Epoch = Epoch(1);

pub(crate) fn keypair(tag: u8, index: u32) -> Keypair {
    let mut seed = [0u8; 32];
    seed[0] = tag;
    seed[1..5].copy_from_slice(&index.to_be_bytes());
    Keypair::from_seed(seed)
}

impl Net {
    /// `faults[i]` is validator i's behaviour; `faults.len()` is n.
    pub(crate) fn new(faults: &[Fault], shards: u32, scheme: Scheme) -> Net {
        let keys: Vec<Keypair> = (0..faults.len() as u32).map(|i| keypair(1, i)).collect();
        let committee = Committee {
            chain_id: CHAIN,
            epoch: EPOCH,
            validators: keys.iter().map(Keypair::public_key).collect(),
            shards,
            bls: keys
                .iter()
                .map(|key| walras_payments::VoteSigner::new(key.clone()).bls_member())
                .collect(),
        };
        let validators = faults
            .iter()
            .zip(&keys)
            .enumerate()
            .map(|(index, (fault, key))| {
                let make = |key: &Keypair| {
                    (0..shards)
                        .map(|shard| {
                            ValidatorShard::new(
                                committee.clone(),
                                index as u16,
                                shard,
                                key.clone(),
                                scheme,
                            )
                        })
                        .collect::<Vec<_>>()
                };
                Validator {
                    fault: *fault,
                    shards: make(key),
                    fresh: make(key),
                    rogue: make(&keypair(2, index as u32)),
                    last_votes: None,
                    crashed: false,
                }
            })
            .collect();
        Net {
            committee,
            scheme,
            validators,
            messages: BTreeMap::new(),
        }
    }

    pub(crate) fn n(&self) -> usize {
        self.validators.len()
    }

    /// Genesis: gives `amount` of `asset` to `owner` as genesis entry `index`, at every
    /// validator (the shard of the owner admits it).
    pub(crate) fn genesis(
        &mut self,
        index: u32,
        owner: PublicKey,
        asset: AssetId,
        amount: u128,
    ) -> (OutputId, Output) {
        let id = genesis_output_id(CHAIN, index);
        let output = Output {
            asset,
            amount,
            owner,
        };
        for validator in &mut self.validators {
            for group in [
                &mut validator.shards,
                &mut validator.fresh,
                &mut validator.rogue,
            ] {
                for shard in group.iter_mut() {
                    shard.admit_root(id, output);
                }
            }
        }
        (id, output)
    }

    fn count(&mut self, from: String, to: String) {
        *self.messages.entry((from, to)).or_default() += 1;
    }

    /// Messages sent from one validator shard to another shard (of any validator).
    pub(crate) fn cross_shard_messages(&self) -> u64 {
        self.messages
            .iter()
            .filter(|((from, to), _)| from.starts_with('v') && to.starts_with('v'))
            .map(|(_, count)| count)
            .sum()
    }

    /// Delivers `request` to shard `shard` of validator `v` and returns what comes back.
    pub(crate) fn deliver(&mut self, v: usize, shard: u32, request: &PaymentRequest) -> Answer {
        let name = format!("v{v}s{shard}");
        self.count("client".into(), name.clone());
        let scheme = self.scheme;
        let validator = &mut self.validators[v];
        let s = shard as usize;
        let answer = match validator.fault {
            Fault::Silent => Answer::Nothing,
            Fault::Crashing if validator.crashed => Answer::Nothing,
            Fault::Crashing => {
                validator.crashed = true;
                let _ = honest(&mut validator.shards[s], request, scheme);
                Answer::Nothing
            }
            Fault::Honest | Fault::Slow => honest(&mut validator.shards[s], request, scheme),
            Fault::Equivocating => {
                let mut fresh = validator.fresh[s].clone();
                honest(&mut fresh, request, scheme)
            }
            Fault::WrongKey => {
                let mut rogue = validator.rogue[s].clone();
                honest(&mut rogue, request, scheme)
            }
            Fault::WrongMessage | Fault::BadMerklePath | Fault::Replaying => {
                let mut forged = request.clone();
                if validator.fault == Fault::WrongMessage
                    || (validator.fault == Fault::BadMerklePath
                        && !matches!(scheme, Scheme::Merkle { .. }))
                {
                    for output in &mut forged.signed.payment.outputs {
                        output.amount += 1;
                    }
                    // Sign through a fresh shard without checks: re-sign the payment as-is is
                    // impossible (not the owner's key), so sign the vote messages directly.
                    let votes =
                        forge_votes(&validator.fresh[s], v as u16, request, &forged, scheme);
                    Answer::Reply(Reply::Votes(votes))
                } else {
                    match honest(&mut validator.shards[s], request, scheme) {
                        Answer::Reply(Reply::Votes(mut votes)) => {
                            if validator.fault == Fault::BadMerklePath {
                                for signature in &mut votes.signatures {
                                    if let VoteSignature::Merkle { proof, .. } = signature {
                                        match proof.siblings.first_mut() {
                                            Some(sibling) => sibling.0[0] ^= 1,
                                            None => proof.leaf_index += 1,
                                        }
                                    }
                                }
                                Answer::Reply(Reply::Votes(votes))
                            } else {
                                let previous = validator.last_votes.replace(votes.clone());
                                match previous {
                                    Some(mut old)
                                        if old.signatures.len() == votes.signatures.len() =>
                                    {
                                        old.payment = votes.payment;
                                        Answer::Reply(Reply::Votes(old))
                                    }
                                    Some(mut old) => {
                                        old.payment = votes.payment;
                                        old.signatures.resize(
                                            votes.signatures.len(),
                                            votes.signatures[0].clone(),
                                        );
                                        Answer::Reply(Reply::Votes(old))
                                    }
                                    // Nothing to replay yet: a duplicate-free replay of itself.
                                    None => Answer::Reply(Reply::Votes(votes)),
                                }
                            }
                        }
                        other => other,
                    }
                }
            }
        };
        if answer != Answer::Nothing {
            self.count(name, "client".into());
        }
        answer
    }

    /// Sends `request` to every validator (slow ones last) and feeds `client` the answers until
    /// it certifies. Returns the certificates (if any) and every error the client raised.
    pub(crate) fn pay(&mut self, client: &mut Client, request: &PaymentRequest) -> Outcome {
        let shard = self.committee.shard_of(&client.public_key());
        let mut order: Vec<usize> = (0..self.n())
            .filter(|&v| self.validators[v].fault != Fault::Slow)
            .collect();
        order.extend((0..self.n()).filter(|&v| self.validators[v].fault == Fault::Slow));
        let mut outcome = Outcome::default();
        for v in order {
            match self.deliver(v, shard, request) {
                Answer::Reply(Reply::Votes(votes)) => {
                    outcome.take(client.on_votes(&votes));
                }
                Answer::Reply(Reply::Conflict(conflict)) => {
                    outcome.conflicts += 1;
                    match client.on_conflict(&conflict) {
                        Ok(effects) => outcome.take(effects),
                        Err(error) => outcome.client_errors.push(error),
                    }
                }
                Answer::Reply(Reply::Pending { .. }) | Answer::Nothing => {}
                Answer::Refused(error) => outcome.refusals.push(error),
            }
        }
        outcome
    }
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Outcome {
    pub certificates: Option<Vec<walras_payments::Certificate>>,
    pub client_errors: Vec<ClientError>,
    pub refusals: Vec<RequestError>,
    pub conflicts: usize,
}

impl Outcome {
    /// Records a client step: its certificates, and each refused vote as the error naming the
    /// validator.
    fn take(&mut self, effects: Vec<ClientEffect>) {
        for effect in effects {
            match effect {
                ClientEffect::Certified { certificates, .. } => {
                    self.certificates = Some(certificates);
                }
                ClientEffect::VoteRefused {
                    validator, fault, ..
                } => self
                    .client_errors
                    .push(ClientError::BadVote { validator, fault }),
                _ => {}
            }
        }
    }
}

/// Honest handling; with the Merkle scheme the pool is sealed at once so a reply comes back.
pub(crate) fn honest(
    shard: &mut ValidatorShard,
    request: &PaymentRequest,
    scheme: Scheme,
) -> Answer {
    match shard.handle(request) {
        Err(error) => Answer::Refused(error),
        Ok(outcome) => {
            let id = request.signed.payment.id();
            let mut replies = outcome.replies;
            if matches!(scheme, Scheme::Merkle { .. }) {
                replies.extend(shard.seal_batch().replies);
            }
            replies
                .into_iter()
                .rfind(|reply| match reply {
                    Reply::Votes(votes) => votes.payment == id,
                    Reply::Pending { .. } => false,
                    Reply::Conflict(_) => true,
                })
                .map_or(Answer::Nothing, Answer::Reply)
        }
    }
}

fn forge_votes(
    template: &ValidatorShard,
    validator: u16,
    request: &PaymentRequest,
    forged: &PaymentRequest,
    scheme: Scheme,
) -> PaymentVotes {
    let _ = template;
    let key = keypair(1, u32::from(validator));
    let id = request.signed.payment.id();
    let messages: Vec<_> = forged
        .signed
        .payment
        .outputs
        .iter()
        .enumerate()
        .map(|(index, output)| {
            walras_payments::vote_message(
                CHAIN,
                EPOCH,
                &walras_payments::output_id(&id, index as u16),
                output,
            )
        })
        .collect();
    PaymentVotes {
        validator,
        payment: id,
        signatures: walras_payments::sign_votes(
            &walras_payments::VoteSigner::new(key),
            scheme,
            &messages,
        ),
    }
}

/// `count` clients each with `per_client` units of assets 0 and 1 at genesis.
pub(crate) fn clients(net: &mut Net, count: u32, per_client: u128) -> Vec<Client> {
    let mut clients = Vec::new();
    let mut index = 0;
    for c in 0..count {
        let key = keypair(3, c);
        let mut client = Client::new(key.clone(), net.committee.clone());
        for asset in [AssetId(0), AssetId(1)] {
            let (id, output) = net.genesis(index, key.public_key(), asset, per_client);
            index += 1;
            client
                .add_root(id, output)
                .expect("genesis output is the client's own");
        }
        clients.push(client);
    }
    clients
}

/// The request a client's pay effects carry.
pub(crate) fn request_of(effects: &[ClientEffect]) -> PaymentRequest {
    effects
        .iter()
        .find_map(|effect| match effect {
            ClientEffect::Broadcast { request, .. } => Some(request.clone()),
            _ => None,
        })
        .expect("pay broadcasts its request")
}
