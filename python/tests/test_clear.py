"""walras.clear against `walras clear --json` on the same input: prices to their 12 printed digits, the exact
valuations, trades and per-offer fills, through every input form (CSV path, DataFrame with
exact decimals or floats, dict of numpy arrays, generated offers); and bad input refused with
ValueError naming the column and row."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import walras
from conftest import run_cli

ASSETS = 5


@pytest.fixture(scope="module")
def market(walras_bin: str, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A generated batch, its CSV, and the CLI's JSON and fills for it."""
    folder = tmp_path_factory.mktemp("market")
    offers = folder / "offers.csv"
    fills = folder / "fills.csv"
    offers.write_text(
        run_cli(
            walras_bin,
            [
                "gen",
                "offers",
                "--assets",
                str(ASSETS),
                "--offers",
                "3000",
                "--seed",
                "7",
                "--model",
                "market",
            ],
        )
    )
    cli = json.loads(
        run_cli(
            walras_bin,
            [
                "clear",
                "--offers",
                str(offers),
                "--assets",
                str(ASSETS),
                "--fills",
                str(fills),
                "--json",
            ],
        )
    )
    return {"offers": offers, "cli": cli, "fills": pd.read_csv(fills)}


def _cli_prices(cli: dict) -> np.ndarray:
    """The CLI's prices (12-digit decimal strings) as the package gives them: ``null`` (an
    asset not priced against asset 0) becomes NaN."""
    return np.array([np.nan if p is None else float(p) for p in cli["prices"]], dtype=np.float64)


def assert_same_prices(prices: np.ndarray, cli: dict) -> None:
    """The package's float64 prices are the CLI's decimal strings to their 12 significant
    digits, with NaN exactly where the CLI says ``null``."""
    assert all(p is None or isinstance(p, str) for p in cli["prices"]), cli["prices"]
    np.testing.assert_allclose(prices, _cli_prices(cli), rtol=1e-11, equal_nan=True)


def assert_same_as_cli(result: walras.ClearResult, cli: dict, fills: pd.DataFrame) -> None:
    assert result.prices.dtype == np.float64
    assert_same_prices(result.prices, cli)
    assert result.valuations == cli["valuations"]
    assert all(isinstance(value, int) for value in result.valuations)
    assert result.converged == cli["converged"]
    assert result.iterations == cli["iterations"]
    assert result.unrealized_utility_ratio == cli["unrealized_utility_ratio"]
    assert result.report["burned"] == cli["burned"]
    assert result.report["trades"] == cli["trades"]
    assert result.fills.columns.tolist() == ["offer_id", "sold", "bought"]
    assert result.fills.astype(np.int64).values.tolist() == fills.values.tolist()
    assert result.millis > 0


def test_a_csv_path_clears_as_the_cli_clears_it(market: dict) -> None:
    result = walras.clear(market["offers"], ASSETS)
    assert_same_as_cli(result, market["cli"], market["fills"])
    assert len(result.fills) > 0 and result.converged


def test_a_dataframe_of_exact_decimals_clears_as_the_cli(market: dict) -> None:
    frame = pd.read_csv(market["offers"], dtype={"min_price": str})
    assert_same_as_cli(walras.clear(frame, ASSETS), market["cli"], market["fills"])


def test_a_dict_of_numpy_arrays_clears_as_the_cli(market: dict) -> None:
    frame = pd.read_csv(market["offers"], dtype={"min_price": str})
    columns = {name: frame[name].to_numpy() for name in walras.OFFER_COLUMNS}
    columns["sell"] = columns["sell"].astype(np.uint16)
    columns["amount"] = columns["amount"].astype(np.uint64)
    assert_same_as_cli(walras.clear(columns, ASSETS), market["cli"], market["fills"])


def test_generated_offers_equal_the_cli_generator_and_clear_alike(market: dict) -> None:
    generated = walras.gen_offers(ASSETS, 3000, seed=7, model="market", exact_prices=True)
    from_csv = pd.read_csv(market["offers"], dtype={"min_price": str})
    pd.testing.assert_frame_equal(generated, from_csv, check_dtype=False)
    assert_same_as_cli(walras.clear(generated, ASSETS), market["cli"], market["fills"])
    assert generated.attrs["valuations"].shape == (ASSETS,)


def test_float_limits_clear_as_the_cli_clears_the_csv_pandas_writes(
    walras_bin: str, tmp_path: Path
) -> None:
    frame = walras.gen_offers(4, 2000, seed=3)
    assert frame["min_price"].dtype == np.float64
    path = tmp_path / "floats.csv"
    frame.to_csv(path, index=False)
    cli = json.loads(
        run_cli(walras_bin, ["clear", "--offers", str(path), "--assets", "4", "--json"])
    )
    result = walras.clear(frame, 4)
    assert_same_prices(result.prices, cli)
    assert result.valuations == cli["valuations"]


