import { SchemaConversionError } from './schema.js';
import type { Background, JsonSchema, RetryConfig, ViewStage, ViewTarget } from './types.js';
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
    inputExamples?: Array<{
        input: Record<string, unknown>;
    }>;
    providerOptions?: Record<string, Record<string, unknown>>;
    requireApproval?: boolean | AnyFn;
    /** Set by Mastra for an MCP-derived tool; when present it decides approval. */
    needsApprovalFn?: AnyFn;
    /** berth's approval policy (docs/API.md), passed through. */
    approvalPolicy?: object;
    background?: Background & {
        retries?: RetryConfig & {
            retryableErrors?: AnyFn;
        };
    };
    mcp?: {
        annotations?: object;
        _meta?: object;
    };
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
    inputExamples?: Array<{
        input: Record<string, unknown>;
    }>;
    providerOptions?: Record<string, Record<string, unknown>>;
    requireApproval?: boolean | 'function';
    approvalPolicy?: Record<string, unknown>;
    background?: Background & {
        retries?: RetryConfig;
    };
    mcp?: {
        annotations?: Record<string, unknown>;
        _meta?: Record<string, unknown>;
    };
    functions?: {
        toModelOutput?: true;
        transform?: Partial<Record<ViewTarget, ViewStage[]>>;
        onInputAvailable?: true;
        onOutput?: true;
    };
}
/** approvalFunction is the function that decides approval per call, if the tool has one. */
export declare function approvalFunction(tool: ToolLike): AnyFn | undefined;
/** transformTargets lists the targets (display, transcript) the tool transforms. */
export declare function transformTargets(tool: ToolLike): ViewTarget[];
/**
 * toolDefinition builds the Definition of a tool. Throws a TypeError (or a
 * SchemaConversionError) naming the tool and the field when the tool
 * cannot be served: no id, no execute, a schema that cannot become JSON
 * Schema, a value JSON cannot carry.
 */
export declare function toolDefinition(tool: ToolLike): Promise<Definition>;
export { SchemaConversionError };
