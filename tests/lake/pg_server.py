"""A real PostgreSQL server for the lakehouse tests: Debian's PostgreSQL (15 on this machine) in a
temporary folder, listening on 127.0.0.1 on a free port, stopped and removed after.

Password authentication over TCP (scram-sha-256) with a random password, so the tests see what a
real catalog server asks for: the catalog URLs carry no password, the CLI gets it from PGPASSWORD.
The server runs as the `postgres` user when the tests run as root (initdb refuses root).
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PG_ROOT = Path("/usr/lib/postgresql")
PREFERRED_VERSION = "15"
USER = "tl"
START_TRIES = 3  # a free port may be taken between choosing it and the server binding it


def postgres_bin() -> Path:
    """The folder of initdb / pg_ctl / psql: PostgreSQL 15's, else the newest installed. Raises
    RuntimeError naming the fix when none is installed."""
    preferred = PG_ROOT / PREFERRED_VERSION / "bin"
    if (preferred / "initdb").is_file():
        return preferred
    found = sorted((p for p in PG_ROOT.glob("*/bin") if (p / "initdb").is_file()),
                   key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    if found:
        return found[-1]
    raise RuntimeError(f"PostgreSQL is not installed (no {preferred}/initdb): the lakehouse catalog tests need it; "
                       "run `make postgres` (apt-get install postgresql)")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """One running server (see the module docstring); `url(db)` names a database on it."""

    def __init__(self, folder: Path, bin_dir: Path) -> None:
        self.folder = folder
        self.bin_dir = bin_dir
        self.data = folder / "data"
        self.socket_dir = folder / "sockets"
        self.password = secrets.token_hex(12)
        self.port = 0
        self._as_postgres = os.geteuid() == 0

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        command = [*(["runuser", "-u", "postgres", "--"] if self._as_postgres else []), *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=self.folder,
                              env={**os.environ, "LC_ALL": "C.UTF-8"}, check=False)

    def _give_to_server_user(self, *paths: Path) -> None:
        if self._as_postgres:
            user = pwd.getpwnam("postgres")
            for path in paths:
                os.chown(path, user.pw_uid, user.pw_gid)

    def start(self) -> None:
        self.socket_dir.mkdir()
        password_file = self.folder / "password"
        password_file.write_text(self.password + "\n")
        self._give_to_server_user(self.folder, self.socket_dir, password_file)
        made = self._run(str(self.bin_dir / "initdb"), "-D", str(self.data), "-U", USER, "--auth-local=trust",
                         "--auth-host=scram-sha-256", f"--pwfile={password_file}", "--no-sync")
        password_file.unlink()
        if made.returncode != 0:
            raise RuntimeError(f"initdb failed: {made.stderr.strip() or made.stdout.strip()}")
        for _ in range(START_TRIES):
            self.port = free_port()
            started = self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-l", str(self.folder / "server.log"),
                                "-o", f"-p {self.port} -k {self.socket_dir} -h 127.0.0.1 -c fsync=off", "-w", "start")
            if started.returncode == 0:
                return
        log = (self.folder / "server.log").read_text(errors="replace") if (self.folder / "server.log").exists() else ""
        raise RuntimeError(f"PostgreSQL did not start: {started.stderr.strip()} {log[-2000:]}")

    def stop(self) -> None:
        if self.data.is_dir():
            self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run `sql` as the superuser over the socket folder (trusted); its output."""
        done = subprocess.run([str(self.bin_dir / "psql"), "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1",
                               "-h", str(self.socket_dir), "-p", str(self.port), "-U", USER, "-d", database,
                               "-c", sql], capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"psql {sql!r}: {done.stderr.strip()}")
        return done.stdout

    def create_database(self, name: str) -> str:
        """A new empty database; its URL (without the password)."""
        self.psql(f'create database "{name}"')
        return self.url(name)

    def url(self, database: str, with_password: bool = False) -> str:
        secret = f":{self.password}" if with_password else ""
        return f"postgresql://{USER}{secret}@127.0.0.1:{self.port}/{database}"

    def client_env(self) -> dict[str, str]:
        """What a client process needs to log in (libpq reads PGPASSWORD)."""
        return {"PGPASSWORD": self.password}

    def connections(self, database: str) -> int:
        return int(self.psql(f"select count(*) from pg_stat_activity where datname = '{database}'").strip())


@contextmanager
def running_server() -> Iterator[PostgresServer]:
    """A started server, stopped and its folder removed when the block ends."""
    bin_dir = postgres_bin()
    folder = Path(tempfile.mkdtemp(prefix="tracelake-pg-"))  # not under pytest's 0700 folders: postgres reads it
    server = PostgresServer(folder, bin_dir)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (server.data / "postmaster.pid").exists():
            time.sleep(0.1)
        shutil.rmtree(folder, ignore_errors=True)
