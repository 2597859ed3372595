use std::time::Instant;
use walras_crypto::Keypair;
use walras_engine::{EngineConfig, ExchangeState};
use walras_types::genesis::{Genesis, GenesisAccount};
use walras_types::*;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let accounts: u64 = args[1].parse().unwrap();
    let threads: usize = args[2].parse().unwrap();
    let verify = args[3] == "1";
    let keys: Vec<Keypair> = (0..256u64)
        .map(|i| {
            let mut s = [3u8; 32];
            s[..8].copy_from_slice(&i.to_be_bytes());
            Keypair::from_seed(s)
        })
        .collect();
    let genesis = Genesis {
        assets: 50,
        accounts: (0..accounts)
            .map(|id| GenesisAccount {
                id: AccountId(id),
                public_key: *keys[(id % 256) as usize].public_key().as_bytes(),
                balances: {
                    let mut b = vec![
                        (AssetId((id % 50) as u16), 1_000_000_000),
                        (AssetId(((id + 7) % 50) as u16), 1_000_000_000),
                    ];
                    b.sort();
                    b
                },
            })
            .collect(),
    };
    let t = Instant::now();
    let mut state = ExchangeState::from_genesis(&genesis, threads).unwrap();
    eprintln!("genesis {:?}", t.elapsed());
    let mut seq = vec![0u64; accounts as usize];
    let mut x = 12345u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let config = EngineConfig {
        threads,
        verify_signatures: verify,
        ..Default::default()
    };
    for b in 0..4 {
        let txs: Vec<SignedTransaction> = (0..100_000)
            .map(|_| {
                let src = rnd() % accounts;
                seq[src as usize] += 1;
                let tx = Transaction {
                    source: AccountId(src),
                    sequence: seq[src as usize],
                    operation: Operation::Payment {
                        to: AccountId(rnd() % accounts),
                        asset: AssetId((src % 50) as u16),
                        amount: 1 + rnd() % 100,
                    },
                };
                let signature = *keys[(src % 256) as usize].sign(&tx.encode()).as_bytes();
                SignedTransaction {
                    transaction: tx,
                    signature,
                }
            })
            .collect();
        let t = Instant::now();
        let (_, o) = state.propose(txs, &config).unwrap();
        let el = t.elapsed();
        eprintln!(
            "block {b}: {:?} {:.0} tx/s accepted {} {:?}",
            el,
            100_000.0 / el.as_secs_f64(),
            o.accepted,
            o.timings
        );
    }
}
