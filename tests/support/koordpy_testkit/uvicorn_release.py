"""A uvicorn release that renamed one private name, played by a copy of the installed uvicorn package with
that name renamed throughout its httptools protocol. Put first on a process's ``PYTHONPATH``, uvicorn itself
works as before while koordpy's fast path meets a name it does not know: the extender then serves through
its ASGI fallback (``koordpy_extender_fast_path`` 0, one ``extender.fast_path_off`` warning).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import uvicorn

__all__ = ["uvicorn_release"]


def uvicorn_release(root: Path, old: str, new: str) -> Path:
    """A copy of the installed uvicorn under ``root`` whose httptools protocol calls ``old`` ``new``
    everywhere; returns ``root`` (the directory to put on ``PYTHONPATH``)."""
    source = Path(uvicorn.__file__).parent
    target = root / "uvicorn"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
    impl = target / "protocols" / "http" / "httptools_impl.py"
    text, count = re.subn(rf"\b{re.escape(old)}\b", new, impl.read_text())
    assert count >= 2, f"{old} occurs {count} times in {impl}"
    impl.write_text(text)
    return root
