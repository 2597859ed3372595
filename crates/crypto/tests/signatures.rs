//! Signing, verification, and the acceptance rule (ZIP-215).
//!
//! Keys come from counter seeds, so every case is deterministic. Checks: round trips; a changed
//! message, signature or key is rejected; the acceptance rule refuses exactly the bad
//! signatures, at any position; the parallel (batched) result equals the single one for any
//! thread count and chunking, on random batches with torsioned and garbage signatures; a
//! signature whose R carries the point of order 2 (which a cofactorless batch accepts about
//! half the time) is accepted at every position of every batch size and thread count; no
//! key-less change turns a valid signature into another valid one. Keys also match RFC 8032's
//! vector.

use proptest::prelude::*;
use walras_crypto::accept::verify_chunk;
use walras_crypto::testing::{
    sign_with_non_canonical_identity_nonce, sign_with_order_2_nonce, sign_with_torsion_nonce,
    with_s_plus_group_order, with_torsion_added_to_r,
};
use walras_crypto::{
    sign, verify, verify_each, verify_each_parallel, AcceptedSignatures, DecodeError, Hash,
    Keypair, PublicKey, Signature, VerifyError,
};

#[path = "support/zebra.rs"]
mod zebra;
use zebra::zebra_batch_accepts;

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

/// `triples[..len]` with the signatures at `positions` replaced by order-2-nonce signatures
/// (each checked: the old rule, dalek's `verify_strict`, refuses it; ZIP-215 accepts it) and
/// those at `garbage` by a bit-flipped copy (refused by both).
fn with_torsion_at(
    triples: &[(Vec<u8>, PublicKey, Signature)],
    len: usize,
    positions: &[usize],
    garbage: &[usize],
) -> Vec<(Vec<u8>, PublicKey, Signature)> {
    let mut batch = triples[..len].to_vec();
    for &position in positions {
        let (message, key, signature) = &mut batch[position];
        *signature = signature_with_torsion(position as u32 % 50, message);
        assert!(
            !strictly_valid(key, message, signature),
            "the old rule refuses it"
        );
        assert_eq!(verify(key, message, signature), Ok(()));
    }
    for &position in garbage {
        let signature = &mut batch[position].2;
        *signature = flip_bit(signature, 300 + position % 200);
    }
    batch
}

/// The rule before ZIP-215: dalek's `verify_strict` of one signature.
fn strictly_valid(key: &PublicKey, message: &[u8], signature: &Signature) -> bool {
    let key = ed25519_dalek::VerifyingKey::from_bytes(key.as_bytes()).unwrap();
    let signature = ed25519_dalek::Signature::from_bytes(signature.as_bytes());
    key.verify_strict(message, &signature).is_ok()
}

/// Trigger: a key holder signs with a nonce point R' = r·B + T, T the point of order 2
/// (y = -1), so the equation s·B = R' + k·A holds only up to T. Under the chunk-and-halve
/// batch rule with dalek's cofactorless batch, a batch holding it passed about half the time,
/// so the verdict depended on how items were grouped (admission's submission order vs
/// recovery's hash order) and a node committed a block it could not replay.
///
/// Deliberate change of expectation with the move to ZIP-215: such a signature used to be
/// refused everywhere (strict rule); now it is *accepted* everywhere, since the cofactored
/// equation holds. What this test keeps asserting is the property that matters: its verdict
/// is the same at every position of every batch size on every thread count, here with
/// bit-flipped signatures beside it (refused everywhere) that make batches fail and fall back.
///
/// Every batch size 1..=300 on 1..=4 threads, with the crafted signatures at the last position
/// and every seventh one (offset by the size, so every position 0..300 is covered), a garbage
/// signature at every eleventh other one, and every single position of batches of 1, 2, 3 and
/// 257 (one past the largest batch) alone.
#[test]
fn a_signature_whose_r_carries_an_order_2_point_is_accepted_at_every_position_and_thread_count() {
    let triples = signed(300);
    /// (batch size, crafted positions, garbage positions, thread counts)
    type Case = (usize, Vec<usize>, Vec<usize>, Vec<usize>);
    let mut cases: Vec<Case> = Vec::new();
    for len in 1..=300usize {
        let positions: Vec<usize> = (0..len)
            .filter(|&p| p % 7 == len % 7 || p == len - 1)
            .collect();
        let garbage = (0..len)
            .filter(|p| p % 11 == 3 && !positions.contains(p))
            .collect();
        cases.push((len, positions, garbage, (1..=4).collect()));
    }
    for len in [1usize, 2, 3, 257] {
        for position in 0..len {
            cases.push((len, vec![position], vec![], vec![1, 4]));
        }
    }
    for (len, positions, garbage, thread_counts) in cases {
        let batch = with_torsion_at(&triples, len, &positions, &garbage);
        let items = as_items(&batch);
        for threads in thread_counts {
            assert_eq!(
                refused(&verify_each_parallel(&items, threads)),
                garbage,
                "len {len}, threads {threads}"
            );
        }
    }
}

