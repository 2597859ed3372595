//! Errors at this crate's boundary: proofs that do not decode or do not verify.

use walras_crypto::Hash;

/// Proof bytes that are not a canonical encoding of a proof.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProofDecodeError {
    /// The bytes end inside a field, or go on after the proof.
    #[error("proof {0}; was it transferred whole?")]
    Codec(#[from] walras_types::codec::DecodeError),
    /// The proof was made for keys of another length (a different trie).
    #[error("proof is for {actual}-byte keys but this trie has {expected}-byte keys; ask the trie the key belongs to")]
    KeyLength { expected: usize, actual: usize },
    /// More path steps than a key has nibbles.
    #[error("proof has {steps} path steps, a key allows at most {max}")]
    TooManySteps { steps: usize, max: usize },
    /// The tag saying how the path ends is unknown.
    #[error("proof path end has unknown tag {tag} (expected 0, 1 or 2)")]
    UnknownEndTag { tag: u8 },
    /// A branch depth at or past the end of the key.
    #[error("proof has a branch at nibble {depth}, past the key's {key_nibbles} nibbles")]
    DepthOutOfRange { depth: u8, key_nibbles: usize },
    /// A branch with fewer than two children (they are never stored).
    #[error("proof has a branch with child bitmap {bitmap:#06x}: fewer than 2 children")]
    TooFewChildren { bitmap: u16 },
    /// A branch prefix with non-zero bits past its depth.
    #[error("proof has a branch prefix with bits set past its depth")]
    NonCanonicalPrefix,
}

/// A proof that does not establish anything about the key under the root.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProofError {
    /// The proof bytes do not decode.
    #[error("{0}")]
    Decode(ProofDecodeError),
    /// Path steps must go strictly deeper, stay within the key, and branch on the key's nibble.
    #[error("proof step {step} does not follow the key's path")]
    StepOffPath { step: usize },
    /// A step's sibling count does not match its bitmap.
    #[error("proof step {step} has a sibling count that does not match its bitmap")]
    WrongSiblingCount { step: usize },
    /// The node ending the path is not where the key leads.
    #[error("proof ends at a node that is not on the key's path")]
    EndOffPath,
    /// The path ends at a branch under which the key could still be: it proves nothing.
    #[error(
        "proof stops at a branch the key may be under: it proves neither presence nor absence"
    )]
    Incomplete,
    /// The path ends at "empty trie" below the root.
    #[error("proof claims an empty subtree below the root")]
    EmptyBelowRoot,
    /// Everything is well formed but leads to another root: the proof is for another state of
    /// the trie, or was altered.
    #[error("proof leads to root {computed}, not {expected}: it is for another block's state, or was altered")]
    RootMismatch { expected: Hash, computed: Hash },
}

impl From<ProofDecodeError> for ProofError {
    fn from(error: ProofDecodeError) -> Self {
        ProofError::Decode(error)
    }
}
