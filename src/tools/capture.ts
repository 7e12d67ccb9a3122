// capture_process_scenario: launch one process without a shell and retain what
// it did. The process may be hostile: every bound has a default and a ceiling.
import { z } from 'zod';
import { ARTIFACT_DIGEST } from '../domain/types.ts';
import { bounded, defineTool, investigationSchema, detailSchema } from './contract.ts';

export const CAPTURE_LIMITS = {
  timeout_ms: { default: 30_000, min: 100, max: 300_000, unit: 'ms' },
  max_output_bytes: { default: 1024 * 1024, max: 16 * 1024 * 1024, unit: 'bytes per stream' },
  args: { default: 0, max: 256, unit: 'arguments' },
  arg_bytes: { default: 0, max: 4_096, unit: 'bytes per argument' },
  env_vars: { default: 0, max: 64, unit: 'variables' },
  /**
   * Within a request body of DOSSIER_MAX_REQUEST_BYTES' default (1 MiB) as printable text, with room
   * for its JSON (a control character takes six bytes there).
   */
  stdin_bytes: { default: 0, max: 512 * 1024, unit: 'bytes' },
  max_events: { default: 100_000, max: 1_000_000, unit: 'syscall events' },
  max_files: { default: 10_000, max: 100_000, unit: 'workspace entries' },
  address_space_mb: { default: 4_096, min: 16, max: 65_536, unit: 'MiB of virtual memory (RLIMIT_AS)' },
  open_files: { default: 1_024, min: 16, max: 65_536, unit: 'file descriptors (RLIMIT_NOFILE)' },
  processes: {
    default: 256,
    min: 1,
    max: 4_096,
    unit: 'processes of the user (RLIMIT_NPROC; not enforced for root)',
  },
};

/** Standard input for a program: at most stdin_bytes.max bytes of UTF-8. */
export const stdinSchema = z
  .string()
  .max(CAPTURE_LIMITS.stdin_bytes.max)
  .refine((v) => Buffer.byteLength(v) <= CAPTURE_LIMITS.stdin_bytes.max, {
    error: `stdin is at most ${CAPTURE_LIMITS.stdin_bytes.max} bytes of UTF-8; pass a larger input as a file (register_artifact) instead`,
  })
  .optional();

/** Time the process group gets between SIGTERM and SIGKILL. */
export const KILL_GRACE_MS = 2_000;

const captureInput = z.object({
  executable: z
    .string()
    .min(1)
    .max(4_096)
    .refine((p) => p.startsWith('/') || ARTIFACT_DIGEST.test(p), {
      error: 'executable must be an absolute path or the "sha256:…" digest of a registered artifact',
    })
    .describe(
      'The program to launch: an absolute path under the configured allowed roots, or the "sha256:…" digest of a registered artifact (run from a private copy).',
    ),
  args: z
    .array(z.string().max(CAPTURE_LIMITS.arg_bytes.max))
    .max(CAPTURE_LIMITS.args.max)
    .default([])
    .describe(`Arguments, passed as they are (no shell; at most ${CAPTURE_LIMITS.args.max}).`),
  env: z
    .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/), z.string().max(4_096))
    .refine((e) => Object.keys(e).length <= CAPTURE_LIMITS.env_vars.max, {
      error: `at most ${CAPTURE_LIMITS.env_vars.max} environment variables`,
    })
    .default({})
    .describe('The complete environment of the process; nothing is inherited from the worker.'),
  stdin: stdinSchema.describe('Text written to the standard input, which is then closed (at most 512 KiB).'),
  timeout_ms: bounded(
    CAPTURE_LIMITS.timeout_ms,
    'Wall-clock limit; then the process group gets SIGTERM and, 2 s later, SIGKILL',
  ),
  max_output_bytes: bounded(CAPTURE_LIMITS.max_output_bytes, 'Cap on retained stdout and stderr, each'),
  trace_syscalls: z
    .boolean()
    .default(false)
    .describe(
      'Trace system calls of the process and its children with strace -f into the `events` collection.',
    ),
  trace_filter: z
    .array(z.string().regex(/^[a-z0-9_]{1,32}$/))
    .max(64)
    .optional()
    .describe(
      'Only these syscalls (strace -e trace=…), e.g. ["openat", "execve"]; traces them even without trace_syscalls.',
    ),
  max_events: bounded(CAPTURE_LIMITS.max_events, 'Cap on retained syscall events'),
  max_files: bounded(CAPTURE_LIMITS.max_files, 'Cap on workspace entries listed (and hashed) after the run'),
  limits: z
    .strictObject({
      address_space_mb: bounded(CAPTURE_LIMITS.address_space_mb, 'Virtual memory limit'),
      open_files: bounded(CAPTURE_LIMITS.open_files, 'Open file limit'),
      processes: bounded(CAPTURE_LIMITS.processes, 'Process limit'),
    })
    .prefault({})
    .describe('Resource limits applied with prlimit before the program starts.'),
  isolation: z
    .preprocess((v) => (v === 'bubblewrap' ? 'sandbox' : v), z.enum(['sandbox', 'none']))
    .default('sandbox')
    .describe(
      'sandbox (default): own namespaces and an unprivileged uid of its own, no network, a read-only system without dossier’s state, only the workspace writable. none: no namespaces (only where the cluster admin allows it; still unprivileged). "bubblewrap" is an old name of sandbox.',
    ),
  network: z
    .boolean()
    .default(false)
    .describe('Give the program network access (only where the cluster policy allows it).'),
  detail: detailSchema,
  investigation: investigationSchema.optional(),
});

