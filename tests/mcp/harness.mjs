// harness.mjs: a real berthd and `berth mcp` clients for the MCP tests.
//
// The meson test (run.sh) sets BERTHD and BERTH to the built binaries,
// MCPD to tests/mcp/mcpd (a berthd with a C tool of its own),
// BERTH_EXAMPLES to examples/tools, BERTH_MCP_TOOLS to tests/mcp/tools and
// BERTH_MCP_SCALAR_TOOLS to tests/mcp/tools-scalar. Each Daemon runs a
// daemon on a database and socket of its own in a temporary directory, so
// tests never share state with a user's daemon. Each daemon dies with the
// test process, even when it dies before its after() hooks (child.mjs,
// which run.sh copies from tests/harness).

import { spawn } from 'node:child_process';
import { mkdtempSync, openSync, closeSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema, TaskStatusNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

import { berthdAnswers, spawnTied } from './child.mjs';

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run the MCP tests through meson test`);
  return v;
}

export const BERTHD = need('BERTHD');
export const BERTH = need('BERTH');
export const MCPD = need('MCPD');
export const EXAMPLES = need('BERTH_EXAMPLES');
export const MCP_TOOLS = need('BERTH_MCP_TOOLS');
export const SCALAR_TOOLS = need('BERTH_MCP_SCALAR_TOOLS');

// Daemon is one berthd (or another binary built on berth_main, such as
// mcpd) with the tools of the given directories, on a temporary
// directory; restart keeps the directory, and so the database, which is
// what the restart test needs.
export class Daemon {
  constructor({ binary = BERTHD, tools = [EXAMPLES, MCP_TOOLS], args = [] } = {}) {
    this.binary = binary;
    this.tools = tools;
    this.args = args;
    this.dir = mkdtempSync(path.join(os.tmpdir(), 'berth-mcp-'));
    this.db = path.join(this.dir, 'berth.db');
    this.socket = path.join(this.dir, 'berth.sock');
    this.log = path.join(this.dir, 'berthd.log');
    this.proc = null;
    this.exited = null;
  }

  async start() {
    const fd = openSync(this.log, 'a');
    const proc = spawnTied(this.binary, [
      '--db', this.db,
      '--socket', this.socket,
      ...this.tools.flatMap((dir) => ['--tools', dir]),
      '--workers', '4',
      ...this.args,
    ], { stdio: ['ignore', fd, fd] });
    closeSync(fd);
    this.proc = proc;
    this.exited = new Promise((resolve) => {
      proc.once('exit', (code, signal) => resolve({ code, signal }));
    });
    let gone = null;
    this.exited.then((how) => { gone = how; });
    const deadline = Date.now() + 20000;
    while (Date.now() < deadline) {
      if (gone) {
        throw new Error(`berthd exited at start-up (${JSON.stringify(gone)}):\n${this.logText()}`);
      }
      if (await berthdAnswers(this.socket)) return;
      await sleep(50);
    }
    throw new Error(`berthd did not answer on ${this.socket} within 20 s:\n${this.logText()}`);
  }

  // stop sends SIGTERM and waits for the exit; returns the exit code.
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

// sanitizerEnv passes the sanitizers' settings that meson test sets on to
// `berth mcp`, which the SDK otherwise starts with a minimal environment.
export function sanitizerEnv() {
  const env = {};
  for (const k of ['ASAN_OPTIONS', 'UBSAN_OPTIONS', 'LSAN_OPTIONS', 'MSAN_OPTIONS']) {
    if (process.env[k] !== undefined) env[k] = process.env[k];
  }
  return env;
}

// McpSession is an SDK Client talking to berthd through `berth mcp`.
// errors collects what the SDK reports through onerror: a line on stdout
// that is not a JSON-RPC message would land there. received holds every
// message the client got after initialize, as JSON text, for the tests
// that check what never reaches a client.
export class McpSession {
  constructor(daemon, { elicit = null, name = 'berth-mcp-test', capabilities: extra = {} } = {}) {
    this.daemon = daemon;
    this.errors = [];
    this.stderr = '';
    this.statusNotes = [];
    this.elicitations = [];
    this.received = [];
    const capabilities = { ...(elicit ? { elicitation: { form: {} } } : {}), ...extra };
    this.client = new Client({ name, version: '1.0.0' }, { capabilities });
    this.client.onerror = (e) => this.errors.push(e);
    if (elicit) {
      this.client.setRequestHandler(ElicitRequestSchema, async (req, extra) => {
        this.elicitations.push(req);
        return elicit(req, extra);
      });
    }
    // The SDK checks each notification against its Task schema first.
    this.client.setNotificationHandler(TaskStatusNotificationSchema, async (n) => {
      this.statusNotes.push(n.params);
    });
    this.transport = new StdioClientTransport({
      command: BERTH,
      args: ['mcp', '--socket', daemon.socket],
      env: sanitizerEnv(),
      stderr: 'pipe',
    });
    this.transport.stderr.on('data', (b) => { this.stderr += b.toString(); });
  }

  async connect() {
    await this.client.connect(this.transport);
    const deliver = this.transport.onmessage;
    this.transport.onmessage = (message, extra) => {
      this.received.push(JSON.stringify(message));
      deliver(message, extra);
    };
    return this;
  }

  async close() {
    await this.client.close();
  }
}

// waitFor polls fn until it returns a truthy value or ms pass.
export async function waitFor(fn, ms = 15000, what = 'condition') {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

// RawRelay runs `berth mcp` without the SDK, to check its framing and its
// exits: lines() gives each stdout line, send() writes one message.
export class RawRelay {
  constructor(args) {
    this.proc = spawn(BERTH, ['mcp', ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.out = '';
    this.err = '';
    this.waiters = [];
    this.proc.stdout.on('data', (b) => { this.out += b.toString(); this.wake(); });
    this.proc.stderr.on('data', (b) => { this.err += b.toString(); });
    this.proc.stdin.on('error', () => {});
    this.exited = new Promise((resolve) => {
      this.proc.once('exit', (code, signal) => { resolve({ code, signal }); this.wake(); });
    });
  }

  wake() {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  send(msg) {
    this.proc.stdin.write((typeof msg === 'string' ? msg : JSON.stringify(msg)) + '\n');
  }

  // line resolves the next stdout line (without "\n"), or null at exit.
  async line(ms = 10000) {
    const deadline = Date.now() + ms;
    for (;;) {
      const nl = this.out.indexOf('\n');
      if (nl >= 0) {
        const l = this.out.slice(0, nl);
        this.out = this.out.slice(nl + 1);
        return l;
      }
      if (this.proc.exitCode !== null || this.proc.signalCode !== null) return null;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no line from berth mcp within ${ms} ms; stderr: ${this.err}`);
      await new Promise((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => { clearTimeout(t); resolve(); });
      });
    }
  }

  async exit(ms = 5000) {
    let timer;
    const timeout = new Promise((resolve) => { timer = setTimeout(() => resolve(null), ms); });
    const how = await Promise.race([this.exited, timeout]);
    clearTimeout(timer);
    if (!how) {
      this.proc.kill('SIGKILL');
      throw new Error(`berth mcp did not exit within ${ms} ms; stderr: ${this.err}`);
    }
    return how;
  }
}

// rawCall sends one request through `berth mcp` without initialize, so
// the connection is a client of berth's own protocol (jobs/get, tools/list
// as declared), and returns its result, or throws an Error carrying the
// JSON-RPC error's code and data.
export async function rawCall(daemon, method, params = {}) {
  const r = new RawRelay(['--socket', daemon.socket]);
  r.send({ jsonrpc: '2.0', id: 1, method, params });
  const line = await r.line();
  r.proc.stdin.end();
  await r.exit();
  const reply = JSON.parse(line);
  if (reply.error) throw Object.assign(new Error(reply.error.message), reply.error);
  return reply.result;
}
