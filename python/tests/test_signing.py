"""Signing from Python makes the canonical bytes the CLI signs: the test vectors of
docs/formats.md (read from the document itself), hashes included."""

import hashlib
import re

import pytest

import walras
from conftest import REPO

SEED = bytes(range(32))


def vectors() -> dict:
    text = (REPO / "docs" / "formats.md").read_text()
    found = {}
    for block in re.findall(r"```vector\n(.*?)```", text, re.S):
        fields = dict(line.split(": ", 1) for line in block.strip().splitlines())
        found[fields["name"]] = fields
    assert len(found) == 4, found.keys()
    return found


def test_signed_transactions_equal_the_documented_vectors() -> None:
    signer = walras.Signer.from_seed(SEED)
    made = {
        "payment": signer.payment(7, 1, 9, 2, 1000),
        "create_offer": signer.create_offer(7, 2, 0, 1, 500, "0.5"),
        "cancel_offer": signer.cancel_offer(7, 3, 0, 1, "0.5", 2),
        "create_offer_rounded": signer.create_offer(7, 4, 0, 1, 1, "1.1"),
    }
    for name, vector in vectors().items():
        assert signer.public_key == vector["public_key"]
        assert made[name].hex() == vector["signed"], name
        assert walras.hash_transaction(made[name]) == vector["hash"], name
        person = b"walras/tx"
        assert (
            hashlib.blake2b(made[name], digest_size=32, person=person).hexdigest() == vector["hash"]
        )


def test_invalid_transactions_are_refused_before_sending() -> None:
    signer = walras.Signer.from_seed(SEED)
    with pytest.raises(ValueError, match="amount must be positive"):
        signer.payment(1, 1, 2, 0, 0)
    with pytest.raises(ValueError, match="min_price"):
        signer.create_offer(1, 1, 0, 1, 10, "-1")
    with pytest.raises(ValueError, match="32 bytes"):
        walras.Signer.from_seed(b"short")
    with pytest.raises(ValueError, match="not a signed transaction"):
        walras.hash_transaction(b"\x01\x02")


def test_the_json_form_names_the_operation() -> None:
    signed = walras.Signer.from_seed(SEED).payment(7, 1, 9, 2, 1000)
    import json

    form = json.loads(walras.transaction_json(signed))
    assert form["source"] == 7 and form["operation"]["type"] == "payment"
