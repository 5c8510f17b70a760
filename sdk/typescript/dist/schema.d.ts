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
 *
 * A `default` that a function computes (Zod's `.default(() => ...)`,
 * Valibot's and ArkType's alike) is left out of a converted schema: berthd
 * fills every default it is given into every job, so one value of
 * registration time would be every job's, and two worker processes of the
 * same file would register different definitions. Without it, the tool's
 * own parse fills a fresh value per run. A converter gives only the value,
 * so the schema is converted twice, a millisecond of the clock apart, and
 * a default that differs between the two is left out; so is one whose
 * value is not JSON (a Date, which berthd would fill as its text).
 */
export declare function toJsonSchema(schema: unknown, where?: string, io?: SchemaIO): Promise<JsonSchema | undefined>;
