//! Files named by the block height they hold (`HHHHHHHHHHHHHHHHHHHH<suffix>`: 20 digits, so
//! names sort as heights), written under a temporary suffix and renamed when whole: what
//! checkpoint files (`crate::checkpoint_files`) and book snapshot files (`crate::book_files`)
//! share.

use crate::StoreError;
use std::fs::{self, File};
use std::path::Path;

const HEIGHT_DIGITS: usize = 20;

/// One kind of height-named file: its suffixes, and how its I/O failures are described.
pub(crate) struct Kind {
    pub(crate) suffix: &'static str,
    /// The name a file is written under until it is whole (never read).
    pub(crate) temporary_suffix: &'static str,
    pub(crate) listing: &'static str,
    pub(crate) deleting_partial: &'static str,
}

impl Kind {
    pub(crate) fn file_name(&self, height: u64) -> String {
        format!("{height:0HEIGHT_DIGITS$}{}", self.suffix)
    }

    pub(crate) fn temporary_name(&self, height: u64) -> String {
        format!("{height:0HEIGHT_DIGITS$}{}", self.temporary_suffix)
    }

    /// The height a file's name stands for; `None` for any other name.
    pub(crate) fn height_of(&self, name: &str) -> Option<u64> {
        let digits = name.strip_suffix(self.suffix)?;
        if digits.len() != HEIGHT_DIGITS || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()
    }

    /// Heights of the files of this kind in `folder`, newest first (none when it does not
    /// exist). Other files there are ignored.
    pub(crate) fn heights(&self, folder: &Path) -> Result<Vec<u64>, StoreError> {
        let mut heights = Vec::new();
        for name in self.names(folder)? {
            heights.extend(self.height_of(&name));
        }
        heights.sort_unstable_by(|a, b| b.cmp(a));
        Ok(heights)
    }

    /// Removes the temporary files a crash left behind (never a complete file).
    pub(crate) fn remove_temporaries(&self, folder: &Path) -> Result<(), StoreError> {
        for name in self.names(folder)? {
            if name.ends_with(self.temporary_suffix) {
                let path = folder.join(name);
                fs::remove_file(&path)
                    .map_err(|error| io_error(self.deleting_partial, &path, error))?;
            }
        }
        Ok(())
    }

    /// The names in `folder` that are text (none when it does not exist).
    fn names(&self, folder: &Path) -> Result<Vec<String>, StoreError> {
        let entries = match fs::read_dir(folder) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(io_error(self.listing, folder, error)),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|error| io_error(self.listing, folder, error))?;
            names.extend(entry.file_name().into_string().ok());
        }
        Ok(names)
    }
}

/// Makes a rename or deletion in `folder` durable.
pub(crate) fn sync_folder(folder: &Path) -> Result<(), StoreError> {
    File::open(folder)
        .and_then(|handle| handle.sync_all())
        .map_err(|error| io_error("syncing a store folder", folder, error))
}

/// The error for an I/O failure on `path`: [`StoreError::DiskFull`] when the disk is full.
pub(crate) fn io_error(action: &'static str, path: &Path, source: std::io::Error) -> StoreError {
    let dir = path.parent().unwrap_or(path);
    if let Some(available_bytes) = crate::error::disk_is_full(dir, &source) {
        return StoreError::DiskFull {
            dir: dir.to_path_buf(),
            action,
            available_bytes,
        };
    }
    StoreError::File {
        action,
        path: path.to_path_buf(),
        source,
    }
}
