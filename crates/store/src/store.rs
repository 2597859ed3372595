//! The block log and its checkpoints: one LMDB environment (see the crate documentation).

use crate::book_files;
use crate::checkpoint_files;
use crate::error::disk_is_full;
use crate::offer_index::{self, OfferTouch};
use crate::StoreError;
use heed::types::Bytes;
use heed::{CommitOrAbort, Database, DatabaseOpener, Env, EnvOpenOptions, RoTxn, RwTxn, WithTls};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use walras_crypto::Hash;
use walras_engine::{
    Block, BlockHeader, CheckpointDraft, ClearingReport, DropReason, ExchangeState, OfferFill,
    PieceTable,
};
use walras_types::codec::{self, Reader, Writer};
use walras_types::genesis::{Genesis, GenesisSummary};
use walras_types::{AccountId, AssetId, OfferId, OfferKey, PairId};

/// The on-disk format and its version, stored under `meta/format`.
pub const FORMAT: &[u8] = b"walras-store/2";
/// Default LMDB map size: the most the store can hold (address space, not disk).
pub const DEFAULT_MAP_SIZE_BYTES: usize = 16 << 30;

const FORMAT_KEY: &[u8] = b"format";
const GENESIS_KEY: &[u8] = b"genesis";
/// Prefix of the keys that applications store in `meta` ([`BlockStore::put_app_meta`]).
const APP_META_PREFIX: &[u8] = b"app/";
/// In `meta` of a store whose `offers` indexes every stored block, as the builds before the
/// slices wrote it (see [`crate::offer_index`]). This build removes it: such a build opening a
/// store of this one finds no stamp and indexes every stored block again, instead of trusting
/// a table that lacks the newest blocks' entries.
const OFFER_INDEX_KEY: &[u8] = b"offer_index";
/// In `meta`: the height (u64 big-endian) up to which `offers` holds every block; the entries
/// of the blocks above it are pending in memory (see [`crate::offer_index`]).
const OFFER_INDEX_THROUGH_KEY: &[u8] = b"offer_index_through";
/// Default [`StoreOptions::offer_index_flush_blocks`]: at 2,000-transaction blocks the pending
/// entries are at most ~80k (a few MB in memory, what the next open derives again after a
/// crash).
pub const DEFAULT_OFFER_INDEX_FLUSH_BLOCKS: u64 = 32;
/// Pending offer index entries at most: past it a block's transaction writes every slice
/// (blocks far larger than the trading mix's at 16 cores, ~20k entries each, reach it).
const OFFER_INDEX_PENDING_ENTRIES_MAX: usize = 1_000_000;
/// `meta`, `blocks`, `headers`, `results`, `checkpoints`, `offers`, `books`.
const DATABASE_COUNT_MAX: u32 = 7;
/// Default [`StoreOptions::book_snapshot_interval_blocks`].
pub const DEFAULT_BOOK_SNAPSHOT_INTERVAL_BLOCKS: u64 = 1_024;
/// The `books` key of the entry that marks a snapshot whole (after every pair's entry).
const BOOK_SNAPSHOT_DONE: u32 = u32::MAX;
/// Checkpoints kept: the newest, and the one before it to fall back on if the newest is damaged.
const CHECKPOINTS_KEPT: usize = 2;
/// Default [`StoreOptions::checkpoint_interval_blocks`].
pub const DEFAULT_CHECKPOINT_INTERVAL_BLOCKS: u64 = 1_000;
const _: () = assert!(DEFAULT_CHECKPOINT_INTERVAL_BLOCKS > 0);
/// Default [`StoreOptions::checkpoint_interval_transactions`]: a restart replays fewer than
/// this many transactions (on the 2-core VM, `walras replay` re-executes ~40k signed
/// transactions a second, so a few seconds), whatever the block sizes. Before it, checkpoints
/// came every 1,000 blocks only, and 142 blocks of ~11k transactions took 62 s to replay.
pub const DEFAULT_CHECKPOINT_INTERVAL_TRANSACTIONS: u64 = 100_000;
/// Default [`StoreOptions::checkpoint_interval_seconds`]: under a light load (a block every
/// few seconds, a few transactions each) neither rule above comes for a long while, and the
/// newest checkpoint would be that old: a restart then replays little work but every block
/// since, and a copy of the store taken for a backup or a new node starts that far back.
pub const DEFAULT_CHECKPOINT_INTERVAL_SECONDS: u64 = 300;
/// The `previous` of block 1: no header precedes it.
const GENESIS_PREVIOUS: Hash = Hash([0; 32]);
const HEADER_ENTRY_BYTES: usize = 64;

/// How to open a store.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// LMDB map size; a multiple of the OS page size.
    pub map_size_bytes: usize,
    /// [`BlockStore::append_with_state`] stores a checkpoint of the state with every block whose
    /// height is a multiple of this (at least 1): a restart replays fewer blocks than this.
    pub checkpoint_interval_blocks: u64,
    /// ... and with the block that brings the transactions since the last checkpoint (or since
    /// the restart's replay began) to at least this many (at least 1): the work a restart
    /// replays is bounded whatever the block sizes.
    pub checkpoint_interval_transactions: u64,
    /// ... and with the first block appended at least this many seconds after the last
    /// checkpoint (or after the store was opened; 0: no rule by time): how old the newest
    /// checkpoint can be is bounded whatever the load. Local to this store: which blocks are
    /// checkpointed decides nothing any other node sees.
    pub checkpoint_interval_seconds: u64,
    /// Write checkpoints on a thread of the store's own, off the block path: the appending
    /// thread only copies the state ([`ExchangeState::encode_checkpoint_unsealed`]); the
    /// checksum and the write, as a file in the store's `checkpoints/` folder (not LMDB,
    /// whose one writer the next block needs; see [`crate::checkpoint_files`]), happen on the
    /// writer thread. A checkpoint that falls due while the previous one is still being
    /// written is put off to the next block (the transaction count keeps growing meanwhile). A
    /// crash before the file is whole leaves the previous checkpoint to recover from. Off: the
    /// checkpoint is in the block's own transaction.
    pub checkpoint_in_background: bool,
    /// [`BlockStore::append_with_state`] also stores, with every block whose height is a
    /// multiple of this, every pair's book after it (`books`; 0: never): an explanation then
    /// replays at most this many blocks before the offer's creation instead of every block
    /// from 1 ([`BlockStore::pair_book_before`]). A read model's cache: O(open offers) bytes
    /// every this many blocks, written in the block's transaction, or with
    /// [`Self::checkpoint_in_background`] as a file by the store's book thread after the block
    /// committed (the block path shares the state's carried books instead of copying them).
    pub book_snapshot_interval_blocks: u64,
    /// The offer index's entries wait in memory for at most this many blocks (at least 1: 1
    /// writes each block's entries with it): each block's transaction writes those of one
    /// slice of the offer ids, a batch of this many blocks' (see [`crate::offer_index`]).
    pub offer_index_flush_blocks: u64,
}

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions {
            map_size_bytes: DEFAULT_MAP_SIZE_BYTES,
            checkpoint_interval_blocks: DEFAULT_CHECKPOINT_INTERVAL_BLOCKS,
            checkpoint_interval_transactions: DEFAULT_CHECKPOINT_INTERVAL_TRANSACTIONS,
            checkpoint_interval_seconds: DEFAULT_CHECKPOINT_INTERVAL_SECONDS,
            checkpoint_in_background: false,
            book_snapshot_interval_blocks: DEFAULT_BOOK_SNAPSHOT_INTERVAL_BLOCKS,
            offer_index_flush_blocks: DEFAULT_OFFER_INDEX_FLUSH_BLOCKS,
        }
    }
}

/// When a block falls due for a checkpoint (see [`StoreOptions`]): a pure rule, time given.
#[derive(Clone, Copy, Debug)]
struct CheckpointRule {
    interval_blocks: u64,
    interval_transactions: u64,
    /// 0: no rule by time.
    interval_seconds: u64,
}

impl CheckpointRule {
    /// Whether the block at `height`, bringing the transactions since the last checkpoint to
    /// `transactions_since`, `elapsed` after the last checkpoint, is checkpointed.
    fn is_due(&self, height: u64, transactions_since: u64, elapsed: Duration) -> bool {
        height.is_multiple_of(self.interval_blocks)
            || transactions_since >= self.interval_transactions
            || (self.interval_seconds > 0 && elapsed.as_secs() >= self.interval_seconds)
    }
}

/// What the `headers` database holds per height.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderEntry {
    pub header_hash: Hash,
    pub state_root: Hash,
}

impl HeaderEntry {
    pub(crate) fn of(header: &BlockHeader) -> HeaderEntry {
        HeaderEntry {
            header_hash: header.hash(),
            state_root: header.state_root,
        }
    }

    fn encode(&self) -> [u8; HEADER_ENTRY_BYTES] {
        let mut out = [0; HEADER_ENTRY_BYTES];
        out[..32].copy_from_slice(self.header_hash.as_bytes());
        out[32..].copy_from_slice(self.state_root.as_bytes());
        out
    }

    fn decode(height: u64, bytes: &[u8]) -> Result<HeaderEntry, StoreError> {
        if bytes.len() != HEADER_ENTRY_BYTES {
            return Err(StoreError::CorruptHeaderEntry {
                height,
                reason: format!("{} bytes, expected {HEADER_ENTRY_BYTES}", bytes.len()),
            });
        }
        let hash = |range: &[u8]| Hash(range.try_into().unwrap_or([0; 32]));
        Ok(HeaderEntry {
            header_hash: hash(&bytes[..32]),
            state_root: hash(&bytes[32..]),
        })
    }
}

