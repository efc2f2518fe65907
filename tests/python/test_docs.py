"""Every ```python block of docs/python.md runs as written, in order, from the repository's root."""
import os
import re

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DOC = os.path.join(ROOT, "docs", "python.md")


def blocks():
    return re.findall(r"```python\n(.*?)```", open(DOC).read(), flags=re.S)


def test_the_guide_has_examples_of_every_area():
    text = "\n".join(blocks())
    for call in ("aoc.Hardware(", "aoc.solve(", "import_config(", ".compile(", ".run(", ".check(", ".estimate(", "aoc.sweep(",
                 "AOCLayer("):
        assert call in text


def test_every_python_block_of_docs_python_md_runs(monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("pandas")
    monkeypatch.chdir(ROOT)
    scope = {}
    for i, code in enumerate(blocks()):
        exec(compile(code, f"docs/python.md block {i + 1}", "exec"), scope)
