// The annotation tools: writes with compare-and-swap, history and revert, the
// team's log, what earlier builds offer through diffs, and identical
// functions across artifacts. Every read and write is the caller's team's.
import {
  annotationId,
  applyPatch,
  canonicalAddress,
  EMPTY_FIELDS,
  fieldsOf,
  isEmpty,
  type Annotation,
  type AnnotationKey,
  type AnnotationPatch,
  type AnnotationRevision,
} from '../domain/annotations.ts';
import { DossierError } from '../domain/errors.ts';
import type { Principal } from '../domain/types.ts';
import type { WriteResult } from '../store/annotations.ts';
import type { Store } from '../store/store.ts';
import { effectiveAnnotations, suggestedAnnotations } from './carried.ts';
import { fitList } from './lists.ts';
import { encodeCursor } from '../store/rows.ts';

const replyBytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value));

type Stores = Pick<Store, 'annotations' | 'functions' | 'artifacts'>;

export interface ItemInput {
  artifact: string;
  function?: string;
  address?: string;
  type_name?: string;
}

const TYPE_NAME = /^[A-Za-z_][A-Za-z0-9_ :<>,*&[\]]{0,255}$/;

/** A revision as the history and the log show it (the item's id and key once, on the reply). */
const shown = (r: AnnotationRevision) => r;

/** A function reference that is an address ("0x401136", "4198710") or angr's "sub_401136", canonical. */
export function functionAddress(ref: string): string | undefined {
  if (/^sub_[0-9a-f]+$/.test(ref)) return canonicalAddress(ref.replace(/^sub_/, '0x'));
  return canonicalAddress(ref);
}

/**
 * The address of the one function of `artifact` the team named `name` (undefined: none is); two
 * or more so named are the caller's to tell apart, by address.
 */
export async function teamFunction(
  stores: Pick<Store, 'annotations'>,
  team: string,
  artifact: string,
  name: string,
): Promise<string | undefined> {
  const named = (await stores.annotations.named(team, artifact, name)).filter((a) => a.kind === 'function');
  if (named.length <= 1) return named[0]?.item;
  throw new DossierError(
    'invalid_params',
    `${named.length} functions of this artifact are named "${name}" by your team.`,
    'Name the function by its address, as list_functions shows it ("0x401136").',
    { function: name, addresses: named.map((a) => a.item) },
  );
}

export class Knowledge {
  constructor(
    private readonly stores: Stores,
    private readonly replyBudgetBytes: number,
  ) {}

  /**
   * The item an input names. A write needs the artifact to be one of the team's; a read
   * answers from the team's annotations alone (a bundle may bring them before the binary).
   */
  async key(caller: Principal, input: ItemInput, write = false): Promise<AnnotationKey> {
    if (write && !(await this.stores.artifacts.get(caller.team, input.artifact))) {
      throw new DossierError(
        'not_found',
        `No artifact ${input.artifact} is registered for your team.`,
        'list_artifacts shows your team’s artifacts.',
        { artifact: input.artifact },
      );
    }
    if (input.type_name !== undefined) {
      if (!TYPE_NAME.test(input.type_name))
        throw new DossierError(
          'invalid_params',
          `"${input.type_name}" is not a type name.`,
          'Name a type as C does ("struct licence", "uint32_t").',
        );
      return { artifact: input.artifact, kind: 'type', item: input.type_name.replace(/\s+/g, ' ') };
    }
    if (input.address !== undefined) {
      const at = canonicalAddress(input.address);
      if (!at) throw notAnAddress(input.address);
      return { artifact: input.artifact, kind: 'address', item: at };
    }
    const ref = input.function!;
    const item = functionAddress(ref) ?? (await teamFunction(this.stores, caller.team, input.artifact, ref));
    if (item) return { artifact: input.artifact, kind: 'function', item };
    throw new DossierError(
      'not_found',
      `No function of this artifact is named "${ref}" by your team.`,
      'Name the function by its address, as list_functions shows it ("0x401136").',
      { function: ref, addresses: [] },
    );
  }

  async set(
    caller: Principal,
    input: ItemInput &
      AnnotationPatch & {
        expected_revision: number;
        accepts?: { artifact: string; address: string; revision: number };
      },
  ) {
    const key = await this.key(caller, input, true);
    const {
      artifact: _a,
      function: _f,
      address: _d,
      type_name: _t,
      expected_revision,
      accepts,
      ...patch
    } = input;
    if (patch.variables && key.kind !== 'function')
      throw new DossierError('invalid_params', 'Only a function has variables.', 'Drop variables.');
    if (expected_revision === 0 && isEmpty(applyPatch(EMPTY_FIELDS, patch)))
      throw new DossierError(
        'invalid_params',
        'This write sets nothing.',
        'Pass at least one of name, comment, type, tags, note, variables.',
      );
    const source = accepts && (await this.accepted(caller, accepts));
    const result = await this.stores.annotations.write(
      caller.team,
      caller.principal,
      key,
      expected_revision,
      patch,
      {
        origin: 'write',
        ...(source ? { source } : {}),
      },
    );
    return this.answer(key, expected_revision, result);
  }

