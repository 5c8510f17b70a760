/**
 * loadOptional imports `specifier` (a package name with an optional
 * subpath) as the application sees it; resolves with the module's
 * namespace, or undefined when no copy is installed anywhere it looks.
 */
export declare function loadOptional<T = unknown>(specifier: string): Promise<T | undefined>;
