// A Sandbox for tests that start real programs directly, with a uid range and
// lease folder of their own (so test files running at once never share a uid).
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Sandbox } from '../../src/sandbox/sandbox.ts';

export function testSandbox(firstUid: number): Sandbox {
  return new Sandbox({
    readOnlyPaths: [],
    uids: { first: firstUid, last: firstUid + 99 },
    leaseDir: mkdtempSync(path.join(os.tmpdir(), 'dossier-leases-')),
    allowNetwork: false,
    allowUnsandboxed: false,
    tmpBytes: 16 * 1024 * 1024,
  });
}
