//! The one error type of the crate: every message says what went wrong and what to do.

use std::path::{Path, PathBuf};
use walras_engine::EngineError;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// LMDB or the file system failed while doing `action`.
    #[error("store: {action} failed: {source}")]
    Lmdb {
        action: &'static str,
        source: heed::Error,
    },
    /// A file of the store outside LMDB (a checkpoint file) could not be read or written.
    #[error("store: {action} failed for {}: {source}", .path.display())]
    File {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// A checkpoint drafted against the previous one could not be assembled from it (the
    /// writer thread then writes the next one whole; blocks are unaffected).
    #[error("checkpoint at height {height} not written: {reason}; the next one is written whole")]
    CheckpointDraft { height: u64, reason: String },
    /// The directory holds something that is not a Walras store.
    #[error("{} is not a Walras store ({reason}); choose an empty or new directory", .dir.display())]
    NotAStore { dir: PathBuf, reason: String },
    /// The directory is a Walras store of another format version.
    #[error("{} is a store of format {found:?}, this build reads {:?}; use a matching build", .dir.display(), String::from_utf8_lossy(crate::FORMAT))]
    FormatVersion { dir: PathBuf, found: String },
    /// `data.mdb` exists but holds no genesis: its creation was interrupted.
    #[error("the store holds no genesis (its creation was interrupted); move the directory away and create the store again")]
    NotInitialized,
    /// The directory has no `data.mdb`: there is no store to open.
    #[error("{} holds no store (no data.mdb); create one first with a genesis (`walras init --data DIR --genesis FILE`, or `--dev` for a development chain)", .dir.display())]
    NoStore { dir: PathBuf },
    /// A store was to be created where a `data.mdb` already exists.
    #[error("{} already holds a store (data.mdb); it is never re-initialised: open it, or choose an empty directory for a new chain", .dir.display())]
    AlreadyExists { dir: PathBuf },
    /// A checkpoint was to be stored with a block, but the state is not the state after it.
    #[error("checkpoint refused: block {height} stored with the state of height {state_height} (a bug in the caller)")]
    CheckpointNotOfBlock { height: u64, state_height: u64 },
    /// The disk holding the store has no room left for a write.
    #[error("store: {action} failed: the disk holding {} is full{}; every block reported committed is kept: free space, then restart", .dir.display(), free_space(.available_bytes))]
    DiskFull {
        dir: PathBuf,
        action: &'static str,
        available_bytes: Option<u64>,
    },
    /// The stored genesis does not decode or does not start an exchange.
    #[error("stored genesis is invalid ({reason}); {damaged}", damaged = DAMAGED)]
    CorruptGenesis { reason: String },
    /// An appended block's height is not the last height + 1.
    #[error("block refused: height {found}, the next height is {expected}")]
    HeightNotNext { expected: u64, found: u64 },
    /// An appended block's `previous` is not the hash of the last stored header.
    #[error("block {height} refused: its previous hash is not the last stored header's")]
    PreviousMismatch { height: u64 },
    /// An appended block's encoding does not decode to the same block: storing it would
    /// leave a log that cannot be replayed (a defect in the codec, caught before the write).
    #[error("block {height} refused: its encoding does not decode to the same block, so the log could not be replayed; nothing was written")]
    BlockDoesNotRoundTrip { height: u64 },
    /// A stored block does not decode, or is stored under another height than its own.
    #[error("stored block {height} is corrupt ({reason}); {damaged}", damaged = DAMAGED)]
    CorruptBlock { height: u64, reason: String },
    /// A stored header entry is malformed or disagrees with its block.
    #[error("stored header of block {height} is corrupt ({reason}); {damaged}", damaged = DAMAGED)]
    CorruptHeaderEntry { height: u64, reason: String },
    /// A stored book snapshot is malformed.
    #[error("the stored book snapshot after block {height} is corrupt ({reason}); {damaged}", damaged = DAMAGED)]
    CorruptBookSnapshot { height: u64, reason: String },
    /// An entry of the per-offer index is malformed.
    #[error("the stored offer index is corrupt ({reason}); {damaged}", damaged = DAMAGED)]
    CorruptOfferIndex { reason: String },
    /// The header index names a block that the block log lacks.
    #[error("stored block {height} is missing; {damaged}", damaged = DAMAGED)]
    MissingBlock { height: u64 },
    /// Re-applying a stored block failed: the log is not a valid chain from its genesis.
    #[error("stored block {height} does not replay: {error}; {damaged}", damaged = DAMAGED)]
    Replay {
        height: u64,
        #[source]
        error: EngineError,
    },
    /// The LMDB map is full.
    #[error(
        "the store is full (map size {map_size_bytes} bytes); reopen it with a larger map size"
    )]
    MapFull { map_size_bytes: usize },
    /// `data.mdb` is shorter than the pages its last commit uses (or empty): mapping it would
    /// crash the process with SIGBUS on the first read past its end.
    #[error("{} is truncated: it has {file_bytes} bytes, its last commit needs at least {required_bytes}; the store is damaged: restore the directory from a backup or resync into a new one (this file is left untouched)", .dir.join("data.mdb").display())]
    Truncated {
        dir: PathBuf,
        file_bytes: u64,
        required_bytes: u64,
    },
}

