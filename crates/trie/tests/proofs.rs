//! Membership and non-membership proofs.
//!
//! Proptest builds random tries (some keys marked deleted, not cleaned) and, for present keys,
//! deleted keys, near misses (a present key with its last nibble changed) and random keys,
//! checks that `prove` then `verify` says exactly what the model says; that the proof is the
//! same before and after `clean`; that it survives its binary encoding; and that it fails
//! against another root, with another value, with a changed sibling, or with any single byte of
//! its encoding flipped.

mod common;

use common::{batch, fresh_trie, Key, Model};
use proptest::prelude::*;
use walras_crypto::hash;
use walras_trie::{empty_root_hash, verify, verify_bytes, Proof, ProofEnd, ProofError, Trie};

/// Every key the tests ask about: present, deleted, near misses, and arbitrary.
fn probe_keys(model: &Model, deleted: &[Key], extra: &[Key]) -> Vec<Key> {
    let near_misses = model.keys().map(|key| {
        let mut near = *key;
        near[7] ^= 0x01;
        near
    });
    model
        .keys()
        .copied()
        .chain(deleted.iter().copied())
        .chain(near_misses)
        .chain(extra.iter().copied())
        .collect()
}

fn check_proof(trie: &Trie<8>, root: walras_crypto::Hash, key: &Key, model: &Model) {
    let proof = trie.prove(key);
    let expected = model.get(key).cloned();
    assert_eq!(
        verify(root, key, &proof),
        Ok(expected.clone()),
        "key {key:02x?}"
    );
    let bytes = proof.to_bytes();
    assert_eq!(Proof::<8>::from_bytes(&bytes).as_ref(), Ok(&proof));
    assert_eq!(verify_bytes(root, key, &bytes), Ok(expected.clone()));
    assert!(verify(hash(b"another root"), key, &proof).is_err());
    if let Some(value) = &expected {
        let mut lying = proof.clone();
        lying.end = ProofEnd::Leaf {
            key: *key,
            value: [value.as_slice(), b"!"].concat(),
        };
        assert!(matches!(
            verify(root, key, &lying),
            Err(ProofError::RootMismatch { .. })
        ));
    }
    for step in 0..proof.steps.len() {
        let mut bent = proof.clone();
        bent.steps[step].siblings[0].0[0] ^= 0x80;
        assert!(
            verify(root, key, &bent).is_err(),
            "tampered sibling at step {step}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn proofs_say_what_the_model_says_and_resist_tampering(
        entries in batch(300),
        delete_every in 2usize..6,
        extra in proptest::collection::vec(common::key(), 0..8),
        threads in 1usize..4,
    ) {
        let mut trie = Trie::<8>::new();
        trie.insert_batch(entries.clone(), threads);
        let mut model: Model = Model::new();
        common::apply_batch(&mut model, &entries);
        let deleted: Vec<Key> = model.keys().step_by(delete_every).copied().collect();
        for key in &deleted {
            prop_assert!(trie.mark_deleted(key));
            model.remove(key);
        }
        let root = trie.root_hash(threads);
        prop_assert_eq!(root, fresh_trie(&model).root_hash(1));
        let keys = probe_keys(&model, &deleted, &extra);
        let before_clean: Vec<Proof<8>> = keys.iter().map(|key| trie.prove(key)).collect();
        for key in &keys {
            check_proof(&trie, root, key, &model);
        }
        trie.clean();
        let after_clean: Vec<Proof<8>> = keys.iter().map(|key| trie.prove(key)).collect();
        prop_assert_eq!(before_clean, after_clean);
    }

    #[test]
    fn flipping_any_byte_of_a_proof_makes_it_fail(
        entries in batch(60),
        probe in common::key(),
        bit in 0u8..8,
    ) {
        let mut trie = Trie::<8>::new();
        trie.insert_batch(entries, 1);
        let root = trie.root_hash(1);
        let key = trie.iter().next().map(|(k, _)| *k).unwrap_or(probe);
        for key in [key, probe] {
            let bytes = trie.prove(&key).to_bytes();
            for position in 0..bytes.len() {
                let mut flipped = bytes.clone();
                flipped[position] ^= 1 << bit;
                prop_assert!(verify_bytes(root, &key, &flipped).is_err(), "byte {}", position);
            }
        }
    }
}

#[test]
fn proofs_work_on_a_trie_changed_since_its_last_root_hash() {
    let mut trie = Trie::<8>::new();
    trie.insert_batch(
        (0u64..100)
            .map(|i| (i.to_be_bytes(), vec![i as u8]))
            .collect(),
        1,
    );
    trie.root_hash(1);
    trie.insert_batch(
        (100u64..150)
            .map(|i| (i.to_be_bytes(), vec![i as u8]))
            .collect(),
        1,
    );
    assert!(trie.mark_deleted(&5u64.to_be_bytes()));
    let proof = trie.prove(&120u64.to_be_bytes());
    let root = trie.root_hash(1);
    assert_eq!(
        verify(root, &120u64.to_be_bytes(), &proof),
        Ok(Some(vec![120]))
    );
    assert_eq!(
        verify(root, &5u64.to_be_bytes(), &trie.prove(&5u64.to_be_bytes())),
        Ok(None)
    );
}

#[test]
fn empty_trie_proves_absence_of_everything() {
    let trie = Trie::<8>::new();
    let proof = trie.prove(&[7; 8]);
    assert_eq!(proof.end, ProofEnd::Empty);
    assert_eq!(verify(empty_root_hash(), &[7; 8], &proof), Ok(None));
    assert!(verify(hash(b"x"), &[7; 8], &proof).is_err());
}

#[test]
fn a_membership_proof_cannot_be_passed_off_as_absence_of_another_key() {
    let mut trie = Trie::<8>::new();
    trie.insert_batch(
        vec![([0x10; 8], b"a".to_vec()), ([0x20; 8], b"b".to_vec())],
        1,
    );
    let root = trie.root_hash(1);
    let proof = trie.prove(&[0x10; 8]);
    // Same first nibble as the proven leaf, so the path is the same; the leaf is not the key.
    let mut other = [0x10; 8];
    other[7] = 0x11;
    assert_eq!(
        verify(root, &other, &proof),
        Ok(None),
        "a neighbour's leaf in the key's slot is absence"
    );
    // A key in another subtree cannot use this proof at all.
    assert!(verify(root, &[0x20; 8], &proof).is_err());
}

#[test]
fn single_leaf_and_one_byte_key_tries_prove_correctly() {
    let mut single = Trie::<8>::new();
    single.insert([9; 8], b"only".to_vec());
    let root = single.root_hash(1);
    assert_eq!(
        verify(root, &[9; 8], &single.prove(&[9; 8])),
        Ok(Some(b"only".to_vec()))
    );
    assert_eq!(verify(root, &[8; 8], &single.prove(&[8; 8])), Ok(None));

    // Every one-byte key but a few: full branches two levels deep.
    let mut dense = Trie::<1>::new();
    dense.insert_batch(
        (0u8..=255)
            .filter(|b| b % 37 != 0)
            .map(|b| ([b], vec![b]))
            .collect(),
        2,
    );
    let root = dense.root_hash(2);
    for byte in 0u8..=255 {
        let expected = (byte % 37 != 0).then(|| vec![byte]);
        assert_eq!(verify(root, &[byte], &dense.prove(&[byte])), Ok(expected));
    }
}
