//! The one quorum rule (`QuorumCollector`, issue 30 item 2), fed votes directly: honest votes
//! certify at the quorum and the certificates verify; a duplicate counts once; votes from
//! outside the committee, in another validator's name, for another payment, of the wrong count
//! or forged are refused naming the validator; too few valid votes fail once every validator
//! answered; a BLS validator whose vote was bad alone is checked alone next time. A proptest
//! feeds any order of any subset of honest, forged and repeated answers, under each scheme, and
//! checks the verdict against the rule "a certificate iff a quorum of distinct honest signers".
//! The wallet (`Client`) and the network client (`payments-net`'s `certify`) both run this
//! collector; their own tests (`byzantine.rs`, payments-net's `validator.rs` and `wallet.rs`)
//! drive it through them.

use proptest::prelude::*;
use walras_crypto::Keypair;
use walras_payments::{
    genesis_output_id, payment_vote_messages, sign_votes, verify_certificate, Absence, Certificate,
    ChainId, Committee, Epoch, Input, Output, Payment, PaymentVotes, QuorumCollector,
    QuorumFailure, RootCache, Scheme, Verdict, VoteFault, VoteSigner,
};
use walras_types::AssetId;

const SCHEMES: [Scheme; 3] = [
    Scheme::Naive,
    Scheme::Merkle {
        batch_leaves_max: 4,
    },
    Scheme::Bls,
];

struct Setup {
    committee: Committee,
    signers: Vec<VoteSigner>,
    /// Keys outside the committee, one per member, that forge votes in its name.
    forgers: Vec<VoteSigner>,
}

fn setup(n: usize) -> Setup {
    let signer = |seed: usize| VoteSigner::new(Keypair::from_seed([seed as u8 + 1; 32]));
    let signers: Vec<VoteSigner> = (0..n).map(signer).collect();
    let forgers = (0..n).map(|index| signer(100 + index)).collect();
    let committee = Committee {
        chain_id: ChainId(3),
        epoch: Epoch(1),
        validators: signers.iter().map(VoteSigner::public_key).collect(),
        shards: 1,
        bls: signers.iter().map(VoteSigner::bls_member).collect(),
    };
    Setup {
        committee,
        signers,
        forgers,
    }
}

/// A payment of two outputs (so each certificate is checked per output); `salt` makes
/// payments distinct.
fn payment(committee: &Committee, salt: u32) -> Payment {
    let owner = Keypair::from_seed([200; 32]).public_key();
    let output = |amount| Output {
        asset: AssetId(0),
        amount,
        owner,
    };
    Payment {
        chain_id: committee.chain_id,
        epoch: committee.epoch,
        inputs: vec![Input {
            id: genesis_output_id(committee.chain_id, salt),
            output: output(10),
        }],
        outputs: vec![output(4), output(6)],
    }
}

fn votes_by(
    signer: &VoteSigner,
    validator: u16,
    payment: &Payment,
    scheme: Scheme,
) -> PaymentVotes {
    let id = payment.id();
    let messages = payment_vote_messages(payment.chain_id, payment.epoch, id, &payment.outputs);
    PaymentVotes {
        validator,
        payment: id,
        signatures: sign_votes(signer, scheme, &messages),
    }
}

fn honest(setup: &Setup, validator: u16, payment: &Payment, scheme: Scheme) -> PaymentVotes {
    votes_by(
        &setup.signers[usize::from(validator)],
        validator,
        payment,
        scheme,
    )
}

fn forged(setup: &Setup, validator: u16, payment: &Payment, scheme: Scheme) -> PaymentVotes {
    votes_by(
        &setup.forgers[usize::from(validator)],
        validator,
        payment,
        scheme,
    )
}

fn assert_certificates_verify(setup: &Setup, certificates: &[Certificate]) {
    assert_eq!(certificates.len(), 2, "one per output");
    for certificate in certificates {
        assert_eq!(certificate.votes.len(), setup.committee.quorum());
        verify_certificate(certificate, &setup.committee, &mut RootCache::default())
            .expect("a certificate the collector returns verifies");
    }
}