/// Why the old rule refused batches: dalek's cofactorless batch check accepts the crafted
/// input of the test above in some batches and refuses it in others. ZIP-215's batch (the
/// rule's) accepts it in every one, as its single check does.
#[test]
fn a_cofactorless_batch_accepts_the_order_2_signature_only_in_some_batches() {
    let triples = signed(64);
    let batches: Vec<Vec<(Vec<u8>, PublicKey, Signature)>> = (0..16usize)
        .map(|variant| {
            let mut batch = triples[variant..variant + 40].to_vec();
            let (message, _, signature) = &mut batch[variant % 40];
            *signature = signature_with_torsion((variant + variant % 40) as u32 % 50, message);
            batch
        })
        .collect();
    let accepted_by_dalek_batch = batches
        .iter()
        .filter(|batch| {
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
        (1..16).contains(&accepted_by_dalek_batch),
        "a cofactorless batch accepts it about half the time, got {accepted_by_dalek_batch} of 16"
    );
    for batch in &batches {
        assert_eq!(verify_chunk(&as_items(batch)), vec![true; 40]);
    }
}

/// What ZIP-215 deliberately accepts that the strict rule refused (a key holder's choices of
/// nonce point, no forgery), and the one encoding it still refuses (`s ≥ ℓ`).
#[test]
fn zip_215_accepts_torsioned_and_non_canonical_r_and_refuses_non_canonical_s() {
    let pair = keypair(9);
    let key = pair.public_key();
    let message = b"pay 5";
    for torsion in 0..8 {
        let signature = sign_with_torsion_nonce(&pair, message, torsion);
        assert_eq!(
            verify(&key, message, &signature),
            Ok(()),
            "torsion {torsion}"
        );
        assert_eq!(strictly_valid(&key, message, &signature), torsion == 0);
    }
    let identity_r = sign_with_non_canonical_identity_nonce(&pair, message);
    assert_eq!(verify(&key, message, &identity_r), Ok(()));
    assert!(!strictly_valid(&key, message, &identity_r));
    let honest = sign(&pair, message);
    assert_eq!(
        verify(&key, message, &with_s_plus_group_order(&honest)),
        Err(VerifyError::BadSignature)
    );
    assert_eq!(
        verify(&key, b"pay 6", &identity_r),
        Err(VerifyError::BadSignature)
    );
}

/// Trigger: a third party holding a valid signed transaction tries to make a second valid
/// signature of the same body (another id, the same (source, sequence)) to race the original
/// out of the mempool, or into a block beside it where both would be dropped for a reused
/// sequence. Every change that needs no secret key is refused: a torsion point added to `R`
/// (changes `k`), `R` negated or re-encoded, `s + ℓ`, `s` with its top bits set.
#[test]
fn a_third_party_cannot_turn_a_valid_signature_into_a_second_valid_one() {
    use curve25519_dalek::edwards::CompressedEdwardsY;
    for index in 0..20u32 {
        let pair = keypair(index);
        let key = pair.public_key();
        let message = format!("pay {index}").into_bytes();
        let original = sign(&pair, &message);
        let r_point = CompressedEdwardsY(original.as_bytes()[..32].try_into().unwrap())
            .decompress()
            .unwrap();
        let mut attempts: Vec<Signature> = Vec::new();
        let with_r = |r_bytes: [u8; 32]| {
            let mut bytes = *original.as_bytes();
            bytes[..32].copy_from_slice(&r_bytes);
            Signature::from_bytes(&bytes).unwrap()
        };
        for torsion in 1..8 {
            attempts.push(with_torsion_added_to_r(&original, torsion));
        }
        attempts.push(with_r((-r_point).compress().to_bytes()));
        let mut sign_flipped = *original.as_bytes();
        sign_flipped[31] ^= 0x80;
        attempts.push(Signature::from_bytes(&sign_flipped).unwrap());
        attempts.push(with_s_plus_group_order(&original));
        attempts.push(with_s_plus_group_order(&with_s_plus_group_order(&original)));
        let mut top_bits = *original.as_bytes();
        top_bits[63] |= 0xe0;
        attempts.push(Signature::from_bytes(&top_bits).unwrap());
        for (attempt_index, attempt) in attempts.iter().enumerate() {
            assert_ne!(attempt, &original);
            assert_eq!(
                verify(&key, &message, attempt),
                Err(VerifyError::BadSignature),
                "key {index}, attempt {attempt_index}"
            );
        }
    }
}

/// One kind of signature in the property test below.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Honest,
    /// Nonce point plus `EIGHT_TORSION[index]` (accepted).
    Torsion(usize),
    /// `R` the identity, non-canonically encoded (accepted).
    NonCanonicalIdentity,
    /// `s + ℓ` (refused).
    NonCanonicalS,
    /// One bit flipped (refused, or in rare cases an undecodable `R`).
    Garbage(usize),
    /// Valid for another message (refused).
    OtherMessage,
    /// A torsioned signature of another message (refused).
    TorsionOtherMessage(usize),
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        4 => Just(Kind::Honest),
        2 => (0usize..8).prop_map(Kind::Torsion),
        1 => Just(Kind::NonCanonicalIdentity),
        1 => Just(Kind::NonCanonicalS),
        1 => (0usize..512).prop_map(Kind::Garbage),
        1 => Just(Kind::OtherMessage),
        1 => (1usize..8).prop_map(Kind::TorsionOtherMessage),
    ]
}

