// definition.ts: a createTool() tool as the JSON Definition that
// worker/register carries (docs/WORKERS.md). The functions stay in the
// worker; `functions` tells berthd which of them exist, so that it asks for
// their results at the stages they belong to.
import { SchemaConversionError, toJsonSchema } from './schema.js';
import { VIEW_STAGES } from './types.js';
// berth's background settings, and Mastra's older `retries` (its
// RetryConfig), which berthd reads into them (docs/TOOLS.md).
const BACKGROUND_KEYS = ['enabled', 'timeoutMs', 'maxRetries', 'concurrency', 'backoffMs', 'backoffMaxMs', 'onInterrupt', 'retries'];
// Mastra's background settings that belong to its agent loop: not sent
// (berth's events and jobs/wait do their work).
const MASTRA_LOOP_KEYS = ['defaultDisposition', 'waitTimeoutMs', 'onComplete', 'onFailed'];
// The members of Mastra's RetryConfig other than maxRetries, given beside
// it rather than in `retries`: read as `retries`' own, which berthd reads
// into backoffMs and backoffMaxMs (and refuses a backoffMultiplier but 2).
const RETRY_CONFIG_KEYS = ['retryDelayMs', 'maxRetryDelayMs', 'backoffMultiplier'];
// What berth calls a setting that is often given under another name.
const BERTH_NAME = {
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
function backgroundOf(id, given) {
    const b = {};
    for (const k of BACKGROUND_KEYS)
        if (given[k] !== undefined)
            b[k] = given[k];
    const retries = given.retries;
    for (const [k, v] of Object.entries(given)) {
        if (v === undefined || BACKGROUND_KEYS.includes(k) || MASTRA_LOOP_KEYS.includes(k))
            continue;
        if (RETRY_CONFIG_KEYS.includes(k)) {
            if (retries !== undefined && retries !== null && typeof retries !== 'object')
                continue; // berthd refuses it, naming it
            const r = { ...b.retries };
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
export function approvalFunction(tool) {
    if (typeof tool.needsApprovalFn === 'function')
        return tool.needsApprovalFn;
    if (typeof tool.requireApproval === 'function')
        return tool.requireApproval;
    return undefined;
}
/** transformTargets lists the targets (display, transcript) the tool transforms. */
export function transformTargets(tool) {
    const t = tool.transform;
    if (!t || typeof t !== 'object')
        return [];
    return ['display', 'transcript'].filter((k) => t[k] && typeof t[k] === 'object');
}
/**
 * toolDefinition builds the Definition of a tool. Throws a TypeError (or a
 * SchemaConversionError) naming the tool and the field when the tool
 * cannot be served: no id, no execute, a schema that cannot become JSON
 * Schema, a value JSON cannot carry.
 */
export async function toolDefinition(tool) {
    if (!tool || typeof tool !== 'object')
        throw new TypeError('berth: a tool must be an object (what createTool() returns)');
    if (typeof tool.id !== 'string' || tool.id === '')
        throw new TypeError('berth: a tool needs a non-empty string id');
    const id = tool.id;
    if (typeof tool.execute !== 'function') {
        throw new TypeError(`berth: tool ${id} has no execute function, so a worker cannot run it`);
    }
    const def = { id };
    if (tool.title !== undefined)
        def.title = str(tool.title, id, 'title');
    if (tool.description !== undefined)
        def.description = str(tool.description, id, 'description');
    const schemas = [
        ['inputSchema', 'input'],
        ['outputSchema', 'output'],
        ['suspendSchema', 'input'],
        ['resumeSchema', 'input'],
        ['requestContextSchema', 'input'],
    ];
    for (const [field, io] of schemas) {
        const v = await toJsonSchema(tool[field], `tool ${id}: ${field}`, io);
        if (v !== undefined)
            def[field] = v;
    }
    if (tool.strict !== undefined)
        def.strict = Boolean(tool.strict);
    if (tool.inputExamples !== undefined)
        def.inputExamples = json(tool.inputExamples, id, 'inputExamples');
    if (tool.providerOptions !== undefined)
        def.providerOptions = json(tool.providerOptions, id, 'providerOptions');
    if (approvalFunction(tool))
        def.requireApproval = 'function';
    else if (tool.requireApproval !== undefined)
        def.requireApproval = Boolean(tool.requireApproval);
    if (tool.approvalPolicy !== undefined)
        def.approvalPolicy = json(tool.approvalPolicy, id, 'approvalPolicy');
    if (tool.background && typeof tool.background === 'object') {
        const given = tool.background;
        const b = backgroundOf(id, given);
        // retries.retryableErrors is a function, which a definition cannot
        // hold and JSON would drop unsaid: berthd refuses it in a manifest.
        const retries = given.retries;
        if (retries && typeof retries === 'object' && retries.retryableErrors !== undefined) {
            throw new TypeError(`berth: tool ${id}: background.retries.retryableErrors is a function, which berth has no place for: ` +
                'an error with retryable: false (NonRetryableError) is not retried, any other is');
        }
        if (Object.keys(b).length > 0)
            def.background = json(b, id, 'background');
    }
    if (tool.mcp && typeof tool.mcp === 'object') {
        const m = {};
        if (tool.mcp.annotations !== undefined)
            m.annotations = tool.mcp.annotations;
        if (tool.mcp._meta !== undefined)
            m._meta = tool.mcp._meta;
        if (Object.keys(m).length > 0)
            def.mcp = json(m, id, 'mcp');
    }
    const functions = {};
    if (typeof tool.toModelOutput === 'function')
        functions.toModelOutput = true;
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
    if (typeof tool.onInputAvailable === 'function')
        functions.onInputAvailable = true;
    if (typeof tool.onOutput === 'function')
        functions.onOutput = true;
    if (Object.keys(functions).length > 0)
        def.functions = functions;
    return def;
}
function str(v, id, field) {
    if (typeof v !== 'string')
        throw new TypeError(`berth: tool ${id}: ${field} must be a string`);
    return v;
}
function json(v, id, field) {
    try {
        return JSON.parse(JSON.stringify(v));
    }
    catch (e) {
        throw new TypeError(`berth: tool ${id}: ${field} is not JSON: ${e.message}`);
    }
}
export { SchemaConversionError };
