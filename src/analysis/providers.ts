// The provider that answers an analysis tool, by the key its results are
// stored under: YARA-X for rule scans, angr for everything else. A new
// provider (or a new version of dossier's script for it) is a new key, so its
// answers are made anew rather than mixed with the old ones.
import { rulesEngineKey } from '../python/rules.ts';
import { providerKey } from './venv.ts';

export const RULE_SCAN_TOOL = 'scan_with_rules';

export function providerKeyOf(tool: string): string {
  return tool === RULE_SCAN_TOOL ? rulesEngineKey() : providerKey();
}
