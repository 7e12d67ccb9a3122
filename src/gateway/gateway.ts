// The application behind the MCP layer: validates a call against its contract,
// authorizes it, and routes it to launches or to the store. Transport-free, so
// HTTP, stdio and tests drive exactly the same code.
import { DossierError, screenArguments, toToolError, type ToolError } from '../domain/errors.ts';
import { replyBytes, type Detail, type Ledger } from './ledger.ts';
import type { Intake } from './intake.ts';
import { ARTIFACT_DIGEST, type Principal } from '../domain/types.ts';
import type { LaunchReply, LaunchService, WaitOptions } from './launchService.ts';
import { START_RETRY_EVERY_MS } from './launchReplies.ts';
import { launchTimeline } from './timeline.ts';
import { RateLimiter } from './rateLimit.ts';
import { ApprovalRequired, approveLaunch, type AskHuman } from './approval.ts';
import type { CallResult } from './callResult.ts';
import { TaskService } from './tasks.ts';
import { refuseViewer } from './roles.ts';
import { meant } from './meant.ts';
import { functionAddress, teamFunction } from './knowledge.ts';
import type { Store } from '../store/store.ts';
import type { Config } from '../config.ts';
import { CATALOG, TOOLS_BY_NAME } from '../tools/catalog.ts';
import { addBacklogSource, toolCalls } from '../metrics/metrics.ts';
import { bindAll } from '../tools/registry.ts';
import type { DeviceRegistry } from './devices.ts';
import { GATEWAY_HANDLERS, type HandlerContext } from './handlers.ts';
import { callSchema, isAnalysisTool, isLaunchTool, type ToolContract } from '../tools/contract.ts';
import type { AnalysisReply, AnalysisService } from './analysisService.ts';
import { fixedChoice, type ToolsetChoice } from './toolsets.ts';
import type { Toolset } from '../tools/toolsets.ts';

export interface CallOptions {
  onProgress?: WaitOptions['onProgress'];
  /** Aborted when the call's client goes away (or the gateway stops): a wait ends at once. */
  signal?: AbortSignal;
  /** Asks the human behind the client (MCP form elicitation); absent when the client cannot be asked. */
  askHuman?: AskHuman;
  /** The toolsets the caller's connection lists (default: the server's, fixed). */
  toolsets?: ToolsetChoice;
}

export type { CallResult } from './callResult.ts';

export class Gateway {
  constructor(
    private readonly deps: {
      launches: LaunchService;
      analyses: AnalysisService;
      ledger: Ledger;
      devices: DeviceRegistry;
      namespace: string;
      uiUrl: string;
      /** Calls a minute per principal (default: unlimited). */
      rateLimitPerMinute?: number;
      /** The approval gate of process launches (default: off). */
      approval?: Config['approval'];
      /** What a connection lists when neither its URL nor its token chooses (DOSSIER_TOOLSETS). */
      toolsets: readonly Toolset[];
      /**
       * Where MCP tasks and the launches behind them are kept, the rate buckets replicas share, and
       * the team's names of functions and the functions its analyses indexed (a function by name).
       */
      store: Pick<
        Store,
        'tasks' | 'taskApprovals' | 'launches' | 'rateBuckets' | 'annotations' | 'functions'
      >;
    },
  ) {
    this.limiter = deps.rateLimitPerMinute
      ? new RateLimiter(deps.rateLimitPerMinute, deps.store.rateBuckets)
      : undefined;
    this.tasks = new TaskService({
      tasks: deps.store.tasks,
      approvals: deps.store.taskApprovals,
      launches: deps.store.launches,
      launchService: deps.launches,
      callTool: (caller, name, args, opts) => this.callTool(caller, name, args, opts),
    });
  }

  /** What a connection lists when neither its URL nor its token chooses. */
  get defaultToolsets(): readonly Toolset[] {
    return this.deps.toolsets;
  }

