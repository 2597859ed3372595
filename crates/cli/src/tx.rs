//! Commands that sign and submit one transaction: `walras account create`, `walras offer
//! create|cancel`, `walras pay`. They share the signing options ([`SignerArgs`]): the source
//! account, its key (a key file or the development key), the sequence number (by default the
//! node's `next_sequence` for the account) and `--wait`.

use super::remote::{block_on, dev_secret_seed, NodeArgs};
use super::symbols::Symbols;
use anyhow::{anyhow, Context};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use walras_api::wire::TransactionStatusJson;
use walras_client::{keyfile, NodeApi};
use walras_crypto::{Keypair, PublicKey};
use walras_engine::transaction_hash;
use walras_types::{AccountId, AssetId, OfferId, Operation, Price, SignedTransaction, Transaction};

/// How long `--wait` waits for the transaction's block.
const WAIT_TIMEOUT: Duration = Duration::from_secs(30);
const WAIT_POLL: Duration = Duration::from_millis(100);

#[derive(clap::Args, Debug)]
pub(crate) struct SignerArgs {
    /// The account that signs and pays for the transaction
    #[arg(long, value_name = "ID")]
    source: u64,
    #[command(flatten)]
    signing_key: SigningKeyArgs,
    /// Sequence number [default: the account's next_sequence on the node]
    #[arg(long, value_name = "N")]
    sequence: Option<u64>,
    /// Wait (up to 30 s) until the transaction is in a block, and print the outcome: for an
    /// offer, what it sold and received in that block and what rests on the book
    #[arg(long)]
    wait: bool,
    /// Send the transaction in its JSON form instead of the binary encoding
    #[arg(long)]
    submit_json: bool,
    #[command(flatten)]
    node: NodeArgs,
}

/// Exactly one of them.
#[derive(clap::Args, Debug)]
#[group(required = true, multiple = false)]
pub(crate) struct SigningKeyArgs {
    /// Key file of the source account (as written by `walras keygen`)
    #[arg(long, value_name = "FILE")]
    key: Option<PathBuf>,
    /// Sign with the source's development key (the node must run a development genesis)
    #[arg(long)]
    dev: bool,
}

#[derive(clap::Subcommand, Debug)]
pub(crate) enum AccountCommand {
    /// Create an account controlled by a public key
    Create(CreateAccountArgs),
}

#[derive(clap::Args, Debug)]
pub(crate) struct CreateAccountArgs {
    /// Id of the account to create
    #[arg(long, value_name = "ID")]
    new_account: u64,
    #[command(flatten)]
    new_key: NewAccountKeyArgs,
    #[command(flatten)]
    signer: SignerArgs,
}

/// Exactly one of them.
#[derive(clap::Args, Debug)]
#[group(required = true, multiple = false)]
pub(crate) struct NewAccountKeyArgs {
    /// The new account's public key, hex
    #[arg(long, value_name = "HEX", value_parser = parse_public_key)]
    public_key: Option<PublicKey>,
    /// Make a fresh key for the new account and write it to FILE (readable by you only)
    #[arg(long, value_name = "FILE")]
    new_key: Option<PathBuf>,
}

#[derive(clap::Subcommand, Debug)]
pub(crate) enum OfferCommand {
    /// Offer to sell AMOUNT of asset SELL for asset BUY at no less than MIN-PRICE
    Create(CreateOfferArgs),
    /// Cancel one of the source's open offers (the rest of its amount comes back)
    Cancel(CancelOfferArgs),
    /// Why an offer traded or not: its limit against the clearing rate, the volume ahead of
    /// it, the filter rule that dropped it, its cancel (read from the node's committed blocks)
    Explain(super::query::ExplainArgs),
}

#[derive(clap::Args, Debug)]
pub(crate) struct CreateOfferArgs {
    /// Asset sold
    #[arg(long)]
    sell: u16,
    /// Asset bought
    #[arg(long)]
    buy: u16,
    /// Amount of SELL offered (an integer)
    #[arg(long)]
    amount: u64,
    /// Lowest acceptable price: units of BUY per unit of SELL, a decimal
    #[arg(long, value_name = "DECIMAL", value_parser = parse_limit_price)]
    min_price: Price,
    #[command(flatten)]
    signer: SignerArgs,
}

