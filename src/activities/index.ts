// The activities a worker registers: runEffect (runEffect.ts) around every
// effectful tool, the launch bookkeeping (bookkeeping.ts), and the analysis
// activities (analysis/analyses.ts); and the worker's housekeeping.
import type { Client } from '@temporalio/client';
import type { Config } from '../config.ts';
import type { BookkeepingActivities, EffectActivities, LaunchRequest } from '../launches/protocol.ts';
import { Sandbox } from '../sandbox/sandbox.ts';
import type { Store } from '../store/store.ts';
import { payloadKeys } from '../temporal/codec.ts';
import { CATALOG } from '../tools/catalog.ts';
import { isLaunchTool } from '../tools/contract.ts';
import { bindAll } from '../tools/registry.ts';
import { createAnalysisActivities } from './analysis/analyses.ts';
import { finishLaunch, readJournal } from './bookkeeping.ts';
import { EFFECT_BINDINGS } from './effects.ts';
import { runEffectReported, type EffectDeps } from './runEffect.ts';
import { TeamDisk } from './workspaces/teamDisk.ts';
import { sweepWorkspaces } from './workspaces/workspaces.ts';

export function createActivities(deps: {
  store: Store;
  config: Config;
  client: Client;
  /** Aborted when a stopping worker's grace period is over. */
  stopped?: AbortSignal;
}) {
  const { store, config } = deps;
  const sandbox = new Sandbox(config.sandbox);
  const analyses = createAnalysisActivities({ store, config, sandbox, client: deps.client });
  const teamDisk = new TeamDisk({
    store,
    home: config.home,
    boundBytes: config.teamWorkspaceBytes,
    retentionMs: config.workspaceRetentionMs,
    log: (line) => console.error(line),
  });
  const effectDeps: EffectDeps = {
    stopped: deps.stopped,
    store,
    config,
    sandbox,
    keys: payloadKeys(config.payloadKeys, config.home),
    effects: bindAll('worker', CATALOG, EFFECT_BINDINGS, isLaunchTool),
    /** What a finished launch keeps is recorded for its team, and the team kept under its bound; never fails the launch. */
    retain: (req: LaunchRequest, workspace: string) =>
      teamDisk.retain(req.team, req.workflowId, workspace).catch((err: unknown) => {
        console.error(`dossier: keeping the team bound after ${req.workflowId} failed:`, err);
      }),
  };

  /** The worker's housekeeping: workspaces past their retention, rows of retentions a dead worker left. */
  async function maintain() {
    await sweepWorkspaces(config.home, config.workspaceRetentionMs).catch(() => undefined);
    await teamDisk.sweep().catch(() => undefined);
    await store.evidence.sweepStaged().catch(() => undefined);
  }

  const effectActivities: EffectActivities = { runEffect: (req) => runEffectReported(effectDeps, req) };
  const bookkeeping: BookkeepingActivities = {
    readJournal: (workflowId) => readJournal(store, workflowId, config.launchDispatch),
    finishLaunch: (workflowId, outcome) => finishLaunch(store, workflowId, outcome, config.launchDispatch),
  };
  return {
    maintain,
    effects: effectActivities,
    bookkeeping: { ...bookkeeping, ...analyses.bookkeeping },
    analysis: analyses.work,
  };
}