/// The node's block log. Writers are serialised by LMDB; readers never block.
pub struct BlockStore {
    env: Env,
    dir: PathBuf,
    map_size_bytes: usize,
    /// When a block falls due for a checkpoint.
    checkpoint_rule: CheckpointRule,
    /// Transactions in the blocks stored after the newest checkpoint (as far as this process
    /// knows: recovery sets it to what it replayed).
    transactions_since_checkpoint: AtomicU64,
    /// When the newest checkpoint was taken by this process (at first: when the store was
    /// opened).
    last_checkpoint_at: Mutex<Instant>,
    meta: Table,
    blocks: Table,
    headers: Table,
    results: Table,
    checkpoints: Table,
    /// The per-offer index ([`crate::offer_index`]).
    offers: Table,
    /// The index entries of the blocks above the `offers` table's watermark. Locked for each
    /// block's whole write (so that a reader sees a block's entries when it sees the block)
    /// and by readers around their read transaction.
    pending_offers: Mutex<offer_index::Pending>,
    /// Books after every [`StoreOptions::book_snapshot_interval_blocks`]th block.
    books: Table,
    book_snapshot_interval_blocks: u64,
    /// `Some` with [`StoreOptions::checkpoint_in_background`].
    writer: Option<CheckpointWriter>,
    /// Writes book snapshots off the block path; `Some` with
    /// [`StoreOptions::checkpoint_in_background`].
    book_writer: Option<book_files::BookWriter>,
}

/// The thread that assembles, seals and writes checkpoints off the block path, as files
/// ([`crate::checkpoint_files`]): it takes no lock that the block path needs. The block path
/// hands it a draft ([`ExchangeState::draft_checkpoint`]) against the checkpoint it wrote
/// last, whose unchanged account pieces it copies from that file.
struct CheckpointWriter {
    queue: Option<std::sync::mpsc::SyncSender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// True from when a checkpoint is queued until its file is durable (or failed).
    busy: Arc<AtomicBool>,
    /// The last write that failed, for [`BlockStore::checkpoint_failure`].
    failure: Arc<Mutex<Option<String>>>,
    /// Height of the newest checkpoint this thread wrote (0: none yet).
    written: Arc<AtomicU64>,
    /// Capacity of the buffer the thread keeps between checkpoints (see below).
    buffer_bytes: Arc<AtomicU64>,
    /// The checkpoint file the next draft may be drafted against and where its pieces lie
    /// in it (`None`: none was written or adopted yet, or the last write failed).
    base: Arc<Mutex<Option<(u64, PieceTable)>>>,
}

/// A checkpoint for the writer thread, and how long the block path took to draft it (for
/// the log line).
struct Job {
    draft: CheckpointDraft,
    copy_ms: f64,
}