#[derive(clap::Args, Debug)]
pub(crate) struct CancelOfferArgs {
    /// Asset the offer sells (optional: looked up from the source's open offers when
    /// --sell, --buy and --min-price are all left out)
    #[arg(long, requires_all = ["buy", "min_price"])]
    sell: Option<u16>,
    /// Asset the offer buys (optional, with --sell)
    #[arg(long, requires_all = ["sell", "min_price"])]
    buy: Option<u16>,
    /// The offer's limit price, as given when it was created (optional, with --sell)
    #[arg(long, value_name = "DECIMAL", value_parser = parse_limit_price, requires_all = ["sell", "buy"])]
    min_price: Option<Price>,
    /// The offer's id: the sequence number of the transaction that created it
    #[arg(long, value_name = "ID")]
    offer_id: u64,
    #[command(flatten)]
    signer: SignerArgs,
}

#[derive(clap::Args, Debug)]
pub(crate) struct PayArgs {
    /// Receiving account
    #[arg(long, value_name = "ID")]
    to: u64,
    /// Asset paid
    #[arg(long)]
    asset: u16,
    /// Amount paid (an integer)
    #[arg(long)]
    amount: u64,
    #[command(flatten)]
    signer: SignerArgs,
}

fn parse_limit_price(text: &str) -> Result<Price, String> {
    Price::parse_limit(text).map_err(|error| error.to_string())
}

fn parse_public_key(text: &str) -> Result<PublicKey, String> {
    text.parse()
        .map_err(|error: walras_crypto::DecodeError| error.to_string())
}

pub(crate) fn run_account(command: AccountCommand) -> anyhow::Result<()> {
    let AccountCommand::Create(args) = command;
    let public_key = match (&args.new_key.public_key, &args.new_key.new_key) {
        (Some(key), _) => *key,
        (None, Some(path)) => {
            // Written before submitting, so a created account never lacks its key.
            let seed = keyfile::random_seed()?;
            keyfile::write(path, &seed)?;
            println!("wrote the new account's key to {}", path.display());
            Keypair::from_seed(seed).public_key()
        }
        (None, None) => {
            return Err(anyhow!(
                "give the new account's key: --public-key HEX or --new-key FILE"
            ))
        }
    };
    let operation = Operation::CreateAccount {
        new_account: AccountId(args.new_account),
        public_key: *public_key.as_bytes(),
    };
    submit(&args.signer, operation)?;
    Ok(())
}

pub(crate) fn run_offer(command: OfferCommand) -> anyhow::Result<()> {
    match command {
        OfferCommand::Create(args) => {
            let operation = Operation::CreateOffer {
                sell: AssetId(args.sell),
                buy: AssetId(args.buy),
                amount: args.amount,
                min_price: args.min_price,
            };
            let sequence = submit(&args.signer, operation)?;
            println!(
                "offer id {sequence} (cancel with: walras offer cancel --offer-id {sequence} \
                 --source {} ...)",
                args.signer.source
            );
            Ok(())
        }
        OfferCommand::Cancel(args) => {
            let (sell, buy, min_price) = match (args.sell, args.buy, args.min_price) {
                (Some(sell), Some(buy), Some(min_price)) => (sell, buy, min_price),
                _ => {
                    let client = args.signer.node.client()?;
                    block_on(open_offer(&client, args.signer.source, args.offer_id))??
                }
            };
            let operation = Operation::CancelOffer {
                sell: AssetId(sell),
                buy: AssetId(buy),
                min_price,
                offer_id: OfferId(args.offer_id),
            };
            submit(&args.signer, operation).map(|_| ())
        }
        OfferCommand::Explain(args) => super::query::explain(args),
    }
}

