// worker-main.mjs: the fixture tools served by a worker process of their
// own, which the tests kill -9. BERTH_SOCKET or BERTH_URL with
// BERTH_TOKEN say where berthd is; BERTH_WORKER_NAME names the worker.

import { serve } from '@berth/sdk';
import { allTools } from './tools.fixture.mjs';

try {
  const worker = await serve({
    tools: allTools,
    concurrency: Number(process.env.BERTH_CONCURRENCY ?? 8),
    name: process.env.BERTH_WORKER_NAME,
    ...(process.env.BERTH_URL ? { url: process.env.BERTH_URL, token: process.env.BERTH_TOKEN } : { socket: process.env.BERTH_SOCKET }),
  });
  // The first registration is "worker ready"; each one after a reconnect is logged.
  worker.on('registered', (r) => console.log(`worker registered again as ${r.worker}`));
  process.once('SIGTERM', () => worker.close().then(() => console.log('worker closed')));
  console.log('worker ready');
} catch (e) {
  console.log(`worker failed: ${e.message}`);
  process.exit(1);
}
