"""`sched-sim worker` (app/cli/worker.py, worker_server.py): a command run by the worker prints byte for byte what
it prints in its own process and exits with the same status; a worker of other sources is never used; its
directory and socket are private to their owner and checked before use; it goes away cleanly.

Every command here runs as the console script does (app.cli.entry) in a fresh process, against a worker of the
tests' own (its directory under tmp): the count of commands it served tells whether it ran them."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from app.cli import worker
from app.cli.commands import worker as worker_command

ROOT = Path(__file__).resolve().parent.parent
SCHED_SIM = "import sys; from app.cli import entry; sys.argv[0] = 'sched-sim'; entry()"
STEADY = "arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{i * 0.1:.1f},{200 + 37 * i},{20 + i}\n" for i in range(30))


def cli(args: list[str], env: dict, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCHED_SIM, *args], env=env, cwd=cwd, capture_output=True,
                          timeout=600)


def env_for(root: Path = ROOT, **extra) -> dict:
    """A caller's environment with a worker directory of its own, not yet made. Under /tmp, not pytest's tmp_path:
    a Unix socket's path is limited to 107 bytes, which pytest's paths under xdist (and CI's) pass."""
    env = {k: v for k, v in os.environ.items() if k != worker.OPT_OUT_ENV}
    folder = Path(tempfile.mkdtemp(prefix="ssw-", dir="/tmp")) / "sockets"
    return {**env, "PYTHONPATH": str(root), worker.DIR_ENV: str(folder), **extra}


def status(env: dict, cwd: Path = ROOT) -> dict:
    return json.loads(cli(["worker", "status", "--json"], env, cwd).stdout)


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """A worker of this checkout, started as a user starts it; stopped at the end."""
    env = env_for()
    started = cli(["worker", "start", "--idle-timeout", "900"], env)
    assert started.returncode == 0, started.stderr.decode()
    yield env
    cli(["worker", "stop"], env)


def served(env: dict) -> int:
    return status(env)["served"]


COMMANDS = [
    ["list"],
    ["list", "--json"],
    ["run", "--num-requests", "10"],
    ["run", "--num-requests", "10", "--json"],
    ["compare", "--schedulers", "fcfs,chunked", "--num-requests", "12", "--json"],
    ["run", "--token-budget", "-5"],  # a user error: one line on stderr, status 2
    ["run", "--help"],
    ["run", "--trace", "steady.csv", "--scheduler", "chunked", "--token-budget", "512", "--trace-out", "t.json"],
    ["run", "--trace", "missing.csv"],  # a relative path that is not there, in the user's directory
]


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_output_is_byte_identical_with_and_without_the_worker(live, tmp_path, args):
    (tmp_path / "steady.csv").write_text(STEADY, encoding="utf-8")
    before = served(live)
    through = cli(args, live, cwd=tmp_path)
    assert served(live) == before + 1, "the worker did not run it"
    trace_through = (tmp_path / "t.json").read_bytes() if (tmp_path / "t.json").exists() else None
    here = cli(args, {**live, worker.OPT_OUT_ENV: "1"}, cwd=tmp_path)
    assert served(live) == before + 1
    assert (through.returncode, through.stdout, through.stderr) == (here.returncode, here.stdout, here.stderr)
    if trace_through is not None:  # written in the user's directory, the same file
        assert trace_through == (tmp_path / "t.json").read_bytes()
    assert through.stdout or through.stderr


def test_two_clients_at_once_each_get_their_own_directory(live, tmp_path):
    """Each command's child enters its own client's directory: two at once read their own `steady.csv`."""
    folders = [tmp_path / "a", tmp_path / "b"]
    for i, folder in enumerate(folders):
        folder.mkdir()
        rows = STEADY.splitlines()[: 12 + 10 * i]
        (folder / "steady.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    args = ["run", "--trace", "steady.csv", "--json"]
    before = served(live)
    clients = [subprocess.Popen([sys.executable, "-c", SCHED_SIM, *args], env=live, cwd=folder,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE) for folder in folders]
    outputs = [client.communicate(timeout=300) for client in clients]
    assert served(live) == before + 2
    for folder, (out, err) in zip(folders, outputs, strict=True):
        here = cli(args, {**live, worker.OPT_OUT_ENV: "1"}, cwd=folder)
        assert (out, err) == (here.stdout, here.stderr)
    assert outputs[0][0] != outputs[1][0]


def test_no_worker_flag_and_environment_opt_out(live):
    before = served(live)
    flagged = cli(["--no-worker", "list", "--json"], live)
    opted_out = cli(["list", "--json"], {**live, worker.OPT_OUT_ENV: "1"})
    assert flagged.returncode == opted_out.returncode == 0 and flagged.stdout == opted_out.stdout
    assert served(live) == before
    assert cli(["list", "--json"], {**live, worker.OPT_OUT_ENV: "0"}).returncode == 0  # "0" does not opt out
    assert served(live) == before + 1


@pytest.mark.parametrize("flags, env", [([], {"NUMBA_OPT": "2"}), (["-O"], {})], ids=["NUMBA_OPT", "python -O"])
def test_a_worker_started_with_other_startup_settings_is_not_used(live, flags, env):
    """NUMBA_*, PYTHON* and Python's flags are fixed at start-up: a caller with others runs in its own process."""
    before, pid = served(live), status(live)["pid"]
    other = subprocess.run([sys.executable, *flags, "-c", SCHED_SIM, "list", "--json"], env={**live, **env},
                           cwd=ROOT, capture_output=True, timeout=120)
    assert other.returncode == 0 and json.loads(other.stdout)
    assert served(live) == before and status(live)["pid"] == pid  # not used, still running


def test_the_client_path_imports_no_numpy(live):
    code = ("import sys; from app.cli import worker; code = worker.relay(['list', '--json']); "
            "print(code, 'numpy' in sys.modules, 'numba' in sys.modules, file=sys.stderr)")
    before = served(live)
    done = subprocess.run([sys.executable, "-c", code], env=live, cwd=ROOT, capture_output=True, timeout=120)
    assert done.stderr.decode().split() == ["0", "False", "False"], done.stderr.decode()
    assert served(live) == before + 1


def test_an_interrupt_reaches_the_command_as_in_its_own_process(live):
    args = ["run", "--num-requests", "200000", "--rate", "1000", "--json"]
    client = subprocess.Popen([sys.executable, "-c", SCHED_SIM, *args], env=live, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while status(live)["commands_running"] == 0 and client.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    client.send_signal(signal.SIGINT)
    out, err = client.communicate(timeout=120)
    assert (client.returncode, out, err) == (130, b"", b"interrupted\n")


def test_a_directory_the_worker_cannot_enter_is_refused_before_anything_is_written(live):
    """The client then runs the command itself (relay answers None)."""
    code = ("import json; from app.cli import worker; s = worker.connect(); r = worker._run_request(['list']); "
            "r['cwd'] = '/nonexistent-sched-sim-dir'; worker.send_message(s, r, fds=(0, 1, 2)); "
            "print(json.dumps(worker.receive_message(s)[0]))")
    done = subprocess.run([sys.executable, "-c", code], env=live, cwd=ROOT, capture_output=True, timeout=120)
    answer = json.loads(done.stdout.decode().splitlines()[-1])
    assert "started" not in answer and "/nonexistent-sched-sim-dir" in answer["refused"], answer


def test_a_killed_client_ends_its_command(live):
    client = subprocess.Popen([sys.executable, "-c", SCHED_SIM, "run", "--num-requests", "200000", "--rate", "1000"],
                              env=live, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait(lambda: status(live)["commands_running"] == 1 or client.poll() is not None)
    assert client.poll() is None, "it ended before it could be killed"
    client.kill()
    client.wait()
    _wait(lambda: status(live)["commands_running"] == 0, timeout=60)


# ----- private to its owner -----
def test_the_live_worker_directory_and_socket_are_private(live):
    path = Path(status(live)["socket"])
    folder, sock = os.lstat(path.parent), os.lstat(path)
    assert stat.S_ISDIR(folder.st_mode) and stat.S_IMODE(folder.st_mode) == 0o700
    assert stat.S_ISSOCK(sock.st_mode) and stat.S_IMODE(sock.st_mode) == 0o600
    assert folder.st_uid == sock.st_uid == os.getuid()


@pytest.mark.parametrize("target, mode", [("directory", 0o755), ("socket", 0o666)])
def test_a_worker_open_to_others_is_refused(live, target, mode):
    path = Path(status(live)["socket"])
    place = path.parent if target == "directory" else path
    before = served(live)
    os.chmod(place, mode)
    try:
        here = cli(["list", "--json"], live)
        assert here.returncode == 0 and json.loads(here.stdout)  # ran in its own process
        shown = cli(["worker", "status"], live)
        assert shown.returncode == 1 and f"{mode:04o}" in shown.stderr.decode() and str(place) in shown.stderr.decode()
    finally:
        os.chmod(place, 0o700 if target == "directory" else 0o600)
    assert served(live) == before


def test_check_private_refuses_another_owner_a_link_and_another_kind(tmp_path):
    folder = tmp_path / "d"
    folder.mkdir(mode=0o700)
    uid = os.getuid()
    worker.check_private(folder, os.lstat(folder), uid, "directory")
    with pytest.raises(worker.WorkerUnsafe, match=f"belongs to uid {uid}, not to this user"):
        worker.check_private(folder, os.lstat(folder), uid + 1, "directory")  # as another user sees it
    (tmp_path / "link").symlink_to(folder)
    with pytest.raises(worker.WorkerUnsafe, match="not a directory"):
        worker.check_private(tmp_path / "link", os.lstat(tmp_path / "link"), uid, "directory")
    (folder / "f.sock").write_text("", encoding="utf-8")
    os.chmod(folder / "f.sock", 0o600)
    with pytest.raises(worker.WorkerUnsafe, match="not a socket"):
        worker.check_private(folder / "f.sock", os.lstat(folder / "f.sock"), uid, "socket")


def test_peer_uid_is_this_users():
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        assert worker.peer_uid(a) in (None, os.getuid())


SYSTEM_PYTHON = "/usr/bin/python3"  # one that another user may run (the tests' own may sit in root's home)


@pytest.mark.skipif(os.getuid() != 0 or not os.access(SYSTEM_PYTHON, os.X_OK), reason="needs root and /usr/bin/python3")
def test_another_user_cannot_connect(live):
    """A process of uid 65534 (nobody) cannot reach the socket: the directory keeps it out, and the socket's
    own mode would even if the directory were opened."""
    path = status(live)["socket"]
    probe = "\n".join(["import socket, sys", "s = socket.socket(socket.AF_UNIX)", "try:",
                       "    s.connect(sys.argv[1])", "    print('connected')", "except PermissionError:",
                       "    print('refused')"])
    for folder_mode in (0o700, 0o711):
        os.chmod(Path(path).parent, folder_mode)
        try:
            done = subprocess.run([SYSTEM_PYTHON, "-c", probe, path], capture_output=True, timeout=60, user=65534,
                                  group=65534, extra_groups=[], cwd="/")
        finally:
            os.chmod(Path(path).parent, 0o700)
        assert done.stdout.decode().strip() == "refused", (folder_mode, done.stderr.decode())


# ----- goes away cleanly; a stale one is never used -----
def test_stop_removes_the_socket_and_commands_run_here_after(tmp_path):
    env = env_for()
    assert cli(["worker", "stop"], env).stdout == b"no worker running\n"
    assert cli(["worker", "start", "--idle-timeout", "900"], env).returncode == 0
    pid, path = status(env)["pid"], Path(status(env)["socket"])
    assert status(env)["running"] is True and status(env)["commands_running"] == 0
    assert cli(["worker", "start"], env).stdout.decode().startswith(f"a worker is already running: pid {pid}")
    stopped = cli(["worker", "stop"], env)
    assert stopped.returncode == 0 and stopped.stdout.decode() == f"worker stopped: pid {pid}\n"
    assert not path.exists()  # gone once `stop` returns; the process ends right after
    _wait(lambda: not _alive(pid), timeout=30)
    assert cli(["worker", "status"], env).returncode == 1
    assert status(env) == {"running": False, "socket": str(path)}
    here = cli(["list", "--json"], env)
    assert here.returncode == 0 and json.loads(here.stdout)


def test_a_killed_worker_leaves_a_socket_that_is_passed_over(tmp_path):
    env = env_for()
    assert cli(["worker", "start", "--idle-timeout", "900"], env).returncode == 0
    pid, path = status(env)["pid"], Path(status(env)["socket"])
    os.kill(pid, signal.SIGKILL)
    _wait(lambda: not _alive(pid))
    assert path.exists()  # nothing removed it
    here = cli(["list", "--json"], env)
    assert here.returncode == 0 and json.loads(here.stdout)
    assert cli(["worker", "status"], env).returncode == 1
    assert cli(["worker", "start", "--idle-timeout", "900"], env).returncode == 0  # a new one takes its place
    assert status(env)["pid"] != pid
    cli(["worker", "stop"], env)


def test_sigterm_stops_the_worker_and_removes_its_socket(tmp_path):
    env = env_for()
    assert cli(["worker", "start", "--idle-timeout", "900"], env).returncode == 0
    pid, path = status(env)["pid"], Path(status(env)["socket"])
    os.kill(pid, signal.SIGTERM)
    _wait(lambda: not _alive(pid), timeout=30)
    assert not path.exists()


def test_an_idle_worker_exits_and_removes_its_socket(tmp_path):
    env = env_for()
    assert cli(["worker", "start", "--idle-timeout", "1"], env).returncode == 0
    pid, path = status(env)["pid"], Path(status(env)["socket"])
    _wait(lambda: not _alive(pid), timeout=30)
    assert not path.exists()


def test_a_stale_worker_is_never_used_and_exits(tmp_path):
    """A worker of a copy of the checkout serves it; once a file of the copy changes, a command runs in its own
    process (with the changed sources) and the worker, told it is stale, exits."""
    copy = tmp_path / "checkout"
    for package in ("sim_core", "app"):
        shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    env = env_for(root=copy)
    server = subprocess.Popen([sys.executable, "-c", worker_command.BOOT, str(copy), "--idle-timeout", "900",
                               "--no-warm"], env=env, stdin=subprocess.DEVNULL)
    try:
        _wait(lambda: cli(["worker", "status"], env, cwd=copy).returncode == 0)
        first = cli(["list", "--json"], env, cwd=copy)
        assert first.returncode == 0 and status(env, copy)["served"] == 1
        usage = copy / "app" / "cli" / "usage.py"
        usage.write_text(usage.read_text(encoding="utf-8").replace('f"error: {line}"', 'f"error (changed): {line}"'),
                         encoding="utf-8")
        changed = cli(["run", "--token-budget", "-5"], env, cwd=copy)
        assert changed.returncode == 2 and changed.stderr.startswith(b"error (changed): --token-budget")
        assert server.wait(timeout=30) == 0  # told it is stale, it exited
        assert not any(p.suffix == ".sock" for p in Path(env[worker.DIR_ENV]).iterdir())
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def test_idle_timeout_out_of_range_names_the_flag(tmp_path):
    env = env_for()
    for bad in ("0", "-3", "soon", "604801"):
        done = cli(["worker", "start", "--idle-timeout", bad], env)
        assert done.returncode == 2 and done.stderr.decode().startswith("error: --idle-timeout: must be a whole "
                                                                       "number of seconds from 1 to 604800")
    assert not Path(env[worker.DIR_ENV]).exists()


def test_which_command_lines_go_to_a_worker():
    assert worker.wants_worker(["run", "--num-requests", "10"], {})
    assert not worker.wants_worker(["--no-worker", "run"], {})
    assert not worker.wants_worker(["run"], {worker.OPT_OUT_ENV: "1"})
    assert worker.wants_worker(["run"], {worker.OPT_OUT_ENV: "0"})
    assert not worker.wants_worker(["--help"], {}) and not worker.wants_worker([], {})
    assert not worker.wants_worker(["worker", "status"], {}) and not worker.wants_worker(["serve"], {})


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent to read its status counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _wait(condition, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_child_whose_client_has_gone_is_told_so_quietly():
    """A client interrupted while its command was handed over closes the connection before the child says it
    started: the child must end quietly (CI once caught a BrokenPipeError traceback on the client's stderr)."""
    from app.cli.worker_server import _told

    here, client = socket.socketpair()
    client.close()
    assert _told(here, {"started": 1}) is False
    here.close()
