//! `walras payments ...`: the fast-payments lane (issue 14, `docs/payments.md`).
//!
//! - `validator --config FILE [--exchange URL]`: one validator process (all its shards), in the
//!   production build; with `--exchange` it admits the deposits of committed exchange blocks;
//! - `deposit`: an exchange transaction moving an amount into the payments escrow, owned by a
//!   wallet's key; the wallet keeps the deposit's output;
//! - `pay`, `receive`, `balance`, `history`, `status`: a wallet file and the committee file;
//! - `localnet` / `localnet down` and `bench` (development tools only).

#[cfg(feature = "dev-tools")]
pub(crate) mod bench;
#[cfg(feature = "dev-tools")]
mod localnet;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use walras_client::NodeApi;

use walras_payments::{certificate_bytes, decode_certificate};
use walras_payments_net::CommitteeClient;
use walras_payments_net::Wallet;
use walras_payments_net::{key_hex, parse_key, CommitteeConfig, CommitteeFile};
use walras_payments_net::{Request, Response};
use walras_types::AssetId;

pub(crate) use super::remote::block_on;

#[derive(clap::Subcommand, Debug)]
pub(crate) enum PaymentsCommand {
    /// Run one validator (every shard of it) from its configuration file.
    Validator(ValidatorArgs),
    #[cfg(feature = "dev-tools")]
    /// Create and start (or stop: `localnet down`) a payments committee on loopback.
    Localnet(localnet::LocalnetArgs),
    /// Deposit from an exchange account into the payments escrow, as a coin of a wallet.
    Deposit(DepositArgs),
    /// Redeem a certified wallet coin on the exchange: BLS votes from a quorum, aggregated into
    /// a withdrawal certificate, submitted by the exchange account holding the wallet's key.
    Withdraw(WithdrawArgs),
    /// Pay from a wallet: persisted, sent to every validator, certified by a verified quorum.
    Pay(PayArgs),
    /// Verify a certificate paid to a wallet and keep the coin.
    Receive(ReceiveArgs),
    /// Hand the certificates a wallet keeps for another payee (payments certified when resent)
    /// into that payee's wallet file, without paying anything.
    Deliver(DeliverArgs),
    /// A wallet's balances, coins, pending payments and stuck inputs.
    Balance(WalletArgs),
    /// A wallet's sent and received payments.
    History(WalletArgs),
    /// Every validator's per-shard counters (or why it does not answer).
    Status(CommitteeArgs),
    /// Write an exchange genesis whose payments committee is the committee file's (ed25519
    /// keys, BLS keys, proofs of possession, checked), from a genesis without one.
    ExchangeGenesis(ExchangeGenesisArgs),
    #[cfg(feature = "dev-tools")]
    /// Open-loop throughput and latency of a fresh local committee.
    Bench(bench::BenchArgs),
}

