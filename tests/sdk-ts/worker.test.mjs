// worker.test.mjs: real Mastra tools served by serve() to a real berthd,
// through the worker protocol (docs/WORKERS.md). These tests need a berthd
// that speaks it: while worker/register is unknown to berthd (-32601) they
// are skipped, saying so; with BERTH_REQUIRE_WORKERS=1 that is a failure.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { spawnTied } from './child.mjs';
import { after, before, describe, test } from './bounded.mjs';
import { promisify } from 'node:util';

import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { createTool } from '@mastra/core/tools';
import { z } from 'zod';

import { BerthError, ErrorCode, connect, serve } from '@berth/sdk';
import { BERTH, Daemon, WorkerProcess, freePort, until } from './harness.mjs';
import { allTools, calls, echoTool } from './tools.fixture.mjs';

// speaksWorkers asks a berthd whether it knows worker/register: a register
// with no tools is -32602 there and -32601 where the method is missing.
async function speaksWorkers() {
  const d = new Daemon();
  await d.start();
  const c = await connect({ socket: d.socket, reconnect: false });
  try {
    await c.request('worker/register', { tools: [] });
    return true;
  } catch (e) {
    return !(e instanceof BerthError && e.code === ErrorCode.MethodNotFound);
  } finally {
    c.close();
    await d.cleanup();
  }
}

const supported = await speaksWorkers();
const required = process.env.BERTH_REQUIRE_WORKERS === '1';
if (!supported && required) {
  throw new Error('BERTH_REQUIRE_WORKERS=1, but this berthd answers worker/register with -32601: it lacks the worker protocol');
}
const skip = supported ? false : 'berthd does not speak the worker protocol yet (worker/register is -32601); BERTH_REQUIRE_WORKERS=1 makes this a failure';

const quiet = { logger: false };

// The summary counts the skip, so that a run that skipped them says so.
if (skip) test('the worker tests against berthd', { skip }, () => {});

