//! In-process Byzantine tests (issue 14, acceptance 2): for n ∈ {4, 7, 10} and each fault kind
//! (silent, crashing, slow, equivocating, wrong key, wrong message, bad Merkle path, replaying),
//! f validators misbehave and honest payments must still certify under all three signature
//! schemes (naive, Merkle, BLS; a bad Merkle path is a wrong message where there is no path);
//! every bad vote the client sees is refused naming a faulty validator; no validator shard sends
//! a message to another shard. With f + 1 faulty validators the tests record which property
//! fails: equivocators let a Byzantine client certify two payments spending one input (safety),
//! silent validators stop certification (liveness).
//! Also: Merkle validators sign ten pooled payments under one root each and every client
//! certifies; a crashed client resends identical bytes (persisted or fetched from a validator) and
//! finishes its payment; an equivocating client sees its input stuck with the holding payment.

mod common;

use common::{clients, request_of, Fault, Net, FAULTS_GARBAGE};
use walras_payments::{ClientEffect, ClientError, Scheme};
use walras_types::AssetId;

const SCHEMES: [Scheme; 3] = [
    Scheme::Naive,
    Scheme::Merkle {
        batch_leaves_max: 64,
    },
    Scheme::Bls,
];
const FAULTS_ALL: [Fault; 8] = [
    Fault::Silent,
    Fault::Crashing,
    Fault::Slow,
    Fault::Equivocating,
    Fault::WrongKey,
    Fault::WrongMessage,
    Fault::BadMerklePath,
    Fault::Replaying,
];

fn faults(n: usize, kind: Fault, faulty: usize) -> Vec<Fault> {
    (0..n)
        .map(|v| if v < faulty { kind } else { Fault::Honest })
        .collect()
}

#[test]
fn with_f_faulty_validators_of_any_kind_honest_payments_certify_and_bad_votes_name_the_validator() {
    for n in [4usize, 7, 10] {
        let f = (n - 1) / 3;
        for scheme in SCHEMES {
            for kind in FAULTS_ALL {
                let mut net = Net::new(&faults(n, kind, f), 2, scheme);
                let mut wallets = clients(&mut net, 3, 1_000);
                // A chain of payments: 0 → 1 → 2 → 0, each spending certified outputs after the
                // first round.
                for round in 0..3 {
                    for payer in 0..3 {
                        let payee = wallets[(payer + 1) % 3].public_key();
                        let (_, effects) = wallets[payer]
                            .pay(payee, AssetId(round % 2), 10 + round as u128)
                            .expect("the payer has funds");
                        let request = request_of(&effects);
                        let outcome = net.pay(&mut wallets[payer], &request);
                        let certificates = outcome.certificates.unwrap_or_else(|| {
                            panic!(
                                "n={n} {scheme:?} {kind:?}: payment did not certify: {:?}",
                                outcome.client_errors
                            )
                        });
                        for error in &outcome.client_errors {
                            match error {
                                ClientError::BadVote { validator, .. } => assert!(
                                    usize::from(*validator) < f,
                                    "n={n} {kind:?}: an honest validator {validator} was blamed"
                                ),
                                other => panic!("unexpected client error {other:?}"),
                            }
                        }
                        if FAULTS_GARBAGE.contains(&kind) && round > 0 {
                            assert_eq!(
                                outcome.client_errors.len(),
                                f,
                                "n={n} {scheme:?} {kind:?}: every garbage vote is refused"
                            );
                        }
                        assert!(outcome.refusals.is_empty(), "{:?}", outcome.refusals);
                        for certificate in certificates {
                            let recipient = wallets
                                .iter_mut()
                                .find(|wallet| wallet.public_key() == certificate.output.owner);
                            if let Some(wallet) = recipient {
                                if wallet.public_key() == payee {
                                    wallet.receive(certificate).expect("the payee verifies");
                                }
                            }
                        }
                    }
                }
                assert_eq!(net.cross_shard_messages(), 0);
            }
        }
    }
}

