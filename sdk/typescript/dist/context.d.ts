/**
 * RequestContext is a Map-like store with Mastra's method names, used when
 * @mastra/core is not installed. `set` and `get` are the typed names,
 * `setRaw` and `getRaw` the untyped ones; they act on the same values.
 */
export declare class RequestContext<Values extends Record<string, unknown> = Record<string, unknown>> {
    private readonly registry;
    constructor(iterable?: Iterable<readonly [string, unknown]>);
    set<K extends keyof Values & string>(key: K, value: Values[K]): void;
    setRaw(key: string, value: unknown): void;
    get<K extends keyof Values & string>(key: K): Values[K];
    getRaw(key: string): unknown;
    has(key: string): boolean;
    hasRaw(key: string): boolean;
    delete(key: string): boolean;
    deleteRaw(key: string): boolean;
    clear(): void;
    keys(): IterableIterator<string>;
    values(): IterableIterator<unknown>;
    entries(): IterableIterator<[string, unknown]>;
    size(): number;
    forEach(fn: (value: unknown, key: string, map: Map<string, unknown>) => void): void;
    toJSON(): Record<string, unknown>;
    get all(): Values;
}
export type RequestContextClass = new (entries?: Iterable<readonly [string, unknown]>) => {
    get(key: string): unknown;
    set(key: string, value: unknown): void;
    entries(): IterableIterator<[string, unknown]>;
};
/** requestContextClass resolves with Mastra's RequestContext when installed, else this module's. */
export declare function requestContextClass(): Promise<RequestContextClass>;
