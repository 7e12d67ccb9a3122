// What a program run on a device leaves in its Evidence: the exit and its ending, the
// limitations of what was kept, and the launch's status.
import type { ExecResult } from '../../devices/device.ts';
import type { EffectResult } from '../effect.ts';

export function execDocument(r: ExecResult) {
  return {
    exit: { code: r.code, signal: r.signal },
    ended_by: r.endedBy,
    duration_ms: r.durationMs,
    stdout: r.stdout.describe(),
    stderr: r.stderr.describe(),
  };
}

export function outputLimitations(r: ExecResult, cap: number, timeoutMs: number): string[] {
  const out: string[] = [];
  if (r.stdout.describe().truncated) out.push(`stdout was capped at ${cap} bytes`);
  if (r.stderr.describe().truncated) out.push(`stderr was capped at ${cap} bytes`);
  if (r.endedBy === 'timeout') out.push(`the program was ended after timeout_ms=${timeoutMs}`);
  if (r.endedBy === 'cancel') out.push('the launch was cancelled; the program was ended');
  if (r.endedBy === 'shutdown') out.push('its worker was stopped past its grace; the program was ended');
  return out;
}

export function execStatus(r: ExecResult): EffectResult['status'] {
  // A launch ended by its worker's stop is recorded interrupted (activities/runEffect.ts).
  return r.endedBy === 'cancel' || r.endedBy === 'shutdown' ? 'cancelled' : 'succeeded';
}
