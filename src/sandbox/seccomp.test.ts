// The key-call filter, run on a small classic-BPF interpreter: what it answers
// for each architecture's numbers (the native calls are proved in sandbox.test.ts).
import { describe, expect, it } from 'vitest';
import { keyCallFilter, keyCallFilterBytes } from './seccomp.ts';

const ALLOW = 0x7fff0000;
const EPERM = 0x00050001;

function run(program: [number, number, number, number][], arch: number, nr: number): number {
  let a = 0;
  for (let pc = 0; pc < program.length; pc++) {
    const [code, jt, jf, k] = program[pc]!;
    if (code === 0x20) a = k === 4 ? arch : k === 0 ? nr : NaN;
    else if (code === 0x54) a = (a & k) >>> 0;
    else if (code === 0x15) pc += a === k ? jt : jf;
    else if (code === 0x06) return k;
    else throw new Error(`unexpected opcode ${code}`);
  }
  throw new Error('the filter fell off its end');
}

describe('the key-call filter', () => {
  it('refuses add_key, request_key and keyctl on x86_64, x32 and i386, and allows the rest', () => {
    const f = keyCallFilter('x64')!;
    for (const nr of [248, 249, 250, 0x40000000 + 248, 0x40000000 + 250])
      expect(run(f, 0xc000003e, nr)).toBe(EPERM);
    for (const nr of [286, 287, 288]) expect(run(f, 0x40000003, nr)).toBe(EPERM);
    for (const nr of [0, 1, 59, 247, 251, 0x40000000 + 1]) expect(run(f, 0xc000003e, nr)).toBe(ALLOW);
    // i386's 248-250 are other calls; x86_64's 286-288 too.
    for (const nr of [248, 249, 250]) expect(run(f, 0x40000003, nr)).toBe(ALLOW);
    for (const nr of [286, 287, 288]) expect(run(f, 0xc000003e, nr)).toBe(ALLOW);
  });

  it('has aarch64 and arm numbers, and no filter for an architecture it does not know', () => {
    const f = keyCallFilter('arm64')!;
    for (const nr of [217, 218, 219]) expect(run(f, 0xc00000b7, nr)).toBe(EPERM);
    for (const nr of [309, 310, 311]) expect(run(f, 0x40000028, nr)).toBe(EPERM);
    expect(run(f, 0xc00000b7, 220)).toBe(ALLOW);
    expect(keyCallFilter('riscv64')).toBeUndefined();
    expect(keyCallFilterBytes('x64')!.length).toBe(keyCallFilter('x64')!.length * 8);
  });
});
