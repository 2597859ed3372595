//! The committee file → the exchange genesis's payments section (`walras payments
//! exchange-genesis`): keys carried in committee order, every refusal typed.

use walras_crypto::Keypair;
use walras_payments_net::{
    key_hex, member_with_bls, CommitteeFile, ExchangeGenesisError, MemberFile,
};
use walras_types::{AccountId, AssetId, Genesis, GenesisAccount};

fn seed(index: usize) -> [u8; 32] {
    [index as u8 + 1; 32]
}

fn committee_file(validators: usize) -> CommitteeFile {
    CommitteeFile {
        chain_id: 7,
        epoch: 3,
        shards: 2,
        scheme: "merkle".into(),
        batch_leaves_max: 16,
        validators: (0..validators)
            .map(|index| member_with_bls(&seed(index), format!("127.0.0.1:{}", 9000 + index)))
            .collect(),
    }
}

#[test]
fn the_section_carries_every_key_in_committee_order() {
    let file = committee_file(4);
    let section = file
        .to_config()
        .expect("config")
        .exchange_genesis()
        .expect("section");
    assert_eq!((section.chain_id, section.epoch, section.shards), (7, 3, 2));
    assert_eq!(section.validators.len(), 4);
    for (index, (validator, member)) in section.validators.iter().zip(&file.validators).enumerate()
    {
        assert_eq!(
            hex::encode(validator.key),
            key_hex(&Keypair::from_seed(seed(index)).public_key())
        );
        assert_eq!(Some(hex::encode(validator.bls_key)), member.bls_key);
        assert_eq!(Some(hex::encode(validator.bls_proof)), member.bls_proof);
    }
    // The section makes a genesis that survives its own encoding and validation.
    let genesis = Genesis {
        asset_info: Vec::new(),
        assets: 2,
        accounts: vec![GenesisAccount {
            id: AccountId(1),
            public_key: *Keypair::from_seed([9; 32]).public_key().as_bytes(),
            balances: vec![(AssetId(0), 5)],
        }],
        payments: Some(section),
    };
    assert_eq!(Genesis::decode(&genesis.encode()), Ok(genesis));
}

/// Scheme bls: the committee a verifier builds lists every member's BLS key and proof in
/// committee order, each the one derived from that member's Ed25519 seed.
#[test]
fn a_bls_committee_lists_each_members_derived_bls_key() {
    let mut file = committee_file(4);
    file.scheme = "bls".into();
    let config = file.to_config().expect("valid");
    assert_eq!(config.scheme, walras_payments::Scheme::Bls);
    for (index, member) in config.committee.bls.iter().enumerate() {
        let signer =
            walras_payments::VoteSigner::new(walras_crypto::Keypair::from_seed(seed(index)));
        assert_eq!(*member, signer.bls_member());
        assert_eq!(config.committee.validators[index], signer.public_key());
    }
    assert_eq!(config.committee.bls.len(), 4);
}

#[test]
fn a_member_without_a_bls_key_is_refused() {
    let mut file = committee_file(4);
    file.validators[2].bls_proof = None;
    assert_eq!(
        file.to_config().expect("config").exchange_genesis(),
        Err(ExchangeGenesisError::MissingBlsKeys)
    );
}

#[test]
fn a_proof_of_another_key_is_refused_naming_the_validator() {
    let mut file = committee_file(4);
    // Validator 1 presents validator 2's proof: a rogue-key setup the exchange would refuse.
    file.validators[1].bls_proof = file.validators[2].bls_proof.clone();
    let error = file
        .to_config()
        .expect("config")
        .exchange_genesis()
        .expect_err("refused");
    assert_eq!(
        error,
        ExchangeGenesisError::Bls(walras_payments::bls::BlsError::BadProofOfPossession {
            validator: 1
        })
    );
    assert!(error.to_string().contains("validator 1"), "{error}");
}

#[test]
fn more_validators_than_the_signer_bitmap_are_refused() {
    let mut file = committee_file(1);
    let member: MemberFile = file.validators[0].clone();
    file.validators = vec![member; 129];
    assert_eq!(
        file.to_config().expect("config").exchange_genesis(),
        Err(ExchangeGenesisError::TooManyValidators { validators: 129 })
    );
}

/// Each way a committee or genesis file can be wrong is its own `FieldError` variant, so a
/// caller can tell them apart and the message names the field (before: one `String`).
#[test]
fn a_wrong_committee_or_genesis_field_is_a_typed_error_naming_it() {
    use walras_payments_net::{
        parse_scheme, parse_seed, FieldError, GenesisFile, GenesisOutputFile,
    };
    let mut file = committee_file(4);
    file.shards = 0;
    assert_eq!(file.to_config().err(), Some(FieldError::NoShards));
    let mut file = committee_file(4);
    file.validators.clear();
    assert_eq!(file.to_config().err(), Some(FieldError::ValidatorCount(0)));
    let mut file = committee_file(4);
    file.scheme = "rsa".into();
    assert_eq!(
        file.to_config().err(),
        Some(FieldError::UnknownScheme("rsa".into()))
    );
    let mut file = committee_file(4);
    file.scheme = "bls".into();
    file.validators[2].bls_proof = None;
    assert_eq!(
        file.to_config().err(),
        Some(FieldError::BlsSchemeWithoutKeys)
    );
    let mut file = committee_file(4);
    file.validators[2].key = "zz".into();
    assert!(matches!(
        file.to_config().err(),
        Some(FieldError::KeyHex { text, .. }) if text == "zz"
    ));
    let mut file = committee_file(4);
    file.validators[1].bls_proof = Some("00".into());
    assert_eq!(
        file.to_config().err(),
        Some(FieldError::FixedHex {
            text: "00".into(),
            bytes: 96
        })
    );
    assert_eq!(
        parse_scheme("merkle", 0).err(),
        Some(FieldError::NoBatchLeaves)
    );
    assert_eq!(
        parse_seed("abcd").err(),
        Some(FieldError::SeedLength { bytes: 2 })
    );
    let owner = key_hex(&Keypair::from_seed(seed(0)).public_key());
    let genesis = |amount: &str, owner: &str| GenesisFile {
        outputs: vec![GenesisOutputFile {
            asset: 0,
            amount: amount.into(),
            owner: owner.into(),
        }],
    };
    let chain = walras_payments::ChainId(7);
    assert!(genesis("5", &owner).outputs(chain).is_ok());
    assert_eq!(
        genesis("0", &owner).outputs(chain).err(),
        Some(FieldError::GenesisZeroAmount { index: 0 })
    );
    assert_eq!(
        genesis("-1", &owner).outputs(chain).err(),
        Some(FieldError::GenesisAmount {
            index: 0,
            amount: "-1".into()
        })
    );
    let error = genesis("5", "not hex").outputs(chain).err().unwrap();
    assert!(matches!(error, FieldError::GenesisOwner { index: 0, .. }));
    assert!(error.to_string().contains("genesis output 0"), "{error}");
}
