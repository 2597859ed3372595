//! Unit-level checks of the core: the Merkle root recomputation accepts exactly what
//! `walras-crypto` accepts (property test), the hashing domains are distinct, payment shape and
//! validator refusals are typed and change nothing, the spent-set step is all-or-nothing, the
//! root cache stays bounded, the exchange's withdrawal check refuses short, wrong-epoch,
//! wrong-chain and duplicate-vote certificates, and a shard rebuilt from its durable effects
//! refuses a conflicting payment and re-answers the original byte for byte.

mod common;

use common::{clients, keypair, request_of, Fault, Net, CHAIN, EPOCH};
use proptest::prelude::*;
use walras_crypto::{hash, sign_merkle_batch, verify_merkle_batch_member, Hash};
use walras_payments::{
    merkle_root_from_proof, verify_withdrawal, CertError, ChainId, Epoch, Input, Output, Payment,
    Reply, RequestError, RootCache, Scheme, SignedPayment, ValidatorShard, VoteFault,
    PAYMENT_INPUTS_MAX,
};
use walras_types::AssetId;

/// A committee whose only validator is `key` (no BLS keys).
fn committee_of(key: &walras_crypto::Keypair) -> walras_payments::Committee {
    walras_payments::Committee {
        chain_id: CHAIN,
        epoch: EPOCH,
        validators: vec![key.public_key()],
        shards: 1,
        bls: Vec::new(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn the_merkle_root_recomputation_accepts_exactly_what_the_crypto_crate_accepts(
        leaves in 1usize..70,
        pick in 0usize..70,
        flip in prop::option::of((0usize..8, 0usize..32)),
    ) {
        let key = keypair(9, 0);
        let messages: Vec<Hash> = (0..leaves).map(|i| hash(&i.to_be_bytes())).collect();
        let (batch, proofs) = sign_merkle_batch(&key, &messages).expect("non-empty batch");
        let index = pick % leaves;
        let mut proof = proofs[index].clone();
        if let Some((level, byte)) = flip {
            if let Some(sibling) = proof.siblings.get_mut(level) {
                sibling.0[byte] ^= 0x80;
            }
        }
        let crypto = verify_merkle_batch_member(&key.public_key(), &messages[index], &batch, &proof).is_ok();
        let ours = walras_payments::verify_vote(
            &committee_of(&key),
            0,
            &messages[index],
            &walras_payments::VoteSignature::Merkle { batch, proof: proof.clone() },
            &mut RootCache::default(),
        ).is_ok();
        prop_assert_eq!(crypto, ours);
        // A proof of the right length always yields some root; only the signature decides.
        prop_assert!(merkle_root_from_proof(&messages[index], batch.leaf_count, &proof).is_some());
        prop_assert_eq!(ours, flip.is_none() || proofs[index] == proof);
    }
}

#[test]
fn payment_domains_differ_from_each_other_and_from_the_crypto_crates() {
    let all: Vec<_> = walras_payments::domain::ALL
        .iter()
        .chain(walras_crypto::domain::ALL.iter())
        .collect();
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            assert_ne!(a, b);
        }
    }
}

fn genesis_payment(
    net: &mut Net,
    owner: u32,
    amounts: &[u128],
) -> (Payment, walras_crypto::Keypair) {
    let key = keypair(3, owner);
    let inputs: Vec<Input> = amounts
        .iter()
        .enumerate()
        .map(|(i, amount)| {
            let (id, output) = net.genesis(
                1000 + owner * 100 + i as u32,
                key.public_key(),
                AssetId(0),
                *amount,
            );
            Input { id, output }
        })
        .collect();
    let total: u128 = amounts.iter().sum();
    let payment = Payment {
        chain_id: CHAIN,
        epoch: EPOCH,
        inputs,
        outputs: vec![Output {
            asset: AssetId(0),
            amount: total,
            owner: keypair(3, 99).public_key(),
        }],
    };
    (payment, key)
}

fn request(payment: Payment, key: &walras_crypto::Keypair) -> walras_payments::PaymentRequest {
    walras_payments::PaymentRequest {
        signed: SignedPayment::sign(payment, key),
        certificates: Vec::new(),
    }
}

