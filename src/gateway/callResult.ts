// What a tool call answers, before any transport shapes it.
import type { ToolError } from '../domain/errors.ts';

export type CallResult = { ok: true; value: Record<string, unknown> } | { ok: false; error: ToolError };
