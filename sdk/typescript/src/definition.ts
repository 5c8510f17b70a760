// definition.ts: a createTool() tool as the JSON Definition that
// worker/register carries (docs/WORKERS.md). The functions stay in the
// worker; `functions` tells berthd which of them exist, so that it asks for
// their results at the stages they belong to.

import { SchemaConversionError, toJsonSchema } from './schema.js';
import type { Background, JsonSchema, RetryConfig, ViewStage, ViewTarget } from './types.js';
import { VIEW_STAGES } from './types.js';

type AnyFn = (...args: any[]) => unknown;

/**
 * The shape serve() reads: what `createTool()` from @mastra/core returns,
 * or a plain object of the same shape. Only `id` and `execute` are needed.
 * Schemas may be Zod (3 or 4), Valibot, ArkType, any Standard JSON Schema
 * or plain JSON Schema.
 */
export interface ToolLike {
  id: string;
  title?: string;
  description?: string;
  inputSchema?: unknown;
  outputSchema?: unknown;
  suspendSchema?: unknown;
  resumeSchema?: unknown;
  requestContextSchema?: unknown;
  strict?: boolean;
  inputExamples?: Array<{ input: Record<string, unknown> }>;
  providerOptions?: Record<string, Record<string, unknown>>;
  requireApproval?: boolean | AnyFn;
  /** Set by Mastra for an MCP-derived tool; when present it decides approval. */
  needsApprovalFn?: AnyFn;
  /** berth's approval policy (docs/API.md), passed through. */
  approvalPolicy?: object;
  background?: Background & { retries?: RetryConfig & { retryableErrors?: AnyFn } };
  mcp?: { annotations?: object; _meta?: object };
  toModelOutput?: AnyFn;
  transform?: Partial<Record<ViewTarget, Partial<Record<string, AnyFn>>>>;
  onInputAvailable?: AnyFn;
  onOutput?: AnyFn;
  execute?: AnyFn;
}

/** The JSON form of a tool that worker/register sends. */
export interface Definition {
  id: string;
  title?: string;
  description?: string;
  inputSchema?: JsonSchema;
  outputSchema?: JsonSchema;
  suspendSchema?: JsonSchema;
  resumeSchema?: JsonSchema;
  requestContextSchema?: JsonSchema;
  strict?: boolean;
  inputExamples?: Array<{ input: Record<string, unknown> }>;
  providerOptions?: Record<string, Record<string, unknown>>;
  requireApproval?: boolean | 'function';
  approvalPolicy?: Record<string, unknown>;
  background?: Background & { retries?: RetryConfig };
  mcp?: { annotations?: Record<string, unknown>; _meta?: Record<string, unknown> };
  functions?: {
    toModelOutput?: true;
    transform?: Partial<Record<ViewTarget, ViewStage[]>>;
    onInputAvailable?: true;
    onOutput?: true;
  };
}

// berth's background settings, and Mastra's older `retries` (its
// RetryConfig), which berthd reads into them (docs/TOOLS.md).
const BACKGROUND_KEYS = ['enabled', 'timeoutMs', 'maxRetries', 'concurrency', 'backoffMs', 'backoffMaxMs', 'onInterrupt', 'retries'] as const;

// Mastra's background settings that belong to its agent loop: not sent
// (berth's events and jobs/wait do their work).
const MASTRA_LOOP_KEYS = ['defaultDisposition', 'waitTimeoutMs', 'onComplete', 'onFailed'];

// The members of Mastra's RetryConfig other than maxRetries, given beside
// it rather than in `retries`: read as `retries`' own, which berthd reads
// into backoffMs and backoffMaxMs (and refuses a backoffMultiplier but 2).
const RETRY_CONFIG_KEYS = ['retryDelayMs', 'maxRetryDelayMs', 'backoffMultiplier'];

