// definition.test.mjs: tools become the Definitions of worker/register
// (docs/WORKERS.md), whatever their schemas were written with; and the
// package is what its sources build, with the types it promises.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, test } from './bounded.mjs';

import { createTool } from '@mastra/core/tools';
import { toStandardJsonSchema } from '@valibot/to-json-schema';
import { type } from 'arktype';
import * as v from 'valibot';
import { z } from 'zod';
import { z as z3 } from 'zod3';

import { SDK_VERSION, SchemaConversionError, toJsonSchema, toolDefinition } from '@berth/sdk';
import { echoTool, approveTool, askTool, blockTool } from './tools.fixture.mjs';

const location = { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] };

// strip drops what converters add beside the schema proper.
function strip(s) {
  const { $schema, additionalProperties, ...rest } = s;
  return rest;
}

describe('toJsonSchema', () => {
  test('a_zod_4_schema__becomes_its_json_schema_with_defaults', async () => {
    const s = await toJsonSchema(z.object({ location: z.string(), unit: z.enum(['C', 'F']).default('C') }));
    assert.deepEqual(s.properties.unit, { default: 'C', type: 'string', enum: ['C', 'F'] });
    assert.deepEqual(s.required, ['location']);
  });

  test('a_zod_3_schema__goes_through_zod_to_json_schema', async () => {
    const s = await toJsonSchema(z3.object({ location: z3.string() }));
    assert.deepEqual(strip(s), location);
  });

  test('a_raw_valibot_schema__goes_through_valibot_to_json_schema', async () => {
    assert.deepEqual(strip(await toJsonSchema(v.object({ location: v.string() }))), location);
  });

  test('a_valibot_standard_json_schema__is_read_through_its_standard_props', async () => {
    assert.deepEqual(strip(await toJsonSchema(toStandardJsonSchema(v.object({ location: v.string() })))), location);
  });

  test('an_arktype_type__becomes_its_json_schema', async () => {
    assert.deepEqual(strip(await toJsonSchema(type({ location: 'string' }))), location);
  });

  test('a_plain_json_schema_and_a_boolean__pass_through', async () => {
    assert.deepEqual(await toJsonSchema(location), location);
    assert.equal(await toJsonSchema(true), true);
    assert.equal(await toJsonSchema(undefined), undefined);
  });

  test('a_schema_json_cannot_carry__is_refused_naming_where', async () => {
    await assert.rejects(toJsonSchema({ type: 'object', properties: { a: { minimum: () => 1 } } }, 'tool x: inputSchema'),
      (e) => e instanceof SchemaConversionError && /tool x: inputSchema/.test(e.message) && /\/properties\/a\/minimum/.test(e.message));
    await assert.rejects(toJsonSchema(() => 1, 'here'), /here: a function is not a schema/);
    await assert.rejects(toJsonSchema({ '~standard': { vendor: 'acme', validate: () => ({}) } }, 'here'), /acme schema is a Standard Schema without ~standard.jsonSchema/);
  });
});

describe('toolDefinition', () => {
  test('a_mastra_tool__becomes_a_definition_with_its_schemas_and_functions', async () => {
    const d = await toolDefinition(echoTool);
    assert.equal(d.id, 'sdk-echo');
    assert.equal(d.inputSchema.properties.secret.default, 's3cret');
    assert.deepEqual(d.mcp, { annotations: { readOnlyHint: true, destructiveHint: false }, _meta: { fixture: true } });
    // Each target lists the stages it has functions for; berthd shows
    // the placeholder for the others (docs/WORKERS.md).
    assert.deepEqual(d.functions, {
      toModelOutput: true,
      transform: { display: ['input', 'output', 'error'], transcript: ['output'] },
      onInputAvailable: true,
      onOutput: true,
    });
    assert.equal(d.requireApproval, false);
    assert.equal(JSON.stringify(d), JSON.stringify(JSON.parse(JSON.stringify(d))));
  });

  test('requireApproval_as_a_function__is_declared_as_function', async () => {
    assert.equal((await toolDefinition(approveTool)).requireApproval, 'function');
  });

  test('suspend_and_resume_schemas_and_background_settings__are_kept__mastras_own_background_settings_dropped', async () => {
    const ask = await toolDefinition(askTool);
    assert.deepEqual(ask.resumeSchema.required, ['name']);
    assert.deepEqual(ask.suspendSchema.required, ['question']);
    const t = createTool({
      id: 'bg', description: 'd', execute: async () => ({}),
      background: { enabled: true, timeoutMs: 5000, maxRetries: 1, waitTimeoutMs: 10, onComplete: () => {} },
    });
    assert.deepEqual((await toolDefinition(t)).background, { enabled: true, timeoutMs: 5000, maxRetries: 1 });
    assert.deepEqual((await toolDefinition(blockTool)).background, { enabled: true, maxRetries: 2, onInterrupt: 'retry' });
  });

  test('background_retries__mastras_older_retry_config__is_sent_for_berthd_to_read__and_a_retryableErrors_function_is_refused', async () => {
    const t = { id: 'older', description: 'd', execute: async () => ({}), background: { retries: { maxRetries: 3, retryDelayMs: 100 } } };
    assert.deepEqual((await toolDefinition(t)).background, { retries: { maxRetries: 3, retryDelayMs: 100 } });
    const f = { ...t, background: { retries: { maxRetries: 3, retryableErrors: () => true } } };
    await assert.rejects(toolDefinition(f), (e) => e instanceof TypeError && /tool older: background\.retries\.retryableErrors is a function/.test(e.message));
  });

  test('a_plain_object_tool_with_zod_3_and_valibot_schemas__is_served_like_a_mastra_one', async () => {
    const d = await toolDefinition({
      id: 'plain', description: 'd',
      inputSchema: z3.object({ location: z3.string() }),
      outputSchema: v.object({ location: v.string() }),
      requireApproval: true,
      execute: async (i) => i,
    });
    assert.deepEqual(strip(d.inputSchema), location);
    assert.deepEqual(strip(d.outputSchema), location);
    assert.equal(d.requireApproval, true);
    assert.equal(d.functions, undefined);
  });

  test('a_tool_without_execute_or_id__is_refused_naming_it', async () => {
    await assert.rejects(toolDefinition({ id: 'noexec', description: 'd' }), /tool noexec has no execute function/);
    await assert.rejects(toolDefinition({ description: 'd', execute: () => 1 }), /non-empty string id/);
  });
});

