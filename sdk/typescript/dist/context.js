// context.ts: the RequestContext a tool's execute gets. It is Mastra's own
// class when @mastra/core is installed beside the application, so that
// `instanceof RequestContext` holds and Mastra's requestContextSchema
// handling works; otherwise a class with the same methods.
import { loadOptional } from './resolve.js';
/**
 * RequestContext is a Map-like store with Mastra's method names, used when
 * @mastra/core is not installed. `set` and `get` are the typed names,
 * `setRaw` and `getRaw` the untyped ones; they act on the same values.
 */
export class RequestContext {
    registry = new Map();
    constructor(iterable) {
        if (iterable)
            for (const [k, v] of iterable)
                this.registry.set(k, v);
    }
    set(key, value) { this.registry.set(key, value); }
    setRaw(key, value) { this.registry.set(key, value); }
    get(key) { return this.registry.get(key); }
    getRaw(key) { return this.registry.get(key); }
    has(key) { return this.registry.has(key); }
    hasRaw(key) { return this.registry.has(key); }
    delete(key) { return this.registry.delete(key); }
    deleteRaw(key) { return this.registry.delete(key); }
    clear() { this.registry.clear(); }
    keys() { return this.registry.keys(); }
    values() { return this.registry.values(); }
    entries() { return this.registry.entries(); }
    size() { return this.registry.size; }
    forEach(fn) { this.registry.forEach(fn); }
    toJSON() { return Object.fromEntries(this.registry); }
    get all() { return Object.fromEntries(this.registry); }
}
/** requestContextClass resolves with Mastra's RequestContext when installed, else this module's. */
export async function requestContextClass() {
    try {
        const m = await loadOptional('@mastra/core/request-context');
        if (m?.RequestContext)
            return m.RequestContext;
    }
    catch {
        // A broken or incompatible @mastra/core leaves the compatible class.
    }
    return RequestContext;
}