// What berth calls a setting that is often given under another name.
const BERTH_NAME: Record<string, string> = {
  retryDelay: 'backoffMs (the delay before the first retry, in ms; Mastra\'s retries.retryDelayMs)',
  delay: 'backoffMs (the delay before the first retry, in ms)',
  backoff: 'backoffMs (the delay before the first retry, in ms; it doubles after each try)',
  maxRetryDelay: 'backoffMaxMs (the longest delay between tries, in ms; Mastra\'s retries.maxRetryDelayMs)',
  maxBackoff: 'backoffMaxMs (the longest delay between tries, in ms)',
  maxRetry: 'maxRetries (tries after the first)',
  retry: 'maxRetries (tries after the first)',
  attempts: 'maxRetries (tries after the first, so attempts - 1)',
  maxAttempts: 'maxRetries (tries after the first, so maxAttempts - 1)',
  timeout: 'timeoutMs (the time a run gets, in ms)',
  timeoutMS: 'timeoutMs (the time a run gets, in ms)',
  onInterrupted: 'onInterrupt ("retry" or "fail")',
  retryableErrors: 'none: an error with retryable: false (NonRetryableError) is not retried, any other is',
};

// backgroundOf is the background that a definition carries: berth's
// members and `retries` as given, Mastra's RetryConfig members given
// beside them moved into `retries`, Mastra's agent-loop settings left out;
// anything else throws a TypeError naming the member and berth's field,
// rather than be dropped unsaid.
function backgroundOf(id: string, given: Record<string, unknown>): Record<string, unknown> {
  const b: Record<string, unknown> = {};
  for (const k of BACKGROUND_KEYS) if (given[k] !== undefined) b[k] = given[k];
  const retries = given.retries as Record<string, unknown> | null | undefined;
  for (const [k, v] of Object.entries(given)) {
    if (v === undefined || (BACKGROUND_KEYS as readonly string[]).includes(k) || MASTRA_LOOP_KEYS.includes(k)) continue;
    if (RETRY_CONFIG_KEYS.includes(k)) {
      if (retries !== undefined && retries !== null && typeof retries !== 'object') continue; // berthd refuses it, naming it
      const r = { ...(b.retries as Record<string, unknown> | undefined) };
      if (r[k] !== undefined && JSON.stringify(r[k]) !== JSON.stringify(v)) {
        throw new TypeError(`berth: tool ${id}: background.${k} is ${JSON.stringify(v)} but background.retries.${k} is ${JSON.stringify(r[k])}: give it once`);
      }
      r[k] = v;
      b.retries = r;
      continue;
    }
    const berths = BERTH_NAME[k];
    throw new TypeError(`berth: tool ${id}: background.${k} is not a background setting berth knows` +
      (berths ? `: berth's is ${berths}` : `; berth's are enabled, timeoutMs, maxRetries, backoffMs, backoffMaxMs, concurrency, onInterrupt and Mastra's retries (docs/TOOLS.md)`));
  }
  return b;
}

/** approvalFunction is the function that decides approval per call, if the tool has one. */
export function approvalFunction(tool: ToolLike): AnyFn | undefined {
  if (typeof tool.needsApprovalFn === 'function') return tool.needsApprovalFn;
  if (typeof tool.requireApproval === 'function') return tool.requireApproval;
  return undefined;
}

/** transformTargets lists the targets (display, transcript) the tool transforms. */
export function transformTargets(tool: ToolLike): ViewTarget[] {
  const t = tool.transform;
  if (!t || typeof t !== 'object') return [];
  return (['display', 'transcript'] as const).filter((k) => t[k] && typeof t[k] === 'object');
}

/**
 * toolDefinition builds the Definition of a tool. Throws a TypeError (or a
 * SchemaConversionError) naming the tool and the field when the tool
 * cannot be served: no id, no execute, a schema that cannot become JSON
 * Schema, a value JSON cannot carry.
 */
