import { describe, expect, it } from 'vitest';
import { errorOutcome } from './outcomes.ts';

describe('errorOutcome', () => {
  it('is a finished outcome with no Evidence and the one error shape', () => {
    expect(errorOutcome('interrupted', 'interrupted', 'lost', 'retry with a new key', { x: 1 })).toEqual({
      status: 'interrupted',
      evidenceId: null,
      summary: null,
      error: {
        code: 'interrupted',
        category: 'lifecycle',
        message: 'lost',
        retryable: false,
        remediation: 'retry with a new key',
        details: { x: 1 },
      },
    });
  });
});
