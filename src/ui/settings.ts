// Deployment settings the server writes into index.html (src/api/ui.ts).
export interface UiSettings {
  temporalUiUrl: string;
  temporalNamespace: string;
}

export const settings: UiSettings = (() => {
  try {
    return JSON.parse(document.getElementById('tgs-settings')?.textContent ?? '') as UiSettings;
  } catch {
    return { temporalUiUrl: '', temporalNamespace: 'default' };
  }
})();

/** The graph's workflow in the Temporal Web UI (a list filtered to its id: it survives continue-as-new). */
export function temporalLink(taskGraphId: string): string | undefined {
  if (!settings.temporalUiUrl) return undefined;
  const query = encodeURIComponent(`WorkflowId="task-graph/${taskGraphId}"`);
  return `${settings.temporalUiUrl}/namespaces/${encodeURIComponent(settings.temporalNamespace)}/workflows?query=${query}`;
}
