//! `walras gateway participant`: a gateway participant without writing Rust. It connects to a
//! `walras gateway` (TCP or `ws://`), answers the Challenge with its key, runs its release
//! buffer (the client library in `walras_gateway_net`), signs the orders it reads as
//! JSON lines on stdin (and from `--offer` / `--cancel`) for its account, and prints what
//! happens as JSON lines on stdout: what it sent, the gateway's notices, each block with the
//! outcome of its own trades, and its account's fills.
//!
//! Fills come from the node's API (`GET /v1/blocks/{h}/fills?account=A`): the gateway's
//! protocol carries each block's valuations, pair totals and the participant's own accepted or
//! dropped trades, not per-offer fills. With `--block-source gateway` the node serves block
//! reads on its operator listener only, so `--node` must name that listener for fills to print
//! (otherwise a `warning` line says so once and trading goes on).
//!
//! Orders wait for the first block the gateway hands over after connecting: until then the
//! release buffer's clock names no published block (and, for a participant the gateway heard
//! from before, one older than its last message), so the gateway would refuse them.
//!
//! When its input ends (stdin closed, or `--no-stdin` once the flags' orders are sent), it
//! waits until every trade it sent has an outcome (accepted or dropped in a block, or refused
//! by a notice), prints a `done` line and exits.

use super::remote::{block_on, dev_secret_seed, DEFAULT_NODE};
use anyhow::{anyhow, Context};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::mpsc;
use walras_client::{keyfile, NodeApi, NodeClient};
use walras_crypto::{Keypair, PublicKey};
use walras_engine::transaction_hash;
use walras_gateway_net::{BlockData, NoticeCode};
use walras_gateway_net::{ClientConfig, ClientEvent, Participant};
use walras_types::{AccountId, AssetId, OfferId, Operation, Price, SignedTransaction, Transaction};

/// The first pause before reconnecting, doubled per failed attempt up to [`RECONNECT_PAUSE_MAX`].
const RECONNECT_PAUSE_MIN: Duration = Duration::from_millis(100);
const RECONNECT_PAUSE_MAX: Duration = Duration::from_secs(2);

#[derive(clap::Args, Debug)]
pub(crate) struct ParticipantArgs {
    /// The gateway: HOST:PORT (TCP), or ws://HOST:PORT (its --listen-ws)
    #[arg(long, default_value = "127.0.0.1:9090")]
    gateway: String,
    /// This participant's number: the line of its key in the gateway's participants file
    /// (the first line is 0)
    #[arg(long, value_name = "N")]
    participant: u32,
    /// This participant's key file (`walras keygen --out FILE`): it signs the Hello
    #[arg(long, value_name = "FILE")]
    key: PathBuf,
    /// The gateway's public key (hex): a gateway with another key is refused before anything
    /// is signed
    #[arg(long, value_name = "HEX", value_parser = parse_public_key)]
    gateway_key: Option<PublicKey>,
    /// The account the orders are for (it signs them)
    #[arg(long, value_name = "ID")]
    account: u64,
    #[command(flatten)]
    account_key: AccountKeyArgs,
    /// The node's API: the account's next sequence number (and development key) at start,
    /// and its fills per block (with --block-source gateway: the node's --operator-listen)
    #[arg(long, default_value = DEFAULT_NODE)]
    node: String,
    /// δ, in ms: blocks are handed over at least this far apart (the gateway's --window-ms)
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    window_ms: u64,
    /// τ, in ms: the heartbeat period (below the gateway's straggler threshold)
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    heartbeat_ms: u64,
    /// An offer to send once connected (repeatable): SELL:BUY:AMOUNT:MIN_PRICE
    #[arg(long = "offer", value_name = "SELL:BUY:AMOUNT:MIN_PRICE", value_parser = parse_offer_flag)]
    offers: Vec<Order>,
    /// A cancel to send once connected (repeatable): the offer's id
    #[arg(long = "cancel", value_name = "OFFER_ID")]
    cancels: Vec<u64>,
    /// Read no orders from stdin: send the flags' orders, wait for their outcomes, exit
    #[arg(long)]
    no_stdin: bool,
}

/// Exactly one of them.
#[derive(clap::Args, Debug)]
#[group(required = true, multiple = false)]
pub(crate) struct AccountKeyArgs {
    /// The account's key file
    #[arg(long, value_name = "FILE")]
    account_key: Option<PathBuf>,
    /// Sign with the account's development key (the node must run a development genesis)
    #[arg(long)]
    dev: bool,
}

