//! Reading and setting plain values in CometBFT's `config.toml`, by section and key, with
//! `toml_edit`, which keeps the file's comments and layout (a parse-and-reserialise round trip
//! through `toml` would drop them).

use toml_edit::{DocumentMut, Item, Value};

/// Why a key could not be set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TomlEditError {
    /// The file is not TOML.
    #[error("config.toml is not valid TOML: {0}")]
    Parse(String),
    /// The value given is not a TOML value.
    #[error("{value} is not a TOML value for {key}")]
    Value { key: String, value: String },
    /// The key is absent (only existing keys are set).
    #[error("config.toml has no key {key} in [{section}]: is it a CometBFT 0.38 configuration?")]
    MissingKey { section: String, key: String },
}

/// The raw value of `key` in `[section]` ("" for the top level), strings without quotes.
pub fn get(text: &str, section: &str, key: &str) -> Option<String> {
    let document: DocumentMut = text.parse().ok()?;
    let item = table_item(&document, section)?.get(key)?;
    match item.as_value()? {
        Value::String(string) => Some(string.value().clone()),
        other => Some(other.to_string().trim().to_string()),
    }
}

/// Replaces the value of an existing `key` in `[section]` with `value` (TOML syntax: quote
/// strings yourself), keeping the value's surrounding comments.
pub fn set(text: &str, section: &str, key: &str, value: &str) -> Result<String, TomlEditError> {
    let mut document: DocumentMut = text
        .parse()
        .map_err(|error: toml_edit::TomlError| TomlEditError::Parse(error.to_string()))?;
    let parsed: Value = value.parse().map_err(|_| TomlEditError::Value {
        key: key.to_string(),
        value: value.to_string(),
    })?;
    let missing = || TomlEditError::MissingKey {
        section: if section.is_empty() {
            "the top level".into()
        } else {
            section.to_string()
        },
        key: key.to_string(),
    };
    let table = if section.is_empty() {
        document.as_table_mut()
    } else {
        document
            .get_mut(section)
            .and_then(Item::as_table_mut)
            .ok_or_else(missing)?
    };
    let slot = table
        .get_mut(key)
        .and_then(Item::as_value_mut)
        .ok_or_else(missing)?;
    let decor = slot.decor().clone();
    *slot = parsed;
    *slot.decor_mut() = decor;
    Ok(document.to_string())
}

fn table_item<'a>(document: &'a DocumentMut, section: &str) -> Option<&'a toml_edit::Table> {
    if section.is_empty() {
        Some(document.as_table())
    } else {
        document.get(section)?.as_table()
    }
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
        assert!(matches!(error, TomlEditError::MissingKey { ref key, .. } if key == "size"));
        assert!(get(SAMPLE, "rpc", "nothing").is_none());
    }
}
