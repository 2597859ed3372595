//! ed25519 keys, signing (over `ed25519-dalek`) and single verification under ZIP-215 (its
//! equation written here over `curve25519-dalek`, see below).
//!
//! Verification is ZIP-215's (see [`crate::accept`] for why): `A` and `R` must decode to curve
//! points, non-canonical encodings accepted; `s` must be canonical (`s < ℓ`); the cofactored
//! equation `[8][s]B = [8]R + [8][k]A`, `k = SHA-512(R_bytes ‖ A_bytes ‖ M)`, must hold.
//! Small-order keys are refused when a [`PublicKey`] is decoded (ZIP-215 itself would accept
//! them), so an account can never be created with a key whose signatures anyone could forge.
//!
//! Why the equation is written here rather than called from `ed25519-zebra` (Zcash's crate, whose
//! rule this is): zebra's batch verifier takes each item's key as bytes and decompresses it again
//! for every batch (a field square root, about a tenth of a loaded node's CPU), although a node
//! keeps every account's key decoded. So [`PublicKey`] keeps `−A` as a curve point and both the
//! single check ([`verify`]) and the batch check (`accept::batch_accepts`) use it. The equations,
//! the decompression (`curve25519-dalek`'s, which zebra also calls), the canonical-`s` check and
//! the challenge hash are zebra's, line for line; `tests/signatures.rs` holds the two to the same
//! verdict on valid, torsioned, re-encoded, malleated and garbage signatures, alone and in
//! batches.

use curve25519_dalek::edwards::{CompressedEdwardsY, EdwardsPoint};
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::IsIdentity;
use ed25519_dalek::{Signer, SigningKey};
use sha2::{Digest, Sha512};
use std::fmt;
use std::str::FromStr;

use crate::error::{DecodeError, VerifyError};
use crate::hex;

/// Bytes in an encoded [`PublicKey`].
pub const PUBLIC_KEY_BYTES: usize = 32;
/// Bytes in an encoded [`Signature`].
pub const SIGNATURE_BYTES: usize = 64;
/// Bytes in a [`SecretKey`] seed.
pub const SECRET_SEED_BYTES: usize = 32;

/// An ed25519 secret key: the RFC 8032 32-byte seed. Its `Debug` hides the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretKey([u8; SECRET_SEED_BYTES]);

impl SecretKey {
    /// The secret key with this seed. Deterministic: tests and simulations derive seeds from a
    /// counter; production seeds must come from a cryptographic RNG.
    pub fn from_seed(seed: [u8; SECRET_SEED_BYTES]) -> SecretKey {
        SecretKey(seed)
    }

    /// The seed bytes (handle with care).
    pub fn seed(&self) -> &[u8; SECRET_SEED_BYTES] {
        &self.0
    }
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey(..)")
    }
}

/// A secret key expanded for signing, with its public key. Expanding costs a SHA-512 and a
/// scalar multiplication, so signers keep a `Keypair` rather than a [`SecretKey`].
#[derive(Clone)]
pub struct Keypair {
    signing: SigningKey,
    public: PublicKey,
}

impl Keypair {
    /// Expands `secret` for signing.
    pub fn from_secret(secret: &SecretKey) -> Keypair {
        let signing = SigningKey::from_bytes(secret.seed());
        let bytes = signing.verifying_key().to_bytes();
        // A seed's key is `a·B` with a clamped, non-zero `a`: a point of order ℓ, never weak.
        let public = PublicKey::from_bytes(&bytes).expect("a key derived from a seed decodes");
        Keypair { signing, public }
    }

    /// Same as `Keypair::from_secret(&SecretKey::from_seed(seed))`.
    pub fn from_seed(seed: [u8; SECRET_SEED_BYTES]) -> Keypair {
        Keypair::from_secret(&SecretKey::from_seed(seed))
    }

    /// The public key that verifies this keypair's signatures.
    pub fn public_key(&self) -> PublicKey {
        self.public
    }

    /// The dalek signing key, for the crate's test support.
    #[cfg(feature = "test-support")]
    pub(crate) fn signing_key(&self) -> &SigningKey {
        &self.signing
    }

    /// Signs `message` (deterministic, RFC 8032).
    pub fn sign(&self, message: &[u8]) -> Signature {
        Signature(self.signing.sign(message).to_bytes())
    }
}

impl fmt::Debug for Keypair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Keypair {{ public: {}, .. }}", self.public)
    }
}

/// An ed25519 public key: a compressed curve point that is known to decode and not to have
/// small order (both checked by every constructor). It keeps the decompressed point beside its
/// encoding: decompressing costs a field square root, and a key verifies many signatures.
/// Compared, ordered and hashed by its encoding (two encodings of one point, which only a
/// non-canonical `y` allows, are two keys: `k` hashes the encoding).
#[derive(Clone, Copy)]
pub struct PublicKey {
    bytes: [u8; PUBLIC_KEY_BYTES],
    /// `−A`: the equations add `[k](−A)` (as zebra's `minus_A`).
    minus_a: EdwardsPoint,
}