/// One order, as a JSON line on stdin: `{"offer":{"sell":0,"buy":1,"amount":1000,
/// "min_price":"0.5"}}` or `{"cancel":{"offer_id":3}}` (a cancel may name `sell`, `buy` and
/// `min_price`; otherwise they are those of this session's offer, or read from the node).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum Order {
    Offer {
        sell: u16,
        buy: u16,
        amount: u64,
        min_price: String,
    },
    Cancel {
        offer_id: u64,
        #[serde(default)]
        sell: Option<u16>,
        #[serde(default)]
        buy: Option<u16>,
        #[serde(default)]
        min_price: Option<String>,
    },
}

fn parse_public_key(text: &str) -> Result<PublicKey, String> {
    text.parse()
        .map_err(|error: walras_crypto::DecodeError| error.to_string())
}

/// `SELL:BUY:AMOUNT:MIN_PRICE`.
fn parse_offer_flag(text: &str) -> Result<Order, String> {
    let parts: Vec<&str> = text.split(':').collect();
    let [sell, buy, amount, min_price] = parts[..] else {
        return Err(format!("{text:?}: use SELL:BUY:AMOUNT:MIN_PRICE"));
    };
    let number = |what: &str, value: &str| format!("{text:?}: {what} {value:?} is not a number");
    Ok(Order::Offer {
        sell: sell.parse().map_err(|_| number("SELL", sell))?,
        buy: buy.parse().map_err(|_| number("BUY", buy))?,
        amount: amount.parse().map_err(|_| number("AMOUNT", amount))?,
        min_price: min_price.to_string(),
    })
}

pub(crate) fn run(args: ParticipantArgs) -> anyhow::Result<()> {
    let participant_key = keyfile::read(&args.key)?;
    let node = NodeClient::new(&args.node)?;
    let stdout = std::io::stdout();
    block_on(async move {
        let mut session = Session::open(&args, participant_key, node).await?;
        let input = if args.no_stdin {
            None
        } else {
            Some(read_stdin())
        };
        let flags = args
            .offers
            .iter()
            .cloned()
            .chain(args.cancels.iter().map(|&offer_id| Order::Cancel {
                offer_id,
                sell: None,
                buy: None,
                min_price: None,
            }));
        session
            .serve(flags.collect(), input, &mut stdout.lock())
            .await
    })?
}

/// Stdin's lines, read on their own thread; the channel closes at the end of input.
fn read_stdin() -> mpsc::UnboundedReceiver<String> {
    let (lines, receiver) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    receiver
}

/// A trade sent and not yet given an outcome.
struct Pending {
    hash: String,
    sequence: u64,
}

struct Session {
    gateway: String,
    participant_number: u32,
    participant: Participant,
    events: mpsc::UnboundedReceiver<ClientEvent>,
    node: NodeClient,
    account: u64,
    account_key: Keypair,
    next_sequence: u64,
    /// By the uplink sequence number the trade was sent with.
    pending: BTreeMap<u64, Pending>,
    /// This session's offers, by id: what a cancel names besides the id.
    offers: BTreeMap<u64, (u16, u16, Price)>,
    fills: bool,
    counts: BTreeMap<&'static str, u64>,
    /// Orders read before the first block was handed over (see the module documentation).
    waiting: VecDeque<Order>,
    /// A block was handed over since connecting.
    ready: bool,
}

impl Session {
    async fn open(
        args: &ParticipantArgs,
        participant_key: Keypair,
        node: NodeClient,
    ) -> anyhow::Result<Session> {
        let account_key = match &args.account_key.account_key {
            Some(path) => keyfile::read(path)?,
            None => Keypair::from_seed(dev_secret_seed(&node, args.account).await?),
        };
        let account = node
            .account(args.account)
            .await
            .with_context(|| format!("reading account {} from {}", args.account, args.node))?;
        if account.public_key != account_key.public_key().to_string() {
            return Err(anyhow!(
                "the account key ({}) does not control account {} (its key is {})",
                account_key.public_key(),
                args.account,
                account.public_key
            ));
        }
        let config = ClientConfig {
            participant: args.participant,
            key: participant_key,
            gateway_key: args.gateway_key,
            delta: Duration::from_millis(args.window_ms),
            tau: Duration::from_millis(args.heartbeat_ms),
        };
        let (participant, events) = Participant::start(config)?;
        participant
            .connect(&args.gateway)
            .await
            .with_context(|| format!("participant {}", args.participant))?;
        Ok(Session {
            gateway: args.gateway.clone(),
            participant_number: args.participant,
            participant,
            events,
            node,
            account: args.account,
            account_key,
            next_sequence: account.next_sequence,
            pending: BTreeMap::new(),
            offers: BTreeMap::new(),
            fills: true,
            counts: BTreeMap::new(),
            waiting: VecDeque::new(),
            ready: false,
        })
    }

