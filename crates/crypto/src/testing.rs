//! Test support (feature `test-support`): signatures on which ed25519 rules disagree — a
//! torsioned or non-canonical `R` (accepted by ZIP-215, the acceptance rule; refused by strict
//! RFC 8032 verification; accepted by a cofactorless batch about half the time) and a
//! non-canonical `s` (refused by ZIP-215) — for the tests of every path that checks signatures
//! (admission, CheckTx, proposals, execution, recovery): each must reach the same verdict.

use curve25519_dalek::constants::EIGHT_TORSION;
use curve25519_dalek::edwards::{CompressedEdwardsY, EdwardsPoint};
use curve25519_dalek::scalar::Scalar;
use sha2::{Digest, Sha512};

use crate::sign::{Keypair, Signature};

/// A signature of `message` by `keypair` whose nonce point carries the point of order 2:
/// `R' = r·B + T` with `T = (0, -1)`, `s = r + k·a`, `k = SHA-512(R' ‖ A ‖ M)`. Then
/// `s·B = R' + k·A - T`: the equation holds only up to `T`. ZIP-215's cofactored check (the
/// acceptance rule) accepts it; dalek's `verify_strict` (the rule before) refused it, and
/// dalek's cofactorless batch accepted it about half the time, depending on its neighbours.
/// Making one takes the secret scalar: it is no forgery, only an unusual signature.
pub fn sign_with_order_2_nonce(keypair: &Keypair, message: &[u8]) -> Signature {
    sign_with_torsion_nonce(keypair, message, 4)
}

/// As [`sign_with_order_2_nonce`], with `R' = r·B + EIGHT_TORSION[torsion % 8]` (index 0 is
/// the identity: an ordinary signature with another nonce; odd indices have order 8).
pub fn sign_with_torsion_nonce(keypair: &Keypair, message: &[u8], torsion: usize) -> Signature {
    let mut nonce_input = Sha512::new();
    nonce_input.update(b"walras torsion nonce");
    nonce_input.update([torsion as u8]);
    nonce_input.update(keypair.public_key().as_bytes());
    nonce_input.update(message);
    let nonce = Scalar::from_bytes_mod_order_wide(&nonce_input.finalize().into());
    let r_point = EdwardsPoint::mul_base(&nonce) + EIGHT_TORSION[torsion % 8];
    sign_with_nonce_point(keypair, message, nonce, r_point.compress().to_bytes())
}

/// A signature whose `R` is the identity written with the non-canonical `y = p + 1` (and so
/// `s = k·a`): ZIP-215 accepts it (non-canonical encodings and small-order `R` are allowed),
/// `verify_strict` refused it.
pub fn sign_with_non_canonical_identity_nonce(keypair: &Keypair, message: &[u8]) -> Signature {
    // p + 1 = 2^255 - 18, little-endian.
    let mut r_bytes = [0xffu8; 32];
    r_bytes[0] = 0xee;
    r_bytes[31] = 0x7f;
    sign_with_nonce_point(keypair, message, Scalar::ZERO, r_bytes)
}

/// `signature` with `s` replaced by `s + ℓ` (the same scalar, a non-canonical encoding): what a
/// third party could try to make a second signature. ZIP-215 refuses it (`s` must be < ℓ).
pub fn with_s_plus_group_order(signature: &Signature) -> Signature {
    // ℓ = 2^252 + 27742317777372353535851937790883648493, little-endian.
    const ORDER: [u8; 32] = [
        0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde,
        0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
    ];
    let mut bytes = *signature.as_bytes();
    let mut carry = 0u16;
    for (byte, order) in bytes[32..].iter_mut().zip(ORDER) {
        let sum = *byte as u16 + order as u16 + carry;
        *byte = sum as u8;
        carry = sum >> 8;
    }
    Signature::from_bytes(&bytes).expect("64 bytes")
}

/// `signature` with `EIGHT_TORSION[torsion % 8]` added to its `R` and `s` kept: what a third
/// party (no secret key) could try to make a second signature of the same message. ZIP-215
/// refuses it for any non-zero index: the new `R` changes `k`.
pub fn with_torsion_added_to_r(signature: &Signature, torsion: usize) -> Signature {
    let mut bytes = *signature.as_bytes();
    let mut r_bytes = [0u8; 32];
    r_bytes.copy_from_slice(&bytes[..32]);
    let r_point = CompressedEdwardsY(r_bytes)
        .decompress()
        .expect("the signature's R is a curve point");
    bytes[..32].copy_from_slice(&(r_point + EIGHT_TORSION[torsion % 8]).compress().to_bytes());
    Signature::from_bytes(&bytes).expect("64 bytes")
}

/// `s = nonce + k·a` with `k = SHA-512(r_bytes ‖ A ‖ M)`, under the announced `r_bytes`.
fn sign_with_nonce_point(
    keypair: &Keypair,
    message: &[u8],
    nonce: Scalar,
    r_bytes: [u8; 32],
) -> Signature {
    let secret_scalar = keypair.signing_key().to_scalar();
    let mut challenge_input = Sha512::new();
    challenge_input.update(r_bytes);
    challenge_input.update(keypair.public_key().as_bytes());
    challenge_input.update(message);
    let challenge = Scalar::from_bytes_mod_order_wide(&challenge_input.finalize().into());
    let s = nonce + challenge * secret_scalar;
    let mut bytes = [0u8; 64];
    bytes[..32].copy_from_slice(&r_bytes);
    bytes[32..].copy_from_slice(s.as_bytes());
    Signature::from_bytes(&bytes).expect("64 bytes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use curve25519_dalek::traits::IsIdentity;

    #[test]
    fn the_torsion_point_used_has_order_2_and_y_minus_1() {
        let order_2 = EIGHT_TORSION[4];
        assert!(!order_2.is_identity());
        assert!((order_2 + order_2).is_identity());
        // y = -1 = p - 1, encoded little-endian with the sign bit of x (0) on top.
        let mut minus_one = [0xffu8; 32];
        minus_one[0] = 0xec;
        minus_one[31] = 0x7f;
        assert_eq!(order_2.compress().to_bytes(), minus_one);
    }
}
