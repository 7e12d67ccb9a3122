// What a tool call answers, before any transport shapes it, and the tools/call
// result it becomes: the one shape both MCP eras send, so a reply can be
// measured as it will be on the wire.
import type { ToolError } from '../domain/errors.ts';

export type CallResult = { ok: true; value: Record<string, unknown> } | { ok: false; error: ToolError };

/**
 * A gateway answer as a tools/call result: structured content, and the same
 * JSON as text for clients that read only text content (MCP asks for it).
 */
export function toCallToolResult(result: CallResult) {
  const structured = result.ok ? result.value : { error: result.error };
  return {
    content: [{ type: 'text' as const, text: JSON.stringify(structured) }],
    structuredContent: structured,
    // A failed launch is still a launch reply, but the tool could not do its job.
    isError: !result.ok || result.value.status === 'failed',
  };
}

/** Bytes a successful reply takes on the wire as a whole tools/call result (text and structured content). */
export const wireBytes = (value: Record<string, unknown>) =>
  Buffer.byteLength(JSON.stringify(toCallToolResult({ ok: true, value })));
