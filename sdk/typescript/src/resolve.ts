// resolve.ts: loading the optional packages (schema converters, @mastra/core)
// only when they are needed, from wherever the application has them.
//
// The SDK is often installed as a link (`npm install ./sdk/typescript`, a
// workspace, `file:`), and Node resolves a linked package's imports from its
// real path, which does not see the application's node_modules. So a
// package is looked for from the application's entry point and its working
// directory first, and from the SDK's own place last. The ESM entry of the
// package is what is loaded, so that its classes are the very ones the
// application's own `import` sees (`instanceof` holds).

import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const cache = new Map<string, Promise<unknown>>();

function bases(): string[] {
  const out: string[] = [];
  const main = process.argv[1];
  if (main) out.push(path.resolve(main));
  out.push(path.join(process.cwd(), 'index.js'));
  out.push(fileURLToPath(import.meta.url));
  return out;
}

/**
 * loadOptional imports `specifier` (a package name with an optional
 * subpath) as the application sees it; resolves with the module's
 * namespace, or undefined when no copy is installed anywhere it looks.
 */
export function loadOptional<T = unknown>(specifier: string): Promise<T | undefined> {
  let p = cache.get(specifier);
  if (!p) {
    p = (async () => {
      for (const base of bases()) {
        const url = esmEntry(base, specifier);
        if (url) return await import(url);
      }
      return undefined;
    })();
    cache.set(specifier, p);
  }
  return p as Promise<T | undefined>;
}

// esmEntry finds the file an `import` of specifier from a module at base
// would load, or undefined when the package is not installed there. Node 20
// has no import.meta.resolve with a parent, so the package is found with
// require's node_modules walk and its exports map read for the import
// conditions.
function esmEntry(base: string, specifier: string): string | undefined {
  const req = createRequire(base);
  const parts = specifier.split('/');
  const scoped = specifier.startsWith('@');
  const name = parts.slice(0, scoped ? 2 : 1).join('/');
  const sub = parts.slice(scoped ? 2 : 1).join('/');
  let pkgJson: string;
  try {
    pkgJson = req.resolve(`${name}/package.json`);
  } catch {
    // A package whose exports hide package.json: find its folder by hand.
    const found = req.resolve.paths(name)?.map((d) => path.join(d, name, 'package.json'))
      .find((f) => existsSync(f));
    if (!found) return undefined;
    pkgJson = found;
  }
  const root = path.dirname(pkgJson);
  const pkg = req(pkgJson) as { exports?: unknown; module?: string; main?: string };
  const key = sub ? `./${sub}` : '.';
  let target: string | undefined;
  const ex = pkg.exports;
  if (typeof ex === 'string' || Array.isArray(ex)) {
    target = key === '.' ? pickImport(ex) : undefined;
  } else if (ex && typeof ex === 'object') {
    const map = ex as Record<string, unknown>;
    const isSubpathMap = Object.keys(map).some((k) => k.startsWith('.'));
    target = isSubpathMap ? pickImport(map[key]) : key === '.' ? pickImport(map) : undefined;
  } else {
    target = sub ? sub : pkg.module ?? pkg.main ?? 'index.js';
  }
  if (!target) return undefined;
  return pathToFileURL(path.join(root, target)).href;
}

function pickImport(entry: unknown): string | undefined {
  if (typeof entry === 'string') return entry;
  if (Array.isArray(entry)) {
    for (const e of entry) {
      const r = pickImport(e);
      if (r) return r;
    }
    return undefined;
  }
  if (!entry || typeof entry !== 'object') return undefined;
  const o = entry as Record<string, unknown>;
  for (const cond of Object.keys(o)) {
    if (cond === 'node' || cond === 'import' || cond === 'default') {
      const r = pickImport(o[cond]);
      if (r) return r;
    }
  }
  return undefined;
}
