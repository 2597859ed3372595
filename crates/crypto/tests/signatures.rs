//! Signing, verification, and the acceptance rule.
//!
//! Keys come from counter seeds, so every case is deterministic. Checks: round trips; a changed
//! message, signature or key is rejected; the acceptance rule refuses exactly the bad
//! signatures, at any position; the parallel result equals the sequential one for any thread
//! count; a signature whose R carries the point of order 2 (which a batch check accepts about
//! half the time) is refused at every position of every batch size and thread count. Keys also
//! match RFC 8032's vector.

use walras_crypto::testing::sign_with_order_2_nonce;
use walras_crypto::{
    sign, verify, verify_each, verify_each_parallel, DecodeError, Hash, Keypair, PublicKey,
    Signature, VerifyError,
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
fn valid_signatures_are_all_accepted() {
    let triples = signed(300);
    assert!(verify_each(&as_items(&triples))
        .iter()
        .all(|&accepted| accepted));
    assert_eq!(verify_each(&[]), Vec::<bool>::new());
}

/// The positions the acceptance rule refuses.
fn refused(verdicts: &[bool]) -> Vec<usize> {
    (0..verdicts.len()).filter(|&i| !verdicts[i]).collect()
}

#[test]
fn the_acceptance_rule_refuses_exactly_the_bad_signatures() {
    let bad_positions = [0, 63, 64, 127, 128, 261, 299];
    let mut triples = signed(300);
    for &position in &bad_positions {
        triples[position].2 = flip_bit(&triples[position].2, position % 512);
    }
    // A valid signature presented for another message is bad too.
    triples[150].0 = b"forged".to_vec();
    let mut expected: Vec<usize> = bad_positions.to_vec();
    expected.push(150);
    expected.sort_unstable();
    assert_eq!(refused(&verify_each(&as_items(&triples))), expected);
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
            verify_each_parallel(&items, threads),
            sequential,
            "threads = {threads}"
        );
    }
    assert_eq!(verify_each_parallel(&[], 4), Vec::<bool>::new());
}

fn signature_with_torsion(key_index: u32, message: &[u8]) -> Signature {
    sign_with_order_2_nonce(&keypair(key_index), message)
}

/// `triples[..len]` with the signatures at `positions` replaced by order-2-nonce signatures;
/// checks that strict single verification refuses each.
fn with_torsion_at(
    triples: &[(Vec<u8>, PublicKey, Signature)],
    len: usize,
    positions: &[usize],
) -> Vec<(Vec<u8>, PublicKey, Signature)> {
    let mut batch = triples[..len].to_vec();
    for &position in positions {
        let (message, key, signature) = &mut batch[position];
        *signature = signature_with_torsion(position as u32 % 50, message);
        assert_eq!(
            verify(key, message, signature),
            Err(VerifyError::BadSignature)
        );
    }
    batch
}

/// Trigger: a key holder signs with a nonce point R' = r·B + T, T the point of order 2
/// (y = -1), so the equation s·B = R' + k·A holds only up to T. Strict verification alone
/// rejects it; under the old chunk-and-halve batch rule a batch holding it passed about half
/// the time, so the verdict depended on how items were grouped (admission's submission order
/// vs recovery's hash order) and a node committed a block it could not replay.
///
/// Every batch size 1..=300 on 1..=4 threads, with the crafted signatures at the last position
/// and every seventh one (offset by the size, so every position 0..300 is covered), and every
/// single position of batches of 1, 2, 3 and 129 (one past the old chunk) alone.
#[test]
fn a_signature_whose_r_carries_an_order_2_point_is_refused_at_every_position_and_thread_count() {
    let triples = signed(300);
    let mut cases: Vec<(usize, Vec<usize>, Vec<usize>)> = Vec::new();
    for len in 1..=300usize {
        let positions = (0..len)
            .filter(|&p| p % 7 == len % 7 || p == len - 1)
            .collect();
        cases.push((len, positions, (1..=4).collect()));
    }
    for len in [1usize, 2, 3, 129] {
        for position in 0..len {
            cases.push((len, vec![position], vec![1, 4]));
        }
    }
    for (len, positions, thread_counts) in cases {
        let batch = with_torsion_at(&triples, len, &positions);
        let items = as_items(&batch);
        for threads in thread_counts {
            assert_eq!(
                refused(&verify_each_parallel(&items, threads)),
                positions,
                "len {len}, threads {threads}"
            );
        }
    }
}

/// The crafted input of the test above is the dangerous kind: a batch check, which an earlier
/// acceptance rule used, accepts it in some batches, so only a rule with no batches refuses it
/// everywhere.
#[test]
fn a_batch_check_accepts_the_order_2_signature_in_some_batches() {
    let triples = signed(64);
    let accepted_by_batch = (0..16usize)
        .filter(|&variant| {
            let mut batch = triples[variant..variant + 40].to_vec();
            let (message, _, signature) = &mut batch[variant % 40];
            *signature = signature_with_torsion((variant + variant % 40) as u32 % 50, message);
            let messages: Vec<&[u8]> = batch.iter().map(|(m, _, _)| m.as_slice()).collect();
            let signatures: Vec<ed25519_dalek::Signature> = batch
                .iter()
                .map(|(_, _, s)| ed25519_dalek::Signature::from_bytes(s.as_bytes()))
                .collect();
            let keys: Vec<ed25519_dalek::VerifyingKey> = batch
                .iter()
                .map(|(_, k, _)| ed25519_dalek::VerifyingKey::from_bytes(k.as_bytes()).unwrap())
                .collect();
            ed25519_dalek::verify_batch(&messages, &signatures, &keys).is_ok()
        })
        .count();
    assert!(
        (1..16).contains(&accepted_by_batch),
        "a batch accepts it about half the time, got {accepted_by_batch} of 16"
    );
}