#[test]
fn honest_votes_certify_at_the_quorum_once_and_the_certificates_verify() {
    for n in [4usize, 7] {
        let setup = setup(n);
        for scheme in SCHEMES {
            let payment = payment(&setup.committee, 0);
            let mut collector = QuorumCollector::new(&payment);
            let mut cache = RootCache::default();
            let quorum = setup.committee.quorum();
            for validator in 0..n as u16 {
                let votes = honest(&setup, validator, &payment, scheme);
                let step = collector.add_votes(&setup.committee, &mut cache, validator, &votes);
                assert!(step.refused.is_empty(), "{scheme:?}: {:?}", step.refused);
                let answered = usize::from(validator) + 1;
                match step.verdict {
                    Verdict::NeedMore => assert!(answered < quorum, "n={n} {scheme:?}"),
                    Verdict::Certified(certificates) => {
                        assert_eq!(answered, quorum, "n={n} {scheme:?}");
                        assert_certificates_verify(&setup, &certificates);
                    }
                    Verdict::Finished => assert!(answered > quorum, "n={n} {scheme:?}"),
                    Verdict::Failed(failure) => panic!("n={n} {scheme:?}: {failure:?}"),
                }
            }
            if scheme == Scheme::Bls {
                assert_eq!(
                    cache.signature_checks, 2,
                    "n={n}: one aggregate check per output, no vote checked alone"
                );
            }
        }
    }
}

#[test]
fn a_duplicate_vote_counts_once() {
    let setup = setup(4);
    for scheme in SCHEMES {
        let payment = payment(&setup.committee, 0);
        let mut collector = QuorumCollector::new(&payment);
        let mut cache = RootCache::default();
        let committee = &setup.committee;
        for validator in [0u16, 0, 1, 1, 0] {
            let votes = honest(&setup, validator, &payment, scheme);
            let step = collector.add_votes(committee, &mut cache, validator, &votes);
            assert_eq!(step.verdict, Verdict::NeedMore, "{scheme:?}");
            assert!(step.refused.is_empty());
        }
        let votes = honest(&setup, 2, &payment, scheme);
        let step = collector.add_votes(committee, &mut cache, 2, &votes);
        assert!(matches!(step.verdict, Verdict::Certified(_)), "{scheme:?}");
    }
}

#[test]
fn votes_from_outside_the_committee_or_in_another_name_are_refused_and_never_count() {
    let setup = setup(4);
    let committee = &setup.committee;
    for scheme in SCHEMES {
        let payment = payment(committee, 0);
        let other = self::payment(committee, 1);
        let mut collector = QuorumCollector::new(&payment);
        let mut cache = RootCache::default();
        // An index past the committee, signed by a key it does not list.
        let outsider = votes_by(&setup.forgers[0], 4, &payment, scheme);
        let step = collector.add_votes(committee, &mut cache, 4, &outsider);
        assert_eq!(step.refused, vec![(4, VoteFault::UnknownValidator)]);
        // Validator 1's votes arriving on validator 0's connection.
        let relayed = honest(&setup, 1, &payment, scheme);
        let step = collector.add_votes(committee, &mut cache, 0, &relayed);
        assert_eq!(
            step.refused,
            vec![(0, VoteFault::OtherValidatorsVotes { signer: 1 })]
        );
        // Votes for another payment, and a reply missing one output's vote.
        let wrong_payment = honest(&setup, 1, &other, scheme);
        let step = collector.add_votes(committee, &mut cache, 1, &wrong_payment);
        assert_eq!(step.refused, vec![(1, VoteFault::WrongPayment)]);
        let mut short = honest(&setup, 1, &payment, scheme);
        short.signatures.pop();
        let step = collector.add_votes(committee, &mut cache, 1, &short);
        assert_eq!(step.refused, vec![(1, VoteFault::WrongVoteCount)]);
        // None of those counted: three honest votes are still needed.
        for validator in 0..2u16 {
            let votes = honest(&setup, validator, &payment, scheme);
            let step = collector.add_votes(committee, &mut cache, validator, &votes);
            assert_eq!(step.verdict, Verdict::NeedMore, "{scheme:?}");
        }
        let votes = honest(&setup, 2, &payment, scheme);
        let step = collector.add_votes(committee, &mut cache, 2, &votes);
        let Verdict::Certified(certificates) = step.verdict else {
            panic!("{scheme:?}: {:?}", step.verdict)
        };
        assert_certificates_verify(&setup, &certificates);
    }
}

