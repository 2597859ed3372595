//! Merkle batch signatures.
//!
//! For batches of every size from 1 to 33 (all tree shapes with unpaired nodes at various levels)
//! and a larger one, every message's proof verifies against the single batch signature; changing
//! the message, the index, a sibling, the number of siblings, the leaf count, the signature or the
//! key makes it fail.

use walras_crypto::{
    hash, sign_merkle_batch, verify_merkle_batch_member, Keypair, MerkleBatchError, MerkleTree,
    Signature, VerifyError,
};

fn message_hashes(count: usize) -> Vec<walras_crypto::Hash> {
    (0..count)
        .map(|index| hash(format!("payment {index}").as_bytes()))
        .collect()
}

#[test]
fn every_proof_verifies_and_every_tampering_fails() {
    let keypair = Keypair::from_seed([9; 32]);
    let key = keypair.public_key();
    for count in (1..=33).chain([100]) {
        let hashes = message_hashes(count);
        let (batch, proofs) = sign_merkle_batch(&keypair, &hashes).expect("non-empty batch");
        assert_eq!(proofs.len(), count);
        for (index, proof) in proofs.iter().enumerate() {
            let message = &hashes[index];
            assert_eq!(
                verify_merkle_batch_member(&key, message, &batch, proof),
                Ok(())
            );
            let other = &hashes[(index + 1) % count];
            if count > 1 {
                assert!(verify_merkle_batch_member(&key, other, &batch, proof).is_err());
                let mut moved = proof.clone();
                moved.leaf_index = ((index + 1) % count) as u32;
                assert!(verify_merkle_batch_member(&key, message, &batch, &moved).is_err());
                let mut bent = proof.clone();
                bent.siblings[0].0[5] ^= 1;
                assert!(verify_merkle_batch_member(&key, message, &batch, &bent).is_err());
                let mut short = proof.clone();
                short.siblings.pop();
                assert!(verify_merkle_batch_member(&key, message, &batch, &short).is_err());
            }
            let mut long = proof.clone();
            long.siblings.push(*message);
            assert!(verify_merkle_batch_member(&key, message, &batch, &long).is_err());
            let mut resized = batch;
            resized.leaf_count += 1;
            assert!(verify_merkle_batch_member(&key, message, &resized, proof).is_err());
            let mut resigned = batch;
            resigned.signature = Signature::from_bytes(&[0; 64]).expect("64 bytes");
            let rejected = verify_merkle_batch_member(&key, message, &resigned, proof);
            assert_eq!(rejected, Err(VerifyError::BadSignature));
            let stranger = Keypair::from_seed([8; 32]).public_key();
            assert!(verify_merkle_batch_member(&stranger, message, &batch, proof).is_err());
        }
    }
}

#[test]
fn proof_index_past_the_end_is_refused() {
    let hashes = message_hashes(5);
    let keypair = Keypair::from_seed([9; 32]);
    let (batch, proofs) = sign_merkle_batch(&keypair, &hashes).expect("non-empty batch");
    let mut past = proofs[4].clone();
    past.leaf_index = 5;
    let result = verify_merkle_batch_member(&keypair.public_key(), &hashes[4], &batch, &past);
    assert_eq!(result, Err(VerifyError::BadInclusionProof));
    assert!(MerkleTree::new(&hashes)
        .expect("non-empty")
        .proof(5)
        .is_none());
}

#[test]
fn empty_batch_cannot_be_signed() {
    let keypair = Keypair::from_seed([9; 32]);
    assert_eq!(
        sign_merkle_batch(&keypair, &[]).map(|_| ()),
        Err(MerkleBatchError::Empty)
    );
}

#[test]
fn one_message_batch_root_is_its_leaf_hash_and_roots_depend_on_order() {
    let hashes = message_hashes(2);
    let forward = MerkleTree::new(&hashes).expect("non-empty").root();
    let reversed: Vec<_> = hashes.iter().rev().copied().collect();
    assert_ne!(
        forward,
        MerkleTree::new(&reversed).expect("non-empty").root()
    );
    let single = MerkleTree::new(&hashes[..1]).expect("non-empty");
    assert_eq!(single.proof(0).expect("leaf 0").siblings, vec![]);
}
