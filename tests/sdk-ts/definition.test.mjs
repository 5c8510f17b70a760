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

import { SDK_VERSION, SchemaConversionError, connect, toJsonSchema, toolDefinition } from '@berth/sdk';
import { Daemon } from './harness.mjs';
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

  test('a_default_computed_by_a_function__is_left_out__and_a_constant_one_kept', async () => {
    // berthd fills every default it is given into every job, so one a
    // function computes (an id, a time) would be the same for every job,
    // and differ between two worker processes of the same file. It is left
    // out, and the tool's own parse fills a fresh one per run.
    for (const zz of [z, z3]) {
      const s = zz.object({
        note: zz.string(),
        at: zz.string().default(() => new Date().toISOString()),
        orderId: zz.string().default(() => crypto.randomUUID()),
        tags: zz.array(zz.string()).default(() => []),
        unit: zz.enum(['C', 'F']).default('C'),
        opts: zz.object({ deep: zz.boolean() }).default({ deep: true }),
      });
      const a = await toJsonSchema(s);
      const b = await toJsonSchema(s);
      assert.deepEqual(a, b, 'two conversions of one schema are the same definition');
      assert.equal(a.properties.at.default, undefined, JSON.stringify(a.properties.at));
      assert.equal(a.properties.orderId.default, undefined, JSON.stringify(a.properties.orderId));
      assert.equal(a.properties.unit.default, 'C');
      assert.deepEqual(a.properties.opts.default, { deep: true });
      assert.ok(!(a.required ?? []).includes('orderId'), 'a field with a default stays optional');
    }
    // A default that is not a JSON value (a Date) would be filled as its
    // text, which the tool's own parse then refuses: it is left out too.
    const d3 = await toJsonSchema(z3.object({ since: z3.date().default(new Date(0)) }));
    assert.equal(d3.properties.since.default, undefined);
    const d4 = await toJsonSchema(z.object({ since: z.date().default(new Date(0)) }));
    assert.equal(d4.properties.since.default, undefined);
  });

  test('a_zod_schema_with_types_without_a_json_form__is_converted_with_them_unconstrained', async () => {
    // Zod >= 4.2 goes through ~standard.jsonSchema, which threw for them:
    // serve() refused the whole worker.
    const input = z.object({ since: z.coerce.date(), n: z.bigint().optional(), m: z.map(z.string(), z.number()).optional(), c: z.custom((x) => x !== null) });
    const s = await toJsonSchema(input, 'tool t: inputSchema', 'input');
    assert.deepEqual(s.required.sort(), ['c', 'since']);
    assert.equal(typeof s.properties.since, 'object');
    const out = await toJsonSchema(z.object({ events: z.array(z.object({ title: z.string(), start: z.date() })) }), 'tool t: outputSchema', 'output');
    assert.equal(out.properties.events.items.properties.title.type, 'string');
    const tool = createTool({ id: 'list-events', description: 'd', inputSchema: input, outputSchema: z.object({ start: z.date() }), execute: async () => ({ start: new Date() }) });
    const d = await toolDefinition(tool);
    assert.ok(d.inputSchema && d.outputSchema);
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

  test('background_members_berth_does_not_know__are_mapped_to_berths_or_refused_naming_berths_field', async () => {
    const base = { description: 'd', execute: async () => ({}) };
    // Mastra's RetryConfig members given beside maxRetries are read as in
    // background.retries, which berthd reads into backoffMs and backoffMaxMs.
    const mapped = await toolDefinition({ ...base, id: 'rc', background: { enabled: true, maxRetries: 1, retryDelayMs: 200, maxRetryDelayMs: 800 } });
    assert.deepEqual(mapped.background, { enabled: true, maxRetries: 1, retries: { retryDelayMs: 200, maxRetryDelayMs: 800 } });
    const refused = [
      ['retryDelay', 200, /background\.retryDelay .*backoffMs/],
      ['maxRetry', 3, /background\.maxRetry .*maxRetries/],
      ['timeout', 1000, /background\.timeout .*timeoutMs/],
      ['colour', 'blue', /background\.colour .*enabled, timeoutMs, maxRetries/],
    ];
    for (const [k, v, re] of refused) {
      await assert.rejects(toolDefinition({ ...base, id: 'bad', background: { enabled: true, [k]: v } }),
        (e) => e instanceof TypeError && /tool bad: /.test(e.message) && re.test(e.message), `background.${k}`);
    }
    // A member given both ways must agree.
    await assert.rejects(toolDefinition({ ...base, id: 'both', background: { retryDelayMs: 200, retries: { retryDelayMs: 300 } } }),
      /tool both: background\.retryDelayMs .*background\.retries\.retryDelayMs/);
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

  test('the_job_type__takes_every_member_of_the_jobs_berthd_returns_in_strict_mode', async () => {
    // The jobs of a real berthd, approved with a note and declined, checked
    // as object literals against Job: a member the type lacks, or one typed
    // otherwise (decidedBy was a string), is a type error.
    const d = new Daemon();
    await d.start();
    let approved;
    let declined;
    try {
      const c = await connect({ socket: d.socket });
      try {
        const a = await c.submit('write-note', { path: `${d.dir}/n1`, text: 'x' }, { runId: 'r1', toolCallId: 't1', metadata: { m: 1 } });
        await c.approve(a.id, { note: 'fine' });
        approved = await c.wait(a.id, { until: ['completed'] });
        const b = await c.submit('write-note', { path: `${d.dir}/n2`, text: 'x' });
        declined = await c.decline(b.id, { reason: 'no' });
      } finally {
        c.close();
      }
    } finally {
      await d.cleanup();
    }
    assert.equal(approved.status, 'completed');
    assert.equal(typeof approved.approval.decidedBy, 'object');
    mkdirSync('typecheck', { recursive: true });
    writeFileSync('typecheck/job.ts', [
      "import type { Job } from '@berth/sdk';",
      `export const approved: Job = ${JSON.stringify(approved)};`,
      `export const declined: Job = ${JSON.stringify(declined)};`,
      'export const who: string | undefined = approved.approval?.decidedBy?.name;',
      "// @ts-expect-error: decidedBy is {name, via}, not a string",
      'export const wrong: string | undefined = approved.approval?.decidedBy;',
      '',
    ].join('\n'));
    typecheckStrict('typecheck', 'job.ts');
  });

  test('SDK_VERSION__is_the_package_version', () => {
    const pkg = JSON.parse(readFileSync(path.join(process.env.BERTH_SDK_DIR, 'package.json'), 'utf8'));
    assert.equal(SDK_VERSION, pkg.version);
    assert.equal(pkg.name, '@berth/sdk');
  });
});
