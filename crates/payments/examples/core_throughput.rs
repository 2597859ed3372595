//! Ceiling of one validator shard's core on one thread: payments per second through
//! `ValidatorShard::handle` + `seal_batch`, for payments whose one input carries a certificate
//! (so each request costs an owner-signature check, q vote checks with the root cache, the spent
//! step and the vote signing). No network, no disk: an upper bound for the process benchmark.
//!
//! With `together`, each chunk of 64 requests has its owner signatures checked as one batch
//! first (`check_client_signatures`, as the validator's shard worker does with a queued group),
//! then handled with those verdicts; with `alone` (the default), each is checked in `handle`.
//!
//! Run: `cargo run --release -p walras-payments --example core_throughput [validators] [payments] [naive|merkle] [alone|together]`

use std::time::Instant;

use walras_crypto::Keypair;
use walras_payments::{
    genesis_output_id, ChainId, Client, ClientEffect, ClientSignatures, Committee, Epoch, Output,
    PaymentRequest, Reply, Scheme, ValidatorShard,
};
use walras_types::AssetId;

fn seed(tag: u8, index: u32) -> [u8; 32] {
    let mut seed = [0u8; 32];
    seed[0] = tag;
    seed[1..5].copy_from_slice(&index.to_be_bytes());
    seed
}

fn request_of(effects: &[ClientEffect]) -> Option<PaymentRequest> {
    effects.iter().find_map(|effect| match effect {
        ClientEffect::Broadcast { request, .. } => Some(request.clone()),
        _ => None,
    })
}

/// Runs every request through every validator; returns the seconds validator 0 spent.
fn round(
    shards: &mut [ValidatorShard],
    wallets: &mut [Client],
    requests: &[(usize, PaymentRequest)],
    batch: usize,
    together: bool,
) -> f64 {
    let mut spent = 0.0;
    for (v, shard) in shards.iter_mut().enumerate() {
        let start = Instant::now();
        let mut replies = Vec::new();
        for chunk in requests.chunks(batch.max(1)) {
            let checked = if together {
                let group: Vec<&PaymentRequest> =
                    chunk.iter().map(|(_, request)| request).collect();
                shard.check_client_signatures(&group)
            } else {
                ClientSignatures::default()
            };
            for (_, request) in chunk {
                if let Ok(outcome) = shard.handle_checked(request, &checked) {
                    replies.extend(outcome.replies);
                }
            }
            replies.extend(shard.seal_batch().replies);
        }
        if v == 0 {
            spent = start.elapsed().as_secs_f64();
        }
        for reply in replies {
            if let Reply::Votes(votes) = reply {
                if let Some((payer, _)) = requests
                    .iter()
                    .find(|(_, request)| request.signed.payment.id() == votes.payment)
                {
                    for effect in wallets[*payer].on_votes(&votes) {
                        if let ClientEffect::Certified { certificates, .. } = effect {
                            for certificate in certificates {
                                let owner = certificate.output.owner;
                                if let Some(wallet) =
                                    wallets.iter_mut().find(|w| w.public_key() == owner)
                                {
                                    if owner != wallets_key(*payer) {
                                        let _ = wallet.receive(certificate);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    spent
}

fn wallets_key(index: usize) -> walras_crypto::PublicKey {
    Keypair::from_seed(seed(3, index as u32)).public_key()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(4);
    let payments: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let scheme = match args.next().as_deref() {
        Some("naive") => Scheme::Naive,
        _ => Scheme::Merkle {
            batch_leaves_max: 128,
        },
    };
    let together = args.next().as_deref() == Some("together");
    let keys: Vec<Keypair> = (0..n as u32)
        .map(|i| Keypair::from_seed(seed(1, i)))
        .collect();
    let committee = Committee {
        chain_id: ChainId(1),
        epoch: Epoch(1),
        validators: keys.iter().map(Keypair::public_key).collect(),
        shards: 1,
        bls: Vec::new(),
    };
    let mut shards: Vec<ValidatorShard> = keys
        .iter()
        .enumerate()
        .map(|(i, key)| ValidatorShard::new(committee.clone(), i as u16, 0, key.clone(), scheme))
        .collect();
    let mut wallets: Vec<Client> = (0..payments)
        .map(|i| Client::new(Keypair::from_seed(seed(3, i as u32)), committee.clone()))
        .collect();
    for (i, wallet) in wallets.iter_mut().enumerate() {
        let id = genesis_output_id(ChainId(1), i as u32);
        let output = Output {
            asset: AssetId(0),
            amount: 100,
            owner: wallet.public_key(),
        };
        for shard in &mut shards {
            shard.admit_root(id, output);
        }
        let _ = wallet.add_root(id, output);
    }
    // Round 1 spends genesis coins (no input certificate); round 2 spends the certified change.
    let mut times = Vec::new();
    for amount in [60u128, 40] {
        let requests: Vec<(usize, PaymentRequest)> = (0..payments)
            .filter_map(|i| {
                let payee = wallets_key((i + 1) % payments);
                let (_, effects) = wallets[i].pay(payee, AssetId(0), amount).ok()?;
                request_of(&effects).map(|request| (i, request))
            })
            .collect();
        let count = requests.len();
        let seconds = round(&mut shards, &mut wallets, &requests, 64, together);
        times.push((count, seconds));
    }
    let certified_inputs = wallets
        .iter()
        .filter(|w| w.pending_payments().is_empty())
        .count();
    println!(
        "validators {n}, quorum {}, scheme {scheme:?}, owner signatures checked {}",
        committee.quorum(),
        if together { "together" } else { "alone" }
    );
    for (label, (count, seconds)) in ["genesis inputs", "certified inputs"].iter().zip(&times) {
        println!(
            "{label:>16}: {count} payments, validator 0 core {:.3} s, {:.0} payments/s per shard core",
            seconds,
            *count as f64 / seconds
        );
    }
    println!("wallets with nothing pending: {certified_inputs}/{payments}");
}