fn shard_for(net: &Net, key: &walras_crypto::Keypair) -> ValidatorShard {
    let shard = net.committee.shard_of(&key.public_key());
    net.validators[0].shards[shard as usize].clone()
}

#[test]
fn malformed_or_foreign_payments_are_refused_with_a_typed_error_and_nothing_recorded() {
    let mut net = Net::new(&[Fault::Honest; 4], 2, Scheme::Naive);
    let (payment, key) = genesis_payment(&mut net, 1, &[5; PAYMENT_INPUTS_MAX + 1]);
    let mut shard = shard_for(&net, &key);
    let cases: Vec<(Payment, RequestError)> = vec![
        (
            payment.clone(),
            RequestError::TooManyInputs {
                inputs: PAYMENT_INPUTS_MAX + 1,
            },
        ),
        (
            Payment {
                inputs: payment.inputs[..2].to_vec(),
                ..payment.clone()
            },
            RequestError::NotConserved { asset: AssetId(0) },
        ),
        (
            Payment {
                inputs: vec![payment.inputs[0], payment.inputs[0]],
                outputs: vec![Output {
                    amount: 10,
                    ..payment.outputs[0]
                }],
                ..payment.clone()
            },
            RequestError::DuplicateInput,
        ),
        (
            Payment {
                chain_id: ChainId(8),
                inputs: payment.inputs[..1].to_vec(),
                outputs: vec![Output {
                    amount: 5,
                    ..payment.outputs[0]
                }],
                ..payment.clone()
            },
            RequestError::WrongChain {
                expected: CHAIN,
                found: ChainId(8),
            },
        ),
        (
            Payment {
                epoch: Epoch(2),
                inputs: payment.inputs[..1].to_vec(),
                outputs: vec![Output {
                    amount: 5,
                    ..payment.outputs[0]
                }],
                ..payment.clone()
            },
            RequestError::WrongEpoch {
                expected: EPOCH,
                found: Epoch(2),
            },
        ),
        (
            Payment {
                inputs: payment.inputs[..1].to_vec(),
                outputs: vec![
                    Output {
                        amount: u128::MAX,
                        ..payment.outputs[0]
                    },
                    Output {
                        amount: 1,
                        ..payment.outputs[0]
                    },
                ],
                ..payment.clone()
            },
            RequestError::AmountOverflow { asset: AssetId(0) },
        ),
    ];
    for (bad, expected) in cases {
        assert_eq!(shard.handle(&request(bad, &key)), Err(expected));
        assert_eq!(shard.spent_count(), 0);
    }
    // Signed by someone else.
    let good = Payment {
        inputs: payment.inputs[..1].to_vec(),
        outputs: vec![Output {
            amount: 5,
            ..payment.outputs[0]
        }],
        ..payment.clone()
    };
    assert_eq!(
        shard.handle(&request(good.clone(), &keypair(3, 2))),
        Err(RequestError::BadClientSignature)
    );
    // Sent to the other shard.
    let other = 1 - shard.shard();
    let mut wrong = net.validators[0].shards[other as usize].clone();
    assert_eq!(
        wrong.handle(&request(good.clone(), &key)),
        Err(RequestError::WrongShard {
            expected: shard.shard(),
            shard: other
        })
    );
    // More certificates than inputs (a request padded to waste the validator's memory).
    let mut padded = request(good.clone(), &key);
    padded.certificates = vec![
        walras_payments::Certificate {
            chain_id: CHAIN,
            epoch: EPOCH,
            id: good.inputs[0].id,
            output: good.inputs[0].output,
            votes: Vec::new(),
        };
        2
    ];
    assert_eq!(
        shard.handle(&padded),
        Err(RequestError::TooManyCertificates { certificates: 2 })
    );
    // An input that is neither a root nor certified.
    let mut unknown = good.clone();
    unknown.inputs[0].id = walras_payments::genesis_output_id(CHAIN, 999_999);
    assert_eq!(
        shard.handle(&request(unknown.clone(), &key)),
        Err(RequestError::UnknownInput {
            input: unknown.inputs[0].id
        })
    );
    assert_eq!(shard.spent_count(), 0);
    assert!(shard.handle(&request(good, &key)).is_ok());
    assert_eq!(shard.spent_count(), 1);
}

