// The seccomp filter every sandboxed program runs under (bwrap --seccomp):
// it refuses the kernel's key management calls (add_key, request_key,
// keyctl) with EPERM and allows everything else. Keyrings belong to a real
// uid, not to a namespace: a program could leave keys (its uid's persistent
// keyring outlives it by days) for the next launch that is leased the same
// uid, another team's, and fill that uid's key quota. Container runtimes
// refuse the same three calls by default. Classic BPF, built here: the
// architecture is checked first, so a 32-bit or x32 call cannot slip past
// under another number.
import { arch } from 'node:process';

// BPF opcodes (linux/filter.h) and seccomp's return values (linux/seccomp.h).
const LD_W_ABS = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ_K = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const AND_K = 0x54; // BPF_ALU | BPF_AND | BPF_K
const RET_K = 0x06; // BPF_RET | BPF_K
const RET_ALLOW = 0x7fff0000;
const RET_EPERM = 0x00050000 | 1; // SECCOMP_RET_ERRNO | EPERM
const X32_BIT = 0x40000000;

/** seccomp_data offsets: the syscall number, then the audit architecture. */
const NR = 0;
const ARCH = 4;

/** The key calls' numbers per audit architecture this host's programs may use. */
const KEY_CALLS: Record<string, { arch: number; calls: number[]; x32?: boolean }[]> = {
  x64: [
    { arch: 0xc000003e, calls: [248, 249, 250], x32: true }, // x86_64 (and x32, its numbers | X32_BIT)
    { arch: 0x40000003, calls: [286, 287, 288] }, // i386
  ],
  arm64: [
    { arch: 0xc00000b7, calls: [217, 218, 219] }, // aarch64
    { arch: 0x40000028, calls: [309, 310, 311] }, // arm (EABI)
  ],
};

type Insn = [code: number, jt: number, jf: number, k: number];

/** The filter's instructions (code, jt, jf, k) for this host, or undefined on an architecture not listed. */
export function keyCallFilter(host: string = arch): Insn[] | undefined {
  const arches = KEY_CALLS[host];
  if (!arches) return undefined;
  const program: Insn[] = [[LD_W_ABS, 0, 0, ARCH]];
  for (const a of arches) {
    const block: Insn[] = [[LD_W_ABS, 0, 0, NR]];
    if (a.x32) block.push([AND_K, 0, 0, ~X32_BIT >>> 0]);
    a.calls.forEach((call, i) => {
      // Matched: jump to the block's deny (past the rest of the calls and the allow).
      block.push([JEQ_K, a.calls.length - i, 0, call]);
    });
    block.push([RET_K, 0, 0, RET_ALLOW], [RET_K, 0, 0, RET_EPERM]);
    // A jump leaves the accumulator as it was: the next block's test reads the architecture still.
    // Not this architecture: past this block to the next one's test.
    program.push([JEQ_K, 0, block.length, a.arch], ...block);
  }
  program.push([RET_K, 0, 0, RET_ALLOW]);
  return program;
}

/** The filter as the kernel's struct sock_filter array (8 bytes each, host byte order), for bwrap --seccomp. */
export function keyCallFilterBytes(host: string = arch): Buffer | undefined {
  const program = keyCallFilter(host);
  if (!program) return undefined;
  const out = Buffer.alloc(program.length * 8);
  program.forEach(([code, jt, jf, k], i) => {
    out.writeUInt16LE(code, i * 8);
    out.writeUInt8(jt, i * 8 + 2);
    out.writeUInt8(jf, i * 8 + 3);
    out.writeUInt32LE(k >>> 0, i * 8 + 4);
  });
  return out;
}
