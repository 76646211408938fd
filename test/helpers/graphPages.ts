import slugid from 'slugid';
import type { NodePage } from '../../src/workflows/contract.js';

export interface NodeSpec {
  label: string;
  requires?: string[];
  reruns?: number;
  member?: boolean;
  allResolved?: boolean;
  queueState?: 'u' | 'p' | 'r' | 'c' | 'f' | 'e';
  latestRun?: number;
}

/** Builds the page loadNodes would return for these nodes, with fresh taskIds. */
export function pageFor(specs: NodeSpec[], fromIdx = 0, known = new Map<string, number>()): { page: NodePage; ids: Map<string, string> } {
  const ids = new Map<string, string>();
  const idx = new Map(known);
  specs.forEach((s, k) => {
    ids.set(s.label, slugid.nice());
    idx.set(s.label, fromIdx + k);
  });
  const withStates = specs.some((s) => s.queueState !== undefined);
  const page: NodePage = {
    fromIdx,
    taskIds: specs.map((s) => ids.get(s.label)).join(''),
    members: specs.map((s) => (s.member === false ? '0' : '1')).join(''),
    modes: specs.map((s) => (s.allResolved ? '1' : '0')).join(''),
    requireCounts: specs.map((s) => (s.requires ?? []).length),
    requires: specs.flatMap((s) => (s.requires ?? []).map((r) => idx.get(r) as number)),
    rerunsLeft: specs.map((s) => s.reruns ?? 0),
    labels: specs.map((s) => (s.member === false ? '' : s.label)),
  };
  if (withStates) {
    page.queueStates = specs.map((s) => s.queueState ?? 'u').join('');
    page.latestRuns = specs.map((s) => s.latestRun ?? (s.queueState && s.queueState !== 'u' ? 0 : -1));
  }
  return { page, ids };
}

/** The nodes [from, to) of a page, as loadNodes returns them when asked for that range. */
export function slicePage(page: NodePage, from: number, to: number): NodePage {
  const edgesBefore = (k: number) => page.requireCounts.slice(0, k).reduce((a, b) => a + b, 0);
  return {
    fromIdx: page.fromIdx + from,
    taskIds: page.taskIds.slice(from * 22, to * 22),
    members: page.members.slice(from, to),
    modes: page.modes.slice(from, to),
    requireCounts: page.requireCounts.slice(from, to),
    requires: page.requires.slice(edgesBefore(from), edgesBefore(to)),
    rerunsLeft: page.rerunsLeft.slice(from, to),
    labels: page.labels.slice(from, to),
    ...(page.queueStates ? { queueStates: page.queueStates.slice(from, to), latestRuns: page.latestRuns?.slice(from, to) } : {}),
  };
}
