"""The guest tier: one QEMU guest (TCG, cgroup v2 with every controller) for all of the tier's tests.

The guest runs the host's own Python and this work tree's ``.venv`` over a read-only 9p root; tests call
functions of :mod:`koordpy_testkit.guest.node` inside it and assert on what they return. A missing
prerequisite (qemu, busybox-static, cpio, the kernel package: ``scripts/install-guest.sh``) fails every
test of the tier with the reason; nothing skips.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from koordpy_testkit.guest import Guest, GuestUnavailableError

PAGE_CACHE_MIB = 32
"""Size of the file the memory tests read into the guest's page cache (through the 9p root)."""
TIER = Path(__file__).parent
_booted: list[Guest] = []


@pytest.hookimpl(trylast=True)  # after the item's own fixtures are torn down (they call into the guest)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Power the guest off after the tier's last test, not at the end of the session: an idle guest still
    costs the host CPU while the other tiers run."""
    if _booted and (nextitem is None or TIER not in Path(str(nextitem.path)).parents):
        _booted[0].stop()


@pytest.fixture(scope="session")
def guest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guest]:
    workdir = tmp_path_factory.mktemp("guest")
    # Written before the boot: the 9p root caches what it read, so inputs are passed before it mounts.
    (workdir / "page-cache.bin").write_bytes(bytes(range(256)) * (PAGE_CACHE_MIB << 12))
    booted = Guest(workdir)
    _booted[:] = [booted]
    try:
        booted.start()
    except GuestUnavailableError as exc:
        pytest.fail(f"the guest tier cannot run: {exc}")
    print(f"\nguest booted in {booted.boot_seconds:.1f} s (files in {workdir})")
    try:
        yield booted
    finally:
        booted.stop()
        print(
            f"\nguest tier: qemu used {booted.cpu_seconds or 0:.0f} s of host CPU over {booted.wall_seconds or 0:.0f} s"
        )


@pytest.fixture(scope="session")
def page_cache_file(guest: Guest) -> str:
    return str(guest.workdir / "page-cache.bin")
