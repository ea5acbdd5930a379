"""`tracelake ingest --engine ray`: each trace decoded and staged by a task of a Ray cluster.

The driver (the `tracelake ingest` process) finds the traces, makes and locks a staging folder per
trace under the warehouse folder, and submits one task per trace; the task, on whichever node Ray
places it, decodes the trace and writes its Parquet tables into that folder. The warehouse folder and
the traces must therefore be on a file system every node sees; `check_visible` proves that before
any work starts. The driver then commits the staged traces exactly as a local ingest does. On a
cluster, into a lakehouse whose marts exist, a task also runs the incremental models over its trace
(tracelake/task_models.py) and the driver inserts those rows instead of computing them.

A task that raises fails its trace with the error; a worker or node that dies fails the traces it
was staging (tasks are not retried: a second attempt would write into a folder the first one left
half-written). Their staging folders are the driver's and are removed with the others, so nothing of
a failed trace is ever registered.

Ray is imported only here, and this module only for `--engine ray`.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracelake.core.errors import TraceLakeError
from tracelake.crashpoints import crash_point
from tracelake.ingest.staged import StagedTrace
from tracelake.task_models import models_alone

if TYPE_CHECKING:
    from tracelake.ingestion import StagingWork
    from tracelake.warehouse import Warehouse

# A crash point a test arms per trace: `TRACELAKE_CRASH_AT=ray-stage:<file name>` kills the worker
# staging that file.
STAGE_CRASH_POINT = "ray-stage:"
CONNECT_TIMEOUT_SECONDS = 5.0
JOIN_TIMEOUT_SECONDS = 60
PROBE_TIMEOUT_SECONDS = 120.0
# A local instance holds only the tasks' small results in its object store (Ray's floor is 75 MiB).
LOCAL_OBJECT_STORE_BYTES = 128 * 1024 * 1024
PROBE_PREFIX = ".tracelake-ray-probe-"
# "1": each task also models its trace (tracelake/task_models.py); "0": the driver models them all,
# as --engine local does. Default: 1 on a cluster (--ray-address), 0 on a local Ray instance.
MODELS_IN_TASK_ENV = "TRACELAKE_RAY_MODELS_IN_TASK"

Recorder = Callable[[str, StagedTrace | None, BaseException | None], None]


class RayUnavailableError(TraceLakeError):
    """The Ray cluster cannot be reached or cannot do the work; raised before anything is written."""


def stage_on_worker(path: str, sha256: str, folder: str, tags: dict[str, str], model: bool) -> StagedTrace:
    """The task: decode one trace and write its tables into `folder` (a staging folder of the
    driver's); with `model`, also its rows of every incremental model (tracelake/task_models.py)."""
    import duckdb  # noqa: PLC0415 - a worker imports what the task needs when it first runs one
    import pyarrow as pa  # noqa: PLC0415

    from tracelake.dbt_runner import project_fingerprint  # noqa: PLC0415
    from tracelake.ingestion import stage_into  # noqa: PLC0415 - the staging code, shared with the local engine
    from tracelake.shipped_plan import load_shipped_plans  # noqa: PLC0415
    from tracelake.task_models import model_in_task  # noqa: PLC0415

    pa.set_memory_pool(pa.system_memory_pool())  # as the driver does for the local engine (tracelake/ingestion.py)
    crash_point(STAGE_CRASH_POINT + Path(path).name)
    staged = stage_into(Path(path), sha256, Path(folder), tags)
    plans = load_shipped_plans(project_fingerprint()) if model else None
    if plans is not None:
        try:
            model_in_task(staged, plans)
        except (duckdb.Error, OSError):
            pass  # nothing written: the driver runs this trace's models, as for --engine local
    return staged


def probe_node(folder: str, token_file: str, token: str, files: list[tuple[str, int]]) -> str | None:
    """Run on one node: None if it sees `folder` (the same one: it holds the driver's token file),
    can write in it, and sees every trace file at its size; else what is wrong."""
    if not Path(folder).is_dir():
        return f"it cannot see the folder {folder}"
    try:
        seen = Path(token_file).read_text()
    except OSError:
        seen = ""
    if seen != token:
        return f"its folder {folder} is not the driver's (a folder of that node's own, without the driver's probe file)"
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        return f"it cannot write in the folder {folder} ({exc.strerror or exc})"
    for name, size in files:
        try:
            size_there = os.stat(name).st_size
        except OSError as exc:
            return f"it cannot see the trace {name} ({exc.strerror or exc})"
        if size_there != size:
            return f"it sees the trace {name} with {size_there} bytes, the driver with {size}"
    return None


@dataclass
class RayEngine:
    """A connected Ray session that stages traces (tracelake/ingestion.py's StagingEngine)."""

    address: str | None
    model_in_task: bool = False

    def check_visible(self, warehouse: Warehouse, traces: list[Path]) -> None:
        """Refuse (RayUnavailableError) unless every node that can run a task sees the warehouse
        folder (or, for a new warehouse, the folder it will be made in) and every trace."""
        import ray  # noqa: PLC0415
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: PLC0415

        from tracelake.lakehouse import LakeWarehouse  # noqa: PLC0415

        # A lakehouse whose marts exist inserts the rows the tasks modelled (a new one builds them
        # in one set-based pass, cheaper than inserting them; the classic layout runs its own
        # update). Worth it on a cluster: it moves work off the driver, but costs more work in all,
        # so a Ray instance on the driver's own cores leaves it to the driver.
        wanted = os.environ.get(MODELS_IN_TASK_ENV, "1" if self.address else "0") != "0"
        self.model_in_task = wanted and isinstance(warehouse, LakeWarehouse) and bool(warehouse.modelled_trace_ids())
        folder = _nearest_existing(warehouse.root.resolve())
        nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0]
        if not nodes:
            raise RayUnavailableError(f"the Ray cluster at {self.address} has no node with CPUs to run tasks")
        files = [(p.resolve().as_posix(), p.stat().st_size) for p in traces]
        token = uuid.uuid4().hex
        token_file = folder / f"{PROBE_PREFIX}{token}"
        probe = ray.remote(num_cpus=0, max_retries=0)(probe_node)
        try:
            token_file.write_text(token)
            refs = {probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
                    .remote(folder.as_posix(), token_file.as_posix(), token, files): n for n in nodes}
            ready, waiting = ray.wait(list(refs), num_returns=len(refs), timeout=PROBE_TIMEOUT_SECONDS)
            for ref in waiting:
                raise RayUnavailableError(f"Ray node {_node_name(refs[ref])} did not answer within "
                                          f"{PROBE_TIMEOUT_SECONDS:.0f} s; check `ray status`")
            for ref in ready:
                problem = _probe_answer(ray, ref)
                if problem is not None:
                    raise RayUnavailableError(
                        f"Ray node {_node_name(refs[ref])} cannot do the work: {problem}; the warehouse folder "
                        "and the traces must be on a file system every node of the cluster sees")
        except OSError as exc:
            raise RayUnavailableError(f"cannot write in {folder} ({exc.strerror or exc})") from None
        finally:
            token_file.unlink(missing_ok=True)

    def stage_all(self, work: dict[str, StagingWork], tags_of: dict[str, dict[str, str]], record: Recorder) -> None:
        """One task per trace; each trace recorded (staged, or failed with its error) as its task ends."""
        import ray  # noqa: PLC0415

        task = ray.remote(num_cpus=1, max_retries=0)(stage_on_worker)
        refs = {task.remote(item.path.as_posix(), item.sha256, item.folder.as_posix(), tags_of[trace_id],
                            self.model_in_task and models_alone(tags_of[trace_id])): trace_id
                for trace_id, item in work.items()}
        waiting = list(refs)
        try:
            while waiting:
                ready, waiting = ray.wait(waiting, num_returns=1)
                for ref in ready:
                    staged, error = _task_result(ray, ref, work[refs[ref]].path)
                    record(refs[ref], staged, error)
        except BaseException:
            for ref in waiting:  # a stop or a crash of the driver: the running tasks are ended too
                ray.cancel(ref, force=True)
            raise


