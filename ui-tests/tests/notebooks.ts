/**
 * Notebooks the UI tests open: one code cell, on the kernel its metadata names (which
 * JupyterLab then starts as the notebook opens).
 */

/** The JSON of a notebook with one code cell `source` whose kernelspec is `kernel`. */
export function notebookOn(kernel: string, source: string): string {
  return JSON.stringify({
    cells: [{ cell_type: 'code', execution_count: null, metadata: {}, outputs: [], source }],
    metadata: { kernelspec: { name: kernel, display_name: 'Python 3', language: 'python' } },
    nbformat: 4,
    nbformat_minor: 5
  });
}
