"""How the local Slurm's clean-up signals a process: only the one it checked (pid and start time, held
through a pidfd), SIGKILL after the grace time."""

import signal
import subprocess
import sys
import time

from commstack.slurm.procs import end, start_time


def test_a_process_whose_start_time_differs_is_not_signalled():
    proc = subprocess.Popen(["sleep", "300"])
    try:
        end(proc.pid, "1", signal.SIGKILL, 0)  # the pid now names another process than the one checked
        end(proc.pid, start_time(proc.pid), signal.SIGTERM, 0)
        assert proc.wait(timeout=60) == -signal.SIGTERM  # not -SIGKILL: the first end() sent nothing
    finally:
        proc.kill()
        proc.wait()


def test_one_that_ignores_sigterm_gets_sigkill_after_the_grace_time():
    proc = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                             "signal.SIG_IGN); print('ready', flush=True); time.sleep(300)"], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"ready\n"
        t0 = time.monotonic()
        end(proc.pid, start_time(proc.pid), signal.SIGTERM, 1)
        assert proc.wait(timeout=60) == -signal.SIGKILL and time.monotonic() - t0 > 0.9  # after the grace time
    finally:
        proc.kill()
        proc.wait()