  /** The approval gate's policy (for prompts that explain it). */
  get approvalPolicy(): Config['approval'] | undefined {
    return this.deps.approval;
  }

  /** MCP tasks over launches: created by a task-augmented tools/call, then read, awaited, listed, cancelled. */
  readonly tasks: TaskService;

  /** A task-augmented tools/call (the approval gate applies as to any call). */
  createTask(
    caller: Principal,
    name: string,
    args: Record<string, unknown>,
    ttl: number | undefined,
    opts: CallOptions = {},
  ) {
    return this.tasks.create(caller, name, args, ttl, (c, n, a) => this.callTool(c, n, a, opts));
  }

  private readonly limiter: RateLimiter | undefined;
  private resumer: NodeJS.Timeout | undefined;

  /**
   * Background work of a running gateway: every few seconds, start the launches
   * that were claimed while Temporal was unreachable. Returns its stopper.
   */
  startBackgroundWork(everyMs = START_RETRY_EVERY_MS): () => void {
    let busy = false;
    this.resumer = setInterval(() => {
      if (busy) return;
      busy = true;
      this.deps.launches
        .startUnstarted()
        .catch(() => undefined)
        .finally(() => (busy = false));
    }, everyMs);
    this.resumer.unref();
    // MCP tasks past their ttl are forgotten hourly (their launches and Evidence stay).
    const sweeper = setInterval(() => {
      void this.deps.store.tasks.sweep().catch(() => undefined);
      void this.deps.store.taskApprovals.sweep().catch(() => undefined);
    }, 3_600_000);
    sweeper.unref();
    // The queues' backlogs are asked of Temporal when metrics are scraped, while this gateway runs.
    const removeBacklog = addBacklogSource(() => this.deps.launches.backlog());
    return () => {
      clearInterval(this.resumer);
      clearInterval(sweeper);
      removeBacklog();
    };
  }
  /** Every gateway-side contract bound to its handler, checked when the gateway is built. */
  private readonly handlers = bindAll('gateway', CATALOG, GATEWAY_HANDLERS, (c) => c.runsOn === 'gateway');

  async callTool(
    caller: Principal,
    name: string,
    args: unknown,
    opts: CallOptions = {},
  ): Promise<CallResult> {
    const result = await this.answer(caller, name, args, opts);
    // Only catalog names become label values: a caller cannot grow the metric without bound.
    const tool = TOOLS_BY_NAME.has(name) ? name : 'unknown';
    toolCalls.inc({ tool, outcome: result.ok ? 'ok' : result.error.code });
    return result;
  }

  private async answer(
    caller: Principal,
    name: string,
    args: unknown,
    opts: CallOptions,
  ): Promise<CallResult> {
    try {
      const limited = await this.throttle(caller);
      if (limited) {
        throw new DossierError(
          'resource_constraint',
          limited.message,
          `Retry after ${limited.retry_after_ms} ms; retries of launches with the same idempotency_key are always safe.`,
          limited,
          true,
        );
      }
      const value = await this.dispatch(caller, name, args ?? {}, opts);
      const bytes = replyBytes(value);
      if (bytes > this.deps.ledger.replyBudgetBytes) {
        // Never cut a reply: say so, and how to ask for less.
        throw new DossierError(
          'resource_constraint',
          `The reply of ${name} would be ${bytes} bytes, over the reply budget of ${this.deps.ledger.replyBudgetBytes}.`,
          'Ask for less: a smaller limit, a narrower filter, or detail "summary".',
          { bytes, budget: this.deps.ledger.replyBudgetBytes },
        );
      }
      return { ok: true, value };
    } catch (err) {
      // The transport asks the human and calls again (the stateless era's input_required).
      if (err instanceof ApprovalRequired) throw err;
      return { ok: false, error: toToolError(err) };
    }
  }