  /** The suggestion a write accepts must be an annotation revision the team has. */
  private async accepted(caller: Principal, a: { artifact: string; address: string; revision: number }) {
    const address = canonicalAddress(a.address);
    if (!address) throw notAnAddress(a.address);
    const source = { artifact: a.artifact, kind: 'function' as const, item: address, revision: a.revision };
    if (!(await this.stores.annotations.revision(caller.team, annotationId(source), a.revision)))
      throw new DossierError(
        'not_found',
        `Your team has no revision ${a.revision} of an annotation on ${address} of ${a.artifact}.`,
        'Pass `accepts` as the suggestion gave it (get_annotation, list_carried_annotations).',
      );
    return source;
  }

  async revert(caller: Principal, input: ItemInput & { to_revision: number; expected_revision: number }) {
    const key = await this.key(caller, input, true);
    const old = await this.stores.annotations.revision(caller.team, annotationId(key), input.to_revision);
    if (!old)
      throw new DossierError(
        'not_found',
        `This annotation has no revision ${input.to_revision}.`,
        'get_annotation shows its revisions.',
        { annotation_id: annotationId(key), to_revision: input.to_revision },
      );
    const result = await this.stores.annotations.write(
      caller.team,
      caller.principal,
      key,
      input.expected_revision,
      fieldsOf(old),
      { origin: 'revert', revertedTo: input.to_revision },
    );
    return this.answer(key, input.expected_revision, result);
  }

  private answer(key: AnnotationKey, expected: number, result: WriteResult) {
    if (result.outcome !== 'conflict')
      return { annotation: result.annotation, changed: result.outcome === 'applied' };
    const current = result.annotation;
    const changes = result.since.map((r) => ({
      revision: r.revision,
      changed: r.changed,
      changed_by: r.changed_by,
      changed_at: r.changed_at,
      origin: r.origin,
    }));
    const who = changes.map(
      (c) => `${c.changed_by} changed ${c.changed.join(', ') || 'nothing'} (revision ${c.revision})`,
    );
    throw new DossierError(
      'revision_conflict',
      `The annotation on ${key.kind} ${key.item} is at revision ${current?.revision ?? 0}, not ${expected}: ${who.join('; ') || 'it changed'}. Nothing was changed.`,
      'Read it again (get_annotation), reconcile your change with the newer revision, and write again with its revision as expected_revision.',
      {
        annotation_id: annotationId(key),
        expected_revision: expected,
        current_revision: current?.revision ?? 0,
        current: current ? fieldsOf(current) : null,
        changes_since: changes,
      },
    );
  }

  async get(caller: Principal, input: ItemInput & { history_limit: number; before_revision?: number }) {
    const key = await this.key(caller, input);
    const id = annotationId(key);
    const annotation = (await this.stores.annotations.get(caller.team, key)) ?? null;
    const history = await this.stores.annotations.history(caller.team, id, {
      beforeRevision: input.before_revision,
      limit: input.history_limit + 1,
    });
    const carried =
      key.kind === 'function'
        ? {
            propagated: annotation
              ? null
              : ((await effectiveAnnotations(this.stores, caller.team, key.artifact, [key.item])).get(
                  key.item,
                ) ?? null),
            suggestions:
              (await suggestedAnnotations(this.stores, caller.team, key.artifact, [key.item])).get(
                key.item,
              ) ?? [],
          }
        : { propagated: null, suggestions: [] };
    const suggestions = carried.suggestions.map((s) => ({
      ...fieldsOf(s.annotation),
      from: s.from,
      similarity: s.similarity,
      confidence: s.confidence,
    }));
    const reply = (h: AnnotationRevision[], offered: number) => ({
      annotation_id: id,
      ...key,
      annotation,
      propagated: carried.propagated && {
        ...fieldsOf(carried.propagated.annotation),
        from: carried.propagated.propagated_from,
      },
      suggestions: suggestions.slice(0, offered),
      ...(offered < suggestions.length
        ? { more_suggestions: `${suggestions.length - offered} more: list_carried_annotations shows them` }
        : {}),
      history: h.map(shown),
      // The next page starts after the last revision shown, or at the first when none fit.
      next_before_revision:
        h.length < history.length ? (h.length ? h[h.length - 1]!.revision : history[0]!.revision + 1) : null,
    });
    // What does not fit goes: the oldest revisions of this page but one (they come on the next), then
    // suggestions. The annotation and one revision always fit (ANNOTATION_FIELDS_BYTES).
    let kept = history.slice(0, input.history_limit);
    let offered = suggestions.length;
    const over = () => replyBytes(reply(kept, offered)) > this.replyBudgetBytes;
    while (kept.length > 1 && over()) kept = kept.slice(0, -1);
    while (offered > 0 && over()) offered--;
    return reply(kept, offered);
  }

