import type { JsonSchema } from './types.js';
/** Which side of a transforming schema is wanted: what is parsed, or what parsing gives. */
export type SchemaIO = 'input' | 'output';
/**
 * SchemaError is thrown when a schema cannot become JSON Schema; its
 * message says which schema (`where`, e.g. "weather-tool.inputSchema") and
 * what to install or change.
 */
export declare class SchemaConversionError extends Error {
    readonly name = "SchemaConversionError";
}
/**
 * toJsonSchema converts `schema` to a JSON Schema document. `io` picks the
 * input side (what a client sends: the input, resume data, request
 * context, a suspend payload) or the output side (what execute returns
 * after Mastra parsed it). Resolves undefined for an absent schema.
 */
export declare function toJsonSchema(schema: unknown, where?: string, io?: SchemaIO): Promise<JsonSchema | undefined>;