  /**
   * Counts one request of `caller` against its rate (tool calls, sessions,
   * completion, prompts, resources alike); what to tell it when it is over.
   */
  async throttle(
    caller: Principal,
  ): Promise<{ message: string; retry_after_ms: number; limit_per_minute: number } | null> {
    const wait = (await this.limiter?.take(`${caller.team}/${caller.principal}`)) ?? 0;
    if (wait <= 0) return null;
    return {
      message: `Too many requests from ${caller.principal}: the limit is ${this.deps.rateLimitPerMinute} a minute.`,
      retry_after_ms: wait,
      limit_per_minute: this.deps.rateLimitPerMinute!,
    };
  }

  /** The launch timeline View's reading of one of the caller's launches (timeline.ts), counted as a call. */
  async launchTimeline(caller: Principal, key: string): Promise<CallResult> {
    try {
      const limited = await this.throttle(caller);
      if (limited)
        throw new DossierError('resource_constraint', limited.message, 'Retry later.', limited, true);
      const { record, events, unread } = await this.deps.launches.history(caller, key);
      const limitations = unread ? [`The workflow history could not be read (${unread}).`] : [];
      const evidence = record.evidenceId
        ? await this.deps.ledger.inspect(caller, record.evidenceId, { kind: 'summary' }).catch(() => null)
        : null;
      const retainedAt = (evidence as { provenance?: { created_at?: string } } | null)?.provenance
        ?.created_at;
      return { ok: true, value: { ...launchTimeline(record, events, retainedAt ?? null, limitations) } };
    } catch (err) {
      return { ok: false, error: toToolError(err) };
    }
  }

  completePrompt(
    caller: Principal,
    prompt: string,
    argument: string,
    typed: string,
    context?: Record<string, string>,
  ) {
    return this.deps.ledger.complete(caller, prompt, argument, typed, context);
  }

  completeResource(caller: Principal, uri: string, argument: string, typed: string) {
    return this.deps.ledger.completeResource(caller, uri, argument, typed);
  }

  /**
   * The HTTP routes beside MCP (artifact uploads, bundles) in the caller's name:
   * the same roles and the same error shape as tools. `writes` names what a
   * viewer may not do.
   */
  async rest<T extends object>(
    caller: Principal,
    writes: string | null,
    run: (intake: Intake) => Promise<T>,
  ): Promise<{ ok: true; value: T } | { ok: false; error: ToolError }> {
    try {
      if (writes) refuseViewer(caller, writes);
      return { ok: true, value: await run(this.deps.ledger.intake) };
    } catch (err) {
      return { ok: false, error: toToolError(err) };
    }
  }

  /** Launch and analysis replies carry their result within the reply budget: complete when it fits, else summary + continuation. */
  private async deliver(caller: Principal, reply: LaunchReply | AnalysisReply, detail: Detail) {
    const value = { ...reply } as Record<string, unknown>;
    if (reply.status === 'running' || !reply.evidence_id) return value;
    return this.deps.ledger.deliver(caller, value, detail);
  }

  /**
   * A function the caller names by a name its team gave it on this artifact (set_annotation) is
   * asked of the analysis by its address: the analysis, shared by every team, knows the provider's
   * names only. A name the team gave no function goes on as it is; one that the provider also gives
   * another function (as the team's analyses indexed it) is the caller's to tell apart.
   */
  private async teamNamedFunction(caller: Principal, input: Record<string, unknown>) {
    const ref = input.function;
    const artifact = input.artifact;
    if (typeof ref !== 'string' || typeof artifact !== 'string' || functionAddress(ref)) return;
    const address = await teamFunction(this.deps.store, caller.team, artifact, ref);
    if (!address) return;
    const others = (await this.deps.store.functions.addressesNamed(caller.team, artifact, ref)).filter(
      (a) => a !== address,
    );
    if (others.length)
      throw new DossierError(
        'invalid_params',
        `"${ref}" names more than one function of this artifact: your team's name for ${address}, and the analysis's for ${others.join(', ')}.`,
        'Name the function by its address, as list_functions shows it ("0x401136").',
        { function: ref, addresses: [address, ...others] },
      );
    input.function = address;
  }

