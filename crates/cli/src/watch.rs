//! `walras watch`: every committed block as a JSON line, and with `--account A` that account's
//! fills, from the node's event stream; it reconnects when the stream ends and resumes after the
//! last height it printed, so its output has every height once, in order.
//!
//! How it stays gap-free: the event stream only says that a block committed (and drops what a
//! slow reader misses, as a `lagged` event); what is printed is read per height from
//! `GET /v1/blocks/{h}` and `GET /v1/blocks/{h}/fills?account=A`. The command keeps the next
//! height to print; on (re)connecting it subscribes first, then prints every height up to the
//! node's tip, then one height range per event (`next ..= event height`): an event for a height
//! already printed prints nothing, and a height no event announced is printed by the next one.

use super::remote::{block_on, NodeArgs};
use anyhow::Context;
use serde::Serialize;
use std::io::Write;
use std::time::Duration;
use walras_api::wire::{BlockJson, DroppedJson, FillJson, TradeJson};
use walras_client::{ClientError, NodeApi};

/// The first pause before reconnecting, doubled per failed attempt up to [`RETRY_PAUSE_MAX`].
const RETRY_PAUSE_MIN: Duration = Duration::from_millis(100);
const RETRY_PAUSE_MAX: Duration = Duration::from_secs(5);

#[derive(clap::Args, Debug)]
pub(crate) struct WatchArgs {
    /// Also print this account's fills (what each of its offers sold and received)
    #[arg(long, value_name = "ID")]
    account: Option<u64>,
    /// First height to print [default: the block after the node's tip when the command starts]
    #[arg(long, value_name = "HEIGHT")]
    from: Option<u64>,
    /// Stop after printing this height [default: never]
    #[arg(long, value_name = "HEIGHT")]
    to: Option<u64>,
    #[command(flatten)]
    node: NodeArgs,
}

/// One line of output: `{"type":"block",...}` or `{"type":"fill",...}`.
#[derive(Serialize, Debug)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum WatchLine<'a> {
    /// A committed block: the header's facts, the per-pair totals, the dropped transactions
    /// (the raw `u128` valuations are left out: `walras query block H --json` has them).
    Block {
        height: u64,
        hash: &'a str,
        state_root: &'a str,
        transactions: u32,
        accepted: u32,
        dropped: &'a [DroppedJson],
        prices: &'a [Option<String>],
        trades: &'a [TradeJson],
    },
    /// One of the account's offers traded in block `height`.
    Fill {
        height: u64,
        #[serde(flatten)]
        fill: &'a FillJson,
    },
}

pub(crate) fn run(args: WatchArgs) -> anyhow::Result<()> {
    let client = args.node.client()?;
    let stdout = std::io::stdout();
    block_on(async move {
        let mut out = stdout.lock();
        watch(&client, args.account, args.from, args.to, &mut out).await
    })?
}

/// The command's logic against the node `client` reaches, writing lines to `out`; returns
/// after printing `to` (never when it is `None`).
pub(crate) async fn watch<C: NodeApi>(
    client: &C,
    account: Option<u64>,
    from: Option<u64>,
    to: Option<u64>,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let mut next = match from {
        Some(height) => height.max(1),
        None => first_height(client).await?,
    };
    let mut pause = RETRY_PAUSE_MIN;
    loop {
        match follow(client, account, &mut next, to, out).await {
            Ok(Finished::Done) => return Ok(()),
            Ok(Finished::StreamEnded) => {
                eprintln!("walras watch: the event stream ended; reconnecting");
                pause = RETRY_PAUSE_MIN;
            }
            Err(Interrupted::Output(error)) => return Err(error),
            Err(Interrupted::Node(error)) => {
                eprintln!(
                    "walras watch: {error}; reconnecting in {} ms (next height {next})",
                    pause.as_millis()
                );
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(RETRY_PAUSE_MAX);
    }
}

/// The block after the node's tip.
async fn first_height<C: NodeApi>(client: &C) -> anyhow::Result<u64> {
    let status = client.status().await?;
    Ok(status.height + 1)
}

enum Finished {
    /// `to` was printed.
    Done,
    /// The node closed the stream (it stopped, or gave the stream's slot away).
    StreamEnded,
}

enum Interrupted {
    /// The node failed or went away: reconnect.
    Node(ClientError),
    /// Writing the output failed (the reader went away): stop.
    Output(anyhow::Error),
}

/// One connection: subscribe, catch up to the tip, then print per event.
async fn follow<C: NodeApi>(
    client: &C,
    account: Option<u64>,
    next: &mut u64,
    to: Option<u64>,
    out: &mut impl Write,
) -> Result<Finished, Interrupted> {
    // Subscribe before reading the tip: a block committing in between is then both under the
    // tip or announced by an event, never neither.
    let mut events = client.events().await.map_err(Interrupted::Node)?;
    let tip = client.status().await.map_err(Interrupted::Node)?.height;
    if print_through(client, account, next, tip, to, out).await? {
        return Ok(Finished::Done);
    }
    while let Some(event) = events.next().await {
        let height = event.map_err(Interrupted::Node)?.height;
        if print_through(client, account, next, height, to, out).await? {
            return Ok(Finished::Done);
        }
    }
    Ok(Finished::StreamEnded)
}

/// Prints heights `*next ..= through` (at most through `to`), advancing `*next` after each;
/// `true` once `to` is printed.
async fn print_through<C: NodeApi>(
    client: &C,
    account: Option<u64>,
    next: &mut u64,
    through: u64,
    to: Option<u64>,
    out: &mut impl Write,
) -> Result<bool, Interrupted> {
    let last = to.map_or(through, |to| through.min(to));
    while *next <= last {
        let height = *next;
        let block = client.block(height).await.map_err(Interrupted::Node)?;
        let fills = match account {
            Some(account) => {
                let fills = client.block_fills(height, Some(account)).await;
                fills.map_err(Interrupted::Node)?.fills
            }
            None => Vec::new(),
        };
        write_block(out, &block, &fills).map_err(Interrupted::Output)?;
        *next = height + 1;
    }
    Ok(to.is_some_and(|to| *next > to))
}

/// The block's line, then one line per fill, flushed together.
fn write_block(out: &mut impl Write, block: &BlockJson, fills: &[FillJson]) -> anyhow::Result<()> {
    let line = WatchLine::Block {
        height: block.height,
        hash: &block.hash,
        state_root: &block.state_root,
        transactions: block.transactions,
        accepted: block.accepted,
        dropped: &block.dropped,
        prices: &block.prices,
        trades: &block.trades,
    };
    write_line(out, &line)?;
    for fill in fills {
        write_line(
            out,
            &WatchLine::Fill {
                height: block.height,
                fill,
            },
        )?;
    }
    out.flush().context("writing the output")
}

fn write_line(out: &mut impl Write, line: &WatchLine<'_>) -> anyhow::Result<()> {
    serde_json::to_writer(&mut *out, line).context("writing the output")?;
    out.write_all(b"\n").context("writing the output")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fill_line_carries_its_height_and_the_fills_fields() {
        let fill = FillJson {
            account: 7,
            offer_id: 3,
            sell: 0,
            buy: 1,
            sold: 100,
            bought: 95,
            returned: 0,
            rate: "0.95".to_string(),
        };
        let line = serde_json::to_value(WatchLine::Fill {
            height: 12,
            fill: &fill,
        })
        .unwrap();
        assert_eq!(
            line,
            serde_json::json!({"type": "fill", "height": 12, "account": 7, "offer_id": 3,
                "sell": 0, "buy": 1, "sold": 100, "bought": 95, "returned": 0, "rate": "0.95"})
        );
    }
}
