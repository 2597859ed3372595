//! The one durable, private file write of the payments network: wallets, keys and validator
//! configs (which hold secret keys) are written whole or not at all.

use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` durably and readable by the owner only: a temporary file, fsync,
/// rename, fsync of the directory. A crash leaves the old file or the new one, never half.
pub fn write_private_durable(path: &Path, bytes: &[u8]) -> Result<(), std::io::Error> {
    use std::os::unix::fs::OpenOptionsExt;
    let temporary = path.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)?;
    if let Some(parent) = path.parent() {
        std::fs::File::open(if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        })?
        .sync_all()?;
    }
    Ok(())
}
