//! Reading and setting plain values in CometBFT's `config.toml`, by section and key.
//!
//! CometBFT writes a flat file: `[section]` headers, then `key = value` lines (no nested
//! tables, no multi-line values among the keys set here). Editing it line by line keeps its
//! comments, which a parse-and-reserialise round trip would drop.

/// Why a key could not be set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingKey {
    pub section: String,
    pub key: String,
}

impl std::fmt::Display for MissingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let section = if self.section.is_empty() {
            "the top level"
        } else {
            &self.section
        };
        write!(
            f,
            "config.toml has no key {} in [{}]: is it a CometBFT 0.38 configuration?",
            self.key, section
        )
    }
}

impl std::error::Error for MissingKey {}

/// The raw value of `key` in `[section]` ("" for the top level), without surrounding quotes.
pub fn get(text: &str, section: &str, key: &str) -> Option<String> {
    let mut current = String::new();
    for line in text.lines() {
        if let Some(name) = section_name(line) {
            current = name;
            continue;
        }
        if current == section {
            if let Some(value) = value_of(line, key) {
                return Some(value.trim_matches('"').to_string());
            }
        }
    }
    None
}

/// Replaces the value of an existing `key` in `[section]` with `value` (written as given:
/// quote strings yourself).
pub fn set(text: &str, section: &str, key: &str, value: &str) -> Result<String, MissingKey> {
    let mut current = String::new();
    let mut found = false;
    let mut out = String::with_capacity(text.len() + value.len());
    for line in text.lines() {
        if let Some(name) = section_name(line) {
            current = name;
        } else if !found && current == section && value_of(line, key).is_some() {
            out.push_str(&format!("{key} = {value}\n"));
            found = true;
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    if found {
        Ok(out)
    } else {
        Err(MissingKey {
            section: section.to_string(),
            key: key.to_string(),
        })
    }
}

fn section_name(line: &str) -> Option<String> {
    let line = line.trim();
    let name = line.strip_prefix('[')?.strip_suffix(']')?;
    Some(name.trim().to_string())
}

fn value_of<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let line = line.trim();
    if line.starts_with('#') {
        return None;
    }
    let (name, value) = line.split_once('=')?;
    (name.trim() == key).then(|| value.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "# top\nproxy_app = \"tcp://127.0.0.1:26658\"\n\n[rpc]\nladdr = \"tcp://127.0.0.1:26657\"\n# laddr = \"commented\"\n\n[p2p]\nladdr = \"tcp://0.0.0.0:26656\"\npersistent_peers = \"\"\n";

    #[test]
    fn keys_are_read_and_set_within_their_section() {
        assert_eq!(
            get(SAMPLE, "rpc", "laddr").as_deref(),
            Some("tcp://127.0.0.1:26657")
        );
        assert_eq!(
            get(SAMPLE, "p2p", "laddr").as_deref(),
            Some("tcp://0.0.0.0:26656")
        );
        assert_eq!(
            get(SAMPLE, "", "proxy_app").as_deref(),
            Some("tcp://127.0.0.1:26658")
        );
        let edited = set(SAMPLE, "p2p", "laddr", "\"tcp://127.0.0.1:4000\"").unwrap();
        assert_eq!(
            get(&edited, "p2p", "laddr").as_deref(),
            Some("tcp://127.0.0.1:4000")
        );
        assert_eq!(
            get(&edited, "rpc", "laddr").as_deref(),
            Some("tcp://127.0.0.1:26657")
        );
        assert!(
            edited.contains("# laddr = \"commented\""),
            "comments survive"
        );
    }

    #[test]
    fn setting_a_missing_key_is_an_error() {
        let error = set(SAMPLE, "mempool", "size", "10").unwrap_err();
        assert_eq!(error.key, "size");
        assert!(get(SAMPLE, "rpc", "nothing").is_none());
    }
}