  async list(
    caller: Principal,
    input: { artifact: string; kind?: Annotation['kind']; tag?: string; cursor?: string; limit: number },
  ) {
    return fitList(
      'annotations',
      await this.stores.annotations.list(caller.team, input),
      this.replyBudgetBytes,
    );
  }

  async events(caller: Principal, input: { artifact?: string; cursor?: string; limit: number }) {
    return fitList('events', await this.stores.annotations.events(caller.team, input), this.replyBudgetBytes);
  }

  /** A page of the functions of an artifact that diffs linked to earlier builds, with what those offer. */
  async carried(caller: Principal, input: { artifact: string; cursor?: string; limit: number }) {
    const after = decodeAfter(input.cursor, input.artifact);
    const links = await this.stores.functions.linksPage(caller.team, input.artifact, after, input.limit);
    const addresses = links.items.map((l) => l.address);
    const [effective, suggested] = await Promise.all([
      effectiveAnnotations(this.stores, caller.team, input.artifact, addresses),
      suggestedAnnotations(this.stores, caller.team, input.artifact, addresses),
    ]);
    const items = [...new Set(addresses)].flatMap((address) => {
      const e = effective.get(address);
      const propagated = e?.propagated_from
        ? [{ address, kind: 'propagated', ...fieldsOf(e.annotation), from: e.propagated_from }]
        : [];
      const suggestions = (suggested.get(address) ?? []).map((s) => ({
        address,
        kind: 'suggested',
        ...fieldsOf(s.annotation),
        from: s.from,
        similarity: s.similarity,
        confidence: s.confidence,
      }));
      return [...propagated, ...suggestions];
    });
    const last = links.items[links.items.length - 1];
    const next = links.more && last ? encodeCursor([input.artifact, last.address, 'carried']) : null;
    const reply = { carried: items, links_read: links.items.length, next_cursor: next };
    if (replyBytes(reply) > this.replyBudgetBytes)
      throw new DossierError(
        'resource_constraint',
        `This page of carried annotations is over the reply budget (${this.replyBudgetBytes} bytes).`,
        'Ask for a smaller limit.',
      );
    return reply;
  }

  /** The team's functions with the same identity as one function, or as an identity given. */
  async identical(
    caller: Principal,
    input: { artifact?: string; function?: string; identity?: string; limit: number },
  ) {
    let identity = input.identity;
    if (!identity) {
      const key = await this.key(caller, { artifact: input.artifact!, function: input.function! });
      const at = await this.stores.functions.at(caller.team, key.artifact, key.item);
      if (!at)
        throw new DossierError(
          'not_found',
          `Your team’s analyses know no function at ${key.item} of ${key.artifact}.`,
          'Analyse the artifact first (list_functions); identities are recorded when its analysis database is built.',
          { artifact: key.artifact, function: key.item },
        );
      identity = at.identity;
    }
    const { functions, more } = await this.stores.functions.withIdentity(caller.team, identity, input.limit);
    const byArtifact = new Map<string, string[]>();
    for (const f of functions) byArtifact.set(f.artifact, [...(byArtifact.get(f.artifact) ?? []), f.address]);
    const names = new Map<string, Awaited<ReturnType<typeof effectiveAnnotations>>>();
    for (const [artifact, at] of byArtifact)
      names.set(artifact, await effectiveAnnotations(this.stores, caller.team, artifact, at));
    return {
      identity,
      functions: functions.map((f) => {
        const e = names.get(f.artifact)?.get(f.address);
        return {
          artifact: f.artifact,
          address: f.address,
          profile: f.profile,
          provider_name: f.name,
          name: e?.annotation.name ?? f.name,
          ...(e
            ? {
                annotation: {
                  revision: e.annotation.revision,
                  by: e.annotation.updated_by,
                  propagated_from: e.propagated_from,
                },
              }
            : {}),
        };
      }),
      more,
    };
  }
}

/** A carried-annotations cursor continues the same artifact's list, after an address. */
function decodeAfter(cursor: string | undefined, artifact: string): string {
  if (!cursor) return '';
  try {
    const [a, after, kind] = JSON.parse(Buffer.from(cursor, 'base64url').toString()) as string[];
    if (a === artifact && kind === 'carried' && typeof after === 'string') return after;
  } catch {
    // refused below
  }
  throw new DossierError(
    'invalid_params',
    'The cursor is not one this list issued for this artifact.',
    'Pass next_cursor from the previous page unchanged, or omit it to start from the first page.',
  );
}

function notAnAddress(text: string) {
  return new DossierError(
    'invalid_params',
    `"${text}" is not an address.`,
    'Pass an address such as "0x401136" (as list_functions and find_strings show them).',
  );
}
