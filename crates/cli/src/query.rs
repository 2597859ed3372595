//! `walras query ...`: reads from a node, printed for a person or, with `--json`, as the API's
//! own JSON.

use super::remote::{block_on, DEFAULT_NODE};
use super::symbols::Symbols;
use anyhow::{anyhow, Context};
use serde::Serialize;
use walras_api::wire::{
    AccountJson, AccountOffersJson, AssetsJson, BlockFillsJson, BlockJson, BookJson,
    OfferExplanationJson, PricesJson, StatusJson, TransactionStatusJson,
};
use walras_client::{ClientError, NodeApi, NodeClient};

#[derive(clap::Args, Debug)]
pub(crate) struct QueryArgs {
    #[command(subcommand)]
    what: QueryCommand,
    /// Print the node's JSON answer instead of text
    #[arg(long, global = true)]
    json: bool,
    /// Base URL of the node's HTTP API
    #[arg(long, global = true, default_value = DEFAULT_NODE)]
    node: String,
}

#[derive(clap::Subcommand, Debug)]
pub(crate) enum QueryCommand {
    /// Height, roots, sizes, mempool, development genesis
    Status,
    /// An account's keys, sequence numbers and balances
    Account { id: u64 },
    /// An account's open offers
    Offers { id: u64 },
    /// The resting offers selling SELL for BUY, by price level
    Book {
        sell: u16,
        buy: u16,
        /// Price levels to list
        #[arg(long)]
        levels: Option<u32>,
    },
    /// A committed block: header, outcome, trades, dropped transactions
    Block { height: u64 },
    /// What each offer sold and received in a committed block
    Fills {
        height: u64,
        /// Only this account's offers
        #[arg(long)]
        account: Option<u64>,
    },
    /// Last traded prices (units of asset 0), with the assets' symbols
    Prices,
    /// Asset symbols and decimals, from the genesis
    Assets,
    /// A transaction's fate, by hash
    Tx { hash: String },
    /// The node's Prometheus metrics (text; --json does not apply)
    Metrics,
}

pub(crate) fn run(args: QueryArgs) -> anyhow::Result<()> {
    let client = NodeClient::new(&args.node)?;
    let text = block_on(async move { answer(&client, &args.what, args.json).await })??;
    print!("{text}");
    Ok(())
}

/// What `walras query` prints for `what`, asked of the node `client` reaches (the command's
/// whole logic, over any transport: tests run it against a node in process).
pub(crate) async fn answer<C: NodeApi>(
    client: &C,
    what: &QueryCommand,
    json: bool,
) -> anyhow::Result<String> {
    match what {
        QueryCommand::Status => show(client.status().await?, json, status_text),
        QueryCommand::Account { id } => show(client.account(*id).await?, json, account_text),
        QueryCommand::Offers { id } => show(client.account_offers(*id).await?, json, offers_text),
        QueryCommand::Book { sell, buy, levels } => {
            let book = client.book(*sell, *buy, *levels).await?;
            named(client, book, json, book_text).await
        }
        QueryCommand::Block { height } => {
            named(client, client.block(*height).await?, json, block_text).await
        }
        QueryCommand::Fills { height, account } => {
            let fills = client.block_fills(*height, *account).await?;
            named(client, fills, json, fills_text).await
        }
        QueryCommand::Prices if json => show(client.prices().await?, json, |_| String::new()),
        QueryCommand::Prices => {
            let (prices, assets) = (client.prices().await?, client.assets().await?);
            Ok(prices_text(&prices, &assets))
        }
        QueryCommand::Assets => show(client.assets().await?, json, assets_text),
        QueryCommand::Metrics => Ok(client.metrics().await?),
        QueryCommand::Tx { hash } => {
            let hash = checked_hash(hash)?;
            show(
                client
                    .transaction(&hash)
                    .await
                    .map_err(|e| not_found(e, client, &hash))?,
                json,
                transaction_text,
            )
        }
    }
}

/// `walras offer explain ID`.
#[derive(clap::Args, Debug)]
pub(crate) struct ExplainArgs {
    /// The offer's id: the sequence number of the transaction that created it
    id: u64,
    /// The offer's account (offer ids are per account; needed when several used the id)
    #[arg(long)]
    account: Option<u64>,
    /// Print the node's JSON answer instead of text
    #[arg(long)]
    json: bool,
    /// Base URL of the node's HTTP API
    #[arg(long, default_value = DEFAULT_NODE)]
    node: String,
}

