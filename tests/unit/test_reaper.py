"""commstack's reaper as a task runs it (`python -I -m commstack.slurm reap -- PROGRAM`, procs.REAPER), without
Slurm: what the program leaves ends with it (SIGTERM first, SIGKILL for what ignores it, processes forked meanwhile
too), signals reach the program even while it starts, and the program's end is the reaper's. Every process of a
test carries a token in its environment, so that a survivor is found wherever it went (procs.leftovers)."""

import os
import signal
import subprocess
import sys
import uuid

from commstack.slurm.procs import REAPER, leftovers

#: forks two daemons (setsid) and exits 3 once both are ready: one ends on SIGTERM and says so in argv[1], the other
#: ignores SIGTERM and forks a child (that ignores it too) every 50 ms; "ready" on stdout when they are
LEAVES_DAEMONS = r"""
import os, signal, sys, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    def bye(*_):
        with open(sys.argv[1], "w") as f:
            f.write("terminated")
        os._exit(0)
    signal.signal(signal.SIGTERM, bye)
    os.write(w, b"1")
    while True:
        signal.pause()
if os.fork() == 0:
    os.setsid()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.write(w, b"2")
    while True:
        if os.fork() == 0:
            time.sleep(0.2)
            os._exit(0)
        time.sleep(0.05)
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
assert len(os.read(r, 1) + os.read(r, 1)) == 2
print("ready", flush=True)
if len(sys.argv) > 2:
    signal.pause()  # until the reaper passes a signal on
sys.exit(3)
"""


def tokened() -> tuple[dict[str, str], dict[str, str]]:
    token = {"COMMSTACK_REAP_TEST": uuid.uuid4().hex}
    return token, {**os.environ, **token}


def test_what_the_program_left_ends_with_it_sigterm_first_and_sigkill_for_what_ignores_it(tmp_path):
    token, env = tokened()
    said = tmp_path / "said"
    done = subprocess.run([*REAPER, sys.executable, "-c", LEAVES_DAEMONS, str(said)], env=env, capture_output=True,
                          timeout=600)
    assert (done.returncode, done.stdout, done.stderr) == (3, b"ready\n", b"")  # the program's status; no complaint
    assert said.read_text() == "terminated"  # given SIGTERM, not only SIGKILL
    assert leftovers(token) == []  # the forking one and every child it made, ended before the reaper returned


def test_a_signal_to_the_reaper_reaches_the_program_and_the_reaper_ends_as_it_did(tmp_path):
    token, env = tokened()
    reaper = subprocess.Popen([*REAPER, sys.executable, "-c", LEAVES_DAEMONS, str(tmp_path / "said"), "wait"],
                              env=env, stdout=subprocess.PIPE)
    try:
        assert reaper.stdout.readline() == b"ready\n"
        reaper.send_signal(signal.SIGTERM)
        assert reaper.wait(timeout=600) == -signal.SIGTERM
    finally:
        reaper.kill()
        reaper.wait()
    assert leftovers(token) == []


def test_a_signal_that_comes_before_the_program_started_means_it_never_starts(tmp_path):
    """The reaper starts with SIGTERM already pending (blocked, then sent, by the program that execs it): the
    earliest a signal can come. The program it was to run does not start; the reaper ends by that signal."""
    started = tmp_path / "started"
    pending = ("import os, signal, sys; signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM]); "
               "os.kill(os.getpid(), signal.SIGTERM); os.execv(sys.argv[1], sys.argv[1:])")
    done = subprocess.run([sys.executable, "-c", pending, *REAPER, "touch", str(started)], capture_output=True,
                          timeout=600)
    assert (done.returncode, done.stderr) == (-signal.SIGTERM, b"")
    assert not started.exists()


def test_a_program_killed_by_sigkill_ends_the_reaper_by_sigkill():
    done = subprocess.run([*REAPER, "sh", "-c", "kill -KILL $$"], capture_output=True, timeout=600)
    assert (done.returncode, done.stderr) == (-signal.SIGKILL, b"")
