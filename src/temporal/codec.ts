// Temporal holds no secret in clear: every payload dossier hands it (workflow
// inputs with env values and stdin, activity results, heartbeat details,
// failure messages) is sealed with AES-256-GCM by this codec. Each team has
// its own key, derived from the cluster's master key with HKDF, and the team
// a payload belongs to (from the workflow ID in the codec's serialization
// context) is written beside it and authenticated with it. So the gateway's
// codec endpoint can open a payload for the team it belongs to, and only that
// team.
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Payload, PayloadCodec, SerializationContext } from '@temporalio/common';
import proto from '@temporalio/proto';
import { parsePayloadKeys, type PayloadKey } from './keys.ts';

export { parsePayloadKeys, type PayloadKey } from './keys.ts';

const { Payload: PayloadMessage } = proto.temporal.api.common.v1;

export const ENCODING = 'binary/encrypted';
const KEY_ID = 'encryption-key-id';
const TEAM = 'dossier-team';
/** Payloads outside any team's workflow (none are expected): only an admin of no team could read them. */
export const NO_TEAM = '';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The team a workflow belongs to, from its ID: `launch/<team>/…`, `analysis/<team>/…`. */
export function teamOfWorkflow(workflowId: string | undefined): string {
  return /^[a-z-]+\/([a-z0-9][a-z0-9._-]{0,62})\//.exec(workflowId ?? '')?.[1] ?? NO_TEAM;
}

/** The team a sealed payload belongs to (undefined when it is not sealed by this codec). */
export function sealedTeam(payload: Payload): string | undefined {
  const metadata = payload.metadata ?? {};
  if (decoder.decode(metadata.encoding ?? new Uint8Array()) !== ENCODING) return undefined;
  return decoder.decode(metadata[TEAM] ?? new Uint8Array());
}

export class TeamPayloadCodec implements PayloadCodec {
  private readonly teamKeys = new Map<string, Buffer>();

  /** `keys[0]` seals; every key opens (so keys can be rotated). */
  constructor(private readonly keys: PayloadKey[]) {
    if (keys.length === 0) throw new Error('the payload codec needs at least one key');
  }

  async encode(payloads: Payload[], context?: SerializationContext): Promise<Payload[]> {
    // A standalone activity (no workflow) is named by the launch's ID, which names its team.
    const team = teamOfWorkflow(
      context?.workflowId ?? (context?.type === 'activity' ? context.activityId : undefined),
    );
    return payloads.map((p) => this.seal(p, team));
  }

  async decode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((p) => this.open(p));
  }

  seal(payload: Payload, team: string): Payload {
    const key = this.keys[0]!;
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.teamKey(key, team), iv);
    cipher.setAAD(encoder.encode(`${key.id}\0${team}`));
    const plain = PayloadMessage.encode(payload).finish();
    const sealed = Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
    return {
      metadata: {
        encoding: encoder.encode(ENCODING),
        [KEY_ID]: encoder.encode(key.id),
        [TEAM]: encoder.encode(team),
      },
      data: sealed,
    };
  }

  /** Opens a sealed payload (any other payload passes through unchanged). */
  open(payload: Payload): Payload {
    const team = sealedTeam(payload);
    if (team === undefined) return payload;
    const id = decoder.decode(payload.metadata![KEY_ID] ?? new Uint8Array());
    const key = this.keys.find((k) => k.id === id);
    if (!key) throw new Error(`no payload key with id "${id}" is configured (DOSSIER_PAYLOAD_KEYS)`);
    const data = Buffer.from(payload.data ?? new Uint8Array());
    const decipher = createDecipheriv('aes-256-gcm', this.teamKey(key, team), data.subarray(0, 12));
    decipher.setAAD(encoder.encode(`${key.id}\0${team}`));
    decipher.setAuthTag(data.subarray(data.length - 16));
    const plain = Buffer.concat([decipher.update(data.subarray(12, data.length - 16)), decipher.final()]);
    return PayloadMessage.decode(plain) as Payload;
  }

  private teamKey(key: PayloadKey, team: string): Buffer {
    const cacheKey = `${key.id}\0${team}`;
    let derived = this.teamKeys.get(cacheKey);
    if (!derived) {
      derived = Buffer.from(hkdfSync('sha256', key.secret, 'dossier', `payload:${team}`, 32));
      this.teamKeys.set(cacheKey, derived);
    }
    return derived;
  }
}

/**
 * The configured keys, or the embedded stack's own: made once under
 * DOSSIER_HOME (0600) and shared by every gateway and worker of that home.
 */
export function payloadKeys(configured: PayloadKey[], home: string): PayloadKey[] {
  if (configured.length > 0) return configured;
  const file = path.join(home, 'payload.key');
  if (!existsSync(file)) {
    mkdirSync(home, { recursive: true, mode: 0o700 });
    try {
      writeFileSync(file, `local:${randomBytes(32).toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  return parsePayloadKeys(readFileSync(file, 'utf8'));
}
