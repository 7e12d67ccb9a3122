// What the audit UI shows a signed-in team: its own workflows and nothing of
// another team's. Pure: decides, for one request the UI's browser makes to the
// UI server's API (Temporal's HTTP API under /api/v1), whether it passes, in
// which canonical form, and whether its reply must be filtered. The guard
// (uiGuard.ts) forwards only the form decided here, never the raw request,
// so the UI server reads exactly what was checked.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { workflowOwner } from '../launches/keys.ts';

/** The longest list query a browser may send, in characters. */
export const MAX_UI_QUERY_CHARS = 2_000;

export type ScopedRequest =
  | {
      /** Path and query to send the UI server, canonical. */
      forward: string;
      /**
       * The reply is a workflow list: keep only the team's executions; or a history page: seal its
       * page token to `bound` (the team and the workflow it pages), as `PageTokens` does.
       */
      filter?: 'executions' | 'history';
      bound?: string;
    }
  | { refuse: number; message: string };

/** Query parameters each kind of API read may carry; any other is dropped. */
const PARAMS = {
  none: [],
  list: ['query', 'pageSize', 'page_size', 'nextPageToken', 'next_page_token'],
  count: ['query'],
  describe: ['execution.runId', 'execution.run_id'],
  history: [
    'execution.runId',
    'execution.run_id',
    'maximumPageSize',
    'maximum_page_size',
    'nextPageToken',
    'next_page_token',
    'waitNewEvent',
    'wait_new_event',
    'historyEventFilterType',
    'history_event_filter_type',
    'skipArchival',
    'skip_archival',
  ],
  taskQueue: [
    'taskQueueType',
    'task_queue_type',
    'includeTaskQueueStatus',
    'include_task_queue_status',
    'apiMode',
    'api_mode',
    'reportPollers',
    'report_pollers',
    'reportStats',
    'report_stats',
    'reportTaskReachability',
    'report_task_reachability',
  ],
} as const satisfies Record<string, readonly string[]>;

const deny = (message: string): ScopedRequest => ({ refuse: 403, message });

/**
 * The page tokens of history reads, as the guard hands them out and takes them back. Temporal's
 * own token names a run and its history branch, and the server reads the branch it names whatever
 * workflow the path names: a token is taken back only for the team and workflow it was given for.
 */
export interface PageTokens {
  seal(token: string, bound: string): string;
  /** The token sealed for `bound`, or undefined for any other. */
  open(sealed: string, bound: string): string | undefined;
}

/** Page tokens sealed with an HMAC under `key` (the guard's own, random at each start). */
export function pageTokens(key: Buffer): PageTokens {
  const mac = (token: string, bound: string) =>
    createHmac('sha256', key).update(bound).update('\0').update(token).digest();
  return {
    seal: (token, bound) => `${mac(token, bound).toString('base64url')}.${token}`,
    open(sealed, bound) {
      const dot = sealed.indexOf('.');
      if (dot < 0) return undefined;
      const token = sealed.slice(dot + 1);
      const given = Buffer.from(sealed.slice(0, dot), 'base64url');
      const wanted = mac(token, bound);
      return given.length === wanted.length && timingSafeEqual(given, wanted) ? token : undefined;
    },
  };
}

/** Pages of the UI server that render what a link gives them (HTML on this origin): not served. */
const RENDERS_INPUT = ['render'];

/**
 * Decides one GET or HEAD to the UI server for `team`, whose launches live in `namespace`.
 * `url` is the request target as received (raw path and query).
 */
