//! Walras cryptography: hashing, signatures and their acceptance rule, Merkle batch signatures.
//!
//! - [`hash`], [`Hasher`], [`Hash`]: BLAKE2b-256. Anything committed to is hashed in a
//!   [`Domain`] (BLAKE2b personalization), one per kind of data, all listed in [`domain`], so
//!   hashes of different kinds cannot collide.
//! - [`SecretKey`], [`Keypair`], [`PublicKey`], [`Signature`], [`sign`], [`verify`]: ed25519,
//!   RFC 8032 signing over `ed25519-dalek`, ZIP-215 verification over `ed25519-zebra`. Keys come
//!   from 32-byte seeds, so tests and simulations are deterministic and need no OS randomness.
//! - [`signature_accepted`], [`verify_each`], [`verify_each_parallel`]: the one rule deciding
//!   which signatures are accepted, everywhere — ZIP-215, whose batch check agrees with its
//!   single check (see [`accept`] for why), so blocks verify in batches spread over threads.
//!   [`AcceptedSignatures`] remembers a node's accepted verdicts so it checks each once.
//! - [`MerkleTree`], [`sign_merkle_batch`], [`verify_merkle_batch_member`]: one signature over
//!   many messages, each with its own inclusion proof.
//!
//! Decoders ([`Hash::from_str`](std::str::FromStr), [`PublicKey::from_bytes`],
//! [`Signature::from_bytes`]) take untrusted input: they return a [`DecodeError`], never panic.

#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod accept;
mod error;
mod hash;
mod hex;
mod merkle;
mod sign;
#[cfg(feature = "test-support")]
pub mod testing;

pub use accept::{
    signature_accepted, verify_each, verify_each_parallel, AcceptedSignatures, SignedItem,
    BATCH_ITEMS_MAX,
};
pub use error::{DecodeError, VerifyError};
pub use hash::{
    domain, hash, hash_in, hash_in_each, Domain, Hash, Hasher, DOMAIN_TAG_BYTES_MAX, HASH_BYTES,
};
pub use merkle::{
    merkle_root, sign_merkle_batch, verify_merkle_batch_member, MerkleBatchError,
    MerkleBatchSignature, MerkleProof, MerkleTree, MERKLE_BATCH_MESSAGES_MAX,
};
pub use sign::{
    sign, verify, Keypair, PublicKey, SecretKey, Signature, PUBLIC_KEY_BYTES, SECRET_SEED_BYTES,
    SIGNATURE_BYTES,
};
