// The front end's lint rules: ESLint's and typescript-eslint's recommended ones, with
// formatting left to Prettier (eslint-config-prettier turns off the rules it owns).
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['lib/', 'node_modules/', 'jupyter_remote_hw/', 'ui-tests/', '**/*.js', '**/*.mjs'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  prettier,
  {
    files: ['labextension/**/*.ts'],
    rules: {
      // JupyterLab's convention: command ids in a namespace.
      '@typescript-eslint/no-namespace': 'off',
      // JSON from the server and JupyterLab's untyped corners; said, not refused.
      '@typescript-eslint/no-explicit-any': 'warn'
    }
  }
);
