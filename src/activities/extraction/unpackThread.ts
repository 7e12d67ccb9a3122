// The extraction thread: one worker thread per process reads and writes every
// extraction (unpack.ts) and carves every firmware image (carveFirmware.ts),
// several at a time, while the activity on the main thread journals,
// heartbeats, publishes and retains. Extraction moves hundreds of MB
// through buffers; in the main isolate, whose heap holds the gateway and the
// Temporal worker, that churn set off a full garbage collection every hundred
// milliseconds and halved the throughput. The thread's heap is small, so its
// collections are cheap and the main event loop stays free.
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import type { Config } from '../../config.ts';
import { DossierError, toToolError, type ToolError } from '../../domain/errors.ts';
import { Sandbox } from '../../sandbox/sandbox.ts';
import type { EffectContext } from '../effect.ts';
import { carveFirmware, type FirmwareJob, type FirmwareOutcome } from './carveFirmware.ts';
import { unpack, type UnpackJob, type UnpackOutcome } from './unpack.ts';

/** What the thread does: an extraction, or a firmware image's carving. */
type Job = { kind: 'unpack'; unpack: UnpackJob } | { kind: 'firmware'; firmware: FirmwareJob };
type Outcome = UnpackOutcome | FirmwareOutcome;

type ToThread =
  | {
      id: number;
      job: Job;
      config: Config;
      caller: EffectContext['caller'];
      workspace: string;
    }
  | { id: number; abort: true };
type FromThread =
  | { id: number; progress: Record<string, unknown> }
  | { id: number; outcome: Outcome }
  | { id: number; crashed: ToolError };

interface Pending {
  resolve(outcome: Outcome): void;
  reject(err: Error): void;
  progress(facts: Record<string, unknown>): void;
}

interface Thread {
  worker: Worker;
  /** The jobs sent to this thread and not answered yet: a thread that dies fails exactly these. */
  pending: Map<number, Pending>;
}

let thread: Thread | undefined;
let nextId = 0;

function start(): Thread {
  const pending = new Map<number, Pending>();
  const worker = new Worker(new URL('./thread.mjs', import.meta.url), {
    workerData: { module: import.meta.url, role: 'unpack' },
  });
  worker.on('message', (msg: FromThread) => {
    const waiting = pending.get(msg.id);
    if (!waiting) return;
    if ('progress' in msg) return waiting.progress(msg.progress);
    pending.delete(msg.id);
    if ('outcome' in msg) waiting.resolve(msg.outcome);
    else waiting.reject(DossierError.from(msg.crashed));
  });
  // A thread that dies takes its extractions with it; the next one starts a new thread.
  const fail = (err: Error) => {
    if (thread?.worker === worker) thread = undefined;
    for (const [id, waiting] of pending) {
      pending.delete(id);
      waiting.reject(err);
    }
  };
  worker.on('error', fail);
  worker.on('exit', (code) => fail(new Error(`the extraction thread exited (code ${code})`)));
  // Held open only while it has work (last: a listener added after it would hold it again).
  worker.unref();
  return { worker, pending };
}

/** Runs an extraction in the extraction thread, relaying its progress and the launch's cancel. */
export function unpackInThread(job: UnpackJob, ctx: EffectContext): Promise<UnpackOutcome> {
  return inThread({ kind: 'unpack', unpack: job }, ctx) as Promise<UnpackOutcome>;
}

/** Carves a firmware image in the extraction thread, relaying its progress and the launch's cancel. */
export function carveInThread(job: FirmwareJob, ctx: EffectContext): Promise<FirmwareOutcome> {
  return inThread({ kind: 'firmware', firmware: job }, ctx) as Promise<FirmwareOutcome>;
}

function inThread(job: Job, ctx: EffectContext): Promise<Outcome> {
  thread ??= start();
  const { worker, pending } = thread;
  const id = nextId++;
  return new Promise<Outcome>((resolve, reject) => {
    const abort = () => worker.postMessage({ id, abort: true } satisfies ToThread);
    ctx.signal.addEventListener('abort', abort, { once: true });
    const done = () => {
      ctx.signal.removeEventListener('abort', abort);
      if (pending.size === 0) worker.unref();
    };
    pending.set(id, {
      resolve: (outcome) => (done(), resolve(outcome)),
      reject: (err) => (done(), reject(err)),
      progress: (facts) => ctx.progress(facts),
    });
    worker.ref();
    worker.postMessage({
      id,
      job,
      config: ctx.config,
      caller: ctx.caller,
      workspace: ctx.workspace,
    } satisfies ToThread);
    if (ctx.signal.aborted) abort();
  });
}

/** The thread's side: each job runs as the main thread would have run it, with its own cancel. */
function serve() {
  const sandboxes = new Map<string, Sandbox>();
  const aborts = new Map<number, AbortController>();
  parentPort!.on('message', (msg: ToThread) => {
    if ('abort' in msg) return aborts.get(msg.id)?.abort();
    const { id, job, config, caller, workspace } = msg;
    const policy = JSON.stringify(config.sandbox);
    if (!sandboxes.has(policy)) sandboxes.set(policy, new Sandbox(config.sandbox));
    const controller = new AbortController();
    aborts.set(id, controller);
    const post = (m: FromThread) => parentPort!.postMessage(m);
    const ctx = {
      config,
      caller,
      workspace,
      sandbox: sandboxes.get(policy)!,
      signal: controller.signal,
      progress: (facts: Record<string, unknown>) => post({ id, progress: facts }),
    };
    (job.kind === 'firmware' ? carveFirmware(job.firmware, ctx) : unpack(job.unpack, ctx))
      .then(
        (outcome) => post({ id, outcome }),
        (err: unknown) => post({ id, crashed: toToolError(err) }),
      )
      .finally(() => aborts.delete(id));
  });
}

if (!isMainThread && (workerData as { role?: string } | null)?.role === 'unpack') serve();
