//! Durable storage for a Walras node: the block log and state checkpoints on LMDB, and
//! recovery from the newest checkpoint by re-applying the blocks after it.
//!
//! # Layout
//!
//! One LMDB environment in one directory (`data.mdb`, `lock.mdb`), holding seven databases:
//!
//! | database  | key                   | value                                        |
//! |-----------|-----------------------|----------------------------------------------|
//! | `meta`    | `b"format"`           | [`FORMAT`], the on-disk format and version   |
//! | `meta`    | `b"genesis"`          | the encoded [`Genesis`](walras_types::genesis::Genesis) |
//! | `blocks`  | height, u64 big-endian | the encoded [`Block`](walras_engine::Block)  |
//! | `headers` | height, u64 big-endian | header hash (32 bytes) then state root (32)  |
//! | `results` | height, u64 big-endian | the block's dropped transactions: index and reason |
//! | `meta`    | `b"app/"` + name      | application values ([`BlockStore::put_app_meta`]) |
//! | `checkpoints` | height, u64 big-endian | the state after that block ([`walras_engine::ExchangeState::encode_checkpoint`]) |
//! | `offers`  | offer id, account, height (u64 big-endian each) | what that block did to that offer ([`OfferTouch`] flags) |
//! | `meta`    | `b"offer_index"`      | present once `offers` indexes every stored block |
//! | `books`   | height, u64 big-endian; pair (`sell << 16 | buy`), u32 | that pair's book after the block (offers in key order: limit, account, id, amount left); pair `u32::MAX` marks the snapshot whole ([`StoreOptions::book_snapshot_interval_blocks`]) |
//!
//! With [`StoreOptions::checkpoint_in_background`] (a node's store), checkpoints and book
//! snapshots are files beside `data.mdb` instead, written by the store's threads after the
//! block committed (`checkpoints/`, `books/`: see `checkpoint_files` and `book_files`);
//! entries an older build wrote in LMDB are still read.
//!
//! Keys are big-endian so LMDB's byte order is height order: the last entry is the last block.
//! `headers` lets the store check a new block's height and `previous` without decoding blocks.
//! `offers` is the per-offer index ([`BlockStore::offer_touches`], [`BlockStore::offer_creators`]),
//! written in batches of blocks (the newest blocks' entries wait in memory and are derived
//! again from their blocks after a crash: see `offer_index`); a store written before it
//! existed is indexed when it is opened (once, in the opening transaction).
//!
//! # Durability (invariant 5)
//!
//! [`BlockStore::append`] writes a block and its header entry in one write transaction and
//! commits it with LMDB's default synchronous commit (no `NO_SYNC`, no `NO_META_SYNC`, no
//! `WRITE_MAP`): when `append` returns, the block is on disk, and a crash at any instant leaves
//! either the whole block or none of it.
//!
//! # Creating and opening
//!
//! [`BlockStore::create_with`] makes a new store with its genesis in one transaction and
//! refuses a directory that already has a `data.mdb`, whatever its size;
//! [`BlockStore::open_with`] opens an existing one and never creates anything. Before LMDB maps
//! `data.mdb`, its size is checked against its meta pages: an empty or truncated file is refused
//! ([`StoreError::Truncated`]) instead of being taken for a new store or crashing the process
//! with SIGBUS.
//!
//! # Checkpoints and recovery (restart in O(state))
//!
//! [`BlockStore::append_with_state`] also stores, every
//! [`StoreOptions::checkpoint_interval_blocks`] blocks, once the blocks since the last
//! checkpoint hold [`StoreOptions::checkpoint_interval_transactions`] transactions, or with the
//! first block [`StoreOptions::checkpoint_interval_seconds`] after the last checkpoint
//! (whichever comes first), a checkpoint of the state after it; the two newest are kept. The checkpoint
//! is written in the block's own transaction, or, with
//! [`StoreOptions::checkpoint_in_background`] (what a node uses), by the store's writer thread
//! as a file beside `data.mdb` after the block has committed (`checkpoint_files`: no LMDB
//! lock, so the next block's append never waits for it): the appending thread only copies the
//! state, and a crash before the file is whole leaves the previous checkpoint.
//! [`recover`] rebuilds the state
//! from the newest checkpoint whose rebuilt state root and header hash equal the stored
//! header's, then replays the later blocks through the follower path
//! ([`ExchangeState::apply`](walras_engine::ExchangeState::apply)), so every header and every
//! state root after it is checked again. A checkpoint that does not check out is skipped and
//! reported ([`Recovery::refused_checkpoints`]); a stored block that does not check out stops
//! recovery with an error naming its height. Recovery never truncates the log, which is kept
//! whole for audit and for CometBFT's replay.
//!
//! What loading a checkpoint costs (issue 32; figures in BENCHMARKS.md): checking its checksum,
//! decoding every account and offer, rebuilding the tries and hashing them, all on the node's
//! threads (format `/3` cuts the body into pieces and chunks for that). Public keys are not
//! decoded: each account decodes its own on its first signature check. The tries' hashes are
//! not stored: each is recomputed from the decoded accounts and offers and only the state
//! root they give is compared with the stored header, so a checkpoint is never trusted beyond
//! its checksum.
//!
//! # Full disk
//!
//! A write that fails because the disk is full (ENOSPC, or LMDB's EIO for a short write with
//! almost no space left) is [`StoreError::DiskFull`]; the failed transaction is aborted, so
//! everything committed before it stays.
//!
//! # Map size
//!
//! LMDB maps the whole file; the map size bounds the store. The default,
//! [`DEFAULT_MAP_SIZE_BYTES`] (16 GiB), costs address space only: the file is sparse and grows
//! with the data. A full map is reported as [`StoreError::MapFull`]; reopen with a larger
//! [`StoreOptions::map_size_bytes`].

#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod book_files;
mod checkpoint_files;
mod error;
mod file_check;
mod height_files;
mod offer_index;
mod recover;
mod store;

pub use error::StoreError;
pub use offer_index::OfferTouch;
pub use recover::{
    recover, recover_store, recover_store_with, Recovery, RecoveryTimings, RefusedCheckpoint,
};
pub use store::{
    BlockStore, Blocks, HeaderEntry, StoreOptions, DEFAULT_BOOK_SNAPSHOT_INTERVAL_BLOCKS,
    DEFAULT_CHECKPOINT_INTERVAL_BLOCKS, DEFAULT_CHECKPOINT_INTERVAL_SECONDS,
    DEFAULT_CHECKPOINT_INTERVAL_TRANSACTIONS, DEFAULT_MAP_SIZE_BYTES,
    DEFAULT_OFFER_INDEX_FLUSH_BLOCKS, FORMAT,
};
