// mcp.test.mjs: berth as an MCP server, driven by the official TypeScript
// SDK through `berth mcp` against a real berthd (docs/MCP.md).
//
// The SDK validates every message it receives against its own schemas
// (Tool, CallToolResult, Task, CreateTaskResult, elicitation/create), so a
// test that gets a value back has also checked its shape.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

import { McpError, CallToolResultSchema, CreateTaskResultSchema, ErrorCode } from '@modelcontextprotocol/sdk/types.js';

import { setTimeout as sleep } from 'node:timers/promises';

import { Daemon, MCPD, MCP_TOOLS, McpSession, RawRelay, SCALAR_TOOLS, rawCall, waitFor } from './harness.mjs';

const RELATED = 'io.modelcontextprotocol/related-task';
const TASKS_EXT = 'io.modelcontextprotocol/tasks';

// The test tools of tests/mcp/tools (shell scripts with jq).
const ECHO = 'mcp-echo';       // output {text, length}; outputSchema
const MODEL = 'mcp-model';     // output and a modelOutput
const APPROVE = 'mcp-approve'; // requireApproval; output {done: true}
const ASK = 'mcp-ask';         // suspends with {question}; resumeSchema {answer}
const NESTED = 'mcp-nested';   // suspends; resumeSchema with an object field
const UNION = 'mcp-union';     // suspends; resumeSchema a root anyOf of objects
const RECORD = 'mcp-record';   // suspends; resumeSchema requires what it does not list
const CONFIRM = 'mcp-confirm'; // suspends; no resumeSchema
const TRANSCRIPT = 'mcp-transcript'; // a manifest's transcript hides apiKey and pw
const FAIL = 'mcp-fail';       // fails with "the tool failed on purpose"
const SLOW = 'mcp-slow';       // sleeps 60 s
const CONTENT = 'mcp-content'; // a modelOutput of each AI SDK shape, by kind
const LIST = 'mcp-list';       // output [1..n], not an object; no outputSchema
const CONTEXT = 'mcp-context'; // requestContextSchema {userId}; output {userId}
const SECRETIVE = 'mcp-secret'; // mcpd's C tool whose transforms hide an apiKey

// A test that waits on berthd fails after this rather than hanging the run.
const LIMIT = { timeout: 120000 };

// textOf returns the text of a result's first content block.
function textOf(result) {
  assert.ok(Array.isArray(result.content) && result.content.length > 0, 'content is not empty');
  assert.equal(result.content[0].type, 'text');
  return result.content[0].text;
}

async function rejectsWith(promise, code) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof McpError, `an McpError, not ${e}`);
    assert.equal(e.code, code, `code ${code}, not ${e.code} (${e.message})`);
    return true;
  });
}

function accept(content) {
  return async () => ({ action: 'accept', content });
}

const daemon = new Daemon();
const sessions = [];

async function session(opts) {
  const s = await new McpSession(daemon, opts).connect();
  sessions.push(s);
  return s;
}

// noStrayOutput checks that the SDK never saw a line it could not parse
// (anything on stdout but MCP messages) and that nothing went wrong.
function noStrayOutput(s) {
  assert.deepEqual(s.errors.map(String), [], `SDK errors; berth mcp stderr: ${s.stderr}`);
}

// rawMcp starts `berth mcp` without the SDK and initializes it (2025-11-25,
// with form elicitation when elicit is true), for the tests that check the
// order of the lines berth sends.
async function rawMcp(elicit) {
  const r = new RawRelay(['--socket', daemon.socket]);
  r.send({
    jsonrpc: '2.0', id: 1, method: 'initialize',
    params: {
      protocolVersion: '2025-11-25',
      capabilities: elicit ? { elicitation: { form: {} } } : {},
      clientInfo: { name: 'raw', version: '0' },
    },
  });
  assert.equal(JSON.parse(await r.line(30000)).id, 1);
  r.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  return r;
}

// rawRequest sends a request on r and returns its result, which must be
// the next line r gets.
async function rawRequest(r, id, method, params) {
  r.send({ jsonrpc: '2.0', id, method, ...(params ? { params } : {}) });
  const reply = JSON.parse(await r.line(30000));
  assert.equal(reply.id, id, `the next line answers ${method}: ${JSON.stringify(reply)}`);
  assert.ok(reply.result, JSON.stringify(reply));
  return reply.result;
}

// answerRaw takes the next line of r, which must be the question about
// task id (its message matching message), and answers it with content.
async function answerRaw(r, id, message, content) {
  const question = JSON.parse(await r.line(30000));
  assert.equal(question.method, 'elicitation/create', JSON.stringify(question));
  assert.equal(question.params._meta?.[RELATED]?.taskId, id);
  assert.match(question.params.message, message);
  r.send({ jsonrpc: '2.0', id: question.id, result: { action: 'accept', content } });
}

// suspended waits until job id is suspended.
async function suspended(id) {
  await waitFor(async () => (await rawCall(daemon, 'jobs/get', { id })).status === 'suspended',
    30000, 'the job to suspend');
}

// completed waits until job id is completed, and returns it.
async function completed(id) {
  return waitFor(async () => {
    const job = await rawCall(daemon, 'jobs/get', { id });
    return job.status === 'completed' && job;
  }, 30000, 'the job to complete');
}

before(async () => {
  await daemon.start();
});

after(async () => {
  for (const s of sessions) {
    try { await s.close(); } catch { /* already closed */ }
  }
  await daemon.cleanup();
});

