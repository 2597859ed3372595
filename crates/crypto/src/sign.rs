//! ed25519 keys, signing (over `ed25519-dalek`) and single verification under ZIP-215 (over
//! `ed25519-zebra`).
//!
//! Verification is ZIP-215's (see [`crate::accept`] for why): `A` and `R` must decode to curve
//! points, non-canonical encodings accepted; `s` must be canonical (`s < ℓ`); the cofactored
//! equation `[8][s]B = [8]R + [8][k]A`, `k = SHA-512(R_bytes ‖ A_bytes ‖ M)`, must hold.
//! Small-order keys are refused when a [`PublicKey`] is decoded (ZIP-215 itself would accept
//! them), so an account can never be created with a key whose signatures anyone could forge.
//! Decoding a key is the same curve-point decompression in both crates (`curve25519-dalek`'s),
//! so a key that decodes here always verifies under ZIP-215.

use ed25519_dalek::{Signer, SigningKey, VerifyingKey};
use ed25519_zebra::VerificationKey;
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
    point: VerificationKey,
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
        let dalek = VerifyingKey::from_bytes(&array).map_err(|_| DecodeError::NotACurvePoint)?;
        if dalek.is_weak() {
            return Err(DecodeError::WeakPublicKey);
        }
        // The same decompression as dalek's just now: it cannot fail here.
        let point = VerificationKey::try_from(array).map_err(|_| DecodeError::NotACurvePoint)?;
        Ok(PublicKey {
            bytes: array,
            point,
        })
    }

    /// The 32-byte encoding.
    pub fn as_bytes(&self) -> &[u8; PUBLIC_KEY_BYTES] {
        &self.bytes
    }

    /// The ZIP-215 verification key (decompressed and checked at construction).
    pub(crate) fn verification_key(&self) -> &VerificationKey {
        &self.point
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

    /// The signature as `ed25519-zebra` takes it (no check: that is verification's job).
    pub(crate) fn to_zebra(self) -> ed25519_zebra::Signature {
        ed25519_zebra::Signature::from_bytes(&self.0)
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

/// Checks one signature under ZIP-215 (see the module docs): the acceptance rule.
pub fn verify(
    public_key: &PublicKey,
    message: &[u8],
    signature: &Signature,
) -> Result<(), VerifyError> {
    public_key
        .verification_key()
        .verify(&signature.to_zebra(), message)
        .map_err(|_| VerifyError::BadSignature)
}
