//! Checkpoints as files beside `data.mdb`: what the background writer writes
//! ([`crate::StoreOptions::checkpoint_in_background`]).
//!
//! Why not LMDB: LMDB has one writer. A checkpoint of 10M accounts is ~1.5 GB, and its own
//! write transaction held that writer for the copy into the map and the commit's `fsync` of
//! every page (on the 2-core VM a 1.5 GB synchronous write takes ~4 s), so the block that
//! followed waited that long to be appended: the stall came back on the block path through
//! the lock. A file takes no lock the block path needs. It is written in slices, each synced
//! before the next ([`SLICE_BYTES`]), so that the kernel never holds much of it dirty: a
//! block's own commit (`fsync` of `data.mdb`) then never waits behind gigabytes of checkpoint
//! data on the same disk.
//!
//! Layout: `DIR/checkpoints/HHHHHHHHHHHHHHHHHHHH.ckpt`, the height in 20 decimal digits (so the
//! names sort as the heights), holding the checkpoint bytes exactly as LMDB held them (format
//! of [`walras_engine::ExchangeState::encode_checkpoint`]; the checksum inside). A file is
//! written as `….ckpt.tmp`, synced, renamed, and the directory synced: a crash leaves the
//! whole file or no `.ckpt` of that height (a `.tmp` left behind is removed by the next
//! writer). A file is read through a read-only memory map, as LMDB's values were, so loading a
//! 1.5 GB checkpoint copies nothing. `memmap2` maps it: the same `mmap` call LMDB makes.
//!
//! Old checkpoints are recycled, not deleted: the oldest beyond the kept ones becomes
//! [`SPARE_NAME`], and the next checkpoint is written over it. On ext4 mounted with `discard`
//! (this VM's disk), deleting an 860 MB file held a concurrent `fsync` of `data.mdb` for
//! ~190 ms (the freed extents are trimmed in the journal commit), and writing into
//! allocated blocks took 1.1 s where a new file took 3.3 s (a probe writing, overwriting
//! and deleting such a file beside a loop of small `fsync`s; BENCHMARKS.md).

use crate::height_files::{io_error, sync_folder, Kind};
use crate::StoreError;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The folder of checkpoint files inside the store's directory.
pub(crate) const CHECKPOINT_DIR: &str = "checkpoints";
const FILES: Kind = Kind {
    suffix: ".ckpt",
    temporary_suffix: ".ckpt.tmp",
    listing: "listing checkpoint files",
    deleting_partial: "deleting a partial checkpoint file",
};
/// The recycled file the next checkpoint is written over (not a checkpoint: never read).
pub(crate) const SPARE_NAME: &str = "spare.ckpt.old";
/// Bytes written before each `fdatasync`: the most of a checkpoint the kernel holds dirty.
/// At ~400 MB/s of disk a block's commit waits at most ~40 ms behind it.
pub(crate) const SLICE_BYTES: usize = 16 << 20;

/// The checkpoint folder of the store in `dir`.
pub(crate) fn folder(dir: &Path) -> PathBuf {
    dir.join(CHECKPOINT_DIR)
}

fn file_name(height: u64) -> String {
    FILES.file_name(height)
}

/// Heights of the checkpoint files in `folder`, newest first (none when it does not exist).
/// Other files there are ignored.
pub(crate) fn heights(folder: &Path) -> Result<Vec<u64>, StoreError> {
    FILES.heights(folder)
}

/// `read` applied to the bytes of the checkpoint file at `height`, mapped read-only; `None`
/// when there is no such file. The map lives while `read` runs.
pub(crate) fn with_file<T>(
    folder: &Path,
    height: u64,
    read: impl FnOnce(&[u8]) -> T,
) -> Result<Option<T>, StoreError> {
    let path = folder.join(file_name(height));
    let file = match File::open(&path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(io_error("opening a checkpoint file", &path, error)),
    };
    let length = file
        .metadata()
        .map_err(|error| io_error("reading a checkpoint file", &path, error))?
        .len();
    if length == 0 {
        // An empty map cannot be made; the decoder refuses the empty checkpoint.
        return Ok(Some(read(&[])));
    }
    // SAFETY: the map is read-only and private to this call. Only this store's writer thread
    // writes checkpoint files, always under a temporary name renamed when complete, so a
    // mapped file is never written or truncated while mapped. An outside process truncating
    // it would be a damaged store, as for `data.mdb`, which LMDB maps the same way.
    let map = unsafe { memmap2::Mmap::map(&file) }
        .map_err(|error| io_error("mapping a checkpoint file", &path, error))?;
    Ok(Some(read(&map)))
}

