import tseslint from 'typescript-eslint';
import { builtinModules } from 'node:module';

const nodeBuiltins = [...builtinModules, ...builtinModules.map((m) => `node:${m}`)];

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'ui/dist/**', 'bench/results/**'] },
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': ['error', {
        allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['test', 'it', 'describe', 'suite'] }],
      }],
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // Workflow code runs in Temporal's deterministic sandbox: no I/O, no Node built-ins, and nothing of the
    // activities (their contract is src/workflows/activityContract.ts). src/taskStates.ts is in the workflow bundle too.
    files: ['src/workflows/**/*.ts', 'src/taskStates.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        paths: nodeBuiltins.map((name) => ({ name, message: 'Workflow code must not use Node built-ins (determinism).' })),
        patterns: [{ group: ['../activities/*', '../activities'], message: 'Workflows call activities through src/workflows/activityContract.ts.' }],
      }],
    },
  },
);
