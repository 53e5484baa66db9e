"""A server and a client tool (fi_pingpong, ucx_perftest) as one Slurm step of 2 tasks on a node pair.

Task 0 serves on a free port and publishes it in RENDEZVOUS/server.json once the server's own socket listens,
task 1 connects; both end by TIMEOUT with a named error (docs/harness.md#the-lower-layers-fi_pingpong-and-ucx_perftest).
A tool's argv is tools.base's `pair_command()`, with RENDEZVOUS and TIMEOUT filled in per repeat (`placed`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

from commstack.files import private_dir, write_json
from commstack.slurm import procs
from commstack.slurm.config import free_ports
from commstack.tools.base import CLIENT_LINE, MODULE, RENDEZVOUS, TIMEOUT

GRACE = 10.0      # seconds a server may outlive its client
POLL = 0.1
PORT_TRIES = 5
TIMED_OUT = 124   # as timeout(1)
IN_USE = ("Address already in use", "EADDRINUSE", "ret=-98")


class PairError(Exception):
    """A named reason the pair did not run: printed as `commstack pair: error: ...`."""

    def __init__(self, message: str, status: int = TIMED_OUT):
        super().__init__(message)
        self.status = status


def with_variables(argv: list[str], variables: dict[str, str]) -> list[str] | None:
    """A pair step's argv with the benchmark's variables for its tools alone (`--env NAME=VALUE`: none of them
    reaches this launcher's Python); None for any other argv."""
    if argv[:len(MODULE)] != MODULE:
        return None
    return [*MODULE, *(f"--env={k}={v}" for k, v in variables.items()), *argv[len(MODULE):]]


def placed(argv: list[str], rendezvous: Path, step_timeout_s: int) -> list[str]:
    """`argv` with a repeat's rendezvous directory and the pair's own timeout, short of the step's so that
    the pair names its error before Slurm or the runner end the step. Other argvs hold no placeholder."""
    own = max(1, step_timeout_s - max(5, step_timeout_s // 10))
    return [str(rendezvous) if a == RENDEZVOUS else str(own) if a == TIMEOUT else a for a in argv]


def repeat_step(step, outdir: Path):
    """One repeat of a launch.Step: a pair tool's launcher gets the repeat's rendezvous directory (outdir/pair)
    and its timeout; an MPI program's argv has no placeholder for them."""
    return dataclasses.replace(step, argv=placed(step.argv, outdir / "pair", step.timeout_s))


def address() -> str:
    """The address the client reaches this node at: COMMSTACK_PAIR_HOST, else this node's source address
    towards the node srun ran on (SLURM_LAUNCH_NODE_IPADDR), else its hostname's."""
    if os.environ.get("COMMSTACK_PAIR_HOST"):
        return os.environ["COMMSTACK_PAIR_HOST"]
    launch = os.environ.get("SLURM_LAUNCH_NODE_IPADDR")
    if launch:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((launch, 9))  # UDP: chooses the route, sends nothing
            return s.getsockname()[0]
    return socket.gethostbyname(socket.gethostname())


def session_sockets(sid: int) -> set[str]:
    """Socket inodes held by the processes of session `sid` (the tool's: it was started in its own)."""
    out = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if int((proc / "stat").read_text().rsplit(")", 1)[1].split()[3]) != sid:
                continue
            for fd in (proc / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    out.add(target[8:-1])
        except (OSError, IndexError, ValueError):
            continue
    return out


class Tool:
    """One side's tool: started in a session of its own, its output pumped to `sink` and kept in `tail`."""

    def __init__(self, argv: list[str], sink) -> None:
        self.argv = argv
        self.tail = ""
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        self._pump = threading.Thread(target=self._copy, args=(sink,), daemon=True)
        self._pump.start()

    def _copy(self, sink) -> None:
        for chunk in iter(lambda: self.proc.stdout.read1(65536), b""):
            sink.write(chunk)
            sink.flush()
            self.tail = (self.tail + chunk.decode(errors="replace"))[-4096:]

    def kill(self) -> None:
        """SIGKILL to the tool's process group, only while its leader is unreaped (its pid is still ours)."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.wait()

    def wait(self) -> int:
        status = self.proc.wait()
        self._pump.join(timeout=5)
        return status


def _argv(template: str, **values: object) -> list[str]:
    """The template's words with `{program}`, `{port}` and `{host}` filled in; any other brace is text (a step's
    own arguments are in the template: never a format string, so no attribute access and no padding)."""
    fill = re.compile("|".join(re.escape("{" + k + "}") for k in values))
    return [fill.sub(lambda m: str(values[m.group(0)[1:-1]]), word) for word in shlex.split(template)]


def serve(template: str, rendezvous: Path, deadline: float, ports: Iterator[int] | None = None,
          host: str | None = None, sink=None, program: str = "") -> int:
    """The server side: start, publish, wait for the server (and for a client to come)."""
    sink = sink or sys.stderr.buffer
    ports = ports or (free_ports(1)[0] for _ in range(PORT_TRIES))  # free now: another process may take one first
    tool = None
    try:
        for attempt in range(1, PORT_TRIES + 1):
            port = next(ports)
            tool = Tool(_argv(template, port=port, program=program), sink)
            if _wait_listening(tool, port, deadline):
                break
            status = tool.wait()
            if attempt < PORT_TRIES and any(word in tool.tail for word in IN_USE):
                continue  # the port was taken between our pick and the server's bind: another one
            raise PairError(f"the server ({Path(tool.argv[0]).name}) exited with status {status} before it "
                            f"listened on port {port}: {_last_line(tool.tail)}", status or 1)
        write_json(rendezvous / "server.json", {"host": host or address(), "port": port, "pid": os.getpid()})
        return _watch_server(tool, rendezvous, deadline)
    except PairError as e:
        write_json(rendezvous / "server-failed.json", {"error": str(e)})
        raise
    finally:
        if tool:
            tool.kill()


def _wait_listening(tool: Tool, port: int, deadline: float) -> bool:
    while time.monotonic() < deadline:
        if tool.proc.poll() is not None:
            return False
        inodes = set(procs.listening(port))
        if inodes and inodes & session_sockets(tool.proc.pid):
            return True
        time.sleep(POLL)
    tool.kill()
    raise PairError(f"the server ({Path(tool.argv[0]).name}) did not listen on port {port} before the step's timeout")


def _watch_server(tool: Tool, rendezvous: Path, deadline: float) -> int:
    client_ended = None
    while True:
        if tool.proc.poll() is not None:
            return tool.wait()
        now = time.monotonic()
        if now >= deadline:
            came = (rendezvous / "client-started.json").exists()
            raise PairError("the step's timeout came while the client still ran" if came else
                            "no client came to the server before the step's timeout")
        if client_ended is None and (ended := _read(rendezvous / "client-ended.json")) is not None:
            client_ended = (now, ended.get("status"))
        if client_ended and now - client_ended[0] > GRACE:
            raise PairError(f"the client ended (status {client_ended[1]}) and the server did not within "
                            f"{GRACE:.0f} s: killed", 1)
        time.sleep(POLL)


def connect(template: str, rendezvous: Path, deadline: float, out=None, program: str = "") -> int:
    """The client side: wait for the server's address, run the client against it."""
    out = out or sys.stdout.buffer
    while (server := _read(rendezvous / "server.json")) is None:
        if (failed := _read(rendezvous / "server-failed.json")) is not None:
            raise PairError(f"the server did not start: {failed.get('error')}", 1)
        if time.monotonic() >= deadline:
            raise PairError("the server never published its address before the step's timeout (it did not start, "
                            "or it never listened)")
        time.sleep(POLL)
    argv = _argv(template, host=server["host"], port=server["port"], program=program)
    write_json(rendezvous / "client-started.json", {"pid": os.getpid()})
    out.write(f"{CLIENT_LINE}{shlex.join(argv)}\n".encode())
    out.flush()
    tool = Tool(argv, out)
    status = None
    try:
        while (status := tool.proc.poll()) is None:
            if time.monotonic() >= deadline:
                raise PairError("the step's timeout came while the client ran")
            time.sleep(POLL)
        return tool.wait()
    finally:
        tool.kill()
        write_json(rendezvous / "client-ended.json", {"status": status})


def _read(path: Path) -> dict | None:
    with contextlib.suppress(FileNotFoundError):
        return json.loads(path.read_text())
    return None


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else "(no output)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m commstack.run.pair", description=__doc__.split("\n")[0])
    parser.add_argument("rendezvous", type=Path, help="a private directory of the step, seen by both nodes")
    parser.add_argument("timeout", type=float, help="seconds both sides may take, all told")
    parser.add_argument("--program", default="", help="the tool's binary, {program} in both command lines")
    parser.add_argument("--server", required=True, help="the server's command line, with {port}")
    parser.add_argument("--client", required=True, help="the client's command line, with {host} and {port}")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="a variable for the tools alone (the system's and the step's)")
    parser.add_argument("--role", choices=("server", "client"),
                        help="default: SLURM_PROCID (mpirun: OMPI_COMM_WORLD_RANK) 0 serves, 1 connects")
    args = parser.parse_args(argv)
    rank = os.environ.get("SLURM_PROCID", os.environ.get("OMPI_COMM_WORLD_RANK", ""))  # srun, or mpirun
    role = args.role or {"0": "server", "1": "client"}.get(rank)
    if role is None:
        parser.error("no --role and SLURM_PROCID (OMPI_COMM_WORLD_RANK) is not 0 or 1: run it as a step of 2 tasks")
    deadline = time.monotonic() + args.timeout
    private_dir(args.rendezvous)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _raise_exit)
    # for the tools (this Python started without them: no PYTHONPATH of theirs reaches it)
    os.environ.update(v.split("=", 1) for v in args.env)
    try:
        if role == "server":
            return serve(args.server, args.rendezvous, deadline, program=args.program)
        return connect(args.client, args.rendezvous, deadline, program=args.program)
    except PairError as e:
        print(f"commstack pair: error: {role}: {e}", file=sys.stderr, flush=True)
        return e.status


def _raise_exit(signum: int, frame) -> None:
    raise SystemExit(128 + signum)  # unwinds through the finally blocks that kill the tool


if __name__ == "__main__":
    sys.exit(main())
