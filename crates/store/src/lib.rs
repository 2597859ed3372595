//! Durable storage for a Walras node: the block log on LMDB, and recovery by re-applying it.
//!
//! # Layout
//!
//! One LMDB environment in one directory (`data.mdb`, `lock.mdb`), holding three databases:
//!
//! | database  | key                   | value                                        |
//! |-----------|-----------------------|----------------------------------------------|
//! | `meta`    | `b"format"`           | [`FORMAT`], the on-disk format and version   |
//! | `meta`    | `b"genesis"`          | the encoded [`Genesis`](walras_types::genesis::Genesis) |
//! | `blocks`  | height, u64 big-endian | the encoded [`Block`](walras_engine::Block)  |
//! | `headers` | height, u64 big-endian | header hash (32 bytes) then state root (32)  |
//! | `results` | height, u64 big-endian | the block's dropped transactions: index and reason |
//! | `meta`    | `b"app/"` + name      | application values ([`BlockStore::put_app_meta`]) |
//!
//! Keys are big-endian so LMDB's byte order is height order: the last entry is the last block.
//! `headers` lets the store check a new block's height and `previous` without decoding blocks.
//!
//! # Durability (invariant 5)
//!
//! [`BlockStore::append`] writes a block and its header entry in one write transaction and
//! commits it with LMDB's default synchronous commit (no `NO_SYNC`, no `NO_META_SYNC`, no
//! `WRITE_MAP`): when `append` returns, the block is on disk, and a crash at any instant leaves
//! either the whole block or none of it. Nothing else is stored: the exchange state is rebuilt by
//! [`recover`], which replays every block from genesis through the follower path
//! ([`ExchangeState::apply`](walras_engine::ExchangeState::apply)), so every header and every
//! state root is checked again; a stored block that does not check out stops recovery with an
//! error naming its height. Recovery never truncates the log.
//!
//! Recovery time grows with the chain: state snapshots, which would bound it, are not stored yet.
//!
//! # Map size
//!
//! LMDB maps the whole file; the map size bounds the store. The default,
//! [`DEFAULT_MAP_SIZE_BYTES`] (16 GiB), costs address space only: the file is sparse and grows
//! with the data. A full map is reported as [`StoreError::MapFull`]; reopen with a larger
//! [`StoreOptions::map_size_bytes`].

mod error;
mod recover;
mod store;

pub use error::StoreError;
pub use recover::{recover, recover_store, recover_store_with};
pub use store::{BlockStore, Blocks, HeaderEntry, StoreOptions, DEFAULT_MAP_SIZE_BYTES, FORMAT};
