//! The signature acceptance rule (a consensus rule: every node must reach the same verdict):
//! **a signature is accepted exactly when it verifies on its own under strict RFC 8032 rules**
//! ([`crate::verify`], dalek's `verify_strict`). Admission, CheckTx, proposals, block
//! execution and recovery all call [`verify_each_parallel`] (or [`crate::verify`] for one), so
//! a transaction's verdict cannot depend on where it is checked or what it is checked with.
//!
//! # Why not batch verification
//!
//! A batch checks one random linear combination of the verification equations: about twice
//! as fast per signature, but its verdict on a signature whose equation holds only up to a
//! small-order point (its `R` carries one; any key holder can make such a signature) depends
//! on the batch's random coefficients, which dalek derives from the whole batch. Such a
//! signature passes a batch about half the time. Any rule built on batches therefore makes a
//! signature's fate a function of its neighbours: an earlier rule (fixed 128-item chunks,
//! halved on failure) admitted such a signature in a submitted batch, the producer committed
//! it, and recovery, grouping the block's transactions by hash, dropped it — the stored block
//! no longer replayed and the node could not restart. Strict verification of each signature
//! has no grouping at all, so there is nothing for paths to disagree on; it costs about twice
//! the CPU of a batch (see `tests/throughput.rs` and BENCHMARKS.md), spread across threads.

use crate::sign::{verify, PublicKey, Signature};

/// One signature to check: (message, public key, signature).
pub type SignedItem<'a> = (&'a [u8], &'a PublicKey, &'a Signature);

/// Fewer items than this verify on the calling thread: at ~30 µs per verification, handing
/// them to a pool would cost more than it saves.
const CLAIM_ITEMS: usize = 64;

/// Whether one signature is accepted: the acceptance rule itself.
pub fn signature_accepted(item: &SignedItem<'_>) -> bool {
    let (message, key, signature) = item;
    verify(key, message, signature).is_ok()
}

/// Per item, whether it is accepted, on this thread.
pub fn verify_each(items: &[SignedItem<'_>]) -> Vec<bool> {
    items.iter().map(signature_accepted).collect()
}

/// Per item, whether it is accepted, computed on up to `threads` threads (0 counts as 1).
/// Each verdict depends on its item alone, so the result is the same for any thread count.
pub fn verify_each_parallel(items: &[SignedItem<'_>], threads: usize) -> Vec<bool> {
    walras_par::map_in_order(items, threads, CLAIM_ITEMS, signature_accepted)
}
