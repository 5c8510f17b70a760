// framing.test.mjs: the client's side of PROTOCOL.md's framing and of its
// reconnect policy, against a scripted server whose every byte the test
// chooses: split lines, "\r\n", batches, answers out of order, a line that
// is not JSON, and a connection cut with requests in flight.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from './bounded.mjs';

import { BerthError, ErrorCode, connect } from '@berth/sdk';

const dir = mkdtempSync(path.join(os.tmpdir(), 'berth-framing-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

// script starts a server; onRequest(msg, socket, connIndex) answers (or not).
async function script(onRequest) {
  const p = path.join(dir, `s${++n}.sock`);
  const sockets = [];
  const server = net.createServer((s) => {
    const index = sockets.push(s) - 1;
    let buf = '';
    s.on('data', (b) => {
      buf += b;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const m = JSON.parse(buf.slice(0, i));
        buf = buf.slice(i + 1);
        onRequest(m, s, index);
      }
    });
    s.on('error', () => {});
  });
  await new Promise((r) => server.listen(p, r));
  return {
    path: p,
    sockets,
    close: () => { for (const s of sockets) s.destroy(); return new Promise((r) => server.close(r)); },
  };
}

const answer = (m, result) => JSON.stringify({ jsonrpc: '2.0', id: m.id, result });

describe('the client framing', () => {
  test('answers_split_across_writes_with_crlf__are_read_whole', async () => {
    const srv = await script((m, s) => {
      const line = answer(m, { name: 'berth', pad: 'é'.repeat(5000) }) + '\r\n';
      const bytes = Buffer.from(line);
      // One byte, then the rest in pieces that split a UTF-8 character.
      s.write(bytes.subarray(0, 1));
      let at = 1;
      const step = () => {
        if (at >= bytes.length) return;
        s.write(bytes.subarray(at, at + 777));
        at += 777;
        setImmediate(step);
      };
      setImmediate(step);
    });
    const c = await connect({ socket: srv.path });
    const info = await c.info();
    assert.equal(info.name, 'berth');
    assert.equal(info.pad.length, 5000);
    c.close();
    await srv.close();
  });

  test('answers_out_of_order_and_in_a_batch__reach_their_requests', async () => {
    const held = [];
    const srv = await script((m, s) => {
      held.push(m);
      if (held.length === 3) {
        s.write(answer(held[2], { n: 3 }) + '\n');
        s.write(JSON.stringify([JSON.parse(answer(held[1], { n: 2 })), JSON.parse(answer(held[0], { n: 1 }))]) + '\n');
      }
    });
    const c = await connect({ socket: srv.path });
    const r = await Promise.all([c.request('a'), c.request('b'), c.request('c')]);
    assert.deepEqual(r, [{ n: 1 }, { n: 2 }, { n: 3 }]);
    c.close();
    await srv.close();
  });

  test('an_error_answer__is_a_BerthError_with_code_message_and_data', async () => {
    const srv = await script((m, s) => {
      s.write(JSON.stringify({ jsonrpc: '2.0', id: m.id, error: { code: -32012, message: 'job is completed', data: { status: 'completed' } } }) + '\n');
    });
    const c = await connect({ socket: srv.path });
    await assert.rejects(c.approve('x'), (e) => {
      assert.ok(e instanceof BerthError);
      assert.equal(e.code, ErrorCode.Conflict);
      assert.equal(e.status, 'completed');
      assert.deepEqual(e.data, { status: 'completed' });
      assert.match(e.message, /jobs\/approve: job is completed/);
      return true;
    });
    c.close();
    await srv.close();
  });

  test('a_line_that_is_not_json__closes_the_connection_with_a_parse_error', async () => {
    const srv = await script((m, s) => s.write('{"jsonrpc": "2.0", oops\n'));
    const c = await connect({ socket: srv.path, reconnect: false });
    await assert.rejects(c.ping(), (e) => e.code === ErrorCode.ParseError && /not JSON/.test(e.message));
    c.close();
    await srv.close();
  });

  test('a_cut_connection__rejects_a_mutation_in_flight__and_sends_reads_again', async () => {
    const srv = await script((m, s, conn) => {
      if (conn === 0) {
        // The first connection takes both requests and dies unanswered.
        if (m.method === 'jobs/get') setImmediate(() => s.destroy());
        return;
      }
      s.write(answer(m, { id: m.params.id, status: 'pending' }) + '\n');
    });
    const c = await connect({ socket: srv.path, reconnect: { initialDelayMs: 10, maxDelayMs: 50 } });
    const approve = c.approve('job-1');
    const get = c.get('job-1');
    await assert.rejects(approve, (e) => e.code === ErrorCode.ConnectionClosed);
    assert.deepEqual(await get, { id: 'job-1', status: 'pending' });
    assert.equal(srv.sockets.length, 2);
    c.close();
    await srv.close();
  });

  test('a_submit_with_an_idempotency_key__is_sent_again_after_a_cut', async () => {
    const srv = await script((m, s, conn) => {
      if (conn === 0) return setImmediate(() => s.destroy());
      s.write(answer(m, { id: 'j', status: 'pending', idempotencyKey: m.params.idempotencyKey }) + '\n');
    });
    const c = await connect({ socket: srv.path, reconnect: { initialDelayMs: 10 } });
    const j = await c.submit('noop', {}, { idempotencyKey: 'k1' });
    assert.equal(j.idempotencyKey, 'k1');
    c.close();
    await srv.close();
  });

  test('close__rejects_calls_in_flight_and_ends_event_streams', async () => {
    const srv = await script((m, s) => {
      if (m.method === 'events/subscribe') s.write(answer(m, { subscription: 's1' }) + '\n');
    });
    const c = await connect({ socket: srv.path });
    const stream = c.events({ since: 0 });
    const next = stream.next();
    const pending = c.request('never/answered');
    await new Promise((r) => setTimeout(r, 50));
    c.close();
    await assert.rejects(pending, (e) => e.code === ErrorCode.ConnectionClosed);
    await assert.rejects(next, (e) => e.code === ErrorCode.ConnectionClosed);
    await srv.close();
  });

  test('notifications_read_with_the_subscribe_answer__are_not_lost', async () => {
    const srv = await script((m, s) => {
      if (m.method !== 'events/subscribe') return;
      // The answer and the first events in one write.
      const ev = (seq) => JSON.stringify({ jsonrpc: '2.0', method: 'events/event', params: { subscription: 7, seq, jobId: 'j', tool: 't', type: 'created', status: 'pending', at: 'x' } });
      s.write(answer(m, { subscription: 7 }) + '\n' + ev(1) + '\n' + ev(2) + '\n');
    });
    const c = await connect({ socket: srv.path });
    const seqs = [];
    for await (const e of c.events({ since: 0 })) {
      seqs.push(e.seq);
      if (seqs.length === 2) break;
    }
    assert.deepEqual(seqs, [1, 2]);
    c.close();
    await srv.close();
  });
});