export type CaptureInput = z.infer<typeof captureInput>;

export const captureProcessScenario = defineTool({
  name: 'capture_process_scenario',
  title: 'Capture a process run',
  description:
    'Launch one program (no shell) in a fresh workspace and retain its exit status, output and timings as Evidence.',
  approval: 'process',
  input: captureInput,
  effect: {
    idempotent: false,
    readOnly: false,
    destructive: false,
    openWorld: true,
    effects: ['executes a program on a worker host', 'writes files in the launch workspace'],
  },
  runsOn: 'capture',
  toolset: 'capture',
  limits: CAPTURE_LIMITS,
  collections: {
    events: {
      description: 'System calls (trace_syscalls): {seq, pid, syscall, args, result}',
      filterable: ['syscall', 'pid'],
    },
    files: {
      description: 'Entries the process left in its workspace: {path, type, size, sha256, link_target}',
      filterable: ['type', 'path'],
    },
    stdout: { description: 'Standard output, one row per line: {line, part, text}', filterable: ['line'] },
    stderr: { description: 'Standard error, one row per line: {line, part, text}', filterable: ['line'] },
  },
  maxRunMs: (input) => input.timeout_ms + KILL_GRACE_MS + 5_000,
});

/** observe_native_calls counts library calls where capture_process_scenario counts syscalls. */
const LIBRARY_CALL_EVENTS = { ...CAPTURE_LIMITS.max_events, unit: 'library-call events' };

const observeInput = captureInput.omit({ trace_syscalls: true, trace_filter: true }).extend({
  call_filter: z
    .string()
    .regex(/^[A-Za-z0-9_*@.+-]{1,256}$/, {
      error: 'call_filter is an ltrace -e expression such as "malloc+free" or "*@libssl.so*"',
    })
    .optional()
    .describe(
      'Which library calls to trace (ltrace -e), e.g. "strlen+puts" or "*@libcrypto.so*"; default all.',
    ),
  max_events: bounded(LIBRARY_CALL_EVENTS, 'Cap on retained library calls'),
});

export type ObserveInput = z.infer<typeof observeInput>;

export const observeNativeCallsTool = defineTool({
  name: 'observe_native_calls',
  title: 'Observe library calls of a process',
  description:
    'Launch one program (no shell) under ltrace -f with the same bounds as capture_process_scenario and retain its library calls as the `events` collection, with its output and workspace files.',
  approval: 'process',
  input: observeInput,
  effect: captureProcessScenario.effect,
  runsOn: 'capture',
  toolset: 'capture',
  limits: { ...CAPTURE_LIMITS, max_events: LIBRARY_CALL_EVENTS },
  collections: {
    events: {
      description: 'Library calls: {seq, pid, library, call, args, result}',
      filterable: ['call', 'library', 'pid'],
    },
    files: captureProcessScenario.collections.files!,
    stdout: captureProcessScenario.collections.stdout!,
    stderr: captureProcessScenario.collections.stderr!,
  },
  maxRunMs: (input) => input.timeout_ms + KILL_GRACE_MS + 5_000,
});