/// Trigger: a committee file listing one validator's address for every member. Its votes,
/// counted once from its own connection, arrive again on the other members' connections; each
/// of those is that member's fault. Before the fix they were ignored as duplicates, the members
/// stayed unheard, and the wallet's error lost "answered with validator 0's votes" whenever
/// validator 0's own reply came first (payments-net's wallet test was flaky).
#[test]
fn votes_counted_once_and_relayed_by_other_members_are_their_fault_not_a_duplicate() {
    let setup = setup(4);
    let committee = &setup.committee;
    for scheme in SCHEMES {
        let payment = payment(committee, 0);
        let mut collector = QuorumCollector::new(&payment);
        let mut cache = RootCache::default();
        let votes = honest(&setup, 0, &payment, scheme);
        let step = collector.add_votes(committee, &mut cache, 0, &votes);
        assert!(step.refused.is_empty());
        let mut refused = Vec::new();
        let mut last = Verdict::NeedMore;
        for sender in 1..4u16 {
            let step = collector.add_votes(committee, &mut cache, sender, &votes);
            refused.extend(step.refused);
            last = step.verdict;
        }
        let relayed = VoteFault::OtherValidatorsVotes { signer: 0 };
        assert_eq!(
            refused,
            vec![(1, relayed), (2, relayed), (3, relayed)],
            "{scheme:?}"
        );
        let Verdict::Failed(failure) = last else {
            panic!("{scheme:?}: every member answered: {last:?}")
        };
        assert_eq!((failure.valid, failure.unheard.len()), (1, 0), "{scheme:?}");
    }
}

/// Under bls the forged vote waits unchecked with the honest ones; the aggregate of the first
/// quorum fails, each waiting vote is checked alone, and only the forger is named.
#[test]
fn a_forged_vote_is_named_and_the_honest_quorum_still_certifies() {
    let setup = setup(4);
    let committee = &setup.committee;
    for scheme in SCHEMES {
        let payment = payment(committee, 0);
        let mut collector = QuorumCollector::new(&payment);
        let mut cache = RootCache::default();
        let mut refused = Vec::new();
        let mut verdicts = Vec::new();
        let answers = [
            forged(&setup, 0, &payment, scheme),
            honest(&setup, 1, &payment, scheme),
            honest(&setup, 2, &payment, scheme),
            honest(&setup, 3, &payment, scheme),
        ];
        for votes in &answers {
            let step = collector.add_votes(committee, &mut cache, votes.validator, votes);
            refused.extend(step.refused);
            verdicts.push(step.verdict);
        }
        assert_eq!(refused, vec![(0, VoteFault::BadSignature)], "{scheme:?}");
        assert_eq!(
            verdicts[..3],
            [Verdict::NeedMore, Verdict::NeedMore, Verdict::NeedMore]
        );
        let Verdict::Certified(certificates) = &verdicts[3] else {
            panic!("{scheme:?}: {:?}", verdicts[3])
        };
        assert_certificates_verify(&setup, certificates);
        assert!(certificates[0].votes.iter().all(|vote| vote.validator != 0));
    }
}

