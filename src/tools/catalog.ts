// The tool catalog: every contract dossier serves, in the order tools/list shows them.
import { captureProcessScenario, observeNativeCallsTool } from './capture.ts';
import { extractArtifact } from './extract.ts';
import { extractFirmwareTool } from './firmware.ts';
import type { ToolContract } from './contract.ts';
import { awaitLaunch, cancelLaunch, getLaunch, listLaunches, whoami } from './launchTools.ts';
import {
  exportEvidenceBundle,
  getEvidence,
  importEvidenceBundle,
  inspectAnalysisView,
  listArtifacts,
  listEvidence,
  listUnknowns,
  recordUnknown,
  registerArtifact,
  updateUnknown,
} from './ledgerTools.ts';

export const CATALOG: readonly ToolContract[] = [
  captureProcessScenario,
  observeNativeCallsTool,
  extractArtifact,
  extractFirmwareTool,
  getLaunch,
  awaitLaunch,
  cancelLaunch,
  listLaunches,
  inspectAnalysisView,
  listArtifacts,
  getEvidence,
  listEvidence,
  recordUnknown,
  updateUnknown,
  listUnknowns,
  exportEvidenceBundle,
  importEvidenceBundle,
  registerArtifact,
  listArtifacts,
  whoami,
] as unknown as readonly ToolContract[];

export const TOOLS_BY_NAME: ReadonlyMap<string, ToolContract> = new Map(CATALOG.map((c) => [c.name, c]));
