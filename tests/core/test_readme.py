"""The README's set-up commands are the ones CI runs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _commands() -> list[str]:
    return re.findall(r"^    \$ (.+)$", (ROOT / "README.md").read_text(), flags=re.M)


def test_readme_opens_with_two_setup_commands() -> None:
    first, second = _commands()[:2]
    assert "corral serve" in first and first.startswith("pip install")
    assert "pytest" in second and "[test]" in second


def test_ci_runs_the_readmes_test_command() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    assert "sed -n 2p" in script and "README.md" in script
    assert "CORRAL_TEST_REQUIRE_BACKENDS=1" in script
