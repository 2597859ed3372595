//! The participants file: who may connect to a gateway, as participant number → Ed25519 key.
//!
//! One public key (64 hex digits, as `walras keygen` prints it) per line; participant `i` is the
//! `i`-th key. Blank lines and text after `#` are ignored, so operators can name who is who.
//! A key given twice is refused: two numbers with one key would let one holder act as both.

use std::collections::BTreeMap;
use std::str::FromStr;
use walras_crypto::PublicKey;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParticipantsFileError {
    #[error("line {line}: `{text}` is not an Ed25519 public key (64 hex digits): {cause}")]
    BadKey {
        line: usize,
        text: String,
        cause: String,
    },
    #[error("line {line}: the key of participant {first} (line {first_line}) again")]
    Duplicate {
        line: usize,
        first: u32,
        first_line: usize,
    },
    #[error("no participant keys (one hex public key per line)")]
    Empty,
    #[error("more than {max} participants")]
    TooMany { max: usize },
}

/// Parses a participants file; participant numbers follow the order of the keys.
pub fn parse_participant_keys(
    text: &str,
    participants_max: usize,
) -> Result<Vec<PublicKey>, ParticipantsFileError> {
    let mut keys = Vec::new();
    let mut seen: BTreeMap<PublicKey, (u32, usize)> = BTreeMap::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let entry = raw.split('#').next().unwrap_or("").trim();
        if entry.is_empty() {
            continue;
        }
        let key = PublicKey::from_str(entry).map_err(|cause| ParticipantsFileError::BadKey {
            line,
            text: entry.chars().take(80).collect(),
            cause: cause.to_string(),
        })?;
        if keys.len() == participants_max {
            return Err(ParticipantsFileError::TooMany {
                max: participants_max,
            });
        }
        if let Some(&(first, first_line)) = seen.get(&key) {
            return Err(ParticipantsFileError::Duplicate {
                line,
                first,
                first_line,
            });
        }
        seen.insert(key, (keys.len() as u32, line));
        keys.push(key);
    }
    if keys.is_empty() {
        return Err(ParticipantsFileError::Empty);
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;
    use walras_crypto::Keypair;

    fn key(seed: u8) -> PublicKey {
        Keypair::from_seed([seed; 32]).public_key()
    }

    #[test]
    fn keys_are_numbered_in_order_skipping_comments_and_blanks() {
        let text = format!("# desk A\n{}  # alice\n\n   \n{}\n", key(1), key(2));
        assert_eq!(
            parse_participant_keys(&text, 10).unwrap(),
            vec![key(1), key(2)]
        );
    }

    #[test]
    fn a_bad_line_is_named() {
        let text = format!("{}\nnot-a-key\n", key(1));
        assert!(matches!(
            parse_participant_keys(&text, 10),
            Err(ParticipantsFileError::BadKey { line: 2, .. })
        ));
    }

    #[test]
    fn one_key_for_two_participants_is_refused() {
        let text = format!("{}\n{}\n{}\n", key(1), key(2), key(1));
        assert_eq!(
            parse_participant_keys(&text, 10),
            Err(ParticipantsFileError::Duplicate {
                line: 3,
                first: 0,
                first_line: 1
            })
        );
    }

    #[test]
    fn empty_and_oversized_files_are_refused() {
        assert_eq!(
            parse_participant_keys("# nobody\n", 10),
            Err(ParticipantsFileError::Empty)
        );
        let text = format!("{}\n{}\n", key(1), key(2));
        assert_eq!(
            parse_participant_keys(&text, 1),
            Err(ParticipantsFileError::TooMany { max: 1 })
        );
    }
}
