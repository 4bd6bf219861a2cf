"""``python -m koordpy_testkit.apiserver``: run the emulator as a process until SIGTERM/SIGINT.

Prints the URL (``http://HOST:PORT``) on a line of its own on stdout once it accepts connections.
``--seed FILE`` (YAML or JSON; several documents and ``List`` objects allowed) is stored as given
before the URL is printed. ``--token TOKEN=USER`` maps a bearer token to a user name (by default a
token is its own user name).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import ssl
import sys
from pathlib import Path
from typing import Any

from koordpy_testkit.apiserver.server import ApiServerEmulator
from koordpy_testkit.apiserver.state import ClusterState


def _load_seed(path: Path) -> list[dict[str, Any]]:
    import yaml

    objects: list[dict[str, Any]] = []
    for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
        if not doc:
            continue
        if not isinstance(doc, dict):
            raise SystemExit(f"{path}: every document must be a Kubernetes object or a List")
        if str(doc.get("kind", "")).endswith("List") and isinstance(doc.get("items"), list):
            objects.extend(item for item in doc["items"] if isinstance(item, dict))
        else:
            objects.append(doc)
    return objects


def _tls(cert: Path | None, key: Path | None) -> ssl.SSLContext | None:
    if cert is None:
        return None
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    return ctx


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m koordpy_testkit.apiserver", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--record", type=Path, help="append one JSON line per API request to this file")
    parser.add_argument("--seed", type=Path, action="append", default=[], help="objects to store at start")
    parser.add_argument("--token", action="append", default=[], metavar="TOKEN=USER")
    parser.add_argument("--bookmark-interval", type=float, default=5.0)
    parser.add_argument("--history-size", type=int, default=10000)
    parser.add_argument("--max-grace-seconds", type=float, default=0.2)
    parser.add_argument("--require-auth", action="store_true")
    parser.add_argument("--tls-cert", type=Path, help="serve https with this certificate (PEM)")
    parser.add_argument("--tls-key", type=Path, help="private key for --tls-cert (PEM)")
    return parser.parse_args(argv)


async def _serve(args: argparse.Namespace) -> None:
    tokens = dict(item.split("=", 1) for item in args.token)
    state = ClusterState(history_size=args.history_size, max_grace_seconds=args.max_grace_seconds)
    emulator = ApiServerEmulator(
        state,
        tokens=tokens,
        record_path=args.record,
        bookmark_interval=args.bookmark_interval,
        require_auth=args.require_auth,
        ssl_context=_tls(args.tls_cert, args.tls_key),
    )
    for path in args.seed:
        for obj in _load_seed(path):
            state.seed(obj)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    url = await emulator.start(args.host, args.port)
    sys.stdout.write(url + "\n")
    sys.stdout.flush()
    try:
        await stop.wait()
    finally:
        await emulator.close()


def main(argv: list[str] | None = None) -> None:
    asyncio.run(_serve(_parse_args(argv)))


if __name__ == "__main__":
    main()
