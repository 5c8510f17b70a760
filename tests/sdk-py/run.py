#!/usr/bin/env python3
"""Runs test modules of the Python SDK with unittest, as meson does:

    run.py MODULE...

The exit status is 0 when every test passed, 1 when one failed, and 77
(meson's "skipped") when every test was skipped, so that a suite waiting
for berthd's side of the worker protocol shows as skipped, not as passed.
"""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "sdk", "python"))


def main() -> int:
    names = sys.argv[1:]
    if not names:
        print(__doc__, file=sys.stderr)
        return 2
    suite = unittest.defaultTestLoader.loadTestsFromNames(names)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if not result.wasSuccessful():
        return 1
    if result.testsRun and len(result.skipped) == result.testsRun:
        for _, reason in result.skipped[:1]:
            print("all %d tests skipped: %s" % (result.testsRun, reason))
        return 77
    return 0


if __name__ == "__main__":
    sys.exit(main())