impl PartialEq for PublicKey {
    fn eq(&self, other: &PublicKey) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for PublicKey {}

impl PartialOrd for PublicKey {
    fn partial_cmp(&self, other: &PublicKey) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for PublicKey {
    fn cmp(&self, other: &PublicKey) -> std::cmp::Ordering {
        self.bytes.cmp(&other.bytes)
    }
}

impl std::hash::Hash for PublicKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.bytes.hash(state);
    }
}

impl PublicKey {
    /// Decodes a public key, refusing wrong lengths, non-points and small-order points.
    pub fn from_bytes(bytes: &[u8]) -> Result<PublicKey, DecodeError> {
        let array =
            <[u8; PUBLIC_KEY_BYTES]>::try_from(bytes).map_err(|_| DecodeError::WrongLength {
                what: "public key",
                expected: PUBLIC_KEY_BYTES,
                actual: bytes.len(),
            })?;
        let point = CompressedEdwardsY(array)
            .decompress()
            .ok_or(DecodeError::NotACurvePoint)?;
        if point.is_small_order() {
            return Err(DecodeError::WeakPublicKey);
        }
        Ok(PublicKey {
            bytes: array,
            minus_a: -point,
        })
    }

    /// The 32-byte encoding.
    pub fn as_bytes(&self) -> &[u8; PUBLIC_KEY_BYTES] {
        &self.bytes
    }

    /// `−A`, decompressed and checked at construction.
    pub(crate) fn minus_point(&self) -> &EdwardsPoint {
        &self.minus_a
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        hex::write(f, &self.bytes)
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({self})")
    }
}

impl FromStr for PublicKey {
    type Err = DecodeError;

    fn from_str(text: &str) -> Result<PublicKey, DecodeError> {
        let bytes: [u8; PUBLIC_KEY_BYTES] = hex::decode_array("public key", text)?;
        PublicKey::from_bytes(&bytes)
    }
}

/// An ed25519 signature `R ‖ s`. Decoding checks only the length; whether `R` and `s` are well
/// formed is part of verification.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Signature([u8; SIGNATURE_BYTES]);

impl Signature {
    /// Reads a signature from exactly [`SIGNATURE_BYTES`] bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Signature, DecodeError> {
        let array =
            <[u8; SIGNATURE_BYTES]>::try_from(bytes).map_err(|_| DecodeError::WrongLength {
                what: "signature",
                expected: SIGNATURE_BYTES,
                actual: bytes.len(),
            })?;
        Ok(Signature(array))
    }

    /// The 64-byte encoding.
    pub fn as_bytes(&self) -> &[u8; SIGNATURE_BYTES] {
        &self.0
    }

    /// `R`'s encoding.
    pub(crate) fn r_bytes(&self) -> &[u8; 32] {
        self.0[..32]
            .try_into()
            .expect("a signature is R (32 bytes) then s (32 bytes)")
    }

    /// `R` as a curve point (non-canonical encodings accepted, as ZIP-215 says), or `None`.
    pub(crate) fn r_point(&self) -> Option<EdwardsPoint> {
        CompressedEdwardsY(*self.r_bytes()).decompress()
    }

    /// `s` when canonical (`s < ℓ`), or `None`.
    pub(crate) fn s_scalar(&self) -> Option<Scalar> {
        let s: [u8; 32] = self.0[32..]
            .try_into()
            .expect("a signature is R (32 bytes) then s (32 bytes)");
        Option::from(Scalar::from_canonical_bytes(s))
    }
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        hex::write(f, &self.0)
    }
}

impl fmt::Debug for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Signature({self})")
    }
}

impl FromStr for Signature {
    type Err = DecodeError;

    fn from_str(text: &str) -> Result<Signature, DecodeError> {
        hex::decode_array("signature", text).map(Signature)
    }
}

/// Signs `message` with `keypair`.
pub fn sign(keypair: &Keypair, message: &[u8]) -> Signature {
    keypair.sign(message)
}

/// The challenge `k = SHA-512(R_bytes ‖ A_bytes ‖ M) mod ℓ`.
pub(crate) fn challenge(signature: &Signature, public_key: &PublicKey, message: &[u8]) -> Scalar {
    let digest = Sha512::new()
        .chain_update(signature.r_bytes())
        .chain_update(public_key.as_bytes())
        .chain_update(message)
        .finalize();
    let mut wide = [0u8; 64];
    wide.copy_from_slice(&digest);
    Scalar::from_bytes_mod_order_wide(&wide)
}

/// Checks one signature under ZIP-215 (see the module docs): the acceptance rule.
/// `[8](R − ([s]B − [k]A)) = 0`, as zebra's `verify_prehashed`.
pub fn verify(
    public_key: &PublicKey,
    message: &[u8],
    signature: &Signature,
) -> Result<(), VerifyError> {
    let s = signature.s_scalar().ok_or(VerifyError::BadSignature)?;
    let r = signature.r_point().ok_or(VerifyError::BadSignature)?;
    let k = challenge(signature, public_key, message);
    let r_expected =
        EdwardsPoint::vartime_double_scalar_mul_basepoint(&k, public_key.minus_point(), &s);
    if (r - r_expected).mul_by_cofactor().is_identity() {
        Ok(())
    } else {
        Err(VerifyError::BadSignature)
    }
}
