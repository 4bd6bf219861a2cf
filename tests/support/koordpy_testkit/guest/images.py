"""Container images built on the spot, with nothing pulled: an OCI image archive whose one layer is the
host's static busybox (``/bin/busybox`` and a ``/bin/sh`` link), for ``ctr images import``.

Example::

    oci_archive(path, "koordpy.local/busybox:test", entrypoint=["/bin/busybox", "sleep", "3600"])

Not guaranteed: anything beyond what the guest tier's pods run (no users, no ``/etc`` contents; the
runtime adds ``/etc/hosts`` and ``/etc/resolv.conf``).
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["BUSYBOX", "oci_archive"]

BUSYBOX = Path("/bin/busybox")
LAYER = "application/vnd.oci.image.layer.v1.tar"
CONFIG = "application/vnd.oci.image.config.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
EPOCH = 0  # every timestamp: the same inputs give the same image digest


def _info(name: str, **fields: Any) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mtime = EPOCH
    for key, value in fields.items():
        setattr(info, key, value)
    return info


def _layer() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for directory in ("bin", "dev", "etc", "proc", "sys", "tmp", "var"):
            tar.addfile(_info(directory, type=tarfile.DIRTYPE, mode=0o755))
        data = BUSYBOX.read_bytes()
        tar.addfile(_info("bin/busybox", size=len(data), mode=0o755), io.BytesIO(data))
        tar.addfile(_info("bin/sh", type=tarfile.SYMTYPE, linkname="busybox", mode=0o777))
    return buf.getvalue()


def _blob(tar: tarfile.TarFile, data: bytes, media_type: str) -> dict[str, Any]:
    digest = hashlib.sha256(data).hexdigest()
    tar.addfile(_info(f"blobs/sha256/{digest}", size=len(data), mode=0o644), io.BytesIO(data))
    return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}


def oci_archive(path: Path, name: str, *, entrypoint: Sequence[str]) -> Path:
    """Write an OCI image layout archive of busybox named ``name`` (the annotation containerd's import reads)."""
    layer = _layer()
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": list(entrypoint), "Env": ["PATH=/bin"], "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{hashlib.sha256(layer).hexdigest()}"]},
    }
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        layout = json.dumps({"imageLayoutVersion": "1.0.0"}).encode()
        tar.addfile(_info("oci-layout", size=len(layout), mode=0o644), io.BytesIO(layout))
        tar.addfile(_info("blobs", type=tarfile.DIRTYPE, mode=0o755))
        tar.addfile(_info("blobs/sha256", type=tarfile.DIRTYPE, mode=0o755))
        manifest = {
            "schemaVersion": 2,
            "mediaType": MANIFEST,
            "config": _blob(tar, json.dumps(config).encode(), CONFIG),
            "layers": [_blob(tar, layer, LAYER)],
        }
        entry = _blob(tar, json.dumps(manifest).encode(), MANIFEST)
        entry["annotations"] = {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": name}
        entry["platform"] = {"architecture": "amd64", "os": "linux"}
        index = json.dumps({"schemaVersion": 2, "manifests": [entry]}).encode()
        tar.addfile(_info("index.json", size=len(index), mode=0o644), io.BytesIO(index))
    return path
