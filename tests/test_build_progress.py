"""`harnessc build` while it embeds: progress (a bar on a terminal, plain lines otherwise), and
no noise from the libraries that load the model. The embedder is a fake: no torch here."""

from __future__ import annotations

import hashlib
import io
import logging
from pathlib import Path

import numpy as np
import pytest
from harnessc.compiler import embed
from harnessc.compiler.cli import main
from harnessc.compiler.embed import ProgressPrinter
from harnessc.compiler.init import STARTER, STARTER_NAME
from harnessc.runtime.exposure.embedding import QUIETED_LOGGERS, quiet_libraries

from .conftest import ROOT

EXAMPLE = ROOT / "examples" / "remediation" / "remediation.harness"


def _fake_embedder() -> object:
    def embed_text(text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")
        return np.random.default_rng(seed).standard_normal(384).astype(np.float32)

    return embed_text


@pytest.fixture
def fake_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The build embeds with a fake model, into an empty cache; the list counts its loads."""
    loads: list[int] = []

    def load() -> object:
        loads.append(1)
        return _fake_embedder()

    monkeypatch.setenv("HARNESSC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(embed, "load_query_embedder", load)
    return loads


def test_a_build_reports_its_progress_in_plain_lines_off_a_terminal(
    tmp_path: Path, fake_model: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["build", str(EXAMPLE), "-o", str(tmp_path / "out")]) == 0
    lines = capsys.readouterr().err.splitlines()
    first = lines[0]
    assert first.startswith("embedding ") and first.endswith(" tool texts (the model loads first)")
    total = int(first.split()[1])
    progress = [line for line in lines if line.startswith("embedded ")]
    assert progress[-1] == f"embedded {total}/{total}"
    assert len(progress) <= 11, "about every tenth, not a line per text"
    assert not any("\r" in line for line in lines)
    assert fake_model == [1]

    # a second build finds every vector in the cache: nothing to embed, nothing to report
    assert main(["build", str(EXAMPLE), "-o", str(tmp_path / "out")]) == 0
    assert "embed" not in capsys.readouterr().err
    assert fake_model == [1]


def test_quiet_builds_report_no_progress(
    tmp_path: Path, fake_model: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / STARTER_NAME
    spec.write_text(STARTER, encoding="utf-8")
    assert main(["build", str(spec), "-o", str(tmp_path / "out"), "-q"]) == 0
    assert capsys.readouterr().err == ""
    assert fake_model == [1]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_progress_is_one_bar_redrawn_in_place() -> None:
    stream = _Terminal()
    printer = ProgressPrinter(stream)
    for done in range(5):
        printer(done, 4)
    text = stream.getvalue()
    assert text.count("\r") == 5 and text.endswith("\n") and text.count("\n") == 1
    frames = [frame.rstrip() for frame in text.split("\r")[1:]]
    assert frames[0] == "embedding tool texts [" + "." * 30 + "] 0/4 (loading the model)"
    assert frames[2] == "embedding tool texts [" + "#" * 15 + "." * 15 + "] 2/4"
    assert frames[4] == "embedding tool texts [" + "#" * 30 + "] 4/4"


def test_library_warnings_are_silenced_while_the_model_loads_and_only_then(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """What transformers says while loading (`loss_type=None` was set in the config …) is not
    ours to show; outside the load, an application's logging settings stand."""
    noisy = logging.getLogger("transformers.modeling_utils")
    before = [logging.getLogger(name).level for name in QUIETED_LOGGERS]
    with caplog.at_level(logging.WARNING):
        with quiet_libraries():
            noisy.warning("`loss_type=None` was set in the config but it is unrecognized.")
            noisy.error("a real failure")
        noisy.warning("after the load")
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["a real failure", "after the load"]
    assert [logging.getLogger(name).level for name in QUIETED_LOGGERS] == before
