// tools.fixture.mjs: real Mastra tools (createTool from @mastra/core, Zod 4
// schemas) that the worker tests serve with serve(), unchanged.

import { createTool } from '@mastra/core/tools';
import { z } from 'zod';

import { NonRetryableError } from '@berth/sdk';

// calls counts executes per tool in this process, for the scripted-peer tests.
export const calls = { echo: 0, ask: 0, block: 0 };

export const echoTool = createTool({
  id: 'sdk-echo',
  description: 'Echoes a text; its views hide the secret',
  inputSchema: z.object({ text: z.string(), secret: z.string().default('s3cret') }),
  outputSchema: z.object({ text: z.string(), secret: z.string() }),
  mcp: { annotations: { readOnlyHint: true, destructiveHint: false }, _meta: { fixture: true } },
  execute: async ({ text, secret }, ctx) => {
    calls.echo++;
    ctx.observe.log('info', 'echoing', { length: text.length });
    if (text === 'fail') throw new Error('asked to fail');
    return ctx.observe.span('echo', () => ({ text, secret }), { text });
  },
  toModelOutput: (out) => ({ type: 'text', value: `echo: ${out.text}` }),
  transform: {
    display: {
      input: ({ input }) => ({ text: input?.text }),
      output: ({ output }) => ({ text: output?.text }),
      error: () => ({ message: 'echo failed' }),
    },
    transcript: {
      output: ({ output }) => ({ said: output?.text }),
    },
  },
  onInputAvailable: ({ input }) => {
    if (input.text === 'throw-input-hook') throw new Error('onInputAvailable hook failed on purpose');
  },
  onOutput: ({ output }) => {
    if (output.text === 'throw-hook') throw new Error('onOutput hook failed on purpose');
  },
});

export const approveTool = createTool({
  id: 'sdk-approve',
  description: 'Needs approval above 100',
  inputSchema: z.object({ amount: z.number() }),
  outputSchema: z.object({ paid: z.number() }),
  requireApproval: async ({ amount }) => {
    if (amount < 0) throw new Error('approval policy failed on purpose');
    return amount > 100;
  },
  execute: async ({ amount }) => ({ paid: amount }),
});

export const askTool = createTool({
  id: 'sdk-ask',
  description: 'Asks for a name, then greets',
  inputSchema: z.object({}),
  outputSchema: z.object({ greeting: z.string() }),
  suspendSchema: z.object({ question: z.string() }),
  resumeSchema: z.object({ name: z.string().min(1) }),
  execute: async (_input, ctx) => {
    calls.ask++;
    const resumeData = ctx.agent?.resumeData;
    if (!resumeData) {
      await ctx.agent.suspend({ question: 'What is your name?' });
      return undefined;
    }
    return { greeting: `Hello, ${resumeData.name}` };
  },
});

// sdk-block runs until it is aborted (cancel, timeout, a dropped
// connection), saving its state as it goes; with {steps} it finishes
// after that many steps of 20 ms, going on from its saved state.
export const blockTool = createTool({
  id: 'sdk-block',
  description: 'Runs until aborted, or for some steps',
  inputSchema: z.object({ steps: z.number().int().optional() }),
  outputSchema: z.object({ step: z.number(), resumedFrom: z.number() }),
  background: { enabled: true, maxRetries: 2, onInterrupt: 'retry' },
  execute: async ({ steps }, ctx) => {
    calls.block++;
    const start = ctx.workflow?.state?.step ?? 0;
    let step = start;
    for (;;) {
      if (ctx.abortSignal.aborted) throw ctx.abortSignal.reason;
      if (steps !== undefined && step >= steps) return { step, resumedFrom: start };
      step++;
      await ctx.workflow.setState({ step });
      ctx.berth.progress(step, steps);
      // A step's listener goes with its step: left on the run's signal, one
      // a step made Node warn of a leak after 11 steps (MaxListeners).
      await new Promise((resolve) => {
        const next = () => {
          clearTimeout(t);
          ctx.abortSignal.removeEventListener('abort', next);
          resolve();
        };
        const t = setTimeout(next, 20);
        ctx.abortSignal.addEventListener('abort', next, { once: true });
      });
    }
  },
});

// sdk-flaky fails its first attempts and succeeds on the third; with
// {fatal: true} it fails at once, retries or not.
export const flakyTool = createTool({
  id: 'sdk-flaky',
  description: 'Fails twice, then succeeds',
  inputSchema: z.object({ fatal: z.boolean().default(false) }),
  outputSchema: z.object({ attempt: z.number() }),
  background: { maxRetries: 3, backoffMs: 10, backoffMaxMs: 20 },
  execute: async ({ fatal }, ctx) => {
    if (fatal) throw new NonRetryableError('this cannot work', { code: 'fatal' });
    if (ctx.berth.attempt < 3) throw new Error(`attempt ${ctx.berth.attempt} fails`);
    return { attempt: ctx.berth.attempt };
  },
});

// sdk-mcp tells what execute's context.mcp holds: the MCP client that
// called it, through berthd's MCP server.
export const mcpTool = createTool({
  id: 'sdk-mcp',
  description: 'Says which MCP client called it',
  inputSchema: z.object({}),
  outputSchema: z.object({ client: z.string().nullable(), meta: z.boolean() }),
  execute: async (_input, ctx) => ({
    client: ctx.mcp?.extra?.client?.name ?? null,
    meta: typeof ctx.mcp?.extra?._meta === 'object',
  }),
});

export const allTools = { echoTool, approveTool, askTool, blockTool, flakyTool, mcpTool };
