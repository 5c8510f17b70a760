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
export class RequestContext<Values extends Record<string, unknown> = Record<string, unknown>> {
  private readonly registry = new Map<string, unknown>();

  constructor(iterable?: Iterable<readonly [string, unknown]>) {
    if (iterable) for (const [k, v] of iterable) this.registry.set(k, v);
  }

  set<K extends keyof Values & string>(key: K, value: Values[K]): void { this.registry.set(key, value); }
  setRaw(key: string, value: unknown): void { this.registry.set(key, value); }
  get<K extends keyof Values & string>(key: K): Values[K] { return this.registry.get(key) as Values[K]; }
  getRaw(key: string): unknown { return this.registry.get(key); }
  has(key: string): boolean { return this.registry.has(key); }
  hasRaw(key: string): boolean { return this.registry.has(key); }
  delete(key: string): boolean { return this.registry.delete(key); }
  deleteRaw(key: string): boolean { return this.registry.delete(key); }
  clear(): void { this.registry.clear(); }
  keys(): IterableIterator<string> { return this.registry.keys(); }
  values(): IterableIterator<unknown> { return this.registry.values(); }
  entries(): IterableIterator<[string, unknown]> { return this.registry.entries(); }
  size(): number { return this.registry.size; }
  forEach(fn: (value: unknown, key: string, map: Map<string, unknown>) => void): void { this.registry.forEach(fn); }
  toJSON(): Record<string, unknown> { return Object.fromEntries(this.registry); }
  get all(): Values { return Object.fromEntries(this.registry) as Values; }
}

export type RequestContextClass = new (entries?: Iterable<readonly [string, unknown]>) => {
  get(key: string): unknown;
  set(key: string, value: unknown): void;
  entries(): IterableIterator<[string, unknown]>;
};

/** requestContextClass resolves with Mastra's RequestContext when installed, else this module's. */
export async function requestContextClass(): Promise<RequestContextClass> {
  try {
    const m = await loadOptional<{ RequestContext?: RequestContextClass }>('@mastra/core/request-context');
    if (m?.RequestContext) return m.RequestContext;
  } catch {
    // A broken or incompatible @mastra/core leaves the compatible class.
  }
  return RequestContext as unknown as RequestContextClass;
}
