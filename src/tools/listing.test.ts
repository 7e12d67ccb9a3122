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

/**
 * The MCP Inspector's schema-portability check (`--cli --method tools/list
 * --strict`), rule for rule: core/json/schemaLint.ts of
 * @modelcontextprotocol/inspector 2.12.0 (bundled in clients/cli/build/index.js).
 * Findings: type-union (`type` is a list), remote-ref, untyped-schema (no
 * validation keyword, except under `not`), boolean-schema (a bare boolean where
 * a schema object is expected; allowed under additionalProperties and the like).
 * tests/e2e/conformance.test.ts runs the Inspector itself against the gateway.
 */
const BOOLEAN_VALUED = [
  'additionalProperties',
  'unevaluatedProperties',
  'additionalItems',
  'unevaluatedItems',
];
const SUBSCHEMA = ['items', 'contains', 'not', 'propertyNames', 'if', 'then', 'else', ...BOOLEAN_VALUED, 'contentSchema']; // prettier-ignore
const SUBSCHEMA_LISTS = ['allOf', 'anyOf', 'oneOf', 'prefixItems'];
const SUBSCHEMA_MAPS = ['properties', 'patternProperties', 'dependentSchemas', 'dependencies', '$defs', 'definitions']; // prettier-ignore
const CONSTRAINING = new Set([
  'type', 'enum', 'const', 'multipleOf', 'maximum', 'exclusiveMaximum', 'minimum', 'exclusiveMinimum',
  'maxLength', 'minLength', 'pattern', 'format', 'contentMediaType', 'contentEncoding', 'contentSchema',
  'maxItems', 'minItems', 'uniqueItems', 'maxContains', 'minContains', 'maxProperties', 'minProperties',
  'required', 'dependentRequired', 'allOf', 'anyOf', 'oneOf', 'not', 'items', 'prefixItems', 'contains',
  'additionalItems', 'unevaluatedItems', 'properties', 'patternProperties', 'additionalProperties',
  'unevaluatedProperties', 'propertyNames', 'dependentSchemas', 'dependencies', '$ref', '$dynamicRef', '$recursiveRef',
]); // prettier-ignore
const JSON_TYPES = new Set(['null', 'boolean', 'object', 'array', 'number', 'string', 'integer']);

function portabilityFindings(schema: unknown, at: string, out: string[], keyword?: string) {
  if (typeof schema === 'boolean') {
    if (keyword === undefined || !BOOLEAN_VALUED.includes(keyword)) out.push(`${at}: boolean-schema`);
    return;
  }
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return;
  const node = schema as Record<string, unknown>;
  const type = node.type;
  if (
    Array.isArray(type) &&
    type.length &&
    type.every((t) => JSON_TYPES.has(t)) &&
    new Set(type).size === type.length
  )
    out.push(`${at}: type-union ${JSON.stringify(type)}`);
  if (typeof node.$ref === 'string' && node.$ref !== '' && !node.$ref.startsWith('#'))
    out.push(`${at}: remote-ref`);
  const constrains =
    Object.keys(node).some((k) => CONSTRAINING.has(k)) ||
    ('if' in node && ('then' in node || 'else' in node));
  if (!constrains && keyword !== 'not') out.push(`${at}: untyped-schema`);
  for (const key of SUBSCHEMA_MAPS)
    if (typeof node[key] === 'object' && node[key] !== null && !Array.isArray(node[key]))
      for (const [name, sub] of Object.entries(node[key] as object))
        portabilityFindings(sub, `${at}.${key}.${name}`, out, key);
  for (const key of SUBSCHEMA_LISTS)
    if (Array.isArray(node[key]))
      (node[key] as unknown[]).forEach((sub, i) => portabilityFindings(sub, `${at}.${key}[${i}]`, out, key));
  for (const key of SUBSCHEMA)
    if (key in node)
      if (key === 'items' && Array.isArray(node.items))
        node.items.forEach((sub, i) => portabilityFindings(sub, `${at}.items[${i}]`, out, key));
      else portabilityFindings(node[key], `${at}.${key}`, out, key);
}

describe('schemas', () => {
  it('every input and output schema passes the Inspector’s portability check: 0 findings', () => {
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