describe('Mastra tools served by a worker', { skip }, () => {
  const d = new Daemon();
  let c;
  let w;

  before(async () => {
    await d.start();
    c = await connect({ socket: d.socket });
    w = await serve({ socket: d.socket, tools: allTools, concurrency: 8, ...quiet });
  });
  after(async () => {
    await w?.close({ force: true, timeoutMs: 5000 });
    c?.close();
    await d.cleanup();
  });

  test('the_tools__are_listed_as_worker_tools_with_their_schemas', async () => {
    const tools = await c.tools();
    const echo = tools.find((t) => t.name === 'sdk-echo');
    assert.ok(echo, 'sdk-echo is listed');
    assert.equal(echo.kind, 'worker');
    assert.equal(echo.workers.connected, 1);
    assert.deepEqual(echo.inputSchema.required, ['text']);
    assert.equal(echo.annotations.readOnlyHint, true);
    // A function decides per job; tools/list may show it as "function" or as true.
    assert.ok(['function', true].includes(tools.find((t) => t.name === 'sdk-approve').requireApproval));
  });

  test('a_submitted_job__completes_with_its_output_model_output_and_views', async () => {
    const j = await c.submit('sdk-echo', { text: 'hi' });
    const done = await c.wait(j.id, { timeoutMs: 60000 });
    assert.equal(done.status, 'completed', JSON.stringify(done.error));
    assert.deepEqual(done.output, { text: 'hi', secret: 's3cret' });
    assert.deepEqual(done.modelOutput, { type: 'text', value: 'echo: hi' });
    const display = await c.get(j.id, { view: 'display' });
    assert.deepEqual(display.input, { text: 'hi' });
    assert.deepEqual(display.output, { text: 'hi' });
    const transcript = await c.get(j.id, { view: 'transcript' });
    assert.deepEqual(transcript.output, { said: 'hi' });
    assert.doesNotMatch(JSON.stringify(display), /s3cret/);
  });

  test('the_events__carry_the_display_views__never_the_raw_payload', async () => {
    const j = await c.submit('sdk-echo', { text: 'ev', secret: 'hidden-value' });
    await c.wait(j.id, { timeoutMs: 60000 });
    const seen = [];
    for await (const e of c.events({ since: 0, jobId: j.id })) {
      seen.push(e);
      if (e.type === 'completed' || e.type === 'failed') break;
    }
    assert.doesNotMatch(JSON.stringify(seen), /hidden-value/);
    assert.deepEqual(seen.find((e) => e.type === 'completed').data, { text: 'ev' });
  });

  test('requireApproval_as_a_function__decides_per_job__and_a_decline_never_runs_execute', async () => {
    const small = await c.submit('sdk-approve', { amount: 5 });
    assert.notEqual(small.status, 'awaiting_approval');
    assert.equal((await c.wait(small.id, { timeoutMs: 60000 })).status, 'completed');
    const big = await c.submit('sdk-approve', { amount: 500 });
    assert.equal(big.status, 'awaiting_approval');
    await c.approve(big.id, { note: 'fine' });
    const paid = await c.wait(big.id, { timeoutMs: 60000 });
    assert.deepEqual(paid.output, { paid: 500 });
    const no = await c.submit('sdk-approve', { amount: 900 });
    const declined = await c.decline(no.id, { reason: 'too much' });
    assert.equal(declined.status, 'declined');
  });

  test('a_hook_that_throws__is_logged_on_the_job_and_the_job_completes', async () => {
    const j = await c.submit('sdk-echo', { text: 'throw-hook' });
    assert.equal((await c.wait(j.id, { timeoutMs: 60000 })).status, 'completed');
    const logs = await c.logs(j.id);
    assert.ok(logs.lines.some((l) => /onOutput threw/.test(l.message)), JSON.stringify(logs.lines));
  });

  test('suspend_and_resume__with_resume_data_that_fails_the_schema_refused', async () => {
    const j = await c.submit('sdk-ask', {});
    const s = await c.wait(j.id, { timeoutMs: 60000 });
    assert.equal(s.status, 'suspended');
    assert.deepEqual(s.suspendPayload, { question: 'What is your name?' });
    await assert.rejects(c.resume(j.id, { name: '' }), (e) => e.code === ErrorCode.InvalidParams && /\/name$/.test(e.errors[0].instancePath));
    await assert.rejects(c.resume(j.id, { nom: 'x' }), (e) => e.code === ErrorCode.InvalidParams);
    await c.resume(j.id, { name: 'Ada' });
    const done = await c.wait(j.id, { timeoutMs: 60000 });
    assert.deepEqual(done.output, { greeting: 'Hello, Ada' });
  });

  test('cancel__reaches_executes_abortSignal', async () => {
    const j = await c.submit('sdk-block', {});
    await c.wait(j.id, { until: ['running'], timeoutMs: 60000 });
    await until(() => w.running >= 1, 'the run to reach the worker');
    const cancelled = await c.cancel(j.id, { reason: 'stop' });
    assert.equal(cancelled.status, 'cancelled');
    await until(() => w.running === 0, 'execute to be aborted');
  });

  test('a_timeout__ends_the_job_timed_out_and_aborts_execute', async () => {
    const j = await c.submit('sdk-block', {}, { timeoutMs: 300, maxRetries: 0 });
    const done = await c.wait(j.id, { timeoutMs: 60000 });
    assert.equal(done.status, 'timed_out');
    await until(() => w.running === 0, 'execute to be aborted');
  });

  test('an_error__is_retried_while_retries_are_left__and_a_NonRetryableError_is_not', async () => {
    const j = await c.submit('sdk-flaky', {});
    const done = await c.wait(j.id, { timeoutMs: 60000 });
    assert.equal(done.status, 'completed', JSON.stringify(done.error));
    assert.deepEqual(done.output, { attempt: 3 });
    const f = await c.submit('sdk-flaky', { fatal: true });
    const failed = await c.wait(f.id, { timeoutMs: 60000 });
    assert.equal(failed.status, 'failed');
    assert.equal(failed.attempt, 1);
    assert.equal(failed.error.code, 'fatal');
  });

  test('toModelOutput__is_the_text_of_an_mcp_tools_call_result', async () => {
    const transport = new StdioClientTransport({ command: BERTH, args: ['mcp', '--socket', d.socket], stderr: 'pipe' });
    const mcp = new McpClient({ name: 'sdk-ts-test', version: '1.0.0' });
    await mcp.connect(transport);
    try {
      const r = await mcp.callTool({ name: 'sdk-echo', arguments: { text: 'to the model' } });
      assert.ok(!r.isError, JSON.stringify(r));
      assert.match(r.content[0].text, /echo: to the model/);
      // structuredContent is the transcript view of the output
      // (docs/MCP.md), as the worker's transform made it.
      assert.deepEqual(r.structuredContent, { said: 'to the model' });
      // context.mcp: the client that called, from the job's metadata.mcp
      // ({_meta, clientInfo}, docs/WORKERS.md).
      const m = await mcp.callTool({ name: 'sdk-mcp', arguments: {}, _meta: { progressToken: 7 } });
      assert.deepEqual(m.structuredContent, { client: 'sdk-ts-test', meta: true }, JSON.stringify(m));
    } finally {
      await mcp.close();
    }
  });

  test('a_default_computed_by_a_function__is_fresh_per_job__a_constant_one_filled_by_berthd__and_a_second_worker_of_the_file_accepted', async () => {
    // The SDK wrote the function's value of registration time into the
    // definition: berthd filled that one value into every job, and a second
    // worker process of the same file was refused (-32012, the defaults
    // differed).
    const mk = () => createTool({
      id: 'sdk-stamp', description: 'records when it was asked',
      inputSchema: z.object({
        note: z.string(),
        requestedAt: z.string().default(() => new Date().toISOString()),
        orderId: z.string().default(() => crypto.randomUUID()),
        unit: z.enum(['C', 'F']).default('C'),
      }),
      // It sees the input as berthd filled it, before any parse of Zod's.
      requireApproval: async (input) => { asked.push(input); return false; },
      execute: async (input) => input,
    });
    const asked = [];
    const w1 = await serve({ socket: d.socket, tools: [mk()], ...quiet });
    let w2;
    try {
      w2 = await serve({ socket: d.socket, tools: [mk()], ...quiet });
      const listed = (await c.tools()).find((t) => t.name === 'sdk-stamp');
      assert.equal(listed.inputSchema.properties.unit.default, 'C');
      assert.equal(listed.inputSchema.properties.orderId.default, undefined);
      const j1 = await c.submit('sdk-stamp', { note: 'a' });
      assert.equal(asked[0].unit, 'C', 'berthd fills a constant default');
      assert.equal(asked[0].orderId, undefined, 'berthd fills no computed default');
      await new Promise((r) => setTimeout(r, 5));
      const j2 = await c.submit('sdk-stamp', { note: 'b' });
      const [o1, o2] = [(await c.wait(j1.id)).output, (await c.wait(j2.id)).output];
      assert.match(o1.orderId, /^[0-9a-f-]{36}$/);
      assert.notEqual(o1.orderId, o2.orderId);
      assert.notEqual(o1.requestedAt, o2.requestedAt);
      assert.equal(o1.unit, 'C');
      assert.equal((await c.tools()).find((t) => t.name === 'sdk-stamp').workers.connected, 2);
    } finally {
      await w2?.close({ force: true });
      await w1.close({ force: true });
    }
  });

  test('background_retryDelayMs__is_read_as_berths_backoffMs', async () => {
    const t = createTool({
      id: 'sdk-backoff', description: 'd', execute: async () => ({}),
      background: { enabled: true, maxRetries: 1, retryDelayMs: 200 },
    });
    const w1 = await serve({ socket: d.socket, tools: [t], ...quiet });
    try {
      const listed = (await c.tools()).find((x) => x.name === 'sdk-backoff');
      assert.equal(listed.background.backoffMs, 200);
      assert.equal(listed.background.maxRetries, 1);
    } finally {
      await w1.close({ force: true });
    }
  });

  test('a_second_worker_with_a_different_definition__is_refused_naming_the_fields', async () => {
    const other = createTool({
      id: 'sdk-echo', description: 'another echo',
      inputSchema: z.object({ words: z.string() }),
      execute: async () => ({}),
    });
    await assert.rejects(serve({ socket: d.socket, tools: [other], ...quiet }), (e) => {
      assert.equal(e.code, ErrorCode.Conflict);
      assert.match(e.message, /inputSchema/);
      return true;
    });
  });
});

