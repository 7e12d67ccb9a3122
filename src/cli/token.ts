// `dossier token`: make, list and revoke API tokens in DOSSIER_STORE.
import { parseArgs } from 'node:util';
import { ConfigError } from '../config.ts';
import type { Role } from '../domain/types.ts';
import { clientConfig } from './stacks.ts';

/** `dossier token create|list|revoke`. */
export async function tokenCommand(args: string[]) {
  const [sub, ...rest] = args;
  const usage =
    'usage: dossier token create --principal NAME --team TEAM [--role viewer|operator|admin] [--label TEXT] [--toolsets LIST]\n' +
    '       dossier token list [--team TEAM]\n' +
    '       dossier token revoke ID';
  if (sub === 'list' || sub === 'revoke') return listOrRevoke(sub, rest);
  if (sub !== 'create') {
    console.error(usage);
    process.exitCode = 2;
    return;
  }
  return create(rest);
}

/** `token list` (by id, never the token) or `token revoke ID`. */
async function listOrRevoke(sub: 'list' | 'revoke', rest: string[]) {
  const { openStore } = await import('../store/store.ts');
  const { values, positionals } = parseArgs({
    args: rest,
    options: { team: { type: 'string' } },
    allowPositionals: true,
  });
  const store = await openStore(clientConfig().store);
  try {
    if (sub === 'list') {
      for (const t of await store.tokens.list(values.team)) {
        console.log(
          [
            t.id,
            t.principal,
            t.team,
            t.role,
            t.created_at,
            t.revoked_at ? `revoked ${t.revoked_at}` : 'live',
            t.label ?? '',
            t.toolsets ? `toolsets=${t.toolsets.join(',')}` : '',
          ]
            .join('\t')
            .trimEnd(),
        );
      }
    } else {
      const id = positionals[0];
      if (!id || !/^[0-9a-f]{8,64}$/.test(id))
        throw new ConfigError(
          [
            id
              ? `${JSON.stringify(id.slice(0, 80))} is not a token id: an id is 8 to 64 hex digits, the first column of \`dossier token list\``
              : 'the token id to revoke is required (the first column of `dossier token list`)',
          ],
          'Invalid arguments',
        );
      const n = await store.tokens.revoke(id);
      console.error(
        n === 0 ? `No live token has an id starting with ${id}.` : `Revoked ${n} token${n === 1 ? '' : 's'}.`,
      );
      if (n === 0) process.exitCode = 1;
    }
  } finally {
    await store.close();
  }
}

/** `token create`: prints the token once; only its hash is kept. */
async function create(rest: string[]) {
  const { openStore } = await import('../store/store.ts');
  const { ROLES } = await import('../store/tokens.ts');
  const { values } = parseArgs({
    args: rest,
    options: {
      principal: { type: 'string' },
      team: { type: 'string' },
      role: { type: 'string', default: 'operator' },
      label: { type: 'string' },
      toolsets: { type: 'string' },
    },
  });
  const NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;
  const problems: string[] = [];
  if (!values.principal || !NAME.test(values.principal))
    problems.push('--principal: 1-63 of a-z 0-9 . _ - is required');
  if (!values.team || !NAME.test(values.team)) problems.push('--team: 1-63 of a-z 0-9 . _ - is required');
  if (!ROLES.includes(values.role as Role)) problems.push(`--role: one of ${ROLES.join(', ')}`);
  const { parseToolsets } = await import('../tools/toolsets.ts');
  let toolsets: string[] | undefined;
  try {
    toolsets = values.toolsets === undefined ? undefined : parseToolsets(values.toolsets);
  } catch (err) {
    problems.push(`--toolsets: ${(err as Error).message}`);
  }
  if (problems.length) throw new ConfigError(problems, 'Invalid arguments to `dossier token create`');
  const config = clientConfig();
  const store = await openStore(config.store);
  try {
    const created = await store.tokens.create(
      { principal: values.principal!, team: values.team!, role: values.role as Role, toolsets },
      values.label,
    );
    console.error(
      `Token for ${values.principal} (team ${values.team}, role ${values.role}); it is shown only this once:`,
    );
    console.log(created);
  } finally {
    await store.close();
  }
}
