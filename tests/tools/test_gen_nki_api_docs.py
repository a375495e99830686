"""docs/nki-api.md is generated from the package (tools/gen_nki_api_docs.py) and is current: a
name whose status changes (a refusal implemented, a new placeholder) must regenerate the page."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from neuron_customcall.nki.reference_names import SPEC

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_page_is_what_the_generator_writes() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_nki_api_docs.py"), "--check"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def test_every_reference_name_has_a_row_with_a_status() -> None:
    text = (ROOT / "docs" / "nki-api.md").read_text()
    sections = dict(re.findall(r"^## `(?:neuronxcc\.)?(\S+)` \((beta \d)\)", text, re.M))
    assert len(re.findall(r"^## ", text, re.M)) == len(SPEC)
    assert {m for m, _ in SPEC} == set(sections)
    rows = re.findall(r"^\| `(\w+)` \| [\w ]* \| (supported|refused: .+?|missing) \|", text, re.M)
    assert len(rows) == sum(len(t.split()) for t in SPEC.values())
    assert "missing" not in {status for _, status in rows}


def test_a_refusal_placeholder_is_listed_as_refused_with_its_reason() -> None:
    from neuron_customcall.nki import collectives

    reason = getattr(collectives.all_gather_v, "unsupported", None)
    text = (ROOT / "docs" / "nki-api.md").read_text()
    if reason is None:  # implemented: then it must read as supported
        assert re.search(r"^\| `all_gather_v` \| function \| supported \|", text, re.M)
    else:
        assert f"| `all_gather_v` | function | refused: {reason} |" in text
