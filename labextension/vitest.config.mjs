import { defineConfig } from 'vitest/config';

// Unit tests of the panel's models (no JupyterLab, no browser).
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    environment: 'node'
  }
});
