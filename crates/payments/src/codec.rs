//! Canonical bytes of the durable [`Effect`]s (and of what they hold: signed payments, vote
//! signatures), with a decoder that refuses anything malformed with a typed error.
//!
//! Hand-written for the same reason as [`Payment::encode`]: fixed-width big-endian fields, one
//! byte string per value, and no dependency on the wire crate. The durable spent set stores these
//! bytes; the TCP layer can reuse them.

use thiserror::Error;
use walras_crypto::{Hash, MerkleBatchSignature, MerkleProof, PublicKey, Signature};
use walras_types::codec::{self, DecodeError};
use walras_types::AssetId;

use crate::cert::{Certificate, Vote, VoteSignature};
use crate::model::{
    ChainId, Epoch, Input, Output, OutputId, Payment, PaymentId, SignedPayment, PAYMENT_INPUTS_MAX,
    PAYMENT_OUTPUTS_MAX,
};
use crate::validator::{Conflict, Effect, PaymentRequest, PaymentVotes};

/// Most siblings of a Merkle path (a tree of up to 2^32 leaves).
pub const MERKLE_SIBLINGS_MAX: usize = 32;

/// Why bytes do not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum CodecError {
    #[error("the bytes end inside {what}")]
    Truncated { what: &'static str },
    #[error("unknown {what} tag {tag}")]
    UnknownTag { what: &'static str, tag: u8 },
    #[error("{what}: {count} is over the limit")]
    TooMany { what: &'static str, count: usize },
    #[error("{what} does not decode")]
    Invalid { what: &'static str },
    #[error("{extra} bytes after the value")]
    Trailing { extra: usize },
}

/// The payments formats read through the exchange's one reader ([`codec::Reader`]: bounds
/// checks, cursor, trailing bytes); this wrapper only names the field each read is for, so that
/// an error says which field the bytes ended in.
struct Reader<'a>(codec::Reader<'a>);

/// A read of the field `what` that failed.
fn field_error(what: &'static str) -> impl Fn(DecodeError) -> CodecError {
    move |error| match error {
        DecodeError::TrailingBytes { extra } => CodecError::Trailing { extra },
        DecodeError::BadTag { what, tag } => CodecError::UnknownTag { what, tag },
        // The only other error the reads used here return (`take` and the integers) is
        // `Truncated`; any other is still a field that does not decode.
        DecodeError::Truncated { .. } => CodecError::Truncated { what },
        DecodeError::CountOverMax { .. }
        | DecodeError::BadText { .. }
        | DecodeError::BadMagic { .. } => CodecError::Invalid { what },
    }
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Reader(codec::Reader::new(bytes))
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], CodecError> {
        self.0.array().map_err(field_error(what))
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, CodecError> {
        self.0.u8().map_err(field_error(what))
    }

    fn u16(&mut self, what: &'static str) -> Result<u16, CodecError> {
        self.0.u16().map_err(field_error(what))
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, CodecError> {
        self.0.u32().map_err(field_error(what))
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, CodecError> {
        self.0.u64().map_err(field_error(what))
    }

    fn hash(&mut self, what: &'static str) -> Result<Hash, CodecError> {
        Ok(Hash(self.array(what)?))
    }

    fn signature(&mut self) -> Result<Signature, CodecError> {
        let bytes: [u8; 64] = self.array("signature")?;
        Signature::from_bytes(&bytes).map_err(|_| CodecError::Invalid { what: "signature" })
    }

    fn output(&mut self) -> Result<Output, CodecError> {
        let asset = AssetId(self.u16("asset")?);
        let amount = self.0.u128().map_err(field_error("amount"))?;
        let key: [u8; 32] = self.array("owner")?;
        let owner =
            PublicKey::from_bytes(&key).map_err(|_| CodecError::Invalid { what: "owner" })?;
        Ok(Output {
            asset,
            amount,
            owner,
        })
    }

    fn count(&mut self, what: &'static str, max: usize) -> Result<usize, CodecError> {
        let count = self.u32(what)? as usize;
        if count > max {
            return Err(CodecError::TooMany { what, count });
        }
        Ok(count)
    }

    /// The bytes not read (what a `_prefix` decoder hands back).
    fn rest(mut self) -> &'a [u8] {
        self.0.rest()
    }

    fn finish(self) -> Result<(), CodecError> {
        self.0.finish().map_err(field_error("the end"))
    }
}

fn decode_payment(reader: &mut Reader<'_>) -> Result<Payment, CodecError> {
    let chain_id = ChainId(reader.u64("chain id")?);
    let epoch = Epoch(reader.u64("epoch")?);
    let inputs = (0..reader.count("inputs", PAYMENT_INPUTS_MAX)?)
        .map(|_| {
            Ok(Input {
                id: OutputId(reader.hash("input id")?),
                output: reader.output()?,
            })
        })
        .collect::<Result<_, CodecError>>()?;
    let outputs = (0..reader.count("outputs", PAYMENT_OUTPUTS_MAX)?)
        .map(|_| reader.output())
        .collect::<Result<_, CodecError>>()?;
    Ok(Payment {
        chain_id,
        epoch,
        inputs,
        outputs,
    })
}

fn encode_signatures(signatures: &[VoteSignature], bytes: &mut Vec<u8>) {
    bytes.extend_from_slice(&(signatures.len() as u32).to_be_bytes());
    for signature in signatures {
        match signature {
            VoteSignature::Naive(signature) => {
                bytes.push(0);
                bytes.extend_from_slice(signature.as_bytes());
            }
            VoteSignature::Merkle { batch, proof } => {
                bytes.push(1);
                bytes.extend_from_slice(&batch.leaf_count.to_be_bytes());
                bytes.extend_from_slice(batch.signature.as_bytes());
                bytes.extend_from_slice(&proof.leaf_index.to_be_bytes());
                bytes.push(proof.siblings.len() as u8);
                for sibling in &proof.siblings {
                    bytes.extend_from_slice(sibling.as_bytes());
                }
            }
            VoteSignature::Bls(signature) => {
                bytes.push(2);
                bytes.extend_from_slice(signature);
            }
        }
    }
}

fn decode_signatures(reader: &mut Reader<'_>) -> Result<Vec<VoteSignature>, CodecError> {
    (0..reader.count("vote signatures", PAYMENT_OUTPUTS_MAX)?)
        .map(|_| match reader.u8("signature tag")? {
            0 => Ok(VoteSignature::Naive(reader.signature()?)),
            1 => {
                let leaf_count = reader.u32("leaf count")?;
                let signature = reader.signature()?;
                let leaf_index = reader.u32("leaf index")?;
                let siblings = usize::from(reader.u8("sibling count")?);
                if siblings > MERKLE_SIBLINGS_MAX {
                    return Err(CodecError::TooMany {
                        what: "siblings",
                        count: siblings,
                    });
                }
                let siblings = (0..siblings)
                    .map(|_| reader.hash("sibling"))
                    .collect::<Result<_, _>>()?;
                Ok(VoteSignature::Merkle {
                    batch: MerkleBatchSignature {
                        leaf_count,
                        signature,
                    },
                    proof: MerkleProof {
                        leaf_index,
                        siblings,
                    },
                })
            }
            2 => Ok(VoteSignature::Bls(reader.array("BLS signature")?)),
            tag => Err(CodecError::UnknownTag {
                what: "vote signature",
                tag,
            }),
        })
        .collect()
}

/// Canonical bytes of one effect.
pub fn encode_effect(effect: &Effect) -> Vec<u8> {
    let mut bytes = Vec::new();
    match effect {
        Effect::RecordPayment { signed, signatures } => {
            bytes.push(0);
            bytes.extend_from_slice(&signed.payment.encode());
            bytes.extend_from_slice(signed.signature.as_bytes());
            match signatures {
                None => bytes.push(0),
                Some(signatures) => {
                    bytes.push(1);
                    encode_signatures(signatures, &mut bytes);
                }
            }
        }
        Effect::RecordVotes {
            payment,
            signatures,
        } => {
            bytes.push(1);
            bytes.extend_from_slice(payment.0.as_bytes());
            encode_signatures(signatures, &mut bytes);
        }
        Effect::AdmitRoot { id, output } => {
            bytes.push(2);
            bytes.extend_from_slice(id.0.as_bytes());
            bytes.extend_from_slice(&output.asset.0.to_be_bytes());
            bytes.extend_from_slice(&output.amount.to_be_bytes());
            bytes.extend_from_slice(output.owner.as_bytes());
        }
    }
    bytes
}

/// Decodes [`encode_effect`]'s bytes, refusing trailing bytes.
pub fn decode_effect(bytes: &[u8]) -> Result<Effect, CodecError> {
    let mut reader = Reader::new(bytes);
    let effect = match reader.u8("effect tag")? {
        0 => {
            let payment = decode_payment(&mut reader)?;
            let signature = reader.signature()?;
            let signatures = match reader.u8("votes flag")? {
                0 => None,
                1 => Some(decode_signatures(&mut reader)?),
                tag => {
                    return Err(CodecError::UnknownTag {
                        what: "votes flag",
                        tag,
                    })
                }
            };
            Effect::RecordPayment {
                signed: SignedPayment { payment, signature },
                signatures,
            }
        }
        1 => Effect::RecordVotes {
            payment: PaymentId(reader.hash("payment id")?),
            signatures: decode_signatures(&mut reader)?,
        },
        2 => Effect::AdmitRoot {
            id: OutputId(reader.hash("output id")?),
            output: reader.output()?,
        },
        tag => {
            return Err(CodecError::UnknownTag {
                what: "effect",
                tag,
            })
        }
    };
    reader.finish()?;
    Ok(effect)
}

// ---------------------------------------------------------------------------------------------
// The wire values of the process layer (`walras-payments-net`): requests, votes, conflicts and
// certificates, in the same canonical style. Every decoder bounds every count before allocating,
// so a frame of outside bytes costs at most its own length.

/// Most votes one certificate may carry on the wire (a committee of at most this many members).
pub const CERTIFICATE_VOTES_MAX: usize = 1024;

fn encode_output(output: &Output, bytes: &mut Vec<u8>) {
    bytes.extend_from_slice(&output.asset.0.to_be_bytes());
    bytes.extend_from_slice(&output.amount.to_be_bytes());
    bytes.extend_from_slice(output.owner.as_bytes());
}

/// Appends the canonical bytes of a signed payment (payment, then the owner's signature).
pub fn encode_signed_payment(signed: &SignedPayment, bytes: &mut Vec<u8>) {
    bytes.extend_from_slice(&signed.payment.encode());
    bytes.extend_from_slice(signed.signature.as_bytes());
}

fn decode_signed_payment_from(reader: &mut Reader<'_>) -> Result<SignedPayment, CodecError> {
    let payment = decode_payment(reader)?;
    let signature = reader.signature()?;
    Ok(SignedPayment { payment, signature })
}

/// Appends the canonical bytes of a certificate.
pub fn encode_certificate(certificate: &Certificate, bytes: &mut Vec<u8>) {
    bytes.extend_from_slice(&certificate.chain_id.0.to_be_bytes());
    bytes.extend_from_slice(&certificate.epoch.0.to_be_bytes());
    bytes.extend_from_slice(certificate.id.0.as_bytes());
    encode_output(&certificate.output, bytes);
    bytes.extend_from_slice(&(certificate.votes.len() as u32).to_be_bytes());
    for vote in &certificate.votes {
        bytes.extend_from_slice(&vote.validator.to_be_bytes());
        encode_signatures(std::slice::from_ref(&vote.signature), bytes);
    }
}

fn decode_certificate_from(reader: &mut Reader<'_>) -> Result<Certificate, CodecError> {
    let chain_id = ChainId(reader.u64("chain id")?);
    let epoch = Epoch(reader.u64("epoch")?);
    let id = OutputId(reader.hash("output id")?);
    let output = reader.output()?;
    let votes = (0..reader.count("certificate votes", CERTIFICATE_VOTES_MAX)?)
        .map(|_| {
            let validator = reader.u16("validator index")?;
            let mut signatures = decode_signatures(reader)?;
            if signatures.len() != 1 {
                return Err(CodecError::Invalid {
                    what: "a vote (one signature each)",
                });
            }
            Ok(Vote {
                validator,
                signature: signatures.remove(0),
            })
        })
        .collect::<Result<_, CodecError>>()?;
    Ok(Certificate {
        chain_id,
        epoch,
        id,
        output,
        votes,
    })
}

/// Canonical bytes of one certificate (what a payee stores and a wallet downloads).
pub fn certificate_bytes(certificate: &Certificate) -> Vec<u8> {
    let mut bytes = Vec::new();
    encode_certificate(certificate, &mut bytes);
    bytes
}

/// Decodes [`certificate_bytes`], refusing trailing bytes.
pub fn decode_certificate(bytes: &[u8]) -> Result<Certificate, CodecError> {
    let mut reader = Reader::new(bytes);
    let certificate = decode_certificate_from(&mut reader)?;
    reader.finish()?;
    Ok(certificate)
}

/// Appends the canonical bytes of a payment request (signed payment, input certificates).
pub fn encode_request(request: &PaymentRequest, bytes: &mut Vec<u8>) {
    encode_signed_payment(&request.signed, bytes);
    bytes.extend_from_slice(&(request.certificates.len() as u32).to_be_bytes());
    for certificate in &request.certificates {
        encode_certificate(certificate, bytes);
    }
}

/// Canonical bytes of one payment request.
pub fn request_bytes(request: &PaymentRequest) -> Vec<u8> {
    let mut bytes = Vec::new();
    encode_request(request, &mut bytes);
    bytes
}

/// Decodes [`request_bytes`], refusing trailing bytes.
pub fn decode_request(bytes: &[u8]) -> Result<PaymentRequest, CodecError> {
    let mut reader = Reader::new(bytes);
    let request = decode_request_from(&mut reader)?;
    reader.finish()?;
    Ok(request)
}

/// Decodes one payment request from the front of `bytes`; returns it and the bytes left.
pub fn decode_request_prefix(bytes: &[u8]) -> Result<(PaymentRequest, &[u8]), CodecError> {
    let mut reader = Reader::new(bytes);
    let request = decode_request_from(&mut reader)?;
    Ok((request, reader.rest()))
}

fn decode_request_from(reader: &mut Reader<'_>) -> Result<PaymentRequest, CodecError> {
    let signed = decode_signed_payment_from(reader)?;
    let certificates = (0..reader.count("input certificates", PAYMENT_INPUTS_MAX)?)
        .map(|_| decode_certificate_from(reader))
        .collect::<Result<_, _>>()?;
    Ok(PaymentRequest {
        signed,
        certificates,
    })
}

/// Appends the canonical bytes of one validator's votes on a payment.
pub fn encode_votes(votes: &PaymentVotes, bytes: &mut Vec<u8>) {
    bytes.extend_from_slice(&votes.validator.to_be_bytes());
    bytes.extend_from_slice(votes.payment.0.as_bytes());
    encode_signatures(&votes.signatures, bytes);
}

/// Decodes one [`encode_votes`] value from the front of `bytes`; returns it and the bytes left.
pub fn decode_votes_prefix(bytes: &[u8]) -> Result<(PaymentVotes, &[u8]), CodecError> {
    let mut reader = Reader::new(bytes);
    let validator = reader.u16("validator index")?;
    let payment = PaymentId(reader.hash("payment id")?);
    let signatures = decode_signatures(&mut reader)?;
    Ok((
        PaymentVotes {
            validator,
            payment,
            signatures,
        },
        reader.rest(),
    ))
}

/// Appends the canonical bytes of a conflict reply.
pub fn encode_conflict(conflict: &Conflict, bytes: &mut Vec<u8>) {
    bytes.extend_from_slice(&conflict.validator.to_be_bytes());
    bytes.extend_from_slice(conflict.input.0.as_bytes());
    encode_signed_payment(&conflict.holder, bytes);
}

/// Decodes one [`encode_conflict`] value from the front of `bytes`; returns it and the rest.
pub fn decode_conflict_prefix(bytes: &[u8]) -> Result<(Conflict, &[u8]), CodecError> {
    let mut reader = Reader::new(bytes);
    let validator = reader.u16("validator index")?;
    let input = OutputId(reader.hash("input id")?);
    let holder = decode_signed_payment_from(&mut reader)?;
    Ok((
        Conflict {
            validator,
            input,
            holder,
        },
        reader.rest(),
    ))
}

/// Decodes one signed payment from the front of `bytes`; returns it and the bytes left.
pub fn decode_signed_payment_prefix(bytes: &[u8]) -> Result<(SignedPayment, &[u8]), CodecError> {
    let mut reader = Reader::new(bytes);
    let signed = decode_signed_payment_from(&mut reader)?;
    Ok((signed, reader.rest()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use walras_crypto::Keypair;

    fn certificate() -> Certificate {
        Certificate {
            chain_id: ChainId(7),
            epoch: Epoch(3),
            id: OutputId(Hash([9; 32])),
            output: Output {
                asset: AssetId(2),
                amount: 1_000,
                owner: Keypair::from_seed([1; 32]).public_key(),
            },
            votes: vec![Vote {
                validator: 5,
                signature: VoteSignature::Naive(Keypair::from_seed([2; 32]).sign(b"vote")),
            }],
        }
    }

    /// The certificate's bytes, written out field by field (big-endian, fixed width): pins the
    /// layout that wallets store and validators exchange, whatever reads or writes it.
    #[test]
    fn a_certificate_encodes_to_its_layout_and_decodes_back() {
        let certificate = certificate();
        let mut expected = Vec::new();
        expected.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 7]); // chain id
        expected.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 3]); // epoch
        expected.extend_from_slice(&[9; 32]); // output id
        expected.extend_from_slice(&[0, 2]); // asset
        expected.extend_from_slice(&[0; 14]); // amount (u128) ...
        expected.extend_from_slice(&[0x03, 0xe8]); // ... = 1,000
        expected.extend_from_slice(certificate.output.owner.as_bytes());
        expected.extend_from_slice(&[0, 0, 0, 1]); // votes
        expected.extend_from_slice(&[0, 5]); // validator index
        expected.extend_from_slice(&[0, 0, 0, 1]); // signatures of the vote
        expected.push(0); // naive
        let VoteSignature::Naive(signature) = &certificate.votes[0].signature else {
            unreachable!("built naive above")
        };
        expected.extend_from_slice(signature.as_bytes());
        assert_eq!(certificate_bytes(&certificate), expected);
        assert_eq!(decode_certificate(&expected), Ok(certificate));
    }

    /// A cut anywhere is refused naming the field it cut, and a byte too many is trailing.
    #[test]
    fn a_cut_certificate_names_the_field_it_ends_in() {
        let bytes = certificate_bytes(&certificate());
        let cut_in = |at: usize| decode_certificate(&bytes[..at]).unwrap_err();
        assert_eq!(cut_in(0), CodecError::Truncated { what: "chain id" });
        assert_eq!(cut_in(10), CodecError::Truncated { what: "epoch" });
        assert_eq!(cut_in(16 + 31), CodecError::Truncated { what: "output id" });
        assert_eq!(cut_in(48 + 1), CodecError::Truncated { what: "asset" });
        assert_eq!(cut_in(50 + 15), CodecError::Truncated { what: "amount" });
        assert_eq!(cut_in(66 + 5), CodecError::Truncated { what: "owner" });
        assert_eq!(
            cut_in(98 + 2),
            CodecError::Truncated {
                what: "certificate votes"
            }
        );
        assert_eq!(bytes.len(), 98 + 4 + 2 + 4 + 1 + 64);
        assert_eq!(
            cut_in(bytes.len() - 1),
            CodecError::Truncated { what: "signature" }
        );
        for at in 0..bytes.len() {
            let error = cut_in(at);
            assert!(
                error.to_string().contains("inside "),
                "cut at {at}: {error}"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(
            decode_certificate(&longer),
            Err(CodecError::Trailing { extra: 1 })
        );
    }

    /// A BLS vote is tag 2 and its 96 compressed bytes; cut inside them it names the field.
    #[test]
    fn a_bls_vote_encodes_as_tag_two_and_its_ninety_six_bytes() {
        let mut certificate = certificate();
        let signature = [0xab; crate::model::BLS_SIGNATURE_BYTES];
        certificate.votes[0].signature = VoteSignature::Bls(signature);
        let bytes = certificate_bytes(&certificate);
        assert_eq!(bytes.len(), 98 + 4 + 2 + 4 + 1 + 96);
        assert_eq!(bytes[98 + 4 + 2 + 4], 2);
        assert_eq!(&bytes[bytes.len() - 96..], &signature[..]);
        assert_eq!(decode_certificate(&bytes), Ok(certificate));
        assert_eq!(
            decode_certificate(&bytes[..bytes.len() - 1]),
            Err(CodecError::Truncated {
                what: "BLS signature"
            })
        );
    }

    /// `Certificate::wire_bytes` is the encoded length for every signature scheme. Before, it
    /// left out each vote's signature count and tag (5 bytes a vote), so `sign_costs` printed
    /// 564 bytes for a naive certificate at q = 7 whose encoding is 599.
    #[test]
    fn a_certificates_wire_bytes_is_its_encoded_length_under_every_scheme() {
        let keypair = Keypair::from_seed([2; 32]);
        let messages: Vec<Hash> = (0..5u8).map(|i| walras_crypto::hash(&[i])).collect();
        let (batch, proofs) = walras_crypto::sign_merkle_batch(&keypair, &messages).expect("batch");
        for signature in [
            VoteSignature::Naive(keypair.sign(b"vote")),
            VoteSignature::Merkle {
                batch,
                proof: proofs[3].clone(),
            },
            VoteSignature::Bls([7; crate::model::BLS_SIGNATURE_BYTES]),
        ] {
            let mut certificate = certificate();
            certificate.votes = (0..7)
                .map(|validator| Vote {
                    validator,
                    signature: signature.clone(),
                })
                .collect();
            assert_eq!(
                certificate.wire_bytes(),
                certificate_bytes(&certificate).len(),
                "{signature:?}"
            );
        }
    }
}
