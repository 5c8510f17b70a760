// bounded.mjs: node:test's test and hooks, each with a time bound. The
// test files import them from here instead of node:test.
//
// node:test waits for a test or a hook without limit unless it is given a
// timeout (node 20's --test-timeout bounds a whole file, and a describe's
// timeout the whole suite), so one wait that never ends stalled the suite
// until meson's 900 s timeout with no name on it. With a bound, it fails
// that test alone, naming it, and the next test runs. The bound is generous
// for a loaded machine: the slowest test, which builds dist/ with tsc, took
// 18 s at a load average of 4 on 2 cores. A test that needs more says so
// with its own timeout option.

import * as nodeTest from 'node:test';

export const TEST_TIMEOUT_MS = 120000;

export { describe } from 'node:test';

function withBound(options) {
  return { timeout: TEST_TIMEOUT_MS, ...options };
}

/** test(name, [options], fn): node:test's test, bounded unless options.timeout says otherwise. */
export function test(name, options, fn) {
  if (typeof options === 'function') return nodeTest.test(name, withBound({}), options);
  return nodeTest.test(name, withBound(options), fn);
}

export const before = (fn, options) => nodeTest.before(fn, withBound(options));
export const after = (fn, options) => nodeTest.after(fn, withBound(options));
export const beforeEach = (fn, options) => nodeTest.beforeEach(fn, withBound(options));
export const afterEach = (fn, options) => nodeTest.afterEach(fn, withBound(options));
