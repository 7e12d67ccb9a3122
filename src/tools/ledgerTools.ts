// Ledger tools served by the gateway from the evidence store.
import { z } from 'zod';
import { defineTool } from './contract.ts';

export const EVIDENCE_ID = /^ev_[0-9a-f]{64}$/;

export const getEvidence = defineTool({
  name: 'get_evidence',
  title: 'Get an Evidence record',
  description:
    'One retained Evidence record of your team: provenance, summary, collections with row counts, truncation and limitations. The complete document stays in the store.',
  input: z.strictObject({
    evidence_id: z.string().regex(EVIDENCE_ID, { error: 'evidence_id is "ev_" followed by 64 hex digits' }),
  }),
  effect: { idempotent: true, readOnly: true, destructive: false, openWorld: false, effects: [] },
  runsOn: 'gateway',
  limits: {},
  collections: {},
});
