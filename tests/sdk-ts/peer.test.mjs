// peer.test.mjs: serve() against a scripted berthd in this process. It
// checks the SDK's side of docs/WORKERS.md (framing, registration, runs,
// the function stages, aborts, reconnects, close) message by message. It
// is a unit test of the worker's state machine; worker.test.mjs runs the
// same tools against the real berthd.

import assert from 'node:assert/strict';
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { after, afterEach, beforeEach, describe, test } from './bounded.mjs';

import { RequestContext as MastraRequestContext } from '@mastra/core/request-context';
import { createTool } from '@mastra/core/tools';
import { z } from 'zod';
import { BerthError, ErrorCode, serve } from '@berth/sdk';
import { allTools, calls, echoTool, askTool, blockTool, approveTool, flakyTool } from './tools.fixture.mjs';
import { until } from './harness.mjs';
import { spawnTied } from './child.mjs';

const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-peer-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

// python3 makes the one listener Node cannot: one that never accepts (a
// Node server accepts every connection the kernel queues).
const python3 = (process.env.PATH || '/usr/bin:/bin').split(':').map((d) => path.join(d || '.', 'python3')).find((p) => {
  try {
    accessSync(p, constants.X_OK);
    return true;
  } catch {
    return false;
  }
});

// Peer is a scripted berthd: it answers the worker's requests as `answers`
// says, records every message, and sends requests of its own.
class Peer {
  constructor(answers = {}) {
    this.path = path.join(dir, `peer-${++n}.sock`);
    this.answers = {
      'worker/register': { worker: 'W-1', tools: [], heartbeatMs: 10000 },
      'worker/drain': {},
      'worker/checkpoint': {},
      ping: {},
      ...answers,
    };
    this.received = [];
    // Every line the worker sent, as it came: none may be one that berthd
    // would refuse ("what berthd cannot read", below).
    this.lines = [];
    this.conns = [];
    // id -> {conn, method, resolve, reject} of each request sent and not answered.
    this.pending = new Map();
    // conn -> the bytes that wait for the second piece of an answer.
    this.held = new Map();
    this.nextId = 1;
    this.server = net.createServer((s) => this.accept(s));
  }

  listen() {
    return new Promise((resolve) => this.server.listen(this.path, resolve));
  }

  // stopListening closes the listening socket (its path goes with it), so
  // that the worker's next connection attempt fails; the connections made
  // stay (server.close's callback would wait for them). listen() opens it
  // again.
  stopListening() {
    this.server.close();
    this.server = net.createServer((s) => this.accept(s));
  }

