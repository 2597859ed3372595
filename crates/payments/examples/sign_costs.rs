//! Sign and verify cost per scheme and the Merkle leaf sweep (§3.3, §4.1), on one core.
//!
//! Run: `cargo run --release -p walras-payments --example sign_costs [quorum]`
//! (BLS rows at the end).
//!
//! Hand-timed with `std::time::Instant` rather than criterion, which is not in this workspace's
//! dependency set; each figure is the median of 5 runs of a fixed loop.
//!
//! Per output a validator signs once and later verifies the `q` votes of that output's
//! certificate when it is spent. Naive: `s + q·v`. Merkle with `L` leaves per tree: signing costs
//! one signature per `L` outputs plus the tree's hashes, and verifying a vote costs its path's
//! hashes plus one signature check per root (the cache makes later leaves of the same root cheap).
//! The paper's formula was lost in extraction; the model printed next to the measured optimum is
//! our reconstruction: cost(L) = (s + q·v)/L + (2 + q·log2 L)·h, minimised at
//! L* = (s + q·v)·ln 2 / (q·h).

use std::time::Instant;

use walras_crypto::{hash, sign_merkle_batch, Hash, Keypair};
use walras_payments::{verify_vote, RootCache, VoteSignature};

fn median_ns(runs: usize, per: usize, mut body: impl FnMut()) -> f64 {
    let mut samples: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            body();
            start.elapsed().as_nanos() as f64 / per as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn main() {
    let quorum: usize = std::env::args()
        .nth(1)
        .and_then(|arg| arg.parse().ok())
        .unwrap_or(7);
    let key = Keypair::from_seed([7; 32]);
    let one_validator = walras_payments::Committee {
        chain_id: walras_payments::ChainId(1),
        epoch: walras_payments::Epoch(1),
        validators: vec![key.public_key()],
        shards: 1,
        bls: Vec::new(),
    };
    let count = 2048usize;
    let messages: Vec<Hash> = (0..count).map(|i| hash(&i.to_be_bytes())).collect();

    let h = median_ns(5, count * 4, || {
        for message in &messages {
            for _ in 0..4 {
                std::hint::black_box(hash(message.as_bytes()));
            }
        }
    });
    let signatures: Vec<_> = messages
        .iter()
        .map(|message| key.sign(message.as_bytes()))
        .collect();
    let s = median_ns(5, count, || {
        for message in &messages {
            std::hint::black_box(key.sign(message.as_bytes()));
        }
    });
    let v = median_ns(5, count, || {
        let mut cache = RootCache::new(0);
        for (message, signature) in messages.iter().zip(&signatures) {
            let vote = VoteSignature::Naive(*signature);
            let ok = verify_vote(&one_validator, 0, message, &vote, &mut cache).is_ok();
            std::hint::black_box(ok);
        }
    });
    println!("scheme  operation                     ns/output");
    println!("hash    blake2b-256 (32 B)            {h:>9.0}");
    println!("naive   sign                          {s:>9.0}");
    println!("naive   verify                        {v:>9.0}");
    println!(
        "naive   per-output cost s+q·v (q={quorum})    {:>9.0}  (certificate {} bytes)",
        s + quorum as f64 * v,
        102 + quorum
            * (walras_payments::VOTE_OVERHEAD_BYTES
                + VoteSignature::Naive(signatures[0]).wire_bytes())
    );
    println!();
    println!("merkle sweep, q = {quorum}: per-output ns");
    println!(
        "leaves  sign/leaf  verify/leaf uncached  verify/leaf cached  cost=sign+q·cached  model  cert bytes (max)"
    );
    let mut best = (0usize, f64::MAX);
    for leaves in [1usize, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024] {
        let batches: Vec<_> = messages
            .chunks(leaves)
            .map(|chunk| sign_merkle_batch(&key, chunk).expect("non-empty"))
            .collect();
        let sign = median_ns(5, count, || {
            for chunk in messages.chunks(leaves) {
                std::hint::black_box(sign_merkle_batch(&key, chunk).ok());
            }
        });
        let votes: Vec<(Hash, VoteSignature)> = messages
            .chunks(leaves)
            .zip(&batches)
            .flat_map(|(chunk, (batch, proofs))| {
                chunk.iter().zip(proofs).map(|(message, proof)| {
                    (
                        *message,
                        VoteSignature::Merkle {
                            batch: *batch,
                            proof: proof.clone(),
                        },
                    )
                })
            })
            .collect();
        let uncached = median_ns(5, count, || {
            let mut cache = RootCache::new(0);
            for (message, vote) in &votes {
                std::hint::black_box(
                    verify_vote(&one_validator, 0, message, vote, &mut cache).is_ok(),
                );
            }
        });
        let cached = median_ns(5, count, || {
            let mut cache = RootCache::default();
            for (message, vote) in &votes {
                std::hint::black_box(
                    verify_vote(&one_validator, 0, message, vote, &mut cache).is_ok(),
                );
            }
        });
        let cost = sign + quorum as f64 * cached;
        let q = quorum as f64;
        let model = (s + q * v) / leaves as f64 + (2.0 + q * (leaves as f64).log2()) * h;
        if cost < best.1 {
            best = (leaves, cost);
        }
        // A certificate carries q votes: header 102 bytes + q × (index, count, tag, vote).
        let vote_bytes = votes
            .iter()
            .map(|(_, vote)| vote.wire_bytes())
            .max()
            .unwrap_or(0);
        let cert_bytes = 102 + quorum * (walras_payments::VOTE_OVERHEAD_BYTES + vote_bytes);
        println!(
            "{leaves:>6}  {sign:>9.0}  {uncached:>20.0}  {cached:>18.0}  {cost:>18.0}  {model:>5.0}  {cert_bytes:>16}"
        );
    }
    bls_rows(quorum);
    let optimum = (s + quorum as f64 * v) * std::f64::consts::LN_2 / (quorum as f64 * h);
    println!();
    println!(
        "measured optimum: {} leaves ({:.0} ns/output, {:.1}x cheaper than naive); model optimum L* = {optimum:.0}; paper (§3.3, n=10): 64-128",
        best.0,
        best.1,
        (s + quorum as f64 * v) / best.1
    );
}

fn bls_rows(quorum: usize) {
    use walras_payments::bls::{
        aggregate_certificate, verify_bls_certificate, BlsCommittee, BlsKeypair,
    };
    use walras_payments::{genesis_output_id, vote_message, ChainId, Committee, Epoch, Output};
    // n = 3f + 1 with quorum 2f + 1 as close to the requested quorum as possible.
    let n = 3 * (quorum.saturating_sub(1) / 2) + 1;
    let keys: Vec<BlsKeypair> = (0..n)
        .filter_map(|i| BlsKeypair::from_seed(&[i as u8 + 1; 32]).ok())
        .collect();
    let committee = Committee {
        chain_id: ChainId(1),
        epoch: Epoch(1),
        validators: (0..n)
            .map(|i| Keypair::from_seed([i as u8; 32]).public_key())
            .collect(),
        shards: 1,
        bls: keys.iter().map(BlsKeypair::member).collect(),
    };
    let quorum = committee.quorum();
    let published: Vec<_> = keys
        .iter()
        .map(|k| (k.public_key(), k.proof_of_possession()))
        .collect();
    let Ok(committee) = BlsCommittee::new(committee, &published) else {
        return;
    };
    let output = Output {
        asset: walras_types::AssetId(0),
        amount: 1,
        owner: Keypair::from_seed([9; 32]).public_key(),
    };
    let count = 64;
    let ids: Vec<_> = (0..count)
        .map(|i| genesis_output_id(ChainId(1), i))
        .collect();
    let messages: Vec<_> = ids
        .iter()
        .map(|id| vote_message(ChainId(1), Epoch(1), id, &output))
        .collect();
    let sign = median_ns(3, count as usize, || {
        for message in &messages {
            std::hint::black_box(keys[0].sign_vote(message));
        }
    });
    let votes: Vec<Vec<_>> = messages
        .iter()
        .map(|message| {
            (0..quorum)
                .map(|v| (v as u16, keys[v].sign_vote(message)))
                .collect()
        })
        .collect();
    let verify_one = median_ns(3, count as usize, || {
        for (message, vote) in messages.iter().zip(&votes) {
            std::hint::black_box(committee.verify_vote(0, message, &vote[0].1).is_ok());
        }
    });
    let certificates: Vec<_> = ids
        .iter()
        .zip(&votes)
        .filter_map(|(id, vote)| {
            aggregate_certificate(ChainId(1), Epoch(1), *id, output, vote).ok()
        })
        .collect();
    let verify_cert = median_ns(3, count as usize, || {
        for certificate in &certificates {
            std::hint::black_box(verify_bls_certificate(certificate, &committee).is_ok());
        }
    });
    println!();
    println!("bls     sign                          {sign:>9.0}");
    println!("bls     verify one vote               {verify_one:>9.0}");
    println!("bls     verify certificate (q={quorum})    {verify_cert:>9.0}");
    println!(
        "bls     per-output cost s+v_cert        {:>9.0}  (certificate {} bytes)",
        sign + verify_cert,
        certificates.first().map_or(0, |c| c.wire_bytes())
    );
}
