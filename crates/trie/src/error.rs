//! Errors at this crate's boundary: proofs that do not decode or do not verify.

use std::fmt;
use walras_crypto::Hash;

/// Proof bytes that are not a canonical encoding of a proof.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProofDecodeError {
    /// The bytes end inside a field.
    Truncated { offset: usize },
    /// The proof was made for keys of another length (a different trie).
    KeyLength { expected: usize, actual: usize },
    /// More path steps than a key has nibbles.
    TooManySteps { steps: usize, max: usize },
    /// The tag saying how the path ends is unknown.
    UnknownEndTag { tag: u8 },
    /// A branch depth at or past the end of the key.
    DepthOutOfRange { depth: u8, key_nibbles: usize },
    /// A branch with fewer than two children (they are never stored).
    TooFewChildren { bitmap: u16 },
    /// A branch prefix with non-zero bits past its depth.
    NonCanonicalPrefix,
    /// Bytes left after the proof.
    TrailingBytes { extra: usize },
}

impl fmt::Display for ProofDecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProofDecodeError::Truncated { offset } => {
                write!(
                    f,
                    "proof is cut short at byte {offset}; was it transferred whole?"
                )
            }
            ProofDecodeError::KeyLength { expected, actual } => write!(
                f,
                "proof is for {actual}-byte keys but this trie has {expected}-byte keys; \
                 ask the trie the key belongs to"
            ),
            ProofDecodeError::TooManySteps { steps, max } => {
                write!(
                    f,
                    "proof has {steps} path steps, a key allows at most {max}"
                )
            }
            ProofDecodeError::UnknownEndTag { tag } => {
                write!(
                    f,
                    "proof path end has unknown tag {tag} (expected 0, 1 or 2)"
                )
            }
            ProofDecodeError::DepthOutOfRange { depth, key_nibbles } => write!(
                f,
                "proof has a branch at nibble {depth}, past the key's {key_nibbles} nibbles"
            ),
            ProofDecodeError::TooFewChildren { bitmap } => {
                write!(
                    f,
                    "proof has a branch with child bitmap {bitmap:#06x}: fewer than 2 children"
                )
            }
            ProofDecodeError::NonCanonicalPrefix => {
                write!(f, "proof has a branch prefix with bits set past its depth")
            }
            ProofDecodeError::TrailingBytes { extra } => {
                write!(f, "proof is followed by {extra} unexpected bytes")
            }
        }
    }
}

impl std::error::Error for ProofDecodeError {}

/// A proof that does not establish anything about the key under the root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProofError {
    /// The proof bytes do not decode.
    Decode(ProofDecodeError),
    /// Path steps must go strictly deeper, stay within the key, and branch on the key's nibble.
    StepOffPath { step: usize },
    /// A step's sibling count does not match its bitmap.
    WrongSiblingCount { step: usize },
    /// The node ending the path is not where the key leads.
    EndOffPath,
    /// The path ends at a branch under which the key could still be: it proves nothing.
    Incomplete,
    /// The path ends at "empty trie" below the root.
    EmptyBelowRoot,
    /// Everything is well formed but leads to another root: the proof is for another state of
    /// the trie, or was altered.
    RootMismatch { expected: Hash, computed: Hash },
}

impl fmt::Display for ProofError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProofError::Decode(error) => write!(f, "{error}"),
            ProofError::StepOffPath { step } => {
                write!(f, "proof step {step} does not follow the key's path")
            }
            ProofError::WrongSiblingCount { step } => {
                write!(
                    f,
                    "proof step {step} has a sibling count that does not match its bitmap"
                )
            }
            ProofError::EndOffPath => {
                write!(f, "proof ends at a node that is not on the key's path")
            }
            ProofError::Incomplete => write!(
                f,
                "proof stops at a branch the key may be under: it proves neither presence nor \
                 absence"
            ),
            ProofError::EmptyBelowRoot => write!(f, "proof claims an empty subtree below the root"),
            ProofError::RootMismatch { expected, computed } => write!(
                f,
                "proof leads to root {computed}, not {expected}: it is for another block's state, \
                 or was altered"
            ),
        }
    }
}

impl std::error::Error for ProofError {}

impl From<ProofDecodeError> for ProofError {
    fn from(error: ProofDecodeError) -> Self {
        ProofError::Decode(error)
    }
}