export function scopeUiRequest(
  url: string,
  team: string,
  namespace: string,
  tokens: PageTokens,
): ScopedRequest {
  // Origin-form only: an absolute URL or `//` would be read one way here and another upstream.
  if (!url.startsWith('/') || url.startsWith('//'))
    return { refuse: 400, message: 'The request target must be a path.' };
  const q = url.indexOf('?');
  const rawPath = q < 0 ? url : url.slice(0, q);
  const params = new URLSearchParams(q < 0 ? '' : url.slice(q + 1));
  let segments: string[];
  try {
    segments = rawPath.split('/').slice(1).map(decodeURIComponent);
  } catch {
    return { refuse: 400, message: 'The path is not valid percent-encoding.' };
  }
  if (segments.some((s) => s === '.' || s === '..'))
    return { refuse: 400, message: 'The path may not hold "." or ".." segments.' };
  if (segments.slice(0, -1).some((s) => s === ''))
    return { refuse: 400, message: 'The path may not hold empty segments.' };
  // The UI's pages and assets hold no data: they pass, in canonical form. A first segment that
  // could be read as the API's (in another case, or holding a slash) passes nowhere.
  const head = segments[0]!;
  if (head !== 'api') {
    if (head.toLowerCase() === 'api' || head.includes('/') || RENDERS_INPUT.includes(head))
      return { refuse: 400, message: 'That path is not one the audit UI serves.' };
    return { forward: canonical(segments, params) };
  }
  if (segments[1] !== 'v1') return deny('Only the UI server API v1 is served here.');
  const api = segments.slice(2);
  const pass = (allowed: readonly string[]): ScopedRequest => ({
    forward: canonical(segments, keep(params, allowed)),
  });
  const [first, ns, kind, id, ...rest] = api;
  if (api.length === 1 && (first === 'settings' || first === 'cluster-info' || first === 'system-info'))
    return pass(PARAMS.none);
  if (first !== 'namespaces') return deny(`/api/v1/${first ?? ''} is not part of the audit UI.`);
  if (api.length === 1) return pass(['pageSize', 'page_size', 'nextPageToken', 'next_page_token']);
  if (ns !== namespace) return deny(`Only the namespace ${namespace} is audited here.`);
  if (api.length === 2) return pass(PARAMS.none);
  if (api.length === 3 && kind === 'search-attributes') return pass(PARAMS.none);
  if (api.length === 3 && (kind === 'workflows' || kind === 'workflow-count')) {
    const query = teamQuery(team, params.get('query') ?? '', kind === 'workflow-count');
    if ('refuse' in query) return query;
    const scoped = keep(params, kind === 'workflows' ? PARAMS.list : PARAMS.count);
    scoped.set('query', query.query);
    return kind === 'workflows'
      ? { forward: canonical(segments, scoped), filter: 'executions' }
      : { forward: canonical(segments, scoped) };
  }
  if (api.length === 4 && kind === 'task-queues') return pass(PARAMS.taskQueue);
  if (kind === 'workflows' && id !== undefined) {
    if (workflowOwner(id)?.team !== team) return deny('That workflow is not your team’s.');
    if (rest.length === 0) return pass(PARAMS.describe);
    if (rest.length === 1 && (rest[0] === 'history' || rest[0] === 'history-reverse'))
      return historyPage(
        segments,
        keep(params, PARAMS.history),
        `${team}\n${namespace}\n${id}\n${rest[0]}`,
        tokens,
      );
    // The UI server's own route for a run's whole history as a file.
    if (rest.length === 3 && rest[0] === 'run' && rest[2] === 'history.json') return pass(PARAMS.none);
  }
  return deny(`${kind ?? 'That'} is not part of the audit UI.`);
}

/** A history page read: the page token the browser holds is taken back only when sealed for it. */
function historyPage(
  segments: string[],
  params: URLSearchParams,
  bound: string,
  tokens: PageTokens,
): ScopedRequest {
  for (const name of ['nextPageToken', 'next_page_token']) {
    const sealed = params.get(name);
    if (sealed === null) continue;
    const token = tokens.open(sealed, bound);
    if (token === undefined)
      return {
        refuse: 400,
        message: 'That page token was not handed out for this history here; load the history from its start.',
      };
    params.set(name, token);
  }
  return { forward: canonical(segments, params), filter: 'history', bound };
}

/** The path from its decoded segments, each encoded again, and the kept parameters. */
function canonical(segments: string[], params: URLSearchParams): string {
  const path = `/${segments.map(encodeURIComponent).join('/')}`;
  const query = params.toString();
  return query ? `${path}?${query}` : path;
}

