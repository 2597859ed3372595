use std::time::Instant;
use walras_crypto::Keypair;
use walras_engine::{EngineConfig, ExchangeState};
use walras_types::genesis::{Genesis, GenesisAccount};
use walras_types::*;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let accounts: u64 = args[1].parse().unwrap();
    let threads: usize = args[2].parse().unwrap();
    let blocks: usize = args[3].parse().unwrap();
    let assets = 50u64;
    let keys: Vec<Keypair> = (0..256u64)
        .map(|i| {
            let mut s = [3u8; 32];
            s[..8].copy_from_slice(&i.to_be_bytes());
            Keypair::from_seed(s)
        })
        .collect();
    let vals: Vec<f64> = (0..assets).map(|a| 0.5 + (a as f64 * 0.37) % 2.0).collect();
    let genesis = Genesis {
        assets: 50,
        accounts: (0..accounts)
            .map(|id| GenesisAccount {
                id: AccountId(id),
                public_key: *keys[(id % 256) as usize].public_key().as_bytes(),
                balances: {
                    let mut b = vec![
                        (AssetId((id % 50) as u16), 1_000_000_000_000),
                        (AssetId(((id + 7) % 50) as u16), 1_000_000_000_000),
                    ];
                    b.sort();
                    b
                },
            })
            .collect(),
    };
    let mut state = ExchangeState::from_genesis(&genesis, threads).unwrap();
    let mut seq = vec![0u64; accounts as usize];
    let mut open: Vec<(u64, u16, u16, Price, u64)> = Vec::new();
    let mut x = 12345u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let config = EngineConfig {
        threads,
        verify_signatures: false,
        ..Default::default()
    };
    for b in 0..blocks {
        let mut txs = Vec::with_capacity(100_000);
        let mut used = std::collections::HashSet::new();
        while txs.len() < 100_000 {
            let src = rnd() % accounts;
            let r = rnd() % 100;
            let op = if r < 70 {
                let sell = if rnd() % 2 == 0 {
                    src % 50
                } else {
                    (src + 7) % 50
                };
                let mut buy = rnd() % 50;
                if buy == sell {
                    buy = (buy + 1) % 50;
                }
                let ratio = vals[sell as usize] / vals[buy as usize];
                let off = (rnd() % 600) as f64 / 10000.0 - 0.01;
                let amount = (1e6 / vals[sell as usize]) as u64 + rnd() % 1000;
                Operation::CreateOffer {
                    sell: AssetId(sell as u16),
                    buy: AssetId(buy as u16),
                    amount,
                    min_price: Price::from_f64(ratio * (1.0 - off)),
                }
            } else if r < 90 && !open.is_empty() {
                let i = (rnd() % open.len() as u64) as usize;
                let (owner, s, bb, p, id) = open.swap_remove(i);
                if used.contains(&(owner, id)) {
                    continue;
                }
                used.insert((owner, id));
                seq[owner as usize] += 1;
                let tx = Transaction {
                    source: AccountId(owner),
                    sequence: seq[owner as usize],
                    operation: Operation::CancelOffer {
                        sell: AssetId(s),
                        buy: AssetId(bb),
                        min_price: p,
                        offer_id: OfferId(id),
                    },
                };
                txs.push(SignedTransaction {
                    transaction: tx,
                    signature: [0; 64],
                });
                continue;
            } else {
                Operation::Payment {
                    to: AccountId(rnd() % accounts),
                    asset: AssetId((src % 50) as u16),
                    amount: 1 + rnd() % 1000,
                }
            };
            seq[src as usize] += 1;
            if let Operation::CreateOffer {
                sell,
                buy,
                min_price,
                ..
            } = op
            {
                open.push((src, sell.0, buy.0, min_price, seq[src as usize]));
            }
            let tx = Transaction {
                source: AccountId(src),
                sequence: seq[src as usize],
                operation: op,
            };
            txs.push(SignedTransaction {
                transaction: tx,
                signature: [0; 64],
            });
        }
        let t = Instant::now();
        let (blk, o) = state.propose(txs, &config).unwrap();
        let el = t.elapsed();
        eprintln!(
            "block {b}: {:?} {:.0} tx/s acc {} open {} trades {} conv {} {:?}",
            el,
            100_000.0 / el.as_secs_f64(),
            o.accepted,
            state.open_offer_count(),
            blk.header.trades.len(),
            o.converged,
            o.timings
        );
    }
}
