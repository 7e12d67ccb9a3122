import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export type Reply = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Calls a tool and returns its structured content, with isError folded in as `_isError`. */
export async function call(client: Client, name: string, args: Record<string, unknown> = {}): Promise<Reply> {
  const result = await client.callTool({ name, arguments: args }, undefined, { timeout: 130_000 });
  return { ...(result.structuredContent as Reply), _isError: result.isError === true };
}

/**
 * An effect counter that lives outside dossier: each launch of `counterArgs`
 * appends one line to the file (tee -a, no shell), so the file's line count is
 * the number of times the effect really happened.
 */
export function effectCounter() {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'dossier-effect-')), 'effects.log');
  return {
    file,
    launch: (extra: Record<string, unknown> = {}) => ({
      executable: '/usr/bin/tee',
      args: ['-a', file],
      stdin: 'effect\n',
      ...extra,
    }),
    count(): number {
      try {
        return readFileSync(file, 'utf8').split('\n').filter(Boolean).length;
      } catch {
        return 0;
      }
    },
  };
}

/**
 * A launch that counts itself when it starts, then runs for `seconds`: the
 * line is appended before the sleep, so a second effect would show at once.
 */
export function slowEffect(counter: ReturnType<typeof effectCounter>, seconds: number) {
  return {
    executable: '/usr/bin/sh',
    args: ['-c', `echo started >> "$COUNTER"; sleep ${seconds}; echo done`],
    env: { COUNTER: counter.file, PATH: '/usr/bin:/bin' },
  };
}
