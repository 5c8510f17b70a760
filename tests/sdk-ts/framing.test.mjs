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

// berthd cannot read a line over its line limit, or one with U+0000, a lone
// surrogate or an integer beyond 64 bits in it (wire.ts), and answers it
// with id null (or, for a request it could read the id of, with an error
// the client gets): such a request used to wait for an answer forever.
describe('requests berthd cannot read', () => {
  // served connects a client to a server that answers every request with
  // its method, records the methods, and runs fn; both are closed after,
  // whatever fn did.
  async function served(options, fn) {
    const methods = [];
    const srv = await script((m, s) => {
      methods.push(m.method);
      s.write(answer(m, { method: m.method }) + '\n');
    });
    const c = await connect({ socket: srv.path, ...options });
    try {
      await fn(c, methods);
    } finally {
      c.close();
      await srv.close();
    }
  }

  test('a_request_over_the_line_limit__rejects_at_once_naming_its_size_and_the_limit__and_is_not_sent', () => served({ maxSendLineBytes: 1000 }, async (c, methods) => {
    await assert.rejects(c.submit('noop', { s: 'x'.repeat(1000) }, { signal: AbortSignal.timeout(5000) }), (e) => {
      assert.ok(e instanceof BerthError, String(e));
      assert.equal(e.code, ErrorCode.InvalidRequest);
      assert.match(e.message, /jobs\/submit was not sent: the request is 10\d\d bytes as a line, over berthd's line limit of 1000 bytes/);
      assert.equal(e.data.limit, 1000);
      return true;
    });
    // The next request goes out and is answered: nothing of the refused one was sent.
    assert.deepEqual(await c.request('after', {}), { method: 'after' });
    assert.deepEqual(methods, ['after']);
  }));

  test('the_default_line_limit__is_berthds_16_MiB', () => served({}, async (c, methods) => {
    await assert.rejects(c.submit('noop', { s: 'x'.repeat(16 * 1024 * 1024) }, { signal: AbortSignal.timeout(5000) }),
      (e) => e.code === ErrorCode.InvalidRequest && /over berthd's line limit of 16777216 bytes/.test(e.message));
    assert.deepEqual(methods, []);
  }));

  test('a_request_holding_U0000_a_lone_surrogate_or_a_64_bit_overflow__rejects_at_once_naming_where', () => served({}, async (c, methods) => {
    const cases = [
      [{ s: 'a\u0000' }, '/input/s', /\/input\/s holds U\+0000/],
      [{ list: [1, 'a\udc00'] }, '/input/list/1', /\/input\/list\/1 holds a lone surrogate \(U\+DC00\)/],
      [{ n: 2 ** 63 }, '/input/n', /\/input\/n is the integer 9223372036854776000, beyond 64 bits/],
    ];
    for (const [input, pointer, message] of cases) {
      await assert.rejects(c.submit('noop', input, { signal: AbortSignal.timeout(5000) }), (e) => {
        assert.ok(e instanceof BerthError, String(e));
        assert.equal(e.code, ErrorCode.InvalidRequest);
        assert.match(e.message, /jobs\/submit was not sent: berthd would refuse its params: /);
        assert.match(e.message, message);
        assert.equal(e.data.instancePath, pointer);
        return true;
      });
    }
    // A pair of surrogates, -2^63 and an integer written with an exponent are read by berthd.
    await c.submit('noop', { s: '\ud83d\ude00', n: -(2 ** 63), big: 1e21 });
    assert.deepEqual(methods, ['jobs/submit']);
  }));

  test('an_error_of_id_null__is_reported_to_the_clients_logger', async () => {
    const srv = await script((m, s) => {
      s.write(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'parse error: something' } }) + '\n');
      s.write(answer(m, {}) + '\n');
    });
    const lines = [];
    const c = await connect({ socket: srv.path, logger: { warn: (m) => lines.push(m), error: (m) => lines.push(m) } });
    try {
      await c.ping();
      assert.ok(lines.some((l) => /berthd refused a line it could not read: parse error: something \(-32700\)/.test(l)), lines.join('\n'));
    } finally {
      c.close();
      await srv.close();
    }
  });

  test('list_with_an_empty_list_of_statuses__throws_a_RangeError_at_once', () => served({}, async (c) => {
    assert.throws(() => c.list({ status: [] }), (e) => e instanceof RangeError && /status is an empty list/.test(e.message));
  }));
});
