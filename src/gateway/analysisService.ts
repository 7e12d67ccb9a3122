// Analyses: read-only tools answered on the `analysis` capability, once per
// team and input. The store's analysis record is claimed first; an answered
// question is answered from it (the same evidence_id, no Temporal call);
// otherwise the analysis workflow, keyed by the input's digest, is started or
// attached to, so concurrent askers share one run, and every analysis of an
// artifact shares one database build.
import type { Client } from '@temporalio/client';
import { providerKeyOf } from '../analysis/providers.ts';
import type { EvidenceStore } from '../store/evidence.ts';
import { artifactNotFound, DossierError } from '../domain/errors.ts';
import type { Principal } from '../domain/types.ts';
import { analysisKey, analysisWorkflowId, databaseKey, databaseWorkflowId } from '../launches/keys.ts';
import type { AnalysisRequest, DatabaseRequest } from '../launches/protocol.ts';
import type { AnalysisRecord, AnalysisStore } from '../store/analyses.ts';
import type { ArtifactStore } from '../store/artifacts.ts';
import { analysisTargets, auditAttributes } from '../temporal/searchAttributes.ts';
import { ANSWER_ONCE, startOrAttachWorkflow } from '../temporal/start.ts';
import { capabilityQueue } from '../temporal/queues.ts';
import type { ToolContract } from '../tools/contract.ts';
import { waitForWorkflow, type WaitOptions } from './waiting.ts';

export interface AnalysisReply {
  status: 'running' | 'succeeded' | 'failed';
  analysis: {
    tool: string;
    workflow_id: string;
    run_id: string | null;
    requested_by: string;
    attached: boolean;
    started_at: string;
    finished_at?: string;
    ui_url: string;
  };
  evidence_id?: string;
  summary?: Record<string, unknown>;
  error?: Record<string, unknown>;
  /** While running: how to follow it (an analysis has no idempotency key for await_launch). */
  next?: string;
  progress?: Record<string, unknown>;
}

export class AnalysisService {
  constructor(
    private readonly deps: {
      analyses: AnalysisStore;
      artifacts: ArtifactStore;
      client: Client;
      namespace: string;
      uiUrl: string;
      /** Upper bound of one database build (the configured time budget plus its grace). */
      databaseMaxRunMs: number;
      /** For analyses of an extraction (rule scans): the team's Evidence. */
      evidence?: Pick<EvidenceStore, 'get'>;
      /** Workers share this process's connection: start eagerly (see LaunchService). */
      eagerStart?: boolean;
    },
  ) {}

  async run(
    caller: Principal,
    contract: ToolContract,
    args: Record<string, unknown>,
    wait: WaitOptions,
  ): Promise<AnalysisReply> {
    const { wait_ms: _wait, detail: _detail, ...input } = args;
    const artifact = input.artifact as string | undefined;
    const base = input.base as string | undefined;
    if (base !== undefined && base === artifact)
      throw new DossierError(
        'invalid_params',
        'A diff needs two builds: artifact and base are the same digest.',
        'Pass the earlier build as base and the later one as artifact (list_artifacts shows your team’s).',
        { artifact, base },
      );
    // Everything the analysis reads must be the team's: its target, a diff's base, a rule scan's bundle.
    let name: string | null | undefined;
    for (const digest of [artifact, base, input.rules as string | undefined]) {
      if (!digest) continue;
      const registered = await this.deps.artifacts.get(caller.team, digest);
      if (digest === artifact) name = registered?.name;
      if (!registered)
        throw digest === artifact || digest === base
          ? artifactNotFound(digest)
          : new DossierError(
              'not_found',
              `No artifact ${digest} is registered for your team.`,
              'register_artifact (or POST /artifacts, or register_rules for a rule bundle) first, then pass the digest it returns.',
              { artifact: digest },
            );
    }
    const evidenceId = input.evidence_id as string | undefined;
    if (evidenceId && !(await this.deps.evidence?.get(caller.team, evidenceId)))
      throw new DossierError(
        'not_found',
        `No Evidence ${evidenceId} is visible to your team.`,
        "Pass the evidence_id of one of your team's extractions (list_evidence).",
        { evidence_id: evidenceId },
      );
    const needsDatabase = contract.needsDatabase !== false;
    const provider = providerKeyOf(contract.name);
    const key = analysisKey(contract.name, input, provider);
    const profile = String(input.profile ?? 'default');
    const dbKey = needsDatabase && artifact ? databaseKey(artifact, profile, provider) : null;
    const workflowId = analysisWorkflowId(caller.team, key);
    const { created, record } = await this.deps.analyses.claim({
      team: caller.team,
      key,
      kind: 'query',
      tool: contract.name,
      input,
      databaseKey: dbKey,
      workflowId,
      requestedBy: caller.principal,
    });
    // The asker that claimed it is not attached, even if another asker's run already finished it.
    if (record.status === 'succeeded') return this.reply(record, !created);
    let fresh = record;
    if (record.status === 'failed') {
      // A failed analysis may be asked again: it runs anew, once, whoever asks first.
      await this.deps.analyses.retryFailed(caller.team, key, caller.principal);
      fresh = (await this.deps.analyses.get(caller.team, key))!;
    }
    const request: AnalysisRequest = {
      workflowId,
      team: caller.team,
      key,
      tool: contract.name,
      input,
      requestedBy: caller.principal,
      database: dbKey && artifact ? this.databaseRequest(caller, artifact, profile, provider) : null,
      ...(base === undefined ? {} : { baseDatabase: this.databaseRequest(caller, base, profile, provider) }),
      maxRunMs: contract.maxRunMs?.(input) ?? 10 * 60_000,
    };
    // Watched from before the start: an end written while this call starts the analysis is heard too.
    const watch = this.deps.analyses.watchEnd(workflowId);
    try {
      const runId = await this.ensureStarted(request, fresh, name);
      return await this.wait({ ...fresh, runId }, !created, wait, watch);
    } finally {
      watch.stop();
    }
  }

