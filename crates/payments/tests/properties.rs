//! Property tests over random schedules (issue 14, acceptance 1). A committee of 4 validators
//! (one of them equivocating, i.e. f Byzantine) certifies payments from honest clients and from a
//! Byzantine client that signs two payments over one coin and sends each to a random subset in a
//! random order; requests are re-delivered at random. After every schedule:
//! - no input is spent by two certified payments;
//! - every certified payment conserves each asset, and the live supply (genesis + certified
//!   outputs − spent by certified payments) equals genesis per asset;
//! - every reply equals the reply of a clone of the shard given the same request (a pure function
//!   of state and request);
//! - re-delivering a request returns the same reply and adds no effect and no spent entry.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{clients, keypair, request_of, Fault, Net};
use proptest::prelude::*;
use walras_payments::{ClientEffect, OutputId, PaymentId, PaymentRequest, Reply, Scheme};
use walras_types::AssetId;

#[derive(Clone, Debug)]
enum Step {
    Pay {
        payer: usize,
        payee: usize,
        asset: u16,
        amount: u128,
    },
    DoubleSpend {
        payer: usize,
        order: Vec<usize>,
        split: usize,
    },
    Redeliver {
        pick: usize,
        validator: usize,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..3usize, 0..3usize, 0..2u16, 1..60u128)
            .prop_map(|(payer, payee, asset, amount)| Step::Pay { payer, payee, asset, amount }),
        1 => (0..3usize, Just((0..4usize).collect::<Vec<_>>()).prop_shuffle(), 0..5usize)
            .prop_map(|(payer, order, split)| Step::DoubleSpend { payer, order, split }),
        2 => (0..64usize, 0..4usize).prop_map(|(pick, validator)| Step::Redeliver { pick, validator }),
    ]
}

fn scheme() -> impl Strategy<Value = Scheme> {
    prop_oneof![
        Just(Scheme::Naive),
        Just(Scheme::Merkle {
            batch_leaves_max: 4
        }),
        Just(Scheme::Bls)
    ]
}

