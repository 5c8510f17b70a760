"""child.py: child processes that die with the Python test that started
them; child.h says why, and this is its form for the Python tests
(tests/sdk-py, tests/conformance).

``subprocess.Popen(argv, preexec_fn=die_with_this_process())`` (and
asyncio's ``create_subprocess_exec``, which passes it on) gives a child
that gets SIGKILL when this process dies, however it dies: an uncaught
error, os._exit(), a signal, SIGKILL, all of which skip the tests'
tearDown. The child asks for it (PR_SET_PDEATHSIG) between the fork and
the exec, and kills itself if this process died before the request took
hold (its parent is no longer the pid recorded before the fork).

The signal comes when the *thread* that forked ends, so
die_with_this_process refuses to serve off the main thread. Between the
fork and the exec the child makes the calls child.c makes (prctl,
getppid), through ctypes objects made before the fork.
"""
from __future__ import annotations

import ctypes
import os
import signal
import threading
from typing import Callable

PR_SET_PDEATHSIG = 1

_libc = ctypes.CDLL(None, use_errno=True)
_prctl = _libc.prctl
_prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong,
                   ctypes.c_ulong, ctypes.c_ulong]
_prctl.restype = ctypes.c_int


def die_with_this_process() -> Callable[[], None]:
    """die_with_this_process returns the preexec_fn that ties a child to
    this process. Raises RuntimeError off the main thread."""
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("a child started off the main thread would get "
                           "SIGKILL when that thread ends "
                           "(PR_SET_PDEATHSIG follows the thread that forks)")
    parent = os.getpid()

    def preexec() -> None:
        if _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            os._exit(127)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec
