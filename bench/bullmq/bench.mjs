// bench.mjs: BullMQ 5 under berth-bench's load shape, for
// bench/compare-workers: 8 producer connections, each adding a job and
// awaiting the acknowledgement (the job stored in Redis) before the next,
// one worker process running a no-op job function, timed from the first
// add to the last completion (seen through QueueEvents).
//
//     node bench.mjs worker --port P [--concurrency C]
//     node bench.mjs load --port P [--connections N] [--count N]
//
// load prints one JSON line: jobs, failed, seconds, jobs/s and the
// latencies (ms) of acknowledgements and of submission -> completion.

import { Queue, QueueEvents, Worker } from 'bullmq';

const args = process.argv.slice(2);
const role = args[0];
const opt = (name, def) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : def;
};
const connection = { host: '127.0.0.1', port: Number(opt('port', 6379)) };
const QUEUE = 'berth-bench';

function percentile(sorted, p) {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] : 0;
}

if (role === 'worker') {
  const worker = new Worker(QUEUE, async (job) => job.data, {
    connection,
    concurrency: Number(opt('concurrency', 64)),
  });
  await worker.waitUntilReady();
  console.log('worker ready');
  process.on('SIGTERM', () => { worker.close().then(() => process.exit(0)); });
} else if (role === 'load') {
  const n = Number(opt('connections', 8));
  const count = Number(opt('count', 30000));
  // The events stream keeps 10,000 events unless told otherwise: a reader
  // that falls behind would miss completions.
  const streams = { events: { maxLen: 2 * count + 10000 } };
  const queues = Array.from({ length: n }, () => new Queue(QUEUE, { connection, streams }));
  // From the stream's start (it is empty at first): a reader that began
  // at "$" could miss what came before its first read.
  const events = new QueueEvents(QUEUE, { connection, lastEventId: '0' });
  await Promise.all([...queues.map((q) => q.waitUntilReady()), events.waitUntilReady()]);
  const sent = new Map();
  const ack = [];
  const done = [];
  let last = 0;
  let finished = 0;
  let failed = 0;
  let resolveAll;
  const all = new Promise((resolve) => { resolveAll = resolve; });
  const seen = (jobId, ok) => {
    const t = sent.get(jobId);
    if (t === undefined) return;
    sent.delete(jobId);
    const now = performance.now();
    done.push(now - t);
    last = now;
    if (!ok) failed++;
    if (++finished === count) resolveAll();
  };
  events.on('completed', ({ jobId }) => seen(jobId, true));
  events.on('failed', ({ jobId }) => seen(jobId, false));
  const share = (i) => Math.floor(count / n) + (i < count % n ? 1 : 0);
  const t0 = performance.now();
  await Promise.all(queues.map(async (q, i) => {
    for (let k = 0; k < share(i); k++) {
      // The job's id is ours, so that a completion that comes before the
      // add's answer is counted.
      const jobId = `j${i}-${k}`;
      const t = performance.now();
      sent.set(jobId, t);
      await q.add('noop', { i, k }, { jobId, removeOnComplete: true, removeOnFail: true });
      ack.push(performance.now() - t);
    }
  }));
  await all;
  const seconds = (last - t0) / 1000;
  ack.sort((a, b) => a - b);
  done.sort((a, b) => a - b);
  console.log(JSON.stringify({
    jobs: finished, failed, seconds, rate: finished / seconds,
    ack_p50: percentile(ack, 0.5), ack_p99: percentile(ack, 0.99),
    done_p50: percentile(done, 0.5), done_p99: percentile(done, 0.99),
  }));
  await Promise.all([...queues.map((q) => q.close()), events.close()]);
  process.exit(0);
} else {
  console.error('usage: node bench.mjs worker|load --port P [...]');
  process.exit(2);
}