def test_parameters_reach_clearing_as_the_cli_options_do(market: dict, walras_bin: str) -> None:
    cli = json.loads(
        run_cli(
            walras_bin,
            [
                "clear",
                "--offers",
                str(market["offers"]),
                "--assets",
                str(ASSETS),
                "--epsilon",
                "0.001",
                "--mu",
                "2^-8",
                "--threads",
                "2",
                "--json",
            ],
        )
    )
    result = walras.clear(market["offers"], ASSETS, epsilon=0.001, mu="2^-8", threads=2)
    assert result.report["epsilon"] == cli["epsilon"] == 0.001
    assert result.report["mu"] == cli["mu"]
    assert_same_prices(result.prices, cli)


def small_batch() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "offer_id": [1, 2, 3],
            "account": [7, 8, 9],
            "sell": [0, 1, 0],
            "buy": [1, 0, 1],
            "amount": [100, 50, 10],
            "min_price": ["1.5", "0.5", "1.1"],
        }
    )


@pytest.mark.parametrize(
    "column, value, message",
    [
        ("amount", -3, "row 1: column 'amount': -3 is not a non-negative integer"),
        ("amount", 0, "row 1: column 'amount': 0 is not in 1..=2^63-1"),
        ("sell", 5, "row 1: column 'sell': asset 5 is unknown"),
        ("buy", 1, "row 1: offer sells and buys the same asset 1"),
        ("min_price", "abc", "row 1: column 'min_price'"),
        ("min_price", "0", "row 1: column 'min_price'"),
        ("offer_id", 1, "row 1: column 'offer_id': 1 was already used on row 0"),
        ("account", "x", "row 1: column 'account': 'x' is not a non-negative integer"),
    ],
)
def test_bad_rows_are_refused_naming_column_and_row(
    column: str, value: object, message: str
) -> None:
    frame = small_batch()
    frame[column] = frame[column].astype(object)
    frame.loc[1, column] = value
    with pytest.raises(ValueError) as refused:
        walras.clear(frame, 2)
    assert message in str(refused.value)


def test_float_problems_are_refused_naming_the_row() -> None:
    frame = small_batch()
    frame["amount"] = [100.0, 2.5, 3.0]
    with pytest.raises(
        ValueError, match=r"row 1: column 'amount': 2.5 is not a non-negative integer"
    ):
        walras.clear(frame, 2)
    frame = small_batch()
    frame["amount"] = np.array([100, -3, 3], dtype=np.int64)
    with pytest.raises(ValueError, match=r"row 1: column 'amount': -3 is negative"):
        walras.clear(frame, 2)
    frame = small_batch()
    frame["min_price"] = [1.5, float("nan"), 2.0]
    with pytest.raises(ValueError, match=r"row 1: column 'min_price'"):
        walras.clear(frame, 2)


def test_missing_columns_bad_parameters_and_bad_files_are_value_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no column 'min_price'"):
        walras.clear(small_batch().drop(columns=["min_price"]), 2)
    with pytest.raises(ValueError, match="assets"):
        walras.clear(small_batch(), 1)
    with pytest.raises(ValueError, match="epsilon"):
        walras.clear(small_batch(), 2, epsilon="lots")
    with pytest.raises(ValueError, match="threads"):
        walras.clear(small_batch(), 2, threads=0)
    bad = tmp_path / "bad.csv"
    bad.write_text("offer_id,account,sell,buy,amount,min_price\n1,7,0,1,100,1.5\n2,7,0,x\n")
    with pytest.raises(ValueError, match="line 3: expected 6"):
        walras.clear(bad, 2)
    with pytest.raises(ValueError, match="cannot open"):
        walras.clear(tmp_path / "missing.csv", 2)
    with pytest.raises(ValueError, match="DataFrame"):
        walras.clear([1, 2, 3], 2)  # type: ignore[arg-type]


def test_an_empty_batch_clears_to_no_fills() -> None:
    result = walras.clear(small_batch().iloc[0:0], 2)
    assert len(result.fills) == 0
    assert result.prices.shape == (2,)


def test_a_rust_panic_becomes_internal_error_not_a_crash() -> None:
    with pytest.raises(walras.InternalError, match="deliberate panic"):
        walras._walras._panic_for_test()
    assert issubclass(walras.InternalError, RuntimeError)


def test_other_python_threads_run_while_a_batch_clears(walras_bin: str, tmp_path: Path) -> None:
    """The GIL is released while Rust reads and clears: a Python thread keeps running in the
    middle of the call (were the GIL held, it could not run at all until the call returned)."""
    import threading
    import time

    path = tmp_path / "large.csv"
    path.write_text(
        run_cli(walras_bin, ["gen", "offers", "--assets", "8", "--offers", "200000", "--seed", "5"])
    )
    span = {}

    def clear_in_background() -> None:
        span["start"] = time.perf_counter()
        walras.clear(path, 8)
        span["end"] = time.perf_counter()

    worker = threading.Thread(target=clear_in_background)
    ticks = []
    worker.start()
    while worker.is_alive():
        ticks.append(time.perf_counter())
        time.sleep(0.001)
    worker.join()
    start, end = span["start"], span["end"]
    assert end - start > 0.02, "the batch cleared too fast to tell"
    middle = [tick for tick in ticks if start + (end - start) / 4 < tick < end - (end - start) / 4]
    assert len(middle) >= 3, (len(ticks), end - start)