/// The sell asset, buy asset and limit price of `account`'s open offer `offer_id`, read from
/// the node: what a cancel names besides the id.
pub(crate) async fn open_offer<C: NodeApi>(
    client: &C,
    account: u64,
    offer_id: u64,
) -> anyhow::Result<(u16, u16, Price)> {
    let offers = client
        .account_offers(account)
        .await
        .with_context(|| format!("reading account {account}'s open offers"))?;
    let offer = offers
        .offers
        .iter()
        .find(|offer| offer.offer_id == offer_id)
        .ok_or_else(|| {
            anyhow!(
                "account {account} has no open offer with id {offer_id}: it may have traded in \
                 full or been cancelled (see: walras offer explain {offer_id} --account {account})"
            )
        })?;
    let min_price = Price::parse_limit(&offer.min_price)
        .map_err(|error| anyhow!("the node listed limit price {:?}: {error}", offer.min_price))?;
    Ok((offer.sell, offer.buy, min_price))
}

pub(crate) fn run_pay(args: PayArgs) -> anyhow::Result<()> {
    let operation = Operation::Payment {
        to: AccountId(args.to),
        asset: AssetId(args.asset),
        amount: args.amount,
    };
    submit(&args.signer, operation).map(|_| ())
}

/// Signs `operation` for the source, submits it, optionally waits; returns its sequence.
fn submit(signer: &SignerArgs, operation: Operation) -> anyhow::Result<u64> {
    submit_signed(signer, operation, signer.wait).map(|signed| signed.transaction.sequence)
}

/// [`submit`], returning the signed transaction; with `wait`, returns only once it is accepted
/// in a committed block (a drop is an error naming the reason).
pub(crate) fn submit_signed(
    signer: &SignerArgs,
    operation: Operation,
    wait: bool,
) -> anyhow::Result<SignedTransaction> {
    let client = signer.node.client()?;
    block_on(submit_with(&client, signer, operation, wait))?
}

/// [`submit_signed`]'s logic against the node `client` reaches, over any transport (tests
/// run it against a node in process).
pub(crate) async fn submit_with<C: NodeApi>(
    client: &C,
    signer: &SignerArgs,
    operation: Operation,
    wait: bool,
) -> anyhow::Result<SignedTransaction> {
    let keypair = signing_key(client, signer).await?;
    let next_sequence = source_account(client, signer, &keypair).await?;
    let sequence = signer.sequence.unwrap_or(next_sequence);
    let signed = sign(&keypair, signer.source, sequence, operation)?;
    let hash = transaction_hash(&signed).to_string();
    if signer.submit_json {
        client.submit_json(&signed).await?;
    } else {
        client.submit(&signed).await?;
    }
    if wait {
        let status = wait_for(client, &hash).await?;
        let mut text = outcome(&status)?;
        if let Some(height) = status.height {
            text.push_str(&offer_outcome(client, &signed, height).await);
        }
        print!("{text}");
    } else {
        println!(
            "transaction {hash} pending (account {}, sequence {sequence})",
            signer.source
        );
    }
    Ok(signed)
}

async fn signing_key<C: NodeApi>(client: &C, signer: &SignerArgs) -> anyhow::Result<Keypair> {
    match &signer.signing_key.key {
        Some(path) => Ok(keyfile::read(path)?),
        None => {
            let seed = dev_secret_seed(client, signer.source).await?;
            Ok(Keypair::from_seed(seed))
        }
    }
}

/// Checks that `keypair` controls the source account and returns its next sequence number.
async fn source_account<C: NodeApi>(
    client: &C,
    signer: &SignerArgs,
    keypair: &Keypair,
) -> anyhow::Result<u64> {
    let account = client.account(signer.source).await.map_err(|error| {
        if error.is_not_found() {
            anyhow!(
                "account {} does not exist on the node at {} (create it with `walras account create`)",
                signer.source,
                client.base_url()
            )
        } else {
            error.into()
        }
    })?;
    let public_key = keypair.public_key().to_string();
    if account.public_key != public_key {
        let which = match &signer.signing_key.key {
            Some(path) => format!("the key in {}", path.display()),
            None => "the development key".to_string(),
        };
        return Err(anyhow!(
            "{which} ({public_key}) does not control account {} (its key is {})",
            signer.source,
            account.public_key
        ));
    }
    Ok(account.next_sequence)
}

