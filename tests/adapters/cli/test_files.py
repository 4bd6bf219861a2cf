"""The offline tools' file reader: pipes work, reads are bounded, YAML aliases and deep nesting are refused."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

import pytest

from koordpy.cli.files import MAX_DEPTH, InputError, parse_text, read_documents, read_text


def _feed(path: Path, data: bytes) -> threading.Thread:
    def write() -> None:
        with contextlib.suppress(BrokenPipeError), open(path, "wb") as fh:
            fh.write(data)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_a_pipe_is_read(tmp_path: Path) -> None:
    fifo = tmp_path / "dump.yaml"
    os.mkfifo(fifo)
    writer = _feed(fifo, b"kind: List\nitems: []\n")
    assert read_documents([fifo]) == [(str(fifo), {"kind": "List", "items": []})]
    writer.join(5)


def test_a_pipe_is_read_no_further_than_the_limit(tmp_path: Path) -> None:
    fifo = tmp_path / "endless.yaml"
    os.mkfifo(fifo)
    writer = _feed(fifo, b"x" * 1_000_000)
    with pytest.raises(InputError, match=r"endless.yaml: larger than 1000 bytes"):
        read_text(fifo, limit=1000)
    writer.join(5)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: &x [1]\nb: *x\n", "f.yaml: line 2: YAML alias *x is not accepted"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"f.yaml: line 1: nested deeper than {MAX_DEPTH} levels"),
        ("a: " + "1" * 65, "f.yaml: a: integer literal of 65 characters (at most 64)"),
        ("a: {" + "1" * 65 + ": b}", "f.yaml: a: key is an integer literal of 65 characters"),
    ],
)
def test_yaml_refusals_name_the_file_and_where(text: str, message: str) -> None:
    with pytest.raises(InputError) as info:
        parse_text("f.yaml", text)
    assert str(info.value).startswith(message)


def test_depth_limit_is_exact_and_anchors_without_aliases_are_fine() -> None:
    deepest = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert parse_text("f.json", deepest, json_only=True) != []
    assert parse_text("f.yaml", deepest) != []
    with pytest.raises(InputError, match=r"f.json: (\[0\]){100}: nested deeper than 100 levels"):
        parse_text("f.json", "[" + deepest + "]", json_only=True)
    assert parse_text("f.yaml", "a: &x 1\n") == [{"a": 1}]
    assert parse_text("f.yaml", "a: " + "1" * 64) == [{"a": int("1" * 64)}]
