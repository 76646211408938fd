import type { Queryable } from '../db/pool.js';
import type { CutoffSpec } from './earlyCutoff.js';

/** What a node's mark (graph_nodes.amended) says. */
export const AMENDED_CLASS = { c: 'changed', a: 'added', d: 'dependent', m: 'metadata' } as const;

/** One node the last amend touched, as `graph why` and inspect state it. */
export interface AmendedNode {
  label: string;
  taskId: string;
  amended: (typeof AMENDED_CLASS)[keyof typeof AMENDED_CLASS];
  /** the early cutoff: decided ("kept: build's outputs unchanged"), or what it waits for */
  cutoff?: string;
}

/** The last amend of a graph and what it did, node by node (at most `limit` nodes, in node order). */
export interface LastAmend {
  amend: number;
  who: string;
  created: string;
  nodes: AmendedNode[];
  omittedNodes: number;
}

/** A cutoff as people read it: its decision, or what it waits for. */
export function cutoffNote(cutoff: Pick<CutoffSpec, 'inputs' | 'outcome'> | null): string | undefined {
  if (!cutoff) return undefined;
  return cutoff.outcome?.reason ?? `kept if ${cutoff.inputs.map((i) => i.label).join(', ')} come(s) out with the same outputs, else rerun`;
}

/** The graph's last amend, or undefined if it was never amended. Two indexed reads. */
export async function lastAmend(db: Queryable, taskGraphId: string, limit: number): Promise<LastAmend | undefined> {
  const { rows: amends } = await db.query<{ seq: number; who: string; created: Date }>(
    'SELECT seq, who, created FROM graph_amends WHERE task_graph_id = $1 ORDER BY seq DESC LIMIT 1',
    [taskGraphId],
  );
  if (!amends[0]) return undefined;
  const { rows } = await db.query<{ label: string; task_id: string; amended: keyof typeof AMENDED_CLASS; cutoff: CutoffSpec | null; total: number }>(
    `SELECT label, task_id, amended::text AS amended, cutoff, count(*) OVER ()::int AS total FROM graph_nodes
      WHERE task_graph_id = $1 AND member AND amended IS NOT NULL ORDER BY idx LIMIT $2`,
    [taskGraphId, limit],
  );
  const nodes = rows.map((r) => {
    const cutoff = cutoffNote(r.cutoff);
    return { label: r.label, taskId: r.task_id, amended: AMENDED_CLASS[r.amended], ...(cutoff ? { cutoff } : {}) };
  });
  return { amend: amends[0].seq, who: amends[0].who, created: amends[0].created.toISOString(), nodes, omittedNodes: Math.max(0, (rows[0]?.total ?? 0) - rows.length) };
}