/// Signs and checks the transaction as the node will (a bad amount or asset pair is caught
/// here, with the decoder's message, instead of as a `malformed` answer).
fn sign(
    keypair: &Keypair,
    source: u64,
    sequence: u64,
    operation: Operation,
) -> anyhow::Result<SignedTransaction> {
    let transaction = Transaction {
        source: AccountId(source),
        sequence,
        operation,
    };
    let signed = SignedTransaction {
        transaction,
        signature: *keypair.sign(&transaction.encode()).as_bytes(),
    };
    SignedTransaction::decode(&signed.encode()).context("the transaction is not valid")
}

/// Polls the transaction until it leaves `pending`; returns its status.
async fn wait_for<C: NodeApi>(client: &C, hash: &str) -> anyhow::Result<TransactionStatusJson> {
    let deadline = Instant::now() + WAIT_TIMEOUT;
    loop {
        match client.transaction(hash).await {
            Ok(status) if status.status != "pending" => return Ok(status),
            Ok(_) => {}
            // Briefly unknown is possible right after admission on a busy node; keep polling.
            Err(error) if error.is_not_found() => {}
            Err(error) => return Err(error.into()),
        }
        if Instant::now() >= deadline {
            return Err(anyhow!(
                "transaction {hash} is still pending after {} s; check later with \
                 `walras query tx {hash}`",
                WAIT_TIMEOUT.as_secs()
            ));
        }
        tokio::time::sleep(WAIT_POLL).await;
    }
}

/// The line saying where the transaction landed; a drop is an error naming the reason.
fn outcome(status: &TransactionStatusJson) -> anyhow::Result<String> {
    let height = status
        .height
        .map_or_else(|| "?".to_string(), |height| height.to_string());
    match status.status.as_str() {
        "accepted" => {
            let index = status
                .index
                .map_or_else(String::new, |index| format!(", index {index}"));
            Ok(format!(
                "transaction {} accepted in block {height}{index}\n",
                status.hash
            ))
        }
        "dropped" => Err(anyhow!(
            "transaction {} was dropped in block {height}: {} (what each reason means: \
             docs/formats.md)",
            status.hash,
            status.reason.as_deref().unwrap_or("no reason given")
        )),
        other => Err(anyhow!(
            "transaction {} has status {other:?}, which this client does not know",
            status.hash
        )),
    }
}

/// For an accepted offer creation or cancel, what became of the offer in block `height`: its
/// fill there (read from `GET /v1/blocks/{height}/fills?account=`) and what rests on the book,
/// or that it was cancelled; nothing for other transactions.
async fn offer_outcome<C: NodeApi>(client: &C, signed: &SignedTransaction, height: u64) -> String {
    let transaction = &signed.transaction;
    let account = transaction.source.0;
    match transaction.operation {
        Operation::CreateOffer {
            sell, buy, amount, ..
        } => {
            let id = transaction.sequence;
            let read = async {
                let fills = client.block_fills(height, Some(account)).await?;
                anyhow::Ok((fills, Symbols::fetch(client).await?))
            };
            match read.await {
                Ok((fills, symbols)) => {
                    let fill = fills.fills.iter().find(|fill| fill.offer_id == id);
                    let offer = (sell.0, buy.0, amount);
                    fill_text(id, account, offer, height, fill, &symbols)
                }
                Err(error) => format!(
                    "offer {id}: its fill in block {height} could not be read ({error}); see \
                     walras offer explain {id} --account {account}\n"
                ),
            }
        }
        Operation::CancelOffer { offer_id, sell, .. } => format!(
            "offer {} cancelled in block {height}: what rested of it came back to account \
             {account} ({})\n",
            offer_id.0,
            match Symbols::fetch(client).await {
                Ok(symbols) => symbols.label(sell.0),
                Err(_) => format!("asset {}", sell.0),
            }
        ),
        _ => String::new(),
    }
}