pub(crate) fn explain(args: ExplainArgs) -> anyhow::Result<()> {
    let client = NodeClient::new(&args.node)?;
    let id = args.id;
    let text = block_on(async move {
        let explanation = client
            .offer_explanation(args.id, args.account)
            .await
            .map_err(|error| explain_error(error, id))?;
        show(explanation, args.json, explanation_text)
    })??;
    print!("{text}");
    Ok(())
}

/// The node's answer in the CLI's terms: an ambiguous id is resolved with `--account`, not with
/// the HTTP parameter the node names.
fn explain_error(error: ClientError, id: u64) -> anyhow::Error {
    match &error {
        ClientError::Api { code, message, .. } if code == "ambiguous_offer" => {
            let accounts = message
                .split("accounts ")
                .nth(1)
                .and_then(|rest| rest.split(" have").next())
                .unwrap_or("several accounts");
            anyhow::anyhow!(
                "offer ids are per account (the creating transaction's sequence number) and \
                 accounts {accounts} have an offer {id}: name one with --account, e.g. \
                 walras offer explain {id} --account {}",
                accounts.split(", ").next().unwrap_or("ACCOUNT")
            )
        }
        _ => error.into(),
    }
}

fn explanation_text(explanation: &OfferExplanationJson) -> String {
    let mut out = format!("{}\n", explanation.summary);
    let fields: [(&str, Option<String>); 12] = [
        ("status", Some(explanation.status.clone())),
        ("height", explanation.height.map(|h| h.to_string())),
        ("account", explanation.account.map(|a| a.to_string())),
        (
            "pair",
            explanation
                .sell_asset
                .zip(explanation.buy_asset)
                .map(|(sell, buy)| format!("{sell} -> {buy}")),
        ),
        ("limit price", explanation.limit_price.clone()),
        ("clearing rate", explanation.clearing_rate.clone()),
        ("amount", explanation.amount.clone()),
        ("sold", explanation.sold.clone()),
        ("received", explanation.received.clone()),
        ("reason", explanation.reason_code.clone()),
        ("out of money bp", explanation.out_of_money_bp.clone()),
        ("volume ahead", explanation.volume_ahead.clone()),
    ];
    for (name, value) in fields {
        if let Some(value) = value {
            out.push_str(&format!("  {name:<16} {value}\n"));
        }
    }
    out
}

/// The answer as text, or with `json` as the API's own JSON (one line feed at the end).
fn show<T: Serialize>(value: T, json: bool, text: fn(&T) -> String) -> anyhow::Result<String> {
    if json {
        let body = serde_json::to_string_pretty(&value).context("cannot print JSON")?;
        Ok(format!("{body}\n"))
    } else {
        Ok(text(&value))
    }
}

/// As [`show`], the text naming assets by the node's symbols (`GET /v1/assets`, asked only
/// for text).
async fn named<C: NodeApi, T: Serialize>(
    client: &C,
    value: T,
    json: bool,
    text: fn(&T, &Symbols) -> String,
) -> anyhow::Result<String> {
    if json {
        return show(value, json, |_| String::new());
    }
    let symbols = Symbols::fetch(client).await?;
    Ok(text(&value, &symbols))
}

/// A hash as the API wants it (64 lowercase hex digits), or a clear error.
fn checked_hash(text: &str) -> anyhow::Result<String> {
    let hash: walras_crypto::Hash = text
        .trim()
        .parse()
        .with_context(|| format!("'{text}' is not a transaction hash"))?;
    Ok(hash.to_string())
}

fn not_found<C: NodeApi>(
    error: walras_client::ClientError,
    client: &C,
    hash: &str,
) -> anyhow::Error {
    if error.is_not_found() {
        anyhow!(
            "the node at {} knows no transaction {hash} (never admitted, or forgotten)",
            client.base_url()
        )
    } else {
        error.into()
    }
}

fn status_text(status: &StatusJson) -> String {
    let mut out = format!(
        "version      {}\nheight       {}\nblock hash   {}\nstate root   {}\n\
         assets       {}\naccounts     {}\nopen offers  {}\nmempool      {} of {} transactions\n",
        status.version,
        status.height,
        status.block_hash,
        status.state_root,
        status.assets,
        status.accounts,
        status.open_offers,
        status.mempool_transactions,
        status.mempool_capacity
    );
    if let Some(dev) = &status.dev_genesis {
        out.push_str(&format!(
            "dev genesis  seed {}, {} accounts, {} assets (keys anyone can derive: tests and demos only)\n",
            dev.seed, dev.accounts, dev.assets
        ));
    }
    out
}

