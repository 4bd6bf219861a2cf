"""Runs inside the test guest: executes the calls the host drops into the job folder, one at a time.

``<job>/calls/<name>.json`` holds ``{"target": "module:function", "kwargs": {...}}``; the result goes to
``<job>/results/<name>.json`` as ``{"ok": true, "value": ...}`` or ``{"ok": false, "error": traceback}``
(written to a temporary name and renamed, so the host never reads half a file). A call named ``stop``
ends the runner. ``<job>/ready`` says the runner is up (with the guest's uptime at that moment).

Functions keep state between calls in their own modules (processes they started, readers), since the
runner is one interpreter for the whole boot.

Not guaranteed: calls run in name order, one at a time; a call that never returns blocks the rest (the
host's hang backstop then ends the guest).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import traceback
from typing import Any

POLL_SECONDS = 0.05


def _write(path: str, body: dict[str, Any]) -> None:
    tmp = f"{os.path.dirname(path)}/.{os.path.basename(path)}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(body, fh)
    os.rename(tmp, path)


def _run(target: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    module_name, _, qualname = target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        return {"ok": True, "value": obj(**kwargs)}
    except BaseException:  # every failure goes back to the host, which raises it in the test
        return {"ok": False, "error": traceback.format_exc()}


def main(job: str) -> int:
    calls, results = os.path.join(job, "calls"), os.path.join(job, "results")
    with open("/proc/uptime", encoding="ascii") as fh:
        uptime = float(fh.read().split()[0])
    _write(os.path.join(job, "ready"), {"uptime": uptime, "pid": os.getpid()})
    while True:
        names = sorted(n for n in os.listdir(calls) if n.endswith(".json"))
        if not names:
            time.sleep(POLL_SECONDS)
            continue
        for name in names:
            path = os.path.join(calls, name)
            with open(path, encoding="utf-8") as fh:
                call = json.load(fh)
            os.unlink(path)
            if call.get("stop"):
                return 0
            _write(os.path.join(results, name), _run(call["target"], call.get("kwargs") or {}))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
