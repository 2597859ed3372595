//! `manifest.json` of a generated workload: what `walras gen workload` wrote, so that `walras
//! replay` can refuse a workload whose files went missing, were emptied, truncated, duplicated or
//! replaced, instead of replaying something else and printing a different root.
//!
//! It lists the genesis and every block file with its size and BLAKE2b-256 hash, and for each
//! block the state root the batch engine reaches after it (with signature verification; the
//! proposal is deterministic: one clearing thread, an iteration limit and no effective timeout).

use super::super::ToolError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The manifest's file name inside the workload directory.
pub const MANIFEST_FILE: &str = "manifest.json";
/// The format this code writes and reads.
pub const MANIFEST_FORMAT: u32 = 1;

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    pub format: u32,
    pub genesis: FileEntry,
    /// How many blocks the workload has (`blocks.len()`, stated for a reader).
    pub block_count: usize,
    pub blocks: Vec<BlockEntry>,
}

/// A file, relative to the workload directory.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    pub file: String,
    pub bytes: u64,
    pub blake2b_256: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct BlockEntry {
    #[serde(flatten)]
    pub file: FileEntry,
    pub transactions: usize,
    /// The state root after this block (hex).
    pub state_root: String,
}

impl FileEntry {
    /// The entry describing `bytes` stored as `file`.
    pub fn describe(file: String, bytes: &[u8]) -> FileEntry {
        FileEntry {
            file,
            bytes: bytes.len() as u64,
            blake2b_256: walras_crypto::hash(bytes).to_string(),
        }
    }

    /// Reads the file under `dir` and checks it is the one described; returns its bytes.
    pub fn read_checked(&self, dir: &Path) -> Result<Vec<u8>, ToolError> {
        let path = dir.join(&self.file);
        let bytes = std::fs::read(&path).map_err(|error| {
            ToolError::Input(format!(
                "cannot read {} ({error}); the workload's {MANIFEST_FILE} lists it: the \
                 workload is incomplete, generate it again",
                path.display()
            ))
        })?;
        if bytes.len() as u64 != self.bytes {
            return Err(ToolError::Input(format!(
                "{} has {} bytes but {MANIFEST_FILE} says {}: the file is {}; generate the \
                 workload again",
                path.display(),
                bytes.len(),
                self.bytes,
                if bytes.is_empty() {
                    "empty"
                } else if (bytes.len() as u64) < self.bytes {
                    "truncated"
                } else {
                    "not the one generated"
                }
            )));
        }
        let hash = walras_crypto::hash(&bytes).to_string();
        if hash != self.blake2b_256 {
            return Err(ToolError::Input(format!(
                "{} has BLAKE2b-256 {hash} but {MANIFEST_FILE} says {}: the file was changed or \
                 replaced (a copy of another block?); generate the workload again",
                path.display(),
                self.blake2b_256
            )));
        }
        Ok(bytes)
    }
}

impl Manifest {
    pub fn write(&self, dir: &Path) -> Result<(), ToolError> {
        let path = dir.join(MANIFEST_FILE);
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(&path, text)
            .map_err(ToolError::io(format!("cannot write {}", path.display())))
    }

    pub fn read(dir: &Path) -> Result<Manifest, ToolError> {
        let path = dir.join(MANIFEST_FILE);
        let text = std::fs::read(&path).map_err(|error| {
            ToolError::Input(format!(
                "cannot read {} ({error}): replay needs the manifest `walras gen workload` \
                 writes (workloads generated before it existed: generate them again)",
                path.display()
            ))
        })?;
        let manifest: Manifest = serde_json::from_slice(&text)
            .map_err(|error| ToolError::Input(format!("{}: {error}", path.display())))?;
        if manifest.format != MANIFEST_FORMAT {
            return Err(ToolError::Input(format!(
                "{}: format {} is not the one this walras reads ({MANIFEST_FORMAT})",
                path.display(),
                manifest.format
            )));
        }
        if manifest.block_count != manifest.blocks.len() || manifest.blocks.is_empty() {
            return Err(ToolError::Input(format!(
                "{}: block_count {} but {} blocks listed",
                path.display(),
                manifest.block_count,
                manifest.blocks.len()
            )));
        }
        Ok(manifest)
    }

    /// Refuses block files in `blocks_dir` that the manifest does not list (a duplicated or
    /// stray file would otherwise be easy to miss).
    pub fn check_no_extra_blocks(&self, dir: &Path, blocks_dir: &Path) -> Result<(), ToolError> {
        let listed: BTreeSet<PathBuf> = self
            .blocks
            .iter()
            .map(|block| dir.join(&block.file.file))
            .collect();
        let entries = std::fs::read_dir(blocks_dir).map_err(ToolError::io(format!(
            "cannot read {}",
            blocks_dir.display()
        )))?;
        let mut extra: Vec<String> = entries
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| !listed.contains(path))
            .map(|path| path.display().to_string())
            .collect();
        extra.sort();
        if let Some(first) = extra.first() {
            return Err(ToolError::Input(format!(
                "{first}{} not listed in {MANIFEST_FILE}: remove {} or generate the workload again",
                if extra.len() > 1 {
                    format!(" and {} more files are", extra.len() - 1)
                } else {
                    " is".to_string()
                },
                if extra.len() > 1 { "them" } else { "it" }
            )));
        }
        Ok(())
    }
}
