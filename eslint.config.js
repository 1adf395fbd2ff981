// ESLint (flat config): the layering of the design and no import cycles, plus the recommended
// JavaScript and TypeScript rules. Layers: core/ (formats, protocol, model params) imports no other
// layer; coordinator/ and workers/ import core/ and never each other, except the CLI
// (coordinator/cli/), which is the composition root and may start a worker process in-process.
// Formatting is Prettier's business (.prettierrc.json), not ESLint's.
import js from '@eslint/js';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

const layering = {
  zones: [
    {
      target: './core',
      from: ['./coordinator', './workers', './test', './bench'],
      message: 'core/ is the shared kernel: it imports no other layer.',
    },
    {
      target: './workers',
      from: ['./coordinator', './test', './bench'],
      message: 'workers/ import core/, never the coordinator.',
    },
    {
      target: ['./coordinator/*.ts', './coordinator/!(cli)/**'],
      from: ['./workers', './test', './bench'],
      message: 'coordinator/ imports core/, never workers/ (only the CLI, the composition root, may).',
    },
    // The order inside coordinator/ (bottom first): store/ (the checkpoint store) and trace/ (the
    // trace on disk) know nothing of runs; launch/ starts workers; session/ steps them; checkpoint/
    // captures and restores a session; receipt/ is the receipt format (beside trace/); diff0/
    // (replay, verify, attestation) and slurm/ sit above; cli/ is the root.
    {
      target: './coordinator/store',
      from: [
        './coordinator/launch',
        './coordinator/session',
        './coordinator/trace',
        './coordinator/checkpoint',
        './coordinator/receipt',
        './coordinator/slurm',
        './coordinator/cli',
        './coordinator/diff0',
      ],
      message: 'coordinator/store/ is the bottom: it knows nothing of workers, sessions, traces or checkpoints.',
    },
    {
      target: './coordinator/trace',
      from: [
        './coordinator/launch',
        './coordinator/session',
        './coordinator/store',
        './coordinator/checkpoint',
        './coordinator/slurm',
        './coordinator/cli',
        './coordinator/diff0',
      ],
      message: 'coordinator/trace/ is the trace on disk: it knows nothing of workers, sessions or checkpoints.',
    },
    {
      target: './coordinator/launch',
      from: [
        './coordinator/trace',
        './coordinator/checkpoint',
        './coordinator/receipt',
        './coordinator/cli',
        './coordinator/diff0',
      ],
      message: 'coordinator/launch/ starts workers: it knows nothing of traces, checkpoints or receipts.',
    },
    {
      target: './coordinator/session',
      from: ['./coordinator/checkpoint', './coordinator/cli', './coordinator/diff0'],
      message: 'coordinator/session/ steps a session; checkpoints plug in from above (RunExtension).',
    },
    {
      target: './coordinator/receipt',
      from: [
        './coordinator/launch',
        './coordinator/session',
        './coordinator/store',
        './coordinator/checkpoint',
        './coordinator/diff0',
        './coordinator/slurm',
        './coordinator/cli',
      ],
      message: 'coordinator/receipt/ is the receipt format and the ReproHash; replay and verify are diff0/.',
    },
    {
      target: './coordinator/checkpoint',
      from: ['./coordinator/receipt', './coordinator/cli', './coordinator/diff0'],
      message: 'coordinator/checkpoint/ never imports receipt/ or the CLI.',
    },
  ],
};

export default tseslint.config(
  {
    ignores: [
      '.scratch/**',
      'dist/**',
      'docs/api/**',
      'node_modules/**',
      'crates-bridge/**',
      'reports/**',
      'runs/**',
      'bench/results/**',
      'bench/.venv/**',
      'workers/python/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts', '**/*.js', '**/*.mjs'],
    plugins: { 'import-x': importX },
    settings: {
      // Dependencies are parsed as TypeScript too, or no-cycle cannot follow them.
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import-x/extensions': ['.ts', '.js', '.mjs'],
      'import-x/resolver-next': [
        createNodeResolver({ extensions: ['.ts', '.js', '.mjs', '.json'], extensionAlias: { '.js': ['.ts', '.js'] } }),
      ],
    },
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        Buffer: 'readonly',
        URL: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        setImmediate: 'readonly',
        queueMicrotask: 'readonly',
        performance: 'readonly',
        structuredClone: 'readonly',
        AbortController: 'readonly',
        AbortSignal: 'readonly',
        TextEncoder: 'readonly',
        TextDecoder: 'readonly',
      },
    },
    rules: {
      'import-x/no-restricted-paths': ['error', layering],
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      // A `let` read by a closure before its one assignment (e.g. a server an exit hook closes) stays `let`.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // `_`-prefixed names are deliberate: rest siblings that drop a field, placeholders.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true },
      ],
    },
  },
  {
    // A function budget for the product code (TigerBeetle's style uses 70): a longer function is
    // split along the phases its comments name. Tests and benches are exempt (tables of cases).
    files: ['coordinator/**/*.ts', 'core/**/*.ts', 'workers/**/*.ts'],
    rules: { 'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true }] },
  },
  {
    // A worker thread loads no gRPC code: the worker side imports core/protocol/ module by module,
    // never the barrel (which carries the gRPC link, server, TLS credentials and client), and only the
    // process entry (workers/process.ts) reaches the gRPC server. test/workers/thread-imports.test.ts
    // walks the graph; @grpc/grpc-js itself is loaded on first use (core/protocol/grpc-service.ts).
    files: ['workers/**/*.ts'],
    ignores: ['workers/process.ts', 'workers/main.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: [
                '@grpc/*',
                '**/core/protocol/index.js',
                '**/core/protocol/{grpc-link,grpc-service,server,tls,client,rendezvous}.js',
                '**/process.js',
              ],
              message:
                'a worker thread loads no gRPC: import core/protocol/ module by module (only workers/process.ts serves gRPC).',
            },
          ],
        },
      ],
    },
  },
  {
    // Tests and benchmarks poke at untyped JSON (run directories, receipts) on purpose.
    files: ['test/**', 'bench/**'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
