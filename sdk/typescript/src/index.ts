// @berth/sdk: serve Mastra createTool() tools as durable berthd jobs
// (serve), and talk to berthd (connect). docs/PROTOCOL.md and
// docs/WORKERS.md are the wire contract.

export { serve, Worker } from './worker.js';
export type { ServeOptions, Logger, RunJob, Outcome, BerthRunContext, ExecuteContext } from './worker.js';
export { connect, Client } from './client.js';
export type {
  ConnectOptions,
  ReconnectOptions,
  CallOptions,
  SubmitOptions,
  ListParams,
  WaitOptions,
  PollOptions,
  EventsOptions,
  JobList,
} from './client.js';
export { BerthError, ErrorCode, NonRetryableError } from './errors.js';
export type { ErrorCodeValue, SchemaError } from './errors.js';
export { toolDefinition } from './definition.js';
export type { ToolLike, Definition } from './definition.js';
export { toJsonSchema, SchemaConversionError } from './schema.js';
export type { SchemaIO } from './schema.js';
export { RequestContext } from './context.js';
export { resolveAddress } from './rpc.js';
export type { Address, Endpoint } from './rpc.js';
export { isTerminal, TERMINAL_STATUSES, VIEW_STAGES } from './types.js';
export type * from './types.js';
export { SDK_NAME, SDK_VERSION } from './version.js';
