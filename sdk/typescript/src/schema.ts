// schema.ts: a tool's schemas as JSON Schema documents, whatever they were
// written with. The reference page of createTool() allows any Standard JSON
// Schema (Zod 4.2+, Valibot through toStandardJsonSchema, ArkType 2.1.28+,
// and every schema that Mastra's createTool() has wrapped); the libraries'
// older forms are converted with their own converters, which are optional
// peers loaded only when such a schema is seen; a plain JSON Schema passes
// through.

import { loadOptional } from './resolve.js';
import type { JsonSchema } from './types.js';

/** Which side of a transforming schema is wanted: what is parsed, or what parsing gives. */
export type SchemaIO = 'input' | 'output';

interface StandardJsonSchemaProps {
  vendor?: string;
  jsonSchema?: {
    input?: (opts: { target: string }) => unknown;
    output?: (opts: { target: string }) => unknown;
  };
}

/**
 * SchemaError is thrown when a schema cannot become JSON Schema; its
 * message says which schema (`where`, e.g. "weather-tool.inputSchema") and
 * what to install or change.
 */
export class SchemaConversionError extends Error {
  override readonly name = 'SchemaConversionError';
}

/**
 * toJsonSchema converts `schema` to a JSON Schema document. `io` picks the
 * input side (what a client sends: the input, resume data, request
 * context, a suspend payload) or the output side (what execute returns
 * after Mastra parsed it). Resolves undefined for an absent schema.
 */
export async function toJsonSchema(schema: unknown, where = 'schema', io: SchemaIO = 'input'): Promise<JsonSchema | undefined> {
  if (schema === undefined || schema === null) return undefined;
  if (typeof schema === 'boolean') return schema;
  if (typeof schema !== 'object' && typeof schema !== 'function') {
    throw new SchemaConversionError(`${where}: a schema must be an object (Zod, Valibot, ArkType, Standard JSON Schema or JSON Schema), not ${typeof schema}`);
  }
  const s = schema as Record<string, unknown>;
  const std = s['~standard'] as StandardJsonSchemaProps | undefined;
  const vendor = std?.vendor ?? 'unknown';

  const fromStandard = std?.jsonSchema?.[io];
  if (typeof fromStandard === 'function') {
    return checked(callTargets((target) => fromStandard.call(std!.jsonSchema, { target }), where, vendor), where);
  }
  // ArkType's types are functions with a toJsonSchema method.
  if (typeof s.toJsonSchema === 'function' && (vendor === 'arktype' || typeof schema === 'function')) {
    return checked(callTargets(() => (s.toJsonSchema as (o?: unknown) => unknown).call(schema), where, vendor), where);
  }
  if ('_zod' in s) {
    const zod = await loadOptional<{ toJSONSchema?: (s: unknown, o?: unknown) => unknown }>('zod');
    const core = zod?.toJSONSchema ? zod : await loadOptional<{ toJSONSchema?: (s: unknown, o?: unknown) => unknown }>('zod/v4/core');
    if (!core?.toJSONSchema) {
      throw new SchemaConversionError(`${where}: a Zod 4 schema needs zod >= 4 installed beside the application to become JSON Schema (npm install zod)`);
    }
    return checked(core.toJSONSchema(schema, { io, target: 'draft-2020-12', unrepresentable: 'any' }), where);
  }
  if ('_def' in s && typeof s.safeParse === 'function') {
    const m = await loadOptional<{ zodToJsonSchema?: (s: unknown, o?: unknown) => unknown; default?: (s: unknown, o?: unknown) => unknown }>('zod-to-json-schema');
    const convert = m?.zodToJsonSchema ?? m?.default;
    if (!convert) {
      throw new SchemaConversionError(`${where}: a Zod 3 schema needs the package zod-to-json-schema to become JSON Schema: npm install zod-to-json-schema (or use Zod 4, or pass the tool through Mastra's createTool())`);
    }
    return checked(convert(schema, { $refStrategy: 'none', effectStrategy: io, pipeStrategy: io }), where);
  }
  if (vendor === 'valibot' || ('kind' in s && s.kind === 'schema' && '~run' in s)) {
    const m = await loadOptional<{ toJsonSchema?: (s: unknown, o?: unknown) => unknown }>('@valibot/to-json-schema');
    if (!m?.toJsonSchema) {
      throw new SchemaConversionError(`${where}: a Valibot schema needs the package @valibot/to-json-schema to become JSON Schema: npm install @valibot/to-json-schema (or wrap it with toStandardJsonSchema())`);
    }
    return checked(m.toJsonSchema(schema, { errorMode: 'throw' }), where);
  }
  if (std) {
    throw new SchemaConversionError(`${where}: this ${vendor} schema is a Standard Schema without ~standard.jsonSchema, so it cannot become JSON Schema: give a JSON Schema, or a schema of a library that implements Standard JSON Schema`);
  }
  if (typeof schema === 'function') {
    throw new SchemaConversionError(`${where}: a function is not a schema`);
  }
  return checked(schema, where);
}

// callTargets asks for draft 2020-12 (berthd's dialect) and falls back to
// draft-07, which berthd also reads, for a library that lacks the former.
function callTargets(fn: (target: string) => unknown, where: string, vendor: string): unknown {
  try {
    return fn('draft-2020-12');
  } catch (first) {
    try {
      return fn('draft-07');
    } catch {
      throw new SchemaConversionError(`${where}: the ${vendor} schema could not be turned into JSON Schema: ${(first as Error).message}`);
    }
  }
}

// checked makes sure the result is a JSON document (a converter may leave
// functions or undefined behind) and returns a copy of it.
function checked(doc: unknown, where: string): JsonSchema {
  if (typeof doc === 'boolean') return doc;
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) {
    throw new SchemaConversionError(`${where}: a JSON Schema must be an object or a boolean`);
  }
  const bad = findNonJson(doc, '');
  if (bad !== null) throw new SchemaConversionError(`${where}: the schema holds ${bad}, which JSON cannot carry`);
  return JSON.parse(JSON.stringify(doc)) as JsonSchema;
}

function findNonJson(v: unknown, at: string): string | null {
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return null;
    case 'number':
      return Number.isFinite(v) ? null : `${v} at ${at || '/'}`;
    case 'object': {
      if (v === null) return null;
      if (Array.isArray(v)) {
        for (let i = 0; i < v.length; i++) {
          const r = findNonJson(v[i], `${at}/${i}`);
          if (r) return r;
        }
        return null;
      }
      const proto = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null) return `a ${proto?.constructor?.name ?? 'class'} instance at ${at || '/'}`;
      for (const [k, x] of Object.entries(v)) {
        if (x === undefined) continue;
        const r = findNonJson(x, `${at}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`);
        if (r) return r;
      }
      return null;
    }
    default:
      return `a ${typeof v} at ${at || '/'}`;
  }
}