// What berthd cannot read (docs/API.md, "Limits"): a run answered with it
// used to hold its job running until its timeout, and then ran it again.
describe('answers berthd cannot read, and runs that ignore their abort', { skip }, () => {
  const d = new Daemon();
  let c;
  let w;
  let release = () => {};
  let executes = 0;
  const wire = {
    id: 'sdk-wire',
    description: 'Returns or throws what input.kind names',
    inputSchema: { type: 'object' },
    background: { maxRetries: 2, backoffMs: 10, timeoutMs: 60000 },
    execute: async ({ kind }) => {
      executes++;
      switch (kind) {
        case 'nul': return { s: 'a\u0000' };
        case 'lone': return { s: 'a\ud800' };
        case 'big': return { s: 'x'.repeat(17 * 1024 * 1024) };
        case 'throw-nul': throw Object.assign(new Error('a\u0000b'), { retryable: false });
        case 'null-proto': throw Object.assign(Object.create(null), { message: 'real message', retryable: false });
        default: return { ok: true };
      }
    },
  };
  const model = createTool({
    id: 'sdk-model-bigint',
    description: 'Its model output is not JSON',
    inputSchema: z.object({}),
    outputSchema: z.object({ ok: z.boolean() }),
    execute: async () => ({ ok: true }),
    toModelOutput: () => ({ n: 1n }),
  });
  // sdk-stubborn-retry's first attempt ignores its abort until the test
  // ends; a retry returns at once.
  const stubborn = createTool({
    id: 'sdk-stubborn-retry',
    description: 'Ignores the abort of its first attempt',
    inputSchema: z.object({}),
    outputSchema: z.object({ attempt: z.number() }),
    background: { timeoutMs: 500, maxRetries: 2, backoffMs: 10 },
    execute: async (_input, ctx) => {
      if (ctx.berth.attempt === 1) await new Promise((resolve) => { release = resolve; });
      return { attempt: ctx.berth.attempt };
    },
  });
  // Mastra's older background.retries, which berthd reads (docs/TOOLS.md).
  const retries = createTool({
    id: 'sdk-retries',
    description: 'Sets its retries the older way',
    inputSchema: z.object({}),
    background: { retries: { maxRetries: 3, retryDelayMs: 20, maxRetryDelayMs: 40 } },
    execute: async () => ({}),
  });

  before(async () => {
    await d.start();
    c = await connect({ socket: d.socket });
    w = await serve({ socket: d.socket, tools: [wire, model, stubborn, retries], ...quiet });
  });
  after(async () => {
    release();
    await w?.close({ force: true, timeoutMs: 5000 });
    c?.close();
    await d.cleanup();
  });

  // done waits for the job to end, 20 s at most: a job whose answer
  // berthd could not read stays running.
  const done = async (kind) => {
    const j = await c.submit('sdk-wire', { kind });
    return c.wait(j.id, { timeoutMs: 20000 });
  };

  test('an_output_holding_U0000_or_a_lone_surrogate__fails_the_job_at_once_as_invalid_output_naming_where', async () => {
    for (const [kind, problem] of [['nul', /\/s holds U\+0000/], ['lone', /\/s holds a lone surrogate/]]) {
      const before = executes;
      const job = await done(kind);
      assert.equal(job.status, 'failed', `${kind}: ${JSON.stringify(job)}`);
      assert.equal(job.error.code, 'invalid_output');
      assert.match(job.error.message, problem);
      assert.equal(executes - before, 1, 'not retried');
    }
  });

  test('an_output_over_berthds_16_MiB_line_limit__fails_the_job_at_once_naming_its_size_and_the_limit', async () => {
    const job = await done('big');
    assert.equal(job.status, 'failed', JSON.stringify(job).slice(0, 500));
    assert.equal(job.attempt, 1);
    assert.equal(job.error.code, 'invalid_output');
    assert.match(job.error.message, /the tool's output is 17825800 bytes as JSON: the answer would be \d+ bytes as a line, over berthd's line limit of 16777216 bytes/);
  });

  test('an_error_holding_U0000__reaches_berthd_made_safe__and_an_odd_thrown_value_keeps_its_message_and_retryable_false', async () => {
    const nul = await done('throw-nul');
    assert.equal(nul.status, 'failed', JSON.stringify(nul));
    assert.equal(nul.error.message, 'a\ufffdb');
    assert.equal(nul.attempt, 1);
    const odd = await done('null-proto');
    assert.equal(odd.status, 'failed', JSON.stringify(odd));
    assert.equal(odd.error.message, 'real message');
    assert.equal(odd.attempt, 1, 'retryable: false was kept');
  });

  test('a_toModelOutput_that_is_not_JSON__leaves_no_model_output__and_the_job_completes', async () => {
    const j = await c.submit('sdk-model-bigint', {});
    const job = await c.wait(j.id, { timeoutMs: 20000 });
    assert.equal(job.status, 'completed', JSON.stringify(job));
    assert.deepEqual(job.output, { ok: true });
    assert.equal(job.modelOutput, undefined);
    assert.ok((await c.logs(j.id)).lines.some((l) => /toModelOutput returned a value that is not JSON/.test(l.message)));
  });

  test('a_run_that_ignores_the_abort_of_its_timeout__does_not_fail_the_retry_of_its_job', async () => {
    const j = await c.submit('sdk-stubborn-retry', {});
    const job = await c.wait(j.id, { timeoutMs: 30000 });
    assert.equal(job.status, 'completed', JSON.stringify(job));
    assert.deepEqual(job.output, { attempt: 2 });
  });

  test('background_retries__mastras_older_retry_settings__are_read_by_berthd', async () => {
    const t = (await c.tools()).find((x) => x.name === 'sdk-retries');
    assert.equal(t.background.maxRetries, 3, JSON.stringify(t.background));
    assert.equal(t.background.backoffMs, 20);
    assert.equal(t.background.backoffMaxMs, 40);
  });
});