    /// Sends `flags`, then the orders of `input`, printing everything that happens, until the
    /// input is over and every trade sent has its outcome.
    async fn serve(
        &mut self,
        flags: Vec<Order>,
        mut input: Option<mpsc::UnboundedReceiver<String>>,
        out: &mut impl Write,
    ) -> anyhow::Result<()> {
        print(
            out,
            json!({"type": "connected", "participant": self.participant_number,
                "gateway": self.gateway, "account": self.account,
                "next_sequence": self.next_sequence}),
        )?;
        self.waiting.extend(flags);
        loop {
            if self.ready {
                while let Some(order) = self.waiting.pop_front() {
                    let line = self.send(order).await;
                    print(out, line)?;
                }
            }
            if input.is_none() && self.pending.is_empty() && self.waiting.is_empty() {
                let counts: Value = self
                    .counts
                    .iter()
                    .map(|(k, v)| (k.to_string(), json!(v)))
                    .collect();
                return print(out, json!({"type": "done", "counts": counts}));
            }
            tokio::select! {
                line = next_line(&mut input) => match line {
                    Some(line) => match serde_json::from_str::<Order>(&line) {
                        Ok(order) => self.waiting.push_back(order),
                        Err(error) => print(out, json!({"type": "error", "input": line,
                            "error": format!("not an order ({error}): see walras gateway participant --help")}))?,
                    },
                    None => input = None,
                },
                event = self.events.recv() => {
                    let Some(event) = event else {
                        return Err(anyhow!("the participant's client stopped"));
                    };
                    self.event(event, out).await?;
                }
            }
        }
    }

    /// Signs `order` with the next sequence number and sends it; the line saying so.
    async fn send(&mut self, order: Order) -> Value {
        let operation = match self.operation(&order).await {
            Ok(operation) => operation,
            Err(error) => return json!({"type": "error", "error": format!("{error:#}")}),
        };
        let transaction = Transaction {
            source: AccountId(self.account),
            sequence: self.next_sequence,
            operation,
        };
        let signed = SignedTransaction {
            transaction,
            signature: *self.account_key.sign(&transaction.encode()).as_bytes(),
        };
        if let Err(error) = SignedTransaction::decode(&signed.encode()) {
            return json!({"type": "error", "error": format!("the order is not valid: {error}")});
        }
        match self.participant.submit(signed).await {
            Ok(sent) => {
                let sequence = self.next_sequence;
                self.next_sequence += 1;
                if let Operation::CreateOffer {
                    sell,
                    buy,
                    min_price,
                    ..
                } = operation
                {
                    self.offers.insert(sequence, (sell.0, buy.0, min_price));
                }
                let hash = transaction_hash(&signed).to_string();
                self.pending.insert(
                    sent.seq,
                    Pending {
                        hash: hash.clone(),
                        sequence,
                    },
                );
                *self.counts.entry("sent").or_default() += 1;
                json!({"type": "sent", "seq": sent.seq, "hash": hash, "sequence": sequence,
                    "offer_id": matches!(operation, Operation::CreateOffer { .. }).then_some(sequence),
                    "clock": {"point": sent.clock.point, "elapsed_ns": sent.clock.elapsed_ns}})
            }
            Err(error) => json!({"type": "error",
                "error": format!("the order was not sent: {error}")}),
        }
    }

    async fn operation(&self, order: &Order) -> anyhow::Result<Operation> {
        match order {
            Order::Offer {
                sell,
                buy,
                amount,
                min_price,
            } => Ok(Operation::CreateOffer {
                sell: AssetId(*sell),
                buy: AssetId(*buy),
                amount: *amount,
                min_price: limit_price(min_price)?,
            }),
            Order::Cancel {
                offer_id,
                sell,
                buy,
                min_price,
            } => {
                let (sell, buy, min_price) = match (sell, buy, min_price) {
                    (Some(sell), Some(buy), Some(price)) => (*sell, *buy, limit_price(price)?),
                    _ => match self.offers.get(offer_id) {
                        Some(known) => *known,
                        None => super::tx::open_offer(&self.node, self.account, *offer_id).await?,
                    },
                };
                Ok(Operation::CancelOffer {
                    sell: AssetId(sell),
                    buy: AssetId(buy),
                    min_price,
                    offer_id: OfferId(*offer_id),
                })
            }
        }
    }

    async fn event(&mut self, event: ClientEvent, out: &mut impl Write) -> anyhow::Result<()> {
        match event {
            ClientEvent::Block { block, .. } => {
                self.ready = true;
                self.block(&block, out).await
            }
            ClientEvent::Notice { seq, code, text } => {
                // A late trade still goes into a block; any other notice on a trade refuses it.
                let refused = seq
                    .filter(|_| code != NoticeCode::Late)
                    .and_then(|seq| self.pending.remove(&seq));
                if refused.is_some() {
                    *self.counts.entry("refused").or_default() += 1;
                }
                print(
                    out,
                    json!({"type": "notice", "seq": seq, "code": format!("{code:?}"), "text": text,
                        "hash": refused.as_ref().map(|pending| pending.hash.clone())}),
                )
            }
            ClientEvent::Refused { code, text } => print(
                out,
                json!({"type": "refused", "code": format!("{code:?}"), "text": text}),
            ),
            ClientEvent::Disconnected { reason } => {
                print(out, json!({"type": "disconnected", "reason": reason}))?;
                self.reconnect(out).await
            }
        }
    }

