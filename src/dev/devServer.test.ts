import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { TRANSFER_QUEUE_READS_PER_SECOND } from './devServer.ts';
import { DYNAMIC_CONFIG_FILE, dynamicConfigValues } from './temporalServer.ts';

const values = (text: string, key: string) => dynamicConfigValues(text).get(key) ?? [];

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