#[test]
fn too_few_valid_votes_fail_once_every_validator_answered_naming_each_one() {
    let setup = setup(4);
    let committee = &setup.committee;
    for scheme in SCHEMES {
        let payment = payment(committee, 0);
        let mut collector = QuorumCollector::new(&payment);
        let mut cache = RootCache::default();
        for votes in [
            honest(&setup, 0, &payment, scheme),
            forged(&setup, 1, &payment, scheme),
            honest(&setup, 2, &payment, scheme),
        ] {
            let step = collector.add_votes(committee, &mut cache, votes.validator, &votes);
            assert_eq!(
                step.verdict,
                Verdict::NeedMore,
                "{scheme:?}: validator 3 is unheard"
            );
        }
        let step = collector.add_absent(committee, &mut cache, 3, Absence::Unavailable);
        assert_eq!(
            step.verdict,
            Verdict::Failed(QuorumFailure {
                valid: 2,
                quorum: 3,
                faults: vec![(1, VoteFault::BadSignature)],
                absent: vec![(3, Absence::Unavailable)],
                unheard: Vec::new(),
            }),
            "{scheme:?}"
        );
        // A new round (the request resent): the two valid votes still count, validator 3's
        // votes now make the quorum.
        collector.new_round();
        let votes = honest(&setup, 3, &payment, scheme);
        let step = collector.add_votes(committee, &mut cache, 3, &votes);
        let Verdict::Certified(certificates) = step.verdict else {
            panic!("{scheme:?}: {:?}", step.verdict)
        };
        assert_certificates_verify(&setup, &certificates);
    }
}

#[test]
fn a_round_ended_early_fails_naming_the_validators_not_heard_from() {
    let setup = setup(4);
    let committee = &setup.committee;
    let payment = payment(committee, 0);
    let mut collector = QuorumCollector::new(&payment);
    let mut cache = RootCache::default();
    let votes = honest(&setup, 2, &payment, Scheme::Bls);
    collector.add_votes(committee, &mut cache, 2, &votes);
    let step = collector.finish(committee, &mut cache);
    let Verdict::Failed(failure) = step.verdict else {
        panic!("{:?}", step.verdict)
    };
    assert_eq!((failure.valid, failure.unheard), (1, vec![0, 1, 3]));
}

/// Trigger: a Byzantine BLS validator whose votes reach the collector first would spoil every
/// payment's first aggregate; once it was caught alone, the shared cache marks it a suspect and
/// its next vote is checked alone on arrival.
#[test]
fn a_bls_validator_caught_forging_is_checked_alone_on_its_next_vote() {
    let setup = setup(4);
    let committee = &setup.committee;
    let mut cache = RootCache::default();
    for salt in 0..2 {
        let payment = payment(committee, salt);
        let mut collector = QuorumCollector::new(&payment);
        let bad = forged(&setup, 0, &payment, Scheme::Bls);
        let step = collector.add_votes(committee, &mut cache, 0, &bad);
        if salt == 0 {
            assert!(step.refused.is_empty(), "waits for the aggregate");
        } else {
            assert_eq!(
                step.refused,
                vec![(0, VoteFault::BadSignature)],
                "checked alone"
            );
        }
        for validator in 1..4u16 {
            let votes = honest(&setup, validator, &payment, Scheme::Bls);
            collector.add_votes(committee, &mut cache, validator, &votes);
        }
        assert!(cache.is_bls_suspect(committee, 0));
    }
}

/// One validator's answer in a round.
#[derive(Clone, Copy, Debug)]
enum Answer {
    Honest,
    Forged,
    /// Answers without votes (timeout, conflict, overload).
    Absent,
    /// Never heard from: the round is ended by the caller.
    Silent,
}

fn answer() -> impl Strategy<Value = Answer> {
    prop_oneof![
        4 => Just(Answer::Honest),
        2 => Just(Answer::Forged),
        1 => Just(Answer::Absent),
        1 => Just(Answer::Silent),
    ]
}

/// An event of the round: validator `index`'s answer, delivered once or twice (a resend's
/// reply).
#[derive(Clone, Copy, Debug)]
struct Event {
    validator: u16,
    answer: Answer,
}

