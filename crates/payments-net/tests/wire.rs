//! The wire codec: arbitrary bytes never panic and never decode to something that re-encodes
//! differently; every message round-trips; frames over the limit are refused before allocation.

use proptest::prelude::*;
use walras_crypto::Keypair;
use walras_payments::{
    genesis_output_id, ChainId, Epoch, Input, Output, Payment, PaymentRequest, SignedPayment,
};
use walras_payments_net::{
    decode_request_message, decode_response_message, encode_request_message,
    encode_response_message, ErrorCode, ErrorReply, Request, Response, ShardStats,
};
use walras_payments_net::{write_frame, FrameError, FrameReader, FRAME_BYTES_MAX};
use walras_types::AssetId;

fn request(seed: u8, amount: u128) -> PaymentRequest {
    let key = Keypair::from_seed([seed; 32]);
    let input = Input {
        id: genesis_output_id(ChainId(1), u32::from(seed)),
        output: Output {
            asset: AssetId(3),
            amount,
            owner: key.public_key(),
        },
    };
    PaymentRequest {
        signed: SignedPayment::sign(
            Payment {
                chain_id: ChainId(1),
                epoch: Epoch(0),
                inputs: vec![input],
                outputs: vec![input.output],
            },
            &key,
        ),
        certificates: Vec::new(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        if let Ok((id, request)) = decode_request_message(&bytes) {
            prop_assert_eq!(encode_request_message(id, &request), bytes.clone());
        }
        if let Ok((id, response)) = decode_response_message(&bytes) {
            prop_assert_eq!(encode_response_message(id, &response), bytes.clone());
        }
    }

    #[test]
    fn a_valid_request_with_mutated_bytes_never_panics(
        seed in 1u8..200,
        amount in 1u128..u128::MAX,
        position in any::<prop::sample::Index>(),
        value in any::<u8>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let message = Request::Pay { shard: 1, request: request(seed, amount) };
        let mut bytes = encode_request_message(9, &message);
        prop_assert_eq!(decode_request_message(&bytes), Ok((9, message)));
        let at = position.index(bytes.len());
        bytes[at] = value;
        let _ = decode_request_message(&bytes);
        let end = cut.index(bytes.len());
        prop_assert!(decode_request_message(&bytes[..end]).is_err());
    }
}

#[test]
fn every_response_round_trips() {
    let signed = request(4, 10).signed;
    for response in [
        Response::Error(ErrorReply {
            code: ErrorCode::Refused,
            message: "the owner's signature does not verify".into(),
        }),
        Response::Error(ErrorReply {
            code: ErrorCode::TooManyConnections,
            message: "address 127.0.0.1 holds its share of 128 connections".into(),
        }),
        Response::Error(ErrorReply {
            code: ErrorCode::Overloaded {
                retry_after_ms: 40_000,
            },
            message: "shard 2's queue would take 120 ms to drain".into(),
        }),
        Response::Holder(None),
        Response::Holder(Some(signed)),
        Response::Stats(vec![
            ShardStats::default(),
            ShardStats {
                requests: 1,
                votes: 2,
                conflicts: 3,
                refused: 4,
                spent: 5,
                commits: 6,
                cross_shard_messages: 7,
            },
        ]),
    ] {
        let bytes = encode_response_message(77, &response);
        assert_eq!(decode_response_message(&bytes), Ok((77, response)));
    }
    let long = Response::Error(ErrorReply {
        code: ErrorCode::Other(999),
        message: "é".repeat(5000),
    });
    let (_, decoded) =
        decode_response_message(&encode_response_message(1, &long)).expect("decodes");
    let Response::Error(error) = decoded else {
        panic!("an error reply")
    };
    assert!(error.message.len() <= 4096 && error.code == ErrorCode::Other(999));
}

#[tokio::test]
async fn a_frame_over_the_limit_is_refused_from_its_header() {
    let header = ((FRAME_BYTES_MAX + 1) as u32).to_be_bytes();
    let mut frames = FrameReader::new(&header[..]);
    assert!(matches!(
        frames.next().await,
        Err(FrameError::TooLarge { bytes }) if bytes == FRAME_BYTES_MAX + 1
    ));
    let mut framed = Vec::new();
    write_frame(&mut framed, b"hello").await.expect("writes");
    let mut frames = FrameReader::new(&framed[..]);
    assert_eq!(frames.next().await.expect("reads"), &b"hello"[..]);
    assert!(matches!(frames.next().await, Err(FrameError::Closed)));
    let mut truncated = FrameReader::new(&framed[..6]);
    assert!(matches!(truncated.next().await, Err(FrameError::Closed)));
}
