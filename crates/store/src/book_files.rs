//! Book snapshots as files beside `data.mdb`, written by a thread off the block path (with
//! [`crate::StoreOptions::checkpoint_in_background`], what a node uses).
//!
//! Why: a book snapshot holds every open offer (40 bytes each). Written in the block's own
//! LMDB transaction it cost the block path the copy and the commit's `fsync` of it every
//! [`crate::StoreOptions::book_snapshot_interval_blocks`] blocks: 36 MB at 900k open offers,
//! 400 MB at 10M. Now the block path shares the state's carried books
//! ([`walras_engine::ExchangeState::share_books`]: a reference count per chunk) and this
//! module's thread writes them. The block is durable first; a crash before the file is whole
//! leaves no snapshot at that height, and an explanation starts from an older one (as exact,
//! only longer to replay).
//!
//! Layout: `DIR/books/HHHHHHHHHHHHHHHHHHHH.books` (height in 20 digits, so names sort as
//! heights), written as `….books.tmp`, synced in slices, renamed, folder synced:
//!
//! ```text
//! magic "walras-books/1" ‖ height:u64
//! per pair holding offers, in pair order:
//!     code:u32 (sell << 16 | buy) ‖ offers:u32 ‖ hash:32 ‖ offers × (limit:u128 account:u64 id:u64 amount:u64)
//! end:u32 = u32::MAX ‖ pairs:u32
//! ```
//!
//! All integers big-endian. Each pair's hash is BLAKE2b-256 in the domain
//! `walras/books` over `height ‖ code ‖ its offers`, so a reader checks the one pair it
//! reads, not the whole file.
//!
//! **Retention.** A snapshot is O(open offers) bytes (400 MB at 10M), one every 1,024 blocks by
//! default: kept forever, a node under load for a month would hold thousands. After each file
//! it writes, the book thread thins the older ones ([`thinned_out`]): the newer a file, the
//! denser they are kept, so a few dozen files cover any history (about
//! [`SPACING_PER_AGE`] per doubling of the chain's height) while the newest file at or below
//! any height stays within about 0.3 of that height's age (plus one interval): what an
//! explanation of an offer created then replays, against one interval with every file kept.
//! The queue to the thread holds [`QUEUED_MAX`] snapshots: a snapshot due while that many wait
//! is skipped (each queued snapshot shares the state's book chunks, which the block path then
//! copies when it edits them, so a thread that fell behind would cost a copy of the books per
//! snapshot waiting).

use crate::checkpoint_files::SLICE_BYTES;
use crate::height_files::{io_error, sync_folder, Kind};
use crate::StoreError;
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use walras_crypto::{Domain, Hash, Hasher};
use walras_engine::{BookSnapshot, BOOK_OFFER_BYTES};
use walras_types::codec::Reader;
use walras_types::{AccountId, OfferId, OfferKey, PairId, Price};

/// The folder of book snapshot files inside the store's directory.
const BOOKS_DIR: &str = "books";
const FILES: Kind = Kind {
    suffix: ".books",
    temporary_suffix: ".books.tmp",
    listing: "listing book snapshot files",
    deleting_partial: "deleting a partial book snapshot file",
};
const MAGIC: &[u8] = b"walras-books/1";
/// The code that ends the pairs (no pair has it: assets are fewer than 2^16 - 1).
const END: u32 = u32::MAX;
const SECTION_DOMAIN: Domain = Domain::new("walras/books");

/// The book snapshot folder of the store in `dir`.
pub(crate) fn folder(dir: &Path) -> PathBuf {
    dir.join(BOOKS_DIR)
}

pub(crate) fn pair_code(pair: PairId) -> u32 {
    u32::from(pair.sell.0) << 16 | u32::from(pair.buy.0)
}

fn section_hash(height: u64, code: u32, offers: &[u8]) -> Hash {
    let mut hasher = Hasher::new(SECTION_DOMAIN);
    hasher
        .update(&height.to_be_bytes())
        .update(&code.to_be_bytes())
        .update(offers);
    hasher.finalize()
}

/// Snapshots waiting for the book thread at most (besides the one it writes).
const QUEUED_MAX: usize = 2;

/// The files' spacing is at most their age (in snapshot intervals from the newest) over this.
const SPACING_PER_AGE: u64 = 4;

