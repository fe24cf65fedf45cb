"""The client side of `sched-sim worker`: where the worker's socket lives, who may use it, and how a command line
is handed to it.

A worker (app/cli/worker_server.py, started by `sched-sim worker start`) is a process that has imported sim_core
and loaded the kernels from numba's cache, listening on a Unix socket. The console script asks it to run a command
line when one is live for this checkout and interpreter, with the same sources; otherwise the command runs in this
process as it always did. What it hands over is the command line, the working directory, the umask, the whole
environment, and its own standard input, output and error themselves (file descriptors passed over the socket):
the worker forks a child per command, which puts those descriptors in place and runs `main`, so the command
writes to the very same terminal, pipe or file, and relative paths resolve in the user's directory. The exit
status comes back over the socket.

Safety: the socket sits in a directory of the user's own (mode 0700), the socket itself is 0600, and both are
checked (owner, mode, kind) before each use; the worker checks its peer's uid too. A worker whose sources differ
from the caller's (a hash of sim_core's and app's files and of the interpreter) is never used, and told to exit.
One started with other settings that Python or numba read at start-up (NUMBA_*, PYTHON*, locale, BLAS threads,
Python's flags) is not used either. This module imports only the standard library: the path to the socket loads no numpy or numba.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import socket
import stat
import struct
import sys
from pathlib import Path

import app
import sim_core  # a package whose names load on first use: importing it loads no numpy

OPT_OUT_ENV = "SCHED_SIM_NO_WORKER"  # set (to anything but "" or "0"): every command runs in its own process
DIR_ENV = "SCHED_SIM_WORKER_DIR"  # where the sockets live (default: $XDG_RUNTIME_DIR/sched-sim, /tmp/sched-sim-UID)
NO_WORKER_FLAG = "--no-worker"
# Commands that never go to a worker: the worker's own, and the dashboard (a long-lived server of its own).
LOCAL_COMMANDS = frozenset({"worker", "serve"})
PROTOCOL = 1
# What Python and numba read once at start-up, so a worker started with other values would behave otherwise.
STARTUP_ENV_PREFIXES = ("NUMBA_", "PYTHON", "LC_")
STARTUP_ENV_NAMES = frozenset({"LANG", "LANGUAGE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"})
_HEADER = struct.Struct("!I")
MAX_MESSAGE = 16 << 20  # an environment and a command line fit many times over


class WorkerUnsafe(Exception):
    """The worker's directory or socket is not private to this user: never used."""


# ------------------------------------------------------------------ where, and whose ---------------------------
def worker_dir() -> Path:
    if os.environ.get(DIR_ENV):
        return Path(os.environ[DIR_ENV])
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return Path(runtime) / "sched-sim" if runtime else Path("/tmp") / f"sched-sim-{os.getuid()}"


def check_private(path: Path, st: os.stat_result, uid: int, kind: str) -> None:
    """Refuse `path` (its lstat `st`) unless it is a `kind` ("directory" or "socket") that `uid` owns and no one
    else may read, write or enter (mode bits for group and others all clear)."""
    is_kind = stat.S_ISDIR(st.st_mode) if kind == "directory" else stat.S_ISSOCK(st.st_mode)
    if not is_kind:
        raise WorkerUnsafe(f"{path} is not a {kind} (a link or another kind of file): not used")
    if st.st_uid != uid:
        raise WorkerUnsafe(f"{path} belongs to uid {st.st_uid}, not to this user (uid {uid}): not used")
    if st.st_mode & 0o077:
        raise WorkerUnsafe(f"{path} has mode {stat.S_IMODE(st.st_mode):04o}; it must be private to its owner "
                           f"({'0700' if kind == 'directory' else '0600'}): not used")


def private_dir(create: bool) -> Path:
    """The worker directory, checked (and made, mode 0700, with `create`)."""
    path = worker_dir()
    if create:
        try:
            path.mkdir(mode=0o700, parents=False)
        except FileExistsError:
            pass
        except FileNotFoundError:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            path.mkdir(mode=0o700, exist_ok=True)
    check_private(path, os.lstat(path), os.getuid(), "directory")
    return path


def checkout_roots() -> tuple[Path, Path]:
    """The sim_core and app packages this process runs (the sources a worker must share)."""
    return Path(sim_core.__file__).resolve().parent, Path(app.__file__).resolve().parent


def socket_path() -> Path:
    """One socket per user, checkout and interpreter."""
    key = "\0".join([*map(str, checkout_roots()), sys.executable])
    return worker_dir() / f"worker-{hashlib.sha1(key.encode()).hexdigest()[:12]}.sock"


