#!/usr/bin/env python3
"""paths.py SRC: nothing in the build, the tests or the documents reaches
outside the clone.

A clone must build, test itself and link its own documents alone: a
meson path that climbs above meson.project_source_root(), or a README link
to a document in a folder beside the clone, works on the machine it was
written on and nowhere else. This finds every relative path that climbs ('..' in a meson path
expression, '../' in a script, a C or Python string, or a Markdown link),
resolves it from the file's own folder (or from the source root, for
meson.project_source_root()), and fails on each that lands outside SRC.
It prints one line per file checked with a finding, and a summary.
"""
import os
import re
import sys

SRC = os.path.realpath(sys.argv[1])
# Data, not paths: the JSON Schema Test Suite's own files, and results.
SKIP_DIRS = {'.git', 'node_modules', 'json-schema-test-suite', 'results'}
SUFFIXES = ('.build', '.sh', '.py', '.mjs', '.js', '.c', '.h', '.md', '.in')
NAMES = {'dev', 'run', 'rules', 'meson_options.txt'}

MESON_EXPR = re.compile(
    r"meson\.(project_source_root|current_source_dir|source_root)\(\)"
    r"((?:\s*/\s*'[^']*')+)")
CLIMB = re.compile(r"(?<![\w.])((?:\.\./)+[\w./-]*|\.\.(?=['\"`)\s]))")


def inside(path):
    path = os.path.normpath(path)
    return path == SRC or path.startswith(SRC + os.sep)


def findings(path, text):
    here = os.path.dirname(path)
    if os.path.basename(path) == 'meson.build':
        for m in MESON_EXPR.finditer(text):
            base = here if m.group(1) == 'current_source_dir' else SRC
            parts = re.findall(r"'([^']*)'", m.group(2))
            target = os.path.join(base, *parts)
            if not inside(target):
                yield m.group(0), target
    for m in CLIMB.finditer(text):
        target = os.path.join(here, m.group(1))
        if not inside(target):
            yield m.group(1), target


def main():
    bad = checked = 0
    for folder, dirs, files in os.walk(SRC):
        dirs[:] = [d for d in dirs
                   if d not in SKIP_DIRS and not d.startswith('build')]
        for name in files:
            if not (name.endswith(SUFFIXES) or name in NAMES):
                continue
            path = os.path.join(folder, name)
            try:
                with open(path, encoding='utf-8') as f:
                    text = f.read()
            except (UnicodeDecodeError, OSError):
                continue
            checked += 1
            for what, target in findings(path, text):
                bad += 1
                print('FAIL: %s: %s reaches %s, outside the clone'
                      % (os.path.relpath(path, SRC), what.strip(),
                         os.path.normpath(target)))
    print('%d files checked: %d paths outside the clone' % (checked, bad))
    print('%d passed, %d failed' % (0 if bad else 1, 1 if bad else 0))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