describe('initialize', () => {
  test('declares tools and tasks (list, cancel, tools/call)', async () => {
    const s = await session();
    const caps = s.client.getServerCapabilities();
    assert.ok(caps.tools, 'tools capability');
    assert.ok(caps.tasks, 'tasks capability');
    assert.ok(caps.tasks.list, 'tasks.list');
    assert.ok(caps.tasks.cancel, 'tasks.cancel');
    assert.ok(caps.tasks.requests?.tools?.call, 'tasks.requests.tools.call');
    assert.equal(s.client.getServerVersion().name, 'berth');
    await s.client.ping();
    noStrayOutput(s);
  });

  test('negotiates 2025-11-25, 2025-06-18 and 2025-03-26, and offers the latest otherwise', async () => {
    for (const [asked, got] of [
      ['2025-11-25', '2025-11-25'],
      ['2025-06-18', '2025-06-18'],
      ['2025-03-26', '2025-03-26'],
      ['2024-01-01', '2025-11-25'],
    ]) {
      const r = new RawRelay(['--socket', daemon.socket]);
      r.send({
        jsonrpc: '2.0', id: 1, method: 'initialize',
        params: { protocolVersion: asked, capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
      });
      const reply = JSON.parse(await r.line());
      assert.equal(reply.id, 1);
      assert.equal(reply.result.protocolVersion, got, `asked ${asked}`);
      assert.equal(reply.result.serverInfo.name, 'berth');
      // Tasks exist since 2025-11-25 only.
      assert.equal(Boolean(reply.result.capabilities.tasks), got === '2025-11-25');
      r.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
      r.send({ jsonrpc: '2.0', id: 2, method: 'ping' });
      // A notification gets no answer: the next line is the ping's.
      assert.deepEqual(JSON.parse(await r.line()), { jsonrpc: '2.0', id: 2, result: {} });
      r.proc.stdin.end();
      assert.equal((await r.exit()).code, 0);
    }
  });
});

describe('tools/list', () => {
  test('lists MCP tools with annotations, schemas and taskSupport, and berth fields beside them', async () => {
    const s = await session();
    const { tools } = await s.client.listTools();
    const byName = new Map(tools.map((t) => [t.name, t]));
    for (const name of [ECHO, MODEL, APPROVE, ASK, NESTED, FAIL, SLOW]) {
      assert.ok(byName.has(name), `${name} is listed`);
    }
    for (const t of tools) {
      assert.equal(t.inputSchema.type, 'object', `${t.name}: inputSchema is an object schema`);
      assert.equal(t.execution?.taskSupport, 'optional', `${t.name}: taskSupport`);
      const a = t.annotations;
      assert.ok(a, `${t.name}: annotations`);
      for (const k of ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint']) {
        assert.equal(typeof a[k], 'boolean', `${t.name}: annotations.${k}`);
      }
    }
    const echo = byName.get(ECHO);
    assert.equal(echo.title, 'Echo');
    assert.equal(echo.outputSchema.type, 'object');
    assert.deepEqual(echo.outputSchema.required, ['text', 'length']);
    // The manifest says readOnlyHint and idempotentHint; the rest are MCP's defaults.
    assert.deepEqual(echo.annotations, {
      readOnlyHint: true, destructiveHint: true, idempotentHint: true, openWorldHint: true,
      ...(echo.annotations.title ? { title: echo.annotations.title } : {}),
    });
    assert.deepEqual(byName.get(SLOW).annotations, {
      readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true,
    });
    // berth's own fields ride along (the SDK's schema strips them, so read them raw).
    const r = new RawRelay(['--socket', daemon.socket]);
    r.send({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    const raw = JSON.parse(await r.line()).result.tools;
    r.proc.stdin.end();
    await r.exit();
    const rawBy = new Map(raw.map((t) => [t.name, t]));
    assert.equal(rawBy.get(APPROVE).requireApproval, true);
    assert.equal(rawBy.get(ASK).resumeSchema.properties.answer.type, 'string');
    assert.equal(rawBy.get(ASK).suspendSchema.properties.question.type, 'string');
    noStrayOutput(s);
  });
});

describe('tools/call without a task', () => {
  test('returns structuredContent that the SDK validates against outputSchema, and the JSON as text', async () => {
    const s = await session();
    await s.client.listTools(); // the SDK validates outputs only for tools it has listed
    const result = await s.client.callTool({ name: ECHO, arguments: { text: 'hello' } });
    assert.equal(result.isError ?? false, false);
    assert.deepEqual(result.structuredContent, { text: 'hello', length: 5 });
    assert.deepEqual(JSON.parse(textOf(result)), { text: 'hello', length: 5 });
    noStrayOutput(s);
  });

  test('gives the modelOutput as the content when the tool has one', async () => {
    const s = await session();
    const result = await s.client.callTool({ name: MODEL, arguments: {} });
    assert.deepEqual(result.structuredContent, { value: 42 });
    assert.equal(textOf(result), 'The answer is 42.');
  });

  test('reports a failed job as an isError result with its message', async () => {
    const s = await session();
    const result = await s.client.callTool({ name: FAIL, arguments: {} });
    assert.equal(result.isError, true);
    assert.match(textOf(result), /failed on purpose/);
  });

  test('reports input that fails the inputSchema as an isError result', async () => {
    const s = await session();
    const result = await s.client.callTool({ name: ECHO, arguments: { text: 7 } });
    assert.equal(result.isError, true);
    assert.match(textOf(result), /text/);
  });

  test('answers an unknown tool with -32602', async () => {
    const s = await session();
    await rejectsWith(s.client.callTool({ name: 'no-such-tool', arguments: {} }), ErrorCode.InvalidParams);
  });

  test('asks for approval through elicitation and runs the tool when accepted', async () => {
    const s = await session({ elicit: accept({ approve: true, reason: 'looks fine' }) });
    const result = await s.client.callTool({ name: APPROVE, arguments: { action: 'deploy' } });
    assert.equal(result.isError ?? false, false, textOf(result));
    assert.deepEqual(result.structuredContent, { done: true, action: 'deploy' });
    assert.equal(s.elicitations.length, 1);
    const p = s.elicitations[0].params;
    assert.equal(p.mode ?? 'form', 'form');
    assert.match(p.message, new RegExp(APPROVE));
    assert.equal(p.requestedSchema.properties.approve.type, 'boolean');
    assert.equal(p.requestedSchema.properties.reason.type, 'string');
    assert.equal(p._meta?.[RELATED], undefined, 'no related task without a task');
    noStrayOutput(s);
  });

  test('declines the job when the elicitation is declined, and the tool never runs', async () => {
    const s = await session({ elicit: async () => ({ action: 'decline' }) });
    const result = await s.client.callTool({ name: APPROVE, arguments: { action: 'drop-db' } });
    assert.equal(result.isError, true);
    assert.match(textOf(result), /declined/);
    assert.equal(result.structuredContent, undefined);
  });

  test('declines with the reason given in the form', async () => {
    const s = await session({ elicit: accept({ approve: false, reason: 'not today' }) });
    const result = await s.client.callTool({ name: APPROVE, arguments: { action: 'x' } });
    assert.equal(result.isError, true);
    assert.match(textOf(result), /not today/);
  });

  test('an approval answer that does not fit the form is asked again, never taken as approval', LIMIT, async () => {
    // A client that does not check its answers against the form (the SDK
    // does): approve "false" or 0 used to approve the job, and the tool ran.
    const r = await rawMcp(true);
    r.send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: APPROVE, arguments: { action: 'misfit' } } });
    const answers = [{ approve: 'false' }, { approve: 0 }, { approve: false, reason: 'fits now' }];
    for (const [i, content] of answers.entries()) {
      const q = JSON.parse(await r.line(30000));
      assert.equal(q.method, 'elicitation/create', JSON.stringify(q));
      if (i > 0) assert.match(q.params.message, /^Not done: approve must be true or false/);
      r.send({ jsonrpc: '2.0', id: q.id, result: { action: 'accept', content } });
    }
    const reply = JSON.parse(await r.line(30000));
    assert.equal(reply.id, 2, JSON.stringify(reply));
    assert.equal(reply.result.isError, true);
    assert.match(reply.result.content[0].text, /fits now/);
    r.proc.stdin.end();
    assert.equal((await r.exit(10000)).code, 0);
  });

  test('resumes a suspended job with the answer to its resumeSchema form', async () => {
    const s = await session({ elicit: accept({ answer: 'blue' }) });
    const result = await s.client.callTool({ name: ASK, arguments: { question: 'Favourite colour?' } });
    assert.deepEqual(result.structuredContent, { question: 'Favourite colour?', answer: 'blue' });
    const p = s.elicitations[0].params;
    assert.match(p.message, /Favourite colour\?/);
    assert.deepEqual(p.requestedSchema.required, ['answer']);
    assert.equal(p.requestedSchema.properties.answer.type, 'string');
  });

  test('asks again, with the reason, when an answer fails the resumeSchema', async () => {
    let n = 0;
    const s = await session({ elicit: async () => ({ action: 'accept', content: { answer: n++ ? 'ok' : '' } }) });
    const result = await s.client.callTool({ name: ASK, arguments: { question: 'Say something' } });
    assert.deepEqual(result.structuredContent, { question: 'Say something', answer: 'ok' });
    assert.equal(s.elicitations.length, 2);
    assert.match(s.elicitations[1].params.message, /not accepted/);
    // The schema's own words, as berth resume prints them: which field,
    // and what is wrong with it (only the generic sentence came before).
    assert.match(s.elicitations[1].params.message, /\/answer: must have at least 1/);
  });

  test('an accept without content resumes a job that has no resumeSchema with {}', async () => {
    const s = await session({ elicit: async () => ({ action: 'accept' }) });
    const result = await s.client.callTool({ name: CONFIRM, arguments: {} });
    assert.notEqual(result.isError, true, textOf(result));
    assert.equal(s.elicitations.length, 1);
    assert.deepEqual(s.elicitations[0].params.requestedSchema.properties, {});
    // berthd's exit at the end (under LeakSanitizer) checks that the {}
    // was not leaked, as it was for each such answer.
  });

  test('stops waiting for a call the client cancels, and the job goes on', async () => {
    const s = await session();
    const ac = new AbortController();
    const call = s.client.callTool({ name: SLOW, arguments: {} }, undefined, { signal: ac.signal });
    let id;
    await waitFor(async () => {
      const { tasks } = await s.client.experimental.tasks.listTasks();
      id = tasks.find((t) => t.status === 'working')?.taskId;
      return id;
    }, 10000, 'the slow job');
    ac.abort('enough');
    await assert.rejects(call);
    // notifications/cancelled ended the wait, not the job, nor the connection.
    await s.client.ping();
    assert.equal((await s.client.experimental.tasks.getTask(id)).status, 'working');
    await s.client.experimental.tasks.cancelTask(id);
    noStrayOutput(s);
  });

  test('without elicitation, says which job waits and how to answer it through berth', async () => {
    const s = await session();
    const result = await s.client.callTool({ name: APPROVE, arguments: { action: 'later' } });
    assert.equal(result.isError, true);
    const text = textOf(result);
    const id = text.match(/[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}/)?.[0];
    assert.ok(id, `the job id is in: ${text}`);
    assert.match(text, /berth approve/);
    // The job still waits, as a task in input_required.
    const task = await s.client.experimental.tasks.getTask(id);
    assert.equal(task.status, 'input_required');
    await s.client.experimental.tasks.cancelTask(id);
  });

  test('a manifest tool with a transcript transform: no outputSchema listed, and no secret in any message', async () => {
    // Its outputSchema (apiKey required) was listed, so the SDK refused
    // every result; and with no display view declared, the question
    // showed the suspend payload as it is, apiKey and all.
    const s = await session({ elicit: accept({ answer: 'Ann' }) });
    const { tools } = await s.client.listTools();
    assert.equal(tools.find((t) => t.name === TRANSCRIPT).outputSchema, undefined);
    const result = await s.client.callTool({ name: TRANSCRIPT, arguments: { pw: 'sk-live-7f3c9d2a-IN' } });
    assert.deepEqual(result.structuredContent, { name: 'Ann' });
    assert.match(s.elicitations[0].params.message, /Name\?/);
    assert.deepEqual(s.received.filter((m) => /sk-live-7f3c9d2a/.test(m)), []);
  });

  test('says clearly when a resumeSchema cannot be an MCP form', async () => {
    const s = await session({ elicit: accept({}) });
    // A root anyOf and a required member outside properties were asked as
    // an empty form that no answer fitted, three times.
    for (const [name, what] of [[NESTED, /address/], [UNION, /anyOf/], [RECORD, /'token' is required/]]) {
      const result = await s.client.callTool({ name, arguments: {} });
      assert.equal(result.isError, true, name);
      const text = textOf(result);
      assert.match(text, what);             // what cannot be a form field
      assert.match(text, /berth resume/);   // and how to answer instead
    }
    assert.equal(s.elicitations.length, 0);
  });
});

