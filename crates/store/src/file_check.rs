//! Checks `data.mdb` against its own meta pages before LMDB maps it.
//!
//! LMDB maps the whole file and reads pages by address: a page past the end of a truncated file
//! raises SIGBUS and kills the process without a word. An empty file is worse: LMDB takes it for
//! a new environment. So before opening, the two meta pages are read with ordinary file reads
//! and the file must hold every page up to the last one the newest valid meta page uses.
//!
//! Layout (LMDB 0.9, 64-bit, `lmdb-master-sys`): page 0 and page 1 are meta pages. A page
//! starts with a 16-byte header; the meta follows it: `magic:u32 version:u32 address:u64
//! mapsize:u64 dbs:[MDB_db; 2] last_pg:u64 txnid:u64`, native byte order, where `MDB_db` is 48
//! bytes and the free-space database's first field (`md_pad`) holds the page size.

use crate::StoreError;
use std::fs::File;
use std::io::Read;
use std::path::Path;

const PAGE_HEADER_BYTES: usize = 16;
const MAGIC: u32 = 0xBEEF_C0DE;
const DATA_VERSION: u32 = 1;
const MAGIC_AT: usize = PAGE_HEADER_BYTES;
const VERSION_AT: usize = PAGE_HEADER_BYTES + 4;
/// `md_pad` of the free-space database: the page size.
const PAGE_SIZE_AT: usize = PAGE_HEADER_BYTES + 24;
const LAST_PAGE_AT: usize = PAGE_HEADER_BYTES + 24 + 2 * 48;
const TXNID_AT: usize = LAST_PAGE_AT + 8;
const META_BYTES: usize = TXNID_AT + 8;
const PAGE_SIZE_MIN: u64 = 512;
const PAGE_SIZE_MAX: u64 = 65_536;

/// What a meta page says.
#[derive(Clone, Copy, Debug)]
struct Meta {
    page_bytes: u64,
    last_page: u64,
    txnid: u64,
}

/// Refuses a `data.mdb` in `dir` that is shorter than two meta pages or than the pages its
/// newest valid commit uses. A file whose meta pages are not LMDB's is left to LMDB to refuse.
pub(crate) fn check_data_file(dir: &Path) -> Result<(), StoreError> {
    let path = dir.join("data.mdb");
    let io_error = |error: std::io::Error| StoreError::NotAStore {
        dir: dir.to_path_buf(),
        reason: format!("cannot read data.mdb: {error}"),
    };
    let file = File::open(&path).map_err(io_error)?;
    let file_bytes = file.metadata().map_err(io_error)?.len();
    let truncated = |required_bytes: u64| StoreError::Truncated {
        dir: dir.to_path_buf(),
        file_bytes,
        required_bytes,
    };
    // Both meta pages, whatever the page size.
    let mut head = Vec::with_capacity(PAGE_SIZE_MAX as usize + META_BYTES);
    file.take(PAGE_SIZE_MAX + META_BYTES as u64)
        .read_to_end(&mut head)
        .map_err(io_error)?;
    if head.len() < META_BYTES {
        return Err(truncated(2 * PAGE_SIZE_MIN));
    }
    let Some(meta0) = parse_meta(&head) else {
        // Not LMDB's layout (or page 0 torn): LMDB itself reports what it makes of it.
        return Ok(());
    };
    let two_pages = 2 * meta0.page_bytes;
    if file_bytes < two_pages {
        return Err(truncated(two_pages));
    }
    let meta1 = parse_meta(&head[meta0.page_bytes as usize..]);
    // LMDB uses the valid meta page with the larger transaction id.
    let newest = match meta1 {
        Some(meta1) if meta1.txnid > meta0.txnid => meta1,
        _ => meta0,
    };
    let required_bytes = newest
        .last_page
        .saturating_add(1)
        .saturating_mul(newest.page_bytes);
    if file_bytes < required_bytes {
        return Err(truncated(required_bytes));
    }
    Ok(())
}

fn parse_meta(bytes: &[u8]) -> Option<Meta> {
    let u32_at = |at: usize| u32::from_ne_bytes(bytes[at..at + 4].try_into().unwrap_or([0; 4]));
    let u64_at = |at: usize| u64::from_ne_bytes(bytes[at..at + 8].try_into().unwrap_or([0; 8]));
    if bytes.len() < META_BYTES || u32_at(MAGIC_AT) != MAGIC || u32_at(VERSION_AT) != DATA_VERSION {
        return None;
    }
    let page_bytes = u32_at(PAGE_SIZE_AT) as u64;
    if !page_bytes.is_power_of_two() || !(PAGE_SIZE_MIN..=PAGE_SIZE_MAX).contains(&page_bytes) {
        return None;
    }
    Some(Meta {
        page_bytes,
        last_page: u64_at(LAST_PAGE_AT),
        txnid: u64_at(TXNID_AT),
    })
}
