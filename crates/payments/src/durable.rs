//! The durable spent set (feature `lmdb`): an append-only log of a shard's [`Effect`]s in LMDB
//! (`heed`, as `walras-store` uses), one synchronous write transaction per group of effects.
//!
//! The only disk I/O in this crate, kept behind a feature so the pure core builds without it; it
//! belongs in the validator process crate once that exists. Usage, per handled batch of
//! requests: `log.append(&outcome.effects)?` (group commit), then send `outcome.replies`; votes
//! are therefore durable before any reply leaves. After a restart:
//! `for effect in log.replay()? { shard.apply(&effect) }`.

use std::path::Path;

use heed::types::Bytes;
use heed::{CommitOrAbort, Database, Env, EnvOpenOptions};
use thiserror::Error;

use crate::codec::{decode_effect, encode_effect, CodecError};
use crate::validator::Effect;

/// Default LMDB map size: 1 GiB of address space (not disk).
pub const EFFECT_LOG_MAP_SIZE_BYTES: usize = 1 << 30;

/// Why the effect log failed.
#[derive(Debug, Error)]
pub enum DurableError {
    #[error("LMDB failed while {action}: {source}")]
    Lmdb {
        action: &'static str,
        source: heed::Error,
    },
    #[error("record {sequence} does not decode: {error}")]
    Corrupt { sequence: u64, error: CodecError },
    #[error("cannot create the log directory: {0}")]
    Directory(#[from] std::io::Error),
}

/// For `?` inside heed's database-creating closure, whose error type must come from heed's.
impl From<heed::Error> for DurableError {
    fn from(source: heed::Error) -> DurableError {
        DurableError::Lmdb {
            action: "creating the effects table",
            source,
        }
    }
}

fn lmdb(action: &'static str) -> impl FnOnce(heed::Error) -> DurableError {
    move |source| DurableError::Lmdb { action, source }
}

/// A shard's effect log.
pub struct EffectLog {
    env: Env,
    records: Database<'static, Bytes, Bytes>,
    next_sequence: u64,
}

impl EffectLog {
    /// Opens (or creates) the log in `dir`.
    pub fn open(dir: &Path) -> Result<EffectLog, DurableError> {
        std::fs::create_dir_all(dir)?;
        let mut options = EnvOpenOptions::new();
        options.map_size(EFFECT_LOG_MAP_SIZE_BYTES).max_dbs(1);
        // SAFETY: the file is written only through LMDB, no unsafe flags are set (commits are
        // synchronous), and heed returns the same environment if a path is opened twice.
        let env = unsafe { options.open(dir) }.map_err(lmdb("opening the environment"))?;
        let txn = env.write_txn().map_err(lmdb("opening a transaction"))?;
        let created = env.create_databases_and_commit(txn, |opener, txn| {
            let records = opener
                .create_database::<Bytes, Bytes>(txn, Some("effects"))
                .map_err(lmdb("creating the effects table"))?;
            Ok::<_, DurableError>(CommitOrAbort::<_, std::convert::Infallible>::Commit([
                records,
            ]))
        })?;
        let CommitOrAbort::Commit([records]) = created;
        let next_sequence = {
            let txn = env.read_txn().map_err(lmdb("reading"))?;
            let last = records
                .last(&txn)
                .map_err(lmdb("reading the last record"))?;
            match last {
                Some((key, _)) => sequence_of(key).map_or(0, |sequence| sequence + 1),
                None => 0,
            }
        };
        Ok(EffectLog {
            env,
            records,
            next_sequence,
        })
    }

    /// Appends `effects` in one synchronous transaction: all are durable when this returns.
    pub fn append(&mut self, effects: &[Effect]) -> Result<(), DurableError> {
        if effects.is_empty() {
            return Ok(());
        }
        let mut txn = self
            .env
            .write_txn()
            .map_err(lmdb("opening a transaction"))?;
        let mut sequence = self.next_sequence;
        for effect in effects {
            self.records
                .put(&mut txn, &sequence.to_be_bytes(), &encode_effect(effect))
                .map_err(lmdb("writing a record"))?;
            sequence += 1;
        }
        txn.commit().map_err(lmdb("committing"))?;
        self.next_sequence = sequence;
        Ok(())
    }

    /// Every effect, oldest first.
    pub fn replay(&self) -> Result<Vec<Effect>, DurableError> {
        let txn = self.env.read_txn().map_err(lmdb("reading"))?;
        let mut effects = Vec::new();
        for record in self.records.iter(&txn).map_err(lmdb("iterating"))? {
            let (key, value) = record.map_err(lmdb("reading a record"))?;
            let sequence = sequence_of(key).unwrap_or(u64::MAX);
            effects.push(
                decode_effect(value).map_err(|error| DurableError::Corrupt { sequence, error })?,
            );
        }
        Ok(effects)
    }

    /// Records written so far.
    pub fn len(&self) -> u64 {
        self.next_sequence
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.next_sequence == 0
    }
}

fn sequence_of(key: &[u8]) -> Option<u64> {
    <[u8; 8]>::try_from(key).ok().map(u64::from_be_bytes)
}