/// Delivers to validator `v` twice through clones to check purity and idempotence, then for real.
fn deliver_checked(net: &mut Net, v: usize, shard: u32, request: &PaymentRequest) -> Option<Reply> {
    if net.validators[v].fault == Fault::Honest {
        let state = net.validators[v].shards[shard as usize].clone();
        let mut twin = state.clone();
        let first = common::honest(&mut twin, request, net.scheme);
        let mut other = state;
        let second = common::honest(&mut other, request, net.scheme);
        assert_eq!(first, second, "a reply is a function of state and request");
        // Re-delivery to the shard that already answered changes nothing.
        let spent = twin.spent_count();
        let outcome = twin.handle(request);
        if let (Ok(outcome), common::Answer::Reply(Reply::Votes(votes))) = (&outcome, &first) {
            assert!(outcome.effects.is_empty(), "re-delivery records nothing");
            assert_eq!(outcome.replies, vec![Reply::Votes(votes.clone())]);
        }
        assert_eq!(twin.spent_count(), spent);
    }
    match net.deliver(v, shard, request) {
        common::Answer::Reply(reply) => Some(reply),
        _ => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_schedules_with_f_byzantine_validators_and_byzantine_clients_keep_every_invariant(
        scheme in scheme(),
        steps in prop::collection::vec(step(), 1..24),
    ) {
        let mut net = Net::new(&[Fault::Equivocating, Fault::Honest, Fault::Honest, Fault::Honest], 2, scheme);
        let mut wallets = clients(&mut net, 3, 100);
        let genesis_total: u128 = 100 * 3;
        let mut sent: Vec<PaymentRequest> = Vec::new();
        let mut certified: BTreeMap<PaymentId, walras_payments::Payment> = BTreeMap::new();
        let mut outputs: BTreeMap<OutputId, walras_payments::Output> = BTreeMap::new();
        // A Byzantine wallet per client key that forgets what the honest one sent.
        let collect = |certified: &mut BTreeMap<PaymentId, walras_payments::Payment>,
                           outputs: &mut BTreeMap<OutputId, walras_payments::Output>,
                           request: &PaymentRequest,
                           effects: Vec<ClientEffect>| {
            let mut delivered = Vec::new();
            for effect in effects {
                if let ClientEffect::Certified { payment, certificates } = effect {
                    certified.insert(payment, request.signed.payment.clone());
                    for certificate in certificates {
                        outputs.insert(certificate.id, certificate.output);
                        delivered.push(certificate);
                    }
                }
            }
            delivered
        };
        for step in steps {
            match step {
                Step::Pay { payer, payee, asset, amount } => {
                    let payee = wallets[payee].public_key();
                    let Ok((_, effects)) = wallets[payer].pay(payee, AssetId(asset), amount) else { continue };
                    let request = request_of(&effects);
                    let shard = net.committee.shard_of(&wallets[payer].public_key());
                    for v in 0..4 {
                        if let Some(reply) = deliver_checked(&mut net, v, shard, &request) {
                            match reply {
                                Reply::Votes(votes) => {
                                    let effects = wallets[payer].on_votes(&votes);
                                    let me = wallets[payer].public_key();
                                    for certificate in collect(&mut certified, &mut outputs, &request, effects) {
                                        if certificate.output.owner != me {
                                            if let Some(wallet) = wallets.iter_mut().find(|w| w.public_key() == certificate.output.owner) {
                                                prop_assert!(wallet.receive(certificate).is_ok(), "every payee verifies");
                                            }
                                        }
                                    }
                                }
                                Reply::Conflict(conflict) => { let _ = wallets[payer].on_conflict(&conflict); }
                                Reply::Pending { .. } => {}
                            }
                        }
                    }
                    sent.push(request);
                }
                Step::DoubleSpend { payer, order, split } => {
                    let mut evil = walras_payments::Client::new(keypair(3, payer as u32), net.committee.clone());
                    let Some(coin) = sent.iter().rev()
                        .flat_map(|request| request.signed.payment.inputs.iter().copied().zip(std::iter::repeat(request.certificates.clone())))
                        .find(|(input, _)| input.output.owner == evil.public_key()) else { continue };
                    let (input, certificates) = coin;
                    match certificates.into_iter().find(|c| c.id == input.id) {
                        Some(certificate) => { let _ = evil.receive(certificate); }
                        None => { let _ = evil.add_root(input.id, input.output); }
                    }
                    let other = wallets[(payer + 1) % 3].public_key();
                    let Ok((_, effects)) = evil.pay(other, input.output.asset, input.output.amount) else { continue };
                    let request = request_of(&effects);
                    let shard = net.committee.shard_of(&evil.public_key());
                    for (position, v) in order.into_iter().enumerate() {
                        if position >= split { break; }
                        if let Some(Reply::Votes(votes)) = deliver_checked(&mut net, v, shard, &request) {
                            let effects = evil.on_votes(&votes);
                            let _ = collect(&mut certified, &mut outputs, &request, effects);
                        }
                    }
                    sent.push(request);
                }
                Step::Redeliver { pick, validator } => {
                    if sent.is_empty() { continue; }
                    let request = sent[pick % sent.len()].clone();
                    let shard = net.committee.shard_of(&request.signed.payment.inputs[0].output.owner);
                    let _ = deliver_checked(&mut net, validator, shard, &request);
                }
            }
        }
        // Never two certificates for one input.
        let mut spent_by: BTreeMap<OutputId, BTreeSet<PaymentId>> = BTreeMap::new();
        for (id, payment) in &certified {
            for input in &payment.inputs {
                spent_by.entry(input.id).or_default().insert(*id);
            }
        }
        for (input, payments) in &spent_by {
            prop_assert!(payments.len() == 1, "input {input:?} certified by {payments:?}");
        }
        // Conservation per asset over certified payments and over the live supply.
        let mut live: BTreeMap<AssetId, u128> = BTreeMap::new();
        for asset in [AssetId(0), AssetId(1)] {
            live.insert(asset, genesis_total);
        }
        for payment in certified.values() {
            prop_assert!(payment.check_shape().is_ok());
            for input in &payment.inputs {
                let entry = live.entry(input.output.asset).or_default();
                *entry -= input.output.amount;
            }
            for output in &payment.outputs {
                *live.entry(output.asset).or_default() += output.amount;
            }
        }
        prop_assert_eq!(live.get(&AssetId(0)).copied(), Some(genesis_total));
        prop_assert_eq!(live.get(&AssetId(1)).copied(), Some(genesis_total));
        prop_assert_eq!(net.cross_shard_messages(), 0);
    }
}