describe('tasks', () => {
  test('callToolStream: a suspending tool, its elicitation with the related task, and the final result', async () => {
    const s = await session({ elicit: accept({ answer: 'forty-two' }) });
    await s.client.listTools(); // marks the tools as task tools for callToolStream
    const seen = [];
    let result = null;
    let taskId = null;
    const stream = s.client.experimental.tasks.callToolStream({ name: ASK, arguments: { question: 'Meaning?' } });
    for await (const m of stream) {
      seen.push(m.type);
      if (m.type === 'taskCreated') {
        taskId = m.task.taskId;
        assert.equal(m.task.status, 'working');
        assert.equal(typeof m.task.pollInterval, 'number');
        assert.ok('ttl' in m.task);
      }
      if (m.type === 'taskStatus') assert.equal(m.task.taskId, taskId);
      if (m.type === 'result') result = m.result;
      if (m.type === 'error') throw m.error;
    }
    assert.equal(seen[0], 'taskCreated');
    assert.ok(seen.includes('taskStatus'));
    assert.equal(seen.at(-1), 'result');
    assert.deepEqual(result.structuredContent, { question: 'Meaning?', answer: 'forty-two' });
    assert.equal(result._meta?.[RELATED]?.taskId, taskId);
    assert.equal(s.elicitations.length, 1);
    assert.equal(s.elicitations[0].params._meta?.[RELATED]?.taskId, taskId);
    const task = await s.client.experimental.tasks.getTask(taskId);
    assert.equal(task.status, 'completed');
    // notifications/tasks/status followed the task on the connection that made it.
    await waitFor(() => s.statusNotes.some((n) => n.taskId === taskId && n.status === 'completed'),
      5000, 'a completed status notification');
    assert.ok(s.statusNotes.some((n) => n.taskId === taskId && n.status === 'input_required'));
    noStrayOutput(s);
  });

  test('approval through tasks/result', async () => {
    const s = await session({ elicit: accept({ approve: true }) });
    const created = await s.client.request(
      { method: 'tools/call', params: { name: APPROVE, arguments: { action: 'ship' }, task: {} } },
      CreateTaskResultSchema);
    const id = created.task.taskId;
    await waitFor(async () => (await s.client.experimental.tasks.getTask(id)).status === 'input_required',
      10000, 'input_required');
    const result = await s.client.experimental.tasks.getTaskResult(id, CallToolResultSchema);
    assert.deepEqual(result.structuredContent, { done: true, action: 'ship' });
    assert.equal(s.elicitations[0].params._meta?.[RELATED]?.taskId, id);
  });

  test('a failed task has status failed and tasks/result gives the isError result', async () => {
    const s = await session();
    const created = await s.client.request(
      { method: 'tools/call', params: { name: FAIL, arguments: {}, task: {} } }, CreateTaskResultSchema);
    const id = created.task.taskId;
    const result = await s.client.experimental.tasks.getTaskResult(id, CallToolResultSchema);
    assert.equal(result.isError, true);
    assert.match(textOf(result), /failed on purpose/);
    const task = await s.client.experimental.tasks.getTask(id);
    assert.equal(task.status, 'failed');
    assert.match(task.statusMessage ?? '', /failed on purpose/);
  });

  test('list and cancel tasks; errors for unknown and finished tasks', async () => {
    const s = await session();
    const tasks = s.client.experimental.tasks;
    const created = await s.client.request(
      { method: 'tools/call', params: { name: SLOW, arguments: {}, task: { ttl: 600000 } } }, CreateTaskResultSchema);
    const id = created.task.taskId;
    assert.equal(created.task.status, 'working');
    assert.match(created.task.createdAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    assert.ok(created.task.lastUpdatedAt);

    // tasks/list pages through every task; this one is among them.
    const all = [];
    let cursor;
    do {
      const page = await tasks.listTasks(cursor);
      all.push(...page.tasks);
      cursor = page.nextCursor;
    } while (cursor);
    const listed = all.find((t) => t.taskId === id);
    assert.ok(listed, 'the new task is listed');
    assert.equal(listed.status, 'working');

    const cancelled = await tasks.cancelTask(id);
    assert.equal(cancelled.taskId, id);
    assert.equal(cancelled.status, 'cancelled');
    assert.equal((await tasks.getTask(id)).status, 'cancelled');
    await rejectsWith(tasks.cancelTask(id), ErrorCode.InvalidParams);
    const result = await tasks.getTaskResult(id, CallToolResultSchema);
    assert.equal(result.isError, true);
    assert.match(textOf(result), /cancel/);

    await rejectsWith(tasks.getTask('01234567-89ab-7def-8123-456789abcdef'), ErrorCode.InvalidParams);
    await rejectsWith(tasks.getTaskResult('nope', CallToolResultSchema), ErrorCode.InvalidParams);
    await rejectsWith(tasks.cancelTask('nope'), ErrorCode.InvalidParams);
    await rejectsWith(tasks.listTasks('not-a-cursor'), ErrorCode.InvalidParams);
    await waitFor(() => s.statusNotes.some((n) => n.taskId === id && n.status === 'cancelled'),
      5000, 'a cancelled status notification');
    noStrayOutput(s);
  });

  test('an input_required task survives a restart of berthd and finishes afterwards', async () => {
    const first = await session();
    const created = await first.client.request(
      { method: 'tools/call', params: { name: ASK, arguments: { question: 'Still there?' }, task: {} } },
      CreateTaskResultSchema);
    const id = created.task.taskId;
    await waitFor(async () => (await first.client.experimental.tasks.getTask(id)).status === 'input_required',
      10000, 'input_required');

    await daemon.restart();
    // The relay of the first session ends when berthd goes away.
    await waitFor(() => first.client.transport === undefined, 5000, 'the first session to close');
    assert.match(first.stderr, /closed/);

    const second = await session({ elicit: accept({ answer: 'yes' }) });
    const task = await second.client.experimental.tasks.getTask(id);
    assert.equal(task.status, 'input_required');
    const result = await second.client.experimental.tasks.getTaskResult(id, CallToolResultSchema);
    assert.deepEqual(result.structuredContent, { question: 'Still there?', answer: 'yes' });
    assert.equal(result._meta?.[RELATED]?.taskId, id);
    assert.equal((await second.client.experimental.tasks.getTask(id)).status, 'completed');
    noStrayOutput(second);
  });
});

describe('results', () => {
  test('a modelOutput in the AI SDK content form becomes the matching MCP blocks', LIMIT, async () => {
    const s = await session();
    const result = await s.client.callTool({ name: CONTENT, arguments: { kind: 'content' } });
    assert.equal(result.isError ?? false, false);
    const c = result.content;
    assert.deepEqual(c.map((b) => b.type), [
      'text', 'resource_link', 'image', 'audio', 'resource', 'resource_link',
      'text', 'text', 'text', 'image', 'resource', 'text', 'text',
    ]);
    const id = result._meta['berth/job'].id;
    assert.equal(c[0].text, 'Seattle: 21 C and sunny');
    assert.deepEqual(c[1], { type: 'resource_link', uri: 'https://example.com/radar/seattle.png', name: 'seattle.png' });
    assert.equal(c[2].mimeType, 'image/png');
    assert.match(c[2].data, /^iVBORw0KGgo/);
    assert.deepEqual(c[3], { type: 'audio', data: 'UklGRg==', mimeType: 'audio/wav' });
    assert.deepEqual(c[4].resource, {
      uri: `berth://jobs/${id}/modelOutput/4/report%201.pdf`, mimeType: 'application/pdf', blob: 'JVBERi0=',
    });
    assert.deepEqual(c[5], {
      type: 'resource_link', uri: 'https://example.com/files/report.pdf?v=2', name: 'report.pdf', mimeType: 'application/pdf',
    });
    assert.match(c[6].text, /file-id: a file held by a model provider.*file-abc123/);
    assert.match(c[7].text, /image-file-id/);
    assert.match(c[8].text, /custom/);
    assert.deepEqual(c[9], { type: 'image', data: 'R0lGODlhAQABAAAAACw=', mimeType: 'image/gif' });
    assert.deepEqual(c[10].resource, { uri: `berth://jobs/${id}/modelOutput/10/a.txt`, mimeType: 'text/plain', text: 'hello' });
    assert.match(c[11].text, /not base64/);
    assert.match(c[12].text, /hologram/);
    assert.deepEqual(result.structuredContent, { kind: 'content' });
    noStrayOutput(s);
  });

  test('text and json model outputs are text; error-text, error-json and execution-denied set isError', LIMIT, async () => {
    const s = await session();
    const cases = [
      ['text', false, 'plain words'],
      ['json', false, '{"a":1,"b":[true,null]}'],
      ['bare', false, 'a bare string'],
      ['other', false, '{"answer":42}'],
      ['error-text', true, 'the quota is used up'],
      ['error-json', true, '{"code":429}'],
      ['denied', true, "the tool's execution was denied: the user said no"],
    ];
    for (const [kind, isError, text] of cases) {
      const result = await s.client.callTool({ name: CONTENT, arguments: { kind } });
      assert.equal(result.isError ?? false, isError, kind);
      assert.deepEqual(result.content, [{ type: 'text', text }], kind);
    }
  });

  test('a task whose modelOutput says the call failed is failed, with that error as its statusMessage', LIMIT, async () => {
    const s = await session();
    const created = await s.client.request(
      { method: 'tools/call', params: { name: CONTENT, arguments: { kind: 'error-text' }, task: {} } },
      CreateTaskResultSchema);
    const id = created.task.taskId;
    const result = await s.client.experimental.tasks.getTaskResult(id, CallToolResultSchema);
    assert.equal(result.isError, true);
    assert.equal(textOf(result), 'the quota is used up');
    const task = await s.client.experimental.tasks.getTask(id);
    assert.equal(task.status, 'failed');
    assert.equal(task.statusMessage, 'the quota is used up');
    await rejectsWith(s.client.experimental.tasks.cancelTask(id), ErrorCode.InvalidParams);
  });

  test('an output that is not an object is structuredContent {"result": output}', LIMIT, async () => {
    const s = await session();
    await s.client.listTools();
    const result = await s.client.callTool({ name: LIST, arguments: { n: 3 } });
    assert.deepEqual(result.structuredContent, { result: [1, 2, 3] });
    assert.equal(textOf(result), '[1,2,3]');
  });

  test('an outputSchema that is not an object is listed wrapped, and structuredContent matches it', LIMIT, async (t) => {
    const d = new Daemon({ tools: [MCP_TOOLS, SCALAR_TOOLS] });
    try {
      await d.start();
    } catch (e) {
      // The tool side refuses such a schema until it accepts it (issue 16,
      // "Schemas"); the MCP side is then checked by test_content alone.
      if (/outputSchema must be/.test(d.logText())) {
        t.skip('this berthd refuses an outputSchema that is not an object');
        await d.cleanup();
        return;
      }
      throw e;
    }
    try {
      const s = await new McpSession(d).connect();
      const { tools } = await s.client.listTools();
      const scalar = tools.find((x) => x.name === 'mcp-scalar');
      assert.equal(scalar.outputSchema.type, 'object');
      assert.deepEqual(scalar.outputSchema.required, ['result']);
      assert.equal(scalar.outputSchema.properties.result.type, 'array');
      assert.deepEqual(scalar.outputSchema.$defs, { count: { type: 'integer', minimum: 1 } });
      // The SDK validates structuredContent against the listed schema.
      const result = await s.client.callTool({ name: 'mcp-scalar', arguments: { n: 2 } });
      assert.deepEqual(result.structuredContent, { result: [1, 2] });
      // Boolean subschemas are listed in their object form: the SDK
      // refused the whole tools/list for {"properties": {"result": true}}.
      const any = tools.find((x) => x.name === 'mcp-any');
      assert.deepEqual(any.outputSchema.properties.result, {});
      assert.deepEqual(any.inputSchema.properties, { n: {}, never: { not: {} } });
      const anyResult = await s.client.callTool({ name: 'mcp-any', arguments: { n: 1 } });
      assert.deepEqual(anyResult.structuredContent, { result: [1] });
      noStrayOutput(s);
      await s.close();
      // berth's own protocol lists the schema as declared.
      const raw = (await rawCall(d, 'tools/list')).tools.find((x) => x.name === 'mcp-scalar');
      assert.equal(raw.outputSchema.type, 'array');
      const rawAny = (await rawCall(d, 'tools/list')).tools.find((x) => x.name === 'mcp-any');
      assert.equal(rawAny.outputSchema, true);
    } finally {
      await d.cleanup();
    }
  });
});

describe('a secret that the tool\'s transform hides', () => {
  // mcpd's mcp-secret is Mastra's lookup-customer: its output holds an
  // apiKey, and its transforms show only {displayName}, {customerId},
  // {question} and "Customer lookup failed".
  const SECRET = /sk-live-7f3c9d2a/;
  const c = new Daemon({ binary: MCPD, tools: [] });
  const mine = [];

  async function secretSession(opts) {
    const s = await new McpSession(c, opts).connect();
    mine.push(s);
    return s;
  }

  // neverSaw checks every message s received.
  function neverSaw(s) {
    const leaks = s.received.filter((m) => SECRET.test(m));
    assert.deepEqual(leaks, [], 'the secret reached the client');
    noStrayOutput(s);
  }

  before(async () => {
    await c.start();
  });

  after(async () => {
    for (const s of mine) {
      try { await s.close(); } catch { /* already closed */ }
    }
    const code = await c.stop();
    const log = c.logText();
    await c.cleanup();
    assert.equal(code, 0, log);
    assert.doesNotMatch(log, /AddressSanitizer|LeakSanitizer|runtime error/, log);
  });

  test('a result shows the transcript view as structuredContent and as text', LIMIT, async () => {
    const s = await secretSession();
    const { tools } = await s.client.listTools();
    // The declared outputSchema (with apiKey required) would not describe
    // the transcript view, so MCP clients are shown none.
    assert.equal(tools.find((t) => t.name === SECRETIVE).outputSchema, undefined);
    const result = await s.client.callTool({ name: SECRETIVE, arguments: { customerId: 'c-1' } });
    assert.deepEqual(result.structuredContent, { displayName: 'Acme' });
    assert.deepEqual(JSON.parse(textOf(result)), { displayName: 'Acme' });
    // The secret is there, in the raw view of berth's own protocol.
    const raw = await rawCall(c, 'jobs/get', { id: result._meta['berth/job'].id });
    assert.match(raw.output.apiKey, SECRET);
    neverSaw(s);
  });

  test("a modelOutput is the content, and structuredContent is still the transcript view", LIMIT, async () => {
    const s = await secretSession();
    const result = await s.client.callTool({ name: SECRETIVE, arguments: { customerId: 'c-1', mode: 'model' } });
    assert.deepEqual(result.content, [{ type: 'text', text: 'Acme is a customer.' }]);
    assert.deepEqual(result.structuredContent, { displayName: 'Acme' });
    neverSaw(s);
  });

  test('a failure shows the transcript view of its error: in the result, tasks/get, tasks/list and notifications', LIMIT, async () => {
    const s = await secretSession();
    const plain = await s.client.callTool({ name: SECRETIVE, arguments: { customerId: 'c-1', mode: 'fail' } });
    assert.equal(plain.isError, true);
    assert.match(textOf(plain), /Customer lookup failed/);
    const created = await s.client.request(
      { method: 'tools/call', params: { name: SECRETIVE, arguments: { customerId: 'c-2', mode: 'fail' }, task: {} } },
      CreateTaskResultSchema);
    const id = created.task.taskId;
    const result = await s.client.experimental.tasks.getTaskResult(id, CallToolResultSchema);
    assert.match(textOf(result), /Customer lookup failed/);
    const task = await s.client.experimental.tasks.getTask(id);
    assert.equal(task.status, 'failed');
    assert.equal(task.statusMessage, 'Customer lookup failed');
    await waitFor(() => s.statusNotes.some((n) => n.taskId === id && n.status === 'failed'), 5000, 'the failed notification');
    const listed = (await s.client.experimental.tasks.listTasks()).tasks.find((t) => t.taskId === id);
    assert.equal(listed.statusMessage, 'Customer lookup failed');
    const raw = await rawCall(c, 'jobs/get', { id });
    assert.match(raw.error.message, SECRET);
    neverSaw(s);
  });

  test('a suspend payload is quoted as the transcript view to a client that cannot answer, and shown as the display view to one that can', LIMIT, async () => {
    const mute = await secretSession();
    const told = await mute.client.callTool({ name: SECRETIVE, arguments: { customerId: 'c-3', mode: 'ask' } });
    assert.equal(told.isError, true);
    assert.match(textOf(told), /Which account\?/);
    neverSaw(mute);
    const s = await secretSession({ elicit: accept({ account: 'main' }) });
    const result = await s.client.callTool({ name: SECRETIVE, arguments: { customerId: 'c-4', mode: 'ask' } });
    assert.deepEqual(result.structuredContent, { displayName: 'Acme' });
    assert.match(s.elicitations[0].params.message, /Which account\?/);
    neverSaw(s);
  });

  test('an approval question shows the display view of the input', LIMIT, async () => {
    const s = await secretSession({ elicit: accept({ approve: true }) });
    const result = await s.client.callTool({
      name: SECRETIVE, arguments: { customerId: 'c-5', internalPath: 'sk-live-7f3c9d2a-SECRET/path', mode: 'approve' },
    });
    assert.deepEqual(result.structuredContent, { displayName: 'Acme' });
    assert.match(s.elicitations[0].params.message, /c-5/);
    neverSaw(s);
  });
});

describe('requestContext and _meta', () => {
  test('a tool with a requestContextSchema takes its context from _meta["berth/requestContext"]', LIMIT, async () => {
    const s = await session({ name: 'context-client' });
    const result = await s.client.callTool({
      name: CONTEXT, arguments: {},
      _meta: { 'berth/requestContext': { userId: 'u-1' }, trace: 't-42' },
    });
    assert.equal(result.isError ?? false, false, textOf(result));
    assert.deepEqual(result.structuredContent, { userId: 'u-1' });
    // The job keeps the whole request _meta, and the client's name, in
    // metadata.mcp.
    const job = await rawCall(daemon, 'jobs/get', { id: result._meta['berth/job'].id });
    assert.deepEqual(job.requestContext, { userId: 'u-1' });
    assert.equal(job.metadata.mcp._meta.trace, 't-42');
    assert.deepEqual(job.metadata.mcp._meta['berth/requestContext'], { userId: 'u-1' });
    assert.equal(job.metadata.mcp.clientInfo.name, 'context-client');
  });

  test('without a request context the call fails naming it', LIMIT, async () => {
    const s = await session();
    const result = await s.client.callTool({ name: CONTEXT, arguments: {} });
    assert.equal(result.isError, true);
    assert.match(textOf(result), /requestContext/);
  });

  test('a berth/requestContext or berth/ttlMs of the wrong type is -32602 naming where', LIMIT, async () => {
    const s = await session();
    for (const [meta, path] of [
      [{ 'berth/requestContext': 'u-1' }, '/_meta/berth~1requestContext'],
      [{ 'berth/ttlMs': 0 }, '/_meta/berth~1ttlMs'],
      [{ 'berth/ttlMs': 'soon' }, '/_meta/berth~1ttlMs'],
    ]) {
      await assert.rejects(s.client.callTool({ name: CONTEXT, arguments: {}, _meta: meta }), (e) => {
        assert.equal(e.code, ErrorCode.InvalidParams, e.message);
        assert.equal(e.data.errors[0].instancePath, path);
        return true;
      });
    }
  });
});

describe('ttl', () => {
  test("a task's ttl never abandons its question, and tasks/get reports one ttl all along", LIMIT, async () => {
    const s = await session();
    const tasks = s.client.experimental.tasks;
    const created = await s.client.request(
      { method: 'tools/call', params: { name: ASK, arguments: { question: 'Take your time?' }, task: { ttl: 1000 } } },
      CreateTaskResultSchema);
    const id = created.task.taskId;
    const ttl = created.task.ttl;
    const waiting = await waitFor(async () => {
      const t = await tasks.getTask(id);
      return t.status === 'input_required' && t;
    }, 15000, 'input_required');
    assert.equal(waiting.ttl, ttl);
    // Well past the ttl the client asked for (an SDK's default of 60 s
    // behaves the same), the question still waits for its answer.
    await sleep(3000);
    const later = await tasks.getTask(id);
    assert.equal(later.status, 'input_required', later.statusMessage);
    assert.equal(later.ttl, ttl);
    const cancelled = await tasks.cancelTask(id);
    assert.equal(cancelled.ttl, ttl);
  });

  test('_meta["berth/ttlMs"] shortens the wait, and the expired task says so', LIMIT, async () => {
    const s = await session();
    const created = await s.client.request(
      { method: 'tools/call', params: { name: ASK, arguments: { question: 'Quick?' }, task: {}, _meta: { 'berth/ttlMs': 300 } } },
      CreateTaskResultSchema);
    const id = created.task.taskId;
    const task = await waitFor(async () => {
      const t = await s.client.experimental.tasks.getTask(id);
      return t.status === 'failed' && t;
    }, 20000, 'the task to expire');
    assert.match(task.statusMessage, /expired/);
    const result = await s.client.experimental.tasks.getTaskResult(id, CallToolResultSchema);
    assert.equal(result.isError, true);
    assert.match(textOf(result), /expired/);
  });
});

describe('declining a question', () => {
  test('the result of a declined suspend question gives the recorded reason', LIMIT, async () => {
    const s = await session({ elicit: async () => ({ action: 'decline' }) });
    const result = await s.client.callTool({ name: ASK, arguments: { question: 'Name?' } });
    assert.equal(result.isError, true);
    assert.match(textOf(result), /was cancelled: the user declined to answer/);
    const task = await s.client.experimental.tasks.getTask(result._meta['berth/job'].id);
    assert.match(task.statusMessage, /cancelled: the user declined to answer/);
  });
});

describe('tasks as an extension', () => {
  test('initialize advertises tasks both in the core form and as io.modelcontextprotocol/tasks', LIMIT, async () => {
    const s = await session();
    const caps = s.client.getServerCapabilities();
    assert.deepEqual(caps.extensions?.[TASKS_EXT], {});
    assert.ok(caps.tasks?.requests?.tools?.call);
  });

  test('an older client gets tasks only when it declares them, and otherwise its task is ignored', LIMIT, async () => {
    for (const [capabilities, offered] of [
      [{}, false],
      [{ extensions: { [TASKS_EXT]: {} } }, true],
      [{ tasks: {} }, true],
    ]) {
      const r = new RawRelay(['--socket', daemon.socket]);
      r.send({
        jsonrpc: '2.0', id: 1, method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities, clientInfo: { name: 'raw', version: '0' } },
      });
      const caps = JSON.parse(await r.line()).result.capabilities;
      assert.equal(Boolean(caps.tasks), offered, JSON.stringify(capabilities));
      assert.equal(Boolean(caps.extensions?.[TASKS_EXT]), offered, JSON.stringify(capabilities));
      r.send({
        jsonrpc: '2.0', id: 2, method: 'tools/call',
        params: { name: ECHO, arguments: { text: 'hi' }, task: {} },
      });
      const reply = JSON.parse(await r.line()).result;
      if (offered) {
        assert.equal(reply.task.status, 'working');
      } else {
        assert.deepEqual(reply.structuredContent, { text: 'hi', length: 2 });
      }
      r.proc.stdin.end();
      await r.exit();
    }
  });
});

