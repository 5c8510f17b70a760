// harness.mjs: a real berthd for the SDK's tests, and worker processes.
//
// The meson test (run.sh) sets BERTHD and BERTH to the built binaries and
// BERTH_EXAMPLES to examples/tools. Run by hand, BERTHD falls back to the
// build-test or build folder of the repository the SDK is in. Each Daemon
// runs berthd on a database and socket of its own in a temporary directory.
// berthd and the worker processes die with the test process, even when it
// dies before its after() hooks (child.mjs, which run.sh copies from
// tests/harness).

import { existsSync, mkdtempSync, openSync, closeSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { berthdAnswers, spawnTied } from './child.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = process.env.BERTH_SDK_DIR ? path.resolve(process.env.BERTH_SDK_DIR, '..', '..') : path.resolve(here, '..', '..');

function fallback(rel) {
  for (const b of ['build-test', 'build']) {
    const p = path.join(repo, b, rel);
    if (existsSync(p)) return p;
  }
  return null;
}

export const BERTHD = process.env.BERTHD ?? fallback('berthd/berthd');
export const BERTH = process.env.BERTH ?? fallback('cli/berth');
export const EXAMPLES = process.env.BERTH_EXAMPLES ?? path.join(repo, 'examples', 'tools');

// freePort returns a port of 127.0.0.1 that was free a moment ago, below
// the range the kernel gives connections their local ports from: a port
// from listen(0) could be taken by another test's connection while berthd
// is down between a kill and its restart.
export async function freePort() {
  let high = 32767;
  try {
    high = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').split(/\s+/)[0]) - 1;
  } catch {}
  const low = Math.max(1024, high - 8000);
  for (let tries = 0; tries < 1000; tries++) {
    const port = low + Math.floor(Math.random() * (high - low + 1));
    const free = await new Promise((resolve) => {
      const srv = net.createServer();
      srv.once('error', () => resolve(false));
      srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
    });
    if (free) return port;
  }
  throw new Error(`no free TCP port between ${low} and ${high}`);
}

// Daemon is one berthd on a temporary directory; restart and kill9 keep
// the directory, and so the database.
export class Daemon {
  constructor({ tcp = false, args = [] } = {}) {
    this.dir = mkdtempSync(path.join(os.tmpdir(), 'berth-sdk-'));
    this.db = path.join(this.dir, 'berth.db');
    this.socket = path.join(this.dir, 'berth.sock');
    this.log = path.join(this.dir, 'berthd.log');
    this.tcp = tcp;
    this.args = args;
    this.token = tcp ? 'sdk-test-token-' + Math.random().toString(36).slice(2) : undefined;
    this.port = null;
    this.proc = null;
    this.exited = null;
  }

  get url() {
    return `tcp://127.0.0.1:${this.port}`;
  }

  async start() {
    if (!BERTHD) throw new Error('BERTHD is not set and no build of berthd was found: run the tests through meson test');
    const args = ['--db', this.db, '--socket', this.socket, '--tools', EXAMPLES, '--workers', '4', ...this.args];
    if (this.tcp) {
      if (this.port === null) this.port = await freePort();
      const tokenFile = path.join(this.dir, 'token');
      writeFileSync(tokenFile, this.token + '\n', { mode: 0o600 });
      args.push('--listen', `127.0.0.1:${this.port}`, '--token-file', tokenFile);
    }
    const fd = openSync(this.log, 'a');
    const proc = spawnTied(BERTHD, args, { stdio: ['ignore', fd, fd] });
    closeSync(fd);
    this.proc = proc;
    this.exited = new Promise((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
    let gone = null;
    this.exited.then((how) => { gone = how; });
    const deadline = Date.now() + 30000;
    while (Date.now() < deadline) {
      if (gone) throw new Error(`berthd exited at start-up (${JSON.stringify(gone)}):\n${this.logText()}`);
      if (await berthdAnswers(this.socket)) return this;
      await sleep(50);
    }
    throw new Error(`berthd did not answer on ${this.socket} within 30 s:\n${this.logText()}`);
  }

  async stop() {
    if (!this.proc) return null;
    const proc = this.proc;
    this.proc = null;
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 30000);
    const how = await this.exited;
    clearTimeout(timer);
    return how.code;
  }

  async kill9() {
    if (!this.proc) return;
    const proc = this.proc;
    this.proc = null;
    proc.kill('SIGKILL');
    await this.exited;
  }

  async restart() {
    const code = await this.stop();
    if (code !== 0) throw new Error(`berthd exited with ${code} on SIGTERM:\n${this.logText()}`);
    await this.start();
  }

  logText() {
    try { return readFileSync(this.log, 'utf8'); } catch { return '(no log)'; }
  }

  async cleanup() {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

// until polls fn until it returns a truthy value, within a generous
// timeout for a loaded machine; it never asserts on speed.
export async function until(fn, what, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

// WorkerProcess runs worker-main.mjs (the fixture tools served with
// serve()) as a child process, so that tests can kill -9 it.
export class WorkerProcess {
  constructor(env) {
    this.out = '';
    this.proc = spawnTied(process.execPath, [path.join(here, 'worker-main.mjs')], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.proc.stdout.on('data', (b) => { this.out += b.toString(); });
    this.proc.stderr.on('data', (b) => { this.out += b.toString(); });
    this.exited = new Promise((resolve) => this.proc.once('exit', (code, signal) => resolve({ code, signal })));
  }

  ready() {
    return until(() => this.out.includes('worker ready') || this.out.includes('worker failed'), 'the worker to register')
      .then(() => { if (this.out.includes('worker failed')) throw new Error(this.out); });
  }

  async kill9() {
    this.proc.kill('SIGKILL');
    await this.exited;
  }

  async stop() {
    this.proc.kill('SIGTERM');
    return this.exited;
  }
}