fn milliseconds(duration: std::time::Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

impl CheckpointWriter {
    fn start(env: Env, checkpoints: Table, folder: PathBuf) -> CheckpointWriter {
        let (queue, jobs) = std::sync::mpsc::sync_channel::<Job>(1);
        let busy = Arc::new(AtomicBool::new(false));
        let failure = Arc::new(Mutex::new(None));
        let written = Arc::new(AtomicU64::new(0));
        let buffer_bytes = Arc::new(AtomicU64::new(0));
        let base = Arc::new(Mutex::new(None));
        let thread = {
            let (busy, failure, written, buffer_bytes, base) = (
                busy.clone(),
                failure.clone(),
                written.clone(),
                buffer_bytes.clone(),
                base.clone(),
            );
            std::thread::Builder::new()
                .name("walras-checkpoint".into())
                .spawn(move || {
                    let record = |failed: String| {
                        *failure.lock().unwrap_or_else(PoisonError::into_inner) = Some(failed)
                    };
                    if let Err(error) = checkpoint_files::remove_temporaries(&folder) {
                        record(error.to_string());
                    }
                    // One buffer for every checkpoint's bytes: each is about as large as the
                    // last, and a fresh one costs its pages' faults (at 10M accounts, 1.3 GB
                    // zeroed by the kernel in 3-4 s of CPU on 2 cores, every checkpoint). It
                    // is held between checkpoints: memory of the state's size, as RSS shows.
                    let mut buffer = Vec::new();
                    for Job { draft, copy_ms } in jobs {
                        let summary = DraftSummary::of(&draft);
                        let height = summary.height;
                        let drafted_against = lock(&base).take();
                        match write_draft(&folder, draft, drafted_against.as_ref(), &mut buffer) {
                            Ok((table, parts)) => {
                                written.store(height, Ordering::Release);
                                *lock(&base) = Some((height, table));
                                log_written(&summary, copy_ms, &parts);
                                if let Err(error) =
                                    drop_lmdb_checkpoints(&env, checkpoints, &folder)
                                {
                                    record(error.to_string());
                                }
                            }
                            Err(error) => record(format!("checkpoint at height {height}: {error}")),
                        }
                        buffer_bytes.store(buffer.capacity() as u64, Ordering::Relaxed);
                        busy.store(false, Ordering::Release);
                    }
                })
                .expect("cannot start the checkpoint writer thread")
        };
        CheckpointWriter {
            queue: Some(queue),
            thread: Some(thread),
            busy,
            failure,
            written,
            buffer_bytes,
            base,
        }
    }

    /// Hands the thread a draft (`draft` is given the height of the checkpoint to draft
    /// against) unless it is still writing the previous checkpoint.
    fn offer(&self, draft: impl FnOnce(Option<u64>) -> CheckpointDraft) -> bool {
        let Some(queue) = &self.queue else {
            return false;
        };
        if self.busy.swap(true, Ordering::AcqRel) {
            return false;
        }
        let base = lock(&self.base).as_ref().map(|(height, _)| *height);
        let clock = Instant::now();
        let draft = draft(base);
        let copy_ms = milliseconds(clock.elapsed());
        if queue.send(Job { draft, copy_ms }).is_err() {
            self.busy.store(false, Ordering::Release);
            return false;
        }
        true
    }
}

/// What writing one checkpoint took.
struct Written {
    bytes: usize,
    assemble_ms: f64,
    seal_ms: f64,
    write_ms: f64,
}

/// What the log line says of a draft, kept after the draft is dropped (see [`write_draft`]).
struct DraftSummary {
    height: u64,
    base: Option<u64>,
    copied_bytes: usize,
}

impl DraftSummary {
    fn of(draft: &CheckpointDraft) -> DraftSummary {
        DraftSummary {
            height: draft.height(),
            base: draft.base(),
            copied_bytes: draft.copied_bytes(),
        }
    }
}

/// One line per checkpoint: its size, and what it cost on and off the block path.
fn log_written(draft: &DraftSummary, copy_ms: f64, parts: &Written) {
    let against = match draft.base {
        Some(base) => format!(" (against the checkpoint at {base})"),
        None => String::new(),
    };
    tracing::info!(
        "checkpoint at height {}: {} MB; {} MB copied in {copy_ms:.0} ms on the block path{against}; assembled in {:.0} ms, sealed in {:.0} ms, written in {:.0} ms off it",
        draft.height,
        parts.bytes >> 20,
        draft.copied_bytes >> 20,
        parts.assemble_ms,
        parts.seal_ms,
        parts.write_ms,
    );
}

/// `mutex`'s value (a panic elsewhere does not make it wrong: each write replaces it whole).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Assembles `draft` (its unchanged pieces from the file `base` names, laid out as its table
/// says), seals it and writes it as a file; returns where its pieces lie in it.
///
/// The draft is dropped as soon as it is assembled: it shares the state's account chunks and
/// the carried books' chunks, and while it is held the block path copies each chunk it writes
/// instead of writing it in place. Sealing and writing the file need only the bytes, and take
/// longer the larger the state (the whole checkpoint hashed, then written and synced).
fn write_draft(
    folder: &Path,
    draft: CheckpointDraft,
    base: Option<&(u64, PieceTable)>,
    bytes: &mut Vec<u8>,
) -> Result<(PieceTable, Written), StoreError> {
    let clock = Instant::now();
    let height = draft.height();
    let refused = |reason: String| StoreError::CheckpointDraft { height, reason };
    let assembled = match (draft.base(), base) {
        (None, _) => Some(draft.assemble_into(None, bytes)),
        (Some(wanted), Some((height, table))) if wanted == *height => {
            checkpoint_files::with_file(folder, wanted, |base_bytes| {
                draft.assemble_into(Some((base_bytes, table)), bytes)
            })?
        }
        (Some(wanted), _) => {
            return Err(refused(format!(
                "it was drafted against the checkpoint at {wanted}, which the writer does not hold"
            )))
        }
    };
    let written_table = assembled
        .ok_or_else(|| refused("the checkpoint file it was drafted against is gone".into()))?
        .map_err(|error| refused(error.to_string()))?;
    drop(draft);
    let assembled_at = Instant::now();
    walras_engine::seal_checkpoint(bytes);
    let sealed_at = Instant::now();
    checkpoint_files::write(folder, height, bytes, CHECKPOINTS_KEPT)?;
    Ok((
        written_table,
        Written {
            bytes: bytes.len(),
            assemble_ms: milliseconds(assembled_at - clock),
            seal_ms: milliseconds(sealed_at - assembled_at),
            write_ms: milliseconds(sealed_at.elapsed()),
        },
    ))
}

impl Drop for CheckpointWriter {
    /// Lets the thread finish the checkpoint it holds, so a clean stop keeps it.
    fn drop(&mut self) {
        self.queue.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Once [`CHECKPOINTS_KEPT`] checkpoint files exist, deletes the checkpoints that LMDB still
/// holds (written in the block's transaction, or by a build before checkpoint files): they
/// are older than the files and would only take space. LMDB's writer is taken only when there
/// is one to delete.
fn drop_lmdb_checkpoints(env: &Env, checkpoints: Table, folder: &Path) -> Result<(), StoreError> {
    if checkpoint_files::heights(folder)?.len() < CHECKPOINTS_KEPT {
        return Ok(());
    }
    let stored = {
        let txn = env
            .read_txn()
            .map_err(StoreError::lmdb("listing checkpoints"))?;
        heights_in(checkpoints, &txn)?
    };
    if stored.is_empty() {
        return Ok(());
    }
    let mut txn = env
        .write_txn()
        .map_err(StoreError::lmdb("deleting old checkpoints"))?;
    for height in stored {
        checkpoints
            .delete(&mut txn, &height.to_be_bytes())
            .map_err(StoreError::lmdb("deleting an old checkpoint"))?;
    }
    txn.commit()
        .map_err(StoreError::lmdb("deleting old checkpoints"))
}

/// Heights of the checkpoints in `checkpoints`, newest first.
fn heights_in(checkpoints: Table, txn: &RoTxn) -> Result<Vec<u64>, StoreError> {
    let mut heights = Vec::new();
    let entries = checkpoints
        .rev_iter(txn)
        .map_err(StoreError::lmdb("listing checkpoints"))?;
    for entry in entries {
        let (key, _) = entry.map_err(StoreError::lmdb("listing checkpoints"))?;
        heights.push(decode_height(key)?);
    }
    Ok(heights)
}

/// The databases of a store, in this order: `meta`, `blocks`, `headers`, `results`,
/// `checkpoints`, `offers`, `books` (an array: heed turns an array of databases into `'static` ones on commit).
type Tables<'e> = [Database<'e, Bytes, Bytes>; DATABASE_COUNT_MAX as usize];

/// A database of the store, usable for the environment's whole life.
type Table = Database<'static, Bytes, Bytes>;
/// A database while the transaction that opens it is still running.
type OpeningTable<'e> = Database<'e, Bytes, Bytes>;

impl BlockStore {
    /// Opens the existing store in `dir` with default options.
    pub fn open(dir: &Path) -> Result<BlockStore, StoreError> {
        BlockStore::open_with(dir, &StoreOptions::default())
    }

    /// Opens the existing store in `dir`. Never creates one: refuses a directory without
    /// `data.mdb`, a `data.mdb` shorter than its own meta pages say (an empty one included),
    /// a store of another format, and one without a genesis.
    pub fn open_with(dir: &Path, options: &StoreOptions) -> Result<BlockStore, StoreError> {
        if !dir.join("data.mdb").is_file() {
            return Err(StoreError::NoStore {
                dir: dir.to_path_buf(),
            });
        }
        crate::file_check::check_data_file(dir)?;
        let env = open_env(dir, options)?;
        // A process killed inside a read transaction leaves its reader slot taken; freeing it
        // lets LMDB reuse the pages that reader pinned.
        env.clear_stale_readers()
            .map_err(StoreError::lmdb("clearing stale readers"))?;
        let txn = env
            .write_txn()
            .map_err(StoreError::lmdb("opening the store"))?;
        let opened = env.create_databases_and_commit(txn, |opener, txn| {
            let Some(meta) = open_meta(opener, txn, dir)? else {
                return Ok::<_, StoreError>(CommitOrAbort::Abort(StoreError::NotInitialized));
            };
            if meta
                .get(txn, GENESIS_KEY)
                .map_err(StoreError::lmdb("reading the genesis"))?
                .is_none()
            {
                return Ok(CommitOrAbort::Abort(StoreError::NotInitialized));
            }
            let tables = create_tables(opener, txn, meta)?;
            index_unindexed_blocks(&tables, txn)?;
            Ok(CommitOrAbort::Commit(tables))
        })?;
        let tables = match opened {
            CommitOrAbort::Commit(tables) => tables,
            CommitOrAbort::Abort(error) => return Err(error),
        };
        let derived = Instant::now();
        let pending = {
            let txn = env
                .read_txn()
                .map_err(StoreError::lmdb("opening the store"))?;
            pending_offer_entries(&tables, &txn, options.offer_index_flush_blocks)?
        };
        tracing::info!(
            "offer index: the entries of the {} blocks above its watermark {} derived in {} ms",
            pending.next_height() - 1 - pending.through,
            pending.through,
            derived.elapsed().as_millis()
        );
        Ok(BlockStore::new(env, dir, options, tables, pending))
    }

    /// Creates a store for the chain that `genesis` starts in `dir` (created if missing), with
    /// application values `app_meta` (see [`BlockStore::put_app_meta`]), all in one
    /// transaction: a crash leaves either the whole new store or no genesis in it. Refuses a
    /// directory that already has a `data.mdb`, whatever its size: an existing store is never
    /// re-initialised.
    pub fn create_with(
        dir: &Path,
        genesis: &Genesis,
        app_meta: &[(&str, &[u8])],
        options: &StoreOptions,
    ) -> Result<BlockStore, StoreError> {
        check_new_directory(dir)?;
        let env = open_env(dir, options)?;
        let txn = env
            .write_txn()
            .map_err(StoreError::lmdb("creating the store"))?;
        let created = env.create_databases_and_commit(txn, |opener, txn| {
            let meta = create_meta(opener, txn, dir)?;
            meta.put(txn, GENESIS_KEY, &genesis.encode())
                .map_err(StoreError::lmdb("storing the genesis"))?;
            for (key, value) in app_meta {
                meta.put(txn, &app_meta_key(key), value)
                    .map_err(StoreError::lmdb("storing application metadata"))?;
            }
            let tables = create_tables(opener, txn, meta)?;
            put_offer_index_through(meta, txn, 0)
                .map_err(StoreError::lmdb("stamping the offer index"))?;
            Ok::<_, StoreError>(CommitOrAbort::<_, Infallible>::Commit(tables))
        })?;
        let CommitOrAbort::Commit(tables) = created;
        let pending = offer_index::Pending::above(0, options.offer_index_flush_blocks);
        Ok(BlockStore::new(env, dir, options, tables, pending))
    }

    /// [`BlockStore::create_with`] with default options and no application values.
    pub fn create(dir: &Path, genesis: &Genesis) -> Result<BlockStore, StoreError> {
        BlockStore::create_with(dir, genesis, &[], &StoreOptions::default())
    }

    fn new(
        env: Env,
        dir: &Path,
        options: &StoreOptions,
        tables: Tables<'static>,
        pending_offers: offer_index::Pending,
    ) -> BlockStore {
        let [meta, blocks, headers, results, checkpoints, offers, books] = tables;
        let writer = options.checkpoint_in_background.then(|| {
            CheckpointWriter::start(env.clone(), checkpoints, checkpoint_files::folder(dir))
        });
        let book_writer = options.checkpoint_in_background.then(|| {
            let interval = options.book_snapshot_interval_blocks;
            book_files::BookWriter::start(book_files::folder(dir), interval)
        });
        BlockStore {
            writer,
            book_writer,
            env,
            dir: dir.to_path_buf(),
            map_size_bytes: options.map_size_bytes,
            checkpoint_rule: CheckpointRule {
                interval_blocks: options.checkpoint_interval_blocks.max(1),
                interval_transactions: options.checkpoint_interval_transactions.max(1),
                interval_seconds: options.checkpoint_interval_seconds,
            },
            transactions_since_checkpoint: AtomicU64::new(0),
            last_checkpoint_at: Mutex::new(Instant::now()),
            meta,
            blocks,
            headers,
            results,
            checkpoints,
            offers,
            pending_offers: Mutex::new(pending_offers),
            books,
            book_snapshot_interval_blocks: options.book_snapshot_interval_blocks,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The stored genesis (an open store always has one).
    pub fn genesis(&self) -> Result<Genesis, StoreError> {
        self.read_genesis(Genesis::decode)
    }

    /// The stored genesis's assets, their names and its number of accounts, without decoding
    /// its accounts (a node's start-up needs only these).
    pub fn genesis_summary(&self) -> Result<GenesisSummary, StoreError> {
        self.read_genesis(GenesisSummary::decode)
    }

    /// The stored genesis's bytes, read by `decode`; a decoding error is a corrupt genesis.
    fn read_genesis<T, E: std::fmt::Display>(
        &self,
        decode: impl FnOnce(&[u8]) -> Result<T, E>,
    ) -> Result<T, StoreError> {
        let txn = self.read_txn()?;
        let stored = self
            .meta
            .get(&txn, GENESIS_KEY)
            .map_err(StoreError::lmdb("reading the genesis"))?;
        let bytes = stored.ok_or(StoreError::NotInitialized)?;
        decode(bytes).map_err(|error| StoreError::CorruptGenesis {
            reason: error.to_string(),
        })
    }

    /// Appends `block` durably, with the transactions its execution `dropped` (index in the
    /// block, reason): block, header entry and results in one transaction, synced to disk before
    /// this returns. Refuses, changing nothing, a block that does not extend the log.
    pub fn append(&self, block: &Block, dropped: &[(u32, DropReason)]) -> Result<(), StoreError> {
        let mut pending = self.lock_pending_offers();
        let mut txn = self.write_txn()?;
        let entries = self.put_block(&mut txn, block, dropped, None, None)?;
        self.commit_block(txn, &mut pending, entries)
    }

    /// [`BlockStore::append`], and when the block's height is a multiple of the checkpoint
    /// interval or it brings the transactions since the last checkpoint to the transaction
    /// interval ([`StoreOptions`]), a checkpoint of `state` (the state after `block`) in the
    /// same transaction, so a crash leaves both or neither. Older checkpoints than the last [`CHECKPOINTS_KEPT`] are
    /// deleted in that transaction too.
    pub fn append_with_state(
        &self,
        block: &Block,
        dropped: &[(u32, DropReason)],
        state: &ExchangeState,
    ) -> Result<(), StoreError> {
        self.append_with_results(block, dropped, None, None, state)
    }

    /// [`BlockStore::append_with_state`], keeping beside the block the proposer's clearing
    /// quality (not consensus data: a follower has none) and what each offer sold and received
    /// (derived from the block, kept so it need not be recomputed), in the same transaction.
    pub fn append_with_results(
        &self,
        block: &Block,
        dropped: &[(u32, DropReason)],
        clearing: Option<&ClearingReport>,
        fills: Option<&[OfferFill]>,
        state: &ExchangeState,
    ) -> Result<(), StoreError> {
        let height = block.header.height;
        if state.height() != height || state.last_header_hash() != block.header.hash() {
            return Err(StoreError::CheckpointNotOfBlock {
                height,
                state_height: state.height(),
            });
        }
        let since = self.transactions_since_checkpoint.load(Ordering::Relaxed)
            + block.transactions.len() as u64;
        let now = Instant::now();
        let last_checkpoint_at = *self
            .last_checkpoint_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let checkpointed = self.checkpoint_rule.is_due(
            height,
            since,
            now.saturating_duration_since(last_checkpoint_at),
        );
        // With a book thread, the snapshot shares the state's carried books and is written
        // after the block; without one (or with no books carried), in the block's transaction.
        let book_snapshot = match &self.book_writer {
            Some(_) if self.book_snapshot_due(height) => state.share_books(),
            _ => None,
        };
        let mut pending = self.lock_pending_offers();
        let mut txn = self.write_txn()?;
        let entries = self.put_block(&mut txn, block, dropped, clearing, fills)?;
        if checkpointed && self.writer.is_none() {
            self.put_checkpoint(&mut txn, height, &state.encode_checkpoint())?;
        }
        if self.book_snapshot_due(height) && book_snapshot.is_none() {
            self.put_book_snapshot(&mut txn, height, state.assets(), |pair| state.book(pair))?;
        }
        self.commit_block(txn, &mut pending, entries)?;
        drop(pending);
        if let (Some(books), Some(snapshot)) = (&self.book_writer, book_snapshot) {
            match books.send(snapshot) {
                book_files::Queued::Yes => {}
                book_files::Queued::Full => tracing::warn!(
                    "book snapshot at height {height} skipped: the book thread is behind (the snapshots before it wait to be written)"
                ),
                book_files::Queued::Gone => tracing::error!(
                    "book snapshot at height {height} not queued: the book thread is gone"
                ),
            }
        }
        // The block is durable: its checkpoint may follow on the writer thread.
        let checkpointed = match &self.writer {
            Some(writer) if checkpointed => writer.offer(|base| state.draft_checkpoint(base)),
            _ => checkpointed,
        };
        let since = if checkpointed { 0 } else { since };
        self.transactions_since_checkpoint
            .store(since, Ordering::Relaxed);
        if checkpointed {
            *self
                .last_checkpoint_at
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = now;
        }
        Ok(())
    }

    /// Tells the store how many transactions the blocks after its newest checkpoint hold
    /// (recovery counts them as it replays), so the next checkpoint comes by the transaction
    /// interval counted from that checkpoint, not from the restart.
    pub fn set_transactions_since_checkpoint(&self, transactions: u64) {
        self.transactions_since_checkpoint
            .store(transactions, Ordering::Relaxed);
    }

    /// Writes a checkpoint and deletes all but the newest [`CHECKPOINTS_KEPT`].
    fn put_checkpoint(&self, txn: &mut RwTxn, height: u64, bytes: &[u8]) -> Result<(), StoreError> {
        self.checkpoints
            .put(txn, &height.to_be_bytes(), bytes)
            .map_err(self.write_error("writing a checkpoint"))?;
        let heights = self.checkpoint_heights_in(txn)?;
        for old in heights.iter().skip(CHECKPOINTS_KEPT) {
            self.checkpoints
                .delete(txn, &old.to_be_bytes())
                .map_err(self.write_error("deleting an old checkpoint"))?;
        }
        Ok(())
    }

    /// [`BlockStore::append`], with every pair's book after the block as `books` gives it
    /// when a book snapshot is due ([`StoreOptions::book_snapshot_interval_blocks`]), in the
    /// same transaction. For tools and tests that build a log without executing it (the
    /// explanation benchmark); a node uses [`BlockStore::append_with_results`], which takes the
    /// books from the state itself. `books` must be the books after `block` (each pair's
    /// offers in key order, with the amounts they have left), or explanations read from this
    /// store are wrong.
    pub fn append_with_books<B: IntoIterator<Item = (OfferKey, u64)>>(
        &self,
        block: &Block,
        dropped: &[(u32, DropReason)],
        assets: usize,
        books: impl Fn(PairId) -> B,
    ) -> Result<(), StoreError> {
        let mut pending = self.lock_pending_offers();
        let mut txn = self.write_txn()?;
        let entries = self.put_block(&mut txn, block, dropped, None, None)?;
        let height = block.header.height;
        if self.book_snapshot_due(height) {
            self.put_book_snapshot(&mut txn, height, assets, books)?;
        }
        self.commit_block(txn, &mut pending, entries)
    }

    fn book_snapshot_due(&self, height: u64) -> bool {
        let interval = self.book_snapshot_interval_blocks;
        interval > 0 && height.is_multiple_of(interval)
    }

    /// Every pair's book after block `height`, then the entry that marks the snapshot whole,
    /// all in `txn`.
    fn put_book_snapshot<B: IntoIterator<Item = (OfferKey, u64)>>(
        &self,
        txn: &mut RwTxn,
        height: u64,
        assets: usize,
        books: impl Fn(PairId) -> B,
    ) -> Result<(), StoreError> {
        let assets = u16::try_from(assets).unwrap_or(u16::MAX);
        for sell in 0..assets {
            for buy in (0..assets).filter(|buy| *buy != sell) {
                let pair = PairId {
                    sell: AssetId(sell),
                    buy: AssetId(buy),
                };
                let book = encode_book(books(pair));
                if book.is_empty() {
                    continue;
                }
                self.books
                    .put(txn, &book_key(height, book_files::pair_code(pair)), &book)
                    .map_err(self.write_error("writing a book snapshot"))?;
            }
        }
        self.books
            .put(txn, &book_key(height, BOOK_SNAPSHOT_DONE), &[])
            .map_err(self.write_error("writing a book snapshot"))
    }

    /// The newest whole book snapshot taken after a block below `height`: its height and the
    /// book of `pair` then (offer key → amount left). `(0, empty)` when there is none: the
    /// books before block 1 are empty, so that answer is exact too, only further back.
    pub fn pair_book_before(
        &self,
        height: u64,
        pair: PairId,
    ) -> Result<(u64, BTreeMap<OfferKey, u64>), StoreError> {
        let files = book_files::folder(&self.dir);
        let in_lmdb = self.newest_lmdb_book_snapshot_below(height)?;
        let mut below = height;
        loop {
            match book_files::newest_below(&files, below)? {
                Some(file) if in_lmdb.is_none_or(|stored| file > stored) => {
                    match book_files::pair_book(&files, file, pair)? {
                        Some(book) => return Ok((file, book)),
                        // Thinned out since it was listed: the next older one.
                        None => below = file,
                    }
                }
                _ => return self.lmdb_pair_book_before(height, pair),
            }
        }
    }

    /// The height of the newest book snapshot in LMDB below `height` (`None`: none).
    fn newest_lmdb_book_snapshot_below(&self, height: u64) -> Result<Option<u64>, StoreError> {
        let txn = self.read_txn()?;
        let end = book_key(height, 0);
        let below: (Bound<&[u8]>, Bound<&[u8]>) = (Bound::Unbounded, Bound::Excluded(&end));
        let mut newest = self
            .books
            .rev_range(&txn, &below)
            .map_err(StoreError::lmdb("reading a book snapshot"))?;
        match newest.next() {
            Some(entry) => {
                let (key, _) = entry.map_err(StoreError::lmdb("reading a book snapshot"))?;
                Ok(Some(decode_book_key(key)?.0))
            }
            None => Ok(None),
        }
    }

    /// [`BlockStore::pair_book_before`] from the snapshots in LMDB only.
    fn lmdb_pair_book_before(
        &self,
        height: u64,
        pair: PairId,
    ) -> Result<(u64, BTreeMap<OfferKey, u64>), StoreError> {
        let txn = self.read_txn()?;
        let read = StoreError::lmdb("reading a book snapshot");
        let end = book_key(height, 0);
        let below: (Bound<&[u8]>, Bound<&[u8]>) = (Bound::Unbounded, Bound::Excluded(&end));
        let mut newest = self.books.rev_range(&txn, &below).map_err(read)?;
        let snapshot = match newest.next() {
            Some(entry) => {
                let (key, _) = entry.map_err(StoreError::lmdb("reading a book snapshot"))?;
                decode_book_key(key)?
            }
            None => return Ok((0, BTreeMap::new())),
        };
        drop(newest);
        let (snapshot_height, code) = snapshot;
        if code != BOOK_SNAPSHOT_DONE {
            // Written in one transaction with its marker: a snapshot without one is damage.
            return Err(StoreError::CorruptBookSnapshot {
                height: snapshot_height,
                reason: "it has no end marker".into(),
            });
        }
        let stored = self
            .books
            .get(
                &txn,
                &book_key(snapshot_height, book_files::pair_code(pair)),
            )
            .map_err(StoreError::lmdb("reading a book snapshot"))?;
        let book = match stored {
            Some(bytes) => {
                book_files::decode_book(bytes).ok_or_else(|| StoreError::CorruptBookSnapshot {
                    height: snapshot_height,
                    reason: format!("a book of {} bytes", bytes.len()),
                })?
            }
            None => BTreeMap::new(),
        };
        Ok((snapshot_height, book))
    }

    /// Heights of the stored checkpoints, newest first: the files the background writer
    /// wrote and those in LMDB (one height in both counts once; its file is read).
    pub fn checkpoint_heights(&self) -> Result<Vec<u64>, StoreError> {
        let mut heights = {
            let txn = self.read_txn()?;
            self.checkpoint_heights_in(&txn)?
        };
        heights.extend(checkpoint_files::heights(&checkpoint_files::folder(
            &self.dir,
        ))?);
        heights.sort_unstable_by(|a, b| b.cmp(a));
        heights.dedup();
        Ok(heights)
    }

    fn checkpoint_heights_in(&self, txn: &RoTxn) -> Result<Vec<u64>, StoreError> {
        heights_in(self.checkpoints, txn)
    }

    /// Waits until the background writer ([`StoreOptions::checkpoint_in_background`]) has
    /// no checkpoint queued or being written; at once without one.
    pub fn wait_for_checkpoints(&self) {
        if let Some(writer) = &self.writer {
            while writer.busy.load(Ordering::Acquire) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    }

    /// Why the background writer's last failed checkpoint failed, if one did (blocks are
    /// unaffected: they are durable before their checkpoint is written).
    pub fn checkpoint_failure(&self) -> Option<String> {
        let writer = self.writer.as_ref()?;
        writer
            .failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Bytes of the buffer the background writer keeps from checkpoint to checkpoint (about
    /// the last checkpoint's size; 0 before the first): memory of the state's size outside the
    /// state, which a node's RSS shows from its first background checkpoint on.
    pub fn checkpoint_buffer_bytes(&self) -> u64 {
        self.writer
            .as_ref()
            .map_or(0, |writer| writer.buffer_bytes.load(Ordering::Relaxed))
    }

    /// Height of the newest checkpoint the background writer committed (0: none yet).
    pub fn background_checkpoint_height(&self) -> u64 {
        self.writer
            .as_ref()
            .map_or(0, |writer| writer.written.load(Ordering::Acquire))
    }

    /// Takes the checkpoint file at `height`, which `state` was just loaded from (before any
    /// block is applied to it), as the base of the background writer's next draft: the first
    /// checkpoint after a restart then copies only what changed since, as every later one
    /// does. Does nothing without a writer or without such a file (a checkpoint in LMDB is
    /// not a base: the writer copies from files).
    pub fn adopt_draft_base(
        &self,
        height: u64,
        state: &ExchangeState,
        threads: usize,
    ) -> Result<(), StoreError> {
        assert_eq!(
            state.height(),
            height,
            "the state loaded from the checkpoint"
        );
        let Some(writer) = &self.writer else {
            return Ok(());
        };
        if !checkpoint_files::heights(&checkpoint_files::folder(&self.dir))?.contains(&height) {
            return Ok(());
        }
        let table = state.remember_as_drafted(threads);
        *lock(&writer.base) = Some((height, table));
        Ok(())
    }

    /// The checkpoint the background writer's next draft is made against (`None`: the next
    /// checkpoint is written whole).
    pub fn draft_base_height(&self) -> Option<u64> {
        let writer = self.writer.as_ref()?;
        lock(&writer.base).as_ref().map(|(height, _)| *height)
    }

    /// Bytes of the checkpoint files on disk (the background writer's; 0 without any).
    pub fn checkpoint_file_bytes(&self) -> u64 {
        checkpoint_files::total_bytes(&checkpoint_files::folder(&self.dir))
    }

    /// The checkpoint bytes stored at `height`, if any.
    pub fn checkpoint(&self, height: u64) -> Result<Option<Vec<u8>>, StoreError> {
        self.with_checkpoint(height, <[u8]>::to_vec)
    }

    /// `read` applied to the checkpoint bytes stored at `height`, if any, in place: the bytes
    /// are a memory map (of the checkpoint's file, else of the store), not a copy (at 10M
    /// accounts a checkpoint is ~1.5 GB, and copying it took 0.7-0.8 s of a 13 s restart).
    /// The map stays while `read` runs.
    pub fn with_checkpoint<T>(
        &self,
        height: u64,
        read: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, StoreError> {
        let folder = checkpoint_files::folder(&self.dir);
        if checkpoint_files::heights(&folder)?.contains(&height) {
            return checkpoint_files::with_file(&folder, height, read);
        }
        let txn = self.read_txn()?;
        let stored = self
            .checkpoints
            .get(&txn, &height.to_be_bytes())
            .map_err(StoreError::lmdb("reading a checkpoint"))?;
        Ok(stored.map(read))
    }

    /// Puts a block, its header entry and its results into `txn`, after checking it extends
    /// the log.
    fn put_block(
        &self,
        txn: &mut RwTxn,
        block: &Block,
        dropped: &[(u32, DropReason)],
        clearing: Option<&ClearingReport>,
        fills: Option<&[OfferFill]>,
    ) -> Result<offer_index::Entries, StoreError> {
        self.check_extends(txn, &block.header)?;
        let key = block.header.height.to_be_bytes();
        let encoded = block.encode();
        // Postcondition of the codec, checked before the write: what is stored replays.
        if Block::decode(&encoded).as_ref() != Ok(block) {
            return Err(StoreError::BlockDoesNotRoundTrip {
                height: block.header.height,
            });
        }
        self.blocks
            .put(txn, &key, &encoded)
            .map_err(self.write_error("writing a block"))?;
        self.headers
            .put(txn, &key, &HeaderEntry::of(&block.header).encode())
            .map_err(self.write_error("writing a header entry"))?;
        self.results
            .put(txn, &key, &encode_results(dropped, clearing, fills))
            .map_err(self.write_error("writing block results"))?;
        Ok(offer_index::entries_of(block, dropped, fills))
    }

    /// Commits `txn`, which holds the next block, whose offer index entries are `entries`,
    /// with the pending entries of the slice this block writes (all of them when more than
    /// [`OFFER_INDEX_PENDING_ENTRIES_MAX`] are pending) and the watermark that leaves (see
    /// [`offer_index::Pending`]). A failed commit leaves `pending` as it was.
    fn commit_block(
        &self,
        mut txn: RwTxn<'_>,
        pending: &mut offer_index::Pending,
        entries: offer_index::Entries,
    ) -> Result<(), StoreError> {
        let height = pending.next_height();
        // Pending holds the blocks up to the tip, and `txn` the next block.
        assert!(
            entries
                .keys()
                .all(|key| offer_index::height_of(key) == height),
            "offer index entries of another block than the next, {height}"
        );
        let written: Vec<usize> = if pending.len() + entries.len() > OFFER_INDEX_PENDING_ENTRIES_MAX
        {
            pending.all_slices().collect()
        } else {
            vec![pending.slice_written_by(height)]
        };
        for (key, touch) in pending.to_write(&written, &entries) {
            self.offers
                .put(&mut txn, key, &[*touch])
                .map_err(self.write_error("writing the offer index"))?;
        }
        let through = pending.through_after(&written);
        if through != pending.through {
            put_offer_index_through(self.meta, &mut txn, through)
                .map_err(self.write_error("writing the offer index"))?;
        }
        self.commit(txn)?;
        pending.committed(&written, entries);
        Ok(())
    }

    /// Entries of the offer index held in memory until their slice is written (a gauge of
    /// memory: see [`crate::offer_index`]).
    pub fn offer_index_pending_entries(&self) -> usize {
        self.lock_pending_offers().len()
    }

    fn lock_pending_offers(&self) -> std::sync::MutexGuard<'_, offer_index::Pending> {
        self.pending_offers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The blocks that touched offer `id` of `account`, in height order, with what each did
    /// to it ([`crate::offer_index`]): one B-tree descent and a scan of its entries.
    pub fn offer_touches(
        &self,
        account: AccountId,
        id: OfferId,
    ) -> Result<Vec<(u64, OfferTouch)>, StoreError> {
        let mut touches = Vec::new();
        self.visit_offer_entries(
            &offer_index::offer_prefix(id, Some(account)),
            |_, height, touch| {
                touches.push((height, touch));
                true
            },
        )?;
        Ok(touches)
    }

    /// The accounts (ascending, at most `accounts_max`) with a transaction of sequence number
    /// `id` creating an offer, accepted or dropped, in a stored block at or below
    /// `through_height`.
    pub fn offer_creators(
        &self,
        id: OfferId,
        through_height: u64,
        accounts_max: usize,
    ) -> Result<Vec<AccountId>, StoreError> {
        let mut accounts: Vec<AccountId> = Vec::new();
        self.visit_offer_entries(
            &offer_index::offer_prefix(id, None),
            |account, height, touch| {
                let creates = height <= through_height && touch.contains(OfferTouch::CREATES);
                if creates && accounts.last() != Some(&account) {
                    if accounts.len() == accounts_max {
                        return false;
                    }
                    accounts.push(account);
                }
                true
            },
        )?;
        Ok(accounts)
    }

    /// Calls `visit` with (account, height, touch) of each index entry whose key starts with
    /// `prefix`, in key order, those of the `offers` table and the pending ones merged, until
    /// it returns false. The pending entries are locked for the read transaction's life, so
    /// the two agree on the watermark between them.
    fn visit_offer_entries(
        &self,
        prefix: &[u8],
        mut visit: impl FnMut(AccountId, u64, OfferTouch) -> bool,
    ) -> Result<(), StoreError> {
        let pending = self.lock_pending_offers();
        let txn = self.read_txn()?;
        let mut stored = self
            .offers
            .prefix_iter(&txn, prefix)
            .map_err(StoreError::lmdb("reading the offer index"))?
            .peekable();
        let mut held = pending.with_prefix(prefix).peekable();
        loop {
            // A key in both (entries an open derived again that their slice had written
            // before) is the same entry: it is visited once.
            let (take_stored, take_held) = match (stored.peek(), held.peek()) {
                (None, None) => return Ok(()),
                (Some(Err(_)), _) | (Some(Ok(_)), None) => (true, false),
                (None, Some(_)) => (false, true),
                (Some(Ok((stored_key, _))), Some((held_key, _))) => {
                    match (*stored_key).cmp(&held_key[..]) {
                        std::cmp::Ordering::Less => (true, false),
                        std::cmp::Ordering::Equal => (true, true),
                        std::cmp::Ordering::Greater => (false, true),
                    }
                }
            };
            let held_entry = if take_held { held.next() } else { None };
            let (key, touch): (&[u8], u8) = if take_stored {
                let Some(entry) = stored.next() else {
                    return Ok(());
                };
                let (key, value) = entry.map_err(StoreError::lmdb("reading the offer index"))?;
                (key, value.first().copied().unwrap_or(0))
            } else {
                let Some((key, touch)) = held_entry else {
                    return Ok(());
                };
                (&key[..], touch)
            };
            let (account, height) = decode_offer_entry(key)?;
            if !visit(account, height, OfferTouch(touch)) {
                return Ok(());
            }
        }
    }

    /// The transactions that block `height` dropped, with why; `None` if no such block.
    pub fn dropped(&self, height: u64) -> Result<Option<Vec<(u32, DropReason)>>, StoreError> {
        Ok(self.results(height)?.map(|results| results.dropped))
    }

    /// Block `height`'s stored results, decoded; `None` if no such block.
    fn results(&self, height: u64) -> Result<Option<BlockResults>, StoreError> {
        let txn = self.read_txn()?;
        let stored = self
            .results
            .get(&txn, &height.to_be_bytes())
            .map_err(StoreError::lmdb("reading block results"))?;
        stored
            .map(|bytes| decode_results(height, bytes))
            .transpose()
    }

    /// The proposer's clearing quality of block `height`, if this node proposed it (and
    /// stored it: blocks written before this was kept have none).
    pub fn clearing_report(&self, height: u64) -> Result<Option<ClearingReport>, StoreError> {
        Ok(self.results(height)?.and_then(|results| results.clearing))
    }

    /// What each offer sold and received in block `height`; `None` if there is no such block
    /// or it was stored without them (before they were kept, or through
    /// [`BlockStore::append`]).
    pub fn fills(&self, height: u64) -> Result<Option<Vec<OfferFill>>, StoreError> {
        Ok(self.results(height)?.and_then(|results| results.fills))
    }

    /// Stores an application value under `key` in `meta`, apart from the store's own keys.
    pub fn put_app_meta(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        let mut txn = self.write_txn()?;
        self.meta
            .put(&mut txn, &app_meta_key(key), value)
            .map_err(self.write_error("writing application metadata"))?;
        self.commit(txn)
    }

    /// The application value stored under `key`, if any.
    pub fn app_meta(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let txn = self.read_txn()?;
        let stored = self
            .meta
            .get(&txn, &app_meta_key(key))
            .map_err(StoreError::lmdb("reading application metadata"))?;
        Ok(stored.map(<[u8]>::to_vec))
    }

    /// Height of the last stored block; 0 when there is none.
    pub fn last_height(&self) -> Result<u64, StoreError> {
        let txn = self.read_txn()?;
        Ok(self.last_entry(&txn)?.map_or(0, |(height, _)| height))
    }

    /// The block at `height`, if stored.
    pub fn block(&self, height: u64) -> Result<Option<Block>, StoreError> {
        let txn = self.read_txn()?;
        let stored = self
            .blocks
            .get(&txn, &height.to_be_bytes())
            .map_err(StoreError::lmdb("reading a block"))?;
        stored.map(|bytes| decode_block(height, bytes)).transpose()
    }

    /// The header entry at `height`, if stored.
    pub fn header_entry(&self, height: u64) -> Result<Option<HeaderEntry>, StoreError> {
        let txn = self.read_txn()?;
        let stored = self
            .headers
            .get(&txn, &height.to_be_bytes())
            .map_err(StoreError::lmdb("reading a header entry"))?;
        stored
            .map(|bytes| HeaderEntry::decode(height, bytes))
            .transpose()
    }

    /// The stored blocks from `height` on, in height order, up to the first height not stored.
    pub fn blocks_from(&self, height: u64) -> Blocks<'_> {
        Blocks {
            store: self,
            next_height: height,
            done: false,
        }
    }

    fn check_extends(&self, txn: &RoTxn, header: &BlockHeader) -> Result<(), StoreError> {
        let (last_height, previous) = match self.last_entry(txn)? {
            Some((height, entry)) => (height, entry.header_hash),
            None => (0, GENESIS_PREVIOUS),
        };
        if header.height != last_height + 1 {
            return Err(StoreError::HeightNotNext {
                expected: last_height + 1,
                found: header.height,
            });
        }
        if header.previous != previous {
            return Err(StoreError::PreviousMismatch {
                height: header.height,
            });
        }
        Ok(())
    }

    fn last_entry(&self, txn: &RoTxn) -> Result<Option<(u64, HeaderEntry)>, StoreError> {
        let last = self
            .headers
            .last(txn)
            .map_err(StoreError::lmdb("reading the last header entry"))?;
        let Some((key, value)) = last else {
            return Ok(None);
        };
        let height = decode_height(key)?;
        Ok(Some((height, HeaderEntry::decode(height, value)?)))
    }

    fn read_txn(&self) -> Result<RoTxn<'_, WithTls>, StoreError> {
        self.env
            .read_txn()
            .map_err(StoreError::lmdb("starting a read transaction"))
    }

    fn write_txn(&self) -> Result<RwTxn<'_>, StoreError> {
        self.env
            .write_txn()
            .map_err(StoreError::lmdb("starting a write transaction"))
    }

    /// Commits synchronously: LMDB fsyncs the data and the meta page before returning.
    fn commit(&self, txn: RwTxn<'_>) -> Result<(), StoreError> {
        txn.commit().map_err(self.write_error("committing"))
    }

    /// Like [`StoreError::lmdb`] for writes: fills in the map size a full map needs to exceed,
    /// and reports a full disk as such (see [`disk_is_full`]).
    fn write_error(&self, action: &'static str) -> impl FnOnce(heed::Error) -> StoreError + '_ {
        let map_size_bytes = self.map_size_bytes;
        move |source| {
            if let heed::Error::Io(io) = &source {
                if let Some(available_bytes) = disk_is_full(&self.dir, io) {
                    return StoreError::DiskFull {
                        dir: self.dir.clone(),
                        action,
                        available_bytes,
                    };
                }
            }
            match StoreError::lmdb(action)(source) {
                StoreError::MapFull { .. } => StoreError::MapFull { map_size_bytes },
                error => error,
            }
        }
    }
}

/// Iterator over stored blocks by height; see [`BlockStore::blocks_from`]. Stops after the
/// first error.
pub struct Blocks<'a> {
    store: &'a BlockStore,
    next_height: u64,
    done: bool,
}

impl Iterator for Blocks<'_> {
    type Item = Result<Block, StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        // One short read transaction per block: a long one would pin old pages while the
        // caller (recovery) spends seconds per block.
        let item = self.store.block(self.next_height).transpose();
        self.done = !matches!(item, Some(Ok(_)));
        self.next_height += 1;
        item
    }
}

fn app_meta_key(key: &str) -> Vec<u8> {
    [APP_META_PREFIX, key.as_bytes()].concat()
}

/// A block's results as stored, big-endian: the dropped transactions `count:u32 (index:u32
/// reason:u8)*` (a reason is its position in [`DropReason::ALL`]); then, when kept, the
/// proposer's clearing quality (`CLEARING_TAG iterations:u64 (f64 bits:u64)*4`); then, when
/// kept, the fills (`FILLS_RETURNED_TAG count:u32 (account:u64 offer:u64 sell:u16 buy:u16
/// sold:u64 bought:u64 returned:u64)*`). Results written before a section was kept end before
/// it; fills written before the rest rule carry `FILLS_TAG` and no `returned` (read as 0: no
/// rest was returned then).
fn encode_results(
    dropped: &[(u32, DropReason)],
    clearing: Option<&ClearingReport>,
    fills: Option<&[OfferFill]>,
) -> Vec<u8> {
    let fill_bytes = fills.map_or(0, |fills| 5 + FILL_RETURNED_BYTES * fills.len());
    let mut out = Vec::with_capacity(4 + 5 * dropped.len() + CLEARING_BYTES + fill_bytes);
    out.put_u32(dropped.len() as u32);
    for &(index, reason) in dropped {
        out.put_u32(index);
        out.put_u8(reason_code(reason));
    }
    if let Some(report) = clearing {
        out.put_u8(CLEARING_TAG);
        out.put_u64(report.iterations);
        for value in [
            report.achieved_epsilon,
            report.achieved_mu,
            report.unrealized_utility_ratio,
            report.millis,
        ] {
            out.put_u64(value.to_bits());
        }
    }
    if let Some(fills) = fills {
        out.put_u8(FILLS_RETURNED_TAG);
        out.put_u32(u32::try_from(fills.len()).expect("a block's fills count fits a u32"));
        for fill in fills {
            out.put_u64(fill.account.0);
            out.put_u64(fill.offer_id.0);
            out.put_u16(fill.sell.0);
            out.put_u16(fill.buy.0);
            out.put_u64(fill.sold);
            out.put_u64(fill.bought);
            out.put_u64(fill.returned);
        }
    }
    out
}

/// Marks the clearing quality after a block's dropped entries.
const CLEARING_TAG: u8 = 1;
/// The tag, the iteration count and four f64 measures.
const CLEARING_BYTES: usize = 1 + 8 + 4 * 8;
/// Marks the fills as written before the rest rule, after the clearing quality if any.
const FILLS_TAG: u8 = 2;
/// One such fill: account, offer id, sell, buy, sold, bought.
const FILL_BYTES: usize = 8 + 8 + 2 + 2 + 8 + 8;
/// Marks the fills with their returned rests (written since the rest rule), in place of
/// [`FILLS_TAG`].
const FILLS_RETURNED_TAG: u8 = 3;
/// One fill with its returned rest.
const FILL_RETURNED_BYTES: usize = FILL_BYTES + 8;

fn reason_code(reason: DropReason) -> u8 {
    DropReason::ALL
        .iter()
        .position(|known| *known == reason)
        .expect("DropReason::ALL lists every reason") as u8
}

/// A block's stored results.
struct BlockResults {
    dropped: Vec<(u32, DropReason)>,
    clearing: Option<ClearingReport>,
    fills: Option<Vec<OfferFill>>,
}

fn decode_results(height: u64, bytes: &[u8]) -> Result<BlockResults, StoreError> {
    read_results(&mut Reader::new(bytes)).map_err(|error| StoreError::CorruptBlock {
        height,
        reason: format!("its results: {error}"),
    })
}

fn read_results(reader: &mut Reader<'_>) -> Result<BlockResults, codec::DecodeError> {
    let count = reader.u32()? as usize;
    reader.ensure_items(count, 5)?;
    let mut dropped = Vec::with_capacity(count);
    for _ in 0..count {
        let index = reader.u32()?;
        let code = reader.u8()?;
        let reason = DropReason::ALL
            .get(usize::from(code))
            .ok_or(codec::DecodeError::BadTag {
                what: "drop reason",
                tag: code,
            })?;
        dropped.push((index, *reason));
    }
    let mut results = BlockResults {
        dropped,
        clearing: None,
        fills: None,
    };
    // Sections in tag order, each at most once.
    let mut last_tag = 0;
    while !reader.is_empty() {
        let tag = reader.u8()?;
        match tag {
            CLEARING_TAG if last_tag < tag => results.clearing = Some(read_clearing(reader)?),
            FILLS_TAG | FILLS_RETURNED_TAG if last_tag < FILLS_TAG => {
                results.fills = Some(read_fills(reader, tag == FILLS_RETURNED_TAG)?)
            }
            _ => {
                return Err(codec::DecodeError::BadTag {
                    what: "results section",
                    tag,
                })
            }
        }
        last_tag = tag;
    }
    Ok(results)
}

fn read_clearing(reader: &mut Reader<'_>) -> Result<ClearingReport, codec::DecodeError> {
    let iterations = reader.u64()?;
    let mut measure = || reader.u64().map(f64::from_bits);
    Ok(ClearingReport {
        iterations,
        achieved_epsilon: measure()?,
        achieved_mu: measure()?,
        unrealized_utility_ratio: measure()?,
        millis: measure()?,
    })
}

/// The fills section after its tag; `with_returned` for [`FILLS_RETURNED_TAG`].
fn read_fills(
    reader: &mut Reader<'_>,
    with_returned: bool,
) -> Result<Vec<OfferFill>, codec::DecodeError> {
    let count = reader.u32()? as usize;
    let item_bytes = if with_returned {
        FILL_RETURNED_BYTES
    } else {
        FILL_BYTES
    };
    reader.ensure_items(count, item_bytes)?;
    (0..count)
        .map(|_| {
            Ok(OfferFill {
                account: AccountId(reader.u64()?),
                offer_id: OfferId(reader.u64()?),
                sell: AssetId(reader.u16()?),
                buy: AssetId(reader.u16()?),
                sold: reader.u64()?,
                bought: reader.u64()?,
                returned: if with_returned { reader.u64()? } else { 0 },
            })
        })
        .collect()
}

fn put_offer_index_through(
    meta: OpeningTable<'_>,
    txn: &mut RwTxn,
    height: u64,
) -> heed::Result<()> {
    meta.put(txn, OFFER_INDEX_THROUGH_KEY, &height.to_be_bytes())
}

/// The height up to which `offers` holds every block; `None` for a store stamped before the
/// watermark existed (or not indexed yet).
fn offer_index_through(meta: OpeningTable<'_>, txn: &RoTxn) -> Result<Option<u64>, StoreError> {
    let stored = meta
        .get(txn, OFFER_INDEX_THROUGH_KEY)
        .map_err(StoreError::lmdb("reading the offer index watermark"))?;
    stored
        .map(|bytes| {
            <[u8; 8]>::try_from(bytes)
                .map(u64::from_be_bytes)
                .map_err(|_| StoreError::CorruptOfferIndex {
                    reason: format!("a watermark of {} bytes, expected 8", bytes.len()),
                })
        })
        .transpose()
}

/// The index entries of the stored blocks above the watermark, derived from the blocks and
/// their stored results as their append derived them (what a crash lost of the pending ones;
/// some may be in the table too, written with their slice), in `slices` slices.
fn pending_offer_entries(
    tables: &Tables<'_>,
    txn: &RoTxn,
    slices: u64,
) -> Result<offer_index::Pending, StoreError> {
    let [meta, blocks, _, results, _, _, _] = *tables;
    let through = offer_index_through(meta, txn)?.ok_or_else(|| StoreError::CorruptOfferIndex {
        reason: "no watermark after the store was opened".to_string(),
    })?;
    let mut pending = offer_index::Pending::above(through, slices);
    let mut height = through + 1;
    while let Some(entries) = stored_block_entries(blocks, results, txn, height)? {
        pending.add_block(entries);
        height += 1;
    }
    Ok(pending)
}

/// The index entries of stored block `height`, `None` when there is no such block.
fn stored_block_entries(
    blocks: OpeningTable<'_>,
    results: OpeningTable<'_>,
    txn: &RoTxn,
    height: u64,
) -> Result<Option<offer_index::Entries>, StoreError> {
    let key = height.to_be_bytes();
    let Some(bytes) = blocks
        .get(txn, &key)
        .map_err(StoreError::lmdb("reading a block to index"))?
    else {
        return Ok(None);
    };
    let block = decode_block(height, bytes)?;
    let stored = results
        .get(txn, &key)
        .map_err(StoreError::lmdb("reading block results to index"))?;
    let results = stored
        .map(|bytes| decode_results(height, bytes))
        .transpose()?;
    let (dropped, fills) = results.map_or((Vec::new(), None), |r| (r.dropped, r.fills));
    Ok(Some(offer_index::entries_of(
        &block,
        &dropped,
        fills.as_deref(),
    )))
}

/// `books` key: height, then the pair (`sell << 16 | buy`) or [`BOOK_SNAPSHOT_DONE`].
fn book_key(height: u64, code: u32) -> [u8; 12] {
    let mut key = [0; 12];
    key[..8].copy_from_slice(&height.to_be_bytes());
    key[8..].copy_from_slice(&code.to_be_bytes());
    key
}

fn decode_book_key(key: &[u8]) -> Result<(u64, u32), StoreError> {
    let corrupt = || StoreError::CorruptBookSnapshot {
        height: 0,
        reason: format!("a key of {} bytes, expected 12", key.len()),
    };
    let key: &[u8; 12] = key.try_into().map_err(|_| corrupt())?;
    let mut height = [0; 8];
    height.copy_from_slice(&key[..8]);
    let mut code = [0; 4];
    code.copy_from_slice(&key[8..]);
    Ok((u64::from_be_bytes(height), u32::from_be_bytes(code)))
}

/// A book as stored: per offer in key order, limit (u128), account, id, amount left.
fn encode_book(book: impl IntoIterator<Item = (OfferKey, u64)>) -> Vec<u8> {
    let book = book.into_iter();
    let mut out = Vec::with_capacity(walras_engine::BOOK_OFFER_BYTES * book.size_hint().0);
    for (key, amount) in book {
        out.extend_from_slice(&key.min_price.0.to_be_bytes());
        out.put_u64(key.account.0);
        out.put_u64(key.id.0);
        out.put_u64(amount);
    }
    out
}

fn decode_offer_entry(key: &[u8]) -> Result<(AccountId, u64), StoreError> {
    offer_index::decode_offer_key(key).ok_or_else(|| StoreError::CorruptOfferIndex {
        reason: format!(
            "a key of {} bytes, expected {}",
            key.len(),
            offer_index::OFFER_KEY_BYTES
        ),
    })
}

/// Makes `offers` hold every stored block up to the watermark, in the opening transaction: a
/// store with the stamp of the builds before the slices (every stored block in the table: one
/// they wrote, or one of this build that such a build opened and indexed again) gets its tip
/// as watermark and loses that stamp; a store with neither stamp nor watermark (written before
/// the index existed) has every stored block indexed, with its stored results, then the
/// watermark at its tip. A crash before that transaction commits leaves the store as it was,
/// to be indexed on the next open.
fn index_unindexed_blocks<'e>(tables: &Tables<'e>, txn: &mut RwTxn<'e>) -> Result<(), StoreError> {
    let [meta, blocks, headers, results, _, offers, _] = *tables;
    let whole = meta
        .get(txn, OFFER_INDEX_KEY)
        .map_err(StoreError::lmdb("reading the offer index stamp"))?
        .is_some();
    if whole {
        let tip = match headers
            .last(txn)
            .map_err(StoreError::lmdb("reading the last header"))?
        {
            Some((key, _)) => decode_height(key)?,
            None => 0,
        };
        put_offer_index_through(meta, txn, tip)
            .map_err(StoreError::lmdb("stamping the offer index"))?;
        meta.delete(txn, OFFER_INDEX_KEY)
            .map_err(StoreError::lmdb("stamping the offer index"))?;
        return Ok(());
    }
    if offer_index_through(meta, txn)?.is_some() {
        return Ok(());
    }
    offers
        .clear(txn)
        .map_err(StoreError::lmdb("clearing the offer index"))?;
    let mut height = 1u64;
    while let Some(entries) = stored_block_entries(blocks, results, txn, height)? {
        for (key, touch) in entries {
            offers
                .put(txn, &key, &[touch])
                .map_err(StoreError::lmdb("writing the offer index"))?;
        }
        height += 1;
    }
    put_offer_index_through(meta, txn, height - 1)
        .map_err(StoreError::lmdb("stamping the offer index"))
}

fn decode_height(key: &[u8]) -> Result<u64, StoreError> {
    let bytes: [u8; 8] = key.try_into().map_err(|_| StoreError::CorruptHeaderEntry {
        height: 0,
        reason: format!("a key of {} bytes, expected 8", key.len()),
    })?;
    Ok(u64::from_be_bytes(bytes))
}

fn decode_block(height: u64, bytes: &[u8]) -> Result<Block, StoreError> {
    let block = Block::decode(bytes).map_err(|error| StoreError::CorruptBlock {
        height,
        reason: error.to_string(),
    })?;
    if block.header.height != height {
        return Err(StoreError::CorruptBlock {
            height,
            reason: format!("it says it is block {}", block.header.height),
        });
    }
    Ok(block)
}

/// Creates `dir` if missing; refuses a directory with a `data.mdb` (an existing store, even an
/// empty or damaged file, is never re-initialised) and a non-empty one without it (so a
/// mistyped path never scatters a store among someone else's files).
fn check_new_directory(dir: &Path) -> Result<(), StoreError> {
    let not_a_store = |reason: String| StoreError::NotAStore {
        dir: dir.to_path_buf(),
        reason,
    };
    std::fs::create_dir_all(dir).map_err(|error| not_a_store(error.to_string()))?;
    if dir.join("data.mdb").exists() {
        return Err(StoreError::AlreadyExists {
            dir: dir.to_path_buf(),
        });
    }
    let mut entries = std::fs::read_dir(dir).map_err(|error| not_a_store(error.to_string()))?;
    match entries.next() {
        None => Ok(()),
        Some(_) => Err(not_a_store(
            "the directory is not empty and has no data.mdb".into(),
        )),
    }
}

fn open_env(dir: &Path, options: &StoreOptions) -> Result<Env, StoreError> {
    let mut env_options = EnvOpenOptions::new();
    env_options
        .map_size(options.map_size_bytes)
        .max_dbs(DATABASE_COUNT_MAX);
    // SAFETY: the mapped file is only written through LMDB (this process or another one
    // holding LMDB's lock), no unsafe flags are set (commits are synchronous), and heed makes
    // opening the same path twice in one process return the same environment.
    let opened = unsafe { env_options.open(dir) };
    opened.map_err(|error| match error {
        heed::Error::Mdb(heed::MdbError::Invalid | heed::MdbError::VersionMismatch) => {
            StoreError::NotAStore {
                dir: dir.to_path_buf(),
                reason: format!("data.mdb is not an LMDB file this build reads: {error}"),
            }
        }
        error => StoreError::lmdb("opening the LMDB environment")(error),
    })
}

/// Opens `meta` and checks the store's format; `None` when the environment has no `meta`
/// (its creation was interrupted before the genesis was stored).
fn open_meta<'e>(
    opener: &DatabaseOpener<'e, WithTls>,
    txn: &mut RwTxn<'e>,
    dir: &Path,
) -> Result<Option<OpeningTable<'e>>, StoreError> {
    let existing: Option<OpeningTable<'e>> = opener
        .open_database(txn, Some("meta"))
        .map_err(StoreError::lmdb("opening the meta database"))?;
    let Some(meta) = existing else {
        return Ok(None);
    };
    let format = meta
        .get(txn, FORMAT_KEY)
        .map_err(StoreError::lmdb("reading the store format"))?;
    match format {
        Some(format) if format == FORMAT => Ok(Some(meta)),
        found => Err(StoreError::FormatVersion {
            dir: dir.to_path_buf(),
            found: String::from_utf8_lossy(found.unwrap_or(b"none")).into_owned(),
        }),
    }
}