/** The allowed parameters, each once (the last value given), in a fresh list. */
function keep(params: URLSearchParams, allowed: readonly string[]): URLSearchParams {
  const out = new URLSearchParams();
  for (const name of allowed) {
    const values = params.getAll(name);
    if (values.length) out.set(name, values[values.length - 1]!);
  }
  return out;
}

/**
 * The browser's list query, narrowed to `team`'s workflows: `DossierTeam = 'team' AND (query)`.
 * The query must be one expression: closed quotes, balanced parentheses, no comment or statement
 * break that could end the group early; a count may end in `GROUP BY ExecutionStatus`.
 */
export function teamQuery(
  team: string,
  query: string,
  count: boolean,
): { query: string } | { refuse: number; message: string } {
  const bad = (why: string) => ({
    refuse: 400,
    message: `The list query ${why}; the audit UI shows only your team's workflows and takes one filter expression.`,
  });
  if (query.length > MAX_UI_QUERY_CHARS) return bad(`is over ${MAX_UI_QUERY_CHARS} characters`);
  const teamClause = `DossierTeam = '${team}'`;
  let expression = query.trim();
  let groupBy = '';
  const grouped = count ? /^(.*?)\s*\bGROUP\s+BY\s+ExecutionStatus\s*$/is.exec(expression) : null;
  if (grouped) {
    expression = grouped[1]!;
    groupBy = ' GROUP BY ExecutionStatus';
  }
  const why = oneExpression(expression);
  if (why) return bad(why);
  return { query: `${expression ? `${teamClause} AND (${expression})` : teamClause}${groupBy}` };
}

/** Why `text` is not one self-contained filter expression, or undefined when it is. */
function oneExpression(text: string): string | undefined {
  // Backslashes are refused everywhere, in quotes too: parsers disagree on whether they escape.
  if (text.includes('\\')) return 'holds a backslash';
  // So are line breaks and other control characters: a line comment ends at a newline.
  if ([...text].some((c) => c < ' ' || c === '\x7f')) return 'holds a control character';
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === "'" || c === '"' || c === '`') {
      // A quoted string or name, where a doubled quote is one quote.
      let j = i + 1;
      for (; j < text.length; j++) {
        if (text[j] === c) {
          if (text[j + 1] === c) j++;
          else break;
        }
      }
      if (j >= text.length) return 'leaves a quote open';
      i = j;
      continue;
    }
    if (c === '(') depth++;
    else if (c === ')' && --depth < 0) return 'closes a parenthesis it did not open';
    // `@@name` is a name to the parser that may hold quotes; no search attribute holds an `@`.
    else if (c === ';' || c === '#' || c === '@') return `holds "${c}" outside quotes`;
    // Every comment Temporal's query parser knows (`--`, `#`, `//`, `/* */`), outside quotes.
    else if (
      (c === '-' && text[i + 1] === '-') ||
      (c === '/' && (text[i + 1] === '*' || text[i + 1] === '/')) ||
      (c === '*' && text[i + 1] === '/')
    )
      return 'holds a comment';
  }
  return depth === 0 ? undefined : 'leaves a parenthesis open';
}

/**
 * A workflow list reply with only `team`'s executions in it (by the owner their IDs name), and
 * nothing else of the reply. A page token goes on only when no row was dropped: it encodes the
 * page's last row, which would be another team's.
 */
export function ownExecutions(reply: unknown, team: string): unknown {
  const { executions, nextPageToken } = (reply ?? {}) as { executions?: unknown; nextPageToken?: unknown };
  const rows = Array.isArray(executions) ? executions : [];
  const kept = rows.filter(
    (e: { execution?: { workflowId?: unknown } }) =>
      typeof e?.execution?.workflowId === 'string' && workflowOwner(e.execution.workflowId)?.team === team,
  );
  return {
    executions: kept,
    ...(kept.length === rows.length && nextPageToken ? { nextPageToken } : {}),
  };
}
