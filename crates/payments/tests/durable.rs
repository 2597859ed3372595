//! The durable spent set (feature `lmdb`; run with
//! `cargo test -p walras-payments --features lmdb`). A validator shard runs in a child process
//! (this test binary re-run with an environment variable), votes on a payment, makes the effects
//! durable before printing its reply, and is then killed with SIGKILL. The restarted shard, rebuilt
//! from the log alone, refuses a conflicting payment (naming the original as holder) and answers
//! the original with the identical votes. Also: every effect round-trips through the codec.

#![cfg(feature = "lmdb")]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::{keypair, CHAIN, EPOCH};
use walras_payments::EffectLog;
use walras_payments::{decode_effect, encode_effect};
use walras_payments::{
    genesis_output_id, Committee, Input, Output, Payment, PaymentRequest, Reply, Scheme,
    SignedPayment, ValidatorShard,
};
use walras_types::AssetId;

const CHILD_DIR: &str = "WALRAS_PAYMENTS_CHILD_DIR";

fn committee() -> Committee {
    Committee {
        chain_id: CHAIN,
        epoch: EPOCH,
        validators: (0..4).map(|i| keypair(1, i).public_key()).collect(),
        shards: 1,
        bls: Vec::new(),
    }
}

fn shard() -> ValidatorShard {
    ValidatorShard::new(
        committee(),
        0,
        0,
        keypair(1, 0),
        Scheme::Merkle {
            batch_leaves_max: 8,
        },
    )
}

fn coin() -> Input {
    Input {
        id: genesis_output_id(CHAIN, 1),
        output: Output {
            asset: AssetId(0),
            amount: 50,
            owner: keypair(3, 0).public_key(),
        },
    }
}

fn payment_to(payee: u32) -> PaymentRequest {
    let payment = Payment {
        chain_id: CHAIN,
        epoch: EPOCH,
        inputs: vec![coin()],
        outputs: vec![
            Output {
                asset: AssetId(0),
                amount: 20,
                owner: keypair(3, payee).public_key(),
            },
            Output {
                asset: AssetId(0),
                amount: 30,
                owner: keypair(3, 0).public_key(),
            },
        ],
    };
    PaymentRequest {
        signed: SignedPayment::sign(payment, &keypair(3, 0)),
        certificates: Vec::new(),
    }
}

/// The child: admit the coin, handle the payment, seal, make durable, then say so and hang.
#[test]
fn child_validator_process() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let mut log = EffectLog::open(std::path::Path::new(&dir)).expect("open log");
    let mut shard = shard();
    let mut effects = shard.admit_root(coin().id, coin().output).effects;
    let outcome = shard.handle(&payment_to(1)).expect("valid payment");
    effects.extend(outcome.effects);
    let sealed = shard.seal_batch();
    effects.extend(sealed.effects);
    log.append(&effects).expect("durable before reply");
    println!("voted");
    std::thread::sleep(std::time::Duration::from_secs(60));
}

#[test]
fn a_validator_killed_after_voting_refuses_a_conflict_and_re_answers_the_original_after_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "child_validator_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR, dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the child validator");
    let stdout = child.stdout.take().expect("piped stdout");
    let voted = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .any(|line| line.contains("voted"));
    assert!(voted, "the child voted");
    child.kill().expect("SIGKILL the child");
    let _ = child.wait();

    let log = EffectLog::open(dir.path()).expect("reopen");
    let mut restarted = shard();
    for effect in log.replay().expect("replay") {
        restarted.apply(&effect);
    }
    // What an uninterrupted shard answers, for comparison.
    let mut reference = shard();
    reference.admit_root(coin().id, coin().output);
    reference.handle(&payment_to(1)).expect("valid");
    reference.seal_batch();
    let expected = reference.handle(&payment_to(1)).expect("valid").replies;

    let original = restarted.handle(&payment_to(1)).expect("valid");
    assert!(original.effects.is_empty());
    assert_eq!(original.replies, expected);
    assert!(matches!(&original.replies[..], [Reply::Votes(_)]));
    let conflict = restarted.handle(&payment_to(2)).expect("valid");
    match &conflict.replies[..] {
        [Reply::Conflict(conflict)] => assert_eq!(conflict.holder, payment_to(1).signed),
        other => panic!("expected a conflict, got {other:?}"),
    }
}

#[test]
fn every_effect_round_trips_through_the_codec_and_truncations_are_refused() {
    let mut shard = shard();
    let mut effects = shard.admit_root(coin().id, coin().output).effects;
    effects.extend(shard.handle(&payment_to(1)).expect("valid").effects);
    effects.extend(shard.seal_batch().effects);
    let mut naive = ValidatorShard::new(committee(), 0, 0, keypair(1, 0), Scheme::Naive);
    naive.admit_root(coin().id, coin().output);
    effects.extend(naive.handle(&payment_to(1)).expect("valid").effects);
    assert_eq!(effects.len(), 4);
    for effect in &effects {
        let bytes = encode_effect(effect);
        assert_eq!(decode_effect(&bytes).as_ref(), Ok(effect));
        for cut in 0..bytes.len() {
            assert!(decode_effect(&bytes[..cut]).is_err());
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode_effect(&longer).is_err());
    }
}