/// A (message, key, signature) of `kind`, and whether ZIP-215 should accept it (`None`: a
/// flipped bit, whose verdict is whatever the single check says).
fn make(index: usize, kind: Kind) -> ((Vec<u8>, PublicKey, Signature), Option<bool>) {
    let pair = keypair(index as u32 % 40);
    let message = format!("order {index}").into_bytes();
    let (signature, expected) = match kind {
        Kind::Honest => (sign(&pair, &message), Some(true)),
        Kind::Torsion(torsion) => (
            sign_with_torsion_nonce(&pair, &message, torsion),
            Some(true),
        ),
        Kind::NonCanonicalIdentity => (
            sign_with_non_canonical_identity_nonce(&pair, &message),
            Some(true),
        ),
        Kind::NonCanonicalS => (with_s_plus_group_order(&sign(&pair, &message)), Some(false)),
        Kind::Garbage(bit) => (flip_bit(&sign(&pair, &message), bit), None),
        Kind::OtherMessage => (sign(&pair, b"something else"), Some(false)),
        Kind::TorsionOtherMessage(torsion) => (
            sign_with_torsion_nonce(&pair, b"something else", torsion),
            Some(false),
        ),
    };
    ((message, pair.public_key(), signature), expected)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Batch verdicts equal single verdicts, for random batches mixing honest, torsioned,
    /// non-canonical and garbage signatures: through `verify_each_parallel` on 0..=5 threads,
    /// through `verify_chunk` on any chunking, and through `AcceptedSignatures` (twice, the
    /// second time from what it recorded). Single verdicts match each kind's expectation.
    #[test]
    fn batch_verdicts_equal_single_verdicts_for_any_chunking_and_thread_count(
        kinds in prop::collection::vec(kind(), 0..=300),
        threads in 0usize..=5,
        cuts in prop::collection::vec(1usize..=300, 0..8),
    ) {
        let made: Vec<_> = kinds.iter().enumerate().map(|(i, k)| make(i, *k)).collect();
        let triples: Vec<_> = made.iter().map(|(triple, _)| triple.clone()).collect();
        let items = as_items(&triples);
        let single = verify_each(&items);
        for ((_, expected), verdict) in made.iter().zip(&single) {
            if let Some(expected) = expected {
                prop_assert_eq!(verdict, expected);
            }
        }
        prop_assert_eq!(&verify_each_parallel(&items, threads), &single);
        let mut cuts: Vec<usize> = cuts.into_iter().filter(|&c| c < items.len()).collect();
        cuts.push(0);
        cuts.push(items.len());
        cuts.sort_unstable();
        cuts.dedup();
        let chunked: Vec<bool> = cuts
            .windows(2)
            .flat_map(|cut| verify_chunk(&items[cut[0]..cut[1]]))
            .collect();
        prop_assert_eq!(&chunked, &single);
        let remembered = AcceptedSignatures::new(64);
        prop_assert_eq!(&remembered.verify_each_parallel(&items, threads), &single);
        prop_assert_eq!(&remembered.verify_each_parallel(&items, threads), &single);
    }
}

