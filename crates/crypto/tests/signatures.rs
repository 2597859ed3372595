//! Signing and verification, single and batched.
//!
//! Keys come from counter seeds, so every case is deterministic. Checks: round trips; a changed
//! message, signature or key is rejected; a batch with bad signatures names exactly those, at any
//! position and across chunk boundaries; the parallel result equals the sequential one for any
//! thread count, also when the input holds signatures with a small-order component, which a batch may accept (the case
//! that makes the acceptance rule chunk by a fixed size). Keys also match RFC 8032's vector.

use curve25519_dalek::constants::EIGHT_TORSION;
use curve25519_dalek::edwards::EdwardsPoint;
use curve25519_dalek::scalar::Scalar;
use ed25519_dalek::SigningKey;
use sha2::{Digest, Sha512};
use walras_crypto::{
    bad_signature_indices, sign, verify, verify_batch, verify_batches_parallel, verify_each,
    DecodeError, Hash, Keypair, PublicKey, Signature, VerifyError, BATCH_CHUNK_ITEMS,
};

fn keypair(index: u32) -> Keypair {
    let mut seed = [7u8; 32];
    seed[..4].copy_from_slice(&index.to_le_bytes());
    Keypair::from_seed(seed)
}

/// `count` (message, key, signature) triples, all valid.
fn signed(count: usize) -> Vec<(Vec<u8>, PublicKey, Signature)> {
    (0..count)
        .map(|index| {
            let pair = keypair(index as u32 % 50);
            let message = format!("transfer {index} units").into_bytes();
            let signature = sign(&pair, &message);
            (message, pair.public_key(), signature)
        })
        .collect()
}

fn as_items(triples: &[(Vec<u8>, PublicKey, Signature)]) -> Vec<(&[u8], &PublicKey, &Signature)> {
    triples
        .iter()
        .map(|(message, key, signature)| (message.as_slice(), key, signature))
        .collect()
}

fn flip_bit(signature: &Signature, bit: usize) -> Signature {
    let mut bytes = *signature.as_bytes();
    bytes[bit / 8] ^= 1 << (bit % 8);
    Signature::from_bytes(&bytes).expect("64 bytes")
}

#[test]
fn signature_verifies_for_its_message_and_key() {
    let pair = keypair(1);
    let signature = sign(&pair, b"hello");
    assert_eq!(verify(&pair.public_key(), b"hello", &signature), Ok(()));
}

#[test]
fn keys_and_signatures_match_rfc_8032_test_1() {
    let seed = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
    let public = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
    let signature = "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a\
                     33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b";
    let seed: Hash = seed.parse().expect("64 hex digits");
    let pair = Keypair::from_seed(seed.0);
    assert_eq!(pair.public_key().to_string(), public);
    assert_eq!(sign(&pair, b"").to_string(), signature);
    assert_eq!(
        verify(
            &pair.public_key(),
            b"",
            &signature.parse().expect("128 hex digits")
        ),
        Ok(())
    );
}

#[test]
fn changed_message_signature_or_key_is_rejected() {
    let pair = keypair(1);
    let signature = sign(&pair, b"hello");
    let rejected = Err(VerifyError::BadSignature);
    assert_eq!(verify(&pair.public_key(), b"hellp", &signature), rejected);
    assert_eq!(
        verify(&keypair(2).public_key(), b"hello", &signature),
        rejected
    );
    for bit in [0, 9, 255, 256, 300, 511] {
        assert_eq!(
            verify(&pair.public_key(), b"hello", &flip_bit(&signature, bit)),
            rejected
        );
    }
}

#[test]
fn public_key_decoding_refuses_small_order_points_and_non_points() {
    let mut identity = [0u8; 32];
    identity[0] = 1;
    assert_eq!(
        PublicKey::from_bytes(&identity),
        Err(DecodeError::WeakPublicKey)
    );
    let not_a_point = (2u8..=255)
        .map(|y| {
            let mut bytes = [0u8; 32];
            bytes[0] = y;
            bytes
        })
        .find(|bytes| PublicKey::from_bytes(bytes) == Err(DecodeError::NotACurvePoint));
    assert!(not_a_point.is_some(), "some small y has no x on the curve");
    let key = keypair(3).public_key();
    assert_eq!(PublicKey::from_bytes(key.as_bytes()), Ok(key));
    assert_eq!(key.to_string().parse::<PublicKey>(), Ok(key));
}

