"""The oracle is a pure core: importing it pulls in no pytest, litellm or docker."""

from __future__ import annotations

import subprocess
import sys


def test_oracle_imports_no_framework() -> None:
    code = (
        "import sys, pytest_tooleffect.oracle as o\n"
        "o.score({'tool_calls': []}, {'valid_actions': [{'tool': None}]}, [])\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pytest', '_pytest', 'litellm', 'docker', 'testcontainers', 'pluggy'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"the oracle imported {out.stdout.strip()}"
