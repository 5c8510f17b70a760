// types.ts: the protocol's objects (docs/PROTOCOL.md, docs/WORKERS.md) as
// TypeScript types. They describe what berthd sends; absent values are
// omitted on the wire, so every field that may be absent is optional.
/** The statuses a job never leaves. */
export const TERMINAL_STATUSES = ['completed', 'failed', 'timed_out', 'declined', 'cancelled', 'expired'];
export function isTerminal(status) {
    return TERMINAL_STATUSES.includes(status);
}
export const VIEW_STAGES = ['input', 'output', 'error', 'approval', 'suspend', 'resume'];