/// Of the snapshot files at `heights` (any order), those the retention rule removes (see the
/// module documentation), for snapshots every `interval` blocks: with `s` a file's height in
/// intervals and `age` its distance in intervals from the newest, a file stays when `s` is a
/// multiple of the largest power of two at most `age / SPACING_PER_AGE` (1 when that is 0).
/// The rule only tightens as the newest grows, so a file it removes would never be kept again.
pub(crate) fn thinned_out(heights: &[u64], interval: u64) -> Vec<u64> {
    let interval = interval.max(1);
    let Some(newest) = heights.iter().max().map(|height| height / interval) else {
        return Vec::new();
    };
    heights
        .iter()
        .copied()
        .filter(|height| {
            let index = height / interval;
            let spacing_log2 = ((newest - index) / SPACING_PER_AGE)
                .checked_ilog2()
                .unwrap_or(0);
            index.trailing_zeros() < spacing_log2
        })
        .collect()
}

/// Removes the files of `folder` that [`thinned_out`] names; returns how many.
fn thin(folder: &Path, interval: u64) -> Result<usize, StoreError> {
    let removed = thinned_out(&FILES.heights(folder)?, interval);
    for height in &removed {
        let path = folder.join(FILES.file_name(*height));
        fs::remove_file(&path)
            .map_err(|error| io_error("removing an old book snapshot file", &path, error))?;
    }
    if !removed.is_empty() {
        sync_folder(folder)?;
    }
    Ok(removed.len())
}

/// The newest snapshot file's height below `height` (`None`: none).
pub(crate) fn newest_below(folder: &Path, height: u64) -> Result<Option<u64>, StoreError> {
    Ok(FILES
        .heights(folder)?
        .into_iter()
        .find(|found| *found < height))
}

/// Writes `snapshot` as the file of its height, durably; a failure removes the partial file.
pub(crate) fn write(folder: &Path, snapshot: &BookSnapshot) -> Result<(), StoreError> {
    fs::create_dir_all(folder)
        .map_err(|error| io_error("creating the book snapshot folder", folder, error))?;
    let height = snapshot.height();
    let path = folder.join(FILES.file_name(height));
    let temporary = folder.join(FILES.temporary_name(height));
    if let Err(error) = write_synced(&temporary, snapshot) {
        let _ = fs::remove_file(&temporary);
        return Err(error);
    }
    fs::rename(&temporary, &path)
        .map_err(|error| io_error("naming a book snapshot file", &path, error))?;
    sync_folder(folder)
}

/// Writes the file's bytes into `path`, a slice at a time, each synced before the next (so
/// the kernel never holds much of it dirty ahead of a block's commit).
fn write_synced(path: &Path, snapshot: &BookSnapshot) -> Result<(), StoreError> {
    let action = "writing a book snapshot file";
    let mut file = File::create(path).map_err(|error| io_error(action, path, error))?;
    let height = snapshot.height();
    let mut pending = Vec::with_capacity(SLICE_BYTES);
    pending.extend_from_slice(MAGIC);
    pending.extend_from_slice(&height.to_be_bytes());
    let mut pairs: u32 = 0;
    let mut failure = None;
    let flush = |pending: &mut Vec<u8>, file: &mut File| -> Result<(), std::io::Error> {
        file.write_all(pending)?;
        file.sync_data()?;
        pending.clear();
        Ok(())
    };
    let encoded = snapshot.encode_each(|pair, offers| {
        if failure.is_some() {
            return;
        }
        let code = pair_code(pair);
        let count = u32::try_from(offers.len() / BOOK_OFFER_BYTES)
            .expect("a book's offers are counted in u32 (the checkpoint's bound)");
        pending.extend_from_slice(&code.to_be_bytes());
        pending.extend_from_slice(&count.to_be_bytes());
        pending.extend_from_slice(section_hash(height, code, offers).as_bytes());
        for part in offers.chunks(SLICE_BYTES) {
            pending.extend_from_slice(part);
            if pending.len() >= SLICE_BYTES {
                if let Err(error) = flush(&mut pending, &mut file) {
                    failure = Some(error);
                    return;
                }
            }
        }
        pairs += 1;
    });
    if let Some(error) = failure {
        return Err(io_error(action, path, error));
    }
    encoded.map_err(|error| StoreError::CorruptBookSnapshot {
        height,
        reason: error.to_string(),
    })?;
    pending.extend_from_slice(&END.to_be_bytes());
    pending.extend_from_slice(&pairs.to_be_bytes());
    flush(&mut pending, &mut file).map_err(|error| io_error(action, path, error))?;
    file.sync_all()
        .map_err(|error| io_error(action, path, error))
}

