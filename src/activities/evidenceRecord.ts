// One builder of the Evidence record an activity retains: a launch's effect
// (runEffect.ts), an analysis's answer and a failed database build
// (analysis/runAnalysis.ts, analysis/buildDatabase.ts) fill in the same record
// the same way.
import type { NewEvidence, NewUnknown } from '../domain/types.ts';
import { TOOLS_BY_NAME } from '../tools/catalog.ts';
import { currentRun } from './provenance.ts';

export interface EvidenceFacts {
  tool: string;
  provider: { name: string; version: string };
  parameters: unknown;
  parametersDigest: string;
  target: NewEvidence['record']['target'];
  principal: string;
  team: string;
  investigation: string | null;
  /** The workflow the activity runs for; its run is the current activity's. */
  workflowId: string;
  summary: Record<string, unknown>;
  truncated: boolean;
  limitations: string[];
  document: Record<string, unknown>;
  collections: Record<string, unknown[]>;
  /** The fields each collection may be filtered by: the tool contract's, unless given. */
  filterable?: Record<string, string[]>;
  unknowns?: NewUnknown[];
}

/** The fields of a tool's collections that exact `where` filters may use, as its contract declares. */
export function filterableOf(tool: string): Record<string, string[]> {
  const collections = TOOLS_BY_NAME.get(tool)?.collections ?? {};
  return Object.fromEntries(Object.entries(collections).map(([name, spec]) => [name, spec.filterable]));
}

/** The Evidence to retain, created now, under the current activity's workflow run. */
export function evidenceOf(f: EvidenceFacts): NewEvidence {
  return {
    record: {
      tool: f.tool,
      provider: f.provider,
      parameters: f.parameters,
      parameters_digest: f.parametersDigest,
      target: f.target,
      principal: f.principal,
      team: f.team,
      investigation: f.investigation,
      launch: {
        workflow_id: f.workflowId,
        run_id: currentRun() ?? 'unknown',
      },
      created_at: new Date().toISOString(),
      summary: f.summary,
      truncated: f.truncated,
      limitations: f.limitations,
    },
    document: f.document,
    collections: f.collections,
    filterable: f.filterable ?? filterableOf(f.tool),
    unknowns: f.unknowns,
  };
}
