//! Key files: `{"secret_seed": "<64 hex>", "public_key": "<64 hex>"}`, written readable by the
//! owner only (mode 0600). The public key is redundant — it is derived from the seed — and is
//! checked on reading, so a hand-edited or truncated file is refused instead of signing with a
//! key nobody expects.

use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};
use walras_api::hex;
use walras_crypto::{Keypair, PublicKey, SECRET_SEED_BYTES};

/// The JSON body of a key file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyFileJson {
    pub secret_seed: String,
    pub public_key: String,
}

/// Why a key could not be made, read or written.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    /// The operating system could not give random bytes for a new key.
    #[error("the system random number generator failed: {0}")]
    Random(String),
    /// The key file could not be read, created or written.
    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        error: std::io::Error,
    },
    /// Writing would overwrite an existing key.
    #[error(
        "{} already exists: refusing to overwrite a key (remove it or choose another file)",
        .0.display()
    )]
    Exists(PathBuf),
    /// The file is not a key file.
    #[error(
        "{} is not a key file ({detail}); expected {{\"secret_seed\": HEX, \"public_key\": HEX}} \
         as written by `walras keygen`",
        path.display()
    )]
    Format { path: PathBuf, detail: String },
    /// The key file's public key is not its secret seed's.
    #[error(
        "{}: public_key does not belong to secret_seed (the file was edited or damaged)",
        path.display()
    )]
    Mismatch { path: PathBuf },
}

/// A fresh secret seed from the operating system's random number generator.
pub fn random_seed() -> Result<[u8; SECRET_SEED_BYTES], KeyFileError> {
    let mut seed = [0u8; SECRET_SEED_BYTES];
    getrandom::getrandom(&mut seed).map_err(|error| KeyFileError::Random(error.to_string()))?;
    Ok(seed)
}

/// The key file body of `seed`.
pub fn to_json(seed: &[u8; SECRET_SEED_BYTES]) -> KeyFileJson {
    KeyFileJson {
        secret_seed: hex(seed),
        public_key: Keypair::from_seed(*seed).public_key().to_string(),
    }
}

/// Writes the key file for `seed` at `path`, mode 0600; refuses to replace an existing file.
pub fn write(path: &Path, seed: &[u8; SECRET_SEED_BYTES]) -> Result<(), KeyFileError> {
    let io = |error| KeyFileError::Io {
        path: path.to_path_buf(),
        error,
    };
    let mut text =
        serde_json::to_string_pretty(&to_json(seed)).map_err(|error| io(error.into()))?;
    text.push('\n');
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(|error| {
        if error.kind() == std::io::ErrorKind::AlreadyExists {
            KeyFileError::Exists(path.to_path_buf())
        } else {
            io(error)
        }
    })?;
    file.write_all(text.as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)
}

/// Reads and checks a key file.
pub fn read(path: &Path) -> Result<Keypair, KeyFileError> {
    let text = std::fs::read_to_string(path).map_err(|error| KeyFileError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    parse(&text).map_err(|error| match error {
        ParseError::Format(detail) => KeyFileError::Format {
            path: path.to_path_buf(),
            detail,
        },
        ParseError::Mismatch => KeyFileError::Mismatch {
            path: path.to_path_buf(),
        },
    })
}

enum ParseError {
    Format(String),
    Mismatch,
}

fn parse(text: &str) -> Result<Keypair, ParseError> {
    let json: KeyFileJson =
        serde_json::from_str(text).map_err(|error| ParseError::Format(error.to_string()))?;
    let seed = decode_seed(&json.secret_seed).map_err(ParseError::Format)?;
    let public_key: PublicKey = json
        .public_key
        .parse()
        .map_err(|error| ParseError::Format(format!("public_key: {error}")))?;
    let keypair = Keypair::from_seed(seed);
    if keypair.public_key() != public_key {
        return Err(ParseError::Mismatch);
    }
    Ok(keypair)
}

fn decode_seed(text: &str) -> Result<[u8; SECRET_SEED_BYTES], String> {
    if text.len() != 2 * SECRET_SEED_BYTES || !text.is_ascii() {
        return Err(format!(
            "secret_seed must be {} hex digits",
            2 * SECRET_SEED_BYTES
        ));
    }
    let mut seed = [0u8; SECRET_SEED_BYTES];
    for (index, byte) in seed.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * index..2 * index + 2], 16)
            .map_err(|_| format!("secret_seed: not hex at digit {}", 2 * index))?;
    }
    Ok(seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_path(name: &str) -> PathBuf {
        let directory =
            std::env::temp_dir().join(format!("walras-keyfile-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&directory);
        std::fs::create_dir_all(&directory).unwrap();
        directory.join("key.json")
    }

    #[test]
    fn a_written_key_reads_back_and_is_private() {
        let path = temp_path("roundtrip");
        let seed = random_seed().unwrap();
        write(&path, &seed).unwrap();
        let keypair = read(&path).unwrap();
        assert_eq!(keypair.public_key(), Keypair::from_seed(seed).public_key());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(matches!(write(&path, &seed), Err(KeyFileError::Exists(_))));
        if let Some(directory) = path.parent() {
            let _ = std::fs::remove_dir_all(directory);
        }
    }

    #[test]
    fn damaged_key_files_are_refused() {
        let good = to_json(&[7u8; 32]);
        assert!(parse(&serde_json::to_string(&good).unwrap()).is_ok());
        let other = to_json(&[8u8; 32]);
        let mismatched = KeyFileJson {
            public_key: other.public_key,
            ..good.clone()
        };
        assert!(matches!(
            parse(&serde_json::to_string(&mismatched).unwrap()),
            Err(ParseError::Mismatch)
        ));
        let short = KeyFileJson {
            secret_seed: "abcd".to_string(),
            ..good.clone()
        };
        assert!(matches!(
            parse(&serde_json::to_string(&short).unwrap()),
            Err(ParseError::Format(_))
        ));
        assert!(matches!(parse("not json"), Err(ParseError::Format(_))));
        let non_ascii = format!("{}é", &good.secret_seed[..62]);
        assert!(decode_seed(&non_ascii).is_err());
    }

    #[test]
    fn random_seeds_differ() {
        assert_ne!(random_seed().unwrap(), random_seed().unwrap());
    }
}
