// The tool catalog: every contract dossier serves, in the order tools/list shows them.
import {
  decompileFunction,
  diffBinaries,
  findStrings,
  getCallGraph,
  inspectBinary,
  listFunctions,
  traceFeature,
} from './analysis.ts';
import { captureProcessScenario, observeNativeCallsTool } from './capture.ts';
import {
  deviceCaptureLogs,
  deviceExec,
  deviceInstallPackage,
  devicePull,
  devicePush,
  deviceReboot,
  getDevice,
  listDevices,
  registerDevice,
  retireDevice,
} from './devices.ts';
import { extractArtifact } from './extract.ts';
import {
  findIdenticalFunctions,
  getAnnotation,
  listAnnotationEvents,
  listAnnotations,
  listCarriedAnnotations,
  revertAnnotation,
  setAnnotation,
} from './knowledge.ts';
import { extractFirmwareTool } from './firmware.ts';
import { registerRules, scanWithRules } from './rules.ts';
import type { ToolContract } from './contract.ts';
import { catalogOf } from './registry.ts';
import { awaitLaunch, cancelLaunch, getLaunch, listLaunches, whoami } from './launches.ts';
import {
  exportEvidenceBundle,
  getEvidence,
  importEvidenceBundle,
  inspectAnalysisView,
  listArtifacts,
  listEvidence,
  getUnknown,
  listUnknowns,
  recordUnknown,
  registerArtifact,
  updateUnknown,
} from './ledger.ts';
import { enableToolsets, listToolsets } from './toolsetTools.ts';

export const CATALOG: readonly ToolContract[] = catalogOf([
  captureProcessScenario,
  observeNativeCallsTool,
  extractArtifact,
  extractFirmwareTool,
  exportEvidenceBundle,
  deviceExec,
  devicePull,
  devicePush,
  deviceInstallPackage,
  deviceCaptureLogs,
  deviceReboot,
  inspectBinary,
  findStrings,
  listFunctions,
  getCallGraph,
  decompileFunction,
  traceFeature,
  scanWithRules,
  diffBinaries,
  getLaunch,
  awaitLaunch,
  cancelLaunch,
  listLaunches,
  inspectAnalysisView,
  getEvidence,
  listEvidence,
  recordUnknown,
  updateUnknown,
  getUnknown,
  listUnknowns,
  importEvidenceBundle,
  registerArtifact,
  listArtifacts,
  registerRules,
  setAnnotation,
  getAnnotation,
  revertAnnotation,
  listAnnotations,
  listAnnotationEvents,
  listCarriedAnnotations,
  findIdenticalFunctions,
  registerDevice,
  listDevices,
  getDevice,
  retireDevice,
  whoami,
  listToolsets,
  enableToolsets,
]);

export const TOOLS_BY_NAME: ReadonlyMap<string, ToolContract> = new Map(CATALOG.map((c) => [c.name, c]));
