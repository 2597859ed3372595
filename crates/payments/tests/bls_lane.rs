//! BLS as the payment lane's signing scheme (issue 14, scheme `bls`): a certificate of BLS votes
//! verifies with one aggregate check; a bad vote inside it is still named (each vote is checked
//! alone only after the aggregate fails); a committee key without a valid proof of possession,
//! or a committee that lists no BLS keys, refuses BLS votes with a typed fault; the compact form
//! (one aggregate signature and the signers) verifies against the same committee and is smaller.

mod common;

use common::{clients, request_of, Fault, Net};
use walras_payments::bls::{verify_bls_certificate, BlsCommittee};
use walras_payments::{
    verify_certificate, CertError, Certificate, RootCache, Scheme, VoteFault, VoteSignature,
};
use walras_types::AssetId;

/// One certified payment of 10 units under the BLS scheme: its certificates and the network.
fn certified(n: usize) -> (Net, Vec<Certificate>) {
    let mut net = Net::new(&vec![Fault::Honest; n], 1, Scheme::Bls);
    let mut wallets = clients(&mut net, 2, 100);
    let payee = wallets[1].public_key();
    let (_, effects) = wallets[0].pay(payee, AssetId(0), 10).expect("funds");
    let request = request_of(&effects);
    let outcome = net.pay(&mut wallets[0], &request);
    assert!(
        outcome.client_errors.is_empty(),
        "{:?}",
        outcome.client_errors
    );
    let certificates = outcome.certificates.expect("an honest committee certifies");
    for certificate in &certificates {
        assert!(certificate
            .votes
            .iter()
            .all(|vote| matches!(vote.signature, VoteSignature::Bls(_))));
    }
    (net, certificates)
}

#[test]
fn a_bls_certificate_verifies_with_one_aggregate_check_for_any_committee_size() {
    for n in [4, 7, 10] {
        let (net, certificates) = certified(n);
        for certificate in &certificates {
            assert_eq!(certificate.votes.len(), net.committee.quorum());
            let mut cache = RootCache::default();
            verify_certificate(certificate, &net.committee, &mut cache).expect("valid");
            assert_eq!(
                cache.signature_checks, 1,
                "n={n}: the quorum's votes verify as one aggregate"
            );
        }
    }
}

#[test]
fn a_bad_bls_vote_inside_a_certificate_is_named_after_the_aggregate_fails() {
    let (net, certificates) = certified(7);
    let mut certificate = certificates[0].clone();
    // Validator of the third vote signs its neighbour's output instead: a valid BLS signature
    // on the wrong message.
    let other = certificates
        .get(1)
        .cloned()
        .expect("a payment with change has two outputs");
    let victim = certificate.votes[2].validator;
    let forged = other
        .votes
        .iter()
        .find(|vote| vote.validator == victim)
        .expect("same voters")
        .signature
        .clone();
    certificate.votes[2].signature = forged;
    let mut cache = RootCache::default();
    assert_eq!(
        verify_certificate(&certificate, &net.committee, &mut cache),
        Err(CertError::BadVote {
            validator: victim,
            fault: VoteFault::BadSignature,
        })
    );
    // One failed aggregate, then the votes one by one up to the bad one.
    assert_eq!(cache.signature_checks, 1 + 3);
    // A short certificate is refused as short, never accepted through the aggregate.
    let mut short = certificates[0].clone();
    short.votes.truncate(net.committee.quorum() - 1);
    assert_eq!(
        verify_certificate(&short, &net.committee, &mut RootCache::default()),
        Err(CertError::TooFewVotes {
            votes: net.committee.quorum() - 1,
            quorum: net.committee.quorum(),
        })
    );
}

#[test]
fn a_bls_key_without_a_valid_proof_of_possession_or_no_bls_key_refuses_bls_votes() {
    let (net, certificates) = certified(4);
    let certificate = &certificates[0];
    let first = certificate.votes[0].validator;

    let mut rogue = net.committee.clone();
    // Validator `first`'s proof replaced by another validator's: a valid signature, but not of
    // this key.
    let other = (usize::from(first) + 1) % rogue.bls.len();
    rogue.bls[usize::from(first)].proof = rogue.bls[other].proof;
    assert_eq!(
        verify_certificate(certificate, &rogue, &mut RootCache::default()),
        Err(CertError::BadVote {
            validator: first,
            fault: VoteFault::BadBlsKey,
        })
    );

    let mut ed25519_only = net.committee.clone();
    ed25519_only.bls.clear();
    assert_eq!(
        verify_certificate(certificate, &ed25519_only, &mut RootCache::default()),
        Err(CertError::BadVote {
            validator: first,
            fault: VoteFault::NoBlsKey,
        })
    );
}

#[test]
fn the_compact_form_of_a_lane_certificate_verifies_against_the_same_committee_and_is_smaller() {
    let (net, certificates) = certified(10);
    let keys: Vec<_> = net
        .committee
        .bls
        .iter()
        .map(|member| (member.key, member.proof))
        .collect();
    let committee = BlsCommittee::new(net.committee.clone(), &keys).expect("proofs verify");
    for certificate in &certificates {
        let compact = certificate.compact().expect("all votes are BLS");
        verify_bls_certificate(&compact, &committee).expect("the aggregate verifies");
        assert_eq!(compact.signers.len(), net.committee.quorum());
        let full = walras_payments::certificate_bytes(certificate).len();
        assert!(
            compact.wire_bytes() * 2 < full,
            "compact {} bytes, full {full}",
            compact.wire_bytes()
        );
        let mut altered = compact.clone();
        altered.output.amount += 1;
        assert!(verify_bls_certificate(&altered, &committee).is_err());
    }
}
