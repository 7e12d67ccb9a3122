// SSH and adb hand a command line to the device's shell: dossier sends argv
// and environment as single-quoted words, so nothing in them is interpreted.

/** One word, single-quoted for a POSIX shell. */
export function quote(word: string): string {
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/** `env -i K=V … argv…`, quoted: exactly this environment, exactly these arguments. */
export function commandLine(argv: string[], env: Record<string, string> = {}): string {
  const assignments = Object.entries(env).map(([k, v]) => quote(`${k}=${v}`));
  return ['env', '-i', ...assignments, ...argv.map(quote)].join(' ');
}