/// What offer `id` of `account` (selling `amount` of `sell` for `buy`) did in the block of its
/// creation, given its fill there if it traded.
fn fill_text(
    id: u64,
    account: u64,
    (sell, buy, amount): (u16, u16, u64),
    height: u64,
    fill: Option<&walras_api::wire::FillJson>,
    symbols: &Symbols,
) -> String {
    let (sold_asset, bought_asset) = (symbols.label(sell), symbols.label(buy));
    let Some(fill) = fill else {
        return format!(
            "offer {id} did not trade in block {height}: all {amount} of {sold_asset} rest on \
             the book (why: walras offer explain {id} --account {account})\n"
        );
    };
    let rest = amount
        .saturating_sub(fill.sold)
        .saturating_sub(fill.returned);
    let resting = if fill.returned > 0 {
        format!(
            "the other {} of {sold_asset} could not sell at that rate in whole units and went \
             back to the account (the rest rule); the offer is closed",
            fill.returned
        )
    } else if rest == 0 {
        "it traded in full".to_string()
    } else {
        format!("{rest} of {sold_asset} rest on the book")
    };
    format!(
        "offer {id} sold {} of {sold_asset} for {} of {bought_asset} in block {height} (rate \
         {}, after commission); {resting}\n",
        fill.sold, fill.bought, fill.rate
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_transactions_are_caught_before_sending() {
        let keypair = Keypair::from_seed([1; 32]);
        let zero = Operation::Payment {
            to: AccountId(2),
            asset: AssetId(0),
            amount: 0,
        };
        let error = sign(&keypair, 1, 1, zero).unwrap_err();
        assert!(
            format!("{error:#}").contains("amount must be positive"),
            "{error}"
        );
        let pay = Operation::Payment {
            to: AccountId(2),
            asset: AssetId(0),
            amount: 5,
        };
        let signed = sign(&keypair, 1, 3, pay).unwrap();
        assert_eq!(signed.transaction.sequence, 3);
    }

    #[test]
    fn dropped_outcomes_are_errors_with_the_reason() {
        let dropped = TransactionStatusJson {
            hash: "ab".to_string(),
            status: "dropped".to_string(),
            height: Some(4),
            index: Some(0),
            reason: Some("account_overdraft".to_string()),
        };
        let error = outcome(&dropped).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("transaction ab was dropped in block 4: account_overdraft"),
            "{error}"
        );
        let accepted = TransactionStatusJson {
            status: "accepted".to_string(),
            reason: None,
            ..dropped
        };
        assert_eq!(
            outcome(&accepted).unwrap(),
            "transaction ab accepted in block 4, index 0\n"
        );
    }

    #[test]
    fn an_offers_fill_says_what_it_sold_received_and_left_on_the_book() {
        let fill = walras_api::wire::FillJson {
            account: 5,
            offer_id: 2,
            sell: 0,
            buy: 1,
            sold: 600,
            bought: 330,
            returned: 0,
            rate: "0.55".to_string(),
        };
        let symbols = Symbols::named(&["USD", "BTC"]);
        assert_eq!(
            fill_text(2, 5, (0, 1, 1000), 9, Some(&fill), &symbols),
            "offer 2 sold 600 of USD (asset 0) for 330 of BTC (asset 1) in block 9 (rate 0.55, \
             after commission); 400 of USD (asset 0) rest on the book\n"
        );
        let full = walras_api::wire::FillJson {
            sold: 1000,
            ..fill.clone()
        };
        let text = fill_text(2, 5, (0, 1, 1000), 9, Some(&full), &symbols);
        assert!(text.ends_with("it traded in full\n"));
        let dust = walras_api::wire::FillJson {
            sold: 998,
            returned: 2,
            ..fill.clone()
        };
        let text = fill_text(2, 5, (0, 1, 1000), 9, Some(&dust), &symbols);
        assert!(
            text.ends_with(
                "the other 2 of USD (asset 0) could not sell at that rate in whole units and \
                 went back to the account (the rest rule); the offer is closed\n"
            ),
            "{text}"
        );
        assert_eq!(
            fill_text(2, 5, (0, 1, 1000), 9, None, &symbols),
            "offer 2 did not trade in block 9: all 1000 of USD (asset 0) rest on the book (why: \
             walras offer explain 2 --account 5)\n"
        );
    }
}

