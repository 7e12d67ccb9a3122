// The codec endpoint the Temporal UI's payloads are opened by (its "remote
// codec server" protocol: POST …/codec/decode with {payloads: [...]}). It opens
// a payload only when it belongs to the caller's team; others come back still
// sealed. The caller is the bearer token's principal, and only that: browsers
// never call it, the audit UI's guard does, with the signed-in viewer's token
// (src/dev/uiCodec.ts), so no cookie ever carries a token.
import type { Payload } from '@temporalio/common';
import type { Principal } from '../domain/types.ts';
import { sealedTeam, type TeamPayloadCodec } from '../temporal/codec.ts';

/** Payloads one decode request may carry. */
const MAX_PAYLOADS = 10_000;

interface JsonPayload {
  metadata?: Record<string, string>;
  data?: string;
}

const fromJson = (p: JsonPayload): Payload => ({
  metadata: Object.fromEntries(
    Object.entries(p.metadata ?? {}).map(([k, v]) => [k, new Uint8Array(Buffer.from(v, 'base64'))]),
  ),
  data: new Uint8Array(Buffer.from(p.data ?? '', 'base64')),
});

const toJson = (p: Payload): JsonPayload => ({
  metadata: Object.fromEntries(
    Object.entries(p.metadata ?? {}).map(([k, v]) => [
      k,
      Buffer.from(v ?? new Uint8Array()).toString('base64'),
    ]),
  ),
  data: Buffer.from(p.data ?? new Uint8Array()).toString('base64'),
});

/** Opens the payloads of the caller's team; leaves every other payload as it was. */
export function decodeForTeam(codec: TeamPayloadCodec, caller: Principal, body: unknown) {
  const payloads = (body as { payloads?: unknown })?.payloads;
  if (!Array.isArray(payloads) || payloads.length > MAX_PAYLOADS) {
    throw new Error(`expected {payloads: [...]} with at most ${MAX_PAYLOADS} payloads`);
  }
  let opened = 0;
  let withheld = 0;
  const out = payloads.map((raw: JsonPayload) => {
    const payload = fromJson(raw);
    const team = sealedTeam(payload);
    if (team === undefined) return raw;
    if (team !== caller.team) {
      withheld++;
      return raw;
    }
    opened++;
    return toJson(codec.open(payload));
  });
  return { payloads: out, opened, withheld };
}