    /// The block's line (with the outcome of this participant's trades in it), then the
    /// account's fills in it.
    async fn block(&mut self, block: &BlockData, out: &mut impl Write) -> anyhow::Result<()> {
        let own: Vec<Value> = block
            .own
            .iter()
            .map(|own| {
                let pending = self.pending.remove(&own.seq);
                let status = if own.dropped.is_some() {
                    "dropped"
                } else {
                    "accepted"
                };
                *self.counts.entry(status).or_default() += 1;
                json!({"seq": own.seq, "status": status, "reason": own.dropped,
                    "hash": pending.as_ref().map(|p| p.hash.clone()),
                    "sequence": pending.as_ref().map(|p| p.sequence)})
            })
            .collect();
        print(
            out,
            json!({"type": "block", "height": block.height,
                "block_hash": hex::encode(block.block_hash), "own": own}),
        )?;
        // Height 0 is the genesis (the tip a fresh gateway welcomes with): no fills.
        if !self.fills || block.height == 0 {
            return Ok(());
        }
        match self
            .node
            .block_fills(block.height, Some(self.account))
            .await
        {
            Ok(fills) => {
                for fill in &fills.fills {
                    let mut line = serde_json::to_value(fill).context("printing a fill")?;
                    line["type"] = json!("fill");
                    line["height"] = json!(block.height);
                    print(out, line)?;
                }
                Ok(())
            }
            // The public listener of a gateway-mode node serves no block reads: say so once.
            Err(error) if error.status() == Some(403) => {
                self.fills = false;
                print(
                    out,
                    json!({"type": "warning", "warning": format!(
                        "fills are not printed: {error} (with --block-source gateway, give \
                         --node the node's --operator-listen address)")}),
                )
            }
            Err(error) => print(
                out,
                json!({"type": "warning", "height": block.height,
                    "warning": format!("block {}'s fills could not be read: {error}", block.height)}),
            ),
        }
    }

    /// Connects again, with a growing pause, until it works.
    async fn reconnect(&mut self, out: &mut impl Write) -> anyhow::Result<()> {
        let mut pause = RECONNECT_PAUSE_MIN;
        loop {
            tokio::time::sleep(pause).await;
            match self.participant.connect(&self.gateway).await {
                Ok(()) => {
                    return print(
                        out,
                        json!({"type": "connected", "participant": self.participant_number,
                            "gateway": self.gateway, "account": self.account,
                            "next_sequence": self.next_sequence}),
                    )
                }
                Err(error) => {
                    print(
                        out,
                        json!({"type": "disconnected", "reason": error.to_string()}),
                    )?;
                    pause = (pause * 2).min(RECONNECT_PAUSE_MAX);
                }
            }
        }
    }
}

fn limit_price(text: &str) -> anyhow::Result<Price> {
    Price::parse_limit(text).map_err(|error| anyhow!("min_price {text:?}: {error}"))
}

async fn next_line(input: &mut Option<mpsc::UnboundedReceiver<String>>) -> Option<String> {
    match input {
        Some(lines) => lines.recv().await,
        None => std::future::pending().await,
    }
}

fn print(out: &mut impl Write, line: Value) -> anyhow::Result<()> {
    serde_json::to_writer(&mut *out, &line).context("writing the output")?;
    out.write_all(b"\n").context("writing the output")?;
    out.flush().context("writing the output")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_parse_from_json_lines_and_flags() {
        let offer: Order =
            serde_json::from_str(r#"{"offer":{"sell":0,"buy":1,"amount":1000,"min_price":"0.5"}}"#)
                .unwrap();
        assert_eq!(offer, parse_offer_flag("0:1:1000:0.5").unwrap());
        let cancel: Order = serde_json::from_str(r#"{"cancel":{"offer_id":3}}"#).unwrap();
        assert_eq!(
            cancel,
            Order::Cancel {
                offer_id: 3,
                sell: None,
                buy: None,
                min_price: None
            }
        );
        assert!(serde_json::from_str::<Order>(r#"{"offer":{"sell":0}}"#).is_err());
        assert!(serde_json::from_str::<Order>(r#"{"pay":{"to":1}}"#).is_err());
        assert!(parse_offer_flag("0:1:1000").is_err());
        assert!(parse_offer_flag("0:x:1000:0.5")
            .unwrap_err()
            .contains("BUY \"x\""));
    }
}