describe('questions on the session that created the task', () => {
  test("a task's question reaches its session without tasks/result, once", LIMIT, async () => {
    const s = await session({ elicit: accept({ answer: 'teal' }) });
    const tasks = s.client.experimental.tasks;
    const created = await s.client.request(
      { method: 'tools/call', params: { name: ASK, arguments: { question: 'Colour?' }, task: {} } },
      CreateTaskResultSchema);
    const id = created.task.taskId;
    // Only tasks/get, as the ext-tasks client does.
    const done = await waitFor(async () => {
      const t = await tasks.getTask(id);
      return t.status === 'completed' && t;
    }, 20000, 'the task to complete');
    assert.equal(done.taskId, id);
    assert.equal(s.elicitations.length, 1);
    assert.equal(s.elicitations[0].params._meta?.[RELATED]?.taskId, id);
    assert.match(s.elicitations[0].params.message, /Colour\?/);
    // A late tasks/result answers with the result of that answer.
    const result = await tasks.getTaskResult(id, CallToolResultSchema);
    assert.deepEqual(result.structuredContent, { question: 'Colour?', answer: 'teal' });
    assert.equal(s.elicitations.length, 1);
  });

  test('a tasks/result while the question is open does not ask again', LIMIT, async () => {
    let release;
    const answered = new Promise((resolve) => { release = resolve; });
    const s = await session({ elicit: async () => { await answered; return { action: 'accept', content: { approve: true } }; } });
    const tasks = s.client.experimental.tasks;
    const created = await s.client.request(
      { method: 'tools/call', params: { name: APPROVE, arguments: { action: 'once' }, task: {} } },
      CreateTaskResultSchema);
    const id = created.task.taskId;
    await waitFor(async () => {
      await tasks.getTask(id);
      return s.elicitations.length === 1;
    }, 15000, 'the question');
    const pending = tasks.getTaskResult(id, CallToolResultSchema);
    // Let tasks/result reach berthd and find the question open.
    await waitFor(async () => (await tasks.getTask(id)).status === 'input_required', 5000, 'input_required');
    release();
    const result = await pending;
    assert.deepEqual(result.structuredContent, { done: true, action: 'once' });
    assert.equal(s.elicitations.length, 1);
  });

  test('a question put aside is not asked again in the same wait, and the task goes on waiting', LIMIT, async () => {
    const s = await session({ elicit: async () => ({ action: 'cancel' }) });
    const tasks = s.client.experimental.tasks;
    const created = await s.client.request(
      { method: 'tools/call', params: { name: APPROVE, arguments: { action: 'later' }, task: {} } },
      CreateTaskResultSchema);
    const id = created.task.taskId;
    await waitFor(async () => {
      await tasks.getTask(id);
      return s.elicitations.length === 1;
    }, 15000, 'the question');
    const pending = tasks.getTaskResult(id, CallToolResultSchema);
    await sleep(500);
    assert.equal((await tasks.getTask(id)).status, 'input_required');
    // Answered elsewhere, the task finishes and tasks/result answers.
    await rawCall(daemon, 'jobs/approve', { id });
    const result = await pending;
    assert.deepEqual(result.structuredContent, { done: true, action: 'later' });
    assert.equal(s.elicitations.length, 1);
  });

  test('a session that takes a task over is asked from its next request about it, not with the reply that hands it over', LIMIT, async () => {
    // The creator declared no elicitation, so the first session with
    // elicitation that asks about the task takes it over.
    const creator = await session();
    const created = await creator.client.request(
      { method: 'tools/call', params: { name: ASK, arguments: { question: 'Taken over?' }, task: {} } },
      CreateTaskResultSchema);
    const id = created.task.taskId;
    await suspended(id);
    const r = await rawMcp(true);
    assert.equal((await rawRequest(r, 2, 'tasks/get', { taskId: id })).status, 'input_required');
    // That reply is the client's first sight of the task: a question sent
    // with it would overtake it (ext-tasks answers "cancel" to a question
    // it cannot place yet, and is not asked again). So the next line is
    // the ping's answer.
    assert.deepEqual(await rawRequest(r, 3, 'ping'), {});
    // Its next request about the task shows that it follows the task: the
    // question comes after that reply.
    await rawRequest(r, 4, 'tasks/get', { taskId: id });
    await answerRaw(r, id, /Taken over\?/, { answer: 'here' });
    assert.deepEqual((await completed(id)).output, { question: 'Taken over?', answer: 'here' });
    r.proc.stdin.end();
    assert.equal((await r.exit(10000)).code, 0);
  });

  test('a session that asked about a task before its creator left takes it over at its next request, and is asked at the one after', LIMIT, async () => {
    // The creator can answer but never follows the task, and leaves.
    const creator = await rawMcp(true);
    const id = (await rawRequest(creator, 2, 'tools/call',
      { name: ASK, arguments: { question: 'Left?' }, task: {} })).task.taskId;
    await suspended(id);
    const r = await rawMcp(true);
    // Its creator owns the task: not taken over, not asked.
    await rawRequest(r, 2, 'tasks/get', { taskId: id });
    assert.deepEqual(await rawRequest(r, 3, 'ping'), {});
    creator.proc.stdin.end();
    assert.equal((await creator.exit(10000)).code, 0);
    // berthd has let go of the creator once it answers a later connection.
    await rawCall(daemon, 'jobs/get', { id });
    await rawRequest(r, 4, 'tasks/get', { taskId: id });
    assert.deepEqual(await rawRequest(r, 5, 'ping'), {});
    await rawRequest(r, 6, 'tasks/get', { taskId: id });
    await answerRaw(r, id, /Left\?/, { answer: 'no' });
    assert.deepEqual((await completed(id)).output, { question: 'Left?', answer: 'no' });
    r.proc.stdin.end();
    assert.equal((await r.exit(10000)).code, 0);
  });
});

