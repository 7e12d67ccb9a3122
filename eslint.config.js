// Lint rules that catch real mistakes, and keep every import arrow pointing
// down the layers of docs/architecture.md; formatting is prettier's job.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// The layers, lowest first. A layer imports only from the layers before it (and
// itself); config.ts is composition but its types may be read anywhere.
const LAYERS = [
  ['domain', ['domain']],
  ['metrics', ['metrics']],
  ['tools', ['domain', 'tools']],
  ['temporal', ['domain', 'temporal']],
  ['sandbox', ['domain', 'metrics', 'sandbox']],
  ['store', ['domain', 'metrics', 'store']],
  ['python', ['domain', 'python']],
  ['analysis', ['domain', 'sandbox', 'python', 'analysis']],
  ['devices', ['domain', 'sandbox', 'temporal', 'devices']],
  ['evidence', ['domain', 'tools', 'sandbox', 'store', 'evidence']],
  ['launches', ['domain', 'tools', 'launches']],
  ['workflows', ['domain', 'launches', 'temporal', 'workflows']],
  [
    'activities',
    [
      'domain',
      'metrics',
      'tools',
      'temporal',
      'sandbox',
      'store',
      'python',
      'analysis',
      'devices',
      'evidence',
      'launches',
      'activities',
    ],
  ],
  [
    'gateway',
    [
      'domain',
      'metrics',
      'tools',
      'temporal',
      'sandbox',
      'store',
      'python',
      'analysis',
      'devices',
      'evidence',
      'launches',
      'gateway',
    ],
  ],
  ['views', ['domain', 'tools', 'gateway', 'views']],
  ['mcp', ['domain', 'metrics', 'tools', 'temporal', 'store', 'gateway', 'views', 'mcp']],
];
const ALL = [
  'domain',
  'metrics',
  'tools',
  'temporal',
  'sandbox',
  'store',
  'python',
  'analysis',
  'devices',
  'evidence',
  'launches',
  'workflows',
  'activities',
  'gateway',
  'views',
  'mcp',
  'dev',
  'cli',
];
const TOP = ['compose', 'worker'];

// Workflow code runs in Temporal's deterministic sandbox: no I/O, no clocks, no Node built-ins.
const WORKFLOW_EXTRA = [
  {
    group: ['node:*'],
    message: 'Workflows are deterministic: no Node built-ins; all I/O lives in src/activities.',
  },
  {
    group: ['**/codec.ts', '**/dataConverter.ts', '**/setup.ts'],
    message: 'Workflows import only the pure parts of src/temporal (queues, search attribute names).',
  },
];

const layerRules = LAYERS.map(([layer, allowed]) => ({
  files: [`src/${layer}/**/*.ts`],
  rules: {
    '@typescript-eslint/no-restricted-imports': [
      'error',
      {
        patterns: [
          ...(layer === 'workflows' ? WORKFLOW_EXTRA : []),
          {
            group: [
              ...ALL.filter((l) => !allowed.includes(l)).map((l) => `**/${l}/*`),
              ...TOP.map((f) => `**/${f}.ts`),
            ],
            message: `src/${layer} may import only from ${allowed.join(', ')} (docs/architecture.md, "Layers").`,
          },
          {
            group: ['**/config.ts'],
            allowTypeImports: true,
            message: 'Below the composition layer, read the configuration as a type only.',
          },
        ],
      },
    ],
  },
}));

export default tseslint.config(
  {
    ignores: ['node_modules', '.dossier', 'coverage', 'dist', '**/*.d.ts', 'tests/conformance/node_modules'],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-console': 'off',
    },
  },
  {
    // Files a newcomer can hold in their head.
    files: ['src/**/*.ts'],
    ignores: ['src/**/*.test.ts'],
    // Every line counts, as `wc -l` counts them; a declarative table (generated rows) may opt out.
    rules: {
      'max-lines': ['error', { max: 400, skipBlankLines: false, skipComments: false }],
      'max-lines-per-function': [
        'error',
        { max: 100, skipBlankLines: false, skipComments: false, IIFEs: true },
      ],
    },
  },
  ...layerRules,
  {
    files: ['**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: { require: 'readonly', exports: 'writable' } },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // The Views' scripts run in the host's sandboxed iframe (src/views/apps.ts inlines them).
    files: ['src/views/**/*.js'],
    rules: {
      'no-redeclare': ['error', { builtinGlobals: false }],
      // Each script is one IIFE (the file itself); the functions inside it are held to 100 lines.
      'max-lines-per-function': [
        'error',
        { max: 100, skipBlankLines: false, skipComments: false, IIFEs: false },
      ],
    },
    languageOptions: {
      sourceType: 'script',
      globals: Object.fromEntries(
        [
          ...['window', 'document', 'console', 'setTimeout', 'ResizeObserver'],
          // What bridge.js defines for the View scripts inlined after it.
          ...['dossierHost', 'h', 'svg', 'formatBytes', 'showError', 'allRows'],
        ].map((g) => [g, 'readonly']),
      ),
    },
  },
  {
    files: ['bin/**/*.js', 'scripts/**/*.mjs'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly', performance: 'readonly' } },
  },
);
