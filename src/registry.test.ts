// The tool inventory is pinned: a change to a name, its order, where it runs or
// its annotations must be made here too, on purpose. And the registry binds
// every contract exactly once on the side that runs it.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ANALYSIS_BINDINGS } from './activities/analysis/analyses.ts';
import { EFFECT_BINDINGS } from './activities/effects.ts';
import { GATEWAY_HANDLERS } from './gateway/handlers.ts';
import { listTools } from './mcp/surface.ts';
import { CATALOG } from './tools/catalog.ts';
import { defineTool, isAnalysisTool, isLaunchTool } from './tools/contract.ts';
import { bindAll, catalogOf } from './tools/registry.ts';

// name, runs on, readOnlyHint, destructiveHint, idempotentHint, openWorldHint, toolset
const INVENTORY = [
  ['capture_process_scenario', 'capture', false, false, true, true, 'capture'],
  ['observe_native_calls', 'capture', false, false, true, true, 'capture'],
  ['extract_artifact', 'extract', false, false, true, true, 'extraction'],
  ['extract_firmware', 'extract', false, false, true, true, 'extraction'],
  ['export_evidence_bundle', 'analysis', false, false, true, true, 'bundles'],
  ['device_exec', 'device', false, false, true, true, 'devices'],
  ['device_pull', 'device', false, false, true, true, 'devices'],
  ['device_push', 'device', false, false, true, true, 'devices'],
  ['device_install_package', 'device', false, false, true, true, 'devices'],
  ['device_capture_logs', 'device', true, false, true, true, 'devices'],
  ['device_reboot', 'device', false, true, true, true, 'devices'],
  ['inspect_binary', 'analysis', true, false, true, false, 'analysis'],
  ['find_strings', 'analysis', true, false, true, false, 'analysis'],
  ['list_functions', 'analysis', true, false, true, false, 'analysis'],
  ['get_call_graph', 'analysis', true, false, true, false, 'analysis'],
  ['decompile_function', 'analysis', true, false, true, false, 'analysis'],
  ['trace_feature', 'analysis', true, false, true, false, 'analysis'],
  ['scan_with_rules', 'analysis', true, false, true, false, 'extraction'],
  ['diff_binaries', 'analysis', true, false, true, false, 'knowledge'],
  ['get_launch', 'gateway', true, false, true, false, 'core'],
  ['await_launch', 'gateway', true, false, true, false, 'core'],
  ['cancel_launch', 'gateway', false, true, true, true, 'core'],
  ['list_launches', 'gateway', true, false, true, false, 'core'],
  ['inspect_analysis_view', 'gateway', true, false, true, false, 'core'],
  ['get_evidence', 'gateway', true, false, true, false, 'core'],
  ['list_evidence', 'gateway', true, false, true, false, 'core'],
  ['record_unknown', 'gateway', false, false, true, false, 'core'],
  ['update_unknown', 'gateway', false, false, true, false, 'core'],
  ['get_unknown', 'gateway', true, false, true, false, 'core'],
  ['list_unknowns', 'gateway', true, false, true, false, 'core'],
  ['import_evidence_bundle', 'gateway', false, false, true, false, 'bundles'],
  ['register_artifact', 'gateway', false, false, true, true, 'core'],
  ['list_artifacts', 'gateway', true, false, true, false, 'core'],
  ['register_rules', 'gateway', false, false, true, false, 'extraction'],
  ['set_annotation', 'gateway', false, false, true, false, 'knowledge'],
  ['get_annotation', 'gateway', true, false, true, false, 'knowledge'],
  ['revert_annotation', 'gateway', false, false, true, false, 'knowledge'],
  ['list_annotations', 'gateway', true, false, true, false, 'knowledge'],
  ['list_annotation_events', 'gateway', true, false, true, false, 'knowledge'],
  ['list_carried_annotations', 'gateway', true, false, true, false, 'knowledge'],
  ['find_identical_functions', 'gateway', true, false, true, false, 'knowledge'],
  ['register_device', 'gateway', false, false, true, false, 'devices'],
  ['list_devices', 'gateway', true, false, true, false, 'devices'],
  ['get_device', 'gateway', true, false, true, false, 'devices'],
  ['retire_device', 'gateway', false, true, true, false, 'devices'],
  ['whoami', 'gateway', true, false, true, false, 'core'],
  ['list_toolsets', 'gateway', true, false, true, false, 'core'],
  ['enable_toolsets', 'gateway', true, false, true, false, 'core'],
] as const;

describe('the tool inventory', () => {
  it('tools/list of every toolset shows exactly the pinned tools, in order, with their annotations and toolset, never a name twice', () => {
    const listed = listTools();
    expect(new Set(listed.map((t) => t.name)).size).toBe(listed.length);
    expect(
      listed.map((t) => {
        const a = t.annotations!;
        const { runsOn, toolset } = CATALOG.find((c) => c.name === t.name)!;
        return [
          t.name,
          runsOn,
          a.readOnlyHint,
          a.destructiveHint,
          a.idempotentHint,
          a.openWorldHint,
          toolset,
        ];
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
      toolset: 'core',
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
