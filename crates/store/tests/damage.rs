//! A damaged data file is refused with an error the operator can act on, before LMDB maps it:
//! a zero-byte `data.mdb` never becomes a new store, a truncated one never crashes the process
//! (reading a mapped page past the end of the file raises SIGBUS).

mod common;

use common::{fresh_store, propose_and_append, TempDir};
use walras_store::{BlockStore, StoreError};

/// Trigger: an empty `data.mdb` (a failed copy, a disk that lost the file's contents). LMDB
/// treats it as a new environment and the node used to initialise a new chain over it.
#[test]
fn open_refuses_a_zero_byte_data_file() {
    let dir = TempDir::new("zero-byte");
    std::fs::create_dir_all(dir.path()).unwrap();
    std::fs::write(dir.path().join("data.mdb"), b"").unwrap();
    let error = BlockStore::open(dir.path()).err().expect("refused");
    assert!(
        matches!(error, StoreError::Truncated { file_bytes: 0, .. }),
        "{error}"
    );
    assert_eq!(
        std::fs::metadata(dir.path().join("data.mdb"))
            .unwrap()
            .len(),
        0,
        "the evidence is left as it was"
    );
}

/// Trigger: `data.mdb` cut to half its length after blocks were committed. Opening it used to
/// map it and crash with SIGBUS on the first read of a page past the end.
#[test]
fn open_refuses_a_truncated_data_file_instead_of_crashing() {
    let dir = TempDir::new("truncated-file");
    let (store, mut state) = fresh_store(dir.path());
    for _ in 0..40 {
        propose_and_append(&store, &mut state);
    }
    drop(store);
    let path = dir.path().join("data.mdb");
    let length = std::fs::metadata(&path).unwrap().len();
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(length / 2).unwrap();
    drop(file);
    let error = BlockStore::open(dir.path()).err().expect("refused");
    let StoreError::Truncated {
        file_bytes,
        required_bytes,
        ..
    } = error
    else {
        panic!("expected Truncated, got {error}");
    };
    assert_eq!(file_bytes, length / 2);
    assert!(required_bytes > file_bytes);
    assert!(error.to_string().contains("truncated"), "{error}");
}