#[test]
fn batch_of_valid_signatures_passes() {
    let triples = signed(300);
    assert_eq!(verify_batch(&as_items(&triples)), Ok(()));
    assert_eq!(verify_batch(&[]), Ok(()));
    assert!(verify_each(&as_items(&triples))
        .iter()
        .all(|&accepted| accepted));
}

#[test]
fn batch_with_bad_signatures_names_exactly_them() {
    let bad_positions = [
        0,
        BATCH_CHUNK_ITEMS - 1,
        BATCH_CHUNK_ITEMS,
        2 * BATCH_CHUNK_ITEMS + 5,
        299,
    ];
    let mut triples = signed(300);
    for &position in &bad_positions {
        triples[position].2 = flip_bit(&triples[position].2, position % 512);
    }
    // A valid signature presented for another message is bad too.
    triples[150].0 = b"forged".to_vec();
    let items = as_items(&triples);
    assert_eq!(
        verify_batch(&items),
        Err(VerifyError::BadSignatureInBatch { items: 300 })
    );
    let mut expected: Vec<usize> = bad_positions.to_vec();
    expected.push(150);
    expected.sort_unstable();
    assert_eq!(bad_signature_indices(&items), expected);
}

#[test]
fn parallel_verification_equals_sequential_for_any_thread_count() {
    let mut triples = signed(700);
    for position in [3, 333, 699] {
        triples[position].2 = flip_bit(&triples[position].2, 17);
    }
    let items = as_items(&triples);
    let sequential = verify_each(&items);
    for threads in [0, 1, 2, 3, 4, 16] {
        assert_eq!(
            verify_batches_parallel(&items, threads),
            sequential,
            "threads = {threads}"
        );
    }
    assert_eq!(verify_batches_parallel(&[], 4), Vec::<bool>::new());
}

/// A signature by `keypair(key_index)` whose R carries the point of order 2: the verification
/// equation holds only up to that point, so strict single verification rejects it while a batch
/// accepts it with probability 1/2. Only the key holder can make one (it needs the secret scalar).
fn signature_with_torsion(key_index: u32, message: &[u8]) -> Signature {
    let mut seed = [7u8; 32];
    seed[..4].copy_from_slice(&key_index.to_le_bytes());
    let signing = SigningKey::from_bytes(&seed);
    let secret_scalar = signing.to_scalar();
    let nonce = Scalar::from_bytes_mod_order_wide(&Sha512::digest(message).into());
    let r_point = EdwardsPoint::mul_base(&nonce) + EIGHT_TORSION[4];
    let r_bytes = r_point.compress().to_bytes();
    let mut challenge_input = Sha512::new();
    challenge_input.update(r_bytes);
    challenge_input.update(signing.verifying_key().as_bytes());
    challenge_input.update(message);
    let challenge = Scalar::from_bytes_mod_order_wide(&challenge_input.finalize().into());
    let s = nonce + challenge * secret_scalar;
    let mut bytes = [0u8; 64];
    bytes[..32].copy_from_slice(&r_bytes);
    bytes[32..].copy_from_slice(s.as_bytes());
    Signature::from_bytes(&bytes).expect("64 bytes")
}

#[test]
fn torsion_signatures_get_the_same_verdict_for_every_thread_count() {
    let mut triples = signed(40 * BATCH_CHUNK_ITEMS);
    let torsion_positions: Vec<usize> = (0..40)
        .map(|chunk| chunk * BATCH_CHUNK_ITEMS + chunk % 7)
        .collect();
    for &position in &torsion_positions {
        let (message, key, signature) = &mut triples[position];
        *signature = signature_with_torsion(position as u32 % 50, message);
        assert_eq!(
            verify(key, message, signature),
            Err(VerifyError::BadSignature)
        );
    }
    let items = as_items(&triples);
    let sequential = verify_each(&items);
    for threads in [2, 3, 4] {
        assert_eq!(
            verify_batches_parallel(&items, threads),
            sequential,
            "threads = {threads}"
        );
    }
    let honest_rejected = (0..items.len())
        .filter(|index| !torsion_positions.contains(index) && !sequential[*index])
        .count();
    assert_eq!(honest_rejected, 0, "every valid signature is accepted");
    // Batches accept such a signature with chance 1/2, and a failed run is halved and tried
    // again, so most are accepted (only the key holder can make one: no forgery). What consensus
    // needs is that the verdict is a function of the item list: the same on every run.
    assert_eq!(
        verify_each(&items),
        sequential,
        "the verdict is reproducible"
    );
}