/// The logic of `walras pay`, `offer create|cancel` and `query` against a node in this
/// process ([`walras_testkit::InProcessNode`], through the same `NodeApi` the binary uses over
/// HTTP): what `tests/client_cli.rs` checked through `walras` processes, without them. The
/// exit-code and argument contracts stay there.
#[cfg(all(test, feature = "dev-tools"))]
mod in_process {
    use super::*;
    use crate::query::{answer, QueryCommand};
    use walras_testkit::{InProcessNode, TempDir};

    const DEV_ASSETS: u16 = 4;

    fn signer(source: u64, key: Option<PathBuf>) -> SignerArgs {
        SignerArgs {
            source,
            signing_key: SigningKeyArgs {
                dev: key.is_none(),
                key,
            },
            sequence: None,
            wait: true,
            submit_json: false,
            node: NodeArgs {
                node: String::new(),
            },
        }
    }

    async fn balance(node: &InProcessNode, account: u64, asset: u16) -> u64 {
        let account = node.account(account).await.expect("the account exists");
        account
            .balances
            .iter()
            .find(|balance| balance.asset == asset)
            .map_or(0, |balance| balance.amount)
    }

    /// Some asset `account` holds at least `amount` of.
    async fn held_asset(node: &InProcessNode, account: u64, amount: u64) -> u16 {
        let account = node.account(account).await.expect("the account exists");
        account
            .balances
            .iter()
            .find(|balance| balance.amount >= amount)
            .map(|balance| balance.asset)
            .expect("the account holds something")
    }

    fn pay(to: u64, asset: u16, amount: u64) -> Operation {
        Operation::Payment {
            to: AccountId(to),
            asset: AssetId(asset),
            amount,
        }
    }

    /// Checks: a payment signed with the development key and waited for is accepted and moves
    /// exactly its amount; the development key written as a key file signs just as well; a
    /// key that does not control the account is refused before anything is sent.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn payments_move_balances_exactly() {
        let node = InProcessNode::start();
        let (payer, payee, amount) = (3u64, 4u64, 1_000u64);
        let asset = held_asset(&node, payer, 10 * amount).await;
        let before = (
            balance(&node, payer, asset).await,
            balance(&node, payee, asset).await,
        );
        let signed = submit_with(&node, &signer(payer, None), pay(payee, asset, amount), true)
            .await
            .expect("the payment is accepted");
        assert_eq!(signed.transaction.source, AccountId(payer));
        assert_eq!(balance(&node, payer, asset).await, before.0 - amount);
        assert_eq!(balance(&node, payee, asset).await, before.1 + amount);

        // `walras keygen --dev-account 3`'s key file.
        let keys = TempDir::new("in-process-keys");
        let dev_key = keys.path().join("dev3.json");
        let seed = crate::remote::dev_secret_seed(&node, payer).await.unwrap();
        keyfile::write(&dev_key, &seed).unwrap();
        let by_file = signer(payer, Some(dev_key));
        submit_with(&node, &by_file, pay(payee, asset, amount), true)
            .await
            .expect("the key file signs for the account");
        assert_eq!(balance(&node, payer, asset).await, before.0 - 2 * amount);
        assert_eq!(balance(&node, payee, asset).await, before.1 + 2 * amount);

