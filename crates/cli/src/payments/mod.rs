//! `walras payments ...`: the fast-payments lane (issue 14, `docs/payments.md`).
//!
//! - `validator --config FILE`: one validator process (all its shards), in the production build;
//! - `pay`, `receive`, `balance`, `history`, `status`: a wallet file and the committee file;
//! - `localnet` / `localnet down` and `bench` (development tools only).

#[cfg(feature = "dev-tools")]
pub mod bench;
#[cfg(feature = "dev-tools")]
mod localnet;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use walras_payments::codec::{certificate_bytes, decode_certificate};
use walras_payments_net::client::CommitteeClient;
use walras_payments_net::config::{key_hex, parse_key, CommitteeConfig, CommitteeFile};
use walras_payments_net::wallet::Wallet;
use walras_payments_net::wire::{Request, Response};
use walras_types::AssetId;

pub use super::remote::block_on;

#[derive(clap::Subcommand, Debug)]
pub enum PaymentsCommand {
    /// Run one validator (every shard of it) from its configuration file.
    Validator(ValidatorArgs),
    #[cfg(feature = "dev-tools")]
    /// Create and start (or stop: `localnet down`) a payments committee on loopback.
    Localnet(localnet::LocalnetArgs),
    /// Pay from a wallet: persisted, sent to every validator, certified by a verified quorum.
    Pay(PayArgs),
    /// Verify a certificate paid to a wallet and keep the coin.
    Receive(ReceiveArgs),
    /// A wallet's balances, coins, pending payments and stuck inputs.
    Balance(WalletArgs),
    /// A wallet's sent and received payments.
    History(WalletArgs),
    /// Every validator's per-shard counters (or why it does not answer).
    Status(CommitteeArgs),
    #[cfg(feature = "dev-tools")]
    /// Open-loop throughput and latency of a fresh local committee.
    Bench(bench::BenchArgs),
}