def source_hash() -> str:
    """A hash of every file under sim_core/ and app/ (code and catalogue data) and of the interpreter."""
    h = hashlib.sha1(f"{sys.executable}\0{sys.version}\0".encode())
    for root in checkout_roots():
        for folder, subfolders, files in os.walk(root):
            subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".pyc"):
                    continue
                path = os.path.join(folder, name)
                h.update(f"\0{os.path.relpath(path, root)}\0".encode(errors="surrogateescape"))
                with open(path, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


def startup_settings(environ=os.environ) -> dict:
    """What this interpreter fixed at its start and a worker must share: the environment variables Python and
    numba read then, and Python's command-line flags (-O, -X utf8, ...), in their JSON form."""
    env = {k: v for k, v in environ.items() if k in STARTUP_ENV_NAMES or k.startswith(STARTUP_ENV_PREFIXES)}
    return {"env": env, "flags": [int(flag) for flag in sys.flags]}


# ------------------------------------------------------------------ messages -----------------------------------
def send_message(sock: socket.socket, message: dict, fds: tuple[int, ...] = ()) -> None:
    """A length-prefixed JSON object; `fds` ride along with its first bytes (SCM_RIGHTS)."""
    body = json.dumps(message).encode("ascii")  # ASCII: argv's and the environment's undecodable bytes escaped
    head = _HEADER.pack(len(body))
    if fds:
        socket.send_fds(sock, [head], list(fds))
    else:
        sock.sendall(head)
    sock.sendall(body)


def receive_message(sock: socket.socket, max_fds: int = 0) -> tuple[dict | None, list[int]]:
    """(message, received descriptors); (None, []) when the peer closed the connection first."""
    fds: list[int] = []
    if max_fds:
        head, fds, _, _ = socket.recv_fds(sock, _HEADER.size, max_fds)
    else:
        head = sock.recv(_HEADER.size)
    head += _receive_exactly(sock, _HEADER.size - len(head)) if head else b""
    if len(head) < _HEADER.size:
        return None, fds
    (size,) = _HEADER.unpack(head)
    if size > MAX_MESSAGE:
        raise ValueError(f"a worker message of {size} bytes (at most {MAX_MESSAGE})")
    body = _receive_exactly(sock, size)
    return (json.loads(body) if len(body) == size else None), fds


def _receive_exactly(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n > 0:
        chunk = sock.recv(n)
        if not chunk:
            break
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end (Linux's SO_PEERCRED); None where the platform does not say."""
    if not hasattr(socket, "SO_PEERCRED"):
        return None
    _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    return uid


# ------------------------------------------------------------------ the client ---------------------------------
def connect(timeout: float | None = None) -> socket.socket | None:
    """A connection to this checkout's live worker, its directory and socket checked; None when there is none
    (no socket, or nothing listening on it). WorkerUnsafe when what is there is not private to this user."""
    path = socket_path()
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    check_private(path.parent, os.lstat(path.parent), os.getuid(), "directory")
    check_private(path, st, os.getuid(), "socket")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        sock.close()
        return None
    if peer_uid(sock) not in (None, os.getuid()):
        sock.close()
        raise WorkerUnsafe(f"{path} is served by another user's process: not used")
    return sock


def ask(kind: str, timeout: float = 10.0) -> dict | None:
    """Send the worker a request without a command line ("status", "stop"); its answer, or None if none is live."""
    sock = connect(timeout)
    if sock is None:
        return None
    with sock:
        send_message(sock, {"protocol": PROTOCOL, "kind": kind})
        answer, _ = receive_message(sock)
    return answer


def command_word(argv: list[str]) -> str | None:
    return next((w for w in argv if not w.startswith("-")), None)


def wants_worker(argv: list[str], environ=os.environ) -> bool:
    """Whether this command line may go to a worker: a command is named (not a bare --help or --version), not one
    of LOCAL_COMMANDS, and neither --no-worker (before the command) nor SCHED_SIM_NO_WORKER opts out."""
    word = command_word(argv)
    if word is None or word in LOCAL_COMMANDS or environ.get(OPT_OUT_ENV, "") not in ("", "0"):
        return False
    return NO_WORKER_FLAG not in argv[:argv.index(word)]


def relay(argv: list[str]) -> int | None:
    """Run `argv` in this checkout's worker and return its exit status; None when it is to run here instead (no
    usable worker, or the command line should not go to one). Output reaches this process's own stdout and
    stderr, written there by the worker's child."""
    if not wants_worker(argv) or not _std_streams_open():
        return None
    try:
        sock = connect()
    except (WorkerUnsafe, OSError):
        return None  # `sched-sim worker status` says why; a command never fails for want of a worker
    if sock is None:
        return None
    with sock:
        try:
            send_message(sock, _run_request(argv), fds=(0, 1, 2))
            answer, _ = receive_message(sock)
        except (OSError, ValueError):
            return None  # nothing was run: run here
        if answer is None or "started" not in answer:
            return None  # a stale worker (it exits), or one started with other settings
        return _await_exit(sock)


def _std_streams_open() -> bool:
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
    except OSError:
        return False
    return True


def _run_request(argv: list[str]) -> dict:
    umask = os.umask(0o022)
    os.umask(umask)
    return {"protocol": PROTOCOL, "kind": "run", "source_hash": source_hash(), "startup": startup_settings(),
            "argv": argv, "cwd": os.getcwd(), "umask": umask, "env": dict(os.environ),
            "streams": [stream_spec(s) for s in (sys.stdin, sys.stdout, sys.stderr)]}


def stream_spec(stream) -> dict | None:
    """How this process's standard stream encodes and buffers text, for the child to open its own the same way."""
    if stream is None or not isinstance(stream, io.TextIOWrapper):
        return None
    return {"encoding": stream.encoding, "errors": stream.errors, "line_buffering": stream.line_buffering,
            "write_through": stream.write_through, "raw": isinstance(stream.buffer, io.FileIO)}


def _await_exit(sock: socket.socket) -> int:
    """Wait for the child's exit status; an interrupt here (Ctrl-C) is passed on to it, as if it ran here. (Sent
    from the signal handler: the read it arrives in resumes where it was, PEP 475.)"""

    def pass_on(signum, frame):
        try:
            send_message(sock, {"kind": "interrupt"})
        except OSError:
            pass

    previous = signal.signal(signal.SIGINT, pass_on)
    try:
        answer, _ = receive_message(sock)
    except (OSError, ValueError):
        answer = None
    finally:
        signal.signal(signal.SIGINT, previous)
    if answer is None or "exit" not in answer:
        print("error: the sched-sim worker stopped before the command finished", file=sys.stderr)
        return 1
    return int(answer["exit"])
