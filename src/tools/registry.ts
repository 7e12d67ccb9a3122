// Binding contracts to behaviour, checked at load: each side (the gateway's
// handlers, the worker's effects) must bind every contract it serves exactly
// once and nothing outside the catalog, or the process refuses to start.
import type { ToolContract } from './contract.ts';

export function bindAll<B extends { contract: ToolContract }>(
  side: string,
  catalog: readonly ToolContract[],
  bindings: readonly B[],
  serves: (contract: ToolContract) => boolean,
): ReadonlyMap<string, B> {
  const byName = new Map<string, B>();
  for (const binding of bindings) {
    const { name } = binding.contract;
    if (!catalog.includes(binding.contract))
      throw new Error(`${side}: ${name} is bound but not in the catalog`);
    if (!serves(binding.contract)) throw new Error(`${side}: ${name} is bound here but does not run here`);
    if (byName.has(name)) throw new Error(`${side}: ${name} is bound twice`);
    byName.set(name, binding);
  }
  const missing = catalog.filter((c) => serves(c) && !byName.has(c.name)).map((c) => c.name);
  if (missing.length) throw new Error(`${side}: no behaviour bound for ${missing.join(', ')}`);
  return byName;
}

/** A catalog refuses two contracts of one name: strict clients reject a server that lists a name twice. */
export function catalogOf(contracts: readonly ToolContract[]): readonly ToolContract[] {
  const seen = new Set<string>();
  for (const c of contracts) {
    if (seen.has(c.name)) throw new Error(`the tool catalog lists ${c.name} twice`);
    seen.add(c.name);
  }
  return contracts;
}
