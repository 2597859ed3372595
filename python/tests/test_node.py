"""walras.Client against a real `walras node --dev` started by the test: payments (one and a
batch), offers, cancels, reads, explain, the event stream, and every failure as ApiError
carrying the API's code."""

import asyncio

import pytest

import walras
from conftest import DEV_ASSETS, Node

PAYER = 1
PAYEE = 2


def balance(client: walras.Client, account: int, asset: int) -> int:
    for entry in client.get_account(account)["balances"]:
        if entry["asset"] == asset:
            return int(entry["amount"])
    return 0


def held_asset(client: walras.Client, account: int) -> int:
    """An asset the account holds plenty of."""
    balances = client.get_account(account)["balances"]
    return max(balances, key=lambda entry: int(entry["amount"]))["asset"]


def test_a_payment_signed_in_python_moves_the_balance(node: Node) -> None:
    client = walras.Client(node.url, key="dev", account=PAYER)
    asset = held_asset(client, PAYER)
    before = balance(client, PAYEE, asset)
    submitted = client.pay(PAYEE, asset, 10, wait=True)
    assert submitted["status"] == "accepted" and submitted["height"] >= 1
    assert balance(client, PAYEE, asset) == before + 10
    assert client.transaction(submitted.hash)["status"] == "accepted"


def test_a_batch_of_payments_takes_consecutive_sequences(node: Node) -> None:
    client = walras.Client(node.url, key="dev", account=3)
    asset = held_asset(client, 3)
    before = balance(client, PAYEE, asset)
    results = client.pay_batch([(PAYEE, asset, 5), (PAYEE, asset, 6), (PAYEE, asset, 7)])
    sequences = [result["sequence"] for result in results]
    assert sequences == list(range(sequences[0], sequences[0] + 3))
    for result in results:
        client.wait(result["hash"])
    assert balance(client, PAYEE, asset) == before + 18


def test_an_offer_is_listed_explained_and_cancelled(node: Node) -> None:
    client = walras.Client(node.url, key="dev", account=4)
    sell = held_asset(client, 4)
    buy = (sell + 1) % DEV_ASSETS
    # A limit far above any rate: the offer rests in the book.
    offer = client.submit_offer(sell, buy, 1000, "1000000", wait=True)
    open_ids = [entry["offer_id"] for entry in client.open_offers()["offers"]]
    assert offer["offer_id"] in open_ids
    book = client.book(sell, buy)
    assert {"min_price": "1000000", "amount": 1000, "offers": 1} in book["levels"]
    explained = client.explain(offer["offer_id"])
    assert explained["offer_id"] == offer["offer_id"]
    assert explained["reason_code"] == "out_of_the_money"
    client.cancel_offer(offer["offer_id"], wait=True)
    assert offer["offer_id"] not in [entry["offer_id"] for entry in client.open_offers()["offers"]]


def test_blocks_prices_and_fills_are_read(node: Node) -> None:
    client = walras.Client(node.url)
    status = client.status()
    height = status["height"]
    assert height >= 1
    block = client.block(height)
    assert block["height"] == height
    fills = client.fills(height, account=PAYER)
    assert fills["height"] == height and isinstance(fills["fills"], list)
    prices = client.prices()
    assert "reference" in prices and "traded" in prices


def test_events_arrive_as_python_objects(node: Node) -> None:
    client = walras.Client(node.url, key="dev", account=5)
    asset = held_asset(client, 5)
    events = client.events(timeout_s=10)
    client.pay(PAYEE, asset, 1)
    event = next(events)
    assert isinstance(event, dict) and event["height"] >= 1
    events.close()


def test_the_async_client_pays_and_streams(node: Node) -> None:
    async def scenario() -> tuple:
        client = walras.AsyncClient(node.url, key="dev", account=6)
        account = await client.get_account()
        asset = max(account["balances"], key=lambda entry: int(entry["amount"]))["asset"]
        events = await client.events(timeout_s=10)
        paid = await client.pay(PAYEE, asset, 3, wait=True)
        async for event in events:
            events.close()
            return paid, event
        return paid, None

    paid, event = asyncio.run(scenario())
    assert paid["status"] == "accepted"
    assert event is not None and event["height"] >= 1


def test_api_refusals_raise_api_error_with_the_code(node: Node) -> None:
    client = walras.Client(node.url, key="dev", account=7)
    with pytest.raises(walras.ApiError) as missing:
        client.get_account(10**9)
    assert missing.value.status == 404
    assert missing.value.code
    asset = held_asset(client, 7)
    paid = client.pay(PAYEE, asset, 1, wait=True)
    with pytest.raises(walras.ApiError) as replayed:
        client.pay(PAYEE, asset, 1, sequence=paid["sequence"])
    assert replayed.value.code == "replayed"
    assert replayed.value.status is not None and replayed.value.status >= 400
    # After a refusal the next submission asks the node for the sequence again.
    assert client.pay(PAYEE, asset, 1, wait=True)["status"] == "accepted"


def test_an_overdraft_raises_with_the_nodes_code(node: Node) -> None:
    """The node refuses an overdraft at admission (``422 insufficient_balance``, saying what is
    available); before it did, the transaction was admitted and dropped in its block."""
    client = walras.Client(node.url, key="dev", account=8)
    asset = held_asset(client, 8)
    with pytest.raises(walras.ApiError) as refused:
        client.pay(PAYEE, asset, balance(client, 8, asset) + 1, wait=True)
    assert refused.value.code == "insufficient_balance"
    assert refused.value.status == 422


def test_an_unreachable_node_is_an_api_error_and_keys_are_checked(node: Node) -> None:
    with pytest.raises(walras.ApiError) as unreachable:
        walras.Client("http://127.0.0.1:9").status()
    assert unreachable.value.code == "unreachable" and unreachable.value.status is None
    stranger = walras.Client(node.url, key=bytes(32), account=PAYER)
    with pytest.raises(ValueError, match="does not control account"):
        stranger.pay(PAYEE, 0, 1)
    with pytest.raises(ValueError, match="no key"):
        walras.Client(node.url, account=PAYER).pay(PAYEE, 0, 1)


def test_crossing_offers_trade_and_their_fills_are_read(node: Node) -> None:
    seller = walras.Client(node.url, key="dev", account=9)
    buyer = walras.Client(node.url, key="dev", account=10)
    a, b = 0, 1
    assert balance(seller, 9, a) > 10_000 and balance(buyer, 10, b) > 10_000
    first = seller.submit_offer(a, b, 10_000, "0.000001")
    second = buyer.submit_offer(b, a, 10_000, "0.000001")
    heights = [seller.wait(first.hash)["height"], buyer.wait(second.hash)["height"]]
    traded_at = max(heights)
    fills = seller.fills(traded_at, account=9)["fills"]
    assert any(fill["offer_id"] == first["offer_id"] for fill in fills), fills
    assert seller.explain(first["offer_id"])["sold"] != "0"
