import { describe, expect, it } from 'vitest';
import { idempotencyKeySchema } from '../tools/contract.ts';
import {
  analysisWorkflowId,
  bodyDigest,
  databaseWorkflowId,
  differingFields,
  launchWorkflowId,
  workflowOwner,
} from './keys.ts';

describe('idempotency keys', () => {
  it('accepts 1-128 characters of A-Z a-z 0-9 . _ : - and nothing else', () => {
    expect(idempotencyKeySchema.safeParse('capture-true-1').success).toBe(true);
    expect(idempotencyKeySchema.safeParse('a.b_c:d-E9').success).toBe(true);
    expect(idempotencyKeySchema.safeParse('x'.repeat(128)).success).toBe(true);
    for (const bad of ['', 'x'.repeat(129), 'with space', 'slash/inside', 'ünïcode', undefined, 42]) {
      expect(idempotencyKeySchema.safeParse(bad).success).toBe(false);
    }
  });
});

describe('bodyDigest', () => {
  it('ignores the key, wait_ms and detail (they only steer the call and shape its reply) but no other field', () => {
    const base = bodyDigest('capture_process_scenario', { executable: '/usr/bin/true', args: [] });
    expect(
      bodyDigest('capture_process_scenario', {
        args: [],
        executable: '/usr/bin/true',
        idempotency_key: 'k',
        wait_ms: 5,
        detail: 'summary',
      }),
    ).toBe(base);
    expect(bodyDigest('capture_process_scenario', { executable: '/usr/bin/true', args: ['x'] })).not.toBe(
      base,
    );
    expect(bodyDigest('extract_artifact', { executable: '/usr/bin/true', args: [] })).not.toBe(base);
  });
});

describe('launchWorkflowId', () => {
  it('is readable and derived from team, principal and key', () => {
    expect(launchWorkflowId('re-team', 'alice', 'capture-true-1')).toBe(
      'launch/re-team/alice/capture-true-1',
    );
  });

  it('refuses parts that could make two launches share an ID', () => {
    expect(() => launchWorkflowId('re/team', 'alice', 'k')).toThrow(/team/);
    expect(() => launchWorkflowId('team', 'Alice', 'k')).toThrow(/principal/);
    expect(() => launchWorkflowId('team', 'alice', 'a/b')).toThrow(/key/);
  });
});

describe('workflowOwner', () => {
  it('reads the team (and a launch’s principal) back from every ID dossier makes', () => {
    expect(workflowOwner(launchWorkflowId('re-team', 'alice', 'k-1'))).toEqual({
      kind: 'launch',
      team: 're-team',
      principal: 'alice',
    });
    expect(workflowOwner(analysisWorkflowId('re-team', 'abc'))).toEqual({
      kind: 'analysis',
      team: 're-team',
    });
    expect(workflowOwner(databaseWorkflowId('re-team', 'sha256:ab', 'fast', 'angr-9'))).toEqual({
      kind: 'analysis-db',
      team: 're-team',
    });
  });

  it('names no owner for an ID dossier does not make', () => {
    for (const id of [
      '',
      'launch',
      'launch/re-team',
      'launch/Re Team/alice/k',
      'other/re-team/x',
      '/re-team/x',
    ])
      expect(workflowOwner(id)).toBeUndefined();
  });
});

describe('differingFields', () => {
  it('names the top-level fields whose values differ or that only one body has, never the reply-shaping ones', () => {
    const first = { executable: '/usr/bin/tee', args: ['a'], env: { A: '1' }, detail: 'complete' };
    expect(differingFields(first, { ...first })).toEqual([]);
    expect(differingFields(first, { ...first, args: ['b'], detail: 'summary', wait_ms: 9 })).toEqual([
      'args',
    ]);
    // Object key order is not a difference (canonical JSON); a nested change names its top-level field.
    expect(differingFields(first, { env: { A: '1' }, args: ['a'], executable: '/usr/bin/tee' })).toEqual([]);
    expect(differingFields(first, { ...first, env: { A: '2' } })).toEqual(['env']);
    expect(differingFields(first, { ...first, stdin: 'x', investigation: undefined })).toEqual(['stdin']);
    expect(differingFields({ ...first, timeout_ms: 5 }, { ...first, args: [] })).toEqual([
      'args',
      'timeout_ms',
    ]);
  });
});
