//! The reference the acceptance rule is held to and compared with: ed25519-zebra's own batch
//! verification (keys taken as bytes). Shared by `tests/signatures.rs` and both benches
//! through `#[path]`.

use walras_crypto::{PublicKey, Signature};

/// ed25519-zebra's batch verdict on `items`: its own equation, each key decompressed from its
/// bytes, coefficients from the thread's CSPRNG.
pub(crate) fn zebra_batch_accepts(items: &[(Vec<u8>, PublicKey, Signature)]) -> bool {
    let mut verifier = ed25519_zebra::batch::Verifier::new();
    for (message, key, signature) in items {
        verifier.queue((
            ed25519_zebra::VerificationKeyBytes::from(*key.as_bytes()),
            ed25519_zebra::Signature::from_bytes(signature.as_bytes()),
            message,
        ));
    }
    verifier.verify(rand::rng()).is_ok()
}