#[test]
fn a_payment_with_one_held_input_is_refused_whole_and_its_free_inputs_stay_free() {
    let mut net = Net::new(&[Fault::Honest; 4], 1, Scheme::Naive);
    let (payment, key) = genesis_payment(&mut net, 1, &[5, 7]);
    let mut shard = shard_for(&net, &key);
    let first = Payment {
        inputs: payment.inputs[..1].to_vec(),
        outputs: vec![Output {
            amount: 5,
            ..payment.outputs[0]
        }],
        ..payment.clone()
    };
    let first_request = request(first.clone(), &key);
    assert!(shard.handle(&first_request).is_ok());
    let outcome = shard
        .handle(&request(payment.clone(), &key))
        .expect("valid request");
    assert!(outcome.effects.is_empty());
    match &outcome.replies[..] {
        [Reply::Conflict(conflict)] => {
            assert_eq!(conflict.input, payment.inputs[0].id);
            assert_eq!(conflict.holder, first_request.signed);
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert!(
        shard.holder_of(&payment.inputs[1].id).is_none(),
        "the free input stays free"
    );
}

#[test]
fn a_shard_rebuilt_from_its_durable_effects_refuses_a_conflict_and_re_answers_the_original() {
    for scheme in [
        Scheme::Naive,
        Scheme::Merkle {
            batch_leaves_max: 8,
        },
        Scheme::Bls,
    ] {
        let mut net = Net::new(&[Fault::Honest; 4], 1, scheme);
        let (payment, key) = genesis_payment(&mut net, 1, &[5]);
        let mut shard = ValidatorShard::new(net.committee.clone(), 0, 0, keypair(1, 0), scheme);
        let mut log = Vec::new();
        log.extend(
            shard
                .admit_root(payment.inputs[0].id, payment.inputs[0].output)
                .effects,
        );
        let original = request(payment.clone(), &key);
        let outcome = shard.handle(&original).expect("valid");
        log.extend(outcome.effects);
        let sealed = shard.seal_batch();
        log.extend(sealed.effects);
        let answer = shard.handle(&original).expect("valid");
        // Killed; restarted from the log alone.
        let mut restarted = ValidatorShard::new(net.committee.clone(), 0, 0, keypair(1, 0), scheme);
        for effect in &log {
            restarted.apply(effect);
        }
        assert_eq!(restarted.handle(&original).expect("valid"), answer);
        let mut conflicting = payment.clone();
        conflicting.outputs[0].owner = keypair(3, 77).public_key();
        let outcome = restarted
            .handle(&request(conflicting, &key))
            .expect("valid");
        assert!(
            matches!(&outcome.replies[..], [Reply::Conflict(c)] if c.holder == original.signed)
        );
        assert_eq!(restarted.seal_batch(), walras_payments::Outcome::default());
    }
}

#[test]
fn the_root_cache_never_exceeds_its_bound_and_hits_skip_signature_checks() {
    let key = keypair(9, 1);
    let mut cache = RootCache::new(2);
    for batch_number in 0..5u32 {
        let messages: Vec<Hash> = (0..4u32)
            .map(|i| hash(&(batch_number * 10 + i).to_be_bytes()))
            .collect();
        let (batch, proofs) = sign_merkle_batch(&key, &messages).expect("batch");
        for (message, proof) in messages.iter().zip(proofs) {
            let vote = walras_payments::VoteSignature::Merkle { batch, proof };
            walras_payments::verify_vote(&committee_of(&key), 0, message, &vote, &mut cache)
                .expect("valid");
            assert!(cache.len() <= 2);
        }
    }
    assert_eq!(cache.signature_checks, 5);
    assert_eq!(cache.hits, 15);
}

#[test]
fn the_exchange_withdrawal_check_accepts_a_quorum_and_refuses_short_foreign_and_duplicate_certificates(
) {
    let mut net = Net::new(
        &[Fault::Honest; 4],
        1,
        Scheme::Merkle {
            batch_leaves_max: 16,
        },
    );
    let mut wallets = clients(&mut net, 2, 100);
    let payee = wallets[1].public_key();
    let (_, effects) = wallets[0].pay(payee, AssetId(1), 30).expect("funds");
    let outcome = net.pay(&mut wallets[0], &request_of(&effects));
    let certificate = outcome.certificates.expect("certified")[0].clone();
    let committee = net.committee.clone();
    let withdrawal = verify_withdrawal(&certificate, &committee, CHAIN, EPOCH).expect("valid");
    assert_eq!(withdrawal.output.amount, 30);
    assert_eq!(withdrawal.id, certificate.id);

    let mut short = certificate.clone();
    short.votes.pop();
    assert_eq!(
        verify_withdrawal(&short, &committee, CHAIN, EPOCH),
        Err(CertError::TooFewVotes {
            votes: 2,
            quorum: 3
        })
    );
    let mut doubled = short.clone();
    doubled.votes.push(doubled.votes[0].clone());
    assert!(matches!(
        verify_withdrawal(&doubled, &committee, CHAIN, EPOCH),
        Err(CertError::BadVote {
            fault: VoteFault::Duplicate,
            ..
        })
    ));
    assert!(matches!(
        verify_withdrawal(&certificate, &committee, CHAIN, Epoch(2)),
        Err(CertError::WrongEpoch { .. })
    ));
    assert!(matches!(
        verify_withdrawal(&certificate, &committee, ChainId(8), EPOCH),
        Err(CertError::WrongChain { .. })
    ));
    let mut inflated = certificate.clone();
    inflated.output.amount += 1;
    assert!(matches!(
        verify_withdrawal(&inflated, &committee, CHAIN, EPOCH),
        Err(CertError::BadVote {
            validator: 0,
            fault: VoteFault::BadSignature
        })
    ));
    // A deposit output id never collides with a payment output id.
    let tx = hash(b"deposit tx");
    assert_ne!(
        walras_payments::deposit_output_id(&tx, 0),
        walras_payments::output_id(&walras_payments::PaymentId(tx), 0)
    );
}

/// Two payments signed over one input by one owner.
fn two_spends_of_one_input() -> (walras_payments::Committee, [SignedPayment; 2]) {
    let validator = keypair(9, 0);
    let committee = committee_of(&validator);
    let owner = keypair(9, 1);
    let input = Input {
        id: walras_payments::genesis_output_id(CHAIN, 0),
        output: Output {
            asset: AssetId(0),
            amount: 10,
            owner: owner.public_key(),
        },
    };
    let spend = |payee: u32| {
        let payment = Payment {
            chain_id: CHAIN,
            epoch: EPOCH,
            inputs: vec![input],
            outputs: vec![Output {
                asset: AssetId(0),
                amount: 10,
                owner: keypair(9, payee).public_key(),
            }],
        };
        SignedPayment::sign(payment, &owner)
    };
    (committee, [spend(2), spend(3)])
}

/// Trigger (issue 30 item 7): an effect recording a second payment over an input already
/// spent (a corrupted or forged effect log; `handle` never produces one) must stop the shard
/// at the point of mutation, before it could vote for the double spend. Replaying the same
/// payment's effect is fine.
#[test]
#[should_panic(expected = "would vote for a double spend")]
fn recording_a_second_payment_over_a_spent_input_panics_before_any_vote() {
    let (committee, [first, second]) = two_spends_of_one_input();
    let mut shard = ValidatorShard::new(committee, 0, 0, keypair(9, 0), Scheme::Naive);
    let record = |signed: &SignedPayment| walras_payments::Effect::RecordPayment {
        signed: signed.clone(),
        signatures: None,
    };
    shard.apply(&record(&first));
    shard.apply(&record(&first));
    assert_eq!(shard.spent_count(), 1);
    shard.apply(&record(&second));
}

/// The requests of one shard's group: good payments, a signature by another key, accepted
/// signatures no strict rule accepts (a torsioned nonce), a non-canonical `s`, a wrong chain
/// (refused before any signature check), a duplicate, a resend of a payment the shard already
/// holds, and that payment again under another accepted signature. Returns the shard (holding
/// the resent payment) and the requests.
fn mixed_group() -> (ValidatorShard, Vec<walras_payments::PaymentRequest>) {
    use walras_crypto::testing::{sign_with_torsion_nonce, with_s_plus_group_order};
    let mut net = Net::new(
        &[Fault::Honest; 4],
        1,
        Scheme::Merkle {
            batch_leaves_max: 4,
        },
    );
    let mut requests = Vec::new();
    for owner in 1..=6 {
        let (payment, key) = genesis_payment(&mut net, owner, &[5]);
        requests.push(request(payment, &key));
    }
    let (payment, _) = genesis_payment(&mut net, 7, &[5]);
    requests.push(request(payment, &keypair(3, 200)));
    let (payment, key) = genesis_payment(&mut net, 8, &[5]);
    let signature = sign_with_torsion_nonce(&key, payment.signing_hash().as_bytes(), 1);
    requests.push(walras_payments::PaymentRequest {
        signed: SignedPayment { payment, signature },
        certificates: Vec::new(),
    });
    let (payment, key) = genesis_payment(&mut net, 9, &[5]);
    let mut signed = SignedPayment::sign(payment, &key);
    signed.signature = with_s_plus_group_order(&signed.signature);
    requests.push(walras_payments::PaymentRequest {
        signed,
        certificates: Vec::new(),
    });
    let (mut payment, key) = genesis_payment(&mut net, 11, &[5]);
    payment.chain_id = ChainId(CHAIN.0 + 1);
    requests.push(request(payment, &key));
    requests.push(requests[0].clone());
    let (payment, key) = genesis_payment(&mut net, 10, &[5]);
    let mut shard = shard_for(&net, &key);
    let held = request(payment.clone(), &key);
    shard.handle(&held).expect("a valid payment");
    requests.push(held);
    let signature = sign_with_torsion_nonce(&key, payment.signing_hash().as_bytes(), 3);
    requests.push(walras_payments::PaymentRequest {
        signed: SignedPayment { payment, signature },
        certificates: Vec::new(),
    });
    (shard, requests)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// The shard worker checks a group's client signatures as one batch before handling the
    /// group: every request must get the outcome `handle` gives it alone, in any order and for
    /// any subset, and the cheap refusals and resends of held payments must buy no check.
    #[test]
    fn a_group_s_client_signatures_checked_together_give_every_request_the_outcome_it_gets_alone(
        order in Just((0..13usize).collect::<Vec<_>>()).prop_shuffle(),
        keep in prop::collection::vec(any::<bool>(), 13),
    ) {
        let (shard, requests) = mixed_group();
        let group: Vec<&walras_payments::PaymentRequest> = order
            .iter()
            .filter(|index| keep[**index])
            .map(|index| &requests[*index])
            .collect();
        let mut alone = shard.clone();
        let expected: Vec<_> = group.iter().map(|request| alone.handle(request)).collect();
        let mut together = shard.clone();
        let checked = together.check_client_signatures(&group);
        let outcomes: Vec<_> = group
            .iter()
            .map(|request| together.handle_checked(request, &checked))
            .collect();
        prop_assert_eq!(&outcomes, &expected);
        prop_assert_eq!(format!("{together:?}"), format!("{alone:?}"));
        // Checked: each distinct signature of a request that passes the cheap checks and is
        // not a resend of what the shard holds (indexes 0..=8 and 12; 11 is the held resend,
        // 10 a duplicate of 0, 9 the wrong chain).
        let wanted: std::collections::BTreeSet<usize> = group
            .iter()
            .map(|request| requests.iter().position(|r| r == *request).expect("one of them"))
            .filter(|index| *index <= 8 || *index == 12)
            .collect();
        prop_assert_eq!(checked.len(), wanted.len());
        for index in wanted {
            let signed = &requests[index].signed;
            let verdict = checked.verdict(&signed.payment.id(), &signed.signature);
            // 6: another key's signature; 8: s + ℓ. The torsioned nonces (7, 12) are accepted.
            prop_assert_eq!(verdict, Some(!matches!(index, 6 | 8)));
        }
    }
}
