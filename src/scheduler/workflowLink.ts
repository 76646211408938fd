import type { Config } from '../config.js';

/**
 * The way back from Temporal to tgs: every graph workflow tgs starts carries its graph page's URL, in its memo
 * (`tgsGraphPage`, which Temporal copies to the next run at continue-as-new, so every run of the workflow has it) and
 * as a Markdown link in its static details (the Temporal Web UI shows it on the workflow's page, under its summary;
 * static details belong to the run they were given to, so a continued run shows the memo only). Set where the
 * workflow is started (src/scheduler/startWorkflow.ts, resumeGraph.ts): the workflow code never needs it.
 */
export const GRAPH_PAGE_MEMO = 'tgsGraphPage';

/** The graph's page in the web UI (docs/ui.md). */
export const graphPageUrl = (rootUrl: string, taskGraphId: string) => `${rootUrl.replace(/\/+$/, '')}/ui/task-graph/${taskGraphId}`;

/** The memo entry and the static details that link a graph's workflow to its page. */
export function graphPageLink(config: Pick<Config, 'rootUrl'>, taskGraphId: string): { memo: Record<string, string>; staticDetails: string } {
  const url = graphPageUrl(config.rootUrl, taskGraphId);
  return { memo: { [GRAPH_PAGE_MEMO]: url }, staticDetails: `[Open task-graph ${taskGraphId} in tgs](${url})` };
}
