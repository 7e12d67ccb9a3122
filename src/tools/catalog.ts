// The tool catalog: every contract dossier serves, in the order tools/list shows them.
import { captureProcessScenario } from './capture.ts';
import type { ToolContract } from './contract.ts';
import { awaitLaunch, cancelLaunch, getLaunch, listLaunches, whoami } from './launchTools.ts';
import {
  exportEvidenceBundle,
  getEvidence,
  importEvidenceBundle,
  inspectAnalysisView,
  listEvidence,
  listUnknowns,
  recordUnknown,
  updateUnknown,
} from './ledgerTools.ts';

export const CATALOG: readonly ToolContract[] = [
  captureProcessScenario,
  getLaunch,
  awaitLaunch,
  cancelLaunch,
  listLaunches,
  inspectAnalysisView,
  getEvidence,
  listEvidence,
  recordUnknown,
  updateUnknown,
  listUnknowns,
  exportEvidenceBundle,
  importEvidenceBundle,
  whoami,
] as unknown as readonly ToolContract[];

export const TOOLS_BY_NAME: ReadonlyMap<string, ToolContract> = new Map(CATALOG.map((c) => [c.name, c]));
