// Requests the MCP SDKs refuse by their own schemas (a prompt argument that is not a string, a
// tools/call name that is a number, an unknown logging level): both SDKs throw an error without a
// JSON-RPC code there, which goes out as -32603 "Internal error" with the schema's issues dumped as
// its message. That is the caller's error, not ours: -32602, naming the fields.
import { RPC } from './surface.ts';

interface Issue {
  path?: (string | number)[];
  message?: string;
}

type Handler = (request: unknown, extra: unknown) => Promise<unknown>;
type MakeError = (code: number, message: string, data?: unknown) => Error;

/**
 * Wraps every request handler `server` holds so that its SDK's refusal of the request's shape
 * answers invalid params. Call once all handlers are set (the SDK's own, such as logging/setLevel,
 * are set by its constructor). Errors that carry a JSON-RPC code, and any other failure, pass as
 * they were.
 */
export function malformedAsInvalidParams(server: object, makeError: MakeError): void {
  const handlers = (server as { _requestHandlers?: Map<string, Handler> })._requestHandlers;
  if (!(handlers instanceof Map)) {
    // An SDK that keeps them elsewhere still serves every request: only this error's code is lost.
    warnOnce();
    return;
  }
  for (const [method, handler] of handlers) {
    handlers.set(method, async (request, extra) => {
      try {
        return await handler(request, extra);
      } catch (err) {
        const issues = schemaIssues(err);
        if (!issues) throw err;
        const named = issues
          .slice(0, 10)
          .map((i) => `${(i.path ?? []).join('.') || '(request)'}: ${i.message ?? 'invalid'}`);
        throw makeError(RPC.invalidParams, `Invalid ${method} request: ${named.join('; ')}`, {
          issues: issues.slice(0, 10).map((i) => ({ path: (i.path ?? []).join('.'), message: i.message })),
        });
      }
    });
  }
}

let warned = false;
function warnOnce() {
  if (warned) return;
  warned = true;
  console.warn(
    'dossier: this MCP SDK keeps its request handlers elsewhere; malformed requests answer -32603',
  );
}

/** A schema's refusal without a JSON-RPC code: zod's error (SDK v1), or its issues as JSON text (v2). */
function schemaIssues(err: unknown): Issue[] | undefined {
  if (!(err instanceof Error) || typeof (err as { code?: unknown }).code === 'number') return undefined;
  const carried = (err as { issues?: unknown }).issues;
  if (err.name === 'ZodError' && Array.isArray(carried)) return carried as Issue[];
  if (!err.message.startsWith('[')) return undefined;
  try {
    const parsed = JSON.parse(err.message) as unknown;
    return Array.isArray(parsed) && parsed.length > 0 && parsed.every(isIssue) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

function isIssue(value: unknown): value is Issue {
  return (
    typeof value === 'object' &&
    value !== null &&
    Array.isArray((value as Issue).path) &&
    typeof (value as Issue).message === 'string'
  );
}
