// The audit view: the workflow list with the columns that answer "who ran
// what, on which target, and how did it end" (the tool, the principal, the
// target, the outcome), instead of the UI's default of status, workflow ID and
// run ID. Temporal's UI keeps a browser's columns in its localStorage
// (`namespace-workflow-table-columns`, by namespace); /dossier/audit sets them
// there and opens the list, with a query if one is given. Signing in lands on
// it too, and then sets the columns only where the browser has none of its own.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { SEARCH_ATTRIBUTES } from '../temporal/searchAttributes.ts';

export const AUDIT_VIEW_PATH = '/dossier/audit';

/** Temporal UI v2's key for the workflow list's columns: `{ [namespace]: [{label}, …] }`. */
export const UI_COLUMNS_KEY = 'namespace-workflow-table-columns';

/** The audit view's columns, in order: the UI's own labels and the search attributes' names. */
export const AUDIT_COLUMNS = [
  'Status',
  SEARCH_ATTRIBUTES.tool.name,
  SEARCH_ATTRIBUTES.principal.name,
  SEARCH_ATTRIBUTES.target.name,
  SEARCH_ATTRIBUTES.outcome.name,
  SEARCH_ATTRIBUTES.investigation.name,
  'Start',
  'End',
  'Workflow ID',
];

/** The sign-in's landing page when none was asked for: the audit view, keeping columns a browser chose. */
export const AUDIT_LANDING = `${AUDIT_VIEW_PATH}?keep=1`;

/**
 * The list of `namespace` the audit view opens: `query` (a Temporal list filter such as
 * `DossierOutcome = "failed"`) passed on as the UI's own `query` parameter.
 */
export function auditListPath(namespace: string, query?: string | null): string {
  const list = `/namespaces/${encodeURIComponent(namespace)}/workflows`;
  return query ? `${list}?${new URLSearchParams({ query })}` : list;
}

/** Serves the page that sets the audit columns for `namespace` in the browser and opens the list. */
export function auditViewPage(req: IncomingMessage, res: ServerResponse, namespace: string) {
  const params = new URLSearchParams((req.url ?? '').split('?')[1] ?? '');
  const query = params.get('query');
  const settings = {
    key: UI_COLUMNS_KEY,
    namespace,
    columns: AUDIT_COLUMNS.map((label) => ({ label })),
    keep: params.get('keep') === '1',
    next: auditListPath(namespace, query && query.length <= 2_048 ? query : null),
  };
  // JSON inside a script: `<` escaped so no value can close the element.
  const data = JSON.stringify(settings).replace(/</g, '\\u003c');
  const body = `<!doctype html>
<meta charset="utf-8"><title>dossier: the audit view</title>
<p>Opening the audit view of <code>${namespace.replace(/[&<>"']/g, '')}</code>: each workflow's
tool, principal, target and outcome (<a href="${settings.next.replace(/"/g, '&quot;')}">the list</a>).</p>
<script>
const s = ${data};
let all = {};
try { all = JSON.parse(localStorage.getItem(s.key) || '{}') || {}; } catch {}
if (!(s.keep && Array.isArray(all[s.namespace]) && all[s.namespace].length)) {
  all[s.namespace] = s.columns;
  localStorage.setItem(s.key, JSON.stringify(all));
}
location.replace(s.next);
</script>`;
  res.writeHead(200, {
    'content-type': 'text/html; charset=utf-8',
    'content-length': String(Buffer.byteLength(body)),
    'cache-control': 'no-store',
  });
  res.end(req.method === 'HEAD' ? undefined : body);
}
