"""The server/client launcher (commstack.run.pair): rendezvous, a taken port, and each side ending in time
with a named error and nothing left running. Small Python servers stand in for the tools, and the real
fi_pingpong where it is installed (Debian: libfabric-bin)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from commstack.run import pair
from commstack.slurm.config import free_ports

PY = shlex.quote(sys.executable)
SERVER = (f"{PY} -u -c \"import socket,sys; s=socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(); "
          f"c,_=s.accept(); c.sendall(b'pong'); print('served')\" {{port}}")
CLIENT = (f"{PY} -u -c \"import socket,sys; c=socket.create_connection((sys.argv[1], int(sys.argv[2]))); "
          f"print('got', c.recv(4).decode())\" {{host}} {{port}}")
SLEEPER = f"{PY} -c \"import time; time.sleep(600)\" {{port}}"


class Sink:
    def __init__(self):
        self.data = b""

    def write(self, b):
        self.data += b

    def flush(self):
        pass


def gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


def run_pair(tmp_path, server=SERVER, client=CLIENT, timeout=20.0, ports=None):
    rv = tmp_path / "rv"
    rv.mkdir(mode=0o700)
    out, err, result = Sink(), Sink(), {}
    deadline = time.monotonic() + timeout

    def side():
        try:
            result["server"] = pair.serve(server, rv, deadline, ports, host="127.0.0.1", sink=err)
        except pair.PairError as e:
            result["server"] = e
    t = threading.Thread(target=side)
    t.start()
    try:
        result["client"] = pair.connect(client, rv, deadline, out)
    except pair.PairError as e:
        result["client"] = e
    t.join(timeout + 5)
    return result, out.data.decode(), err.data.decode(), rv


def test_server_and_client_meet(tmp_path):
    result, out, err, rv = run_pair(tmp_path)
    assert result == {"server": 0, "client": 0}
    first, rest = out.split("\n", 1)
    assert first.startswith(pair.CLIENT_LINE) and first.endswith("127.0.0.1 " + first.rsplit(" ", 1)[1])
    assert rest == "got pong\n" and err == "served\n"
    assert (rv / "server.json").stat().st_mode & 0o777 == 0o644 and sorted(p.name for p in rv.iterdir()) == [
        "client-ended.json", "client-started.json", "server.json"]


def test_a_taken_port_is_tried_again(tmp_path):
    import socket
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    busy = taken.getsockname()[1]
    ports = iter([busy, free_ports(1)[0]])
    try:
        result, out, err, rv = run_pair(tmp_path, ports=ports)
    finally:
        taken.close()
    assert result == {"server": 0, "client": 0}
    assert "Address already in use" in err and f"-p {busy}" not in out and out.endswith("got pong\n")


def test_client_whose_server_never_starts_ends_at_the_deadline(tmp_path):
    rv = tmp_path / "rv"
    rv.mkdir(mode=0o700)
    start = time.monotonic()
    with pytest.raises(pair.PairError, match="the server never published its address before the step's timeout"):
        pair.connect(CLIENT, rv, time.monotonic() + 1.0, Sink())
    assert time.monotonic() - start >= 1.0  # it waited for the deadline (an upper bound would measure the machine)


def test_server_without_client_is_killed_at_the_deadline(tmp_path):
    rv = tmp_path / "rv"
    rv.mkdir(mode=0o700)
    pids = []
    real = pair.Tool.__init__

    def spy(self, argv, sink):
        real(self, argv, sink)
        pids.append(self.proc.pid)
    start = time.monotonic()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pair.Tool, "__init__", spy)
        with pytest.raises(pair.PairError, match="no client came to the server before the step's timeout"):
            pair.serve(SERVER, rv, time.monotonic() + 1.5, host="127.0.0.1", sink=Sink())
    assert time.monotonic() - start >= 1.5 and pids and all(gone(p) for p in pids)
    assert "no client came" in (rv / "server-failed.json").read_text()


def test_a_server_that_fails_tells_the_client_at_once(tmp_path):
    bad = f"{PY} -c \"import sys; print('bind failed: no such provider'); sys.exit(3)\" {{port}}"
    result, out, err, rv = run_pair(tmp_path, server=bad, timeout=30)  # at once: not the deadline's error
    assert isinstance(result["server"], pair.PairError) and result["server"].status == 3
    assert "exited with status 3 before it listened" in str(result["server"])
    assert isinstance(result["client"], pair.PairError) and "the server did not start" in str(result["client"])
    assert out == ""


def test_a_server_that_outlives_its_client_is_killed(tmp_path, monkeypatch):
    monkeypatch.setattr(pair, "GRACE", 0.5)
    quits = f"{PY} -c \"print('no')\" {{host}} {{port}}"
    hangs = (f"{PY} -c \"import socket,sys,time; s=socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); "
             f"s.listen(); time.sleep(600)\" {{port}}")
    result, out, err, rv = run_pair(tmp_path, server=hangs, client=quits, timeout=30)  # killed: not the deadline's
    assert result["client"] == 0 and isinstance(result["server"], pair.PairError)
    assert "the client ended (status 0) and the server did not within 0 s: killed" in str(result["server"])


def test_the_command_line_takes_its_role_from_slurm(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "SLURM_PROCID": "1"}
    proc = subprocess.run([sys.executable, "-m", "commstack.run.pair", str(tmp_path / "rv"), "1", "--server", SLEEPER,
                           "--client", CLIENT], capture_output=True, text=True, env=env, timeout=30)
    assert proc.returncode == pair.TIMED_OUT and proc.stdout == ""
    assert proc.stderr == ("commstack pair: error: client: the server never published its address before the step's "
                           "timeout (it did not start, or it never listened)\n")
    assert (tmp_path / "rv").stat().st_mode & 0o777 == 0o700
    proc = subprocess.run([sys.executable, "-m", "commstack.run.pair", str(tmp_path / "rv"), "1", "--server", SLEEPER,
                           "--client", CLIENT], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2 and "SLURM_PROCID (OMPI_COMM_WORLD_RANK) is not 0 or 1" in proc.stderr


@pytest.mark.skipif(not shutil.which("fi_pingpong"), reason="no fi_pingpong (Debian: apt-get install libfabric-bin)")
def test_real_fi_pingpong_pair(tmp_path):
    from commstack.results.parse import parse_output
    from commstack.tools import fi_pingpong
    result, out, err, rv = run_pair(tmp_path, server="fi_pingpong -p tcp -e rdm -I 5 -B {port}",
                                    client="fi_pingpong -p tcp -e rdm -I 5 -P {port} {host}", timeout=60)
    assert result == {"server": 0, "client": 0}
    sweep = parse_output("fi_pingpong", out, [])
    assert sweep.sizes == fi_pingpong.DEFAULT_SIZES and sweep.meta["args"][-1] == "127.0.0.1"
