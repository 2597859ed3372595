//! The one error type of the crate: every message says what went wrong and what to do.

use std::fmt;
use std::path::PathBuf;
use walras_engine::EngineError;

/// Why a store operation failed.
#[derive(Debug)]
pub enum StoreError {
    /// LMDB or the file system failed while doing `action`.
    Lmdb {
        action: &'static str,
        source: heed::Error,
    },
    /// The directory holds something that is not a Walras store.
    NotAStore { dir: PathBuf, reason: String },
    /// The directory is a Walras store of another format version.
    FormatVersion { dir: PathBuf, found: String },
    /// `data.mdb` exists but holds no genesis: its creation was interrupted.
    NotInitialized,
    /// The directory has no `data.mdb`: there is no store to open.
    NoStore { dir: PathBuf },
    /// A store was to be created where a `data.mdb` already exists.
    AlreadyExists { dir: PathBuf },
    /// A checkpoint was to be stored with a block, but the state is not the state after it.
    CheckpointNotOfBlock { height: u64, state_height: u64 },
    /// The disk holding the store has no room left for a write.
    DiskFull {
        dir: PathBuf,
        action: &'static str,
        available_bytes: Option<u64>,
    },
    /// The stored genesis does not decode or does not start an exchange.
    CorruptGenesis { reason: String },
    /// An appended block's height is not the last height + 1.
    HeightNotNext { expected: u64, found: u64 },
    /// An appended block's `previous` is not the hash of the last stored header.
    PreviousMismatch { height: u64 },
    /// An appended block's encoding does not decode to the same block: storing it would
    /// leave a log that cannot be replayed (a defect in the codec, caught before the write).
    BlockDoesNotRoundTrip { height: u64 },
    /// A stored block does not decode, or is stored under another height than its own.
    CorruptBlock { height: u64, reason: String },
    /// A stored header entry is malformed or disagrees with its block.
    CorruptHeaderEntry { height: u64, reason: String },
    /// The header index names a block that the block log lacks.
    MissingBlock { height: u64 },
    /// Re-applying a stored block failed: the log is not a valid chain from its genesis.
    Replay { height: u64, error: EngineError },
    /// The LMDB map is full.
    MapFull { map_size_bytes: usize },
    /// `data.mdb` is shorter than the pages its last commit uses (or empty): mapping it would
    /// crash the process with SIGBUS on the first read past its end.
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

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Lmdb { action, source } => write!(f, "store: {action} failed: {source}"),
            StoreError::NotAStore { dir, reason } => write!(
                f,
                "{} is not a Walras store ({reason}); choose an empty or new directory",
                dir.display()
            ),
            StoreError::FormatVersion { dir, found } => write!(
                f,
                "{} is a store of format {found:?}, this build reads {:?}; use a matching build",
                dir.display(),
                String::from_utf8_lossy(crate::FORMAT)
            ),
            StoreError::NotInitialized => write!(
                f,
                "the store holds no genesis (its creation was interrupted); move the directory \
                 away and create the store again"
            ),
            StoreError::NoStore { dir } => write!(
                f,
                "{} holds no store (no data.mdb); create one first with a genesis \
                 (`walras init --data DIR --genesis FILE`, or `--dev` for a development chain)",
                dir.display()
            ),
            StoreError::AlreadyExists { dir } => write!(
                f,
                "{} already holds a store (data.mdb); it is never re-initialised: open it, or \
                 choose an empty directory for a new chain",
                dir.display()
            ),
            StoreError::CheckpointNotOfBlock {
                height,
                state_height,
            } => write!(
                f,
                "checkpoint refused: block {height} stored with the state of height \
                 {state_height} (a bug in the caller)"
            ),
            StoreError::DiskFull {
                dir,
                action,
                available_bytes,
            } => {
                write!(f, "store: {action} failed: the disk holding {} is full", dir.display())?;
                if let Some(available_bytes) = available_bytes {
                    write!(f, " ({available_bytes} bytes free)")?;
                }
                write!(
                    f,
                    "; every block reported committed is kept: free space, then restart"
                )
            }
            StoreError::CorruptGenesis { reason } => {
                write!(f, "stored genesis is invalid ({reason}); {DAMAGED}")
            }
            StoreError::HeightNotNext { expected, found } => write!(
                f,
                "block refused: height {found}, the next height is {expected}"
            ),
            StoreError::PreviousMismatch { height } => write!(
                f,
                "block {height} refused: its previous hash is not the last stored header's"
            ),
            StoreError::BlockDoesNotRoundTrip { height } => write!(
                f,
                "block {height} refused: its encoding does not decode to the same block, so the \
                 log could not be replayed; nothing was written"
            ),
            StoreError::CorruptBlock { height, reason } => {
                write!(f, "stored block {height} is corrupt ({reason}); {DAMAGED}")
            }
            StoreError::CorruptHeaderEntry { height, reason } => {
                write!(f, "stored header of block {height} is corrupt ({reason}); {DAMAGED}")
            }
            StoreError::MissingBlock { height } => {
                write!(f, "stored block {height} is missing; {DAMAGED}")
            }
            StoreError::Replay { height, error } => {
                write!(f, "stored block {height} does not replay: {error}; {DAMAGED}")
            }
            StoreError::Truncated {
                dir,
                file_bytes,
                required_bytes,
            } => write!(
                f,
                "{} is truncated: it has {file_bytes} bytes, its last commit needs at least \
                 {required_bytes}; the store is damaged: restore the directory from a backup or \
                 resync into a new one (this file is left untouched)",
                dir.join("data.mdb").display()
            ),
            StoreError::MapFull { map_size_bytes } => write!(
                f,
                "the store is full (map size {map_size_bytes} bytes); reopen it with a larger map size"
            ),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Lmdb { source, .. } => Some(source),
            StoreError::Replay { error, .. } => Some(error),
            _ => None,
        }
    }
}
