// What tools/list costs an agent's context and whether every client can read
// it: the default session's size, schemas a single-type dialect accepts, and a
// launch's output schema that every shape of its reply validates against (the
// SDK clients check structured content against it).
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { describe, expect, it } from 'vitest';
import { listTools } from './listing.ts';
import { CATALOG } from './catalog.ts';
import { outputJsonSchema } from './outputs.ts';
import { DEFAULT_TOOLSETS, parseToolsets, TOOLSET_NAMES } from './toolsets.ts';

/** tools/list of every tool before toolsets (issue 31): 36 tools, 101,994 bytes. */
const BEFORE_BYTES = 101_994;
const bytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v));

describe('toolsets', () => {
  it('the default session lists core and analysis in at most a quarter of the bytes every tool took', () => {
    const listed = listTools(parseToolsets(DEFAULT_TOOLSETS));
    expect(new Set(listed.map((t) => CATALOG.find((c) => c.name === t.name)!.toolset))).toEqual(
      new Set(['core', 'analysis']),
    );
    expect(bytes({ tools: listed })).toBeLessThanOrEqual(BEFORE_BYTES / 4);
    // Every toolset together is still the whole catalog, in its order.
    expect(listTools(parseToolsets('all')).map((t) => t.name)).toEqual(CATALOG.map((c) => c.name));
  });

  it('a choice is read in one canonical order with core always in it; an unknown name is refused by name', () => {
    expect(parseToolsets('devices, analysis')).toEqual(['core', 'analysis', 'devices']);
    expect(parseToolsets('ALL')).toEqual(TOOLSET_NAMES);
    expect(parseToolsets('core')).toEqual(['core']);
    expect(() => parseToolsets('analysis,gpu')).toThrow(/unknown toolset "gpu": expected core, analysis/);
    expect(() => parseToolsets(' , ')).toThrow(/expected toolsets/);
    // The same choice lists the same tools in the same order, however it was spelt.
    expect(listTools(parseToolsets('devices,analysis'))).toBe(listTools(parseToolsets('analysis,devices')));
  });
});

/** The Inspector's schema-portability rules (its schemaLint), for every schema node. */
function portabilityFindings(schema: unknown, at: string, out: string[]) {
  if (typeof schema === 'boolean') return void out.push(`${at}: a bare boolean schema`);
  if (typeof schema !== 'object' || schema === null) return;
  const node = schema as Record<string, unknown>;
  if (Array.isArray(node.type)) out.push(`${at}: type is a list ${JSON.stringify(node.type)}`);
  if (typeof node.$ref === 'string' && !node.$ref.startsWith('#')) out.push(`${at}: remote $ref`);
  const constraining = [
    'type', 'enum', 'const', 'anyOf', 'oneOf', 'allOf', 'not', 'properties', 'items', 'additionalProperties',
    'patternProperties', 'required', '$ref', 'minimum', 'maximum', 'pattern', 'format', 'minLength', 'maxLength',
  ]; // prettier-ignore
  if (!Object.keys(node).some((k) => constraining.includes(k))) out.push(`${at}: accepts anything`);
  for (const key of ['properties', 'patternProperties', '$defs'])
    for (const [name, sub] of Object.entries((node[key] as object) ?? {}))
      portabilityFindings(sub, `${at}.${key}.${name}`, out);
  for (const key of ['anyOf', 'oneOf', 'allOf', 'prefixItems'])
    (node[key] as unknown[] | undefined)?.forEach((sub, i) =>
      portabilityFindings(sub, `${at}.${key}[${i}]`, out),
    );
  for (const key of ['items', 'not', 'propertyNames', 'contains'])
    if (key in node) portabilityFindings(node[key], `${at}.${key}`, out);
  // additionalProperties: false is how a strict object refuses unknown fields.
  if (typeof node.additionalProperties === 'object')
    portabilityFindings(node.additionalProperties, `${at}.additionalProperties`, out);
}

describe('schemas', () => {
  it('every input and output schema is portable: no type lists, nothing that accepts anything', () => {
    const findings: string[] = [];
    for (const t of listTools()) {
      portabilityFindings(t.inputSchema, `${t.name}.inputSchema`, findings);
      if (t.outputSchema) portabilityFindings(t.outputSchema, `${t.name}.outputSchema`, findings);
      expect(t.inputSchema).not.toHaveProperty('$schema');
    }
    expect(findings).toEqual([]);
  });

  it('only launches list an output schema, and every shape of a launch reply validates against it', () => {
    const withSchema = listTools().filter((t) => t.outputSchema);
    expect(withSchema.map((t) => t.name)).toEqual(
      CATALOG.filter((c) => !c.effect.idempotent).map((c) => c.name),
    );
    const validate = new AjvJsonSchemaValidator().getValidator(
      outputJsonSchema(CATALOG.find((c) => c.name === 'capture_process_scenario')!)!,
    );
    const launch = {
      idempotency_key: 'k',
      workflow_id: 'launch/t/p/k',
      run_id: null,
      tool: 'capture_process_scenario',
      principal: 'p',
      attached: false,
      started_at: '2026-12-02T00:00:00.000Z',
      ui_url: 'http://ui',
    };
    const error = { code: 'invalid_params', category: 'input', message: 'm', retryable: false, remediation: 'r', details: {} }; // prettier-ignore
    const shapes = [
      { status: 'running', launch, progress: { stdout_bytes: 10 } },
      { status: 'succeeded', launch, evidence_id: 'ev_1', summary: { exit_code: 0 }, detail: 'complete', result: { document: {}, collections: { stdout: [] } }, truncated: false, limitations: [] }, // prettier-ignore
      { status: 'succeeded', launch, evidence_id: 'ev_1', summary: { exit_code: 0 }, detail: 'summary', collections: { stdout: { rows: 9 } }, truncated: false, limitations: [], complete_bytes: 99_999, continuation: { kind: 'page', collection: 'stdout', offset: 0, limit: 32 } }, // prettier-ignore
      { status: 'succeeded', launch, evidence_id: 'ev_1', detail: 'summary', summary_omitted: '9,000 bytes' }, // prettier-ignore
      { status: 'failed', launch, error, evidence_id: 'ev_1' },
      { error },
    ];
    for (const shape of shapes) expect(validate(shape), JSON.stringify(shape)).toMatchObject({ valid: true });
    expect(validate({ status: 'exploded' }).valid).toBe(false);
  });
});