describe('the example tools', () => {
  test('weather-tool: its annotations and _meta as listed, its output validated by the SDK', async () => {
    const s = await session();
    const { tools } = await s.client.listTools();
    const weather = tools.find((t) => t.name === 'weather-tool');
    assert.equal(weather.annotations.title, 'Weather Lookup');
    assert.equal(weather.annotations.openWorldHint, true);
    assert.deepEqual(weather._meta, { version: '1.0.0', category: 'weather' });
    const result = await s.client.callTool({ name: 'weather-tool', arguments: { location: 'Paris' } });
    assert.equal(result.structuredContent.location, 'Paris');
    assert.equal(typeof result.structuredContent.temperatureCelsius, 'number');
  });

  test('write-note: writes its note only once the elicitation approves it', async () => {
    const s = await session({ elicit: accept({ approve: true }) });
    const path = `${daemon.dir}/note.txt`;
    const result = await s.client.callTool({ name: 'write-note', arguments: { path, text: 'milk' } });
    assert.deepEqual(result.structuredContent, { path, bytes: 4 });
    assert.equal(readFileSync(path, 'utf8'), 'milk');
    assert.match(s.elicitations[0].params.message, /milk/); // the person sees the input
  });

  test('ask-name: suspends, is answered through tasks/result, and greets', async () => {
    const s = await session({ elicit: accept({ answer: 'Ada' }) });
    await s.client.listTools();
    let result;
    for await (const m of s.client.experimental.tasks.callToolStream({ name: 'ask-name', arguments: { greeting: 'Hi' } })) {
      if (m.type === 'error') throw m.error;
      if (m.type === 'result') result = m.result;
    }
    assert.equal(result.structuredContent.message, 'Hi, Ada!');
    assert.match(s.elicitations[0].params.message, /What is your name\?/);
    assert.equal(s.elicitations[0].params.requestedSchema.properties.answer.title, 'Your name');
  });
});