fn account_text(account: &AccountJson) -> String {
    let mut out = format!(
        "account        {}\npublic key     {}\nlast sequence  {}\nnext sequence  {}\n",
        account.id, account.public_key, account.last_sequence, account.next_sequence
    );
    if account.balances.is_empty() {
        out.push_str("balances       none\n");
    } else {
        out.push_str("  asset                amount\n");
        for balance in &account.balances {
            out.push_str(&format!("  {:>5}  {:>20}\n", balance.asset, balance.amount));
        }
    }
    out
}

fn offers_text(offers: &AccountOffersJson) -> String {
    if offers.offers.is_empty() {
        return format!("account {} has no open offers\n", offers.account);
    }
    let mut out = format!(
        "account {}: {} open offers\n  offer id   sell   buy                amount  min price\n",
        offers.account,
        offers.offers.len()
    );
    for offer in &offers.offers {
        out.push_str(&format!(
            "  {:>8}  {:>5}  {:>4}  {:>20}  {}\n",
            offer.offer_id, offer.sell, offer.buy, offer.amount, offer.min_price
        ));
    }
    out
}

fn book_text(book: &BookJson, symbols: &Symbols) -> String {
    let mut out = format!(
        "book selling {} for {}: {} offers, {} base units of {} offered\n",
        symbols.label(book.sell),
        symbols.label(book.buy),
        book.offers,
        book.amount,
        symbols.of(book.sell)
    );
    if !book.levels.is_empty() {
        out.push_str("  min price                              amount  offers\n");
        for level in &book.levels {
            out.push_str(&format!(
                "  {:<30}  {:>12}  {:>6}\n",
                level.min_price, level.amount, level.offers
            ));
        }
    }
    out
}

fn block_text(block: &BlockJson, symbols: &Symbols) -> String {
    let mut out = format!(
        "block        {}\nhash         {}\nprevious     {}\ntx root      {}\nstate root   {}\n\
         transactions {} ({} accepted, {} dropped)\n",
        block.height,
        block.hash,
        block.previous,
        block.transactions_root,
        block.state_root,
        block.transactions,
        block.accepted,
        block.dropped.len()
    );
    if block.trades.is_empty() {
        out.push_str("prices       none: nothing traded in this block\n");
    } else {
        out.push_str(&format!(
            "prices       {} (base units of {} per base unit; - : not priced by this block)\n",
            price_list(&block.prices, symbols),
            symbols.of(0)
        ));
    }
    for trade in &block.trades {
        out.push_str(&format!(
            "  trade {} -> {}: sold {} (last offer: account {}, id {}, min price {})\n",
            symbols.of(trade.sell),
            symbols.of(trade.buy),
            trade.sold,
            trade.last_offer_account,
            trade.last_offer_id,
            trade.last_offer_min_price
        ));
    }
    for dropped in &block.dropped {
        out.push_str(&format!(
            "  dropped #{} {}: {}\n",
            dropped.index, dropped.hash, dropped.reason
        ));
    }
    out
}

fn fills_text(fills: &BlockFillsJson, symbols: &Symbols) -> String {
    if fills.fills.is_empty() {
        return format!("block {}: no fills\n", fills.height);
    }
    let mut out = format!(
        "block {}: {} fills (amounts in base units)\n  account     offer  pair                        sold        bought  rate (buy per sell)\n",
        fills.height,
        fills.fills.len()
    );
    for fill in &fills.fills {
        let pair = format!("{} -> {}", symbols.of(fill.sell), symbols.of(fill.buy));
        let returned = if fill.returned > 0 {
            format!("  (rest of {} returned: dust)", fill.returned)
        } else {
            String::new()
        };
        out.push_str(&format!(
            "  {:>7}  {:>8}  {:<24}  {:>12}  {:>12}  {}{returned}\n",
            fill.account, fill.offer_id, pair, fill.sold, fill.bought, fill.rate
        ));
    }
    out
}

