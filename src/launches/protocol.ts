// The activity surface as types, so workflow code can proxy it without importing I/O.
import type { EffectJournal, LaunchOutcome } from '../domain/types.ts';

export interface LaunchRequest {
  workflowId: string;
  tool: string;
  capability: string;
  input: Record<string, unknown>;
  principal: string;
  team: string;
  key: string;
  bodyDigest: string;
  investigation: string | null;
  maxRunMs: number;
}

export interface JournalView {
  effect: EffectJournal;
  finished: LaunchOutcome | null;
}

export interface EffectActivities {
  runEffect(req: LaunchRequest): Promise<LaunchOutcome>;
}

export interface BookkeepingActivities {
  readJournal(workflowId: string): Promise<JournalView>;
  finishLaunch(workflowId: string, outcome: LaunchOutcome): Promise<LaunchOutcome>;
}