describe('workers and crashes', { skip }, () => {
  test('kill_9_of_the_worker_mid_run__requeues_the_job__and_the_next_worker_resumes_from_its_checkpoint', async () => {
    const d = new Daemon();
    await d.start();
    const c = await connect({ socket: d.socket });
    const w1 = new WorkerProcess({ BERTH_SOCKET: d.socket });
    let w2;
    try {
      await w1.ready();
      const j = await c.submit('sdk-block', { steps: 150 });
      await until(async () => ((await c.get(j.id)).checkpoint?.step ?? 0) >= 3, 'a few checkpoints');
      await w1.kill9();
      const back = await c.wait(j.id, { until: ['pending'], timeoutMs: 60000 });
      assert.equal(back.status, 'pending');
      assert.equal(back.attempt, 2);
      w2 = new WorkerProcess({ BERTH_SOCKET: d.socket });
      await w2.ready();
      const done = await c.wait(j.id, { timeoutMs: 120000 });
      assert.equal(done.status, 'completed', JSON.stringify(done.error));
      assert.ok(done.output.resumedFrom >= 3, `resumed from ${done.output.resumedFrom}`);
    } finally {
      await w1.kill9().catch(() => {});
      if (w2) await w2.kill9();
      c.close();
      await d.cleanup();
    }
  });

  test('kill_9_of_berthd__keeps_suspended_and_running_worker_jobs__and_the_worker_reconnects', async () => {
    const d = new Daemon();
    await d.start();
    let c = await connect({ socket: d.socket });
    const w = new WorkerProcess({ BERTH_SOCKET: d.socket });
    try {
      await w.ready();
      const ask = await c.submit('sdk-ask', {});
      assert.equal((await c.wait(ask.id, { timeoutMs: 60000 })).status, 'suspended');
      const run = await c.submit('sdk-block', { steps: 100 });
      await until(async () => ((await c.get(run.id)).checkpoint?.step ?? 0) >= 2, 'the run to checkpoint');
      c.close();
      await d.kill9();
      await d.start();
      c = await connect({ socket: d.socket });
      await until(() => /worker registered again/.test(w.out), 'the worker to register again');
      assert.equal((await c.get(ask.id)).status, 'suspended');
      await c.resume(ask.id, { name: 'Grace' });
      assert.deepEqual((await c.wait(ask.id, { timeoutMs: 60000 })).output, { greeting: 'Hello, Grace' });
      const done = await c.wait(run.id, { timeoutMs: 120000 });
      assert.equal(done.status, 'completed', JSON.stringify(done.error));
      assert.ok(done.attempt >= 2);
    } finally {
      await w.kill9();
      c.close();
      await d.cleanup();
    }
  });

  test('the_definitions_persist__jobs_are_accepted_while_no_worker_is_connected__and_run_when_one_is', async () => {
    const d = new Daemon();
    await d.start();
    const c = await connect({ socket: d.socket });
    try {
      const w = await serve({ socket: d.socket, tools: [echoTool], ...quiet });
      await w.close();
      await d.restart();
      const listed = (await c.tools()).find((t) => t.name === 'sdk-echo');
      assert.ok(listed, 'the definition survived the restart');
      assert.equal(listed.workers.connected, 0);
      await assert.rejects(c.submit('sdk-echo', { text: 5 }), (e) => e.code === ErrorCode.InvalidParams);
      const j = await c.submit('sdk-echo', { text: 'later' });
      assert.equal((await c.wait(j.id, { timeoutMs: 500, until: ['completed'] })).status, 'pending');
      const w2 = await serve({ socket: d.socket, tools: [echoTool], ...quiet });
      try {
        assert.equal((await c.wait(j.id, { timeoutMs: 60000 })).status, 'completed');
      } finally {
        await w2.close();
      }
    } finally {
      c.close();
      await d.cleanup();
    }
  });

  test('two_workers_serving_the_same_tool__share_its_jobs', async () => {
    const d = new Daemon();
    await d.start();
    const c = await connect({ socket: d.socket });
    const a = await serve({ socket: d.socket, tools: allTools, concurrency: 1, name: 'a', ...quiet });
    const b = await serve({ socket: d.socket, tools: allTools, concurrency: 1, name: 'b', ...quiet });
    const ran = { a: 0, b: 0 };
    a.on('active', () => ran.a++);
    b.on('active', () => ran.b++);
    try {
      const jobs = [];
      for (let i = 0; i < 6; i++) jobs.push(await c.submit('sdk-block', { steps: 5 }));
      for (const j of jobs) assert.equal((await c.wait(j.id, { timeoutMs: 120000 })).status, 'completed');
      assert.equal(ran.a + ran.b, 6);
      assert.ok(ran.a > 0 && ran.b > 0, `both ran jobs: ${JSON.stringify(ran)}`);
      assert.equal((await c.tools()).find((t) => t.name === 'sdk-block').workers.connected, 2);
    } finally {
      await a.close();
      await b.close();
      c.close();
      await d.cleanup();
    }
  });

  test('a_worker_on_tcp_with_the_token__serves__and_a_wrong_token_is_refused', async () => {
    const d = new Daemon({ tcp: true });
    await d.start();
    const c = await connect({ url: d.url, token: d.token });
    try {
      await assert.rejects(serve({ url: d.url, token: 'wrong', tools: [echoTool], ...quiet }),
        (e) => e.code === ErrorCode.Unauthorized);
      const w = await serve({ url: d.url, token: d.token, tools: [echoTool], ...quiet });
      try {
        const j = await c.submit('sdk-echo', { text: 'over tcp' });
        assert.equal((await c.wait(j.id, { timeoutMs: 60000 })).output.text, 'over tcp');
      } finally {
        await w.close();
      }
    } finally {
      c.close();
      await d.cleanup();
    }
  });

  test('kill_9_of_berthd_while_a_worker_drains__it_never_registers_again__and_its_job_waits_for_the_next_worker', async () => {
    const d = new Daemon();
    await d.start();
    let c = await connect({ socket: d.socket });
    // sdk-stubborn runs until the test lets it return, whatever its
    // abortSignal says, so that its run outlives the drop of berthd.
    let release;
    const released = new Promise((resolve) => { release = resolve; });
    let executes = 0;
    const stubborn = createTool({
      id: 'sdk-stubborn',
      description: 'Runs until the test lets it return, aborted or not',
      inputSchema: z.object({}),
      outputSchema: z.object({ done: z.boolean() }),
      background: { maxRetries: 2, onInterrupt: 'retry' },
      execute: async () => {
        executes++;
        await released;
        return { done: true };
      },
    });
    const workersOf = async () => (await c.tools()).find((t) => t.name === 'sdk-stubborn').workers.connected;
    const w = await serve({ socket: d.socket, tools: [stubborn], reconnect: { initialDelayMs: 20, maxDelayMs: 200 }, ...quiet });
    let w2;
    try {
      const j = await c.submit('sdk-stubborn', {});
      await until(() => w.running === 1, 'the job to run');
      let closed = false;
      const closing = w.close().then(() => { closed = true; });
      // berthd counts a draining worker out of its tool's workers.
      await until(async () => (await workersOf()) === 0, 'berthd to take the drain');
      c.close();
      await d.kill9();
      await d.start();
      c = await connect({ socket: d.socket });
      // berthd put the job back at start (onInterrupt "retry"): a worker
      // that registered again would be pushed it at once.
      await until(async () => closed || (await workersOf()) > 0, 'close() to resolve', 60000);
      assert.equal(await workersOf(), 0, 'the closing worker registered again');
      await closing;
      assert.equal(executes, 1, 'the closing worker ran the job again');
      const back = await c.get(j.id);
      assert.equal(back.status, 'pending');
      assert.equal(back.attempt, 2);
      // The job was not lost: the next worker runs it.
      release();
      w2 = await serve({ socket: d.socket, tools: [stubborn], ...quiet });
      const done = await c.wait(j.id, { timeoutMs: 60000 });
      assert.equal(done.status, 'completed', JSON.stringify(done.error));
      assert.equal(executes, 2);
    } finally {
      release();
      await w.close({ force: true, timeoutMs: 5000 });
      if (w2) await w2.close();
      c.close();
      await d.cleanup();
    }
  });

  test('close_with_timeoutMs__completes_a_job_whose_run_returns_what_it_has__and_leaves_one_that_stops_to_onInterrupt', async () => {
    const d = new Daemon();
    await d.start();
    const c = await connect({ socket: d.socket });
    const aborted = (signal) => new Promise((resolve) => {
      if (signal.aborted) resolve();
      else signal.addEventListener('abort', resolve, { once: true });
    });
    // sdk-tidy cleans up for a second after its abort, and returns what it
    // has; sdk-stops stops by its abort, and must not be run twice.
    const tidy = createTool({
      id: 'sdk-tidy',
      description: 'Returns what it has a second after its abort',
      inputSchema: z.object({}),
      outputSchema: z.object({ partial: z.boolean() }),
      execute: async (_input, ctx) => {
        await aborted(ctx.abortSignal);
        await new Promise((resolve) => setTimeout(resolve, 1000));
        return { partial: true };
      },
    });
    const stops = createTool({
      id: 'sdk-stops',
      description: 'Stops at its abort; never run again after an interruption',
      inputSchema: z.object({}),
      background: { maxRetries: 2, onInterrupt: 'fail' },
      execute: async (_input, ctx) => {
        await aborted(ctx.abortSignal);
        throw ctx.abortSignal.reason;
      },
    });
    const w = await serve({ socket: d.socket, tools: [tidy, stops], ...quiet });
    try {
      const a = await c.submit('sdk-tidy', {});
      const b = await c.submit('sdk-stops', {});
      await until(() => w.running === 2, 'both jobs to run');
      await w.close({ timeoutMs: 100 });
      const done = await c.wait(a.id, { timeoutMs: 60000 });
      assert.equal(done.status, 'completed', JSON.stringify(done));
      assert.deepEqual(done.output, { partial: true });
      // An `aborted` error would have been retried (retries are left);
      // unanswered, the job follows its onInterrupt.
      const failed = await c.wait(b.id, { timeoutMs: 60000 });
      assert.equal(failed.status, 'failed', JSON.stringify(failed));
      assert.equal(failed.error.code, 'interrupted');
    } finally {
      await w.close({ force: true });
      c.close();
      await d.cleanup();
    }
  });

  test('a_sigterm_of_berthd__puts_running_jobs_back_without_a_retry__and_the_worker_registers_again', async () => {
    // Running jobs may finish for the shutdown grace (docs/WORKERS.md); a
    // short one stops this one, which takes 2 s at least, half way.
    const d = new Daemon({ args: ['--shutdown-grace', '500ms'] });
    await d.start();
    const c = await connect({ socket: d.socket });
    const w = await serve({ socket: d.socket, tools: allTools, ...quiet });
    const before = calls.block;
    try {
      const j = await c.submit('sdk-block', { steps: 100 });
      await until(async () => ((await c.get(j.id)).checkpoint?.step ?? 0) >= 2, 'the run to checkpoint');
      await d.restart();
      await until(() => w.registered, 'the worker to register again');
      const done = await c.wait(j.id, { timeoutMs: 120000 });
      assert.equal(done.status, 'completed', JSON.stringify(done.error));
      assert.equal(done.attempt, 1);
      assert.ok(calls.block - before >= 2, 'execute ran again after the restart');
    } finally {
      await w.close({ force: true, timeoutMs: 5000 });
      c.close();
      await d.cleanup();
    }
  });
});

