//! The recorded-feed format: one JSON object per line, each a message as received (receive time,
//! venue, connection, raw payload). Nothing here does I/O except on the reader or writer given.

use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};

/// Longest line accepted when reading a recorded feed.
pub const RECORD_BYTES_MAX: usize = 8 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecordKind {
    /// A WebSocket message.
    Ws,
    /// A REST response; `path` is the request path.
    Rest,
    /// The connection dropped; later messages on `conn` belong to a new connection.
    Disconnect,
}

/// One received message: receive time, venue, connection, raw payload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub recv_ns: u64,
    pub venue: String,
    pub conn: u32,
    pub kind: RecordKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub payload: String,
}

#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("line {line}: {detail}")]
    Line { line: usize, detail: String },
}

pub fn write_jsonl(records: &[Record], mut out: impl Write) -> Result<(), FeedError> {
    for r in records {
        let line = serde_json::to_string(r).map_err(|e| FeedError::Line {
            line: 0,
            detail: e.to_string(),
        })?;
        out.write_all(line.as_bytes())?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

pub fn read_jsonl(input: impl BufRead) -> Result<Vec<Record>, FeedError> {
    let mut records = Vec::new();
    for (i, line) in input.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        if line.len() > RECORD_BYTES_MAX {
            return Err(FeedError::Line {
                line: i + 1,
                detail: format!("longer than {RECORD_BYTES_MAX} bytes"),
            });
        }
        records.push(serde_json::from_str(&line).map_err(|e| FeedError::Line {
            line: i + 1,
            detail: e.to_string(),
        })?);
    }
    Ok(records)
}
