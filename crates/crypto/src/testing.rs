//! Test support (feature `test-support`): signatures that the acceptance rule must refuse but
//! that a batch check would accept about half the time, for the tests of every path that
//! checks signatures (admission, CheckTx, proposals, execution, recovery).

use curve25519_dalek::constants::EIGHT_TORSION;
use curve25519_dalek::edwards::EdwardsPoint;
use curve25519_dalek::scalar::Scalar;
use sha2::{Digest, Sha512};

use crate::sign::{Keypair, Signature};

/// A signature of `message` by `keypair` whose nonce point carries the point of order 2:
/// `R' = r·B + T` with `T = (0, -1)`, `s = r + k·a`, `k = SHA-512(R' ‖ A ‖ M)`. Then
/// `s·B = R' + k·A - T`: the equation holds only up to `T`, so strict verification refuses it
/// while a batch (random coefficient z, even half the time, when `z·T` vanishes) may accept it.
/// Making one takes the secret scalar: it is no forgery, only an ill-formed signature.
pub fn sign_with_order_2_nonce(keypair: &Keypair, message: &[u8]) -> Signature {
    let secret_scalar = keypair.signing_key().to_scalar();
    let mut nonce_input = Sha512::new();
    nonce_input.update(b"walras order-2 nonce");
    nonce_input.update(keypair.public_key().as_bytes());
    nonce_input.update(message);
    let nonce = Scalar::from_bytes_mod_order_wide(&nonce_input.finalize().into());
    let order_2 = EIGHT_TORSION[4];
    let r_bytes = (EdwardsPoint::mul_base(&nonce) + order_2)
        .compress()
        .to_bytes();
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
