"""docs/python.md's examples run as doctests, so the output it shows is the
real one; and the typed layer is clean under ``mypy --strict``."""
import doctest
import os
import shutil
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
DOC = os.path.join(REPO, "docs", "python.md")


def test_python_md_examples_run_as_doctests(tmp_path, monkeypatch):
    pytest.importorskip("pandas", reason="docs/python.md uses pandas (scripts/py-test installs it)")
    pytest.importorskip("matplotlib", reason="docs/python.md uses matplotlib (scripts/py-test installs it)")
    # Run from a scratch directory that sees the repository's files (the
    # examples name them relative to the root) and takes the figure.
    for entry in ("crates", "docs"):
        os.symlink(os.path.join(REPO, entry), tmp_path / entry)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    r = doctest.testfile(
        DOC, module_relative=False, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False
    )
    assert r.attempted > 20, r
    assert r.failed == 0, f"{r.failed} of {r.attempted} examples of docs/python.md failed (output above)"
    assert (tmp_path / "cold-relaunch-cdf.png").stat().st_size > 0


def test_mypy_strict_is_clean():
    if shutil.which("mypy", path=os.path.dirname(sys.executable)) is None:
        pytest.skip("mypy is not installed here (scripts/py-test installs it)")
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--config-file", os.path.join(REPO, "crates", "py", "pyproject.toml"),
         "-p", "appflow_sim"],
        capture_output=True, text=True, cwd=REPO, timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Success: no issues found" in out.stdout
