// ext-tasks.test.mjs: berth's tasks driven by @modelcontextprotocol/ext-tasks
// on the TypeScript SDK's 2.x client (@modelcontextprotocol/client), the
// requester of the newest SDKs, which finds tasks in either capability form
// and only polls tasks/get until a task ends: it never calls tasks/result
// while a task waits, so berth asks the session that created the task
// itself (docs/MCP.md, "Approval and input through elicitation").

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { createTaskSessionFromClient, resultFromTaskOutcome } from '@modelcontextprotocol/ext-tasks/client';

import { BERTH, Daemon, rawCall, sanitizerEnv, waitFor } from './harness.mjs';

const APPROVE = 'mcp-approve'; // requireApproval; output {done: true, action}
const ASK = 'mcp-ask';         // suspends with {question}; resumeSchema {answer}
const CONTEXT = 'mcp-context'; // requestContextSchema {userId}; output {userId}

// A test that waits on berthd fails after this rather than hanging the run.
const LIMIT = { timeout: 120000 };

const daemon = new Daemon();
const open = [];

// connect returns an ext-tasks session over a 2.x client with form
// elicitation; answer(request, context) answers each input request and
// inputs records them. errors collects what the session reports, and
// failed rejects with the first of them: a question the session could not
// place (it answers it "cancel", and berth does not ask again in that
// wait) then fails a test at once instead of leaving it to poll until its
// limit.
async function connect(answer) {
  const client = new Client({ name: 'berth-ext-tasks-test', version: '1.0.0' },
    { capabilities: { elicitation: { form: {} } } });
  const transport = new StdioClientTransport({
    command: BERTH,
    args: ['mcp', '--socket', daemon.socket],
    env: sanitizerEnv(),
    stderr: 'pipe',
  });
  const errors = [];
  const inputs = [];
  let fail;
  const failed = new Promise((_, reject) => { fail = reject; });
  failed.catch(() => {}); // not unhandled in a test that settles no task
  await client.connect(transport);
  const session = createTaskSessionFromClient(client, {
    endpointId: 'berth',
    onError: (e) => { errors.push(e); fail(e); },
    onInputRequest: async (request, context) => {
      inputs.push({ request, context });
      return answer(request, context);
    },
  });
  const s = { client, session, errors, inputs, failed };
  open.push(s);
  return s;
}

async function close(s) {
  await s.session.close();
  await s.client.close();
}

// outcomeOf waits for execution, a task of session s, to end and returns
// its outcome, or throws the first error s reports.
async function outcomeOf(s, execution) {
  const { outcome } = await Promise.race([execution.settle(), s.failed]);
  return outcome;
}

// settled runs a task-backed call to its end and returns its outcome.
async function settled(s, name, args, options = {}) {
  const execution = await s.session.callTool(name, args, { task: { preference: 'require' }, ...options });
  assert.equal(execution.kind, 'task');
  return { execution, outcome: await outcomeOf(s, execution) };
}

before(async () => {
  await daemon.start();
});

after(async () => {
  for (const s of open) {
    try { await close(s); } catch { /* already closed */ }
  }
  const code = await daemon.stop();
  const log = daemon.logText();
  await daemon.cleanup();
  assert.equal(code, 0, log);
  assert.doesNotMatch(log, /AddressSanitizer|LeakSanitizer|runtime error/, log);
});