fn create_meta<'e>(
    opener: &DatabaseOpener<'e, WithTls>,
    txn: &mut RwTxn<'e>,
    dir: &Path,
) -> Result<OpeningTable<'e>, StoreError> {
    let main: Option<OpeningTable<'e>> = opener
        .open_database(txn, None)
        .map_err(StoreError::lmdb("opening the main database"))?;
    if let Some(main) = main {
        if !main
            .is_empty(txn)
            .map_err(StoreError::lmdb("reading the main database"))?
        {
            return Err(StoreError::NotAStore {
                dir: dir.to_path_buf(),
                reason: "an LMDB environment of another program".into(),
            });
        }
    }
    let meta = create_database(opener, txn, "meta")?;
    meta.put(txn, FORMAT_KEY, FORMAT)
        .map_err(StoreError::lmdb("stamping the store format"))?;
    Ok(meta)
}

/// The other databases, created if missing (`checkpoints` is newer than the format stamp: a
/// store written before it simply has none yet).
fn create_tables<'e>(
    opener: &DatabaseOpener<'e, WithTls>,
    txn: &mut RwTxn<'e>,
    meta: OpeningTable<'e>,
) -> Result<Tables<'e>, StoreError> {
    Ok([
        meta,
        create_database(opener, txn, "blocks")?,
        create_database(opener, txn, "headers")?,
        create_database(opener, txn, "results")?,
        create_database(opener, txn, "checkpoints")?,
        create_database(opener, txn, "offers")?,
        create_database(opener, txn, "books")?,
    ])
}

