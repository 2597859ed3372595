//! BLS12-381 aggregate certificates: a quorum's aggregate verifies; a rogue key
//! without a proof of possession is refused; a garbage vote is named before aggregation; short,
//! duplicate-signer, wrong-committee and altered-output certificates are refused.

use walras_crypto::Keypair;
use walras_payments::bls::{
    aggregate_certificate, verify_bls_certificate, BlsCommittee, BlsError, BlsKeypair,
};
use walras_payments::{genesis_output_id, vote_message, ChainId, Committee, Epoch, Output};
use walras_types::AssetId;

fn setup(n: usize) -> (Vec<BlsKeypair>, BlsCommittee) {
    let keys: Vec<BlsKeypair> = (0..n)
        .map(|i| BlsKeypair::from_seed(&[i as u8 + 1; 32]).expect("32-byte seed"))
        .collect();
    let committee = Committee {
        chain_id: ChainId(7),
        epoch: Epoch(1),
        validators: (0..n)
            .map(|i| Keypair::from_seed([i as u8; 32]).public_key())
            .collect(),
        shards: 1,
        bls: Vec::new(),
    };
    let published: Vec<_> = keys
        .iter()
        .map(|key| (key.public_key(), key.proof_of_possession()))
        .collect();
    (
        keys,
        BlsCommittee::new(committee, &published).expect("valid proofs"),
    )
}

#[test]
fn a_quorum_aggregate_verifies_and_every_tampering_is_refused() {
    for n in [4usize, 10] {
        let (keys, committee) = setup(n);
        let id = genesis_output_id(ChainId(7), 1);
        let output = Output {
            asset: AssetId(3),
            amount: 42,
            owner: Keypair::from_seed([99; 32]).public_key(),
        };
        let message = vote_message(ChainId(7), Epoch(1), &id, &output);
        let quorum = committee.committee.quorum();
        let votes: Vec<_> = (0..quorum)
            .rev()
            .map(|v| (v as u16, keys[v].sign_vote(&message)))
            .collect();
        for (validator, vote) in &votes {
            committee
                .verify_vote(*validator, &message, vote)
                .expect("honest vote");
        }
        let certificate =
            aggregate_certificate(ChainId(7), Epoch(1), id, output, &votes).expect("aggregate");
        assert_eq!(verify_bls_certificate(&certificate, &committee), Ok(()));
        assert_eq!(certificate.wire_bytes(), 98 + 4 + 2 * quorum + 96);

        let mut short = aggregate_certificate(ChainId(7), Epoch(1), id, output, &votes[1..])
            .expect("aggregate");
        assert_eq!(
            verify_bls_certificate(&short, &committee),
            Err(BlsError::TooFewSigners {
                signers: quorum - 1,
                quorum
            })
        );
        short.signers.push(short.signers[0]);
        assert!(matches!(
            verify_bls_certificate(&short, &committee),
            Err(BlsError::BadSigner { .. })
        ));
        let mut altered = certificate.clone();
        altered.output.amount += 1;
        assert_eq!(
            verify_bls_certificate(&altered, &committee),
            Err(BlsError::BadAggregate)
        );
        let mut relabelled = certificate.clone();
        relabelled.signers = (1..=quorum as u16).collect();
        assert_eq!(
            verify_bls_certificate(&relabelled, &committee),
            Err(BlsError::BadAggregate)
        );
        let mut other_epoch = certificate.clone();
        other_epoch.epoch = Epoch(2);
        assert_eq!(
            verify_bls_certificate(&other_epoch, &committee),
            Err(BlsError::WrongCommittee)
        );
        // A garbage vote (signed by a key that is not the validator's) is named.
        let rogue = BlsKeypair::from_seed(&[200; 32]).expect("seed");
        assert_eq!(
            committee.verify_vote(0, &message, &rogue.sign_vote(&message)),
            Err(BlsError::BadVote { validator: 0 })
        );
    }
}

#[test]
fn a_committee_key_without_a_valid_proof_of_possession_is_refused() {
    let (keys, committee) = setup(4);
    let mut published: Vec<_> = keys
        .iter()
        .map(|key| (key.public_key(), key.proof_of_possession()))
        .collect();
    // Validator 2 publishes another key's proof (a rogue key cannot produce its own).
    published[2].1 = keys[3].proof_of_possession();
    assert!(matches!(
        BlsCommittee::new(committee.committee.clone(), &published),
        Err(BlsError::BadProofOfPossession { validator: 2 })
    ));
}
