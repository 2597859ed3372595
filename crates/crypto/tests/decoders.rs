//! Decoders of untrusted input never panic.
//!
//! Proptest feeds arbitrary bytes and strings (plus near-miss hex of the right length) to every
//! decoder and to verification; each must return a value or an error. Values that decode must
//! re-encode to the same input.

use proptest::prelude::*;
use walras_crypto::{verify, Hash, Keypair, PublicKey, Signature};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn public_key_from_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
        if let Ok(key) = PublicKey::from_bytes(&bytes) {
            prop_assert_eq!(key.as_bytes().as_slice(), bytes.as_slice());
        }
    }

    #[test]
    fn signature_from_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..130)) {
        match Signature::from_bytes(&bytes) {
            Ok(signature) => prop_assert_eq!(signature.as_bytes().as_slice(), bytes.as_slice()),
            Err(_) => prop_assert_ne!(bytes.len(), 64),
        }
    }

    #[test]
    fn hash_from_str_never_panics(text in ".{0,80}") {
        if let Ok(digest) = text.parse::<Hash>() {
            prop_assert_eq!(digest.to_string(), text.to_lowercase());
        }
    }

    #[test]
    fn hash_from_near_hex_never_panics(text in "[0-9a-fA-Fg ]{62,66}") {
        let _ = text.parse::<Hash>();
        let _ = text.parse::<Signature>();
        let _ = text.parse::<PublicKey>();
    }

    #[test]
    fn hash_from_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..70)) {
        prop_assert_eq!(Hash::from_bytes(&bytes).is_ok(), bytes.len() == 32);
    }

    #[test]
    fn verifying_arbitrary_signatures_never_panics_and_rejects(
        bytes in proptest::collection::vec(any::<u8>(), 64),
        message in proptest::collection::vec(any::<u8>(), 0..40),
    ) {
        let key = Keypair::from_seed([1; 32]).public_key();
        let signature = Signature::from_bytes(&bytes).expect("64 bytes");
        prop_assert!(verify(&key, &message, &signature).is_err());
    }
}