describe('berth mcp', () => {
  test('exits 0 when berthd closes the connection, saying so on stderr', async () => {
    const r = new RawRelay(['--socket', daemon.socket]);
    r.send({ jsonrpc: '2.0', id: 1, method: 'ping' });
    await r.line();
    await daemon.restart();
    const how = await r.exit(5000);
    assert.equal(how.code, 0);
    assert.match(r.err, /berthd closed the connection/);
    assert.equal(r.out, '');
  });

  test('exits 0 at once when stdin closes', async () => {
    const r = new RawRelay(['--socket', daemon.socket]);
    r.send({ jsonrpc: '2.0', id: 1, method: 'ping' });
    assert.deepEqual(JSON.parse(await r.line()), { jsonrpc: '2.0', id: 1, result: {} });
    const t0 = Date.now();
    r.proc.stdin.end();
    const how = await r.exit(3000);
    assert.equal(how.code, 0);
    assert.ok(Date.now() - t0 < 2000, 'exits promptly');
  });

  test('relays a malformed line and the daemon\'s parse error, and nothing else', async () => {
    const r = new RawRelay(['--socket', daemon.socket]);
    r.send('{not json');
    const reply = JSON.parse(await r.line());
    assert.equal(reply.error.code, -32700);
    r.proc.stdin.end();
    await r.exit();
    assert.equal(r.out, '');
  });

  test('fails with a message on stderr and nothing on stdout when no daemon listens', async () => {
    const r = new RawRelay(['--socket', `${daemon.dir}/nothing-here.sock`]);
    const how = await r.exit(5000);
    assert.notEqual(how.code, 0);
    assert.equal(r.out, '');
    assert.match(r.err, /nothing-here\.sock/);
  });
});

describe('berthd', () => {
  test('stops cleanly after all of it, with nothing from the sanitizers', async () => {
    for (const x of sessions.splice(0)) {
      try { await x.close(); } catch { /* already closed */ }
    }
    const code = await daemon.stop();
    const log = daemon.logText();
    assert.equal(code, 0, log);
    assert.doesNotMatch(log, /AddressSanitizer|LeakSanitizer|runtime error/, log);
  });
});
