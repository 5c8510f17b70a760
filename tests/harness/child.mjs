// child.mjs: child processes that die with the Node test that started
// them; child.h says why, and this is its form for the Node tests
// (tests/mcp and tests/http copy it beside theirs). berthdAnswers, at the
// end, is how their harnesses know a berthd they started is up.
//
// spawnTied is child_process.spawn whose child gets SIGKILL when this
// process dies, however it dies: an uncaught error, process.exit(), a
// signal, SIGKILL, all of which skip the tests' after() hooks. Node runs
// nothing of ours between its fork and the exec, so the command runs
// under `setpriv --pdeathsig KILL` (util-linux), which asks for the signal
// and execs a shell that checks that its parent is still this process
// (should it have died before the request, the signal would never come)
// and execs the command. Every step execs: the child's pid, its exit and
// the signals sent to it are the command's own; only a command that
// cannot be run exits 127 (the shell's) instead of emitting 'error'.
// libuv forks on the loop's thread, the main one, which ends only with the
// process. Without setpriv the command runs as spawn would run it.

import { spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

function findSetpriv() {
  for (const dir of (process.env.PATH || '/usr/bin:/bin').split(':')) {
    const p = path.join(dir || '.', 'setpriv');
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // not in this folder
    }
  }
  return null;
}

const SETPRIV = findSetpriv();
const CHECK = '[ "$PPID" = "$1" ] || exit 137; shift; exec "$@"';

export function spawnTied(command, args = [], options = {}) {
  if (!SETPRIV) return spawn(command, args, options);
  return spawn(SETPRIV, ['--pdeathsig', 'KILL', '--', '/bin/sh', '-c', CHECK,
    'sh', String(process.pid), command, ...args], options);
}

// berthdAnswers resolves true once the berthd started on the Unix socket
// answers a ping there: its loop runs, so the --listen and --http sockets
// it binds after the Unix one are open too. A socket that only accepts is
// not enough: a test that connected over TCP in between was refused
// (tests/harness/harness.c says the same for the C tests).
export function berthdAnswers(socket) {
  return new Promise((resolve) => {
    const s = net.connect(socket);
    s.once('connect', () => s.write('{"jsonrpc":"2.0","id":1,"method":"ping"}\n'));
    s.once('data', () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
    s.once('close', () => resolve(false));
  });
}
