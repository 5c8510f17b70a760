"""test_child.py: the Python and Node forms of child.h (child.py,
child.mjs) tie a child to the test that started it, however that test
dies.

As in test_harness.c, each case plays the test process in a child of its
own, "the test", which starts `sleep 600` the way the Python or Node tests
start berthd, prints its pid and dies; this program is a child subreaper
(PR_SET_CHILD_SUBREAPER), so the orphaned sleep comes to it and
os.waitpid() tells whether, and by what, it ended.

Run: python3 test_child.py (meson's suite harness). Without the tie
(a plain Popen or spawn) every death case fails: sleep still runs 60 s
after its test died.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from child import die_with_this_process  # noqa: E402

PR_SET_CHILD_SUBREAPER = 36
#: How long what the dead test left may take to end: the signal comes as
#: the test exits; the rest is a loaded machine.
GONE = 60.0

PY_TEST = """
import os, subprocess, sys, time
sys.path.insert(0, %r)
from child import die_with_this_process
p = subprocess.Popen(["sleep", "600"], preexec_fn=die_with_this_process())
print(p.pid, flush=True)
how = sys.argv[1]
if how == "exit":
    os._exit(1)
time.sleep(600)
""" % HERE

NODE_TEST = """
import { spawnTied } from %s;
const p = spawnTied('sleep', ['600'], { stdio: 'ignore' });
p.on('spawn', () => {
  process.stdout.write(p.pid + '\\n', () => {
    if (process.argv[1] === 'exit') throw new Error('the test fails');
  });
});
setTimeout(() => {}, 600000);
"""


def reap_within(pid: int, seconds: float) -> int | None:
    """reap_within returns pid's wait status once it has ended, or None
    when it still runs after seconds (it is then killed and reaped)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got, status = os.waitpid(pid, os.WNOHANG)
        if got == pid:
            return status
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


class Tied(unittest.TestCase):
    def run_test(self, argv: list[str], how: str) -> int:
        """run_test runs the test argv + [how]; it prints the pid of its
        child. SIGKILL ends it unless it ends by itself (how == "exit").
        Returns the child's pid, now this program's."""
        test = subprocess.Popen(argv + [how], stdout=subprocess.PIPE,
                                preexec_fn=die_with_this_process())
        assert test.stdout is not None
        line = test.stdout.readline()
        if how == "kill":
            test.kill()
        test.wait(GONE)
        test.stdout.close()
        self.assertTrue(line.strip().isdigit(),
                        "the test printed no pid: %r" % line)
        return int(line)

    def assert_killed_with_its_test(self, pid: int) -> None:
        status = reap_within(pid, GONE)
        self.assertIsNotNone(status, "sleep (pid %d) still ran %d s after "
                             "its test died" % (pid, GONE))
        assert status is not None
        self.assertTrue(os.WIFSIGNALED(status) and
                        os.WTERMSIG(status) == signal.SIGKILL,
                        "sleep ended with status %#x, not by SIGKILL"
                        % status)

    def test_python__a_child__dies_when_its_test_is_killed(self):
        pid = self.run_test([sys.executable, "-c", PY_TEST], "kill")
        self.assert_killed_with_its_test(pid)

    def test_python__a_child__dies_when_its_test_exits(self):
        pid = self.run_test([sys.executable, "-c", PY_TEST], "exit")
        self.assert_killed_with_its_test(pid)

    def node(self) -> list[str]:
        node = shutil.which("node")
        if node is None:
            self.skipTest("node is not installed")
        url = "file://" + os.path.join(HERE, "child.mjs")
        return [node, "--input-type=module", "-e",
                NODE_TEST % repr(url), "--"]

    def test_node__a_child__dies_when_its_test_is_killed(self):
        pid = self.run_test(self.node(), "kill")
        self.assert_killed_with_its_test(pid)

    def test_node__a_child__dies_when_its_test_fails_with_an_error(self):
        pid = self.run_test(self.node(), "exit")
        self.assert_killed_with_its_test(pid)

    def test_python__off_the_main_thread__refuses(self):
        raised: list[BaseException] = []

        def start() -> None:
            try:
                die_with_this_process()
            except RuntimeError as e:
                raised.append(e)

        t = threading.Thread(target=start)
        t.start()
        t.join()
        self.assertEqual(len(raised), 1)
        self.assertIn("main thread", str(raised[0]))


if __name__ == "__main__":
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit("test_child: PR_SET_CHILD_SUBREAPER: %s"
                 % os.strerror(ctypes.get_errno()))
    unittest.main(verbosity=2)