fn create_database<'e>(
    opener: &DatabaseOpener<'e, WithTls>,
    txn: &mut RwTxn<'e>,
    name: &str,
) -> Result<OpeningTable<'e>, StoreError> {
    opener
        .create_database(txn, Some(name))
        .map_err(StoreError::lmdb("creating a database"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block is checkpointed by height, by transactions since the last checkpoint, or by the
    /// time since it, whichever comes first; a time interval of 0 is no rule by time.
    #[test]
    fn a_checkpoint_falls_due_by_blocks_transactions_or_time() {
        let rule = CheckpointRule {
            interval_blocks: 1_000,
            interval_transactions: 100_000,
            interval_seconds: 300,
        };
        let seconds = Duration::from_secs;
        assert!(!rule.is_due(999, 99_999, seconds(299)));
        assert!(rule.is_due(1_000, 0, seconds(0)));
        assert!(rule.is_due(17, 100_000, seconds(0)));
        assert!(rule.is_due(17, 3, seconds(300)));
        let no_time = CheckpointRule {
            interval_seconds: 0,
            ..rule
        };
        assert!(!no_time.is_due(17, 3, seconds(86_400)));
    }

    /// Regression: adding `DropReason::Replayed` in the middle of `DropReason::ALL` shifted
    /// the stored code of every later reason, so an existing store would have reported its old
    /// blocks' drops under other names. Codes are positions in `ALL`: they must never move.
    #[test]
    fn stored_drop_reason_codes_never_change() {
        let expected = [
            (DropReason::Malformed, 0),
            (DropReason::UnknownSource, 1),
            (DropReason::BadSignature, 2),
            (DropReason::SequenceOutOfWindow, 3),
            (DropReason::UnknownAsset, 4),
            (DropReason::UnknownReceiver, 5),
            (DropReason::UnknownOffer, 6),
            (DropReason::AccountExists, 7),
            (DropReason::DuplicateAccountCreation, 8),
            (DropReason::AccountOverdraft, 9),
            (DropReason::AccountReusedSequence, 10),
            (DropReason::AccountDoubleCancel, 11),
            (DropReason::Replayed, 12),
            (DropReason::AccountsFull, 13),
            (DropReason::PaymentsDisabled, 14),
            (DropReason::PaymentsBadOwner, 15),
            (DropReason::WithdrawalNotOwner, 16),
            (DropReason::WithdrawalWrongChain, 17),
            (DropReason::WithdrawalWrongEpoch, 18),
            (DropReason::AlreadyWithdrawn, 19),
            (DropReason::DuplicateWithdrawal, 20),
            (DropReason::EscrowShort, 21),
            (DropReason::ShortCertificate, 22),
            (DropReason::BadCertificate, 23),
        ];
        assert_eq!(expected.len(), DropReason::ALL.len());
        for (reason, code) in expected {
            assert_eq!(reason_code(reason), code, "{reason:?}");
        }
    }

    #[test]
    fn results_round_trip_with_and_without_the_clearing_quality_and_the_fills() {
        let dropped = vec![(3, DropReason::Replayed), (9, DropReason::AccountOverdraft)];
        let report = ClearingReport {
            iterations: 17,
            achieved_epsilon: 1e-5,
            achieved_mu: 2e-4,
            unrealized_utility_ratio: f64::INFINITY,
            millis: 12.5,
        };
        let fills = vec![OfferFill {
            account: AccountId(5),
            offer_id: OfferId(2),
            sell: AssetId(1),
            buy: AssetId(0),
            sold: 600,
            bought: 301,
            returned: 2,
        }];
        for (clearing, kept_fills) in [
            (Some(report), Some(fills.as_slice())),
            (Some(report), None),
            (None, Some(fills.as_slice())),
            (None, None),
        ] {
            let bytes = encode_results(&dropped, clearing.as_ref(), kept_fills);
            let results = decode_results(4, &bytes).unwrap();
            assert_eq!(results.dropped, dropped);
            assert_eq!(results.clearing, clearing);
            assert_eq!(results.fills.as_deref(), kept_fills);
            for cut in 0..bytes.len() {
                let _ = decode_results(4, &bytes[..cut]);
            }
            if clearing.is_some() || kept_fills.is_some() {
                assert!(decode_results(4, &bytes[..bytes.len() - 1]).is_err());
            }
        }
        // Sections out of order, or twice, are refused.
        let mut twice = encode_results(&dropped, None, Some(&fills));
        twice.extend_from_slice(&encode_results(&[], None, Some(&fills))[4..]);
        assert!(decode_results(4, &twice).is_err());
    }

    /// A store written before the rest rule keeps fills without a returned rest; they read
    /// back with none returned, and such a section next to a newer one is refused.
    #[test]
    fn fills_written_before_the_rest_rule_read_back_with_nothing_returned() {
        let fill = OfferFill {
            account: AccountId(5),
            offer_id: OfferId(2),
            sell: AssetId(1),
            buy: AssetId(0),
            sold: 600,
            bought: 301,
            returned: 0,
        };
        let mut old = Vec::new();
        old.put_u32(0);
        old.put_u8(FILLS_TAG);
        old.put_u32(1);
        old.put_u64(fill.account.0);
        old.put_u64(fill.offer_id.0);
        old.put_u16(fill.sell.0);
        old.put_u16(fill.buy.0);
        old.put_u64(fill.sold);
        old.put_u64(fill.bought);
        let results = decode_results(4, &old).unwrap();
        assert_eq!(results.fills, Some(vec![fill]));
        let mut both = old.clone();
        both.extend_from_slice(&encode_results(&[], None, Some(&[fill]))[4..]);
        assert!(decode_results(4, &both).is_err());
    }

    /// Trigger: at 10M accounts a background checkpoint (~1.5 GB) was written in an LMDB
    /// transaction of its own, which held LMDB's one writer for the copy and the `fsync` of
    /// every page (~4 s on the 2-core VM), so the next block's append waited behind it: the
    /// stall the writer thread was meant to remove came back through the lock. Here the test
    /// holds LMDB's writer while the checkpoint is handed over and for as long as it waits: a
    /// checkpoint that needs that lock does not land.
    #[test]
    fn a_background_checkpoint_lands_while_the_block_log_writer_is_held() {
        let dir = std::env::temp_dir().join(format!(
            "walras-store-unit-writer-held-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let genesis = Genesis {
            asset_info: Vec::new(),
            payments: None,
            assets: 2,
            accounts: vec![walras_types::genesis::GenesisAccount {
                id: AccountId(1),
                public_key: *walras_crypto::Keypair::from_seed([3; 32])
                    .public_key()
                    .as_bytes(),
                balances: vec![(AssetId(0), 1_000), (AssetId(1), 1_000)],
            }],
        };
        let store = BlockStore::create_with(&dir, &genesis, &[], &StoreOptions::default()).unwrap();
        let mut state = ExchangeState::from_genesis(&genesis, 1).unwrap();
        state
            .propose(Vec::new(), &walras_engine::EngineConfig::default())
            .unwrap();
        let folder = checkpoint_files::folder(&dir);
        let writer = CheckpointWriter::start(store.env.clone(), store.checkpoints, folder.clone());
        let held = store.env.write_txn().unwrap();
        assert!(writer.offer(|base| state.draft_checkpoint(base)));
        let waited = std::time::Instant::now();
        while writer.written.load(Ordering::Acquire) != 1
            && waited.elapsed() < std::time::Duration::from_secs(10)
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let landed = writer.written.load(Ordering::Acquire);
        drop(held);
        drop(writer);
        assert_eq!(landed, 1, "the checkpoint waited for LMDB's writer");
        assert_eq!(checkpoint_files::heights(&folder).unwrap(), vec![1]);
        let loaded = checkpoint_files::with_file(&folder, 1, |bytes| {
            ExchangeState::decode_checkpoint(bytes, 1).map(|state| state.height())
        });
        assert_eq!(loaded.unwrap(), Some(Ok(1)));
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
