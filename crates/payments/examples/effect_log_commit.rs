//! Group-commit cost of the durable effect log (feature `lmdb`): one synchronous LMDB commit per
//! group of `k` payment records, for k in 1, 16, 64, 256.
//!
//! Run: `cargo run --release -p walras-payments --features lmdb --example effect_log_commit [DIR]`
//! (DIR defaults to a fresh directory under the system temp dir; it is removed at the end).

use std::time::Instant;

use walras_crypto::Keypair;
use walras_payments::EffectLog;
use walras_payments::{
    genesis_output_id, ChainId, Effect, Epoch, Input, Output, Payment, SignedPayment,
};
use walras_types::AssetId;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::env::temp_dir().join(format!("walras-effect-log-{}", std::process::id()))
        });
    let key = Keypair::from_seed([5; 32]);
    let owner = key.public_key();
    let mut log = EffectLog::open(&dir)?;
    let mut index = 0u32;
    let mut record = || {
        index += 1;
        let output = Output {
            asset: AssetId(0),
            amount: 10,
            owner,
        };
        let payment = Payment {
            chain_id: ChainId(1),
            epoch: Epoch(1),
            inputs: vec![Input {
                id: genesis_output_id(ChainId(1), index),
                output,
            }],
            outputs: vec![output],
        };
        Effect::RecordPayment {
            signed: SignedPayment::sign(payment, &key),
            signatures: None,
        }
    };
    println!("group  commits  ms/commit  us/record");
    for group in [1usize, 16, 64, 256] {
        let commits = 40;
        let batches: Vec<Vec<Effect>> = (0..commits)
            .map(|_| (0..group).map(|_| record()).collect())
            .collect();
        let start = Instant::now();
        for batch in &batches {
            log.append(batch)?;
        }
        let elapsed = start.elapsed();
        println!(
            "{group:>5}  {commits:>7}  {:>9.3}  {:>9.1}",
            elapsed.as_secs_f64() * 1e3 / commits as f64,
            elapsed.as_secs_f64() * 1e6 / (commits * group) as f64
        );
    }
    drop(log);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