/// A Byzantine client signs two payments over one coin: A goes to the equivocators and just
/// enough honest validators for a quorum, then B goes to every validator. Returns how many of
/// the two certified.
fn double_spend(n: usize, equivocators: usize) -> usize {
    let mut net = Net::new(
        &faults(n, Fault::Equivocating, equivocators),
        1,
        Scheme::Naive,
    );
    let mut wallets = clients(&mut net, 3, 100);
    let payee_a = wallets[1].public_key();
    let payee_b = wallets[2].public_key();
    let (_, effects) = wallets[0].pay(payee_a, AssetId(0), 100).expect("funds");
    let request_a = request_of(&effects);
    // The Byzantine client forgets its pending payment (a fresh wallet over the same key) and
    // signs a second payment over the same coin.
    let mut evil = walras_payments::Client::new(common::keypair(3, 0), net.committee.clone());
    let coin = &request_a.signed.payment.inputs[0];
    evil.add_root(coin.id, coin.output).expect("own coin");
    let (_, effects) = evil.pay(payee_b, AssetId(0), 100).expect("funds");
    let request_b = request_of(&effects);
    let honest = n - equivocators;
    let quorum = net.committee.quorum();
    let mut certified = 0;
    for (wallet, request, honest_range) in [
        (
            &mut wallets[0],
            &request_a,
            (0..quorum.saturating_sub(equivocators)).collect::<Vec<_>>(),
        ),
        // B goes to everyone: the honest validators that saw A must refuse it.
        (&mut evil, &request_b, (0..honest).collect()),
    ] {
        let mut got = false;
        let targets: Vec<usize> = (0..equivocators)
            .chain(honest_range.iter().map(|h| equivocators + h))
            .collect();
        for v in targets {
            if let common::Answer::Reply(walras_payments::Reply::Votes(votes)) =
                net.deliver(v, 0, request)
            {
                got |= wallet
                    .on_votes(&votes)
                    .iter()
                    .any(|effect| matches!(effect, ClientEffect::Certified { .. }));
            }
        }
        certified += usize::from(got);
    }
    certified
}

#[test]
fn with_f_equivocating_validators_a_double_spending_client_certifies_at_most_one_payment() {
    for n in [4usize, 7, 10] {
        let f = (n - 1) / 3;
        assert!(double_spend(n, f) <= 1, "n={n}");
    }
}

#[test]
fn with_f_plus_one_equivocating_validators_safety_fails_two_payments_certify_for_one_input() {
    for n in [4usize, 7, 10] {
        let f = (n - 1) / 3;
        assert_eq!(
            double_spend(n, f + 1),
            2,
            "n={n}: recorded failure of safety"
        );
    }
}

#[test]
fn with_f_plus_one_silent_validators_liveness_fails_and_nothing_certifies() {
    for n in [4usize, 7, 10] {
        let f = (n - 1) / 3;
        let mut net = Net::new(&faults(n, Fault::Silent, f + 1), 1, Scheme::Naive);
        let mut wallets = clients(&mut net, 2, 100);
        let payee = wallets[1].public_key();
        let (payment, effects) = wallets[0].pay(payee, AssetId(0), 5).expect("funds");
        let outcome = net.pay(&mut wallets[0], &request_of(&effects));
        assert!(outcome.certificates.is_none(), "n={n}");
        assert_eq!(wallets[0].pending_payments(), vec![payment]);
    }
}

