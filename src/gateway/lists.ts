// Lists page by bytes as well as by count: a reply keeps as many entries as fit
// the reply budget and continues after the last one it kept, so a list never
// fails because its entries are large (the same rule as Evidence pages).
import { DossierError } from '../domain/errors.ts';
import type { Page } from '../domain/types.ts';

const bytesOf = (value: unknown) => Buffer.byteLength(JSON.stringify(value));

export type ListReply<F extends string, U> = Record<F, U[]> & { next_cursor: string | null };

export function fitList<F extends string, T, U = T>(
  field: F,
  page: Page<T>,
  budget: number,
  show: (item: T) => U = (item) => item as unknown as U,
): ListReply<F, U> {
  const reply = (items: U[], next: string | null) =>
    ({ [field]: items, next_cursor: next }) as ListReply<F, U>;
  const shown = page.items.map(show);
  const whole = reply(shown, page.nextCursor);
  if (bytesOf(whole) <= budget || !page.cursorAfter) return whole;
  // The envelope with the longest cursor it may carry, then entries while they fit.
  let used = bytesOf({ [field]: [], next_cursor: page.cursorAfter(shown.length - 1) }) + 64;
  let kept = 0;
  for (const item of shown) {
    used += bytesOf(item) + 1;
    if (used > budget) break;
    kept++;
  }
  // Cursors differ in length: measure the reply as it will be sent, and give back entries until it fits.
  while (kept > 0 && bytesOf(reply(shown.slice(0, kept), page.cursorAfter(kept - 1))) > budget) kept--;
  if (kept === 0) {
    throw new DossierError(
      'resource_constraint',
      `The next entry of this list is larger than the reply budget (${budget} bytes).`,
      'Raise DOSSIER_REPLY_BUDGET_BYTES, or read that entry by its id with the get_ tool.',
      { budget },
    );
  }
  return reply(shown.slice(0, kept), page.cursorAfter(kept - 1));
}
