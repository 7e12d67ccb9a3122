// Renders docs/tools.md from the contracts, so the reference cannot drift from the code.
import { renderFormatsTable } from './formats.ts';
import { z } from 'zod';
import { CATALOG } from './catalog.ts';
import { callSchema, isLaunchTool } from './contract.ts';
import { DEFAULT_TOOLSETS, TOOLSET_NAMES, TOOLSETS } from './toolsets.ts';

type JsonSchema = {
  properties?: Record<string, JsonSchema & { description?: string; default?: unknown }>;
  required?: string[];
  type?: string | string[];
  enum?: unknown[];
  anyOf?: JsonSchema[];
};

function typeOf(s: JsonSchema): string {
  if (s.enum) return s.enum.map((v) => JSON.stringify(v)).join(' \\| ');
  if (s.anyOf) return s.anyOf.map(typeOf).join(' \\| ');
  return Array.isArray(s.type) ? s.type.join(' \\| ') : (s.type ?? 'object');
}

export function renderToolsDoc(): string {
  const out = [
    '# Tools',
    '',
    '<!-- Generated from src/tools by `npm run docs:tools`; `npm run check` fails when it is stale. -->',
    '',
    'Every tool is one contract object in `src/tools`. Tools with effects (`idempotent: false`) are launches: they require an `idempotency_key` and accept `wait_ms` (see [idempotency.md](idempotency.md)).',
    '',
    'Besides the collections each tool lists below, any Evidence may carry `residual_unknowns` (filterable by `unknown_id`, `scope`): what the tool could not settle (a capture cut short by its timeout or a worker shutdown, a firmware region nothing could read, an analysis owner that could not be found), each also recorded as a residual unknown of the team.',
    '',
    '## Toolsets',
    '',
    `A connection lists the toolsets its URL (\`/mcp?toolsets=a,b\` or \`all\`), else its token (\`dossier token create --toolsets\`), else the server (\`DOSSIER_TOOLSETS\`, default \`${DEFAULT_TOOLSETS}\`) chose; \`core\` is always listed. Any tool is callable by name whether listed or not. \`enable_toolsets\` lists more in a session (2025-11-25 and older), which then receives \`notifications/tools/list_changed\`.`,
    '',
    '| toolset | for | tools |',
    '|---|---|---|',
    ...TOOLSET_NAMES.map(
      (t) =>
        `| \`${t}\` | ${TOOLSETS[t]} | ${CATALOG.filter((c) => c.toolset === t)
          .map((c) => `\`${c.name}\``)
          .join(', ')} |`,
    ),
    '',
    'A launch or analysis reply fits `DOSSIER_FIRST_REPLY_BYTES` (8,000 B) on the wire unless it asks for `detail: "complete"` (up to `DOSSIER_REPLY_BUDGET_BYTES`, 40,000 B); a result that does not fit comes as its summary and a `continuation` for `inspect_analysis_view`.',
    '',
    '## Every tool',
    '',
    '| tool | toolset | runs on | effects | annotations |',
    '|---|---|---|---|---|',
  ];
  for (const c of CATALOG) {
    const hints = [
      c.effect.readOnly ? 'readOnly' : '',
      c.effect.destructive ? 'destructive' : '',
      isLaunchTool(c) || c.effect.idempotent ? 'idempotent' : '',
      c.effect.openWorld ? 'openWorld' : '',
    ]
      .filter(Boolean)
      .join(', ');
    out.push(
      `| [\`${c.name}\`](#${c.name}) | ${c.toolset} | ${c.runsOn} | ${c.effect.effects.join('; ') || 'none'} | ${hints} |`,
    );
  }
  for (const c of CATALOG) {
    out.push('', `## ${c.name}`, '', `**${c.title}.** ${c.description}`, '');
    if (isLaunchTool(c))
      out.push(
        "A launch: keyed by `idempotency_key` (or the request's `idempotencyKey`), run at most once on a `" +
          c.runsOn +
          '` worker; it may run as an MCP task (`execution.taskSupport: "optional"`).' +
          (c.approval === 'process'
            ? " Before it claims a new key a human approves the exact program (form elicitation, or the cluster's policy)."
            : ''),
        '',
      );
    const schema = z.toJSONSchema(callSchema(c), { io: 'input', unrepresentable: 'any' }) as JsonSchema;
    const required = new Set(schema.required ?? []);
    out.push('| input | type | required | default | description |', '|---|---|---|---|---|');
    for (const [name, p] of Object.entries(schema.properties ?? {})) {
      const def = p.default === undefined ? '' : `\`${JSON.stringify(p.default)}\``;
      out.push(
        `| \`${name}\` | ${typeOf(p)} | ${required.has(name) ? 'yes' : ''} | ${def} | ${(p.description ?? '').replace(/\|/g, '\\|')} |`,
      );
    }
    const limits = Object.entries(c.limits);
    if (limits.length) {
      out.push('', '| bound | default | ceiling | unit |', '|---|---|---|---|');
      for (const [name, b] of limits) out.push(`| ${name} | ${b.default} | ${b.max} | ${b.unit} |`);
    }
    const collections = Object.entries(c.collections);
    if (collections.length) {
      out.push('', '| collection | rows | filterable fields |', '|---|---|---|');
      for (const [name, spec] of collections)
        out.push(
          `| \`${name}\` | ${spec.description} | ${spec.filterable.map((f) => `\`${f}\``).join(', ') || '—'} |`,
        );
    }
  }
  out.push(
    '',
    '## Formats',
    '',
    'What `extract_artifact` and `extract_firmware` read, and who reads each.',
    '',
    renderFormatsTable(),
  );
  return `${out.join('\n')}\n`;
}
