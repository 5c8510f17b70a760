// @berth/sdk: serve Mastra createTool() tools as durable berthd jobs
// (serve), and talk to berthd (connect). docs/PROTOCOL.md and
// docs/WORKERS.md are the wire contract.
export { serve, Worker } from './worker.js';
export { connect, Client } from './client.js';
export { BerthError, ErrorCode, NonRetryableError } from './errors.js';
export { toolDefinition } from './definition.js';
export { toJsonSchema, SchemaConversionError } from './schema.js';
export { RequestContext } from './context.js';
export { resolveAddress } from './rpc.js';
export { isTerminal, TERMINAL_STATUSES, VIEW_STAGES } from './types.js';
export { SDK_NAME, SDK_VERSION } from './version.js';
