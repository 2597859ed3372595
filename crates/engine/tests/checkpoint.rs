//! Checkpoints as a restart uses them: what loading one costs and what it must not change.

use walras_crypto::testing::{sign_with_torsion_nonce, with_s_plus_group_order};
use walras_crypto::Keypair;
use walras_engine::ExchangeState;
use walras_types::genesis::{Genesis, GenesisAccount};
use walras_types::{AccountId, AssetId, Operation, SignedTransaction, Transaction};

const ASSETS: u16 = 3;
/// The identity point's encoding: a weak key, refused by `PublicKey::from_bytes`.
const WEAK_KEY: [u8; 32] = {
    let mut key = [0; 32];
    key[0] = 1;
    key
};
/// The account whose stored key is [`WEAK_KEY`].
const WEAK_ACCOUNT: u64 = 4;
/// Accounts in [`genesis`]; the last one never signs in these tests.
const ACCOUNTS: u64 = 6;

fn keypair(account: u64) -> Keypair {
    let mut seed = [9u8; 32];
    seed[..8].copy_from_slice(&account.to_be_bytes());
    Keypair::from_seed(seed)
}

fn genesis() -> Genesis {
    Genesis {
        asset_info: Vec::new(),
        payments: None,
        assets: ASSETS,
        accounts: (0..ACCOUNTS)
            .map(|id| GenesisAccount {
                id: AccountId(id),
                public_key: if id == WEAK_ACCOUNT {
                    WEAK_KEY
                } else {
                    *keypair(id).public_key().as_bytes()
                },
                balances: vec![(AssetId(0), 1_000), (AssetId(1), 1_000)],
            })
            .collect(),
    }
}

fn payment(source: u64) -> Transaction {
    Transaction {
        source: AccountId(source),
        sequence: 1,
        operation: Operation::Payment {
            to: AccountId(0),
            asset: AssetId(0),
            amount: 1,
        },
    }
}

/// One transaction per kind of verdict: a good signature, another key's, a weak stored key,
/// a torsioned `R` (accepted by ZIP-215) and `s + ℓ` (refused), each from its own account.
fn signed_by_kind() -> Vec<SignedTransaction> {
    let good = payment(0);
    let other_key = payment(1);
    let weak = payment(WEAK_ACCOUNT);
    let torsion = payment(2);
    let malleated = payment(3);
    let signature = |transaction: &Transaction, signer: u64| {
        *keypair(signer).sign(&transaction.encode()).as_bytes()
    };
    vec![
        SignedTransaction {
            signature: signature(&good, 0),
            transaction: good,
        },
        SignedTransaction {
            signature: signature(&other_key, 2),
            transaction: other_key,
        },
        SignedTransaction {
            signature: signature(&weak, WEAK_ACCOUNT),
            transaction: weak,
        },
        SignedTransaction {
            signature: *sign_with_torsion_nonce(&keypair(2), &torsion.encode(), 4).as_bytes(),
            transaction: torsion,
        },
        SignedTransaction {
            signature: *with_s_plus_group_order(&keypair(3).sign(&malleated.encode())).as_bytes(),
            transaction: malleated,
        },
    ]
}

/// Trigger: loading a checkpoint decoded every account's public key (about 10 µs each: ~100 s
/// of CPU for a restart at 10M accounts, issue 32). Keys are now decoded on an account's first
/// signature check; the verdicts must be those of a state that never went through a
/// checkpoint, for good, wrong, weak-key, torsioned and malleated signatures alike.
#[test]
fn a_loaded_account_decodes_its_key_on_first_check_with_the_genesis_verdicts() {
    let genesis_state = ExchangeState::from_genesis(&genesis(), 2).expect("genesis");
    let loaded =
        ExchangeState::decode_checkpoint(&genesis_state.encode_checkpoint(), 2).expect("loads");
    let decoded = |state: &ExchangeState, id: u64| {
        state
            .account(AccountId(id))
            .expect("account")
            .key_is_decoded()
    };
    assert!(
        (0..ACCOUNTS).all(|id| !decoded(&loaded, id)),
        "no key is decoded at load"
    );

    let transactions = signed_by_kind();
    let verdicts = loaded.verify_signatures(&transactions, 2);
    assert_eq!(verdicts, vec![true, false, false, true, false]);
    assert_eq!(verdicts, genesis_state.verify_signatures(&transactions, 2));
    assert_eq!(
        verdicts,
        loaded.verify_signatures(&transactions, 1),
        "and again"
    );
    assert!(
        (0..ACCOUNTS - 1).all(|id| decoded(&loaded, id)),
        "every source's key is decoded once checked"
    );
    assert!(
        !decoded(&loaded, ACCOUNTS - 1),
        "an account that never signed"
    );
}