impl StoreError {
    pub(crate) fn lmdb(action: &'static str) -> impl FnOnce(heed::Error) -> StoreError {
        move |source| match source {
            heed::Error::Mdb(heed::MdbError::MapFull) => StoreError::MapFull { map_size_bytes: 0 },
            source => StoreError::Lmdb { action, source },
        }
    }
}

/// For `?` inside heed's database-opening closure, whose error type must come from heed's.
impl From<heed::Error> for StoreError {
    fn from(source: heed::Error) -> StoreError {
        StoreError::lmdb("opening the databases")(source)
    }
}

const DAMAGED: &str = "the store is damaged: restore it from a backup or resync from a peer";

/// The `DiskFull` message's note of the free space, when it is known.
fn free_space(available_bytes: &Option<u64>) -> String {
    match available_bytes {
        Some(available_bytes) => format!(" ({available_bytes} bytes free)"),
        None => String::new(),
    }
}

/// Below this many free bytes, a failed write is taken for a full disk.
const DISK_FULL_FREE_BYTES_MAX: u64 = 16 << 20;

/// Whether a write error `io` on the store in `dir` means its disk is full, and if so the free
/// bytes left (`None` when they cannot be read). ENOSPC says so itself; LMDB reports a short
/// write (what a disk that fills up mid-write gives) as EIO, so an EIO with almost no space
/// left counts too, and any other EIO stays an I/O error.
pub(crate) fn disk_is_full(dir: &Path, io: &std::io::Error) -> Option<Option<u64>> {
    let available_bytes = rustix::fs::statvfs(dir)
        .ok()
        .map(|stats| stats.f_bavail.saturating_mul(stats.f_frsize));
    match io.raw_os_error() {
        Some(code) if code == rustix::io::Errno::NOSPC.raw_os_error() => Some(available_bytes),
        Some(code)
            if code == rustix::io::Errno::IO.raw_os_error()
                && available_bytes.is_some_and(|free| free < DISK_FULL_FREE_BYTES_MAX) =>
        {
            Some(available_bytes)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    //! The messages built from more than one field (the derive's trickier cases) keep the exact
    //! text the hand-written `Display` gave; the chain keeps its sources.

    use super::*;
    use std::error::Error;

    #[test]
    fn a_full_disk_names_the_free_space_only_when_it_is_known() {
        let error = |available_bytes| StoreError::DiskFull {
            dir: PathBuf::from("/data"),
            action: "appending block 7",
            available_bytes,
        };
        assert_eq!(
            error(Some(4096)).to_string(),
            "store: appending block 7 failed: the disk holding /data is full (4096 bytes free); \
             every block reported committed is kept: free space, then restart"
        );
        assert_eq!(
            error(None).to_string(),
            "store: appending block 7 failed: the disk holding /data is full; every block \
             reported committed is kept: free space, then restart"
        );
    }

    #[test]
    fn a_replay_failure_keeps_the_engine_error_as_its_source() {
        let error = StoreError::Replay {
            height: 3,
            error: EngineError::HeaderPrevious,
        };
        assert_eq!(
            error.to_string(),
            format!(
                "stored block 3 does not replay: block header rejected: it does not follow the \
                 last block; {DAMAGED}"
            )
        );
        assert!(error.source().is_some());
        assert!(StoreError::MissingBlock { height: 3 }.source().is_none());
    }
}