/// The book of `pair` in the snapshot file at `height` (offer key → amount left; empty when
/// the pair held none), its section checked against its hash; `None` when there is no such
/// file (the book thread may have thinned it out since it was listed). A file that does not
/// parse or whose section fails its hash is [`StoreError::CorruptBookSnapshot`].
pub(crate) fn pair_book(
    folder: &Path,
    height: u64,
    pair: PairId,
) -> Result<Option<BTreeMap<OfferKey, u64>>, StoreError> {
    let path = folder.join(FILES.file_name(height));
    let file = match File::open(&path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(io_error("opening a book snapshot file", &path, error)),
    };
    // SAFETY: read-only and private to this call. Only this store's book thread writes these
    // files, under a temporary name renamed when complete, so a mapped file is never written
    // or truncated while mapped (an outside process doing so is a damaged store, as for
    // `data.mdb`, which LMDB maps the same way). An empty file cannot be mapped: it is
    // refused as truncated below.
    let map = match file.metadata().map(|metadata| metadata.len()) {
        Ok(0) => None,
        Ok(_) => Some(
            unsafe { memmap2::Mmap::map(&file) }
                .map_err(|error| io_error("mapping a book snapshot file", &path, error))?,
        ),
        Err(error) => return Err(io_error("reading a book snapshot file", &path, error)),
    };
    let bytes: &[u8] = map.as_deref().unwrap_or(&[]);
    let corrupt = |reason: &str| StoreError::CorruptBookSnapshot {
        height,
        reason: format!("{}: {reason}", path.display()),
    };
    let mut rest = bytes
        .strip_prefix(MAGIC)
        .ok_or_else(|| corrupt("not a book snapshot file"))?;
    let stored_height = take_u64(&mut rest).ok_or_else(|| corrupt("truncated"))?;
    if stored_height != height {
        return Err(corrupt("it names another height"));
    }
    let wanted = pair_code(pair);
    let mut pairs: u32 = 0;
    let mut found = BTreeMap::new();
    let mut last_code = None;
    loop {
        let code = take_u32(&mut rest).ok_or_else(|| corrupt("truncated"))?;
        if code == END {
            let count = take_u32(&mut rest).ok_or_else(|| corrupt("truncated"))?;
            if count != pairs || !rest.is_empty() {
                return Err(corrupt("its end does not match its pairs"));
            }
            return Ok(Some(found));
        }
        if last_code.is_some_and(|last| code <= last) {
            return Err(corrupt("pairs out of order"));
        }
        last_code = Some(code);
        let count = take_u32(&mut rest).ok_or_else(|| corrupt("truncated"))? as usize;
        let hash = take(&mut rest, 32).ok_or_else(|| corrupt("truncated"))?;
        let offers =
            take(&mut rest, count * BOOK_OFFER_BYTES).ok_or_else(|| corrupt("truncated"))?;
        if code == wanted {
            if section_hash(height, code, offers).as_bytes() != hash {
                return Err(corrupt("a book fails its hash"));
            }
            found = decode_book(offers).ok_or_else(|| corrupt("a book does not decode"))?;
        }
        pairs += 1;
    }
}

fn take<'b>(rest: &mut &'b [u8], length: usize) -> Option<&'b [u8]> {
    if rest.len() < length {
        return None;
    }
    let (head, tail) = rest.split_at(length);
    *rest = tail;
    Some(head)
}

fn take_u32(rest: &mut &[u8]) -> Option<u32> {
    take(rest, 4).map(|bytes| u32::from_be_bytes(bytes.try_into().expect("4 bytes")))
}

fn take_u64(rest: &mut &[u8]) -> Option<u64> {
    take(rest, 8).map(|bytes| u64::from_be_bytes(bytes.try_into().expect("8 bytes")))
}

