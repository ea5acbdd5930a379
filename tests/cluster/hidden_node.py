"""Run inside a private network namespace (`unshare --net`, where 127.0.0.1 is the only address): a
Ray cluster of two nodes, the second in a private mount namespace where the folder SHARED is an empty
file system of its own (so that node sees none of what the driver puts there), and one `tracelake
ingest --engine ray` per case against it. Prints each case's exit code, output and the files left.

    python -m tests.cluster.hidden_node SHARED WORK
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.cluster.conftest import RAY, run_tracelake, start_head, start_ray
from tests.conftest import TRACES

TRACE = TRACES / "cpu_only" / "cpu_mlp_training.json.gz"


def main(shared: Path, work: Path) -> None:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    temp = Path(tempfile.mkdtemp(prefix="tl-ray-", dir="/tmp"))
    # several nodes: Ray's one-node loopback switch stays off; no token to share between the nodes
    # (the namespace's network reaches nothing but its own loopback)
    env = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
    head, address = start_head(temp, 1, env)
    hiding = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
              'mount -t tmpfs tmpfs "$1" && shift && exec "$@"', "sh", str(shared)]
    node = None
    try:
        node = start_ray(["--address", address, "--num-cpus", "1", "--temp-dir", str(temp / "node")],
                         temp / "node.log", env, prefix=hiding)
        shutil.copy(TRACE, shared / TRACE.name)
        cases = {
            "warehouse on the hidden folder": [str(TRACE), "--warehouse", str(shared / "wh")],
            "trace on the hidden folder": [str(shared / TRACE.name), "--warehouse", str(work / "wh")],
        }
        answers = {}
        for case, args in cases.items():
            result = run_tracelake("ingest", *args, "--catalog", "local", "--engine", "ray", "--ray-address", address,
                                   env={"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1"})
            answers[case] = {"returncode": result.returncode, "stdout": result.stdout, "stderr": result.stderr,
                             "files": sorted(str(p.relative_to(shared.parent)) for p in shared.parent.rglob("*"))}
        print(json.dumps(answers))
    finally:
        if node is not None:
            node.stop()
        head.stop()
        shutil.rmtree(temp, ignore_errors=True)


if __name__ == "__main__":
    assert RAY.exists()
    main(Path(sys.argv[1]), Path(sys.argv[2]))
