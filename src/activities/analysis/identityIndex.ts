// A built database's function identities, recorded in the team's index (the
// store), so find_identical_functions finds the same code in every artifact
// the team analysed, without opening their databases.
import type { AnalysisDatabase } from '../../analysis/database.ts';
import type { DatabaseRequest } from '../../launches/protocol.ts';
import type { Store } from '../../store/store.ts';
import { hex } from '../../analysis/queries.ts';

export async function indexIdentities(store: Store, req: DatabaseRequest, db: AnalysisDatabase) {
  const names = new Map(db.functions().map((f) => [f.address, f.name]));
  const rows = db.identities().map((i) => ({
    address: hex(i.address)!,
    identity: i.identity,
    neighbourhood: i.neighbourhood,
    name: names.get(i.address) ?? '',
  }));
  await store.functions.recordIdentities(req.team, req.artifact, req.profile, rows);
}
