//! Batch and parallel ed25519 verification, with the rule that decides which signatures of a
//! block are accepted.
//!
//! Batch verification checks one random linear combination of all verification equations: about
//! twice as fast per signature as checking each, but a failure says only "some signature is
//! bad". A block must drop exactly its bad transactions, so on failure we split the batch in
//! halves and judge each the same way, down to single signatures checked on their own. One bad
//! signature then costs about log2(chunk) small batches, not a chunk of single checks (which
//! tripled the verification cost of a block with one bad signature per chunk).
//!
//! # The acceptance rule (a consensus rule: all nodes must agree)
//!
//! Items are cut, in order, into chunks of [`BATCH_CHUNK_ITEMS`]. A run of items (first a whole
//! chunk) is accepted when it batch-verifies; otherwise its first half (`len / 2` items) and the
//! rest are judged the same way; a single item is accepted when it verifies on its own
//! ([`crate::verify`]).
//!
//! Why chunks of a fixed size rather than one per thread: a signer can make a signature whose
//! verification equation holds only up to a small-order point (its `R` carries one). Strict
//! single verification rejects it; a batch accepts it or not depending on the random
//! coefficients, which dalek derives from the whole batch. Fixed chunks and fixed halving make the
//! accepted set a function of the item list alone, identical for every thread count and machine. Such a
//! signature is no forgery: making one takes the secret key (the challenge hashes `R`, so nobody
//! else can add the small-order point afterwards).
//!
//! Every signature that verifies on its own is accepted (a batch of valid signatures always
//! passes), and [`BATCH_CHUNK_ITEMS`] may only change with a protocol upgrade.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::VerifyError;
use crate::sign::{verify, PublicKey, Signature};

/// One signature to check: (message, public key, signature).
pub type SignedItem<'a> = (&'a [u8], &'a PublicKey, &'a Signature);

/// Signatures per batch under the acceptance rule. Larger batches amortise better (see the
/// crate benchmark) but a bad signature costs single checks of its whole chunk.
pub const BATCH_CHUNK_ITEMS: usize = 128;

/// Checks all `items` in one batch: `Ok` when every signature is valid (an empty batch is), the
/// error when at least one is not, without saying which.
pub fn verify_batch(items: &[SignedItem<'_>]) -> Result<(), VerifyError> {
    let fail = VerifyError::BadSignatureInBatch { items: items.len() };
    let messages: Vec<&[u8]> = items.iter().map(|(message, _, _)| *message).collect();
    let signatures: Vec<ed25519_dalek::Signature> = items
        .iter()
        .map(|(_, _, signature)| signature.to_dalek())
        .collect();
    let keys = items
        .iter()
        .map(|(_, key, _)| key.to_dalek())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| fail.clone())?;
    ed25519_dalek::verify_batch(&messages, &signatures, &keys).map_err(|_| fail)
}

/// Per item, whether it is accepted under the acceptance rule, on this thread.
pub fn verify_each(items: &[SignedItem<'_>]) -> Vec<bool> {
    items
        .chunks(BATCH_CHUNK_ITEMS)
        .flat_map(verify_chunk)
        .collect()
}

/// Indices of the items the acceptance rule rejects, in increasing order.
pub fn bad_signature_indices(items: &[SignedItem<'_>]) -> Vec<usize> {
    let accepted = verify_each(items);
    (0..items.len()).filter(|&index| !accepted[index]).collect()
}

/// Same result as [`verify_each`], computed on up to `threads` threads (0 counts as 1).
///
/// Threads take chunks from a shared counter, so one thread that meets a bad chunk (and its
/// fallback single checks) does not hold the others back.
pub fn verify_batches_parallel(items: &[SignedItem<'_>], threads: usize) -> Vec<bool> {
    let chunks: Vec<&[SignedItem<'_>]> = items.chunks(BATCH_CHUNK_ITEMS).collect();
    let threads = threads.clamp(1, chunks.len().max(1));
    if threads == 1 {
        return verify_each(items);
    }
    let next_chunk = AtomicUsize::new(0);
    let mut results: Vec<(usize, Vec<bool>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| scope.spawn(|| verify_chunks_from(&chunks, &next_chunk)))
            .collect();
        workers.into_iter().flat_map(join_worker).collect()
    });
    results.sort_unstable_by_key(|(chunk_index, _)| *chunk_index);
    results
        .into_iter()
        .flat_map(|(_, accepted)| accepted)
        .collect()
}

/// Claims chunks until none are left; returns (chunk index, per-item acceptance).
fn verify_chunks_from(
    chunks: &[&[SignedItem<'_>]],
    next_chunk: &AtomicUsize,
) -> Vec<(usize, Vec<bool>)> {
    let mut done = Vec::new();
    loop {
        let chunk_index = next_chunk.fetch_add(1, Ordering::Relaxed);
        let Some(chunk) = chunks.get(chunk_index) else {
            return done;
        };
        done.push((chunk_index, verify_chunk(chunk)));
    }
}

fn join_worker<T>(worker: std::thread::ScopedJoinHandle<'_, T>) -> T {
    // A worker only panics on a bug in this module; surface it rather than return partial
    // results that would silently reject valid signatures.
    match worker.join() {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// The acceptance rule for one chunk: accepted whole if it batch-verifies; otherwise each half
/// is judged the same way, down to single items, which are verified on their own.
fn verify_chunk(chunk: &[SignedItem<'_>]) -> Vec<bool> {
    if let [(message, key, signature)] = chunk {
        return vec![verify(key, message, signature).is_ok()];
    }
    if chunk.is_empty() || verify_batch(chunk).is_ok() {
        return vec![true; chunk.len()];
    }
    let (left, right) = chunk.split_at(chunk.len() / 2);
    let mut accepted = verify_chunk(left);
    accepted.extend(verify_chunk(right));
    accepted
}
