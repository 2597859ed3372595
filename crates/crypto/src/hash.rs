//! BLAKE2b-256 hashing with domain separation.
//!
//! [`hash`] is plain BLAKE2b-256 (the standard test vectors hold). Everything Walras commits to
//! is hashed through a [`Hasher`] opened on a [`Domain`], which becomes the BLAKE2b
//! *personalization* parameter. Personalization changes the initial state, so two hashes from
//! different domains (or a domain hash and a plain one) cannot collide by construction, however
//! their inputs are laid out: a trie leaf can never be passed off as a branch or a transaction.

use blake2b_simd::many::{hash_many, HashManyJob};
use blake2b_simd::Params;
use std::fmt;
use std::str::FromStr;

use crate::error::DecodeError;
use crate::hex;

/// Bytes in a [`Hash`].
pub const HASH_BYTES: usize = 32;

/// A BLAKE2b-256 digest. Displays and parses as 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Hash(pub [u8; HASH_BYTES]);

impl Hash {
    /// The digest's bytes.
    pub fn as_bytes(&self) -> &[u8; HASH_BYTES] {
        &self.0
    }

    /// Reads a hash from exactly [`HASH_BYTES`] bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Hash, DecodeError> {
        let array = <[u8; HASH_BYTES]>::try_from(bytes).map_err(|_| DecodeError::WrongLength {
            what: "hash",
            expected: HASH_BYTES,
            actual: bytes.len(),
        })?;
        Ok(Hash(array))
    }
}

impl fmt::Display for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        hex::write(f, &self.0)
    }
}

impl fmt::Debug for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Hash({self})")
    }
}

impl FromStr for Hash {
    type Err = DecodeError;

    fn from_str(text: &str) -> Result<Hash, DecodeError> {
        hex::decode_array("hash", text).map(Hash)
    }
}

/// Largest domain tag: BLAKE2b's personalization field is 16 bytes.
pub const DOMAIN_TAG_BYTES_MAX: usize = 16;

/// A hashing domain: a short ASCII tag that keeps hashes of different kinds of data apart.
///
/// Tags are zero-padded to 16 bytes, so they must not contain NUL (`"a"` and `"a\0"` would
/// coincide) and must not be empty (that would be the plain [`hash`]). [`Domain::new`] checks
/// both, at compile time when used in a `const`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Domain {
    tag: [u8; DOMAIN_TAG_BYTES_MAX],
    tag_len: u8,
}

impl Domain {
    /// A domain named by `tag` (1 to 16 bytes, no NUL). Panics otherwise: tags are constants.
    pub const fn new(tag: &str) -> Domain {
        let bytes = tag.as_bytes();
        assert!(!bytes.is_empty(), "a domain tag must not be empty");
        assert!(
            bytes.len() <= DOMAIN_TAG_BYTES_MAX,
            "a domain tag has at most 16 bytes"
        );
        let mut padded = [0u8; DOMAIN_TAG_BYTES_MAX];
        let mut index = 0;
        while index < bytes.len() {
            assert!(bytes[index] != 0, "a domain tag must not contain NUL");
            padded[index] = bytes[index];
            index += 1;
        }
        Domain {
            tag: padded,
            tag_len: bytes.len() as u8,
        }
    }

    /// The tag as given to [`Domain::new`].
    pub fn tag(&self) -> &[u8] {
        &self.tag[..usize::from(self.tag_len)]
    }
}

impl fmt::Debug for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Domain({:?})", String::from_utf8_lossy(self.tag()))
    }
}

/// Every domain Walras hashes in. Kept in one place so that no two uses pick the same tag; a
/// test checks they are pairwise distinct.
pub mod domain {
    use super::Domain;

    /// A trie leaf: key and value.
    pub const TRIE_LEAF: Domain = Domain::new("walras/trie/leaf");
    /// A trie branch: its nibble path, child bitmap and child hashes.
    pub const TRIE_BRANCH: Domain = Domain::new("walras/trie/node");
    /// The root of a trie with no live leaves.
    pub const TRIE_EMPTY: Domain = Domain::new("walras/trie/none");
    /// A leaf of a Merkle batch signature: one message hash.
    pub const MERKLE_LEAF: Domain = Domain::new("walras/mbs/leaf");
    /// An inner node of a Merkle batch signature.
    pub const MERKLE_NODE: Domain = Domain::new("walras/mbs/node");
    /// The message actually signed for a Merkle batch: leaf count and root.
    pub const MERKLE_ROOT: Domain = Domain::new("walras/mbs/root");
    /// A transaction body (what its id is computed from).
    pub const TRANSACTION: Domain = Domain::new("walras/tx");
    /// A signature verdict a node remembers (key, signature, message; never committed).
    pub const SIGNATURE_VERDICT: Domain = Domain::new("walras/sig/ok");

    /// All of the above, for the distinctness test.
    pub const ALL: [Domain; 8] = [
        TRIE_LEAF,
        TRIE_BRANCH,
        TRIE_EMPTY,
        MERKLE_LEAF,
        MERKLE_NODE,
        MERKLE_ROOT,
        TRANSACTION,
        SIGNATURE_VERDICT,
    ];
}

/// Plain BLAKE2b-256 of `bytes` (no domain). Use a [`Hasher`] for anything committed to.
pub fn hash(bytes: &[u8]) -> Hash {
    digest(Params::new().hash_length(HASH_BYTES).hash(bytes))
}