/// The record of accepted verdicts: a hit needs the same key, signature and message; refused
/// verdicts are never recorded; it holds at most two generations.
#[test]
fn accepted_signatures_remember_only_accepted_verdicts_of_the_exact_bytes() {
    let mut triples = signed(10);
    triples[3].2 = flip_bit(&triples[3].2, 5);
    let remembered = AcceptedSignatures::new(4);
    let items = as_items(&triples);
    let verdicts = remembered.verify_each_parallel(&items, 1);
    assert_eq!(refused(&verdicts), vec![3]);
    assert!(remembered.len() <= 8 && remembered.len() >= 4);
    // Another message under a recorded signature is checked, and refused.
    let (_, key, signature) = &triples[9];
    assert_eq!(
        remembered.verify_each_parallel(&[(b"other".as_slice(), key, signature)], 1),
        vec![false]
    );
    // Another key, same signature and message: refused.
    let (message, _, signature) = &triples[9];
    let other_key = keypair(44).public_key();
    assert_eq!(
        remembered.verify_each_parallel(&[(message.as_slice(), &other_key, signature)], 1),
        vec![false]
    );
    let fresh = AcceptedSignatures::new(100);
    assert!(fresh.is_empty());
    fresh.verify_each_parallel(&items, 2);
    assert_eq!((fresh.len(), fresh.found()), (9, 0));
    assert_eq!(refused(&fresh.verify_each_parallel(&items, 2)), vec![3]);
    assert_eq!(
        fresh.found(),
        9,
        "the refused one is checked again, the others are not"
    );
}

/// `ed25519-zebra`'s verdict on one signature: the reference implementation of ZIP-215 that the
/// acceptance rule's equations were written after (`sign.rs`, `accept.rs`).
fn zebra_accepts(key: &PublicKey, message: &[u8], signature: &Signature) -> bool {
    let Ok(key) = ed25519_zebra::VerificationKey::try_from(*key.as_bytes()) else {
        return false;
    };
    key.verify(
        &ed25519_zebra::Signature::from_bytes(signature.as_bytes()),
        message,
    )
    .is_ok()
}

/// What a signature in the agreement test is made into.
#[derive(Clone, Copy, Debug)]
enum Shape {
    Valid,
    OrderTwoNonce,
    TorsionNonce(usize),
    NonCanonicalIdentityNonce,
    TorsionAddedToR(usize),
    SPlusGroupOrder,
    FlippedBit(usize),
    Garbage(u8),
}

fn shape_strategy() -> impl Strategy<Value = Shape> {
    prop_oneof![
        4 => Just(Shape::Valid),
        1 => Just(Shape::OrderTwoNonce),
        1 => (1usize..8).prop_map(Shape::TorsionNonce),
        1 => Just(Shape::NonCanonicalIdentityNonce),
        1 => (1usize..8).prop_map(Shape::TorsionAddedToR),
        1 => Just(Shape::SPlusGroupOrder),
        1 => (0usize..512).prop_map(Shape::FlippedBit),
        1 => any::<u8>().prop_map(Shape::Garbage),
    ]
}

fn shaped(index: usize, shape: Shape) -> (Vec<u8>, PublicKey, Signature) {
    let pair = keypair(index as u32 % 13);
    let message = format!("agreement {index}").into_bytes();
    let valid = sign(&pair, &message);
    let signature = match shape {
        Shape::Valid => valid,
        Shape::OrderTwoNonce => sign_with_order_2_nonce(&pair, &message),
        Shape::TorsionNonce(torsion) => sign_with_torsion_nonce(&pair, &message, torsion),
        Shape::NonCanonicalIdentityNonce => sign_with_non_canonical_identity_nonce(&pair, &message),
        Shape::TorsionAddedToR(torsion) => with_torsion_added_to_r(&valid, torsion),
        Shape::SPlusGroupOrder => with_s_plus_group_order(&valid),
        Shape::FlippedBit(bit) => flip_bit(&valid, bit),
        Shape::Garbage(byte) => Signature::from_bytes(&[byte; 64]).expect("64 bytes"),
    };
    (message, pair.public_key(), signature)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The acceptance rule, written over decoded keys, gives ed25519-zebra's verdict on every
    /// signature (valid, torsioned nonces, torsion added to R, R re-encoded, s + ℓ, flipped
    /// bits, garbage), alone and through batches of any size; and a batch passes exactly when
    /// zebra's own batch passes.
    #[test]
    fn the_acceptance_rule_agrees_with_ed25519_zebra_alone_and_in_batches(
        shapes in proptest::collection::vec(shape_strategy(), 1..80),
        chunk_len in 1usize..40,
    ) {
        let triples: Vec<_> = shapes.iter().enumerate().map(|(i, s)| shaped(i, *s)).collect();
        let reference: Vec<bool> = triples
            .iter()
            .map(|(message, key, signature)| zebra_accepts(key, message, signature))
            .collect();
        let items = as_items(&triples);
        prop_assert_eq!(&verify_each(&items), &reference);
        for (chunk, expected) in items.chunks(chunk_len).zip(reference.chunks(chunk_len)) {
            prop_assert_eq!(&verify_chunk(chunk), expected);
        }
        prop_assert_eq!(&verify_each_parallel(&items, 3), &reference);
        for (chunk, expected) in triples.chunks(chunk_len).zip(reference.chunks(chunk_len)) {
            prop_assert_eq!(zebra_batch_accepts(chunk), expected.iter().all(|&ok| ok));
        }
    }
}
