// A Sandbox for tests that start real programs directly, with a uid range and
// lease folder of their own (so test files running at once never share a uid).
import { Sandbox } from '../../src/sandbox/sandbox.ts';
import { scratchDir } from './scratch.ts';

/** Call it while tests are collected (its lease folder goes when they are done). */
export function testSandbox(firstUid: number): Sandbox {
  return new Sandbox({
    readOnlyPaths: [],
    uids: { first: firstUid, last: firstUid + 99 },
    leaseDir: scratchDir('leases'),
    allowNetwork: false,
    allowUnsandboxed: false,
    tmpBytes: 16 * 1024 * 1024,
  });
}
