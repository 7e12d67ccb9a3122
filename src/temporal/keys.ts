// The cluster's payload keys as configuration reads them. Kept apart from the
// codec so that reading the configuration (every CLI command) loads nothing
// of Temporal.

export interface PayloadKey {
  id: string;
  /** 32 bytes. */
  secret: Buffer;
}

/** Parses DOSSIER_PAYLOAD_KEYS: `id:base64-of-32-bytes`, comma-separated, the first sealing. */
export function parsePayloadKeys(value: string): PayloadKey[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((entry) => {
      const [id, secret] = entry.split(':');
      const bytes = Buffer.from(secret ?? '', 'base64');
      if (!id || !/^[A-Za-z0-9._-]{1,64}$/.test(id) || bytes.length !== 32) {
        throw new Error(
          'expected id:base64 entries whose secret is 32 bytes, e.g. k1:<44 base64 characters>',
        );
      }
      return { id, secret: bytes };
    });
}