export async function toolDefinition(tool: ToolLike): Promise<Definition> {
  if (!tool || typeof tool !== 'object') throw new TypeError('berth: a tool must be an object (what createTool() returns)');
  if (typeof tool.id !== 'string' || tool.id === '') throw new TypeError('berth: a tool needs a non-empty string id');
  const id = tool.id;
  if (typeof tool.execute !== 'function') {
    throw new TypeError(`berth: tool ${id} has no execute function, so a worker cannot run it`);
  }
  const def: Definition = { id };
  if (tool.title !== undefined) def.title = str(tool.title, id, 'title');
  if (tool.description !== undefined) def.description = str(tool.description, id, 'description');
  const schemas: Array<[keyof Definition & `${string}Schema`, 'input' | 'output']> = [
    ['inputSchema', 'input'],
    ['outputSchema', 'output'],
    ['suspendSchema', 'input'],
    ['resumeSchema', 'input'],
    ['requestContextSchema', 'input'],
  ];
  for (const [field, io] of schemas) {
    const v = await toJsonSchema((tool as unknown as Record<string, unknown>)[field], `tool ${id}: ${field}`, io);
    if (v !== undefined) def[field] = v;
  }
  if (tool.strict !== undefined) def.strict = Boolean(tool.strict);
  if (tool.inputExamples !== undefined) def.inputExamples = json(tool.inputExamples, id, 'inputExamples') as Definition['inputExamples'];
  if (tool.providerOptions !== undefined) def.providerOptions = json(tool.providerOptions, id, 'providerOptions') as Definition['providerOptions'];
  if (approvalFunction(tool)) def.requireApproval = 'function';
  else if (tool.requireApproval !== undefined) def.requireApproval = Boolean(tool.requireApproval);
  if (tool.approvalPolicy !== undefined) def.approvalPolicy = json(tool.approvalPolicy, id, 'approvalPolicy') as Record<string, unknown>;
  if (tool.background && typeof tool.background === 'object') {
    const given = tool.background as Record<string, unknown>;
    const b = backgroundOf(id, given);
    // retries.retryableErrors is a function, which a definition cannot
    // hold and JSON would drop unsaid: berthd refuses it in a manifest.
    const retries = given.retries as { retryableErrors?: unknown } | null | undefined;
    if (retries && typeof retries === 'object' && retries.retryableErrors !== undefined) {
      throw new TypeError(`berth: tool ${id}: background.retries.retryableErrors is a function, which berth has no place for: ` +
        'an error with retryable: false (NonRetryableError) is not retried, any other is');
    }
    if (Object.keys(b).length > 0) def.background = json(b, id, 'background') as Definition['background'];
  }
  if (tool.mcp && typeof tool.mcp === 'object') {
    const m: Record<string, unknown> = {};
    if (tool.mcp.annotations !== undefined) m.annotations = tool.mcp.annotations;
    if (tool.mcp._meta !== undefined) m._meta = tool.mcp._meta;
    if (Object.keys(m).length > 0) def.mcp = json(m, id, 'mcp') as Definition['mcp'];
  }
  const functions: NonNullable<Definition['functions']> = {};
  if (typeof tool.toModelOutput === 'function') functions.toModelOutput = true;
  const targets = transformTargets(tool);
  if (targets.length > 0) {
    // Each target lists the stages it has a function for; as in Mastra,
    // berthd shows a placeholder, never the raw payload, for the other
    // stages of a target that has a transform (docs/WORKERS.md), and asks
    // this worker only about the stages listed.
    functions.transform = {};
    for (const t of targets) {
      const fns = tool.transform?.[t] ?? {};
      functions.transform[t] = VIEW_STAGES.filter((stage) => typeof fns[stage] === 'function');
    }
  }
  if (typeof tool.onInputAvailable === 'function') functions.onInputAvailable = true;
  if (typeof tool.onOutput === 'function') functions.onOutput = true;
  if (Object.keys(functions).length > 0) def.functions = functions;
  return def;
}

function str(v: unknown, id: string, field: string): string {
  if (typeof v !== 'string') throw new TypeError(`berth: tool ${id}: ${field} must be a string`);
  return v;
}

function json(v: unknown, id: string, field: string): unknown {
  try {
    return JSON.parse(JSON.stringify(v));
  } catch (e) {
    throw new TypeError(`berth: tool ${id}: ${field} is not JSON: ${(e as Error).message}`);
  }
}

export { SchemaConversionError };