#[derive(clap::Args, Debug)]
pub(crate) struct ValidatorArgs {
    /// The validator's configuration (JSON: committee, genesis, index, key, data)
    #[arg(long)]
    config: PathBuf,
    /// The exchange node whose committed deposits this validator admits (base URL)
    #[arg(long, value_name = "URL")]
    exchange: Option<String>,
    /// Once listening, write the address to this file (replaced whole): with port 0 the
    /// kernel picks a port no other listener holds, and a localnet learns it here
    #[arg(long, value_name = "FILE")]
    address_file: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub(crate) struct WithdrawArgs {
    #[command(flatten)]
    wallet: WalletArgs,
    /// The coin whose value to redeem (its output id, hex, as `balance` lists it): that value
    /// is paid to the account's withdrawal address, then withdrawn into the account
    #[arg(long)]
    coin: String,
    /// The exchange account whose key is the wallet's key (it receives the amount)
    #[arg(long, value_name = "ID")]
    source: u64,
    #[command(flatten)]
    node: super::remote::NodeArgs,
}

#[derive(clap::Args, Debug)]
pub(crate) struct DepositArgs {
    #[command(flatten)]
    wallet: WalletArgs,
    /// Asset number
    #[arg(long, default_value_t = 0)]
    asset: u16,
    /// Amount (integer units), debited from the exchange account
    #[arg(long)]
    amount: u64,
    #[command(flatten)]
    signer: crate::tx::SignerArgs,
}

#[derive(clap::Args, Debug)]
pub(crate) struct CommitteeArgs {
    /// The committee file (`committee.json`)
    #[arg(long)]
    committee: PathBuf,
}

#[derive(clap::Args, Debug)]
pub(crate) struct ExchangeGenesisArgs {
    /// The payments committee file (`committee.json`, with every member's BLS key and proof)
    #[arg(long)]
    committee: PathBuf,
    /// The exchange genesis to start from (accounts and assets); a payments committee it
    /// already holds must be this one
    #[arg(long)]
    genesis: PathBuf,
    /// Where to write the genesis with the committee (a new file)
    #[arg(long)]
    out: PathBuf,
}

#[derive(clap::Args, Debug)]
pub(crate) struct WalletArgs {
    /// The wallet file
    #[arg(long)]
    wallet: PathBuf,
    /// The committee file (`committee.json`)
    #[arg(long)]
    committee: PathBuf,
}

#[derive(clap::Args, Debug)]
pub(crate) struct PayArgs {
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
pub(crate) struct DeliverArgs {
    #[command(flatten)]
    wallet: WalletArgs,
    /// The payee's wallet file, which receives every certificate kept for its key
    #[arg(long)]
    to: PathBuf,
}

#[derive(clap::Args, Debug)]
pub(crate) struct ReceiveArgs {
    #[command(flatten)]
    wallet: WalletArgs,
    /// The certificate (hex, as `pay` prints it)
    #[arg(long)]
    certificate: String,
}

pub(crate) fn run(command: PaymentsCommand) -> anyhow::Result<()> {
    match command {
        PaymentsCommand::Validator(args) => block_on(async move {
            // Deliberate faults are for benchmarks: a production build refuses them.
            let faults = if cfg!(feature = "dev-tools") {
                walras_payments_net::Faults::Allowed
            } else {
                walras_payments_net::Faults::Refused
            };
            let validator = walras_payments_net::start_from_file(&args.config, faults).await?;
            if let Some(path) = &args.address_file {
                walras_payments_net::write_private_durable(
                    path,
                    validator.address.to_string().as_bytes(),
                )
                .map_err(|error| {
                    anyhow::anyhow!("writing the address file {}: {error}", path.display())
                })?;
            }
            if let Some(url) = args.exchange {
                let client = walras_client::NodeClient::new(&url)?;
                tokio::spawn(follow_exchange(client, validator.deposits()));
            }
            validator.serve().await;
            anyhow::Ok(())
        })?,
        PaymentsCommand::Deposit(args) => deposit(args),
        PaymentsCommand::Withdraw(args) => withdraw(args),
        #[cfg(feature = "dev-tools")]
        PaymentsCommand::Localnet(args) => localnet::run(args),
        PaymentsCommand::Pay(args) => pay(args),
        PaymentsCommand::Receive(args) => receive(args),
        PaymentsCommand::Deliver(args) => deliver(args),
        PaymentsCommand::Balance(args) => balance(args),
        PaymentsCommand::History(args) => history(args),
        PaymentsCommand::Status(args) => status(args),
        PaymentsCommand::ExchangeGenesis(args) => exchange_genesis(args),
        #[cfg(feature = "dev-tools")]
        PaymentsCommand::Bench(args) => bench::run(args),
    }
}

/// How long the deposit poller waits when the exchange has no new block.
const DEPOSIT_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// Admits the deposits of committed exchange blocks, in block order, forever: each batch is
/// durable at the owning shards before the poller moves past it. It starts from height 0 at
/// every start (admitting an output twice changes nothing), so nothing is lost to a crash.
async fn follow_exchange(
    client: walras_client::NodeClient,
    deposits: walras_payments_net::DepositAdmitter,
) {
    let mut after = 0u64;
    loop {
        let answer = match client.payments_deposits(after).await {
            Ok(answer) => answer,
            Err(error) => {
                eprintln!("warning: exchange deposits after block {after}: {error}; retrying");
                tokio::time::sleep(DEPOSIT_POLL * 5).await;
                continue;
            }
        };
        let mut outputs = Vec::with_capacity(answer.deposits.len());
        for deposit in &answer.deposits {
            match deposit_output(deposit) {
                Ok(output) => outputs.push(output),
                // The exchange admits no deposit to an invalid key; if one shows up, it can
                // never be spent anyway.
                Err(error) => eprintln!(
                    "warning: deposit {} of block {} skipped: {error}",
                    deposit.output_id, deposit.height
                ),
            }
        }
        if let Err(error) = deposits.admit(&outputs).await {
            eprintln!("error: admitting exchange deposits: {error}; the poller stops");
            return;
        }
        if answer.scanned_to == after {
            tokio::time::sleep(DEPOSIT_POLL).await;
        }
        after = answer.scanned_to;
    }
}

/// The payments output of a committed deposit, as the node lists it.
fn deposit_output(
    deposit: &walras_api::wire::DepositJson,
) -> anyhow::Result<(walras_payments::OutputId, walras_payments::Output)> {
    let id: [u8; 32] = hex::decode(&deposit.output_id)
        .ok()
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or_else(|| {
            anyhow::anyhow!("output id {:?} is not 32 bytes of hex", deposit.output_id)
        })?;
    Ok((
        walras_payments::OutputId(walras_crypto::Hash(id)),
        walras_payments::Output {
            asset: AssetId(deposit.asset),
            amount: u128::from(deposit.amount),
            owner: parse_key(&deposit.owner)?,
        },
    ))
}

/// Submits the deposit, waits for its block, and keeps its output in the wallet.
fn deposit(args: DepositArgs) -> anyhow::Result<()> {
    let committee = load_committee(&args.wallet.committee)?;
    let mut wallet = Wallet::load(&args.wallet.wallet, &committee.committee)?;
    let operation = walras_types::Operation::DepositToPayments {
        asset: AssetId(args.asset),
        amount: args.amount,
        owner: *wallet.public_key().as_bytes(),
    };
    let signed = super::tx::submit_signed(&args.signer, operation, true)?;
    let id = walras_engine::deposit_output(&signed);
    wallet.add_deposit(id, AssetId(args.asset), u128::from(args.amount))?;
    println!(
        "deposit output {} ({} of asset {}) kept in {}; spendable once the validators have \
         admitted its block",
        hex::encode(id.0.as_bytes()),
        args.amount,
        args.asset,
        args.wallet.wallet.display()
    );
    Ok(())
}

/// How long `withdraw` waits for its block.
const WITHDRAW_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Gathers verified BLS votes on the coin from a quorum, aggregates them, submits the
/// withdrawal as the wallet's exchange account, waits for its block, forgets the coin.
fn withdraw(args: WithdrawArgs) -> anyhow::Result<()> {
    use walras_payments::bls::{aggregate_certificate, BlsCommittee};
    let committee = load_committee(&args.wallet.committee)?;
    let keys = committee.bls.clone().ok_or_else(|| {
        anyhow::anyhow!(
            "the committee file lists no BLS keys: its validators cannot sign withdrawals"
        )
    })?;
    let mut wallet = Wallet::load(&args.wallet.wallet, &committee.committee)?;
    let coin = wallet
        .client()
        .coins()
        .into_iter()
        .find(|coin| hex::encode(coin.id.0.as_bytes()) == args.coin.trim())
        .ok_or_else(|| anyhow::anyhow!("the wallet holds no coin {}", args.coin))?;
    let amount = u64::try_from(coin.output.amount)
        .map_err(|_| anyhow::anyhow!("amount {} is over the exchange's cap", coin.output.amount))?;
    let bls = BlsCommittee::new(committee.committee.clone(), &keys)
        .map_err(|error| anyhow::anyhow!("the committee's BLS keys: {error}"))?;
    let quorum = committee.committee.quorum();
    let client = std::sync::Arc::new(CommitteeClient::new(
        committee.committee.clone(),
        committee.addresses.clone(),
    ));
    let keypair = walras_payments_net::parse_seed(&wallet.file().secret_seed)?;
    let node = args.node.client()?;
    // First the coin's value leaves the lane for good: paid (a certified payment like any
    // other) to the account's withdrawal address, which no key can spend. Only that output's
    // certificate is redeemable on the exchange, so a coin is never both withdrawn and spent.
    let withdrawal_address =
        walras_payments::withdrawal_owner(committee.committee.chain_id, args.source);
    let (_, certificates) = block_on(wallet.pay(
        &client,
        withdrawal_address,
        coin.output.asset,
        coin.output.amount,
    ))??;
    let certificate = certificates
        .into_iter()
        .find(|certificate| certificate.output.owner == withdrawal_address)
        .ok_or_else(|| {
            anyhow::anyhow!("the payment to the withdrawal address has no certificate")
        })?;
    let withdrawal_coin = certificate.id;
    let message = walras_payments::vote_message(
        certificate.chain_id,
        certificate.epoch,
        &certificate.id,
        &certificate.output,
    );
    let status = block_on(async {
        let mut votes = Vec::new();
        for validator in 0..committee.committee.validators.len() as u16 {
            let request = Request::WithdrawalVote {
                certificate: certificate.clone(),
            };
            match client.call(validator, &request).await {
                Ok(Response::BlsVote {
                    validator: signer,
                    signature,
                }) if signer == validator => {
                    match bls.verify_vote(validator, &message, &signature) {
                        Ok(()) => votes.push((validator, signature)),
                        Err(error) => eprintln!("warning: validator {validator}: {error}"),
                    }
                }
                Ok(other) => eprintln!("warning: validator {validator} answered {other:?}"),
                Err(error) => eprintln!("warning: validator {validator}: {error}"),
            }
            if votes.len() >= quorum {
                break;
            }
        }
        anyhow::ensure!(
            votes.len() >= quorum,
            "{} valid BLS votes, a withdrawal needs {quorum}",
            votes.len()
        );
        let aggregate = aggregate_certificate(
            certificate.chain_id,
            certificate.epoch,
            certificate.id,
            certificate.output,
            &votes,
        )
        .map_err(|error| anyhow::anyhow!("aggregating the votes: {error}"))?;
        let operation = walras_types::Operation::WithdrawFromPayments {
            output: walras_types::PaymentsOutput {
                id: certificate.id.0 .0,
                asset: certificate.output.asset,
                amount,
                owner: *certificate.output.owner.as_bytes(),
            },
            certificate: walras_types::PaymentsCertificate {
                chain_id: certificate.chain_id.0,
                epoch: certificate.epoch.0,
                signers: votes
                    .iter()
                    .fold(0u128, |bits, (validator, _)| bits | 1u128 << validator),
                aggregate: aggregate.aggregate,
            },
        };
        let sequence = node.account(args.source).await?.next_sequence;
        let transaction = walras_types::Transaction {
            source: walras_types::AccountId(args.source),
            sequence,
            operation,
        };
        let signed = walras_types::SignedTransaction {
            signature: *keypair.sign(&transaction.encode()).as_bytes(),
            transaction,
        };
        node.submit(&signed).await?;
        let hash = walras_engine::transaction_hash(&signed).to_string();
        let deadline = std::time::Instant::now() + WITHDRAW_WAIT;
        loop {
            match node.transaction(&hash).await {
                Ok(status) if status.status != "pending" => return anyhow::Ok(status),
                _ if std::time::Instant::now() >= deadline => {
                    anyhow::bail!("withdrawal {hash} still pending; check with `walras query tx`")
                }
                _ => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
            }
        }
    })??;
    match status.status.as_str() {
        "accepted" => {
            // Redeemed: the withdrawal output's certificate has reached its only use.
            wallet.mark_delivered(&[withdrawal_coin])?;
            println!(
                "withdrawn: {amount} of asset {} to account {} (transaction {}, block {})",
                coin.output.asset.0,
                args.source,
                status.hash,
                status.height.unwrap_or_default()
            );
            Ok(())
        }
        _ => Err(anyhow::anyhow!(
            "withdrawal {} was {}: {}",
            status.hash,
            status.status,
            status.reason.as_deref().unwrap_or("no reason given")
        )),
    }
}

/// The committee file → the genesis's payments section. A separate command rather than an
/// option of `walras init`: every node of the exchange must start from the same genesis bytes,
/// so the section is written once into the genesis file that is handed to all of them.
fn exchange_genesis(args: ExchangeGenesisArgs) -> anyhow::Result<()> {
    use anyhow::Context;
    let committee = load_committee(&args.committee)?;
    let section = committee
        .exchange_genesis()
        .with_context(|| format!("committee file {}", args.committee.display()))?;
    let bytes = std::fs::read(&args.genesis)
        .with_context(|| format!("reading {}", args.genesis.display()))?;
    let mut genesis = walras_types::Genesis::decode(&bytes)
        .with_context(|| format!("genesis file {}", args.genesis.display()))?;
    if let Some(existing) = &genesis.payments {
        anyhow::ensure!(
            *existing == section,
            "{} already holds another payments committee (chain {}, epoch {}, {} validators); \
             start from a genesis without one",
            args.genesis.display(),
            existing.chain_id,
            existing.epoch,
            existing.validators.len()
        );
    }
    genesis.payments = Some(section);
    genesis
        .validate()
        .context("the genesis with the committee")?;
    // A new file only: overwriting a genesis some node already holds would fork it.
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&args.out)
        .with_context(|| format!("creating {} (it must not exist)", args.out.display()))?;
    std::io::Write::write_all(&mut file, &genesis.encode())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", args.out.display()))?;
    println!("{}", walras_server::genesis_hash(&genesis));
    Ok(())
}

fn load_committee(path: &Path) -> anyhow::Result<CommitteeConfig> {
    CommitteeFile::load(path).map_err(|error| anyhow::Error::msg(error.to_string()))
}

fn pay(args: PayArgs) -> anyhow::Result<()> {
    let committee = load_committee(&args.wallet.committee)?;
    // The payer stays locked for the whole command: a second command on it waits (then says
    // it is busy) instead of picking the same coin.
    let mut wallet = Wallet::load(&args.wallet.wallet, &committee.committee)?;
    let payee_path = Path::new(&args.to);
    // The payee wallet is only read for its key here; it is locked, re-read and written when
    // the certificate is delivered, so a payment into it meanwhile is not overwritten.
    let (payee, payee_wallet) = if payee_path.is_file() {
        (Wallet::read_key(payee_path)?, Some(payee_path))
    } else {
        (parse_key(&args.to)?, None)
    };
    let client = CommitteeClient::new(committee.committee.clone(), committee.addresses.clone());
    let result = block_on(async {
        wallet
            .pay(&client, payee, AssetId(args.asset), args.amount)
            .await
    })?;
    if let Ok((payment, _)) = &result {
        println!("payment {} certified", hex::encode(payment.0.as_bytes()));
    }
    // Whatever certified, this payment or an earlier one resent first, is delivered (or
    // printed) even when this payment failed afterwards.
    deliver_undelivered(wallet, &committee, payee, &args.to, payee_wallet)?;
    result?;
    Ok(())
}

/// Hands over the certificates the payer's wallet keeps for other payees: into the payee's
/// wallet file when `--to` is one, printed when `--to` is a key (both then leave the payer's
/// file); a certificate for another payee (an earlier payment resent and certified now) is
/// printed and kept until a payment to that payee's wallet delivers it.
fn deliver_undelivered(
    wallet: Wallet,
    committee: &CommitteeConfig,
    payee: walras_crypto::PublicKey,
    to: &str,
    payee_wallet: Option<&Path>,
) -> anyhow::Result<()> {
    let (mut wallet, deliveries) = wallet.deliver_undelivered(&committee.committee, |owner| {
        payee_wallet
            .filter(|_| *owner == payee)
            .map(Path::to_path_buf)
    })?;
    for (certificate, _) in &deliveries.delivered {
        println!("delivered {} to {to}", certificate.output.amount);
    }
    let mut printed = Vec::new();
    for certificate in deliveries.kept {
        let owner = certificate.output.owner;
        let bytes = hex::encode(certificate_bytes(&certificate));
        if owner == payee {
            // The payee was given as a key: the certificate printed is its delivery.
            println!("certificate {bytes}");
            printed.push(certificate.id);
        } else {
            println!(
                "certificate {bytes} for payee {} (an earlier payment, certified now: deliver it \
                 with `walras payments receive`; {} keeps it until a `pay --to` that wallet)",
                key_hex(&owner),
                wallet.path().display()
            );
        }
    }
    wallet.mark_delivered(&printed)?;
    Ok(())
}

fn deliver(args: DeliverArgs) -> anyhow::Result<()> {
    let committee = load_committee(&args.wallet.committee)?;
    let wallet = Wallet::load(&args.wallet.wallet, &committee.committee)?;
    let payee = Wallet::read_key(&args.to)?;
    let kept_for_payee = wallet
        .file()
        .undelivered
        .iter()
        .filter(|entry| entry.payee == key_hex(&payee))
        .count();
    if kept_for_payee == 0 {
        println!(
            "{} keeps no certificate for {} (nothing delivered)",
            wallet.path().display(),
            args.to.display()
        );
        return Ok(());
    }
    let to = args.to.display().to_string();
    deliver_undelivered(wallet, &committee, payee, &to, Some(&args.to))
}

fn receive(args: ReceiveArgs) -> anyhow::Result<()> {
    let committee = load_committee(&args.wallet.committee)?;
    let mut wallet = Wallet::load(&args.wallet.wallet, &committee.committee)?;
    let bytes = hex::decode(args.certificate.trim())
        .map_err(|error| anyhow::anyhow!("the certificate is not hex: {error}"))?;
    let certificate = decode_certificate(&bytes)?;
    let amount = certificate.output.amount;
    if wallet.receive(certificate)? {
        println!("received {amount}");
    } else {
        println!("already received (nothing changed)");
    }
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
        "coins {} pending {} stuck {} undelivered {}",
        client.coins().len(),
        wallet.file().pending.len(),
        client.stuck_inputs().len(),
        wallet.file().undelivered.len()
    );
    for entry in &wallet.file().undelivered {
        println!(
            "undelivered {} of asset {} to {} (coin {})",
            entry.amount, entry.asset, entry.payee, entry.id
        );
    }
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