  accept(s) {
    this.conns.push(s);
    let buf = '';
    s.on('data', (b) => {
      buf += b.toString();
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        this.lines.push(line);
        this.onMessage(s, JSON.parse(line));
      }
    });
    s.on('error', () => {});
    // A request of ours that the worker can no longer answer fails the
    // test that waits for it, rather than leaving it waiting forever.
    s.on('close', () => {
      for (const [id, p] of this.pending) {
        if (p.conn !== s) continue;
        this.pending.delete(id);
        p.reject(new Error(`the worker's connection closed before it answered ${p.method} ${id}`));
      }
    });
  }

  // send writes text on s after what is written already. An answer is
  // split in two writes a turn of the event loop apart, to test the
  // worker's framing; whatever is sent meanwhile (another answer, a
  // request) waits for the second piece, since bytes written between the
  // two would make a line that is not JSON, for which the worker rightly
  // drops the connection.
  send(s, text, split = false) {
    if (this.held.has(s)) {
      this.held.set(s, this.held.get(s) + text);
      return;
    }
    if (!split) {
      s.write(text);
      return;
    }
    const mid = Math.floor(text.length / 2);
    s.write(text.slice(0, mid));
    this.held.set(s, text.slice(mid));
    setImmediate(() => {
      const rest = this.held.get(s);
      this.held.delete(s);
      if (!s.destroyed) s.write(rest);
    });
  }

  onMessage(s, m) {
    this.received.push(m);
    if (m.method !== undefined && m.id !== undefined) {
      const a = this.answers[m.method];
      const r = typeof a === 'function' ? a(m.params, m) : a;
      if (r === undefined) return;
      const body = r && r.error ? { error: r.error } : { result: r ?? {} };
      // Answers go out in pieces, with \r\n, to test the worker's framing.
      this.send(s, JSON.stringify({ jsonrpc: '2.0', id: m.id, ...body }) + '\r\n', true);
      return;
    }
    if (m.method === undefined && typeof m.id === 'string') {
      const p = this.pending.get(m.id);
      this.pending.delete(m.id);
      p?.resolve(m);
    }
  }

  get last() {
    return this.conns.at(-1);
  }

  // request sends berthd's request (run, input, transform, ping) and
  // resolves with the whole answer message; it rejects when the
  // connection closes first. `before`, text of other lines, goes out in
  // the same write, ahead of the request (the worker reads both at once).
  request(method, params, conn = this.last, before = '') {
    const id = `berth-${this.nextId++}`;
    return new Promise((resolve, reject) => {
      if (conn.destroyed) {
        reject(new Error(`the worker's connection is closed: ${method} ${id} was not sent`));
        return;
      }
      this.pending.set(id, { conn, method, resolve, reject });
      this.send(conn, before + JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n');
    });
  }

  notify(method, params, conn = this.last) {
    this.send(conn, JSON.stringify({ jsonrpc: '2.0', method, params }) + '\n');
  }

  messages(method) {
    return this.received.filter((m) => m.method === method);
  }

  logsOf(jobId) {
    return this.messages('worker/log').filter((m) => m.params.jobId === jobId).map((m) => m.params);
  }

  async close() {
    for (const c of this.conns) c.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

function job(tool, fields = {}) {
  return { id: `job-${Math.random().toString(36).slice(2)}`, tool, attempt: 1, maxRetries: 0, timeoutMs: 60000, input: {}, ...fields };
}

describe('serve() against a scripted berthd', () => {
  let peer;
  let worker;

  beforeEach(async () => {
    peer = new Peer();
    await peer.listen();
    worker = await serve({ socket: peer.path, tools: allTools, concurrency: 4, name: 'peer-test', logger: false });
  });
  afterEach(async () => {
    await worker?.close({ force: true, timeoutMs: 1000 });
    await peer.close();
  });

  test('register__sends_every_definition_with_concurrency_name_and_sdk', () => {
    const [reg] = peer.messages('worker/register');
    assert.equal(reg.params.concurrency, 4);
    assert.equal(reg.params.name, 'peer-test');
    assert.equal(reg.params.sdk.name, '@berth/sdk');
    assert.deepEqual(reg.params.tools.map((t) => t.id).sort(), ['sdk-approve', 'sdk-ask', 'sdk-block', 'sdk-echo', 'sdk-flaky', 'sdk-mcp']);
    assert.equal(worker.id, 'W-1');
  });

  test('run__answers_the_output_with_model_output_and_views__and_logs_observe_lines', async () => {
    const j = job('sdk-echo', { input: { text: 'hi', secret: 'x' } });
    const r = await peer.request('run', { job: j });
    assert.deepEqual(r.result.output, { text: 'hi', secret: 'x' });
    assert.deepEqual(r.result.modelOutput, { type: 'text', value: 'echo: hi' });
    assert.deepEqual(r.result.views, {
      display: { output: { text: 'hi' } },
      transcript: { output: { said: 'hi' } },
    });
    const logs = peer.logsOf(j.id);
    assert.ok(logs.some((l) => l.message === 'echoing' && l.data.length === 2));
    assert.ok(logs.some((l) => l.message === 'span echo' && typeof l.data.durationMs === 'number'));
  });

  test('run__with_pending_views_and_onInputAvailable__computes_them_first', async () => {
    const j = job('sdk-echo', { input: { text: 'throw-input-hook', secret: 'x' } });
    const r = await peer.request('run', { job: j, pending: { views: ['input', 'approval'], onInputAvailable: true } });
    assert.equal(r.result.output.text, 'throw-input-hook');
    assert.deepEqual(r.result.views.display.input, { text: 'throw-input-hook' });
    assert.deepEqual(r.result.views.display.approval, { message: 'Tool approval payload unavailable' });
    assert.deepEqual(r.result.views.transcript.input, { message: 'Tool input-available payload unavailable' });
    assert.ok(peer.logsOf(j.id).some((l) => l.level === 'error' && /onInputAvailable threw/.test(l.message)));
  });

  test('a_hook_that_throws__is_logged_on_the_job_and_never_fails_it', async () => {
    const j = job('sdk-echo', { input: { text: 'throw-hook', secret: 'x' } });
    const r = await peer.request('run', { job: j });
    assert.equal(r.result.output.text, 'throw-hook');
    assert.ok(peer.logsOf(j.id).some((l) => l.level === 'error' && /onOutput threw: onOutput hook failed on purpose/.test(l.message)));
  });

  test('execute_that_throws__answers_a_retryable_error_with_the_error_views', async () => {
    const j = job('sdk-echo', { input: { text: 'fail', secret: 'x' } });
    const r = await peer.request('run', { job: j });
    assert.equal(r.result.error.message, 'asked to fail');
    assert.equal(r.result.error.retryable, true);
    assert.deepEqual(r.result.views.display.error, { message: 'echo failed' });
    assert.deepEqual(r.result.views.transcript.error, { message: 'Tool error payload unavailable' });
  });

  test('a_NonRetryableError__answers_retryable_false_with_its_code', async () => {
    const r = await peer.request('run', { job: job('sdk-flaky', { input: { fatal: true } }) });
    assert.deepEqual(r.result.error, { message: 'this cannot work', code: 'fatal', retryable: false });
  });

  test('suspend__answers_the_payload__and_a_resume_runs_execute_again_with_resumeData', async () => {
    const before = calls.ask;
    const first = await peer.request('run', { job: job('sdk-ask') });
    assert.deepEqual(first.result, { suspend: { question: 'What is your name?' } });
    const again = await peer.request('run', { job: job('sdk-ask', { attempt: 1, resumeData: { name: 'Ada' }, suspendPayload: { question: 'What is your name?' } }) });
    assert.deepEqual(again.result, { output: { greeting: 'Hello, Ada' } });
    assert.equal(calls.ask, before + 2);
  });

  test('resume_data_that_fails_the_resume_schema__fails_the_run_without_retry', async () => {
    const r = await peer.request('run', { job: job('sdk-ask', { resumeData: { name: '' } }) });
    assert.equal(r.result.error.code, 'invalid_resume_data');
    assert.equal(r.result.error.retryable, false);
  });

  test('a_suspend_payload_that_fails_the_suspend_schema__fails_the_run_without_retry', async () => {
    const bad = createTool({
      id: 'bad-suspend', description: 'd',
      suspendSchema: z.object({ question: z.string() }),
      execute: async (_i, ctx) => { await ctx.agent.suspend({ question: 42 }); },
    });
    const p2 = new Peer();
    await p2.listen();
    const w2 = await serve({ socket: p2.path, tools: [bad], logger: false });
    try {
      const r = await p2.request('run', { job: job('bad-suspend') });
      assert.equal(r.result.error.code, 'invalid_suspend');
      assert.equal(r.result.error.retryable, false);
      assert.match(r.result.error.message, /question/);
      // Mastra's own check ran first: its report, as berth's errors.
      const [e] = r.result.error.data.errors;
      assert.equal(e.instancePath, '/question');
      assert.equal(e.keyword, 'mastra');
      assert.match(e.message, /string/);
    } finally {
      await w2.close();
      await p2.close();
    }
  });

  test('an_output_that_fails_the_output_schema_in_mastras_check__fails_with_berths_schema_errors', async () => {
    // Mastra checks the output before berthd can: its report used to come
    // as data {errors: [], fields: {...}}, with no instancePath to read.
    const bad = createTool({
      id: 'bad-output', description: 'd',
      outputSchema: z.object({ n: z.number(), inner: z.object({ s: z.string() }) }),
      execute: async () => ({ n: 'x', inner: { s: 1 } }),
    });
    const p2 = new Peer();
    await p2.listen();
    const w2 = await serve({ socket: p2.path, tools: [bad], logger: false });
    try {
      const r = await p2.request('run', { job: job('bad-output') });
      assert.equal(r.result.error.code, 'invalid_output');
      assert.equal(r.result.error.retryable, false);
      const paths = r.result.error.data.errors.map((e) => e.instancePath).sort();
      assert.deepEqual(paths, ['/inner/s', '/n']);
      assert.ok(r.result.error.data.errors.every((e) => e.keyword === 'mastra' && e.message));
      assert.ok(r.result.error.data.fields.n, "Mastra's own report is kept under fields");
    } finally {
      await w2.close();
      await p2.close();
    }
  });

  test('a_run_of_a_job_whose_previous_connection_dropped__is_taken_though_the_old_execute_still_runs', async () => {
    const stubborn = { id: 'stubborn', description: 'ignores abort', execute: () => new Promise((r) => setTimeout(() => r({ late: true }), 300)) };
    const p2 = new Peer();
    await p2.listen();
    const w2 = await serve({ socket: p2.path, tools: [stubborn], logger: false, reconnect: { initialDelayMs: 10 } });
    try {
      const j = job('stubborn');
      const lost = p2.request('run', { job: j });
      await until(() => w2.running === 1, 'the first run');
      p2.last.destroy();
      await assert.rejects(lost, /closed before it answered run/);
      await until(() => p2.messages('worker/register').length === 2, 'the worker to register again');
      const r = await p2.request('run', { job: j });
      assert.deepEqual(r.result, { output: { late: true } });
    } finally {
      await w2.close();
      await p2.close();
    }
  });

  test('abort__reaches_the_abortSignal__and_the_run_answers_with_what_it_has', async () => {
    const j = job('sdk-block');
    const answer = peer.request('run', { job: j });
    await until(() => peer.messages('worker/checkpoint').some((m) => m.params.jobId === j.id), 'a checkpoint');
    peer.notify('abort', { jobId: j.id, reason: 'cancelled' });
    const r = await answer;
    assert.equal(r.result.error.code, 'aborted');
    assert.match(r.result.error.message, /was cancelled/);
    assert.equal(worker.running, 0);
  });

  test('setState__is_a_durable_checkpoint__and_a_new_attempt_starts_from_it', async () => {
    const j = job('sdk-block', { input: { steps: 5 }, checkpoint: { step: 3 } });
    const r = await peer.request('run', { job: j });
    assert.deepEqual(r.result.output, { step: 5, resumedFrom: 3 });
    const cps = peer.messages('worker/checkpoint').filter((m) => m.params.jobId === j.id).map((m) => m.params.value.step);
    assert.deepEqual(cps, [4, 5]);
    assert.ok(peer.messages('worker/progress').some((m) => m.params.jobId === j.id && m.params.progress === 5 && m.params.total === 5));
  });

  test('input__evaluates_requireApproval_as_a_function__and_a_throwing_policy_asks_for_approval', async () => {
    const small = await peer.request('input', { job: job('sdk-approve', { input: { amount: 5 } }) });
    assert.deepEqual(small.result, { requireApproval: false });
    const big = await peer.request('input', { job: job('sdk-approve', { input: { amount: 500 } }) });
    assert.deepEqual(big.result, { requireApproval: true });
    const j = job('sdk-approve', { input: { amount: -1 } });
    const bad = await peer.request('input', { job: j });
    assert.equal(bad.result.requireApproval, true);
    // The failure is in the answer's logs, which berthd adds to the job's
    // log once the job is committed (docs/WORKERS.md).
    assert.ok(bad.result.logs.some((l) => l.level === 'error' && /requireApproval threw/.test(l.message)), JSON.stringify(bad.result));
  });

  test('input_and_transform__give_the_views_of_their_stages', async () => {
    const r = await peer.request('input', { job: job('sdk-echo', { input: { text: 'a', secret: 'b' } }) });
    assert.deepEqual(r.result.views.display, { input: { text: 'a' }, approval: { message: 'Tool approval payload unavailable' } });
    const t = await peer.request('transform', { jobId: 'job-x', tool: 'sdk-echo', stage: 'resume', payload: { name: 'x' } });
    assert.deepEqual(t.result.views.display.resume, { message: 'Tool resume payload unavailable' });
    const unknown = await peer.request('transform', { jobId: 'job-x', tool: 'nope', stage: 'resume', payload: {} });
    assert.equal(unknown.error.code, ErrorCode.NotFound);
  });

  test('berthds_ping_and_an_unknown_method__are_answered', async () => {
    assert.deepEqual((await peer.request('ping', {})).result, {});
    assert.equal((await peer.request('frobnicate', {})).error.code, ErrorCode.MethodNotFound);
    assert.equal((await peer.request('run', { nojob: true })).error.code, ErrorCode.InvalidParams);
  });

  test('the_request_context__is_mastras_RequestContext_with_the_jobs_values', async () => {
    let seen = null;
    const t = { id: 'rc-tool', description: 'd', execute: async (_i, ctx) => { seen = ctx.requestContext; return {}; } };
    const p2 = new Peer();
    await p2.listen();
    const w2 = await serve({ socket: p2.path, tools: [t], logger: false });
    try {
      await p2.request('run', { job: job('rc-tool', { requestContext: { tenant: 'acme' } }) });
      assert.ok(seen instanceof MastraRequestContext);
      assert.equal(seen.get('tenant'), 'acme');
    } finally {
      await w2.close();
      await p2.close();
    }
  });

  test('a_requestContextSchema__is_checked_by_mastra__and_execute_reads_the_values', async () => {
    const t = createTool({
      id: 'rc-schema', description: 'd',
      requestContextSchema: z.object({ tenant: z.string() }),
      execute: async (_i, ctx) => ({ tenant: ctx.requestContext.get('tenant') }),
    });
    const p2 = new Peer();
    await p2.listen();
    const w2 = await serve({ socket: p2.path, tools: [t], logger: false });
    try {
      const ok = await p2.request('run', { job: job('rc-schema', { requestContext: { tenant: 'acme' } }) });
      assert.deepEqual(ok.result, { output: { tenant: 'acme' } });
      const bad = await p2.request('run', { job: job('rc-schema', { requestContext: { tenant: 7 } }) });
      assert.equal(bad.result.error.code, 'invalid_request_context');
      assert.equal(bad.result.error.retryable, false);
    } finally {
      await w2.close();
      await p2.close();
    }
  });

  test('a_dropped_connection__aborts_running_executes__and_the_worker_registers_again', async () => {
    const j = job('sdk-block');
    const lost = peer.request('run', { job: j });
    await until(() => worker.running === 1, 'the run to start');
    peer.last.destroy();
    await assert.rejects(lost, /closed before it answered run/);
    await until(() => worker.running === 0, 'the run to be aborted');
    await until(() => peer.messages('worker/register').length === 2, 'a second registration');
    // The new connection serves runs.
    const r = await peer.request('run', { job: job('sdk-echo', { input: { text: 'back', secret: 'x' } }) });
    assert.equal(r.result.output.text, 'back');
  });

  test('connections_dropped_and_made_again__are_not_held_by_the_worker', async () => {
    // Each connection's wait for its drop or the close was a Promise.race
    // with a promise of the close, pending until close(): each race left a
    // reaction on it that held the drop's BerthError (about 3 KB a
    // connection, for as long as the worker ran).
    v8.setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc');
    let first;
    worker.on('disconnected', (e) => { first ??= new WeakRef(e); });
    for (let i = 2; i <= 6; i++) {
      peer.last.destroy();
      await until(() => peer.messages('worker/register').length === i && worker.registered, 'the worker to register again');
    }
    gc();
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    assert.equal(first.deref(), undefined, "the first drop's error is still held");
  });

  test('close__drains_then_waits_for_the_running_job_before_closing', async () => {
    const j = job('sdk-block', { input: { steps: 10 } });
    const answer = peer.request('run', { job: j });
    await until(() => worker.running === 1, 'the run to start');
    const closed = worker.close();
    await until(() => peer.messages('worker/drain').length === 1, 'worker/drain');
    const r = await answer;
    assert.deepEqual(r.result.output, { step: 10, resumedFrom: 0 });
    await closed;
    assert.equal(worker.registered, false);
    worker = null;
  });
});

describe('serve() under load', () => {
  let peer;
  let worker;
  let gate;
  const writes = [];
  const write = net.Socket.prototype.write;

  beforeEach(async () => {
    peer = new Peer();
    await peer.listen();
    gate = null;
    const tools = [
      { id: 'peer-noop', description: 'Returns its input.', inputSchema: { type: 'object' }, execute: async (input) => input },
      { id: 'peer-bigint', description: 'Returns what JSON cannot carry.', inputSchema: { type: 'object' }, execute: async () => ({ n: 1n }) },
      {
        id: 'peer-checkpointer',
        description: 'Saves its state once the test lets it, then returns.',
        inputSchema: { type: 'object' },
        execute: async (_input, context) => {
          await gate.promise;
          await context.workflow.setState({ saved: true });
          return { saved: true };
        },
      },
      {
        id: 'peer-late-reader',
        description: 'Reads its abortSignal only after the test lets it.',
        inputSchema: { type: 'object' },
        execute: async (_input, context) => {
          await gate.promise;
          return { aborted: context.abortSignal.aborted, reason: String(context.abortSignal.reason?.message) };
        },
      },
    ];
    worker = await serve({ socket: peer.path, tools, concurrency: 8, name: 'peer-load', logger: false });
    // Every write of the worker's socket (the peer's own are left out).
    net.Socket.prototype.write = function (chunk, ...rest) {
      if (!peer.conns.includes(this)) writes.push(String(chunk));
      return write.call(this, chunk, ...rest);
    };
  });
  afterEach(async () => {
    net.Socket.prototype.write = write;
    writes.length = 0;
    await worker?.close({ force: true, timeoutMs: 1000 });
    await peer.close();
  });

  test('a_batch_of_runs_read_at_once__is_answered_in_one_write', async () => {
    const jobs = Array.from({ length: 8 }, (_, i) => job('peer-noop', { input: { n: i } }));
    const answers = new Map();
    const all = new Promise((resolve, reject) => {
      for (const [i, j] of jobs.entries()) {
        const id = `berth-batch-${i}`;
        peer.pending.set(id, {
          conn: peer.last,
          method: 'run',
          resolve: (m) => {
            answers.set(id, m);
            if (answers.size === jobs.length) resolve();
          },
          reject,
        });
      }
    });
    // One write of eight runs, as berthd pushes what one commit started.
    peer.send(peer.last, jobs.map((j, i) => JSON.stringify({ jsonrpc: '2.0', id: `berth-batch-${i}`, method: 'run', params: { job: j } }) + '\n').join(''));
    await all;
    for (const [i] of jobs.entries()) assert.deepEqual(answers.get(`berth-batch-${i}`).result.output, { n: i });
    const carrying = writes.filter((w) => w.includes('"id":"berth-batch-'));
    assert.equal(carrying.length, 1, `the eight answers took ${carrying.length} writes`);
    assert.equal(carrying[0].split('\n').filter((l) => l.includes('"result"')).length, 8);
  });

  test('an_output_that_JSON_cannot_carry__fails_the_run_with_invalid_output', async () => {
    const j = job('peer-bigint');
    const r = await peer.request('run', { job: j });
    assert.equal(r.result.error.code, 'invalid_output');
    assert.equal(r.result.error.retryable, false);
    assert.match(r.result.error.message, /output is not JSON/);
    await until(() => peer.logsOf(j.id).some((l) => /output is not JSON/.test(l.message)), 'the reason in the job log');
  });

  test('close_while_a_checkpoint_is_in_flight__answers_the_run_then_closes', async () => {
    let open;
    gate = { promise: new Promise((resolve) => { open = resolve; }) };
    const answer = peer.request('run', { job: job('peer-checkpointer') });
    await until(() => worker.running === 1, 'the run to start');
    // worker/checkpoint and worker/drain leave in one write, and the peer
    // answers both at once: the answers must not mix on the wire.
    open();
    const closed = worker.close();
    const r = await answer;
    assert.deepEqual(r.result.output, { saved: true });
    await closed;
    assert.equal(worker.registered, false);
    assert.equal(peer.messages('worker/drain').length, 1);
    assert.equal(peer.messages('worker/checkpoint').length, 1);
    assert.equal(peer.messages('worker/register').length, 1, 'the worker did not connect again');
    worker = null;
  });

  test('an_abort_before_execute_reads_its_signal__is_seen_when_it_reads_it', async () => {
    let open;
    gate = { promise: new Promise((resolve) => { open = resolve; }) };
    const j = job('peer-late-reader');
    const answer = peer.request('run', { job: j });
    await until(() => worker.running === 1, 'the run to start');
    peer.notify('abort', { jobId: j.id, reason: 'cancelled' });
    // The worker reads in order: once ping is answered, it has the abort.
    await peer.request('ping', {});
    open();
    const r = await answer;
    assert.equal(r.result.output.aborted, true);
    assert.match(r.result.output.reason, /was cancelled/);
  });
});

// berthd refuses a line with U+0000 in a string, a lone surrogate, an
// integer beyond 64 bits, nesting deeper than 64, or over 16 MiB; for an
// answer it cannot read it says nothing that names the run (an error of id
// null, or nothing), and the job waited for its timeout. The worker sends
// no such line: what a tool returns fails its run, naming where, and text
// of the SDK's own making is made safe.
describe('what berthd cannot read', () => {
  let peer;
  let worker;
  let lines;
  let release;

  // refused finds a line berthd would refuse: "\u0000" or a lone
  // surrogate's escape (JSON.stringify writes a pair as it is).
  const refused = (l) => /(?<!\\)(?:\\\\)*\\u(?:0000|d[89a-f][0-9a-f]{2})/.test(l) || /\d{19}/.test(l.replace(/"(?:[^"\\]|\\.)*"/g, '""'));
  const nested = (n) => {
    let v = 'bottom';
    for (let i = 0; i < n; i++) v = [v];
    return v;
  };
  const odd = {
    // A null-prototype object: String() of it throws.
    nullProto: () => Object.assign(Object.create(null), { message: 'real message', retryable: false }),
    // An Error whose data getter throws.
    badGetter: () => {
      const e = new Error('real message');
      e.retryable = false;
      Object.defineProperty(e, 'data', { get() { throw new Error('data getter failed on purpose'); } });
      return e;
    },
    // A proxy that throws whatever is asked of it.
    proxy: () => new Proxy({}, { get() { throw new Error('no'); }, getPrototypeOf() { throw new Error('no'); }, ownKeys() { throw new Error('no'); } }),
  };
  const wire = {
    id: 'peer-wire',
    description: 'Returns, suspends with, throws or logs what input.kind names.',
    inputSchema: { type: 'object' },
    execute: async ({ kind }, ctx) => {
      switch (kind) {
        case 'out-nul': return { s: 'a\u0000b' };
        case 'out-lone': return { list: ['ok', 'a\ud800'] };
        case 'out-key': return { ['k\u0000']: 1 };
        case 'out-int': return { n: 2 ** 64 };
        case 'out-deep': return { deep: nested(70) };
        case 'out-fn': return () => 1;
        case 'out-big': return { s: 'x'.repeat(5000) };
        case 'suspend-nul': await ctx.agent.suspend({ q: '\u0000' }); return undefined;
        case 'suspend-big': await ctx.agent.suspend({ q: 'x'.repeat(5000) }); return undefined;
        case 'throw-nul': throw Object.assign(new Error('bad\u0000 \udc00 text'), { retryable: false, code: 'odd_text', data: { at: 'x\u0000' } });
        case 'throw-big': throw new Error('y'.repeat(70000));
        case 'log-nul':
          ctx.observe.log('warn', 'line\u0000 \ud800', { v: 'd\u0000', n: 2 ** 64 });
          ctx.berth.progress(1, 2, 'step\u0000');
          return { ok: true };
        default:
          if (kind in odd) throw odd[kind]();
          return { ok: true };
      }
    },
  };
  const models = {
    id: 'peer-models',
    description: 'Its model output and view are what berthd cannot take.',
    inputSchema: { type: 'object' },
    execute: async ({ kind }) => ({ kind }),
    toModelOutput: ({ kind }) => (kind === 'bigint' ? { n: 1n } : kind === 'nul' ? { type: 'text', value: '\u0000' } : { type: 'text', value: 'fine' }),
    transform: { display: { output: ({ output }) => (output.kind === 'nul' ? { s: '\u0000' } : { kind: output.kind }) } },
  };
  const stubborn = {
    id: 'peer-stubborn',
    description: 'Its first attempt ignores its abort until the test releases it; the others return at once.',
    inputSchema: { type: 'object' },
    execute: async (_input, ctx) => {
      if (ctx.berth.attempt > 1) return { attempt: ctx.berth.attempt };
      await new Promise((resolve) => { release = resolve; });
      return { attempt: 1, late: true };
    },
  };

  beforeEach(async () => {
    peer = new Peer();
    await peer.listen();
    lines = [];
    const line = (m) => lines.push(m);
    worker = await serve({
      socket: peer.path, tools: [wire, models, stubborn], name: 'peer-wire', maxSendLineBytes: 4096,
      logger: { debug: line, info: line, warn: line, error: line },
    });
  });
  afterEach(async () => {
    release?.();
    await worker?.close({ force: true, timeoutMs: 1000 });
    await peer.close();
    const bad = peer.lines.filter(refused);
    assert.deepEqual(bad, [], 'the worker sent lines that berthd would refuse');
  });

  const run = async (tool, kind, fields = {}) => (await peer.request('run', { job: job(tool, { input: { kind }, ...fields }) })).result;

  test('an_output_holding_U0000_a_lone_surrogate_a_64_bit_overflow_or_deep_nesting__fails_the_run_as_invalid_output_naming_where', async () => {
    const cases = [
      ['out-nul', /output cannot be sent to berthd: \/s holds U\+0000/],
      ['out-lone', /output cannot be sent to berthd: \/list\/1 holds a lone surrogate \(U\+D800\)/],
      ['out-key', /output cannot be sent to berthd: \/k\ufffd has a member name that holds U\+0000/],
      ['out-int', /output cannot be sent to berthd: \/n is the integer 18446744073709552000, beyond 64 bits/],
      ['out-deep', /output cannot be sent to berthd: \/deep(\/0)+ nests deeper than berthd takes \(64 arrays and objects in a line\)/],
    ];
    for (const [kind, message] of cases) {
      const r = await run('peer-wire', kind);
      assert.equal(r.error?.code, 'invalid_output', `${kind}: ${JSON.stringify(r)}`);
      assert.equal(r.error.retryable, false);
      assert.match(r.error.message, message);
    }
  });

  test('a_suspend_payload_holding_U0000__fails_the_run_as_invalid_suspend', async () => {
    const r = await run('peer-wire', 'suspend-nul');
    assert.equal(r.error?.code, 'invalid_suspend', JSON.stringify(r));
    assert.match(r.error.message, /suspend payload cannot be sent to berthd: \/q holds U\+0000/);
  });

  test('an_error_and_log_text_holding_U0000_or_a_lone_surrogate__are_sent_made_safe', async () => {
    const j = job('peer-wire', { input: { kind: 'throw-nul' } });
    const r = (await peer.request('run', { job: j })).result;
    assert.deepEqual(r.error, { message: 'bad\ufffd \ufffd text', code: 'odd_text', data: { at: 'x\ufffd' }, retryable: false });
    const l = job('peer-wire', { input: { kind: 'log-nul' } });
    assert.deepEqual((await peer.request('run', { job: l })).result, { output: { ok: true } });
    const line = peer.logsOf(l.id).find((x) => x.level === 'warn');
    assert.equal(line.message, 'line\ufffd \ufffd');
    assert.deepEqual(line.data, { v: 'd\ufffd', n: '18446744073709552000' });
    assert.equal(peer.messages('worker/progress').find((m) => m.params.jobId === l.id).params.message, 'step\ufffd');
  });

  test('a_thrown_value_that_cannot_be_read__fails_the_run_with_its_message__and_retryable_false_holds', async () => {
    for (const kind of ['nullProto', 'badGetter']) {
      const r = await run('peer-wire', kind);
      assert.equal(r.error?.message, 'real message', `${kind}: ${JSON.stringify(r)}`);
      assert.equal(r.error.retryable, false, kind);
      assert.equal(r.error.data, undefined);
    }
    const r = await run('peer-wire', 'proxy');
    assert.equal(typeof r.error?.message, 'string', JSON.stringify(r));
    assert.equal(r.error.retryable, true);
  });

  test('an_execute_that_returns_a_function__fails_as_invalid_output_not_JSON', async () => {
    const r = await run('peer-wire', 'out-fn');
    assert.equal(r.error?.code, 'invalid_output', JSON.stringify(r));
    assert.match(r.error.message, /the tool's output is not JSON: it is a function/);
  });

  test('a_model_output_or_view_berthd_cannot_take__is_logged__and_the_output_goes_without_it', async () => {
    const big = job('peer-models', { input: { kind: 'bigint' } });
    const r = (await peer.request('run', { job: big })).result;
    assert.deepEqual(r, { output: { kind: 'bigint' }, views: { display: { output: { kind: 'bigint' } } } });
    assert.ok(peer.logsOf(big.id).some((l) => /toModelOutput returned a value that is not JSON.*BigInt.*no model output/.test(l.message)),
      JSON.stringify(peer.logsOf(big.id)));
    const nul = job('peer-models', { input: { kind: 'nul' } });
    const n = (await peer.request('run', { job: nul })).result;
    assert.deepEqual(n, { output: { kind: 'nul' }, views: { display: { output: { message: 'Tool output-available payload unavailable' } } } });
    assert.ok(peer.logsOf(nul.id).some((l) => /toModelOutput returned a value that cannot be sent to berthd: \/value holds U\+0000/.test(l.message)));
    assert.ok(peer.logsOf(nul.id).some((l) => /transform\.display\.output returned a value that cannot be sent to berthd: \/s holds U\+0000 \(.*\); the view is a placeholder/.test(l.message)));
  });

  test('an_answer_over_the_line_limit__fails_the_run_naming_its_size_and_the_limit__and_a_long_error_is_cut', async () => {
    const out = await run('peer-wire', 'out-big');
    assert.equal(out.error?.code, 'invalid_output', JSON.stringify(out).slice(0, 300));
    assert.match(out.error.message, /the tool's output is 5008 bytes as JSON: the answer would be \d+ bytes as a line, over berthd's line limit of 4096 bytes/);
    assert.equal(out.error.data.limit, 4096);
    const sus = await run('peer-wire', 'suspend-big');
    assert.equal(sus.error?.code, 'invalid_suspend');
    assert.match(sus.error.message, /over berthd's line limit of 4096 bytes/);
    const err = await run('peer-wire', 'throw-big');
    assert.match(err.error?.message, /^y+\.\.\. \(cut from 70000 bytes/);
    assert.equal(err.error.retryable, true);
    assert.ok(peer.lines.every((l) => Buffer.byteLength(l) <= 4096), 'a line over the limit was sent');
  });

  test('an_error_of_id_null_from_berthd__is_logged_with_its_message', async () => {
    peer.send(peer.last, JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32600, message: 'invalid request: something unreadable' } }) + '\n');
    await until(() => lines.some((l) => /berthd refused a line it could not read: invalid request: something unreadable \(-32600\)/.test(l)),
      'the error in the log');
  });

  test('a_run_of_a_job_berthd_aborted__is_taken_while_the_old_execute_runs__whose_late_answer_is_dropped', async () => {
    const j = job('peer-stubborn', { timeoutMs: 500 });
    const first = peer.request('run', { job: j });
    await until(() => release, 'the first attempt to run');
    // Not aborted: a second run of the job is a mistake of berthd's.
    const twice = await peer.request('run', { job: j });
    assert.equal(twice.error?.code, ErrorCode.Conflict);
    // A timeout's retry comes at once, while the run has its kill grace.
    peer.notify('abort', { jobId: j.id, reason: 'timed_out' });
    const again = await peer.request('run', { job: { ...j, attempt: 2 } });
    assert.deepEqual(again.result, { output: { attempt: 2 } });
    // Past the abort grace berthd has given the first run up: its answer
    // is dropped, not sent.
    await new Promise((resolve) => setTimeout(resolve, 5200));
    let answered = false;
    first.then(() => { answered = true; }, () => {});
    release();
    await until(() => lines.some((l) => /returned after the abort grace/.test(l)), 'the first run to return');
    await peer.request('ping', {});
    assert.equal(answered, false, 'the late answer was sent');
    assert.equal(worker.running, 0);
  });
});

// close() drains one connection; these tests change the connection under
// it: a drop while it waits for a run, a close while the worker connects or
// registers again, and a second close with other options.
describe('close() while the connection changes', () => {
  let peer;
  let worker;
  let lines;
  let aborts;
  let release;
  let released;

  // peer-stubborn runs until the test releases it, aborted or not: an
  // execute that ignores its abortSignal, which keeps a run going across a
  // drop for as long as the test needs.
  const stubborn = {
    id: 'peer-stubborn',
    description: 'Runs until the test releases it, whatever its abortSignal says.',
    inputSchema: { type: 'object' },
    execute: async (_input, context) => {
      const signal = context.abortSignal;
      signal.addEventListener('abort', () => aborts.push(String(signal.reason?.message)), { once: true });
      await released;
      return { released: true };
    },
  };

  // peer-tidy stops at its abort and returns what it has after a cleanup
  // of a second: within the abort grace, and more than the nothing the
  // worker used to give after close()'s timeoutMs.
  const tidy = {
    id: 'peer-tidy',
    description: 'Returns what it has a second after its abort.',
    inputSchema: { type: 'object' },
    execute: async (_input, context) => {
      const signal = context.abortSignal;
      if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      await new Promise((resolve) => setTimeout(resolve, 1000));
      return { partial: true, reason: signal.reason?.reason };
    },
  };

  // peer-last begins the close of its own worker without awaiting it, as
  // a tool that makes its worker leave does, and returns.
  const last = {
    id: 'peer-last',
    description: 'Closes its worker, then returns.',
    inputSchema: { type: 'object' },
    execute: async () => {
      void worker.close();
      return { bye: true };
    },
  };

  // peer-selfish awaits the close of its own worker, which waits for it.
  const selfish = {
    id: 'peer-selfish',
    description: 'Awaits the close of its own worker.',
    inputSchema: { type: 'object' },
    execute: async () => {
      await worker.close({ timeoutMs: 100 });
      return { never: true };
    },
  };

  // start serves the tools with a short backoff, so that a worker that
  // connects again does it within a few milliseconds of a drop.
  async function start() {
    const line = (m) => lines.push(m);
    worker = await serve({
      socket: peer.path, tools: [stubborn, blockTool, echoTool, tidy, last, selfish], concurrency: 4, name: 'peer-close',
      reconnect: { initialDelayMs: 10, maxDelayMs: 50 },
      logger: { debug: line, info: line, warn: line, error: line },
    });
  }

  // dropWhileRunning starts a run of peer-stubborn, takes berthd away (its
  // socket stops listening, the connection drops) and returns once the
  // worker has failed to connect again.
  async function dropWhileRunning() {
    const lost = peer.request('run', { job: job('peer-stubborn') });
    await until(() => worker.running === 1, 'the run to start');
    peer.stopListening();
    peer.last.destroy();
    await assert.rejects(lost, /closed before it answered run/);
    await until(() => lines.some((l) => /cannot connect/.test(l)), 'an attempt to connect again to fail');
  }

  beforeEach(async () => {
    peer = new Peer();
    await peer.listen();
    lines = [];
    aborts = [];
    released = new Promise((resolve) => { release = resolve; });
  });
  afterEach(async () => {
    release();
    await worker?.close({ force: true, timeoutMs: 1000 });
    await peer.close();
  });

  test('a_drop_while_close_waits_for_a_run__never_connects_or_registers_again__and_close_resolves', async () => {
    await start();
    const disconnected = [];
    worker.on('disconnected', (e) => disconnected.push(e));
    const lost = peer.request('run', { job: job('peer-stubborn') });
    await until(() => worker.running === 1, 'the run to start');
    let closed = false;
    const closing = worker.close().then(() => { closed = true; });
    await until(() => peer.messages('worker/drain').length === 1, 'worker/drain');
    // berthd restarts, or the network fails, while close() waits.
    peer.last.destroy();
    await assert.rejects(lost, /closed before it answered run/);
    // A worker that connects again does it 10 ms after the drop, long
    // before close() gives up on the execute that ignores its abort.
    await until(() => closed || peer.messages('worker/register').length > 1, 'close() to resolve', 60000);
    assert.equal(peer.messages('worker/register').length, 1, 'the closing worker registered again');
    assert.equal(peer.conns.length, 1, 'the closing worker connected again');
    await closing;
    assert.equal(aborts.length, 1, 'the drop aborted the run');
    assert.match(aborts[0], /berthd closed the connection/);
    assert.equal(disconnected.length, 1);
    assert.equal(worker.registered, false);
    assert.ok(lines.some((l) => /not connecting again/.test(l)), lines.join('\n'));
    // Its job is berthd's again (onInterrupt); the execute, once it
    // returns, has nowhere to answer.
    assert.equal(worker.running, 1);
    release();
    await until(() => worker.running === 0, 'the execute to return');
    assert.equal(peer.conns.length, 1);
    worker = null;
  });

  test('close_while_connecting_again_after_a_drop__never_registers_again', async () => {
    await start();
    await dropWhileRunning();
    let closed = false;
    const closing = worker.close().then(() => { closed = true; });
    // berthd is back: a worker still trying would register within 50 ms.
    await peer.listen();
    await until(() => closed || peer.messages('worker/register').length > 1, 'close() to resolve', 60000);
    assert.equal(peer.messages('worker/register').length, 1, 'the closing worker registered again');
    assert.equal(peer.conns.length, 1, 'the closing worker connected again');
    await closing;
    worker = null;
  });

  test('close_waiting_for_an_abort_grace_that_ends_between_two_reads_of_the_clock__resolves', async () => {
    // The worker's clock (performance.now) stands still from the drop on,
    // so the drop's abort grace ends 5000 ms after that moment. Once the
    // grace's timer fires, the first read of the clock is just before that
    // end and every later read just after it. A close() that read the
    // clock twice in one look found the run not given up by the first read
    // and no grace left to time by the second, and waited for ever.
    await start();
    const real = performance.now;
    const at = performance.now();
    const grace = 5000;
    let reads = null;
    performance.now = () => {
      if (reads === null) return at;
      return reads++ === 0 ? at + grace - 0.5 : at + grace + 0.5;
    };
    try {
      await dropWhileRunning();
      let closed = false;
      const closing = worker.close().then(() => { closed = true; });
      // close() has stopped the reconnecting and set the grace's timer.
      await new Promise((resolve) => setImmediate(resolve));
      reads = 0;
      await until(() => closed, 'close() to resolve once the abort grace is over', grace + 10000);
      await closing;
      assert.ok(reads >= 2, `the clock was read ${reads} times after the grace's timer`);
      assert.equal(worker.running, 1, 'the execute that ignores its abort is left running');
      worker = null;
    } finally {
      performance.now = real;
    }
  });

  test('close_while_berthd_registers_the_worker_again__drains_that_registration_and_answers_the_run_it_pushed', async () => {
    await start();
    let held = null;
    peer.answers['worker/register'] = (_params, m) => { held = m; };
    peer.last.destroy();
    await until(() => held, 'the worker to register again');
    const closing = worker.close();
    // berthd registered it meanwhile and pushed it a waiting job, in one
    // write: a run that close() must answer, not close the connection on.
    const registered = JSON.stringify({ jsonrpc: '2.0', id: held.id, result: { worker: 'W-2', tools: [], heartbeatMs: 10000 } }) + '\n';
    const r = await peer.request('run', { job: job('sdk-echo', { input: { text: 'taken', secret: 'x' } }) }, peer.last, registered);
    assert.equal(r.result.output.text, 'taken');
    await closing;
    assert.equal(peer.messages('worker/register').length, 2);
    assert.equal(peer.messages('worker/drain').length, 1, 'the registration that close() found under way was drained');
    assert.equal(peer.conns.length, 2);
    assert.equal(worker.registered, false);
    worker = null;
  });

  test('close_while_berthd_never_answers_the_registration__gives_up_on_it_and_resolves', async () => {
    await start();
    peer.answers['worker/register'] = () => undefined;
    peer.last.destroy();
    await until(() => peer.messages('worker/register').length === 2, 'the worker to register again');
    await worker.close();
    assert.equal(worker.registered, false);
    assert.equal(peer.messages('worker/drain').length, 0);
    await until(() => peer.last.destroyed || peer.last.readableEnded, 'the connection to close');
    worker = null;
  });

  test('a_second_close_with_force__aborts_the_run_the_first_close_waits_for', async () => {
    await start();
    const answer = peer.request('run', { job: job('sdk-block') });
    await until(() => worker.running === 1, 'the run to start');
    const first = worker.close();
    await until(() => peer.messages('worker/drain').length === 1, 'worker/drain');
    const second = worker.close({ force: true });
    // sdk-block stops by its abort: no answer, and berthd applies its
    // onInterrupt once the connection closes.
    await assert.rejects(answer, /closed before it answered run/);
    await Promise.all([first, second]);
    assert.equal(worker.running, 0);
    assert.equal(peer.messages('worker/drain').length, 1, 'one drain for both');
    assert.equal(peer.messages('worker/register').length, 1);
    worker = null;
  });

  test('a_second_close_with_timeoutMs__bounds_the_wait_of_the_first', async () => {
    await start();
    const lost = peer.request('run', { job: job('peer-stubborn') });
    await until(() => worker.running === 1, 'the run to start');
    // The run still going at the bound is aborted and its connection
    // closed under it: berthd applies the tool's onInterrupt.
    const cut = assert.rejects(lost, /closed before it answered run/);
    const first = worker.close();
    await until(() => peer.messages('worker/drain').length === 1, 'worker/drain');
    await worker.close({ timeoutMs: 0 });
    await first;
    await cut;
    assert.equal(aborts.length, 1);
    assert.match(aborts[0], /the worker is closing/);
    assert.equal(worker.registered, false);
    worker = null;
  });

  test('after_timeoutMs__a_run_that_returns_what_it_has_within_the_abort_grace__is_answered', async () => {
    await start();
    const answer = peer.request('run', { job: job('peer-tidy') });
    await until(() => worker.running === 1, 'the run to start');
    const closing = worker.close({ timeoutMs: 50 });
    const r = await answer;
    assert.deepEqual(r.result.output, { partial: true, reason: 'closing' });
    await closing;
    assert.equal(worker.registered, false);
    worker = null;
  });

  test('a_run_that_stops_by_the_abort_of_close__is_left_to_berthd_unanswered', async () => {
    await start();
    const lost = peer.request('run', { job: job('sdk-block') });
    await until(() => worker.running === 1, 'the run to start');
    // An `aborted` error would be retried by berthd whatever the tool's
    // onInterrupt says; the connection closes under the run instead.
    const cut = assert.rejects(lost, /closed before it answered run/);
    await worker.close({ force: true });
    await cut;
    assert.equal(worker.running, 0);
    worker = null;
  });

  test('a_run_berthd_aborts_while_close_waits__is_waited_for_the_abort_grace_at_most', async () => {
    await start();
    const j = job('peer-stubborn');
    const lost = peer.request('run', { job: j });
    const cut = assert.rejects(lost, /closed before it answered run/);
    await until(() => worker.running === 1, 'the run to start');
    let closed = false;
    const closing = worker.close().then(() => { closed = true; });
    await until(() => peer.messages('worker/drain').length === 1, 'worker/drain');
    // berthd cancels the job: it gives the run its kill grace, then gives
    // it up; so does the closing worker.
    peer.notify('abort', { jobId: j.id, reason: 'cancelled' });
    await until(() => closed, 'close() to resolve', 60000);
    await cut;
    assert.equal(aborts.length, 1);
    assert.match(aborts[0], /was cancelled/);
    await closing;
    worker = null;
  });

  test('a_run_pushed_after_the_deadline_of_close__is_not_executed_and_left_to_berthd', async () => {
    await start();
    peer.request('run', { job: job('peer-stubborn') }).catch(() => {});
    await until(() => worker.running === 1, 'the run to start');
    // berthd has not taken the drain yet, and pushes one more run, while
    // the aborted run keeps the connection open for its grace.
    peer.answers['worker/drain'] = () => undefined;
    const closing = worker.close({ force: true });
    await until(() => peer.messages('worker/drain').length === 1, 'worker/drain');
    const before = calls.echo;
    const late = peer.request('run', { job: job('sdk-echo', { input: { text: 'late', secret: 'x' } }) });
    await assert.rejects(late, /closed before it answered run/);
    assert.equal(calls.echo, before, 'a run pushed after the deadline was executed');
    await closing;
    worker = null;
  });

  test('close_called_inside_execute_without_await__answers_the_run_then_closes', async () => {
    await start();
    const r = await peer.request('run', { job: job('peer-last') });
    assert.deepEqual(r.result.output, { bye: true });
    await worker.close();
    assert.equal(worker.registered, false);
    assert.equal(peer.messages('worker/drain').length, 1);
    assert.equal(peer.messages('worker/register').length, 1);
    worker = null;
  });

  test('close_awaited_inside_execute__waits_for_its_own_run_until_its_timeoutMs__then_leaves_it_to_berthd', async () => {
    await start();
    const lost = peer.request('run', { job: job('peer-selfish') });
    await assert.rejects(lost, /closed before it answered run/);
    await worker.close();
    assert.equal(worker.registered, false);
    await until(() => worker.running === 0, 'the execute to return once the worker closed');
    worker = null;
  });

  test('a_registered_listener_that_throws__stops_the_worker_and_closes_the_connection_it_registered', async () => {
    await start();
    worker.on('registered', () => { throw new Error('a listener failed on purpose'); });
    let closed = false;
    worker.once('closed', () => { closed = true; });
    peer.last.destroy();
    await until(() => closed, 'the worker to stop');
    // A registration that nothing serves any more would be pushed runs.
    await until(() => peer.conns.every((s) => s.destroyed), 'the second connection to close');
    assert.equal(peer.messages('worker/register').length, 2);
    assert.ok(lines.some((l) => /the worker stopped: a listener failed on purpose/.test(l)), lines.join('\n'));
    assert.equal(worker.registered, false);
    await worker.close();
    worker = null;
  });

  test('close_with_a_timeoutMs_that_is_not_a_duration__rejects_naming_it', async () => {
    await start();
    await assert.rejects(worker.close({ timeoutMs: -1 }), (e) => e instanceof RangeError && /timeoutMs/.test(e.message) && /-1/.test(e.message));
    await assert.rejects(worker.close({ timeoutMs: 'soon' }), (e) => e instanceof RangeError && /soon/.test(e.message));
    assert.equal(worker.registered, true, 'a refused close() does not begin closing');
  });
});

describe('serve() refused by berthd', () => {
  test('a_conflicting_definition__rejects_serve_naming_the_fields', async () => {
    const peer = new Peer({
      'worker/register': {
        error: {
          code: -32012, message: 'sdk-echo is served with another definition: /inputSchema/required',
          data: { status: 'conflict', differences: [{ field: '/inputSchema/required', registered: ['a'], offered: ['text'] }] },
        },
      },
    });
    await peer.listen();
    try {
      await assert.rejects(serve({ socket: peer.path, tools: [echoTool], logger: false }), (e) => {
        assert.ok(e instanceof BerthError);
        assert.equal(e.code, ErrorCode.Conflict);
        assert.match(e.message, /differences at \/inputSchema\/required/);
        return true;
      });
    } finally {
      await peer.close();
    }
  });

  test('a_berthd_without_the_worker_protocol__rejects_serve_with_a_clear_error', async () => {
    const peer = new Peer({ 'worker/register': { error: { code: -32601, message: 'method not found' } } });
    await peer.listen();
    try {
      await assert.rejects(serve({ socket: peer.path, tools: [askTool, blockTool, approveTool, flakyTool], logger: false }),
        /does not speak the worker protocol/);
    } finally {
      await peer.close();
    }
  });

  test('a_signal_aborted_before_berthd_answers__rejects_serve', async () => {
    const ac = new AbortController();
    const serving = serve({ socket: path.join(dir, 'nobody.sock'), tools: [echoTool], signal: ac.signal, logger: false });
    setTimeout(() => ac.abort(), 200);
    await assert.rejects(serving, (e) => e.code === ErrorCode.ConnectionClosed && /closed before berthd accepted/.test(e.message));
  });

  test('serve__waits_for_a_berthd_that_is_not_up_yet__with_backoff', async () => {
    const peer = new Peer();
    const serving = serve({ socket: peer.path, tools: [echoTool], logger: false });
    await new Promise((r) => setTimeout(r, 300));
    await peer.listen();
    const w = await serving;
    assert.equal(w.registered, true);
    await w.close();
    await peer.close();
  });

  test('connection_attempts_that_time_out__leave_no_listener_behind', { skip: python3 ? false : 'python3 is needed for a listener that never accepts' }, async () => {
    // A TCP listener that never accepts, whose queue one connection
    // fills: the kernel drops the next connections' SYNs, so that each
    // attempt of the worker ends at its connectTimeoutMs, as against a
    // host behind a firewall that drops. Each such attempt used to leave
    // its abort listener on the worker's own signal: 11 of them made Node
    // warn, and a worker kept one more for every attempt while berthd
    // could not be reached.
    const py = spawnTied(python3, ['-c', [
      'import socket, sys',
      's = socket.socket()',
      "s.bind(('127.0.0.1', 0))",
      's.listen(0)',
      'print(s.getsockname()[1], flush=True)',
      'sys.stdin.read()',
    ].join('\n')], { stdio: ['pipe', 'pipe', 'inherit'] });
    const warnings = [];
    const onWarning = (w) => { if (w.name === 'MaxListenersExceededWarning') warnings.push(w.message); };
    let filler;
    try {
      const port = await new Promise((resolve, reject) => {
        py.stdout.once('data', (b) => resolve(Number(String(b).trim())));
        py.once('exit', (code) => reject(new Error(`the listener exited (${code})`)));
      });
      filler = net.connect({ host: '127.0.0.1', port });
      await new Promise((resolve, reject) => { filler.once('connect', resolve); filler.once('error', reject); });
      process.on('warning', onWarning);
      const ac = new AbortController();
      const lines = [];
      const line = (m) => lines.push(m);
      const serving = serve({
        url: `tcp://127.0.0.1:${port}`, token: 'unused', tools: [echoTool], signal: ac.signal,
        connectTimeoutMs: 20, reconnect: { initialDelayMs: 1, maxDelayMs: 1 },
        logger: { debug: line, info: line, warn: line, error: line },
      });
      const timedOut = () => lines.filter((l) => /no answer from tcp:\/\/127\.0\.0\.1:\d+ within 20 ms/.test(l)).length;
      await until(() => timedOut() >= 15, '15 connection attempts to time out');
      ac.abort();
      await assert.rejects(serving, (e) => e.code === ErrorCode.ConnectionClosed);
      // A warning is emitted on the next tick of the addEventListener that
      // exceeds the limit.
      await new Promise((resolve) => setImmediate(resolve));
      assert.deepEqual(warnings, [], `after ${timedOut()} attempts that timed out`);
    } finally {
      process.off('warning', onWarning);
      filler?.destroy();
      py.kill();
    }
  });
});

describe('the heartbeat', () => {
  test('a_wall_clock_set_back__does_not_stop_the_pings_that_find_a_silent_berthd', async () => {
    // berthd's silence was timed by the wall clock: set back an hour (NTP,
    // a virtual machine resumed), it made the silence negative for that
    // hour, in which the worker never pinged, and never found a berthd
    // that had vanished. This berthd never answers a ping.
    const peer = new Peer({ 'worker/register': { worker: 'W-1', tools: [], heartbeatMs: 100 }, ping: undefined });
    await peer.listen();
    const lines = [];
    const line = (m) => lines.push(m);
    const worker = await serve({ socket: peer.path, tools: [echoTool], logger: { debug: line, info: line, warn: line, error: line } });
    const wall = Date.now;
    try {
      const start = wall();
      Date.now = () => wall() - 3600000;
      assert.ok(Date.now() < start);
      await until(() => peer.messages('ping').length >= 1, 'a ping of the silent berthd');
      await until(() => lines.some((l) => /did not answer ping within 200 ms/.test(l)), 'the worker to drop the silent berthd');
    } finally {
      Date.now = wall;
      await worker.close({ force: true });
      await peer.close();
    }
  });
});

describe('examples/mastra/tools.ts', () => {
  test('the_example__registers_its_three_tools_and_runs_a_job__then_closes_on_SIGTERM', async () => {
    const peer = new Peer();
    await peer.listen();
    const child = spawnTied(process.execPath, ['--import', 'tsx', 'example/tools.ts'], {
      env: { ...process.env, BERTH_SOCKET: peer.path },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (b) => { out += b; });
    child.stderr.on('data', (b) => { out += b; });
    const exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      await until(() => peer.messages('worker/register').length === 1, `the example to register (${out})`, 60000);
      const tools = peer.messages('worker/register')[0].params.tools;
      assert.deepEqual(tools.map((t) => t.id), ['get-weather', 'save-note', 'confirm-plan']);
      assert.equal(tools[1].requireApproval, true);
      const r = await peer.request('run', { job: job('get-weather', { input: { location: 'Oslo', unit: 'F' } }) });
      assert.deepEqual(r.result.modelOutput, { type: 'text', value: 'Oslo: 70°F and sunny' });
      const s = await peer.request('run', { job: job('confirm-plan', { input: { plan: 'ship it' } }) });
      assert.deepEqual(s.result, { suspend: { question: 'Who approves this plan? ship it' } });
      child.kill('SIGTERM');
      assert.equal(await exited, 0, out);
      assert.equal(peer.messages('worker/drain').length, 1);
    } finally {
      child.kill('SIGKILL');
      await peer.close();
    }
  });
});
