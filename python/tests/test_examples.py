"""The examples run as a user runs them, so they cannot rot: the plot script writes a PNG, the
bot trades a few rounds against the test's node."""

import subprocess
import sys
from pathlib import Path

from conftest import Node

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_example(name: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{name} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_plot_example_clears_a_generated_market_and_writes_a_png(tmp_path: Path) -> None:
    out = tmp_path / "market.png"
    printed = run_example("clear_and_plot.py", "--offers", "5000", "--out", str(out))
    assert "converged=" in printed and "offers traded" in printed
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out.stat().st_size > 10_000


def test_the_bot_example_trades_rounds_against_a_node(node: Node) -> None:
    printed = run_example("bot.py", "--node", node.url, "--account", "11", "--rounds", "2")
    assert "round 2:" in printed
    assert printed.strip().splitlines()[-1].startswith("bot done: 2 rounds")
