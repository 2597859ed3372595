//! Errors at this crate's boundary.

use std::fmt;

/// Bytes or text that do not decode to a hash, key or signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The input has the wrong number of bytes.
    WrongLength {
        what: &'static str,
        expected: usize,
        actual: usize,
    },
    /// Hex text has the wrong number of digits.
    WrongHexLength {
        what: &'static str,
        expected: usize,
        actual: usize,
    },
    /// Hex text has a character that is not a hex digit.
    NotHex { what: &'static str, position: usize },
    /// Public-key bytes that are not the encoding of a point on the ed25519 curve.
    NotACurvePoint,
    /// A public key of small order: anyone could forge signatures for it.
    WeakPublicKey,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::WrongLength {
                what,
                expected,
                actual,
            } => {
                write!(f, "a {what} is {expected} bytes, got {actual}")
            }
            DecodeError::WrongHexLength {
                what,
                expected,
                actual,
            } => {
                write!(f, "a {what} is {expected} hex digits, got {actual}")
            }
            DecodeError::NotHex { what, position } => {
                write!(
                    f,
                    "{what} is not hex: character {position} is not 0-9, a-f or A-F"
                )
            }
            DecodeError::NotACurvePoint => write!(
                f,
                "public key is not a valid ed25519 point; check it was copied whole and unaltered"
            ),
            DecodeError::WeakPublicKey => write!(
                f,
                "public key has small order, so signatures under it prove nothing; use another key"
            ),
        }
    }
}

impl std::error::Error for DecodeError {}

/// A signature, or an inclusion proof, that does not verify.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VerifyError {
    /// The signature is not valid for this message and public key.
    BadSignature,
    /// A Merkle inclusion proof does not lead from the message to the signed root.
    BadInclusionProof,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerifyError::BadSignature => {
                write!(
                    f,
                    "signature does not verify for this message and public key"
                )
            }
            VerifyError::BadInclusionProof => write!(
                f,
                "inclusion proof does not lead from this message to the signed batch root"
            ),
        }
    }
}

impl std::error::Error for VerifyError {}
