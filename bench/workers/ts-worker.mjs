// ts-worker.mjs: one Node worker process serving a no-op tool through the
// TypeScript SDK (sdk/typescript's serve(), as a Mastra user would), for
// berth-bench's worker scenario and bench/compare-workers.
//
//     BERTH_SOCKET=PATH node bench/workers/ts-worker.mjs [CONCURRENCY]

import { serve } from '../../sdk/typescript/dist/index.js';

const noop = {
  id: 'bench-noop',
  description: 'Returns its input.',
  inputSchema: { type: 'object' },
  execute: async (input) => input,
};

const concurrency = Number(process.argv[2] ?? 64);
const worker = await serve({ socket: process.env.BERTH_SOCKET, tools: [noop], concurrency, name: 'bench-ts-worker', logger: false });
process.on('SIGTERM', () => { worker.close({ force: true, timeoutMs: 1000 }).then(() => process.exit(0)); });
