"""Raw-socket HTTP clients that misbehave on purpose, for tests of listener limits.

``oversized_head`` sends a request whose head is ``size`` bytes (one long header) and reports what the
server answered and how much it accepted before closing; ``dripped_head`` sends a head one byte at a
time and reports how many bytes went out before the server closed the connection. Loopback only; every
loop is bounded.

Not guaranteed: how many bytes the kernel accepts before a closed peer is noticed (socket buffers).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

__all__ = ["HeadOutcome", "dripped_head", "oversized_head"]

_CHUNK = 64 * 1024


@dataclass(frozen=True)
class HeadOutcome:
    sent: int
    """Bytes written before the server closed the connection (or all of them)."""
    status_line: bytes
    """The first line of the answer, b"" when the connection was closed without one."""
    closed: bool
    """True when the server closed the connection (EOF or reset) after answering or instead of it."""


async def _read_answer(reader: asyncio.StreamReader, timeout: float) -> tuple[bytes, bool]:
    """The status line and whether the connection then ended (EOF or reset) within ``timeout``."""
    status = b""
    try:
        async with asyncio.timeout(timeout):
            status = await reader.readline()
            while await reader.read(_CHUNK):
                pass
    except (ConnectionError, TimeoutError) as exc:
        return status.strip(), not isinstance(exc, TimeoutError)
    return status.strip(), True


async def oversized_head(
    host: str, port: int, size: int, *, path: str = "/healthz", timeout: float = 10.0
) -> HeadOutcome:
    """Send ``GET path`` with one header of ``size`` bytes, in 64 KiB writes, then read the answer."""
    reader, writer = await asyncio.open_connection(host, port)
    sent = 0
    try:
        start = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nX-Big: ".encode()
        chunk = b"a" * _CHUNK
        try:
            writer.write(start)
            sent += len(start)
            while sent < size:
                part = chunk[: min(_CHUNK, size - sent)]
                writer.write(part)
                async with asyncio.timeout(timeout):
                    await writer.drain()
                sent += len(part)
            writer.write(b"\r\n\r\n")
            await writer.drain()
        except (ConnectionError, TimeoutError):
            return HeadOutcome(sent, b"", True)
        status, closed = await _read_answer(reader, timeout)
        return HeadOutcome(sent, status, closed)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def dripped_head(host: str, port: int, *, interval: float, max_bytes: int, path: str = "/healthz") -> HeadOutcome:
    """Send a request head one byte every ``interval`` seconds, never finishing it, for at most
    ``max_bytes`` bytes; ``closed`` tells whether the server ended the connection first."""
    reader, writer = await asyncio.open_connection(host, port)
    head = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nX-Slow: ".encode() + b"s" * max_bytes
    sent = 0
    try:
        for byte in head[:max_bytes]:
            try:
                writer.write(bytes([byte]))
                await writer.drain()
            except ConnectionError:
                return HeadOutcome(sent, b"", True)
            sent += 1
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    if await reader.read(_CHUNK) == b"":
                        return HeadOutcome(sent, b"", True)
        return HeadOutcome(sent, b"", False)
    except ConnectionError:
        return HeadOutcome(sent, b"", True)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