fn prices_text(prices: &PricesJson, names: &AssetsJson) -> String {
    if prices.height == 0 {
        return "no prices yet: no block has been committed\n".to_string();
    }
    let reference = &prices.reference;
    let symbol = |asset: u16| {
        names
            .assets
            .get(usize::from(asset))
            .map_or_else(|| format!("A{asset}"), |named| named.symbol.clone())
    };
    let quote = symbol(names.quote_asset);
    let mut out = format!(
        "last traded prices at height {} ({quote} base units per base unit{})\n  \
         asset  symbol                price     per token  priced at  last traded\n",
        prices.height,
        match reference.since_height {
            0 => String::new(),
            since => format!("; blocks after {since} only"),
        }
    );
    for asset in &reference.assets {
        out.push_str(&format!(
            "  {:>5}  {:<8}  {:>17}  {:>12}  {:>9}  {:>11}\n",
            asset.asset,
            symbol(asset.asset),
            asset.price.as_deref().unwrap_or("-"),
            asset
                .price
                .as_deref()
                .and_then(|price| per_token(price, asset.asset, names))
                .unwrap_or_else(|| "-".to_string()),
            height_text(asset.price_height),
            match asset.last_traded_height {
                Some(height) => height.to_string(),
                None => "never".to_string(),
            },
        ));
    }
    if !reference.pairs.is_empty() {
        out.push_str(
            "pairs (last clearing rate: units of buy per unit of sell, before commission)\n",
        );
        for pair in &reference.pairs {
            out.push_str(&format!(
                "  {:>8} -> {:<8}  {:>21}  at height {}\n",
                symbol(pair.sell),
                symbol(pair.buy),
                pair.rate,
                pair.height
            ));
        }
    }
    if !prices.traded.contains(&true) {
        out.push_str(&format!(
            "block {} traded nothing: its valuations are not prices\n",
            prices.height
        ));
    }
    out
}

/// A price of base units of the quote asset per base unit of `asset`, as quote tokens per
/// token (`× 10^(decimals of asset − decimals of the quote)`), 6 significant digits; display
/// only.
fn per_token(price: &str, asset: u16, names: &AssetsJson) -> Option<String> {
    let decimals = |asset: u16| names.assets.get(usize::from(asset)).map(|a| a.decimals);
    let shift = i32::from(decimals(asset)?) - i32::from(decimals(names.quote_asset)?);
    let value = price.parse::<f64>().ok()? * 10f64.powi(shift);
    Some(format!("{value:.6e}").parse::<f64>().ok()?.to_string())
}

fn assets_text(names: &AssetsJson) -> String {
    let mut out = String::from("  asset  symbol    decimals\n");
    for asset in &names.assets {
        out.push_str(&format!(
            "  {:>5}  {:<8}  {:>8}\n",
            asset.asset, asset.symbol, asset.decimals
        ));
    }
    if !names.named {
        out.push_str("the genesis names no asset: symbols are the asset numbers\n");
    }
    out
}

fn height_text(height: Option<u64>) -> String {
    height.map_or_else(|| "-".to_string(), |height| height.to_string())
}

fn transaction_text(status: &TransactionStatusJson) -> String {
    let mut out = format!(
        "transaction  {}\nstatus       {}\n",
        status.hash, status.status
    );
    if let Some(height) = status.height {
        out.push_str(&format!("block        {height}\n"));
    }
    if let Some(index) = status.index {
        out.push_str(&format!("index        {index}\n"));
    }
    if let Some(reason) = &status.reason {
        out.push_str(&format!("reason       {reason}\n"));
    }
    out
}

fn price_list(prices: &[Option<String>], symbols: &Symbols) -> String {
    let shown: Vec<String> = prices
        .iter()
        .zip(0u16..)
        .take(12)
        .map(|(price, asset)| format!("{} {}", symbols.of(asset), price.as_deref().unwrap_or("-")))
        .collect();
    let more = prices.len().saturating_sub(12);
    if more > 0 {
        format!("{} ... and {more} more", shown.join(" "))
    } else {
        shown.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_checked_and_lowercased() {
        let upper = "AB".repeat(32);
        assert_eq!(checked_hash(&upper).unwrap(), "ab".repeat(32));
        assert!(checked_hash("xyz")
            .unwrap_err()
            .to_string()
            .contains("not a transaction hash"));
    }

    fn symbols() -> Symbols {
        Symbols::named(&["USD", "BTC", "ETH"])
    }

    #[test]
    fn assets_a_block_did_not_price_are_shown_as_a_dash() {
        let prices = [Some("1".to_string()), None, Some("0.5".to_string())];
        assert_eq!(price_list(&prices, &symbols()), "USD 1 BTC - ETH 0.5");
    }

    /// Trigger: `walras query fills` printed `0 -> 1` on a chain whose genesis names USD and
    /// BTC (issue 28, point 3).
    #[test]
    fn fills_name_their_assets_by_the_genesis_symbols() {
        let fills = BlockFillsJson {
            height: 2,
            fills: vec![walras_api::wire::FillJson {
                account: 2,
                offer_id: 1,
                sell: 0,
                buy: 1,
                sold: 1000,
                bought: 999,
                returned: 0,
                rate: "0.999".to_string(),
            }],
        };
        let text = fills_text(&fills, &symbols());
        assert!(text.contains("USD -> BTC"), "{text}");
        assert!(!text.contains("0 -> 1"), "{text}");
    }
}
