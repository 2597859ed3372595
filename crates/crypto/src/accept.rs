//! The signature acceptance rule (a consensus rule: every node must reach the same verdict):
//! **a signature is accepted exactly when it verifies under ZIP-215** ([`crate::verify`]; the
//! rule CometBFT and Zcash use, `ed25519-zebra`'s equations written over decoded keys, see
//! `sign.rs`): `A` and `R` decode to curve points
//! (non-canonical encodings accepted), `s < ℓ` (canonical), and the *cofactored* equation
//! `[8][s]B = [8]R + [8][k]A` holds, `k = SHA-512(R_bytes ‖ A_bytes ‖ M)`. Admission, CheckTx,
//! proposals, block execution, replay and recovery all call [`verify_each_parallel`] (or
//! [`signature_accepted`] for one), so a transaction's verdict cannot depend on where it is
//! checked, what it is checked with, or how many threads check it.
//!
//! # Why batches are safe under this rule
//!
//! A batch checks one random linear combination `[8](Σ zᵢ(sᵢB − Rᵢ − kᵢAᵢ)) = 0` with 128-bit
//! random `zᵢ`. Write `Pᵢ = sᵢB − Rᵢ − kᵢAᵢ`; the single check is `[8]Pᵢ = 0`.
//! - Every item passes alone ⇒ every `[8]Pᵢ` is the identity ⇒ the batch passes, whatever
//!   the `zᵢ`: no accepted signature can fail because of its neighbours.
//! - Some item fails alone ⇒ its `[8]Pᵢ` is a non-identity point of the prime-order subgroup
//!   ⇒ the combination vanishes only if the `zᵢ` hit a hyperplane mod ℓ: probability at most
//!   2⁻¹²⁸, with coefficients drawn from the thread's CSPRNG after the items are fixed.
//!
//! So the batch verdict is the AND of the single verdicts (up to that 2⁻¹²⁸), and a failed
//! batch falls back to single verdicts for its items: each item's verdict is its single
//! verdict, for any chunking and thread count (`tests/signatures.rs` checks it on random
//! batches with torsioned and garbage signatures). Chunking is therefore free to follow the
//! thread count and the bad signatures met (see `verify_piece`).
//!
//! # What changed, and why the old rule refused batches
//!
//! The previous rule was dalek's `verify_strict`, alone per signature: about 37.6 µs each on the
//! dev VM. Batches had been refused because dalek's batch uses the *cofactorless* equation: a
//! signature whose `Pᵢ` is a small-order point (its `R` carries one; any key holder can make
//! such a signature) passed a batch only when `zᵢ·Pᵢ` vanished, about half the time, so its
//! fate depended on its neighbours; a block committed that way once failed to replay. ZIP-215
//! removes the cause instead of the batches: the cofactor kills small-order parts in the single
//! check too. Deliberate consequences: a key holder's signature with a torsioned `R`, a
//! non-canonical `R` encoding or a small-order `R` (all refused by `verify_strict`) is now
//! accepted; `s ≥ ℓ` is still refused. Every signature the old rule accepted is accepted (its
//! equation held exactly), but not the converse: this is a change of consensus rule. A stored
//! block replays to the same root under both rules unless it holds a transaction dropped as
//! badly signed whose signature ZIP-215 accepts (a solo node never stored one: its admission
//! refused them; a CometBFT chain could have), and all nodes of a chain must switch together.
//!
//! # Malleability
//!
//! A transaction is identified by the hash of its bytes *with* the signature, and the mempool
//! and the block filter key on (source, sequence). A third party who could turn a valid
//! signature into a second valid one could therefore race the original (mempool: first wins;
//! one block holding both: both dropped for a reused sequence). ZIP-215 gives them no way:
//! `s` must be canonical, and any change to `R` (another encoding, an added torsion point)
//! changes `k`, so a new `s` needs the secret key. Only the key holder can make a second
//! signature of the same body, as under any ed25519 rule. `tests/signatures.rs` tries the
//! malleations (torsion added to `R`, `R` and `s` re-encoded, `s + ℓ`) and finds all refused.

use crate::hash::{domain, Hash, Hasher};
use crate::sign::{challenge, verify, PublicKey, Signature};
use curve25519_dalek::constants::ED25519_BASEPOINT_POINT;
use curve25519_dalek::edwards::EdwardsPoint;
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::{IsIdentity, VartimeMultiscalarMul};
use rand::Rng;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// One signature to check: (message, public key, signature).
pub type SignedItem<'a> = (&'a [u8], &'a PublicKey, &'a Signature);