#[test]
fn with_f_plus_one_garbage_signers_liveness_fails_but_every_bad_vote_is_named() {
    for n in [4usize, 7, 10] {
        let f = (n - 1) / 3;
        let mut net = Net::new(
            &faults(n, Fault::WrongKey, f + 1),
            1,
            Scheme::Merkle {
                batch_leaves_max: 64,
            },
        );
        let mut wallets = clients(&mut net, 2, 100);
        let payee = wallets[1].public_key();
        let (_, effects) = wallets[0].pay(payee, AssetId(0), 5).expect("funds");
        let outcome = net.pay(&mut wallets[0], &request_of(&effects));
        assert!(outcome.certificates.is_none());
        let blamed: Vec<u16> = outcome
            .client_errors
            .iter()
            .filter_map(|error| match error {
                ClientError::BadVote { validator, .. } => Some(*validator),
                _ => None,
            })
            .collect();
        assert_eq!(blamed, (0..=f as u16).collect::<Vec<_>>());
    }
}

#[test]
fn a_client_that_equivocates_sees_its_input_stuck_with_the_holding_payment() {
    let mut net = Net::new(&faults(4, Fault::Honest, 0), 1, Scheme::Naive);
    let mut wallets = clients(&mut net, 3, 100);
    let payee_a = wallets[1].public_key();
    let payee_b = wallets[2].public_key();
    let (_, effects) = wallets[0].pay(payee_a, AssetId(0), 100).expect("funds");
    let request_a = request_of(&effects);
    let mut evil = walras_payments::Client::new(common::keypair(3, 0), net.committee.clone());
    let coin = request_a.signed.payment.inputs[0];
    evil.add_root(coin.id, coin.output).expect("own coin");
    let (_, effects) = evil.pay(payee_b, AssetId(0), 100).expect("funds");
    let request_b = request_of(&effects);
    // Two validators see A first, two see B first: neither reaches a quorum of 3.
    for v in 0..2 {
        let _ = net.deliver(v, 0, &request_a);
    }
    for v in 2..4 {
        let _ = net.deliver(v, 0, &request_b);
    }
    let outcome = net.pay(&mut evil, &request_b);
    assert!(outcome.certificates.is_none());
    assert_eq!(outcome.conflicts, 2);
    let stuck = evil.stuck_inputs();
    assert_eq!(stuck.len(), 1);
    assert_eq!(stuck[0].0, coin.id);
    let walras_payments::StuckReason::HeldByOther { holder, validators } = &stuck[0].1;
    assert_eq!(holder.payment.id(), request_a.signed.payment.id());
    assert_eq!(validators.len(), 2);
    assert_eq!(evil.balance(AssetId(0)), 0, "a stuck coin is not spendable");
}

#[test]
fn a_client_that_crashed_recovers_the_holding_payment_from_a_validator_and_finishes_it() {
    let mut net = Net::new(&faults(4, Fault::Honest, 0), 2, Scheme::Naive);
    let mut wallets = clients(&mut net, 2, 100);
    let payee = wallets[1].public_key();
    let (_, effects) = wallets[0].pay(payee, AssetId(0), 40).expect("funds");
    let request = request_of(&effects);
    let shard = net.committee.shard_of(&wallets[0].public_key());
    // Sent to one validator, then the client crashes and loses everything it had not persisted.
    let _ = net.deliver(0, shard, &request);
    let coin = request.signed.payment.inputs[0];
    let holder = net.validators[0].shards[shard as usize]
        .holder_of(&coin.id)
        .expect("validator 0 holds the input")
        .clone();
    let mut restarted = walras_payments::Client::new(common::keypair(3, 0), net.committee.clone());
    restarted.add_root(coin.id, coin.output).expect("own coin");
    let effects = restarted.adopt(holder).expect("the holder is ours");
    let again = request_of(&effects);
    assert_eq!(again, request, "the identical request is resent");
    let outcome = net.pay(&mut restarted, &again);
    assert!(outcome.certificates.is_some(), "{outcome:?}");
    assert_eq!(
        restarted.balance(AssetId(0)),
        60,
        "change came back; no funds lost"
    );
}

