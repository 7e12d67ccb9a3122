// The tool inventory is pinned: a change to a name, its order, where it runs or
// its annotations must be made here too, on purpose. And the registry binds
// every contract exactly once on the side that runs it.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ANALYSIS_BINDINGS } from './activities/analyses.ts';
import { EFFECT_BINDINGS } from './activities/effects.ts';
import { GATEWAY_HANDLERS } from './gateway/handlers.ts';
import { listTools } from './mcp/surface.ts';
import { CATALOG } from './tools/catalog.ts';
import { defineTool, isAnalysisTool, isLaunchTool } from './tools/contract.ts';
import { bindAll, catalogOf } from './tools/registry.ts';

// name, runs on, readOnlyHint, destructiveHint, idempotentHint, openWorldHint
const INVENTORY = [
  ['capture_process_scenario', 'capture', false, false, true, true],
  ['observe_native_calls', 'capture', false, false, true, true],
  ['extract_artifact', 'extract', false, false, true, true],
  ['extract_firmware', 'extract', false, false, true, true],
  ['export_evidence_bundle', 'analysis', false, false, true, true],
  ['device_exec', 'device', false, false, true, true],
  ['device_pull', 'device', false, false, true, true],
  ['device_push', 'device', false, false, true, true],
  ['device_install_package', 'device', false, false, true, true],
  ['device_capture_logs', 'device', true, false, true, true],
  ['device_reboot', 'device', false, true, true, true],
  ['inspect_binary', 'analysis', true, false, true, false],
  ['find_strings', 'analysis', true, false, true, false],
  ['list_functions', 'analysis', true, false, true, false],
  ['get_call_graph', 'analysis', true, false, true, false],
  ['decompile_function', 'analysis', true, false, true, false],
  ['trace_feature', 'analysis', true, false, true, false],
  ['get_launch', 'gateway', true, false, true, false],
  ['await_launch', 'gateway', true, false, true, false],
  ['cancel_launch', 'gateway', false, true, true, true],
  ['list_launches', 'gateway', true, false, true, false],
  ['inspect_analysis_view', 'gateway', true, false, true, false],
  ['get_evidence', 'gateway', true, false, true, false],
  ['list_evidence', 'gateway', true, false, true, false],
  ['record_unknown', 'gateway', false, false, true, false],
  ['update_unknown', 'gateway', false, false, true, false],
  ['get_unknown', 'gateway', true, false, true, false],
  ['list_unknowns', 'gateway', true, false, true, false],
  ['import_evidence_bundle', 'gateway', false, false, true, false],
  ['register_artifact', 'gateway', false, false, true, true],
  ['list_artifacts', 'gateway', true, false, true, false],
  ['register_device', 'gateway', false, false, true, false],
  ['list_devices', 'gateway', true, false, true, false],
  ['get_device', 'gateway', true, false, true, false],
  ['retire_device', 'gateway', false, true, true, false],
  ['whoami', 'gateway', true, false, true, false],
] as const;

describe('the tool inventory', () => {
  it('tools/list shows exactly the pinned tools, in order, with their annotations, never a name twice', () => {
    const listed = listTools();
    expect(new Set(listed.map((t) => t.name)).size).toBe(listed.length);
    expect(
      listed.map((t) => {
        const a = t.annotations!;
        const runsOn = CATALOG.find((c) => c.name === t.name)!.runsOn;
        return [t.name, runsOn, a.readOnlyHint, a.destructiveHint, a.idempotentHint, a.openWorldHint];
      }),
    ).toEqual(INVENTORY);
  });

  it('every launch has exactly one effect, every analysis one query, every other tool one gateway handler', () => {
    const effects = bindAll('worker', CATALOG, EFFECT_BINDINGS, isLaunchTool);
    const analyses = bindAll('worker', CATALOG, ANALYSIS_BINDINGS, isAnalysisTool);
    const handlers = bindAll('gateway', CATALOG, GATEWAY_HANDLERS, (c) => c.runsOn === 'gateway');
    expect(effects.size + analyses.size + handlers.size).toBe(CATALOG.length);
  });
});

describe('the registry refuses, at load', () => {
  const tool = (name: string) =>
    defineTool({
      name,
      title: name,
      description: name,
      input: z.strictObject({}),
      effect: { idempotent: true, readOnly: true, destructive: false, openWorld: false, effects: [] },
      runsOn: 'gateway',
      limits: {},
      collections: {},
    }) as never;
  const a = tool('tool_a');
  const b = tool('tool_b');

  it('a catalog with a name twice', () => {
    expect(() => catalogOf([a, tool('tool_a')])).toThrow(/lists tool_a twice/);
  });

  it('a contract without behaviour, behaviour bound twice, and behaviour for a tool outside the catalog', () => {
    const all = () => true;
    expect(() => bindAll('gateway', [a, b], [{ contract: a }], all)).toThrow(/no behaviour bound for tool_b/);
    expect(() => bindAll('gateway', [a], [{ contract: a }, { contract: a }], all)).toThrow(/bound twice/);
    expect(() => bindAll('gateway', [a], [{ contract: a }, { contract: b }], all)).toThrow(
      /not in the catalog/,
    );
  });
});
