// principals.test.mjs: principals and roles through MCP (docs/MCP.md,
// "Principals and the audit"), driven by the official TypeScript SDK.
//
// berthd runs with --principals and --listen; each session is `berth mcp`
// over TCP with a principal's token, so that one berthd serves several
// principals: "agent" (submit), "person" (submit and approve). An answer
// to an elicitation is checked against the roles and the tool's approval
// policy when it is applied, and every transition it causes is audited as
// the principal, via "mcp", with the client's clientInfo.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema, EmptyResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js';

import { BERTH, Daemon, MCP_TOOLS, sanitizerEnv } from './harness.mjs';

const PRINCIPALS_TOOLS = process.env.BERTH_MCP_PRINCIPALS_TOOLS;
const APPROVE = 'mcp-approve'; // requireApproval, default policy
const SELF = 'mcp-self';       // requireApproval, selfApproval: true
const TOKENS = {
  agent: 'agent-0123456789abcdef0123456789abcdef',
  person: 'person-0123456789abcdef0123456789abcde',
};

const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-mcp-princ-'));
let port = 0;
let daemon = null;
const clients = [];

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const p = srv.address().port;
      srv.close(() => resolve(p));
    });
  });
}

// session connects `berth mcp` as the principal named who; answer(req)
// answers each elicitation.
async function session(who, answer) {
  const tokenFile = path.join(dir, `${who}.token`);
  writeFileSync(tokenFile, TOKENS[who] + '\n', { mode: 0o600 });
  const client = new Client({ name: 'berth-principals-test', version: '2.5.0' },
    { capabilities: answer ? { elicitation: { form: {} } } : {} });
  const asked = [];
  if (answer) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      asked.push(req);
      return answer(req);
    });
  }
  const transport = new StdioClientTransport({
    command: BERTH,
    args: ['mcp', '--socket', `tcp:127.0.0.1:${port}`, '--token-file', tokenFile],
    env: sanitizerEnv(),
    stderr: 'pipe',
  });
  await client.connect(transport);
  clients.push(client);
  return { client, asked };
}

// job reads a job as berthd's own user, an admin, over the Unix socket.
function job(id) {
  return JSON.parse(execFileSync(BERTH, ['--socket', daemon.socket, '--json', 'get', id]));
}

function events(id) {
  return execFileSync(BERTH, ['--socket', daemon.socket, '--json', 'events', '--job', id])
    .toString().trim().split('\n').map((l) => JSON.parse(l));
}

const textOf = (r) => (r.content || []).map((c) => c.text || '').join('\n');
const jobOf = (r) => r._meta?.['berth/job']?.id;
const accept = { action: 'accept', content: { approve: true, reason: 'ok' } };

before(async () => {
  port = await freePort();
  const file = path.join(dir, 'principals.json');
  writeFileSync(file, JSON.stringify({
    principals: [
      { name: 'agent', token: TOKENS.agent, roles: ['submit'] },
      { name: 'person', token: TOKENS.person, roles: ['submit', 'approve'] },
    ],
  }));
  chmodSync(file, 0o600);
  daemon = new Daemon({
    tools: [MCP_TOOLS, PRINCIPALS_TOOLS],
    args: ['--principals', file, '--listen', `127.0.0.1:${port}`],
  });
  await daemon.start();
});

after(async () => {
  for (const c of clients) await c.close().catch(() => {});
  await daemon?.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

describe('principals through MCP', () => {
  test('an answer from a principal without the approve role is refused, and the job keeps waiting', async () => {
    const s = await session('agent', async () => accept);
    const result = await s.client.callTool({ name: APPROVE, arguments: { action: 'deploy' } });
    assert.equal(result.isError, true);
    assert.match(textOf(result), /forbidden: agent may not approve or decline it, which needs the role approve/);
    assert.equal(s.asked.length, 1);
    const id = jobOf(result);
    assert.ok(id, 'the result names its job');
    const j = job(id);
    assert.equal(j.status, 'awaiting_approval');
    assert.equal(j.submittedBy, 'agent');
    assert.equal(j.submittedVia, 'mcp');
  });

  test('the submitter approving its own job through elicitation is refused (self_approval)', async () => {
    const s = await session('person', async () => accept);
    const result = await s.client.callTool({ name: APPROVE, arguments: { action: 'x' } });
    assert.equal(result.isError, true);
    assert.match(textOf(result), /person submitted job .* and may not approve it/);
    const j = job(jobOf(result));
    assert.equal(j.status, 'awaiting_approval');
    assert.deepEqual(j.approval.approvals, []);
  });

  test('a tool with selfApproval lets the submitter approve through elicitation, audited as mcp with the client', async () => {
    const s = await session('person', async () => accept);
    const result = await s.client.callTool({ name: SELF, arguments: { action: 'ship' } });
    assert.equal(result.isError ?? false, false, textOf(result));
    assert.deepEqual(result.structuredContent, { done: true, action: 'ship' });
    const id = jobOf(result);
    const j = job(id);
    assert.equal(j.approval.decidedBy.name, 'person');
    assert.equal(j.approval.decidedBy.via, 'mcp');
    assert.equal(j.approval.approvals[0].by, 'person');
    assert.deepEqual(j.approval.approvals[0].client, { name: 'berth-principals-test', version: '2.5.0' });
    const byType = Object.fromEntries(events(id).map((e) => [e.type, e]));
    assert.equal(byType.created.by, 'person');
    assert.equal(byType.created.via, 'mcp');
    assert.deepEqual(byType.created.client, { name: 'berth-principals-test', version: '2.5.0' });
    assert.equal(byType.approved.by, 'person');
    assert.equal(byType.approved.via, 'mcp');
    assert.equal(byType.completed.by, 'berthd');
  });

  test('tasks/cancel needs the role operate', async () => {
    const s = await session('agent', null);
    const created = await s.client.callTool({ name: APPROVE, arguments: { action: 'y' } });
    const id = jobOf(created);
    await assert.rejects(
      s.client.request({ method: 'tasks/cancel', params: { taskId: id } }, EmptyResultSchema),
      (e) => e instanceof McpError && e.code === -32010 && /needs the role operate/.test(e.message));
    assert.equal(job(id).status, 'awaiting_approval');
  });
});