#[derive(clap::Args, Debug)]
pub struct ValidatorArgs {
    /// The validator's configuration (JSON: committee, genesis, index, key, data)
    #[arg(long)]
    config: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct CommitteeArgs {
    /// The committee file (`committee.json`)
    #[arg(long)]
    committee: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct WalletArgs {
    /// The wallet file
    #[arg(long)]
    wallet: PathBuf,
    /// The committee file (`committee.json`)
    #[arg(long)]
    committee: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct PayArgs {
    #[command(flatten)]
    wallet: WalletArgs,
    /// The payee: a public key (hex), or a wallet file, which then receives the certificate
    #[arg(long)]
    to: String,
    /// Asset number
    #[arg(long, default_value_t = 0)]
    asset: u16,
    /// Amount (integer units)
    #[arg(long)]
    amount: u128,
}

#[derive(clap::Args, Debug)]
pub struct ReceiveArgs {
    #[command(flatten)]
    wallet: WalletArgs,
    /// The certificate (hex, as `pay` prints it)
    #[arg(long)]
    certificate: String,
}

pub fn run(command: PaymentsCommand) -> anyhow::Result<()> {
    match command {
        PaymentsCommand::Validator(args) => block_on(async move {
            walras_payments_net::validator::run_from_file(&args.config)
                .await
                .map_err(anyhow::Error::msg)
        })?,
        #[cfg(feature = "dev-tools")]
        PaymentsCommand::Localnet(args) => localnet::run(args),
        PaymentsCommand::Pay(args) => pay(args),
        PaymentsCommand::Receive(args) => receive(args),
        PaymentsCommand::Balance(args) => balance(args),
        PaymentsCommand::History(args) => history(args),
        PaymentsCommand::Status(args) => status(args),
        #[cfg(feature = "dev-tools")]
        PaymentsCommand::Bench(args) => bench::run(args),
    }
}

fn load_committee(path: &Path) -> anyhow::Result<CommitteeConfig> {
    CommitteeFile::load(path).map_err(|error| anyhow::Error::msg(error.to_string()))
}

fn pay(args: PayArgs) -> anyhow::Result<()> {
    let committee = load_committee(&args.wallet.committee)?;
    let mut wallet = Wallet::load(&args.wallet.wallet, &committee.committee)?;
    let payee_wallet = Path::new(&args.to);
    let (payee, mut payee_wallet) = if payee_wallet.is_file() {
        let payee = Wallet::load(payee_wallet, &committee.committee)?;
        (payee.public_key(), Some(payee))
    } else {
        (parse_key(&args.to).map_err(anyhow::Error::msg)?, None)
    };
    let client = CommitteeClient::new(committee.committee.clone(), committee.addresses.clone());
    let (payment, certificates) = block_on(async {
        wallet
            .pay(&client, payee, AssetId(args.asset), args.amount)
            .await
    })??;
    println!("payment {} certified", hex::encode(payment.0.as_bytes()));
    for certificate in certificates {
        if certificate.output.owner != payee {
            continue;
        }
        match payee_wallet.as_mut() {
            // The payee verifies the certificate before keeping the coin.
            Some(payee_wallet) => {
                payee_wallet.receive(certificate)?;
                println!("delivered to {}", args.to);
            }
            None => println!(
                "certificate {}",
                hex::encode(certificate_bytes(&certificate))
            ),
        }
    }
    Ok(())
}

fn receive(args: ReceiveArgs) -> anyhow::Result<()> {
    let committee = load_committee(&args.wallet.committee)?;
    let mut wallet = Wallet::load(&args.wallet.wallet, &committee.committee)?;
    let bytes = hex::decode(args.certificate.trim())
        .map_err(|error| anyhow::anyhow!("the certificate is not hex: {error}"))?;
    let certificate = decode_certificate(&bytes)?;
    let amount = certificate.output.amount;
    wallet.receive(certificate)?;
    println!("received {amount}");
    Ok(())
}

fn balance(args: WalletArgs) -> anyhow::Result<()> {
    let committee = load_committee(&args.committee)?;
    let wallet = Wallet::load(&args.wallet, &committee.committee)?;
    let client = wallet.client();
    println!("key {}", key_hex(&wallet.public_key()));
    let assets: std::collections::BTreeSet<AssetId> = client
        .coins()
        .iter()
        .map(|coin| coin.output.asset)
        .collect();
    for asset in assets {
        println!("asset {} balance {}", asset.0, client.balance(asset));
    }
    println!(
        "coins {} pending {} stuck {}",
        client.coins().len(),
        wallet.file().pending.len(),
        client.stuck_inputs().len()
    );
    for (input, reason) in client.stuck_inputs() {
        println!("stuck {}: {reason:?}", hex::encode(input.0.as_bytes()));
    }
    Ok(())
}

fn history(args: WalletArgs) -> anyhow::Result<()> {
    let committee = load_committee(&args.committee)?;
    let wallet = Wallet::load(&args.wallet, &committee.committee)?;
    for entry in &wallet.file().history {
        println!(
            "{} asset {} amount {} {} {}",
            entry.direction, entry.asset, entry.amount, entry.counterparty, entry.payment
        );
    }
    Ok(())
}

fn status(args: CommitteeArgs) -> anyhow::Result<()> {
    let committee = load_committee(&args.committee)?;
    let client: Arc<CommitteeClient> =
        CommitteeClient::new(committee.committee.clone(), committee.addresses.clone());
    block_on(async {
        for (index, address) in committee.addresses.iter().enumerate() {
            match client.call(index as u16, &Request::Stats).await {
                Ok(Response::Stats(shards)) => {
                    for (shard, stats) in shards.iter().enumerate() {
                        println!(
                            "validator {index} ({address}) shard {shard}: requests {} votes {} conflicts {} refused {} spent {} commits {} cross-shard messages {}",
                            stats.requests,
                            stats.votes,
                            stats.conflicts,
                            stats.refused,
                            stats.spent,
                            stats.commits,
                            stats.cross_shard_messages
                        );
                    }
                }
                Ok(_) => println!("validator {index} ({address}): unexpected reply"),
                Err(error) => println!("validator {index} ({address}): {error}"),
            }
        }
    })?;
    Ok(())
}