def _task_result(ray: Any, ref: Any, path: Path) -> tuple[StagedTrace | None, BaseException | None]:
    try:
        return ray.get(ref), None
    except ray.exceptions.RayTaskError as failed:  # the task raised: its own error, as the local engine has it
        cause = failed.cause if isinstance(failed.cause, BaseException) else failed
        if isinstance(cause, TraceLakeError):
            return None, cause
        return None, TraceLakeError(f"{path}: staging failed on a Ray worker ({type(cause).__name__}: {_first_line(cause)})")
    except ray.exceptions.RayError as lost:  # the worker or its node died, or the task was cancelled
        return None, TraceLakeError(f"{path}: the Ray worker staging it was lost ({type(lost).__name__}: "
                                    f"{_first_line(lost)}); ingest it again")


def _probe_answer(ray: Any, ref: Any) -> str | None:
    try:
        answer = ray.get(ref)
    except ray.exceptions.RayError as failed:
        return f"its probe task failed ({type(failed).__name__}: {_first_line(failed)})"
    return answer if isinstance(answer, str) else None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0]


def _node_name(node: dict[str, Any]) -> str:
    return f"{node.get('NodeManagerAddress', '?')} ({str(node.get('NodeID', '?'))[:12]})"


def _nearest_existing(folder: Path) -> Path:
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    return folder


