import { describe, expect, it } from 'vitest';
import { meant } from './meant.ts';

describe('meant', () => {
  it('names the field an unknown argument looks like, by containment or two edits', () => {
    expect(meant(['device_id'], ['device', 'command'])).toBe(' (did you mean "device_id" → "device"?)');
    expect(meant(['limt'], ['cursor', 'limit'])).toBe(' (did you mean "limt" → "limit"?)');
    expect(meant(['timeout'], ['timeout_s'])).toBe(' (did you mean "timeout" → "timeout_s"?)');
    expect(meant(['Artifact'], ['artifact'])).toBe(' (did you mean "Artifact" → "artifact"?)');
  });

  it('says nothing where nothing is alike, and never matches on a short name inside a long one', () => {
    expect(meant(['zzz'], ['artifact', 'limit'])).toBe('');
    expect(meant(['stdin_file'], ['in'])).toBe('');
    // Thousands of unknown keys cost no more than a handful: only the first few are looked at.
    const many = [...Array.from({ length: 100_000 }, (_, i) => `key${i}`), 'limt'];
    expect(meant(many, ['cursor', 'limit'])).toBe('');
    expect(meant(['zzz', 'limt'], ['cursor', 'limit'])).toBe(' (did you mean "limt" → "limit"?)');
  });
});