  /**
   * A digest the caller names that is a file one of its team's extractions wrote becomes the
   * team's artifact before the tool runs (a viewer registers nothing: it gets not_found).
   */
  private async adoptArtifacts(caller: Principal, input: Record<string, unknown>) {
    if (caller.role === 'viewer') return;
    for (const field of ARTIFACT_FIELDS) {
      const value = input[field];
      if (typeof value === 'string' && ARTIFACT_DIGEST.test(value))
        await this.deps.ledger.intake.adoptExtracted(caller, value);
    }
  }

  private async dispatch(caller: Principal, name: string, args: unknown, opts: CallOptions) {
    const contract = TOOLS_BY_NAME.get(name);
    if (!contract) {
      throw new DossierError(
        'not_found',
        `There is no tool named "${name}".`,
        'Call tools/list for the tools this gateway serves.',
        { tool: name },
      );
    }
    screenArguments(args);
    const input = parseInput(contract, args);
    authorize(caller, contract);
    await this.adoptArtifacts(caller, input);
    const wait = (waitMs: number): WaitOptions => ({
      waitMs,
      onProgress: opts.onProgress,
      signal: opts.signal,
    });
    if (isLaunchTool(contract)) {
      const approval = this.deps.approval;
      const gated = contract.approval === 'process' && approval?.mode === 'elicit';
      const reply = await this.deps.launches.startOrAttach(caller, contract, input, {
        ...wait(input.wait_ms as number),
        // Asked only before a new key is claimed: a retry attaches to what was approved.
        beforeClaim: gated
          ? async (digest) =>
              void (await approveLaunch(approval, caller, contract, input, digest, opts.askHuman))
          : undefined,
      });
      return this.deliver(caller, reply, input.detail as Detail);
    }
    if (isAnalysisTool(contract)) {
      await this.teamNamedFunction(caller, input);
      const reply = await this.deps.analyses.run(caller, contract, input, wait(input.wait_ms as number));
      return this.deliver(caller, reply, input.detail as Detail);
    }
    const ctx: HandlerContext = {
      caller,
      launches: this.deps.launches,
      ledger: this.deps.ledger,
      devices: this.deps.devices,
      namespace: this.deps.namespace,
      uiUrl: this.deps.uiUrl,
      wait,
      toolsets: opts.toolsets ?? fixedChoice(this.deps.toolsets),
      deliver: (reply, detail) => this.deliver(caller, reply, detail),
    };
    return this.handlers.get(name)!.handle(input, ctx);
  }
}

/** The inputs that name an artifact by digest (`executable` only when it is one). */
const ARTIFACT_FIELDS = ['artifact', 'executable'];

function parseInput(contract: ToolContract, args: unknown): Record<string, unknown> {
  const schema = callSchema(contract);
  const parsed = schema.safeParse(args);
  if (parsed.success) return parsed.data as Record<string, unknown>;
  const fields = Object.keys(schema.shape);
  const issues = parsed.error.issues.slice(0, 20).map((i) => ({
    path: i.path.join('.') || '(arguments)',
    message:
      i.code === 'unrecognized_keys' && i.path.length === 0
        ? `${i.message}${meant(i.keys, fields)}`
        : i.message,
  }));
  throw new DossierError(
    'invalid_params',
    `Invalid arguments for ${contract.name}: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`,
    `Fix the named fields and call again; the input schema, with every default and limit, is in tools/list once its toolset is listed (enable_toolsets {"toolsets": ["${contract.toolset}"]} lists it, or gives it on a connection without a session). Nothing was run.`,
    { issues },
  );
}

function authorize(caller: Principal, contract: ToolContract) {
  const changesWorld = isLaunchTool(contract) || !contract.effect.readOnly;
  if (changesWorld)
    refuseViewer(caller, `call ${contract.name}, which changes the world`, {
      role: caller.role,
      tool: contract.name,
    });
}