/// BLAKE2b-256 of `bytes` in `domain`; same as a [`Hasher`] fed `bytes` once.
pub fn hash_in(domain: Domain, bytes: &[u8]) -> Hash {
    digest(params(domain).hash(bytes))
}

/// [`hash_in`] of each of `inputs` into the same place in `out`, several at once: on a CPU
/// with AVX2, four inputs share one pass of the compression function (2-2.5x the throughput of
/// one at a time for 70-300 byte inputs on the development VM), which is what a trie's leaves
/// and a checkpoint's pieces need.
///
/// # Panics
/// When `out` is not as long as `inputs`.
pub fn hash_in_each(domain: Domain, inputs: &[&[u8]], out: &mut [Hash]) {
    assert_eq!(inputs.len(), out.len(), "one output per input");
    let params = params(domain);
    let mut jobs: Vec<HashManyJob> = inputs
        .iter()
        .map(|input| HashManyJob::new(&params, input))
        .collect();
    hash_many(jobs.iter_mut());
    for (job, hash) in jobs.iter().zip(out) {
        *hash = digest(job.to_hash());
    }
}

/// BLAKE2b-256 parameters with `domain` as the personalization (zero-padded to 16 bytes).
fn params(domain: Domain) -> Params {
    let mut params = Params::new();
    params.hash_length(HASH_BYTES).personal(domain.tag());
    params
}

fn digest(hash: blake2b_simd::Hash) -> Hash {
    let mut bytes = [0; HASH_BYTES];
    bytes.copy_from_slice(hash.as_bytes());
    Hash(bytes)
}

/// An incremental, domain-separated BLAKE2b-256 hasher.
///
/// Feeding `a` then `b` equals feeding `a ‖ b`: callers whose inputs have variable-length parts
/// must length-prefix them so the encoding is unambiguous.
#[derive(Clone)]
pub struct Hasher {
    state: blake2b_simd::State,
}

impl Hasher {
    /// A hasher whose output is specific to `domain`.
    pub fn new(domain: Domain) -> Hasher {
        Hasher {
            state: params(domain).to_state(),
        }
    }

    /// Appends `bytes` to the hashed input.
    pub fn update(&mut self, bytes: &[u8]) -> &mut Hasher {
        self.state.update(bytes);
        self
    }

    /// The digest of everything fed so far.
    pub fn finalize(self) -> Hash {
        digest(self.state.finalize())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_hash_matches_blake2b_256_test_vectors() {
        let empty = "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8";
        let abc = "bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319";
        assert_eq!(hash(b"").to_string(), empty);
        assert_eq!(hash(b"abc").to_string(), abc);
    }

    #[test]
    fn domains_are_pairwise_distinct_and_separate_hashes() {
        for (i, a) in domain::ALL.iter().enumerate() {
            for b in &domain::ALL[i + 1..] {
                assert_ne!(a, b);
                assert_ne!(hash_in(*a, b"x"), hash_in(*b, b"x"));
            }
            assert_ne!(hash_in(*a, b"x"), hash(b"x"));
        }
    }

    #[test]
    fn incremental_equals_one_shot() {
        let mut hasher = Hasher::new(domain::TRIE_LEAF);
        hasher.update(b"ab").update(b"c");
        assert_eq!(hasher.finalize(), hash_in(domain::TRIE_LEAF, b"abc"));
    }

    /// RustCrypto's BLAKE2b-256 with `tag` as personalization: what every hash was computed
    /// with before blake2b_simd.
    fn reference(tag: Option<&[u8]>, bytes: &[u8]) -> Hash {
        use blake2::digest::{CustomizedInit, Digest};
        type Blake2b256 = blake2::Blake2b<blake2::digest::consts::U32>;
        let mut state = match tag {
            Some(tag) => Blake2b256::new_customized(tag),
            None => Blake2b256::new(),
        };
        Digest::update(&mut state, bytes);
        Hash(state.finalize().into())
    }

    proptest::proptest! {
        /// A change of BLAKE2b implementation must not change one hash: state roots, ids and
        /// signatures on disk and between nodes depend on them.
        #[test]
        fn every_hash_is_what_the_reference_blake2b_computes(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600),
            split in 0usize..600,
            domain_index in 0usize..domain::ALL.len(),
        ) {
            let domain = domain::ALL[domain_index];
            let expected = reference(Some(domain.tag()), &bytes);
            proptest::prop_assert_eq!(hash_in(domain, &bytes), expected);
            let (head, tail) = bytes.split_at(split.min(bytes.len()));
            let mut hasher = Hasher::new(domain);
            hasher.update(head).update(tail);
            proptest::prop_assert_eq!(hasher.finalize(), expected);
            proptest::prop_assert_eq!(hash(&bytes), reference(None, &bytes));
        }

        /// Hashing several inputs at once gives each input's own hash, whatever the lengths.
        #[test]
        fn hashing_inputs_together_equals_hashing_each(
            inputs in proptest::collection::vec(
                proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400),
                0..11,
            ),
        ) {
            let slices: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
            let mut together = vec![Hash::default(); slices.len()];
            hash_in_each(domain::TRIE_LEAF, &slices, &mut together);
            for (input, hash) in slices.iter().zip(&together) {
                proptest::prop_assert_eq!(*hash, reference(Some(domain::TRIE_LEAF.tag()), input));
            }
        }
    }

    #[test]
    fn hash_round_trips_through_hex() {
        let digest = hash(b"walras");
        assert_eq!(digest.to_string().parse::<Hash>(), Ok(digest));
        assert!("zz".parse::<Hash>().is_err());
    }
}