fn round() -> impl Strategy<Value = (usize, Scheme, Vec<Event>)> {
    (prop_oneof![Just(4usize), Just(5), Just(7)], 0usize..3).prop_flat_map(|(n, scheme)| {
        (
            proptest::collection::vec(answer(), n),
            proptest::collection::vec(any::<bool>(), n),
        )
            .prop_flat_map(move |(answers, repeated)| {
                let mut events = Vec::new();
                for (validator, (answer, repeat)) in answers.iter().zip(&repeated).enumerate() {
                    let event = Event {
                        validator: validator as u16,
                        answer: *answer,
                    };
                    if !matches!(answer, Answer::Silent) {
                        events.push(event);
                        if *repeat && matches!(answer, Answer::Honest) {
                            events.push(event);
                        }
                    }
                }
                (Just(n), Just(SCHEMES[scheme]), Just(events).prop_shuffle())
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Any order of any subset of honest, forged, absent and repeated answers, two payments
    /// in a row on one cache (so the second meets the suspects the first found): exactly one
    /// decision per payment; a certificate iff a quorum of distinct honest validators
    /// answered, every certificate verifies and holds honest votes only; a failure counts the
    /// honest validators and names exactly the forgers; no honest validator is ever blamed.
    #[test]
    fn the_collector_certifies_iff_a_quorum_of_distinct_honest_signers_answered(
        (n, scheme, events) in round()
    ) {
        let setup = setup(n);
        let committee = &setup.committee;
        let honest_count = events
            .iter()
            .filter(|event| matches!(event.answer, Answer::Honest))
            .map(|event| event.validator)
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        let forgers: Vec<u16> = {
            let mut forgers: Vec<u16> = events
                .iter()
                .filter(|event| matches!(event.answer, Answer::Forged))
                .map(|event| event.validator)
                .collect();
            forgers.sort_unstable();
            forgers
        };
        let mut cache = RootCache::default();
        for salt in 0..2 {
            let payment = payment(committee, salt);
            let mut collector = QuorumCollector::new(&payment);
            let mut decisions = Vec::new();
            let mut refused = Vec::new();
            for event in &events {
                let step = match event.answer {
                    Answer::Honest => {
                        let votes = honest(&setup, event.validator, &payment, scheme);
                        collector.add_votes(committee, &mut cache, event.validator, &votes)
                    }
                    Answer::Forged => {
                        let votes = forged(&setup, event.validator, &payment, scheme);
                        collector.add_votes(committee, &mut cache, event.validator, &votes)
                    }
                    Answer::Absent | Answer::Silent => collector.add_absent(
                        committee,
                        &mut cache,
                        event.validator,
                        Absence::Unavailable,
                    ),
                };
                refused.extend(step.refused);
                decisions.push(step.verdict);
            }
            let end = collector.finish(committee, &mut cache);
            refused.extend(end.refused);
            decisions.push(end.verdict);
            let decided: Vec<&Verdict> = decisions
                .iter()
                .filter(|verdict| matches!(verdict, Verdict::Certified(_) | Verdict::Failed(_)))
                .collect();
            prop_assert_eq!(decided.len(), 1, "exactly one decision: {:?}", decisions);
            prop_assert!(refused.iter().all(|(validator, fault)| {
                forgers.contains(validator) && *fault == VoteFault::BadSignature
            }), "only forgers are blamed: {:?}", refused);
            match decided[0] {
                Verdict::Certified(certificates) => {
                    prop_assert!(honest_count >= committee.quorum());
                    assert_certificates_verify(&setup, certificates);
                    for vote in &certificates[0].votes {
                        prop_assert!(!forgers.contains(&vote.validator));
                    }
                }
                Verdict::Failed(failure) => {
                    prop_assert!(honest_count < committee.quorum());
                    prop_assert_eq!(failure.valid, honest_count);
                    let named: Vec<u16> = failure.faults.iter().map(|(v, _)| *v).collect();
                    prop_assert_eq!(&named, &forgers);
                }
                _ => unreachable!("filtered above"),
            }
        }
    }
}
