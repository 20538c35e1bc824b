"""The production layout's Corral files (docs/production-lab) name only options Corral has."""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest

from corral.core import config

LAYOUT = Path(__file__).resolve().parents[2] / "docs" / "production-lab"


@pytest.mark.parametrize("name", ["api.conf", "conductor.conf", "compute.conf", "placement-galera.conf"])
def test_every_option_exists_and_loads(name: str, tmp_path: Path) -> None:
    conf = config.make_conf([str(LAYOUT / name)], state_path=str(tmp_path))
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(LAYOUT / name)
    for section in ["DEFAULT", *parser.sections()]:
        group = conf if section == "DEFAULT" else conf[section]
        own = parser.defaults() if section == "DEFAULT" else {
            key: value for key, value in parser.items(section) if key not in parser.defaults()}
        for option in own:
            assert option in group, f"[{section}] {option} is not one of Corral's options"
            getattr(group, option)  # parses (and substitutes ${host})