  private databaseRequest(
    caller: Principal,
    artifact: string,
    profile: string,
    provider: string,
  ): DatabaseRequest {
    return {
      workflowId: databaseWorkflowId(caller.team, artifact, profile, provider),
      team: caller.team,
      key: databaseKey(artifact, profile, provider),
      artifact,
      profile,
      requestedBy: caller.principal,
      maxRunMs: this.deps.databaseMaxRunMs,
    };
  }

  private async ensureStarted(
    req: AnalysisRequest,
    record: AnalysisRecord,
    name: string | null | undefined,
  ): Promise<string> {
    const { client } = this.deps;
    let runId: string;
    try {
      ({ runId } = await startOrAttachWorkflow(client, 'analysisWorkflow', {
        // On the queue of the workers that run it: with an eager start, the first workflow task
        // comes back with the start, and the analysis it schedules is handed back with that task.
        taskQueue: capabilityQueue('analysis'),
        workflowId: req.workflowId,
        args: [req],
        ...ANSWER_ONCE,
        ...(this.deps.eagerStart ? { requestEagerStart: true } : {}),
        memo: {
          tool: req.tool,
          team: req.team,
          requested_by: record.requestedBy,
          artifact: req.input.artifact ?? req.input.evidence_id,
        },
        typedSearchAttributes: auditAttributes({
          tool: req.tool,
          principal: record.requestedBy,
          team: req.team,
          key: req.key,
          bodyDigest: req.key,
          // What the analysis reads: its artifact and, for a rule scan, the bundle.
          artifacts: [req.input.artifact, req.input.rules].filter((d): d is string => typeof d === 'string'),
          targets: analysisTargets(req.input, name),
        }),
      }));
    } catch (err) {
      throw new DossierError(
        'provider_unavailable',
        `Temporal could not start the analysis: ${(err as Error).message}`,
        'Ask again: the same question reaches the same analysis.',
      );
    }
    await this.deps.analyses.markRunning(req.workflowId, runId);
    return runId;
  }

  private async wait(
    record: AnalysisRecord,
    attached: boolean,
    wait: WaitOptions,
    watch: ReturnType<AnalysisStore['watchEnd']>,
  ): Promise<AnalysisReply> {
    const { analyses, client } = this.deps;
    await waitForWorkflow(
      client,
      record.workflowId,
      record.runId,
      wait,
      () => this.progressOf(record),
      watch,
    );
    const fresh = (await analyses.byWorkflowId(record.workflowId)) ?? record;
    return this.reply(fresh, attached);
  }

  /** An analysis waiting on its database shows the database's progress. */
  private async progressOf(record: AnalysisRecord): Promise<Record<string, unknown> | null> {
    const own = await this.deps.analyses.byWorkflowId(record.workflowId);
    if (own?.progress) return own.progress;
    if (!record.databaseKey) return null;
    return (await this.deps.analyses.get(record.team, record.databaseKey))?.progress ?? null;
  }

  async reply(record: AnalysisRecord, attached: boolean): Promise<AnalysisReply> {
    const status = record.status === 'succeeded' || record.status === 'failed' ? record.status : 'running';
    const reply: AnalysisReply = {
      status,
      analysis: {
        tool: record.tool,
        workflow_id: record.workflowId,
        run_id: record.runId,
        requested_by: record.requestedBy,
        attached,
        started_at: record.createdAt,
        ui_url: `${this.deps.uiUrl}/namespaces/${encodeURIComponent(this.deps.namespace)}/workflows/${encodeURIComponent(record.workflowId)}`,
      },
    };
    if (record.finishedAt) reply.analysis.finished_at = record.finishedAt;
    if (record.evidenceId) reply.evidence_id = record.evidenceId;
    if (record.result && status === 'succeeded') reply.summary = record.result;
    if (record.error) reply.error = record.error;
    if (status === 'running') {
      const progress = await this.progressOf(record);
      if (progress) reply.progress = progress;
      reply.next = `Call ${record.tool} again with the same input (and wait_ms up to 110000): it attaches to this analysis and answers when it ends. await_launch does not follow analyses.`;
    }
    return reply;
  }
}
