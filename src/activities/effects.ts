// The worker's half of the tool registry: every launch contract bound to its
// effect, typed by the contract's own input. createActivities refuses to load
// when a launch contract has no effect, or one has two.
import type { z } from 'zod';
import type { ToolContract, ToolInput } from '../tools/contract.ts';
import { captureProcessScenario, observeNativeCallsTool } from '../tools/capture.ts';
import { extractArtifact } from '../tools/extract.ts';
import { extractFirmwareTool } from '../tools/firmware.ts';
import { exportEvidenceBundle as exportContract } from '../tools/ledger.ts';
import {
  deviceCaptureLogs as deviceLogsContract,
  deviceExec as deviceExecContract,
  deviceInstallPackage as deviceInstallContract,
  devicePull as devicePullContract,
  devicePush as devicePushContract,
  deviceReboot as deviceRebootContract,
} from '../tools/devices.ts';
import { exportEvidenceBundle } from './bundles/bundle.ts';
import {
  deviceCaptureLogs,
  deviceExec,
  deviceInstallPackage,
  devicePull,
  devicePush,
  deviceReboot,
} from './devices/devices.ts';
import { captureProcess, observeNativeCalls } from './capture/capture.ts';
import type { Effect, EffectContext, EffectResult } from './effect.ts';
import { extractArchive } from './extraction/extract.ts';
import { extractFirmware } from './extraction/firmware.ts';

export interface EffectBinding {
  contract: ToolContract;
  /** A method: bound by `effect` below to the effect of the contract's own parsed input. */
  run(input: ToolInput, ctx: EffectContext): Promise<EffectResult>;
}

/** Binds a launch contract to its effect; the effect sees the contract's parsed input, typed. */
export function effect<I extends z.ZodObject>(
  contract: ToolContract<I>,
  run: Effect<z.output<I>>,
): EffectBinding {
  return { contract, run };
}

export const EFFECT_BINDINGS: readonly EffectBinding[] = [
  effect(captureProcessScenario, captureProcess),
  effect(observeNativeCallsTool, observeNativeCalls),
  effect(extractArtifact, extractArchive),
  effect(extractFirmwareTool, extractFirmware),
  effect(exportContract, exportEvidenceBundle),
  effect(deviceExecContract, deviceExec),
  effect(devicePullContract, devicePull),
  effect(devicePushContract, devicePush),
  effect(deviceInstallContract, deviceInstallPackage),
  effect(deviceLogsContract, deviceCaptureLogs),
  effect(deviceRebootContract, deviceReboot),
];
