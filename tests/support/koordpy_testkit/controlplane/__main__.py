"""``python -m koordpy_testkit.controlplane``: start the test control plane and keep it up until Ctrl-C.

Prints the admin kubeconfig's path (use it with kubectl, helm, koordpy), the API server's URL and each
process's log file. ``--nodes N`` creates N kwok nodes; ``--dir`` keeps everything (etcd data, certificates,
logs, audit log) in a directory of your choice, otherwise in a new temporary one that is kept after exit.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
from pathlib import Path

from koordpy_testkit.controlplane.cluster import GENERIC_WORKLOAD, ControlPlane, fake_node


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m koordpy_testkit.controlplane", description=__doc__)
    parser.add_argument("--dir", type=Path, help="working directory (default: a new temporary directory)")
    parser.add_argument("--nodes", type=int, default=0, help="kwok nodes to create (default 0)")
    parser.add_argument("--node-cpu", default="16", help="each node's cpu (default 16)")
    parser.add_argument("--node-memory", default="64Gi", help="each node's memory (default 64Gi)")
    parser.add_argument("--allow-privileged", action="store_true", help="start kube-apiserver with --allow-privileged")
    parser.add_argument("--no-default-scheduler", action="store_true", help="do not start the stock kube-scheduler")
    parser.add_argument(
        "--generic-workload",
        action="store_true",
        help="serve scheduling.k8s.io/v1beta1 Workloads and PodGroups (GenericWorkload gate on every component)",
    )
    args = parser.parse_args(argv)
    if args.nodes < 0:
        parser.error("--nodes: must be 0 or more")

    workdir = args.dir or Path(tempfile.mkdtemp(prefix="koordpy-controlplane-"))
    plane = ControlPlane(
        workdir=workdir.resolve(),
        allow_privileged=args.allow_privileged,
        default_scheduler=not args.no_default_scheduler,
        **(GENERIC_WORKLOAD if args.generic_workload else {}),
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(f"starting the control plane in {plane.workdir} ...", file=sys.stderr, flush=True)
    try:
        plane.start()
        if args.nodes:
            with plane.client() as api:
                for index in range(args.nodes):
                    node = fake_node(f"kwok-node-{index}", cpu=args.node_cpu, memory=args.node_memory)
                    api.post("/api/v1/nodes", json=node).raise_for_status()
        print(f"kubeconfig: {plane.admin_kubeconfig}")
        print(f"server:     {plane.url}")
        print(f"export KUBECONFIG={plane.admin_kubeconfig}")
        for name, log in plane.logs().items():
            print(f"log {name:<24} {log}")
        print("running; Ctrl-C stops every process", flush=True)
        while not stop.wait(1.0):
            plane.check_alive()
    except KeyboardInterrupt:
        pass
    finally:
        plane.stop()
        print(f"stopped; files kept in {plane.workdir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
