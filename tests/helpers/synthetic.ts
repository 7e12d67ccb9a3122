// A synthetic feature trace shaped like the seed's problem case: N references
// whose owners are all unavailable, a few matches, one residual unknown per
// unavailable owner. The last two references are identical on purpose.
import type { NewEvidence } from '../../src/domain/types.ts';

export function syntheticTrace(
  references: number,
  team = 't',
  principal = 'alice',
  owners = 2_000,
): NewEvidence {
  const hex = (n: number) => `0x${n.toString(16)}`;
  const refs = Array.from({ length: references }, (_, i) => ({
    source_address: hex(0x400000 + i * 4),
    target_addresses: [hex(0x500000 + (i % 97) * 16), ...(i % 5 === 0 ? [hex(0x600000)] : [])],
    owner: `sub_${i % owners}`,
    owner_status: 'unavailable',
    kind: i % 3 === 0 ? 'call' : 'data',
  }));
  if (references >= 2) refs[references - 1] = { ...refs[references - 2]! };
  const matches = [
    { type: 'string', value: 'license_key', address: hex(0x700000) },
    { type: 'string', value: 'LICENSE_KEY', address: hex(0x700100) },
    { type: 'string', value: 'trial', address: hex(0x700200) },
    { type: 'procedure', value: 'check_license', address: hex(0x401000) },
  ];
  const distinctOwners = Math.min(owners, references);
  return {
    record: {
      tool: 'trace_feature',
      provider: { name: 'synthetic', version: '1' },
      parameters: { query: 'license', references },
      parameters_digest: 'synthetic',
      target: { digest: 'sha256:synthetic', path: '/targets/app' },
      principal,
      team,
      investigation: 'inv-license',
      launch: null,
      created_at: '2026-11-30T00:00:00.000Z',
      summary: { references: references, matches: matches.length, owners_unavailable: distinctOwners },
      truncated: true,
      limitations: ['the provider capped references at the requested count'],
    },
    document: { query: 'license', search_mode: 'literal' },
    collections: { references: refs, matches },
    filterable: { references: ['target_addresses', 'owner', 'kind'], matches: ['type'] },
    unknowns: Array.from({ length: distinctOwners }, (_, i) => ({
      question: `Which procedure contains the references attributed to sub_${i}?`,
      scope: `owner sub_${i}`,
    })),
  };
}
