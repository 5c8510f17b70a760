// A file of Mastra tools, as an agent project has them: createTool() from
// @mastra/core with Zod schemas. The last three lines are all berth needs:
// they serve these tools to berthd, which runs them as durable jobs.

import { createTool } from '@mastra/core/tools'
import { z } from 'zod'
import { writeFile } from 'node:fs/promises'

export const weatherTool = createTool({
  id: 'get-weather',
  description: 'Get the current weather for a location',
  inputSchema: z.object({
    location: z.string(),
    unit: z.enum(['C', 'F']).default('C'),
  }),
  outputSchema: z.object({
    location: z.string(),
    temperature: z.number(),
    unit: z.enum(['C', 'F']),
    conditions: z.string(),
  }),
  execute: async ({ location, unit }, { observe }) => {
    observe.log('info', 'looking up the weather', { location })
    const celsius = 21
    return {
      location,
      temperature: unit === 'C' ? celsius : Math.round(celsius * 1.8 + 32),
      unit,
      conditions: 'sunny',
    }
  },
  toModelOutput: (output) => ({
    type: 'text',
    value: `${output.location}: ${output.temperature}°${output.unit} and ${output.conditions}`,
  }),
})

export const saveNoteTool = createTool({
  id: 'save-note',
  description: 'Writes a note to a file, once a person approved it',
  inputSchema: z.object({ path: z.string(), text: z.string() }),
  outputSchema: z.object({ path: z.string(), bytes: z.number() }),
  requireApproval: true,
  mcp: { annotations: { destructiveHint: true, readOnlyHint: false } },
  execute: async ({ path, text }) => {
    await writeFile(path, text)
    return { path, bytes: Buffer.byteLength(text) }
  },
  transform: {
    display: {
      input: ({ input }) => ({ path: input?.path, length: input?.text.length }),
    },
  },
})

export const confirmPlanTool = createTool({
  id: 'confirm-plan',
  description: 'Proposes a plan and waits until a person answers',
  inputSchema: z.object({ plan: z.string() }),
  outputSchema: z.object({ plan: z.string(), approvedBy: z.string() }),
  suspendSchema: z.object({ question: z.string() }),
  resumeSchema: z.object({ approvedBy: z.string().min(1) }),
  execute: async ({ plan }, { agent }) => {
    if (!agent?.resumeData) {
      return agent?.suspend({ question: `Who approves this plan? ${plan}` })
    }
    return { plan, approvedBy: agent.resumeData.approvedBy }
  },
})

import { serve } from '@berth/sdk'
const worker = await serve({ tools: { weatherTool, saveNoteTool, confirmPlanTool } })
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => worker.close())
