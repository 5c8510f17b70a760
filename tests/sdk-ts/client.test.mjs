// client.test.mjs: the client (connect) against a real berthd with the
// example tools (examples/tools), over the Unix socket and over TCP.

import assert from 'node:assert/strict';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from './bounded.mjs';

import { BerthError, ErrorCode, connect } from '@berth/sdk';
import { Daemon, until } from './harness.mjs';

describe('the client against a real berthd', () => {
  const d = new Daemon();
  let c;

  before(async () => {
    await d.start();
    c = await connect({ socket: d.socket });
  });
  after(async () => {
    c?.close();
    await d.cleanup();
  });

  test('info__reports_the_daemon__and_tools_lists_the_example_tools', async () => {
    const info = await c.info();
    assert.equal(info.name, 'berth');
    assert.equal(info.protocolVersion, '1');
    const names = (await c.tools()).map((t) => t.name);
    for (const n of ['weather-tool', 'write-note', 'ask-name', 'noop', 'fail']) assert.ok(names.includes(n), n);
  });

  test('submit__with_input_that_fails_the_schema__rejects_with_a_BerthError_naming_the_path', async () => {
    await assert.rejects(c.submit('weather-tool', { location: 3 }), (e) => {
      assert.ok(e instanceof BerthError);
      assert.equal(e.code, ErrorCode.InvalidParams);
      assert.equal(e.errors[0].instancePath, '/location');
      assert.match(e.message, /\/location/);
      return true;
    });
  });

  test('submit_then_wait__returns_the_completed_job_with_its_output', async () => {
    const j = await c.submit('noop', { location: 'Seattle' });
    assert.ok(['pending', 'completed', 'running'].includes(j.status));
    const done = await c.wait(j.id, { timeoutMs: 60000 });
    assert.equal(done.status, 'completed');
    assert.equal(done.input.location, 'Seattle');
    const again = await c.get(j.id);
    assert.deepEqual(again.output, done.output);
  });

  test('get__of_an_unknown_job__rejects_with_not_found', async () => {
    await assert.rejects(c.get('0190aaaa-0000-7000-8000-000000000000'), (e) => e instanceof BerthError && e.code === ErrorCode.NotFound);
  });

  test('approve_and_decline__move_write_note_jobs_out_of_awaiting_approval', async () => {
    const a = await c.submit('write-note', { path: `${d.dir}/note-a`, text: 'hi' });
    const b = await c.submit('write-note', { path: `${d.dir}/note-b`, text: 'no' });
    assert.equal(a.status, 'awaiting_approval');
    const approved = await c.approve(a.id, { note: 'ok' });
    assert.equal(approved.status, 'pending');
    const declined = await c.decline(b.id, { reason: 'not now' });
    assert.equal(declined.status, 'declined');
    assert.equal((await c.wait(a.id, { timeoutMs: 60000 })).status, 'completed');
    await assert.rejects(c.approve(b.id), (e) => e.code === ErrorCode.Conflict && e.status === 'declined');
  });

  test('resume__of_a_suspended_job__runs_it_again_with_the_resume_data', async () => {
    const j = await c.submit('ask-name', {});
    const s = await c.wait(j.id, { timeoutMs: 60000 });
    assert.equal(s.status, 'suspended');
    await assert.rejects(c.resume(j.id, { answer: 7 }), (e) => e.code === ErrorCode.InvalidParams);
    const r = await c.resume(j.id, { answer: 'Ada' });
    assert.equal(r.status, 'pending');
    const done = await c.wait(j.id, { timeoutMs: 60000 });
    assert.equal(done.status, 'completed');
    assert.match(JSON.stringify(done.output), /Ada/);
  });

  test('cancel_retry_and_logs__work_on_the_jobs_they_apply_to', async () => {
    const w = await c.submit('write-note', { path: `${d.dir}/note-c`, text: 'x' });
    assert.equal((await c.cancel(w.id, { reason: 'changed my mind' })).status, 'cancelled');
    const f = await c.submit('fail', {}, { maxRetries: 0 });
    const failed = await c.wait(f.id, { timeoutMs: 60000 });
    assert.equal(failed.status, 'failed');
    const again = await c.retry(f.id);
    assert.equal(again.retryOf, f.id);
    const logs = await c.logs(f.id);
    assert.ok(Array.isArray(logs.lines));
    assert.equal(typeof logs.next, 'number');
  });

  test('list__is_a_page_when_awaited__and_every_job_when_iterated', async () => {
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push((await c.submit('noop', { i }, { runId: 'list-run' })).id);
    const page = await c.list({ runId: 'list-run', limit: 2 });
    assert.equal(page.jobs.length, 2);
    assert.ok(page.nextCursor);
    const seen = [];
    for await (const j of c.list({ runId: 'list-run', limit: 2 })) seen.push(j.id);
    assert.deepEqual(seen.sort(), ids.sort());
    let pages = 0;
    for await (const p of c.list({ runId: 'list-run', limit: 2 }).pages()) pages += p.jobs.length > 0 ? 1 : 0;
    assert.equal(pages, 3);
  });

  test('a_request_of_exactly_berthds_line_limit__is_read__and_one_a_byte_longer_rejects_at_once', async () => {
    // A fresh connection, so that its requests' ids are 1 and 2.
    const fresh = await connect({ socket: d.socket, reconnect: false });
    try {
      const limit = 16 * 1024 * 1024;
      const params = (s) => ({ tool: 'no-such-tool', input: { s } });
      const lineOf = (id, s) => JSON.stringify({ jsonrpc: '2.0', id, method: 'jobs/submit', params: params(s) });
      const pad = (id, extra) => 'x'.repeat(limit - lineOf(id, '').length + extra);
      const signal = AbortSignal.timeout(30000);
      // At the limit berthd reads it, and answers the request: no such tool.
      await assert.rejects(fresh.request('jobs/submit', params(pad(1, 0)), { signal }),
        (e) => e instanceof BerthError && e.code !== ErrorCode.InvalidRequest);
      // A byte more: berthd would answer with id null, which no request
      // can be told of; it is refused before it is sent.
      await assert.rejects(fresh.request('jobs/submit', params(pad(2, 1)), { signal }), (e) => {
        assert.equal(e.code, ErrorCode.InvalidRequest, String(e));
        assert.match(e.message, /jobs\/submit was not sent: the request is 16777217 bytes as a line, over berthd's line limit of 16777216 bytes/);
        return true;
      });
      assert.equal((await fresh.info()).name, 'berth');
    } finally {
      fresh.close();
    }
  });

  test('pipelined_requests__are_answered_out_of_order_and_matched_by_id', async () => {
    const slow = await c.submit('sleep', { ms: 60000 });
    const waiting = c.wait(slow.id, { until: ['completed'] });
    // 200 reads in flight behind a wait that is not answered: each gets its own job back.
    const jobs = [];
    for (let i = 0; i < 20; i++) jobs.push(await c.submit('noop', { n: i }));
    const got = await Promise.all(Array.from({ length: 200 }, (_, i) => c.get(jobs[i % 20].id)));
    got.forEach((j, i) => assert.equal(j.id, jobs[i % 20].id));
    await c.cancel(slow.id);
    assert.equal((await waiting).status, 'cancelled');
  });

  test('wait__with_an_AbortSignal__rejects_with_its_reason_and_leaves_the_client_usable', async () => {
    const j = await c.submit('write-note', { path: `${d.dir}/note-d`, text: 'x' });
    const ac = new AbortController();
    const p = c.wait(j.id, { until: ['completed'], signal: ac.signal });
    setTimeout(() => ac.abort(new Error('stop waiting')), 100);
    await assert.rejects(p, /stop waiting/);
    const t0 = Date.now();
    const asIs = await c.wait(j.id, { timeoutMs: 200, until: ['completed'] });
    assert.equal(asIs.status, 'awaiting_approval');
    assert.ok(Date.now() - t0 >= 150);
    await c.cancel(j.id);
  });

  test('wait__with_timeoutMs__ends_at_its_timeout_when_the_wall_clock_is_set_back', async () => {
    // The timeout was timed by the wall clock: set back an hour during the
    // wait (NTP, a virtual machine resumed), it made the wait last that
    // hour longer, in pieces of 30 s. It returns the job as it is at
    // timeoutMs, 500 ms here, and 20 s is the bound of a loaded machine.
    const j = await c.submit('write-note', { path: `${d.dir}/note-e`, text: 'x' });
    const wall = Date.now;
    const setBack = setTimeout(() => { Date.now = () => wall() - 3600000; }, 100);
    let timer;
    try {
      const r = await Promise.race([
        c.wait(j.id, { timeoutMs: 500, until: ['completed'] }),
        new Promise((resolve) => { timer = setTimeout(resolve, 20000, 'still waiting after 20 s'); }),
      ]);
      assert.equal(r.status, 'awaiting_approval', String(r));
    } finally {
      clearTimeout(setBack);
      clearTimeout(timer);
      Date.now = wall;
      await c.cancel(j.id);
    }
  });

  test('events__replay_from_since_then_go_live__in_seq_order', async () => {
    const first = await c.poll({ limit: 1 });
    const since = first.events[0].seq;
    const ac = new AbortController();
    const stream = c.events({ since, signal: ac.signal });
    const j = await c.submit('noop', { e: 1 });
    const seen = [];
    let last = since;
    for await (const e of stream) {
      assert.equal(e.seq, last + 1, 'no event is skipped or repeated');
      last = e.seq;
      if (e.jobId === j.id) seen.push(e.type);
      if (e.jobId === j.id && e.type === 'completed') break;
    }
    assert.deepEqual(seen, ['created', 'started', 'completed']);
  });

  test('events__with_a_jobId_and_progress__yield_only_that_jobs_events', async () => {
    const j = await c.submit('write-note', { path: `${d.dir}/note-e`, text: 'x' });
    const types = [];
    const stream = c.events({ since: 0, jobId: j.id, progress: true });
    await c.approve(j.id);
    for await (const e of stream) {
      if (e.type === 'progress') continue;
      assert.equal(e.jobId, j.id);
      types.push(e.type);
      if (e.type === 'completed') break;
    }
    assert.deepEqual(types.slice(0, 2), ['created', 'approval_requested']);
    assert.equal(types.at(-1), 'completed');
  });

  test('events__with_types__yield_only_those_types_replayed_then_live', async () => {
    const since = await c.headSeq();
    const w = await c.submit('write-note', { path: `${d.dir}/note-t`, text: 'x' });
    await c.cancel(w.id);
    const n = await c.submit('noop', { t: 1 });
    await c.wait(n.id, { timeoutMs: 60000 });
    const ends = ['completed', 'cancelled'];
    const mine = new Set([w.id, n.id]);
    const got = [];
    let live = null;
    // The list is copied: what the caller does with it later changes nothing.
    const asked = [...ends];
    const stream = c.events({ since, types: asked });
    asked.push('created');
    for await (const e of stream) {
      assert.ok(ends.includes(e.type), `${e.type} was not asked for`);
      if (!mine.has(e.jobId)) continue; // another test's late job
      got.push([e.jobId, e.type]);
      if (e.jobId === n.id) {
        // Live now: its created and started come first, and pass by.
        live = await c.submit('noop', { t: 2 });
        mine.add(live.id);
      }
      if (live && e.jobId === live.id) break;
    }
    assert.deepEqual(got, [[w.id, 'cancelled'], [n.id, 'completed'], [live.id, 'completed']]);

    // One type, as a string.
    const one = c.events({ since, types: 'cancelled' });
    const first = await one.next();
    assert.deepEqual([first.value.jobId, first.value.type], [w.id, 'cancelled']);
    await one.return();

    // What berthd does not take is its InvalidParams naming /types (the
    // signal only bounds a client that sent no types at all).
    for (const types of [[], ['finished'], 'progress', ['completed', ''], 5]) {
      await assert.rejects(c.events({ types, signal: AbortSignal.timeout(30000) }).next(), (e) => {
        assert.ok(e instanceof BerthError, `${JSON.stringify(types)}: ${e}`);
        assert.equal(e.code, ErrorCode.InvalidParams);
        assert.equal(e.errors[0].instancePath, '/types');
        return true;
      });
    }
    assert.equal((await c.ping()), undefined, 'the client is still usable');
  });

  test('poll__with_types__reads_only_those_types__and_next_passes_the_rest', async () => {
    const since = await c.headSeq();
    const w = await c.submit('write-note', { path: `${d.dir}/note-p`, text: 'x' });
    await c.cancel(w.id);
    const n = await c.submit('noop', { p: 1 });
    await c.wait(n.id, { timeoutMs: 60000 });
    const asked = ['cancelled', 'completed'];
    const mine = (page) => page.events.filter((e) => e.jobId === w.id || e.jobId === n.id).map((e) => [e.jobId, e.type]);

    // Only those types (another test's late job may add its own).
    const page = await c.poll({ since, types: asked });
    for (const e of page.events) assert.ok(asked.includes(e.type), `${e.type} was not asked for`);
    assert.deepEqual(mine(page), [[w.id, 'cancelled'], [n.id, 'completed']]);
    // next passes over the others: reading on from it finds none of
    // these events again, and the end is where next stops moving.
    let at = page.next;
    for (let polls = 0; ; polls++) {
      assert.ok(polls < 100);
      const more = await c.poll({ since: at, types: asked });
      assert.deepEqual(mine(more), []);
      if (more.next === at) break;
      at = more.next;
    }
    assert.equal(at, await c.headSeq());

    // limit counts the events of those types; one type as a string.
    const one = await c.poll({ since, jobId: n.id, types: 'completed', limit: 1 });
    assert.deepEqual(mine(one), [[n.id, 'completed']]);
    assert.equal(one.next, one.events[0].seq);
    const started = await c.poll({ since, jobId: n.id, types: ['started'] });
    assert.deepEqual(mine(started), [[n.id, 'started']]);

    // waitMs waits for those types: the approval and the start of a
    // write-note pass by, its completion ends the wait.
    const x = await c.submit('write-note', { path: `${d.dir}/note-q`, text: 'y' });
    const head = await c.headSeq();
    const waiting = c.poll({ since: head, jobId: x.id, types: ['completed'], waitMs: 120000 });
    await c.approve(x.id);
    const woke = await waiting;
    assert.deepEqual(woke.events.map((e) => [e.jobId, e.type]), [[x.id, 'completed']]);

    // What berthd does not take is its InvalidParams naming /types.
    for (const types of [[], ['finished'], 'progress', ['completed', ''], 5]) {
      await assert.rejects(c.poll({ types }), (e) => {
        assert.ok(e instanceof BerthError, `${JSON.stringify(types)}: ${e}`);
        assert.equal(e.code, ErrorCode.InvalidParams);
        assert.equal(e.errors[0].instancePath, '/types');
        return true;
      });
    }
  });
});

describe('the client across a restart of berthd', () => {
  const d = new Daemon();
  before(() => d.start());
  after(() => d.cleanup());

  test('a_wait_in_flight__is_sent_again_after_the_restart__and_sees_the_approval', async () => {
    const c = await connect({ socket: d.socket });
    const other = await connect({ socket: d.socket });
    try {
      const j = await c.submit('write-note', { path: `${d.dir}/n1`, text: 'x' });
      const waiting = c.wait(j.id, { until: ['completed', 'declined'] });
      await d.restart();
      await other.approve(j.id);
      const done = await waiting;
      assert.equal(done.status, 'completed');
    } finally {
      c.close();
      other.close();
    }
  });

  test('an_events_stream__goes_on_from_the_last_seq__without_a_gap_or_a_repeat', async () => {
    const c = await connect({ socket: d.socket });
    try {
      const stream = c.events({ since: 0 });
      const a = await c.submit('noop', { before: true });
      await c.wait(a.id, { timeoutMs: 60000 });
      const seqs = [];
      let sawA = false;
      let b = null;
      for await (const e of stream) {
        seqs.push(e.seq);
        if (e.jobId === a.id && e.type === 'completed' && !sawA) {
          sawA = true;
          await d.restart();
          b = await c.submit('noop', { after: true });
        }
        if (b && e.jobId === b.id && e.type === 'completed') break;
      }
      for (let i = 1; i < seqs.length; i++) assert.equal(seqs[i], seqs[i - 1] + 1, `seq ${seqs[i - 1]} then ${seqs[i]}`);
    } finally {
      c.close();
    }
  });

  test('an_events_stream_with_types__asks_for_them_again_after_a_restart', async () => {
    const c = await connect({ socket: d.socket });
    try {
      const stream = c.events({ since: await c.headSeq(), types: ['completed'] });
      const a = await c.submit('noop', { before: true });
      let b = null;
      for await (const e of stream) {
        assert.equal(e.type, 'completed', `${e.type} of ${e.jobId === a.id ? 'a' : 'b'} was not asked for`);
        if (e.jobId === a.id) {
          await d.restart();
          b = await c.submit('noop', { after: true });
        }
        if (b && e.jobId === b.id) break;
      }
    } finally {
      c.close();
    }
  });

  test('wait_with_timeoutMs__settles_at_its_timeout_while_berthd_is_down__in_flight_or_started_then', async () => {
    // The wait was sent again on every reconnect attempt without end: a
    // bounded wait hung for as long as berthd was down. At timeoutMs it
    // now rejects with ConnectionClosed, naming the wait, its timeout and
    // the last attempt's error (the Python SDK's rule). 5 s is the bound
    // of a loaded machine; berthd stays down 8 s.
    const c = await connect({ socket: d.socket, logger: false });
    try {
      const j = await c.submit('write-note', { path: `${d.dir}/n3`, text: 'x' });
      const settled = (p) => p.then((v) => ({ v, at: performance.now() }), (e) => ({ e, at: performance.now() }));
      const t0 = performance.now();
      const inFlight = settled(c.wait(j.id, { timeoutMs: 1500, until: ['completed'] }));
      await sleep(200);
      await d.stop();
      const t1 = performance.now();
      const startedDown = settled(c.wait(j.id, { timeoutMs: 1500, until: ['completed'] }));
      const bound = (p) => Promise.race([p, sleep(5000).then(() => ({ hung: true }))]);
      const [a, b] = await Promise.all([bound(inFlight), bound(startedDown)]);
      for (const [r, from] of [[a, t0], [b, t1]]) {
        assert.ok(!r.hung, 'the wait settled within 5 s of its 1.5 s timeout while berthd was down');
        assert.ok(r.e instanceof BerthError && r.e.code === ErrorCode.ConnectionClosed, String(r.e ?? JSON.stringify(r.v)));
        assert.match(r.e.message, new RegExp(`wait for job ${j.id}.*1500 ms`));
        assert.ok(r.at - from >= 1400, `settled after ${r.at - from} ms, not before its timeout`);
      }
      await d.start();
      // The client is usable once berthd is back.
      assert.equal((await c.get(j.id)).status, 'awaiting_approval');
      await c.cancel(j.id);
    } finally {
      c.close();
      if (!d.proc) await d.start();
    }
  });

  test('a_client_without_reconnect__fails_its_calls_once_berthd_is_gone', async () => {
    const c = await connect({ socket: d.socket, reconnect: false });
    try {
      const j = await c.submit('write-note', { path: `${d.dir}/n2`, text: 'x' });
      const waiting = assert.rejects(c.wait(j.id, { until: ['completed'] }),
        (e) => e instanceof BerthError && e.code === ErrorCode.ConnectionClosed);
      await d.restart();
      await waiting;
      await assert.rejects(c.get(j.id), (e) => e.code === ErrorCode.ConnectionClosed);
    } finally {
      c.close();
    }
  });

  test('connect__to_a_socket_nobody_serves__rejects_with_ConnectionClosed_naming_the_path', async () => {
    // With the default reconnect policy too: it applies to reconnects, not to the first connection.
    await assert.rejects(connect({ socket: `${d.dir}/nobody.sock` }), (e) => {
      assert.equal(e.code, ErrorCode.ConnectionClosed);
      assert.match(e.message, /nobody\.sock/);
      return true;
    });
  });
});

describe('the client over TCP', () => {
  const d = new Daemon({ tcp: true });
  before(() => d.start());
  after(() => d.cleanup());

  test('a_client_with_the_token__is_served', async () => {
    const c = await connect({ url: d.url, token: d.token });
    try {
      const j = await c.submit('noop', {});
      assert.equal((await c.wait(j.id, { timeoutMs: 60000 })).status, 'completed');
    } finally {
      c.close();
    }
  });

  test('a_wrong_token__is_refused_with_unauthorized__and_not_retried', async () => {
    await assert.rejects(connect({ url: d.url, token: 'wrong' }), (e) => e instanceof BerthError && e.code === ErrorCode.Unauthorized);
  });

  test('no_token__is_refused_before_anything_is_sent', async () => {
    const saved = process.env.BERTH_TOKEN;
    delete process.env.BERTH_TOKEN;
    try {
      await assert.rejects(connect({ url: d.url }), /token/);
    } finally {
      if (saved !== undefined) process.env.BERTH_TOKEN = saved;
    }
  });
});

describe('the client closed while it connects again', () => {
  test('close_while_a_reconnect_waits_for_server_auth__rejects_the_calls_that_wait_for_it_and_ends_the_attempt', async () => {
    // A scripted berthd on TCP answers the first connection's server/auth,
    // and the connection drops; it never answers the next one's (a berthd
    // that hangs, a network that does). close() must end the calls that
    // wait for that connection, and the attempt with them, rather than
    // leave both to the attempt's timeout (here ten minutes).
    const conns = [];
    const auths = [];
    const closed = [];
    const server = net.createServer((s) => {
      const i = conns.push(s) - 1;
      let buf = '';
      s.on('data', (b) => {
        buf += b;
        for (let k; (k = buf.indexOf('\n')) >= 0;) {
          const m = JSON.parse(buf.slice(0, k));
          buf = buf.slice(k + 1);
          if (m.method !== 'server/auth') continue;
          auths.push(i);
          if (i === 0) s.write(`${JSON.stringify({ jsonrpc: '2.0', id: m.id, result: {} })}\n`);
        }
      });
      s.on('error', () => {});
      s.on('close', () => closed.push(i));
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    const c = await connect({
      url: `tcp://127.0.0.1:${server.address().port}`, token: 'unused',
      connectTimeoutMs: 600000, reconnect: { initialDelayMs: 1, maxDelayMs: 1 },
    });
    try {
      conns[0].destroy();
      await until(() => c.current === null, 'the client to see the drop');
      const settled = c.ping().then(() => 'resolved', (e) => e);
      await until(() => auths.length === 2, 'the server/auth of the attempt to connect again');
      c.close();
      let timer;
      const r = await Promise.race([settled,
        new Promise((resolve) => { timer = setTimeout(resolve, 30000, 'still waiting 30 s after close()'); })]);
      clearTimeout(timer);
      assert.ok(r instanceof BerthError && r.code === ErrorCode.ConnectionClosed, String(r));
      assert.match(r.message, /the client was closed/);
      await until(() => closed.includes(1), 'the attempt to close its connection');
    } finally {
      c.close();
      for (const s of conns) s.destroy();
      server.close();
    }
  });
});