describe('examples/mastra served to berthd, driven with the berth command', { skip }, () => {
  const berth = async (d, ...args) => {
    const { stdout } = await promisify(execFile)(BERTH, ['--socket', d.socket, '--json', ...args]);
    return JSON.parse(stdout);
  };

  test('the_example_tools__are_listed_submitted_approved_suspended_and_resumed_across_a_kill_9_of_the_worker', async () => {
    const d = new Daemon();
    await d.start();
    const run = () => spawnTied(process.execPath, ['--import', 'tsx', 'example/tools.ts'], {
      env: { ...process.env, BERTH_SOCKET: d.socket }, stdio: 'ignore',
    });
    let child = run();
    try {
      const c = await connect({ socket: d.socket });
      await until(async () => (await c.tools()).some((t) => t.name === 'get-weather' && t.workers?.connected === 1), 'the example to register', 60000);
      const tools = await berth(d, 'tools');
      assert.ok(JSON.stringify(tools).includes('confirm-plan'));
      const weather = await berth(d, 'submit', 'get-weather', '{"location":"Seattle"}', '--wait');
      assert.equal(weather.status, 'completed');
      assert.equal(weather.output.unit, 'C');
      const note = await berth(d, 'submit', 'save-note', JSON.stringify({ path: `${d.dir}/note`, text: 'hi' }));
      assert.equal(note.status, 'awaiting_approval');
      const plan = await berth(d, 'submit', 'confirm-plan', '{"plan":"ship it"}', '--wait');
      assert.equal(plan.status, 'suspended');
      // berthd must have seen the worker go before the approval: a run
      // started on a connection about to close ends by onInterrupt.
      child.kill('SIGKILL');
      await until(async () => (await c.tools()).some((t) => t.name === 'save-note' && t.workers?.connected === 0),
        'berthd to see the worker gone', 60000);
      await berth(d, 'approve', note.id);
      await berth(d, 'resume', plan.id, '{"approvedBy":"Ada"}');
      child = run();
      assert.equal((await berth(d, 'wait', note.id)).status, 'completed');
      assert.deepEqual((await berth(d, 'wait', plan.id)).output, { plan: 'ship it', approvedBy: 'Ada' });
      c.close();
    } finally {
      child.kill('SIGKILL');
      await d.cleanup();
    }
  });

  // The rest of issue 15's "done when": the jobs of the example's tools,
  // submitted with the berth command, wait across a kill -9 of berthd and
  // are approved and resumed from the HTTP inbox's API; called through
  // MCP (berth mcp, the official SDK's client), they are approved and
  // resumed by elicitation, the worker killed -9 meanwhile.
  test('the_example_tools__are_approved_and_resumed_over_http_across_a_kill_9_of_berthd__and_through_mcp_across_a_kill_9_of_the_worker', async () => {
    const port = await freePort();
    const d = new Daemon({ args: ['--http', `127.0.0.1:${port}`, '--http-open'] });
    await d.start();
    const run = () => spawnTied(process.execPath, ['--import', 'tsx', 'example/tools.ts'], {
      env: { ...process.env, BERTH_SOCKET: d.socket }, stdio: 'ignore',
    });
    const http = async (method, url, body) => {
      const res = await fetch(`http://127.0.0.1:${port}${url}`, {
        method,
        headers: body ? { 'content-type': 'application/json' } : {},
        body: body ? JSON.stringify(body) : undefined,
      });
      const text = await res.text();
      assert.ok(res.ok, `${method} ${url}: ${res.status} ${text}`);
      return JSON.parse(text);
    };
    const served = async () => {
      const c = await connect({ socket: d.socket });
      try {
        await until(async () => (await c.tools()).some((t) => t.name === 'confirm-plan' && t.workers?.connected === 1),
          'the example to register', 60000);
      } finally {
        c.close();
      }
    };
    let child = run();
    let mcp = null;
    try {
      await served();
      const note = await berth(d, 'submit', 'save-note', JSON.stringify({ path: `${d.dir}/http-note`, text: 'over http' }));
      assert.equal(note.status, 'awaiting_approval');
      const plan = await berth(d, 'submit', 'confirm-plan', '{"plan":"over http"}', '--wait');
      assert.equal(plan.status, 'suspended');
      await d.kill9();
      await d.start();
      await served();
      // The inbox lists both, and its buttons are these calls.
      const inbox = await http('GET', '/api/jobs?status=awaiting_approval');
      assert.ok(JSON.stringify(inbox).includes(note.id), JSON.stringify(inbox));
      await http('POST', `/api/jobs/${note.id}/approve`, { note: 'fine' });
      await http('POST', `/api/jobs/${plan.id}/resume`, { resumeData: { approvedBy: 'Grace' } });
      assert.equal((await berth(d, 'wait', note.id)).status, 'completed');
      assert.deepEqual((await berth(d, 'wait', plan.id)).output, { plan: 'over http', approvedBy: 'Grace' });
      const approved = (await http('GET', `/api/jobs/${note.id}/events`)).events?.find((e) => e.type === 'approved');
      assert.equal(approved?.via, 'http', JSON.stringify(approved));

      // MCP: each question is answered by elicitation; the worker is
      // killed -9 before the answer (berthd has seen it go, so that the
      // run does not start on a connection about to close, which would
      // end it by onInterrupt) and started again beside the answer.
      const asked = [];
      const gone = async () => {
        const c = await connect({ socket: d.socket });
        try {
          await until(async () => (await c.tools()).some((t) => t.name === 'confirm-plan' && t.workers?.connected === 0),
            'berthd to see the worker gone', 60000);
        } finally {
          c.close();
        }
      };
      mcp = new McpClient({ name: 'sdk-ts-mastra', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
      mcp.setRequestHandler(ElicitRequestSchema, async (req) => {
        asked.push(req.params);
        child.kill('SIGKILL');
        await gone();
        child = run();
        const fields = Object.keys(req.params.requestedSchema?.properties ?? {});
        return fields.includes('approve')
          ? { action: 'accept', content: { approve: true } }
          : { action: 'accept', content: { approvedBy: 'Ada' } };
      });
      await mcp.connect(new StdioClientTransport({ command: BERTH, args: ['mcp', '--socket', d.socket], stderr: 'pipe' }));
      const saved = await mcp.callTool({ name: 'save-note', arguments: { path: `${d.dir}/mcp-note`, text: 'over mcp' } });
      assert.ok(!saved.isError, JSON.stringify(saved));
      assert.deepEqual(saved.structuredContent, { path: `${d.dir}/mcp-note`, bytes: 8 });
      const planned = await mcp.callTool({ name: 'confirm-plan', arguments: { plan: 'over mcp' } });
      assert.ok(!planned.isError, JSON.stringify(planned));
      assert.deepEqual(planned.structuredContent, { plan: 'over mcp', approvedBy: 'Ada' });
      assert.equal(asked.length, 2, JSON.stringify(asked));
    } finally {
      if (mcp) await mcp.close().catch(() => {});
      child.kill('SIGKILL');
      await d.cleanup();
    }
  });
});
