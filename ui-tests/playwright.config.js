/**
 * Playwright configuration: Galata's defaults, Debian's Chromium (no browser
 * download), one worker, against the JupyterLab that serve.py runs.
 */
const baseConfig = require('@jupyterlab/galata/lib/playwright-config');

const port = process.env.JRHW_UI_PORT || '8888';

module.exports = {
  ...baseConfig,
  reporter: [['list']],
  timeout: 180000,
  workers: 1,
  retries: 0,
  outputDir: 'test-results',
  use: {
    ...baseConfig.use,
    baseURL: `http://127.0.0.1:${port}`,
    viewport: { width: 1280, height: 800 },
    video: 'off',
    trace: 'retain-on-failure',
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium'
    }
  }
};