/// The largest batch: past ~256 the per-signature cost of a batch barely falls (see
/// BENCHMARKS.md), while a failed batch re-verifies more items singly.
pub const BATCH_ITEMS_MAX: usize = 256;

/// The smallest batch after failures: below it a batch saves little over single checks.
const BATCH_ITEMS_MIN: usize = 16;

/// Items one thread takes at a time: enough for several batches of the largest size, few
/// enough that threads share the work evenly.
const PIECE_ITEMS_MAX: usize = 1024;

/// Whether one signature is accepted: the acceptance rule itself (ZIP-215, alone).
pub fn signature_accepted(item: &SignedItem<'_>) -> bool {
    let (message, key, signature) = item;
    verify(key, message, signature).is_ok()
}

/// Per item, whether it is accepted, each checked alone on this thread: the reference the
/// batched [`verify_each_parallel`] always agrees with.
pub fn verify_each(items: &[SignedItem<'_>]) -> Vec<bool> {
    items.iter().map(signature_accepted).collect()
}

/// Per item, whether it is accepted, computed in batches on up to `threads` threads (0 counts
/// as 1). Equal to [`verify_each`] for any thread count (see the module documentation).
pub fn verify_each_parallel(items: &[SignedItem<'_>], threads: usize) -> Vec<bool> {
    let threads = threads.max(1);
    let piece_len = items
        .len()
        .div_ceil(threads)
        .clamp(BATCH_ITEMS_MIN, PIECE_ITEMS_MAX);
    let pieces: Vec<&[SignedItem<'_>]> = items.chunks(piece_len).collect();
    walras_par::map_in_order(&pieces, threads, 2, |piece| verify_piece(piece))
        .into_iter()
        .flatten()
        .collect()
}

/// One piece's verdicts, batch after batch. A failed batch costs its batch check plus a single
/// check of each member, so the batch size follows the bad signatures met: a batch that
/// passes doubles the next (up to [`BATCH_ITEMS_MAX`]), one that fails quarters it (down to
/// `BATCH_ITEMS_MIN`). Clean blocks run at the largest size; a block with bad signatures
/// spread through it (about 0.3% in `walras gen workload`'s faults) settles near the size
/// where a third of the batches fail. Sizes change only the time: every verdict is the single
/// verdict.
fn verify_piece(piece: &[SignedItem<'_>]) -> Vec<bool> {
    let mut verdicts = Vec::with_capacity(piece.len());
    let mut batch_len = BATCH_ITEMS_MAX;
    let mut rest = piece;
    while !rest.is_empty() {
        let (batch, after) = rest.split_at(batch_len.min(rest.len()));
        let all_accepted = match batch {
            [single] => signature_accepted(single),
            _ => batch_accepts(batch),
        };
        if all_accepted {
            verdicts.resize(verdicts.len() + batch.len(), true);
            batch_len = (batch_len * 2).min(BATCH_ITEMS_MAX);
        } else {
            match batch {
                [_] => verdicts.push(false),
                _ => verdicts.extend(verify_each(batch)),
            }
            batch_len = (batch_len / 4).max(BATCH_ITEMS_MIN);
        }
        rest = after;
    }
    verdicts
}

/// One chunk's verdicts as one batch: all accepted if its batch check passes, else each
/// item's own (for tests and benchmarks of a fixed batch size).
pub fn verify_chunk(chunk: &[SignedItem<'_>]) -> Vec<bool> {
    if chunk.len() > 1 && batch_accepts(chunk) {
        vec![true; chunk.len()]
    } else {
        verify_each(chunk)
    }
}

/// Whether the ZIP-215 batch check of `chunk` passes: `[8]([−Σzᵢsᵢ]B + Σ[zᵢ]Rᵢ + Σ[zᵢkᵢ]Aᵢ)
/// = 0` with 128-bit `zᵢ` from the thread's CSPRNG (zebra's `batch::Verifier::verify`, over the
/// keys' decoded points instead of their bytes; zebra also merges the `A` terms of one key,
/// which a block of distinct sources would not gain from). An `R` that does not decode or a
/// non-canonical `s` fails the batch, as it fails alone.
fn batch_accepts(chunk: &[SignedItem<'_>]) -> bool {
    let mut rng = rand::rng();
    let mut scalars = Vec::with_capacity(2 * chunk.len() + 1);
    let mut points = Vec::with_capacity(2 * chunk.len() + 1);
    let mut basepoint_coefficient = Scalar::ZERO;
    for (message, key, signature) in chunk {
        let (Some(s), Some(r)) = (signature.s_scalar(), signature.r_point()) else {
            return false;
        };
        let k = challenge(signature, key, message);
        let mut z_bytes = [0u8; 16];
        rng.fill_bytes(&mut z_bytes);
        let z = Scalar::from(u128::from_le_bytes(z_bytes));
        basepoint_coefficient -= z * s;
        scalars.push(z);
        points.push(r);
        // [zk]A = [−zk](−A).
        scalars.push(-(z * k));
        points.push(*key.minus_point());
    }
    scalars.push(basepoint_coefficient);
    points.push(ED25519_BASEPOINT_POINT);
    EdwardsPoint::vartime_multiscalar_mul(&scalars, &points)
        .mul_by_cofactor()
        .is_identity()
}

/// The accepted verdicts a node has already computed, so a signature checked at admission is
/// not checked again when the same node proposes the block (the solo producer). A verdict is
/// a pure function of (message, key, signature), and an entry is the BLAKE2b-256 of exactly
/// those bytes, so a hit returns what verification would: only accepted verdicts are kept,
/// refused ones are recomputed. Bounded: two generations of `generation_len` entries; the
/// older is forgotten when the newer fills, and a forgotten entry only costs a re-check.
pub struct AcceptedSignatures {
    generation_len: usize,
    generations: Mutex<[HashSet<Hash>; 2]>,
    /// Items answered from the record, not checked again (for tests and metrics).
    found: AtomicU64,
}

impl std::fmt::Debug for AcceptedSignatures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "AcceptedSignatures {{ generation_len: {} }}",
            self.generation_len
        )
    }
}

impl AcceptedSignatures {
    /// An empty record keeping between `generation_len` and twice that many verdicts.
    pub fn new(generation_len: usize) -> AcceptedSignatures {
        AcceptedSignatures {
            generation_len: generation_len.max(1),
            generations: Mutex::new([HashSet::new(), HashSet::new()]),
            found: AtomicU64::new(0),
        }
    }

    /// Per item, whether it is accepted: [`verify_each_parallel`] over the items not already
    /// recorded as accepted, recording the newly accepted ones.
    pub fn verify_each_parallel(&self, items: &[SignedItem<'_>], threads: usize) -> Vec<bool> {
        let digests: Vec<Hash> = items.iter().map(verdict_key).collect();
        let known: Vec<bool> = {
            let generations = self.lock();
            digests
                .iter()
                .map(|digest| generations.iter().any(|set| set.contains(digest)))
                .collect()
        };
        let unknown: Vec<SignedItem<'_>> = items
            .iter()
            .zip(&known)
            .filter(|(_, known)| !**known)
            .map(|(item, _)| *item)
            .collect();
        let found = (items.len() - unknown.len()) as u64;
        self.found.fetch_add(found, Ordering::Relaxed);
        let mut fresh = verify_each_parallel(&unknown, threads).into_iter();
        let verdicts: Vec<bool> = known
            .iter()
            .map(|known| *known || fresh.next().unwrap_or(false))
            .collect();
        let mut generations = self.lock();
        for (digest, (accepted, known)) in digests.iter().zip(verdicts.iter().zip(&known)) {
            if *accepted && !*known {
                if generations[0].len() >= self.generation_len {
                    generations[1] = std::mem::take(&mut generations[0]);
                }
                generations[0].insert(*digest);
            }
        }
        verdicts
    }

    /// How many items were answered from the record so far, without a check.
    pub fn found(&self) -> u64 {
        self.found.load(Ordering::Relaxed)
    }

    /// Verdicts recorded (at most twice the generation length).
    pub fn len(&self) -> usize {
        self.lock().iter().map(HashSet::len).sum()
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, [HashSet<Hash>; 2]> {
        // A panic while holding the lock leaves whole sets behind: still sound.
        self.generations
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// What identifies a verdict: the key, the signature and the message, with their lengths
/// fixed (32, 64) so the concatenation is unambiguous.
fn verdict_key(item: &SignedItem<'_>) -> Hash {
    let (message, key, signature) = item;
    let mut hasher = Hasher::new(domain::SIGNATURE_VERDICT);
    hasher.update(key.as_bytes());
    hasher.update(signature.as_bytes());
    hasher.update(message);
    hasher.finalize()
}
