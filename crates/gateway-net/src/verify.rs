//! The gateway's check of each trade before it enters the ordering buffer: the transaction
//! decodes, its source account exists at the node's tip, and its signature verifies with that
//! account's key under the one acceptance rule ([`walras_crypto::signature_accepted`], the
//! rule the engine's admission and block filter apply). A trade that fails is refused to its
//! participant with a typed Notice and counted; it is never buffered, so it can take no place in
//! a block (before, the node's block filter dropped it, after it had taken block space).
//!
//! What the gateway cannot check without the state (sequence numbers, balances, the block-wide
//! rules) stays with the node's block filter, whose verdicts reach the participant as drops.
//!
//! Account keys never change once an account exists, so each is read from the node once
//! (`GET /v1/accounts/{id}`) and kept; an account the node does not know is not remembered (it
//! may be created by a later block).

use crate::frame::NoticeCode;
use crate::node_link::NodeLink;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use walras_crypto::{PublicKey, Signature};
use walras_types::SignedTransaction;

/// Keys remembered at most; beyond it the memory starts over (each key is read again once).
const KEYS_MAX: usize = 1 << 20;

/// Why a trade was refused: the Notice's code and its text.
pub type Refusal = (NoticeCode, String);

/// Whether `signed`'s signature is accepted with its source account's key (`None`: the stored
/// key is not a valid Ed25519 key, so nothing verifies), by the engine's rule.
pub fn signature_ok(signed: &SignedTransaction, key: Option<&PublicKey>) -> bool {
    let (Some(key), Ok(signature)) = (key, Signature::from_bytes(&signed.signature)) else {
        return false;
    };
    let message = signed.transaction.encode();
    walras_crypto::signature_accepted(&(message.as_slice(), key, &signature))
}

/// Checks trades against the node's account keys (shared by every connection task).
pub struct TradeChecker {
    node: Arc<NodeLink>,
    keys: Mutex<BTreeMap<u64, Option<PublicKey>>>,
}

impl TradeChecker {
    pub fn new(node: Arc<NodeLink>) -> TradeChecker {
        TradeChecker {
            node,
            keys: Mutex::new(BTreeMap::new()),
        }
    }

    fn remembered(&self, account: u64) -> Option<Option<PublicKey>> {
        self.keys
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(&account)
            .copied()
    }

    fn remember(&self, account: u64, key: Option<PublicKey>) {
        let mut keys = self
            .keys
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if keys.len() >= KEYS_MAX {
            keys.clear();
        }
        keys.insert(account, key);
    }

    /// `Ok(())` if the trade may enter the ordering buffer; otherwise why not.
    pub async fn check(&self, transaction: &[u8]) -> Result<(), Refusal> {
        let signed = SignedTransaction::decode(transaction)
            .map_err(|error| (NoticeCode::Refused, format!("not a transaction: {error}")))?;
        let account = signed.transaction.source.0;
        let key = match self.remembered(account) {
            Some(key) => key,
            None => match self.node.account_key(account).await {
                Ok(Some(key)) => {
                    self.remember(account, key);
                    key
                }
                Ok(None) => {
                    return Err((
                        NoticeCode::UnknownSource,
                        format!(
                            "account {account} does not exist at the node's tip; a new account \
                             can trade once the block creating it is published"
                        ),
                    ))
                }
                Err(error) => {
                    return Err((
                        NoticeCode::Refused,
                        format!(
                            "the gateway could not read account {account}'s key from the node \
                             ({error}); send the trade again"
                        ),
                    ))
                }
            },
        };
        if !signature_ok(&signed, key.as_ref()) {
            return Err((
                NoticeCode::BadSignature,
                format!(
                    "the signature does not verify with account {account}'s key over the \
                     transaction's canonical encoding"
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use walras_types::{AccountId, AssetId, Operation, Transaction};

    fn signed(key: &walras_crypto::Keypair) -> SignedTransaction {
        let transaction = Transaction {
            source: AccountId(3),
            sequence: 1,
            operation: Operation::Payment {
                to: AccountId(4),
                asset: AssetId(0),
                amount: 5,
            },
        };
        let signature = *key.sign(&transaction.encode()).as_bytes();
        SignedTransaction {
            transaction,
            signature,
        }
    }

    #[test]
    fn only_the_source_accounts_signature_over_the_transaction_is_accepted() {
        let owner = walras_crypto::Keypair::from_seed([1; 32]);
        let other = walras_crypto::Keypair::from_seed([2; 32]);
        let good = signed(&owner);
        assert!(signature_ok(&good, Some(&owner.public_key())));
        assert!(!signature_ok(&good, Some(&other.public_key())));
        assert!(!signature_ok(&good, None));
        let mut tampered = good;
        if let Operation::Payment { amount, .. } = &mut tampered.transaction.operation {
            *amount = 6;
        }
        assert!(!signature_ok(&tampered, Some(&owner.public_key())));
        let mut flipped = good;
        flipped.signature[10] ^= 1;
        assert!(!signature_ok(&flipped, Some(&owner.public_key())));
    }
}
