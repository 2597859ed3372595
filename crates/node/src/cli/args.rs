//! Argument parsers shared by commands.

use super::CliError;
use std::path::PathBuf;
use walras_node::api::wire::DevGenesisJson;
use walras_node::api::DEV_ACCOUNTS_MAX;
use walras_node::server::GenesisSource;
use walras_types::{Fraction, MAX_ASSETS};

/// An asset count in 2..=MAX_ASSETS.
pub fn asset_count(text: &str) -> Result<usize, String> {
    let count: usize = text
        .parse()
        .map_err(|_| format!("'{text}' is not a whole number"))?;
    if !(2..=MAX_ASSETS).contains(&count) {
        return Err(format!(
            "{count} is out of range: use 2..={MAX_ASSETS} assets"
        ));
    }
    Ok(count)
}

/// A fraction in [0, 1): a decimal (`0.001`) or a power of two (`2^-10`).
pub fn fraction(text: &str) -> Result<Fraction, String> {
    if let Some(exponent) = text.strip_prefix("2^-") {
        let exponent: u32 = exponent
            .parse()
            .map_err(|_| format!("'{text}': expected 2^-K with K in 1..=63"))?;
        if !(1..=63).contains(&exponent) {
            return Err(format!("'{text}': expected 2^-K with K in 1..=63"));
        }
        return Ok(Fraction::power_of_two(exponent));
    }
    Fraction::parse(text).map_err(|error| error.to_string())
}

/// A thread count of at least 1.
pub fn thread_count(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(count) if (1..=1024).contains(&count) => Ok(count),
        _ => Err(format!("'{text}' is not a thread count in 1..=1024")),
    }
}

/// Which genesis a command names: `--genesis FILE`, `--dev` (with its parameters), or none.
#[derive(clap::Args, Debug, Clone)]
pub struct GenesisArgs {
    /// Genesis file: starts a new store in a directory without one; an existing store must
    /// hold this genesis, or the command refuses.
    #[arg(long, conflicts_with = "dev")]
    pub genesis: Option<PathBuf>,
    /// Development genesis (opt-in): accounts whose keys ANYONE can derive from the seed.
    /// For tests and demos only; a warning is printed.
    #[arg(long)]
    pub dev: bool,
    /// Accounts of the development genesis.
    #[arg(long, default_value_t = 10_000, requires = "dev")]
    pub dev_accounts: u64,
    #[arg(long, default_value = "10", value_parser = asset_count, requires = "dev")]
    pub dev_assets: usize,
    #[arg(long, default_value_t = 1, requires = "dev")]
    pub dev_seed: u64,
}

impl GenesisArgs {
    /// The genesis source these arguments name; refuses out-of-range development parameters.
    pub fn source(&self) -> Result<GenesisSource, CliError> {
        if let Some(path) = &self.genesis {
            return Ok(GenesisSource::File(path.clone()));
        }
        if !self.dev {
            return Ok(GenesisSource::Stored);
        }
        if !(2..=DEV_ACCOUNTS_MAX).contains(&self.dev_accounts) {
            return Err(CliError(format!(
                "--dev-accounts must be 2..={DEV_ACCOUNTS_MAX}, got {}",
                self.dev_accounts
            )));
        }
        Ok(GenesisSource::Dev(DevGenesisJson {
            seed: self.dev_seed,
            accounts: self.dev_accounts,
            assets: self.dev_assets as u16,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fractions_both_ways() {
        assert_eq!(fraction("2^-15").unwrap(), Fraction::power_of_two(15));
        assert_eq!(
            fraction("0.0009765625").unwrap(),
            Fraction::power_of_two(10)
        );
        assert!(fraction("2^-0").is_err());
        assert!(fraction("1.5").is_err());
        assert!(asset_count("1").is_err());
        assert!(asset_count("50").is_ok());
        assert!(thread_count("0").is_err());
    }
}
