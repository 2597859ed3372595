//! Errors at this crate's boundary.

/// Bytes or text that do not decode to a hash, key or signature.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input has the wrong number of bytes.
    #[error("a {what} is {expected} bytes, got {actual}")]
    WrongLength {
        what: &'static str,
        expected: usize,
        actual: usize,
    },
    /// Hex text has the wrong number of digits.
    #[error("a {what} is {expected} hex digits, got {actual}")]
    WrongHexLength {
        what: &'static str,
        expected: usize,
        actual: usize,
    },
    /// Hex text has a character that is not a hex digit.
    #[error("{what} is not hex: character {position} is not 0-9, a-f or A-F")]
    NotHex { what: &'static str, position: usize },
    /// Public-key bytes that are not the encoding of a point on the ed25519 curve.
    #[error("public key is not a valid ed25519 point; check it was copied whole and unaltered")]
    NotACurvePoint,
    /// A public key of small order: anyone could forge signatures for it.
    #[error("public key has small order, so signatures under it prove nothing; use another key")]
    WeakPublicKey,
}

/// A signature, or an inclusion proof, that does not verify.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The signature is not valid for this message and public key.
    #[error("signature does not verify for this message and public key")]
    BadSignature,
    /// A Merkle inclusion proof does not lead from the message to the signed root.
    #[error("inclusion proof does not lead from this message to the signed batch root")]
    BadInclusionProof,
}
