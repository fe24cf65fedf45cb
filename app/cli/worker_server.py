"""The `sched-sim worker` process: sim_core imported and its kernels loaded once, then one forked child per command
line a client hands over (app/cli/worker.py says what it hands over and why).

A child per command keeps each run as separate as its own process would be: it changes directory, umask,
environment and standard streams freely, two clients never race on them, and what a run leaves behind (caches,
globals) dies with it; a fork costs a few milliseconds where imports and kernel loads cost hundreds. The worker
itself serves one connection at a time, only to sort it (status, stop, run) and fork; it exits on `stop`, on a
request from a caller whose sources differ (it is stale), when its socket was removed or replaced, on SIGTERM, and
after its idle timeout with no command running.

    python -c "...; from app.cli.worker_server import main; main(['--idle-timeout', '1800'])"   (worker start)
"""

from __future__ import annotations

import _thread
import argparse
import contextlib
import gc
import io
import os
import resource
import signal
import socket
import sys
import threading
import time
import traceback

import sim_core

from . import commands, worker
from .dispatch import main as cli_main
from .usage import EXIT_INTERNAL, EXIT_INTERRUPTED

POLL_S = 1.0  # how often the idle worker looks at its children, its socket and its idle time
CLIENT_TIMEOUT_S = 10.0  # a client has this long to send its request (the worker sorts one at a time)


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(prog="sched-sim worker (server)")
    ap.add_argument("--idle-timeout", type=float, required=True)
    ap.add_argument("--no-warm", action="store_true", help="skip loading the kernels (tests of the plumbing)")
    a = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    path = worker.socket_path()
    worker.private_dir(create=True)
    if not a.no_warm:
        preload()
    # What the start built stays put: the children's collections never walk it (nor copy its pages to do so).
    gc.collect()
    gc.freeze()
    Server(path, a.idle_timeout).serve()


# Run once at start, output discarded: what a first run does once per process (tables read, validity coverage
# indexed, first-use caches filled, the default deployment's arrays allocated) is then done for every child.
PRELOAD_COMMANDS = (["run", "--num-requests", "10"], ["run", "--num-requests", "10", "--json"])


def preload() -> None:
    """Every command's module, every single-engine kernel loaded from numba's cache (compiled if it is cold), and
    PRELOAD_COMMANDS run."""
    commands.load_all()
    sim_core.warm_up()
    for argv in PRELOAD_COMMANDS:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            cli_main(argv)


class Server:
    def __init__(self, path, idle_timeout: float):
        self.path, self.idle_timeout = path, idle_timeout
        self.source_hash = worker.source_hash()
        self.startup = worker.startup_settings()
        self.started_at, self.served, self.children = time.time(), 0, set()
        self.stopping = False
        self.listener = self._listen()
        self.inode = os.lstat(path).st_ino

    def _listen(self) -> socket.socket:
        """Bind under a temporary name with mode 0600 from the start (umask), then move it into place: a client
        never finds a socket with other permissions, nor a half-made one."""
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        previous = os.umask(0o177)
        try:
            listener.bind(str(temporary))
        finally:
            os.umask(previous)
        os.chmod(temporary, 0o600)
        listener.listen(16)
        os.replace(temporary, self.path)
        listener.settimeout(POLL_S)
        return listener

    def serve(self) -> None:
        last_active = time.monotonic()
        try:
            while not self.stopping and self._still_mine():
                self._reap()
                if not self.children and time.monotonic() - last_active > self.idle_timeout:
                    break
                try:
                    conn, _ = self.listener.accept()
                except TimeoutError:
                    continue
                last_active = time.monotonic()
                with conn:
                    self._sort(conn)
        finally:
            self.listener.close()
            if self._still_mine():
                os.unlink(self.path)

    def _still_mine(self) -> bool:
        try:
            return os.lstat(self.path).st_ino == self.inode
        except FileNotFoundError:
            return False

    def _reap(self) -> None:
        for pid in list(self.children):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                self.children.discard(pid)

    def _sort(self, conn: socket.socket) -> None:
        """Answer a status or stop request, or fork a child for a command line."""
        conn.settimeout(CLIENT_TIMEOUT_S)
        fds: list[int] = []
        try:
            if worker.peer_uid(conn) not in (None, os.getuid()):
                return
            request, fds = worker.receive_message(conn, max_fds=3)
            answer = self._answer(request, fds)
            if answer is not None:
                worker.send_message(conn, answer)
            else:
                self._fork(conn, request, fds)
        except (OSError, ValueError) as e:  # a client that went away or sent garbage: the next one is served
            print(f"worker: a request failed: {e!r}", file=sys.stderr, flush=True)
        finally:
            for fd in fds:
                os.close(fd)

    def _answer(self, request: dict | None, fds: list[int]) -> dict | None:
        """The answer to a request that runs nothing; None for a command line to run."""
        if not isinstance(request, dict) or request.get("protocol") != worker.PROTOCOL:
            return {"error": f"not a sched-sim worker request of protocol {worker.PROTOCOL}"}
        kind = request.get("kind")
        if kind == "status":
            return self.status()
        if kind == "stop":
            self.stopping = True
            return {"stopping": True, "pid": os.getpid()}
        if kind != "run":
            return {"error": f"unknown request kind {kind!r}"}
        if request.get("source_hash") != self.source_hash:
            self.stopping = True  # the sources changed since this worker loaded them: it is of no more use
            return {"stale": True, "pid": os.getpid()}
        if request.get("startup") != self.startup:
            return {"other_env": True, "pid": os.getpid()}
        if len(fds) != 3:
            return {"error": "a command line comes with its stdin, stdout and stderr"}
        return None

    def status(self) -> dict:
        self._reap()
        children = resource.getrusage(resource.RUSAGE_CHILDREN)  # the finished commands' CPU (bench_startup)
        return {"pid": os.getpid(), "socket": str(self.path), "source_hash": self.source_hash,
                "python": sys.executable, "started_at": self.started_at, "idle_timeout_s": self.idle_timeout,
                "served": self.served, "commands_running": len(self.children),
                "commands_cpu_s": children.ru_utime + children.ru_stime}

    def _fork(self, conn: socket.socket, request: dict, fds: list[int]) -> None:
        pid = os.fork()
        if pid == 0:  # the child: never returns
            try:
                self.listener.close()
                run_child(conn, request, fds)
            except BaseException:
                traceback.print_exc()
            os._exit(EXIT_INTERNAL)
        self.children.add(pid)
        self.served += 1


