//! Proof decoding and verification never panic on hostile input.
//!
//! Proptest feeds `Proof::from_bytes`/`verify_bytes` arbitrary bytes, bytes with a plausible
//! header (so decoding gets deep), and valid proofs with random edits (overwrites, truncation,
//! insertion). It also hands `verify` arbitrary `Proof` values, which no decoder vetted. Every
//! call must return; a decoded proof must re-encode to exactly its input (canonical encoding).

mod common;

use proptest::prelude::*;
use walras_crypto::Hash;
use walras_trie::{verify, verify_bytes, Proof, ProofEnd, ProofStep, Trie};

fn any_hash() -> impl Strategy<Value = Hash> {
    any::<[u8; 32]>().prop_map(Hash)
}

fn decode_and_verify(bytes: &[u8], root: Hash, key: &[u8; 8]) {
    if let Ok(proof) = Proof::<8>::from_bytes(bytes) {
        assert_eq!(proof.to_bytes(), bytes, "decoding must be canonical");
        let _ = verify(root, key, &proof);
    }
    let _ = verify_bytes(root, key, bytes);
}

fn any_step() -> impl Strategy<Value = ProofStep> {
    (
        any::<u8>(),
        any::<u16>(),
        proptest::collection::vec(any_hash(), 0..4),
    )
        .prop_map(|(depth, bitmap, siblings)| ProofStep {
            depth,
            bitmap,
            siblings,
        })
}

fn any_end() -> impl Strategy<Value = ProofEnd<8>> {
    prop_oneof![
        Just(ProofEnd::Empty),
        (
            any::<[u8; 8]>(),
            proptest::collection::vec(any::<u8>(), 0..8)
        )
            .prop_map(|(key, value)| ProofEnd::Leaf { key, value }),
        (
            any::<u8>(),
            any::<[u8; 8]>(),
            any::<u16>(),
            proptest::collection::vec(any_hash(), 0..4)
        )
            .prop_map(|(depth, prefix, bitmap, children)| ProofEnd::Branch {
                depth,
                prefix,
                bitmap,
                children
            }),
    ]
}

fn sample_proof_bytes(seed: u8) -> (Hash, [u8; 8], Vec<u8>) {
    let mut trie = Trie::<8>::new();
    trie.insert_batch(
        (0u64..40)
            .map(|i| ((i * 0x0101_0101).to_be_bytes(), vec![i as u8; 3]))
            .collect(),
        1,
    );
    let root = trie.root_hash(1);
    let key = (u64::from(seed % 50) * 0x0101_0101).to_be_bytes();
    (root, key, trie.prove(&key).to_bytes())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300), key in any::<[u8; 8]>()) {
        decode_and_verify(&bytes, Hash([0; 32]), &key);
    }

    #[test]
    fn bytes_with_a_plausible_header_never_panic(
        step_count in 0u8..20,
        body in proptest::collection::vec(any::<u8>(), 0..400),
        key in any::<[u8; 8]>(),
    ) {
        let bytes = [vec![8, step_count], body].concat();
        decode_and_verify(&bytes, Hash([0; 32]), &key);
    }

    #[test]
    fn edited_valid_proofs_never_panic(
        seed in any::<u8>(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..4),
    ) {
        let (root, key, mut bytes) = sample_proof_bytes(seed);
        for (at, byte, kind) in edits {
            let position = at.index(bytes.len().max(1));
            match kind {
                0 if !bytes.is_empty() => bytes[position] = byte,
                1 => bytes.truncate(position),
                _ => bytes.insert(position.min(bytes.len()), byte),
            }
        }
        decode_and_verify(&bytes, root, &key);
    }

    #[test]
    fn arbitrary_proof_values_never_panic(
        steps in proptest::collection::vec(any_step(), 0..5),
        end in any_end(),
        key in any::<[u8; 8]>(),
    ) {
        let proof = Proof { steps, end };
        prop_assert!(verify(Hash([1; 32]), &key, &proof).is_err());
    }
}

#[test]
fn a_proof_for_another_key_length_is_refused_with_a_clear_error() {
    let (_, _, bytes) = sample_proof_bytes(3);
    let error = Proof::<4>::from_bytes(&bytes).expect_err("8-byte-key proof");
    assert!(error.to_string().contains("8-byte keys"), "{error}");
}
