// schema.ts: a tool's schemas as JSON Schema documents, whatever they were
// written with. The reference page of createTool() allows any Standard JSON
// Schema (Zod 4.2+, Valibot through toStandardJsonSchema, ArkType 2.1.28+,
// and every schema that Mastra's createTool() has wrapped); the libraries'
// older forms are converted with their own converters, which are optional
// peers loaded only when such a schema is seen; a plain JSON Schema passes
// through.
import { loadOptional } from './resolve.js';
/**
 * SchemaError is thrown when a schema cannot become JSON Schema; its
 * message says which schema (`where`, e.g. "weather-tool.inputSchema") and
 * what to install or change.
 */
export class SchemaConversionError extends Error {
    name = 'SchemaConversionError';
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
export async function toJsonSchema(schema, where = 'schema', io = 'input') {
    const first = await convert(schema, where, io);
    if (first === undefined || typeof first === 'boolean')
        return first;
    // A default computed from the clock differs once a millisecond has
    // passed (a timer of 1 ms waits at least that long).
    const t = Date.now();
    while (Date.now() === t)
        await new Promise((done) => setTimeout(done, 1));
    const second = await convert(schema, where, io);
    dropUnstableDefaults(first, second);
    return first;
}
async function convert(schema, where, io) {
    if (schema === undefined || schema === null)
        return undefined;
    if (typeof schema === 'boolean')
        return schema;
    if (typeof schema !== 'object' && typeof schema !== 'function') {
        throw new SchemaConversionError(`${where}: a schema must be an object (Zod, Valibot, ArkType, Standard JSON Schema or JSON Schema), not ${typeof schema}`);
    }
    const s = schema;
    const std = s['~standard'];
    const vendor = std?.vendor ?? 'unknown';
    const fromStandard = std?.jsonSchema?.[io];
    if (typeof fromStandard === 'function') {
        // Zod reads its own options from libraryOptions (as Mastra passes
        // them): without unrepresentable 'any', a z.date() anywhere (or a
        // bigint, a map, a custom type) throws, and the worker serves nothing.
        const libraryOptions = '_zod' in s ? ZOD_OPTIONS : undefined;
        return checked(callTargets((target) => fromStandard.call(std.jsonSchema, { target, libraryOptions }), where, vendor), where, true);
    }
    // ArkType's types are functions with a toJsonSchema method.
    if (typeof s.toJsonSchema === 'function' && (vendor === 'arktype' || typeof schema === 'function')) {
        return checked(callTargets(() => s.toJsonSchema.call(schema), where, vendor), where, true);
    }
    if ('_zod' in s) {
        const zod = await loadOptional('zod');
        const core = zod?.toJSONSchema ? zod : await loadOptional('zod/v4/core');
        if (!core?.toJSONSchema) {
            throw new SchemaConversionError(`${where}: a Zod 4 schema needs zod >= 4 installed beside the application to become JSON Schema (npm install zod)`);
        }
        return checked(core.toJSONSchema(schema, { io, target: 'draft-2020-12', ...ZOD_OPTIONS }), where, true);
    }
    if ('_def' in s && typeof s.safeParse === 'function') {
        const m = await loadOptional('zod-to-json-schema');
        const zodToJsonSchema = m?.zodToJsonSchema ?? m?.default;
        if (!zodToJsonSchema) {
            throw new SchemaConversionError(`${where}: a Zod 3 schema needs the package zod-to-json-schema to become JSON Schema: npm install zod-to-json-schema (or use Zod 4, or pass the tool through Mastra's createTool())`);
        }
        return checked(zodToJsonSchema(schema, { $refStrategy: 'none', effectStrategy: io, pipeStrategy: io }), where, true);
    }
    if (vendor === 'valibot' || ('kind' in s && s.kind === 'schema' && '~run' in s)) {
        const m = await loadOptional('@valibot/to-json-schema');
        if (!m?.toJsonSchema) {
            throw new SchemaConversionError(`${where}: a Valibot schema needs the package @valibot/to-json-schema to become JSON Schema: npm install @valibot/to-json-schema (or wrap it with toStandardJsonSchema())`);
        }
        return checked(m.toJsonSchema(schema, { errorMode: 'throw' }), where, true);
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
function callTargets(fn, where, vendor) {
    try {
        return fn('draft-2020-12');
    }
    catch (first) {
        try {
            return fn('draft-07');
        }
        catch {
            throw new SchemaConversionError(`${where}: the ${vendor} schema could not be turned into JSON Schema: ${first.message}`);
        }
    }
}
// Zod 4's options, for z.toJSONSchema and its ~standard.jsonSchema alike.
// override leaves out a default whose value is not JSON: Zod writes a
// Date's text, which berthd would fill in and z.date() then refuse.
const ZOD_OPTIONS = {
    unrepresentable: 'any',
    override: (ctx) => {
        const def = ctx.zodSchema?._zod?.def;
        if (!def || (def.type !== 'default' && def.type !== 'prefault'))
            return;
        let value;
        try {
            value = def.defaultValue;
        }
        catch {
            value = undefined;
        }
        if (value === undefined || findNonJson(value, '') !== null) {
            delete ctx.jsonSchema.default;
            delete ctx.jsonSchema._prefault;
        }
    },
};
// checked makes sure the result is a JSON document (a converter may leave
// functions or undefined behind) and returns a copy of it. In what a
// converter made (`converted`), a `default` JSON cannot carry is left out
// instead (zod-to-json-schema writes a Zod 3 default's value as it is,
// a Date included), as toJsonSchema says.
function checked(doc, where, converted = false) {
    if (typeof doc === 'boolean')
        return doc;
    if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) {
        throw new SchemaConversionError(`${where}: a JSON Schema must be an object or a boolean`);
    }
    if (converted)
        dropNonJsonDefaults(doc);
    const bad = findNonJson(doc, '');
    if (bad !== null)
        throw new SchemaConversionError(`${where}: the schema holds ${bad}, which JSON cannot carry`);
    return JSON.parse(JSON.stringify(doc));
}
function findNonJson(v, at) {
    switch (typeof v) {
        case 'string':
        case 'boolean':
            return null;
        case 'number':
            return Number.isFinite(v) ? null : `${v} at ${at || '/'}`;
        case 'object': {
            if (v === null)
                return null;
            if (Array.isArray(v)) {
                for (let i = 0; i < v.length; i++) {
                    const r = findNonJson(v[i], `${at}/${i}`);
                    if (r)
                        return r;
                }
                return null;
            }
            const proto = Object.getPrototypeOf(v);
            if (proto !== Object.prototype && proto !== null)
                return `a ${proto?.constructor?.name ?? 'class'} instance at ${at || '/'}`;
            for (const [k, x] of Object.entries(v)) {
                if (x === undefined)
                    continue;
                const r = findNonJson(x, `${at}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`);
                if (r)
                    return r;
            }
            return null;
        }
        default:
            return `a ${typeof v} at ${at || '/'}`;
    }
}
// Keywords whose value is a schema, or a list or a map of schemas; a
// `default` is looked for only where a schema is, never inside a const,
// an enum or another default.
const SUBSCHEMA = new Set(['items', 'additionalItems', 'contains', 'not', 'if', 'then', 'else', 'additionalProperties',
    'unevaluatedItems', 'unevaluatedProperties', 'propertyNames', 'prefixItems', 'allOf', 'anyOf', 'oneOf']);
const SUBSCHEMA_MAPS = new Set(['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas']);
// eachSubschema calls fn with each schema directly inside s, and that of
// `other` at the same place (undefined where other has none).
function eachSubschema(s, other, fn) {
    const o = (other !== null && typeof other === 'object' && !Array.isArray(other) ? other : {});
    for (const [k, v] of Object.entries(s)) {
        if (SUBSCHEMA.has(k)) {
            if (Array.isArray(v))
                v.forEach((x, i) => fn(x, Array.isArray(o[k]) ? o[k][i] : undefined));
            else
                fn(v, o[k]);
        }
        else if (SUBSCHEMA_MAPS.has(k) && v !== null && typeof v === 'object') {
            const om = (o[k] ?? {});
            for (const [name, x] of Object.entries(v))
                fn(x, om[name]);
        }
    }
}
// dropUnstableDefaults deletes from a each `default` that b, the same
// schema converted later, does not have with the same value.
function dropUnstableDefaults(a, b) {
    if (a === null || typeof a !== 'object' || Array.isArray(a))
        return;
    const s = a;
    if ('default' in s) {
        const o = b !== null && typeof b === 'object' ? b : {};
        if (!('default' in o) || JSON.stringify(s.default) !== JSON.stringify(o.default))
            delete s.default;
    }
    eachSubschema(s, b, dropUnstableDefaults);
}
// dropNonJsonDefaults deletes each `default` whose value JSON cannot
// carry as it is.
function dropNonJsonDefaults(a) {
    if (a === null || typeof a !== 'object' || Array.isArray(a))
        return;
    const s = a;
    if ('default' in s && (s.default === undefined || findNonJson(s.default, '') !== null))
        delete s.default;
    eachSubschema(s, undefined, (x) => dropNonJsonDefaults(x));
}