/// Writes `bytes` as the checkpoint file at `height`, durably (see the module documentation),
/// over the spare file when there is one; then keeps the newest `kept` files, the next older
/// one becoming the spare and any others deleted. A failure removes the partial file.
pub(crate) fn write(
    folder: &Path,
    height: u64,
    bytes: &[u8],
    kept: usize,
) -> Result<(), StoreError> {
    fs::create_dir_all(folder)
        .map_err(|error| io_error("creating the checkpoint folder", folder, error))?;
    let path = folder.join(file_name(height));
    let temporary = folder.join(FILES.temporary_name(height));
    let spare = folder.join(SPARE_NAME);
    match fs::rename(&spare, &temporary) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(io_error("recycling a checkpoint file", &spare, error)),
    }
    if let Err(error) = write_synced(&temporary, bytes) {
        let _ = fs::remove_file(&temporary);
        return Err(error);
    }
    fs::rename(&temporary, &path)
        .map_err(|error| io_error("naming a checkpoint file", &path, error))?;
    sync_folder(folder)?;
    for (index, old) in heights(folder)?.iter().skip(kept).enumerate() {
        let old_path = folder.join(file_name(*old));
        let recycled = if index == 0 {
            fs::rename(&old_path, &spare)
        } else {
            fs::remove_file(&old_path)
        };
        recycled.map_err(|error| io_error("retiring an old checkpoint file", &old_path, error))?;
    }
    sync_folder(folder)
}

/// Removes the temporary files a crash left behind (never a complete checkpoint).
pub(crate) fn remove_temporaries(folder: &Path) -> Result<(), StoreError> {
    FILES.remove_temporaries(folder)
}

/// The bytes of the checkpoint files in `folder` and of the spare (0 when there are none).
pub(crate) fn total_bytes(folder: &Path) -> u64 {
    let Ok(heights) = heights(folder) else {
        return 0;
    };
    heights
        .iter()
        .map(|height| folder.join(file_name(*height)))
        .chain([folder.join(SPARE_NAME)])
        .filter_map(|path| fs::metadata(path).ok())
        .map(|metadata| metadata.len())
        .sum()
}

/// Writes `bytes` into `path` (created, or a recycled file written over in place and cut
/// to length) slice by slice, each synced before the next.
fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let action = "writing a checkpoint file";
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|error| io_error(action, path, error))?;
    for slice in bytes.chunks(SLICE_BYTES) {
        file.write_all(slice)
            .map_err(|error| io_error(action, path, error))?;
        file.sync_data()
            .map_err(|error| io_error(action, path, error))?;
    }
    file.set_len(bytes.len() as u64)
        .map_err(|error| io_error(action, path, error))?;
    // The length is metadata: one full sync makes it durable with the data.
    file.sync_all()
        .map_err(|error| io_error(action, path, error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_name_stands_for_its_height_and_nothing_else_does() {
        assert_eq!(FILES.height_of(&file_name(0)), Some(0));
        assert_eq!(FILES.height_of(&file_name(1_234)), Some(1_234));
        assert_eq!(FILES.height_of(&file_name(u64::MAX)), Some(u64::MAX));
        for other in [
            "00000000000000001234.ckpt.tmp",
            "0000000000000001234.ckpt",
            "000000000000000012345.ckpt",
            "0000000000000000123x.ckpt",
            "+0000000000000001234.ckpt",
            "00000000000000001234",
            "data.mdb",
        ] {
            assert_eq!(FILES.height_of(other), None, "{other}");
        }
        // Names sort as heights do.
        assert!(file_name(9) < file_name(10));
    }

    /// Trigger: old checkpoints are recycled (written over in place) instead of deleted. A
    /// checkpoint shorter than the spare it is written over must not keep the spare's tail,
    /// and the folder holds the kept files and one spare, never more.
    #[test]
    fn a_checkpoint_written_over_a_longer_spare_is_exactly_its_own_bytes() {
        let folder = std::env::temp_dir().join(format!(
            "walras-checkpoint-files-spare-{}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&folder);
        let long = vec![7u8; 3 * SLICE_BYTES / 2];
        for height in 1..=3 {
            write(&folder, height, &long, 2).unwrap();
        }
        assert!(folder.join(SPARE_NAME).exists());
        let short = b"walras-checkpoint/3 short".to_vec();
        write(&folder, 4, &short, 2).unwrap();
        assert_eq!(with_file(&folder, 4, <[u8]>::to_vec).unwrap(), Some(short));
        assert_eq!(heights(&folder).unwrap(), vec![4, 3]);
        let mut names: Vec<String> = fs::read_dir(&folder)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            vec![file_name(3), file_name(4), SPARE_NAME.to_string()]
        );
        assert_eq!(total_bytes(&folder), 2 * long.len() as u64 + 25);
        let _ = fs::remove_dir_all(&folder);
    }
}
