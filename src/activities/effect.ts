// What every effectful tool implementation gets and gives back. The launch
// machinery (journal, heartbeats, cancellation, retention) lives in
// runEffect.ts, so an effect only does its own job.
import type { Config } from '../config.ts';
import type { ToolError } from '../domain/errors.ts';
import type { Store } from '../store/store.ts';
import type { NewUnknown } from '../domain/types.ts';
import type { Sandbox } from '../sandbox/sandbox.ts';
import type { PayloadKey } from '../temporal/codec.ts';

export interface EffectContext {
  config: Config;
  /** The launch's workflow ID: scope for the unknowns it leaves. */
  launchId: string;
  /** Who launched it; effects that read the ledger read only this team's. */
  caller: { principal: string; team: string };
  /** The team's Evidence and artifact records (reads are filtered by `caller.team`). */
  store: Pick<
    Store,
    'evidence' | 'unknowns' | 'artifacts' | 'devices' | 'blobs' | 'retained' | 'annotations'
  >;
  /** The cluster's payload keys (device credentials are sealed under them). */
  keys: PayloadKey[];
  /** This attempt's own name (a re-dispatch of the launch is another attempt). */
  attemptId: string;
  /** Where every program the effect starts runs. */
  sandbox: Sandbox;
  /** A fresh, empty directory that belongs to this launch alone. */
  workspace: string;
  /** Aborted when the launch is cancelled, or its worker stops past its grace. */
  signal: AbortSignal;
  /** Whether `signal` was aborted by the worker stopping (a shutdown), not by a cancel. */
  stopping(): boolean;
  /**
   * Journals that the effect begins now. Call it after validation and right
   * before the first change to the world; it throws when an earlier attempt
   * already began the effect, and nothing may then be done.
   */
  begin(): Promise<void>;
  /** Small progress facts for heartbeats and MCP progress notifications. */
  progress(facts: Record<string, unknown>): void;
}

/** What reading and writing an extraction needs of its launch (it runs in a worker thread). */
export type ExtractionContext = Pick<
  EffectContext,
  'config' | 'caller' | 'sandbox' | 'workspace' | 'signal' | 'progress'
>;

export interface EffectResult {
  /** `succeeded` when the tool did its job (a non-zero exit is still an observation). */
  status: 'succeeded' | 'failed' | 'cancelled';
  document: Record<string, unknown>;
  collections: Record<string, unknown[]>;
  summary: Record<string, unknown>;
  truncated: boolean;
  limitations: string[];
  target: { digest?: string; path?: string } | null;
  error?: ToolError;
  /** What the run leaves unresolved, one unknown per item. */
  unknowns?: NewUnknown[];
}

/** An effect implementation, typed by its contract's parsed input. */
export type Effect<Input = Record<string, unknown>> = (
  input: Input,
  ctx: EffectContext,
) => Promise<EffectResult>;