#[test]
fn merkle_validators_sign_many_payments_under_one_root_and_clients_certify_each() {
    let mut net = Net::new(
        &faults(4, Fault::Honest, 0),
        1,
        Scheme::Merkle {
            batch_leaves_max: 64,
        },
    );
    let mut wallets = clients(&mut net, 10, 100);
    let requests: Vec<_> = (0..10)
        .map(|payer| {
            let payee = wallets[(payer + 1) % 10].public_key();
            let (_, effects) = wallets[payer].pay(payee, AssetId(0), 7).expect("funds");
            request_of(&effects)
        })
        .collect();
    // Every validator pools all ten payments, then seals once: one tree, one signature.
    let mut replies = Vec::new();
    for validator in &mut net.validators {
        let shard = &mut validator.shards[0];
        for request in &requests {
            let outcome = shard.handle(request).expect("valid");
            assert!(matches!(
                &outcome.replies[..],
                [walras_payments::Reply::Pending { .. }]
            ));
        }
        let sealed = shard.seal_batch();
        assert_eq!(sealed.replies.len(), 10);
        replies.extend(sealed.replies);
    }
    let mut roots = std::collections::BTreeSet::new();
    for reply in &replies {
        let walras_payments::Reply::Votes(votes) = reply else {
            panic!("votes expected")
        };
        for signature in &votes.signatures {
            let walras_payments::VoteSignature::Merkle { batch, .. } = signature else {
                panic!("a Merkle vote expected")
            };
            roots.insert((votes.validator, *batch.signature.as_bytes()));
        }
        let payer = requests
            .iter()
            .position(|request| request.signed.payment.id() == votes.payment)
            .expect("a reply for one of ours");
        let effects = wallets[payer].on_votes(votes);
        assert!(
            !effects
                .iter()
                .any(|effect| matches!(effect, ClientEffect::VoteRefused { .. })),
            "valid votes: {effects:?}"
        );
    }
    assert_eq!(
        roots.len(),
        4,
        "one signature per validator for all 20 outputs"
    );
    for wallet in &wallets {
        assert!(
            wallet.pending_payments().is_empty(),
            "every payment certified"
        );
        assert_eq!(wallet.balance(AssetId(0)), 93, "change came back");
    }
}

#[test]
fn a_client_that_crashed_after_persisting_resends_identical_bytes_and_certifies() {
    let mut net = Net::new(&faults(4, Fault::Honest, 0), 2, Scheme::Naive);
    let mut wallets = clients(&mut net, 2, 100);
    let payee = wallets[1].public_key();
    let (_, effects) = wallets[0].pay(payee, AssetId(1), 25).expect("funds");
    let walras_payments::ClientEffect::Persist(persisted) = &effects[0] else {
        panic!("persist comes first")
    };
    let request = request_of(&effects);
    assert_eq!(persisted, &request);
    let shard = net.committee.shard_of(&wallets[0].public_key());
    // Two validators got it before the crash.
    let _ = net.deliver(0, shard, &request);
    let _ = net.deliver(1, shard, &request);
    let mut restarted = walras_payments::Client::new(common::keypair(3, 0), net.committee.clone());
    for coin in wallets[0].coins() {
        restarted.add_root(coin.id, coin.output).expect("own coin");
    }
    let resent = restarted.recover(vec![persisted.clone()]);
    assert_eq!(resent.len(), 1);
    let again = request_of(&resent);
    assert_eq!(
        again.signed.payment.encode(),
        request.signed.payment.encode()
    );
    assert_eq!(again.signed.signature, request.signed.signature);
    assert!(matches!(
        restarted.pay(payee, AssetId(1), 100),
        Err(ClientError::CoinLocked(_)) | Err(ClientError::InsufficientFunds { .. })
    ));
    let outcome = net.pay(&mut restarted, &again);
    assert!(outcome.certificates.is_some());
    assert_eq!(
        outcome.conflicts, 0,
        "validators that saw it answer the same votes"
    );
    assert_eq!(restarted.balance(AssetId(1)), 75);
}
