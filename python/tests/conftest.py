"""Fixtures of the Python suite: the `walras` binary cargo built (results are compared with
its JSON) and a real `walras node --dev` started for the tests that need one."""

import os
import subprocess
import threading
from pathlib import Path
from typing import Iterator, List

import pytest

REPO = Path(__file__).resolve().parents[2]

#: The development genesis of the tests' node.
DEV_ACCOUNTS = 50
DEV_ASSETS = 4


def _walras_binary() -> str:
    """$WALRAS_BIN (set by crates/cli/tests/python_package.rs), else the newest cargo build."""
    named = os.environ.get("WALRAS_BIN")
    if named:
        return named
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    built = [target / profile / "walras" for profile in ("debug", "release")]
    built = [path for path in built if path.exists()]
    if not built:
        pytest.fail("no walras binary: build it with `cargo build -p walras-cli` or set WALRAS_BIN")
    return str(max(built, key=lambda path: path.stat().st_mtime))


@pytest.fixture(scope="session")
def walras_bin() -> str:
    return _walras_binary()


def run_cli(walras_bin: str, args: List[str]) -> str:
    """Runs the CLI; its stdout, failing the test with its stderr when it fails."""
    done = subprocess.run([walras_bin, *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"walras {' '.join(args)} failed: {done.stderr}"
    return done.stdout


class Node:
    """A `walras node --dev` child process on a free loopback port."""

    def __init__(self, walras_bin: str, data: Path) -> None:
        self.process = subprocess.Popen(
            [
                walras_bin,
                "node",
                "--data",
                str(data),
                "--listen",
                "127.0.0.1:0",
                "--block-interval-ms",
                "50",
                "--dev",
                "--dev-accounts",
                str(DEV_ACCOUNTS),
                "--dev-assets",
                str(DEV_ASSETS),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        first = self.process.stdout.readline().strip()
        prefix = "walras node listening on "
        if not first.startswith(prefix):
            self.stop()
            raise RuntimeError(f"walras node printed {first!r} first")
        self.url = first[len(prefix) :]
        # Keep draining stdout so the node never blocks on a full pipe.
        threading.Thread(target=self.process.stdout.read, daemon=True).start()

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(timeout=30)


@pytest.fixture(scope="session")
def node(walras_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    started = Node(walras_bin, tmp_path_factory.mktemp("node"))
    try:
        yield started
    finally:
        started.stop()