        let fresh = keys.path().join("fresh.json");
        keyfile::write(&fresh, &keyfile::random_seed().unwrap()).unwrap();
        let error = submit_with(
            &node,
            &signer(payer, Some(fresh)),
            pay(payee, asset, 1),
            true,
        )
        .await
        .unwrap_err();
        assert!(
            error.to_string().contains("does not control account 3"),
            "{error}"
        );
        assert_eq!(
            node.account(payer).await.unwrap().next_sequence,
            3,
            "nothing was sent after the two payments (sequences 1 and 2)"
        );
    }

    /// Checks: an offer created with a limit far above the market rests, with the id
    /// returned, in the account's offers and the book (`query book` says `1 offers`), and
    /// locks its amount; cancelling it (sent as JSON) removes it and returns the amount.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_offer_is_created_and_cancelled() {
        let node = InProcessNode::start();
        let seller = 5u64;
        let sell = held_asset(&node, seller, 100_000).await;
        let buy = (sell + 1) % DEV_ASSETS;
        let before = balance(&node, seller, sell).await;
        let min_price = Price::parse_limit("1000000").unwrap();
        let create = Operation::CreateOffer {
            sell: AssetId(sell),
            buy: AssetId(buy),
            amount: 50_000,
            min_price,
        };
        let created = submit_with(&node, &signer(seller, None), create, true)
            .await
            .expect("the offer is accepted");
        let offer_id = created.transaction.sequence;
        let offers = node.account_offers(seller).await.unwrap();
        assert_eq!(offers.offers.len(), 1);
        assert_eq!(offers.offers[0].offer_id, offer_id);
        assert_eq!(offers.offers[0].amount, 50_000);
        assert_eq!(
            balance(&node, seller, sell).await,
            before - 50_000,
            "the amount is locked"
        );
        let book = QueryCommand::Book {
            sell,
            buy,
            levels: None,
        };
        let text = answer(&node, &book, false).await.unwrap();
        assert!(text.contains("1 offers"), "{text}");

        let cancel = Operation::CancelOffer {
            sell: AssetId(sell),
            buy: AssetId(buy),
            min_price,
            offer_id: OfferId(offer_id),
        };
        let mut as_json = signer(seller, None);
        as_json.submit_json = true;
        submit_with(&node, &as_json, cancel, true)
            .await
            .expect("the cancel is accepted");
        let offers = answer(&node, &QueryCommand::Offers { id: seller }, true)
            .await
            .unwrap();
        let offers: serde_json::Value = serde_json::from_str(&offers).unwrap();
        assert!(offers["offers"].as_array().unwrap().is_empty(), "{offers}");
        assert_eq!(
            balance(&node, seller, sell).await,
            before,
            "the locked amount came back"
        );
    }

    /// Checks: a replayed sequence and one beyond the window are refused with the API's
    /// status and code, a payment beyond the balance is refused `insufficient_balance`, and
    /// an unknown account is a 404 naming `unknown_account` (the typed errors the process test
    /// sees as exit status and stderr).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn refused_transactions_carry_the_nodes_reason() {
        let node = InProcessNode::start();
        let asset = held_asset(&node, 6, 1_000).await;
        let mut first = signer(6, None);
        first.sequence = Some(1);
        submit_with(&node, &first, pay(7, asset, 10), true)
            .await
            .expect("the first payment is accepted");
        let replayed = submit_with(&node, &first, pay(7, asset, 10), false)
            .await
            .unwrap_err();
        let replayed = replayed
            .downcast_ref::<walras_client::ClientError>()
            .expect("a client error");
        assert_eq!(
            (replayed.status(), replayed.code()),
            (Some(409), Some("replayed"))
        );
        first.sequence = Some(1000);
        let ahead = submit_with(&node, &first, pay(7, asset, 10), false)
            .await
            .unwrap_err();
        assert!(
            ahead
                .to_string()
                .starts_with("node refused the transaction (422 sequence_out_of_window)"),
            "{ahead}"
        );
        let overdraft = submit_with(
            &node,
            &signer(6, None),
            pay(7, asset, 4_611_686_018_427_387_000),
            true,
        )
        .await
        .unwrap_err();
        // Trigger (issue 28 item 8): it was admitted and then dropped in its block.
        assert!(
            overdraft
                .to_string()
                .starts_with("node refused the transaction (422 insufficient_balance)"),
            "{overdraft}"
        );
        let unknown = QueryCommand::Account {
            id: walras_testkit::DEV_ACCOUNTS + 5,
        };
        let error = answer(&node, &unknown, false).await.unwrap_err();
        assert!(error.to_string().contains("404 unknown_account"), "{error}");
    }
}
