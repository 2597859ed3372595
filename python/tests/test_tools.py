"""The offline tools equal their CLI commands on the same parameters: sim.dbo and
`walras sim dbo --json`, oracle.value and `walras oracle value`, oracle.replay and
`walras oracle replay --json` (the digest), gen_offers and `walras gen offers`."""

import io
import json
from pathlib import Path

import pandas as pd
import pytest

import walras
from conftest import run_cli


def test_dbo_rows_equal_the_cli_reports(walras_bin: str) -> None:
    frame = walras.sim.dbo(["direct", "dbo"], participants=5, seconds=0.2, seed=3)
    assert frame.index.tolist() == ["direct", "dbo"]
    for scheme in frame.index:
        cli = json.loads(
            run_cli(
                walras_bin,
                [
                    "sim",
                    "dbo",
                    "--scheme",
                    scheme,
                    "--participants",
                    "5",
                    "--seconds",
                    "0.2",
                    "--seed",
                    "3",
                    "--json",
                ],
            )
        )
        assert frame.loc[scheme, "fairness"] == cli["fairness"]
        for key, value in cli["latency_us"].items():
            assert frame.loc[scheme, f"latency_us_{key}"] == value
    assert frame.loc["dbo", "fairness"] >= frame.loc["direct", "fairness"]


def test_dbo_refuses_unknown_schemes() -> None:
    with pytest.raises(ValueError, match="scheme"):
        walras.sim.dbo("fastest")


def test_oracle_value_equals_the_cli(walras_bin: str) -> None:
    bids, asks = "100:1,99:2", "101:1,102:3"
    cli = json.loads(
        run_cli(
            walras_bin,
            [
                "oracle",
                "value",
                "--bids",
                bids,
                "--asks",
                asks,
                "--method",
                "depth-vwap",
                "--depth",
                "2",
                "--step",
                "0.5",
            ],
        )
    )
    assert walras.oracle.value(bids, asks, "depth-vwap", depth=2, step=0.5) == cli
    as_pairs = walras.oracle.value([(100, 1), (99, 2)], [(101, 1), (102, 3)], "depth-vwap", 2, 0.5)
    assert as_pairs == cli
    with pytest.raises(ValueError, match="method"):
        walras.oracle.value(bids, asks, "median")
    with pytest.raises(ValueError, match="book"):
        walras.oracle.value("x:y", asks)


def test_oracle_replay_gives_the_cli_digest_at_any_thread_count(
    walras_bin: str, tmp_path: Path
) -> None:
    feed = tmp_path / "feed.jsonl"
    run_cli(
        walras_bin,
        [
            "gen",
            "feed",
            "--venues",
            "3",
            "--assets",
            "3",
            "--seconds",
            "2",
            "--faults",
            "0.01",
            "--out",
            str(feed),
        ],
    )
    cli = json.loads(
        run_cli(walras_bin, ["oracle", "replay", str(feed), "--threads", "1", "--json"])
    )
    for threads in (1, 2):
        report = walras.oracle.replay(feed, threads=threads)
        assert report["digest"] == cli["digest"]
        assert report["prices"] == cli["prices"]
    with pytest.raises(ValueError, match="threads"):
        walras.oracle.replay(feed, threads=0)
    with pytest.raises(ValueError, match="opening"):
        walras.oracle.replay(tmp_path / "missing.jsonl")


@pytest.mark.parametrize("model", walras.MODELS)
def test_generated_offers_equal_the_cli_csv(walras_bin: str, model: str) -> None:
    text = run_cli(
        walras_bin,
        ["gen", "offers", "--assets", "6", "--offers", "500", "--seed", "11", "--model", model],
    )
    cli = pd.read_csv(io.StringIO(text), dtype={"min_price": str})
    generated = walras.gen_offers(6, 500, seed=11, model=model, exact_prices=True)
    pd.testing.assert_frame_equal(generated, cli, check_dtype=False)


def test_generator_parameters_are_checked() -> None:
    with pytest.raises(ValueError, match="model"):
        walras.gen_offers(4, 10, model="random")
    with pytest.raises(ValueError, match="spread"):
        walras.gen_offers(4, 10, model="market", spread="50%")
    with pytest.raises(ValueError):
        walras.gen_offers(1, 10)