// typecheckStrict type-checks dir/file against the SDK's types with tsc in
// strict mode (a tsconfig.json of its own in dir), failing on any error.
function typecheckStrict(dir, file) {
  writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: {
      target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true,
      noEmit: true, skipLibCheck: true, types: ['node'],
    },
    files: [file],
  }));
  execFileSync(process.execPath, [path.resolve('node_modules/typescript/bin/tsc'), '-p', path.join(dir, 'tsconfig.json')], { stdio: 'inherit' });
}

describe('the package', () => {
  test('dist__is_what_the_sources_build', () => {
    const sdk = process.env.BERTH_SDK_DIR;
    assert.ok(sdk, 'BERTH_SDK_DIR is set by run.sh');
    const out = mkdtempSync(path.join(os.tmpdir(), 'berth-sdk-dist-'));
    try {
      execFileSync(process.execPath, [path.resolve('node_modules/typescript/bin/tsc'), '-p', 'sdk-src/tsconfig.json', '--outDir', out], { stdio: 'inherit' });
      const built = readdirSync(out).sort();
      assert.deepEqual(readdirSync(path.join(sdk, 'dist')).sort(), built, 'dist/ has exactly the built files');
      for (const f of built) {
        assert.equal(readFileSync(path.join(sdk, 'dist', f), 'utf8'), readFileSync(path.join(out, f), 'utf8'),
          `dist/${f} is stale: run npm run build in sdk/typescript`);
      }
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  test('the_mastra_example__typechecks_against_the_sdks_types_in_strict_mode', () => {
    typecheckStrict('example', 'tools.ts');
  });

  test('events_and_poll_types__take_the_event_type_names_and_nothing_else_in_strict_mode', () => {
    mkdirSync('typecheck', { recursive: true });
    writeFileSync('typecheck/events.ts', [
      "import type { Client, EventType, PollOptions } from '@berth/sdk';",
      'export function streams(c: Client) {',
      "  const ends: readonly EventType[] = ['completed', 'failed', 'timed_out', 'declined', 'cancelled', 'expired'];",
      '  c.events({ since: 0, types: ends });',
      "  c.events({ types: 'cancelled', progress: true });",
      "  c.events({ types: ['approval_requested', 'suspended'], jobId: 'x' });",
      "  // @ts-expect-error: not an event type",
      "  c.events({ types: ['finished'] });",
      "  // @ts-expect-error: progress is not an event type either",
      "  c.events({ types: 'progress' });",
      '}',
      'export async function polls(c: Client): Promise<number> {',
      "  const opts: PollOptions = { since: 0, types: ['failed', 'timed_out'], limit: 10 };",
      '  const page = await c.poll(opts);',
      "  await c.poll({ since: page.next, jobId: 'x', types: 'completed', waitMs: 1000 });",
      "  // @ts-expect-error: not an event type",
      "  await c.poll({ types: ['finished'] });",
      "  // @ts-expect-error: progress is not an event type either",
      "  await c.poll({ types: 'progress' });",
      '  return page.next;',
      '}',
      '',
    ].join('\n'));
    typecheckStrict('typecheck', 'events.ts');
  });

  test('SDK_VERSION__is_the_package_version', () => {
    const pkg = JSON.parse(readFileSync(path.join(process.env.BERTH_SDK_DIR, 'package.json'), 'utf8'));
    assert.equal(SDK_VERSION, pkg.version);
    assert.equal(pkg.name, '@berth/sdk');
  });
});
