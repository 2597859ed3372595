//! Asset names for text output: what `GET /v1/assets` says the genesis calls each asset.
//! JSON output keeps asset numbers (scripts join on them); text names them.

use walras_api::wire::AssetsJson;
use walras_client::NodeApi;

/// Each asset's symbol, in asset order, and whether the genesis named them.
pub(crate) struct Symbols {
    named: bool,
    symbols: Vec<String>,
}

impl Symbols {
    pub(crate) fn new(assets: &AssetsJson) -> Symbols {
        Symbols {
            named: assets.named,
            symbols: assets.assets.iter().map(|a| a.symbol.clone()).collect(),
        }
    }

    /// A named table of `symbols`, in asset order (tests).
    #[cfg(test)]
    pub(crate) fn named(symbols: &[&str]) -> Symbols {
        Symbols {
            named: true,
            symbols: symbols.iter().map(|symbol| symbol.to_string()).collect(),
        }
    }

    /// The node's asset table.
    pub(crate) async fn fetch<C: NodeApi>(client: &C) -> anyhow::Result<Symbols> {
        Ok(Symbols::new(&client.assets().await?))
    }

    /// `BTC`; `A7` for an asset the table lacks (the node's own name for unnamed assets).
    pub(crate) fn of(&self, asset: u16) -> String {
        self.symbols
            .get(usize::from(asset))
            .cloned()
            .unwrap_or_else(|| format!("A{asset}"))
    }

    /// `BTC (asset 1)` where the genesis names its assets, `asset 1` where it does not.
    pub(crate) fn label(&self, asset: u16) -> String {
        if self.named {
            format!("{} (asset {asset})", self.of(asset))
        } else {
            format!("asset {asset}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use walras_api::wire::AssetJson;

    fn table(named: bool) -> AssetsJson {
        AssetsJson {
            named,
            quote_asset: 0,
            assets: ["USD", "BTC"]
                .iter()
                .enumerate()
                .map(|(asset, symbol)| AssetJson {
                    asset: asset as u16,
                    symbol: if named {
                        symbol.to_string()
                    } else {
                        format!("A{asset}")
                    },
                    decimals: 2,
                })
                .collect(),
        }
    }

    #[test]
    fn a_named_asset_is_labelled_by_symbol_and_number_and_an_unnamed_one_by_number() {
        let named = Symbols::new(&table(true));
        assert_eq!(named.label(1), "BTC (asset 1)");
        assert_eq!(named.of(0), "USD");
        assert_eq!(named.of(9), "A9");
        let unnamed = Symbols::new(&table(false));
        assert_eq!(unnamed.label(1), "asset 1");
        assert_eq!(unnamed.of(1), "A1");
    }
}
