import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { TRANSFER_QUEUE_READS_PER_SECOND } from './devServer.ts';
import { DYNAMIC_CONFIG_FILE } from './temporalServer.ts';

/** The values of one key of a Temporal dynamic config file (`key:` then `  - value: …` lines). */
function values(text: string, key: string): string[] {
  const lines = text.split('\n');
  const at = lines.indexOf(`${key}:`);
  if (at === -1) return [];
  const found: string[] = [];
  for (const line of lines.slice(at + 1)) {
    const value = /^\s+- value: (.+)$/.exec(line);
    if (!value) break;
    found.push(value[1]!.trim());
  }
  return found;
}

describe("the cluster's dynamic config and the dev server's", () => {
  it('read the transfer queue equally often, well above Temporal’s default of 20', () => {
    const text = readFileSync(DYNAMIC_CONFIG_FILE, 'utf8');
    expect(values(text, 'history.transferProcessorMaxPollRPS')).toEqual([
      String(TRANSFER_QUEUE_READS_PER_SECOND),
    ]);
    expect(TRANSFER_QUEUE_READS_PER_SECOND).toBeGreaterThanOrEqual(100);
    for (const key of ['system.enableEagerWorkflowStart', 'system.enableActivityEagerExecution'])
      expect(values(text, key), key).toEqual(['true']);
  });
});