/// The thread that writes book snapshot files, in the order they are handed to it, then thins
/// the older ones. A snapshot that cannot be written is logged and skipped: explanations then
/// start from an older one, as exact (see the module documentation).
pub(crate) struct BookWriter {
    queue: Option<std::sync::mpsc::SyncSender<BookSnapshot>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What became of a snapshot handed to the [`BookWriter`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Queued {
    Yes,
    /// [`QUEUED_MAX`] snapshots are already waiting.
    Full,
    /// The thread is gone.
    Gone,
}

impl BookWriter {
    /// Starts the thread writing into `folder` the snapshots taken every `interval` blocks.
    pub(crate) fn start(folder: PathBuf, interval: u64) -> BookWriter {
        let (queue, snapshots) = std::sync::mpsc::sync_channel::<BookSnapshot>(QUEUED_MAX);
        let thread = std::thread::Builder::new()
            .name("walras-books".into())
            .spawn(move || {
                if let Err(error) = FILES.remove_temporaries(&folder) {
                    tracing::error!("book snapshots: {error}");
                }
                for snapshot in snapshots {
                    let clock = std::time::Instant::now();
                    match write(&folder, &snapshot) {
                        Ok(()) => tracing::info!(
                            "book snapshot at height {} written in {:.0} ms off the block path",
                            snapshot.height(),
                            clock.elapsed().as_secs_f64() * 1e3
                        ),
                        Err(error) => tracing::error!(
                            "book snapshot at height {} not written ({error}); explanations start from an older one",
                            snapshot.height()
                        ),
                    }
                    drop(snapshot);
                    match thin(&folder, interval) {
                        Ok(0) => {}
                        Ok(removed) => tracing::info!("{removed} older book snapshot files removed"),
                        Err(error) => tracing::error!("book snapshots: {error}"),
                    }
                }
            })
            .expect("cannot start the book snapshot thread");
        BookWriter {
            queue: Some(queue),
            thread: Some(thread),
        }
    }

    /// Queues `snapshot` to be written, unless one is already waiting.
    pub(crate) fn send(&self, snapshot: BookSnapshot) -> Queued {
        use std::sync::mpsc::TrySendError;
        match self.queue.as_ref().map(|queue| queue.try_send(snapshot)) {
            Some(Ok(())) => Queued::Yes,
            Some(Err(TrySendError::Full(_))) => Queued::Full,
            Some(Err(TrySendError::Disconnected(_))) | None => Queued::Gone,
        }
    }
}

impl Drop for BookWriter {
    /// Lets the thread write what was queued, so a clean stop keeps it.
    fn drop(&mut self) {
        self.queue.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A book as stored: per offer in key order, limit (u128), account, id, amount left; `None`
/// when the bytes are not whole offers.
pub(crate) fn decode_book(bytes: &[u8]) -> Option<BTreeMap<OfferKey, u64>> {
    if !bytes.len().is_multiple_of(BOOK_OFFER_BYTES) {
        return None;
    }
    let mut reader = Reader::new(bytes);
    let mut book = BTreeMap::new();
    while !reader.is_empty() {
        let limit: [u8; 16] = reader.array().ok()?;
        let key = OfferKey {
            min_price: Price(u128::from_be_bytes(limit)),
            account: AccountId(reader.u64().ok()?),
            id: OfferId(reader.u64().ok()?),
        };
        book.insert(key, reader.u64().ok()?);
    }
    Some(book)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const INTERVAL: u64 = 1_024;

    /// The files left after snapshots at every interval up to `newest` intervals, thinned after
    /// each as the book thread does, in ascending height.
    fn kept_after(newest: u64) -> Vec<u64> {
        let mut kept: Vec<u64> = Vec::new();
        for index in 1..=newest {
            kept.push(index * INTERVAL);
            let removed = thinned_out(&kept, INTERVAL);
            kept.retain(|height| !removed.contains(height));
        }
        kept
    }

    /// Trigger: a node kept every book snapshot file (400 MB each at 10M open offers, one every
    /// 1,024 blocks), so its disk filled with history. Thinned after each write, the files of a
    /// long chain are a few dozen, the newest are all kept, and for any height the newest file
    /// at or below it (where an explanation of an offer created there starts replaying) is
    /// within 0.3 of that height's age, plus one interval.
    #[test]
    fn old_book_snapshots_are_thinned_to_a_few_dozen_yet_stay_near_any_height() {
        for newest in [1, 7, 8, 9, 100, 1_000, 5_000] {
            let kept = kept_after(newest);
            let newest_height = newest * INTERVAL;
            assert!(
                kept.len() as u64 <= 4 * (64 - newest.leading_zeros() as u64) + 8,
                "{} files kept after {newest} snapshots",
                kept.len()
            );
            for index in newest.saturating_sub(2 * SPACING_PER_AGE - 1).max(1)..=newest {
                assert!(kept.contains(&(index * INTERVAL)), "a recent file removed");
            }
            for height in (1..=newest_height).step_by(97) {
                let below = kept
                    .iter()
                    .rev()
                    .find(|kept| **kept <= height)
                    .copied()
                    .unwrap_or(0);
                let replayed = height - below;
                let age = newest_height - height;
                assert!(
                    10 * replayed <= 3 * age + 10 * INTERVAL,
                    "height {height}: the newest file at or below is {below} ({replayed} blocks \
                     back at an age of {age}), after {newest} snapshots"
                );
            }
        }
        assert!(kept_after(5_000).len() < 60, "a few dozen files");
    }

    proptest! {
        /// The rule only tightens as the newest file grows: a file removed is never one the
        /// rule would keep later (removal is final, so a kept file must not depend on one
        /// removed before).
        #[test]
        fn a_book_snapshot_file_thinned_out_stays_out(
            index in 1u64..100_000,
            newest in 1u64..100_000,
            later in 0u64..100_000,
        ) {
            let newest = newest.max(index);
            let removed_now = !thinned_out(&[index * INTERVAL, newest * INTERVAL], INTERVAL).is_empty();
            let removed_later = !thinned_out(
                &[index * INTERVAL, (newest + later) * INTERVAL],
                INTERVAL,
            )
            .is_empty();
            prop_assert!(!removed_now || removed_later);
        }
    }
}