describe('ext-tasks', () => {
  test('finds the tasks capability on berth', LIMIT, async () => {
    const s = await connect(async () => ({ action: 'cancel' }));
    const caps = s.client.getServerCapabilities();
    assert.deepEqual(caps.extensions?.['io.modelcontextprotocol/tasks'], {});
    assert.ok(caps.tasks?.requests?.tools?.call);
    assert.equal(s.session.capabilities.inventory, 'server-list');
  });

  test('runs an approval task to completion, asking once, with the related task', LIMIT, async () => {
    const s = await connect(async () => ({ action: 'accept', content: { approve: true, reason: 'fine' } }));
    const { execution, outcome } = await settled(s, APPROVE, { action: 'ship' });
    assert.equal(outcome.status, 'completed', outcome.error?.message);
    assert.deepEqual(resultFromTaskOutcome(outcome).structuredContent, { done: true, action: 'ship' });
    assert.equal(s.inputs.length, 1);
    const { request, context } = s.inputs[0];
    assert.equal(request.kind, 'elicitation');
    assert.equal(context.scope, 'task');
    assert.equal(context.taskId, execution.handle.taskId);
    assert.match(request.params.message, /mcp-approve/);
    const job = await rawCall(daemon, 'jobs/get', { id: execution.handle.taskId });
    assert.equal(job.approval.note, 'fine');
    assert.deepEqual(s.errors, []);
  });

  test('runs a suspend task to completion with the answer to its form, asking once', LIMIT, async () => {
    const s = await connect(async () => ({ action: 'accept', content: { answer: 'blue' } }));
    const { outcome } = await settled(s, ASK, { question: 'Favourite colour?' });
    assert.equal(outcome.status, 'completed', outcome.error?.message);
    assert.deepEqual(resultFromTaskOutcome(outcome).structuredContent,
      { question: 'Favourite colour?', answer: 'blue' });
    assert.equal(s.inputs.length, 1);
    assert.deepEqual(s.inputs[0].request.params.requestedSchema.required, ['answer']);
    assert.deepEqual(s.errors, []);
  });

  test('asks again, with the reason, after an answer that fails the resumeSchema', LIMIT, async () => {
    let n = 0;
    const s = await connect(async () => ({ action: 'accept', content: { answer: n++ ? 'ok' : '' } }));
    const { outcome } = await settled(s, ASK, { question: 'Say something' });
    assert.equal(outcome.status, 'completed', outcome.error?.message);
    assert.equal(s.inputs.length, 2);
    assert.match(s.inputs[1].request.params.message, /not accepted/);
  });

  test('a declined approval fails the task with the reason', LIMIT, async () => {
    const s = await connect(async () => ({ action: 'accept', content: { approve: false, reason: 'not today' } }));
    const { outcome } = await settled(s, APPROVE, { action: 'drop' });
    assert.equal(outcome.status, 'failed');
    assert.match(outcome.error.message, /declined: not today/);
  });

  test('a declined suspend question cancels the task with the recorded reason', LIMIT, async () => {
    const s = await connect(async () => ({ action: 'decline' }));
    const { execution, outcome } = await settled(s, ASK, { question: 'Name?' });
    assert.equal(outcome.status, 'cancelled');
    const job = await rawCall(daemon, 'jobs/get', { id: execution.handle.taskId });
    assert.equal(job.error.message, 'the user declined to answer (MCP elicitation)');
  });

  test('the call metadata carries the request context', LIMIT, async () => {
    const s = await connect(async () => ({ action: 'cancel' }));
    const { outcome } = await settled(s, CONTEXT, {}, { metadata: { 'berth/requestContext': { userId: 'u-7' } } });
    assert.equal(outcome.status, 'completed', outcome.error?.message);
    assert.deepEqual(resultFromTaskOutcome(outcome).structuredContent, { userId: 'u-7' });
  });

  test('a task resumed from its reference on another session is asked there', LIMIT, async () => {
    // The first session cannot answer, and leaves.
    const first = await connect(async () => ({ action: 'cancel' }));
    const execution = await first.session.callTool(ASK, { question: 'Still there?' }, { task: { preference: 'require' } });
    let reference;
    await execution.handoff((r) => { reference = r; });
    // Closing the client, not the session: a session's close cancels the
    // tasks it still tracks.
    open.splice(open.indexOf(first), 1);
    await first.client.close();
    const second = await connect(async () => ({ action: 'accept', content: { answer: 'yes' } }));
    const resumed = await second.session.resumeTask(reference);
    const outcome = await outcomeOf(second, resumed);
    assert.equal(outcome.status, 'completed', outcome.error?.message);
    assert.deepEqual(resultFromTaskOutcome(outcome).structuredContent, { question: 'Still there?', answer: 'yes' });
    assert.equal(second.inputs.length, 1);
    assert.deepEqual(second.errors, []);
  });

  test('a task resumed on another session once it waits is asked there only after resumeTask has taken it in', LIMIT, async () => {
    // The bad ordering, forced: the job waits already when the second
    // session's resumeTask sends its tasks/get, which takes the task over.
    // A question sent with that reply reached the session before
    // resumeTask had the task in hand; it answered "cancel" (reporting an
    // InputCorrelationError), and was never asked again.
    const first = await connect(async () => ({ action: 'cancel' }));
    const execution = await first.session.callTool(ASK, { question: 'Waiting?' }, { task: { preference: 'require' } });
    const id = execution.handle.taskId;
    let reference;
    await execution.handoff((r) => { reference = r; });
    open.splice(open.indexOf(first), 1);
    await first.client.close();
    await waitFor(async () => (await rawCall(daemon, 'jobs/get', { id })).status === 'suspended',
      30000, 'the job to suspend');
    const second = await connect(async () => ({ action: 'accept', content: { answer: 'still' } }));
    const resumed = await second.session.resumeTask(reference);
    const outcome = await outcomeOf(second, resumed);
    assert.equal(outcome.status, 'completed', outcome.error?.message);
    assert.deepEqual(resultFromTaskOutcome(outcome).structuredContent, { question: 'Waiting?', answer: 'still' });
    assert.equal(second.inputs.length, 1);
    assert.equal(second.inputs[0].context.taskId, id);
    assert.deepEqual(second.errors, []);
    assert.equal(first.inputs.length, 0);
  });
});