def _check_reachable(address: str) -> None:
    """A plain TCP connection to the cluster's address first: an unreachable one fails in seconds
    with its reason, not after Ray's own minute of retries."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise RayUnavailableError(f"--ray-address {address!r} is not HOST:PORT (the head's address, as "
                                  "`ray start --head` printed it)")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_SECONDS):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise RayUnavailableError(f"cannot reach the Ray cluster at {address} ({reason}); start it with "
                                  "`ray start --head` or check --ray-address") from None


def _use_token_if_present() -> None:
    """Ray authenticates a driver that names an address only when RAY_AUTH_MODE says so; a token
    of this user's (the one `ray start` made) is used as Ray itself uses it for a local cluster."""
    if "RAY_AUTH_MODE" in os.environ:
        return
    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH") or \
            (Path.home() / ".ray" / "auth_token").is_file():
        os.environ["RAY_AUTH_MODE"] = "token"


class _JoinTimeout(BaseException):  # not an Exception: Ray retries through those
    pass


@contextmanager
def _deadline(seconds: int, address: str | None) -> Iterator[None]:
    """Ray waits many minutes for a driver it cannot place (one on a machine that is no node of the
    cluster): give up after `seconds`. Only the main thread can take a signal; elsewhere Ray waits."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def give_up(_signum: int, _frame: object) -> None:
        raise _JoinTimeout

    previous = signal.signal(signal.SIGALRM, give_up)
    signal.alarm(seconds)
    try:
        yield
    except _JoinTimeout:
        raise RayUnavailableError(f"the Ray cluster at {address} did not take this driver within {seconds} s: run the "
                                  "command on a node of the cluster (the head, or a machine where `ray start "
                                  "--address` ran)") from None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@contextmanager
def _stderr_kept(into: list[str]) -> Iterator[None]:
    """Ray's C++ core logs each connection retry on fd 2: keep it off the user's terminal and hand
    it to the caller, who says in one line what went wrong."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as kept:
        os.dup2(kept.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            kept.seek(0)
            into.append(kept.read().decode("utf-8", "replace"))


def _connect(address: str | None, cpus: int) -> None:
    if address is None:
        # a private single-node instance: Ray binds it to the loopback address only
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    else:
        _check_reachable(address)
        _use_token_if_present()
    import ray  # noqa: PLC0415

    try:
        _connect_once(ray, address, cpus)
    except BaseException:
        ray.shutdown()  # whatever Ray set up before it failed
        raise


def _connect_once(ray: Any, address: str | None, cpus: int) -> None:
    import logging  # noqa: PLC0415

    said: list[str] = []
    try:
        with _stderr_kept(said), _deadline(JOIN_TIMEOUT_SECONDS, address):
            if address is None:
                ray.init(address="local", num_cpus=cpus, object_store_memory=LOCAL_OBJECT_STORE_BYTES,
                         include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
            else:
                ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        text = "".join(said) + str(exc) + str(exc.__cause__ or "")
        if "InvalidAuthToken" in text or "Unauthenticated" in text:
            raise RayUnavailableError(f"the Ray cluster at {address} refused this driver's credentials: give its "
                                      "token (RAY_AUTH_TOKEN, or ~/.ray/auth_token as `ray get-auth-token` prints it)") from None
        where = f"the Ray cluster at {address}" if address else "a local Ray instance"
        raise RayUnavailableError(f"cannot connect to {where}: {_first_line(exc)}") from None


ENGINES = ("local", "ray")


@contextmanager
def staging_engine(engine: str, ray_address: str | None, cpus: int) -> Iterator[RayEngine | None]:
    """The engine `tracelake ingest --engine` names: None for `local` (this machine's forked
    workers, tracelake/ingestion.py), a connected Ray session for `ray`."""
    if engine not in ENGINES:
        raise TraceLakeError(f"--engine {engine!r}: the engines are {' and '.join(ENGINES)}")
    if engine != "ray":
        if ray_address is not None:
            raise TraceLakeError("--ray-address names the cluster of --engine ray; add --engine ray")
        yield None
        return
    with ray_session(ray_address, cpus) as session:
        yield session


@contextmanager
def ray_session(address: str | None, cpus: int) -> Iterator[RayEngine]:
    """Connected to the cluster at `address` (or a local instance of `cpus` CPUs started here) for
    the block; disconnected (the local instance stopped) after it."""
    _connect(address, cpus)
    import ray  # noqa: PLC0415

    driver = sys.modules["ray._private.worker"]
    printing = getattr(driver, "print_to_stdstream")  # noqa: B009 - a module attribute mypy does not know
    # Ray prints its raylets' error messages (a worker that died) on the driver's stdout, the
    # stream of the ingest report; the engine reports each such failure with its trace instead.
    setattr(driver, "print_to_stdstream", _print_nothing)  # noqa: B010
    try:
        yield RayEngine(address)
    finally:
        ray.shutdown()
        setattr(driver, "print_to_stdstream", printing)  # noqa: B010


def _print_nothing(data: dict[str, Any], ignore_prefix: bool) -> None:
    pass