# ------------------------------------------------------------------ the child ----------------------------------
def run_child(conn: socket.socket, request: dict, fds: list[int]) -> None:
    """Become the client's command: its directory, umask, environment, standard streams and command line; run it
    as the console script would (app.cli.entry); send the exit status; exit. Where its directory cannot be entered
    here, the client is told before anything is written, and runs the command itself."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    conn.settimeout(None)
    try:
        os.chdir(request["cwd"])
    except OSError as e:
        worker.send_message(conn, {"refused": f"cannot enter {request['cwd']!r}: {e.strerror}"})
        os._exit(0)
    os.umask(int(request["umask"]))
    os.environ.clear()
    os.environ.update(request["env"])
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    specs = request["streams"]
    sys.stdin = sys.__stdin__ = _text_stream(0, "rb", specs[0])
    sys.stdout = sys.__stdout__ = _text_stream(1, "wb", specs[1])
    sys.stderr = sys.__stderr__ = _text_stream(2, "wb", specs[2])
    argv = [str(word) for word in request["argv"]]
    sys.argv = ["sched-sim", *argv]
    if not _told(conn, {"started": os.getpid()}):
        os._exit(EXIT_INTERRUPTED)  # the client left (its Ctrl-C) before the command started: nothing to run
    threading.Thread(target=_watch_client, args=(conn,), daemon=True).start()
    code = _run_as_entry(argv)
    _told(conn, {"exit": code})
    os._exit(0)


def _told(conn: socket.socket, message: dict) -> bool:
    """Send `message` to the client; False when it has gone. A client interrupted while its command was being
    handed over has already said "interrupted" and exited 130: a traceback here would land on its stderr."""
    try:
        worker.send_message(conn, message)
    except (BrokenPipeError, ConnectionResetError):
        return False
    return True


def _text_stream(fd: int, mode: str, spec: dict | None):
    """A standard stream over `fd` made as Python makes its own (the buffer size of the file, "\\n" newlines),
    with the client's encoding, errors and buffering."""
    if spec is None:
        return None
    binary = open(fd, mode, buffering=0 if spec["raw"] else -1, closefd=False)
    return io.TextIOWrapper(binary, encoding=spec["encoding"], errors=spec["errors"], newline="\n",
                            line_buffering=spec["line_buffering"], write_through=spec["write_through"])


def _watch_client(conn: socket.socket) -> None:
    """The client's Ctrl-C arrives as a message and becomes a KeyboardInterrupt here, as in its own process; a
    client that went away (killed, its connection closed) ends the command."""
    while True:
        try:
            message, _ = worker.receive_message(conn)
        except (OSError, ValueError):
            message = None
        if message is None:
            os._exit(EXIT_INTERNAL)
        if message.get("kind") == "interrupt":
            _thread.interrupt_main()


def _run_as_entry(argv: list[str]) -> int:
    """main(argv), then what the interpreter's exit would do: flush the streams, wait for threads and child
    processes the command left running."""
    try:
        code = cli_main(argv)
    except BaseException:  # what the interpreter prints of an exception nothing caught, and its status
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError, AttributeError):
            pass
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    multiprocessing = sys.modules.get("multiprocessing")
    for process in multiprocessing.active_children() if multiprocessing is not None else ():
        process.join()
    return code
