// What an amend did to each node (docs/formats.md § Amend), from the nodes answer's `amend` string, one character a
// node: its code (the index here, stored in the node's flag bits 5-7: flags.ts), its name and what it means, and how
// the drawing marks it (a ring around the node: its colour and style), which the legend and the table's badge repeat.
// Pure: the shaders and node's unit tests import it.

export type RingStyle = 'none' | 'solid' | 'dashed' | 'thin' | 'faded';

export interface AmendMark {
  /** the character of the nodes answer's `amend` */
  char: string;
  name: string;
  /** what it means, for the legend's tooltip and the side panel */
  meaning: string;
  color: string;
  ring: RingStyle;
}

export const AMEND_MARKS: readonly AmendMark[] = [
  { char: '-', name: 'none', meaning: 'no amend touched it', color: '#000000', ring: 'none' },
  { char: 'c', name: 'changed', meaning: 'changed: a new task for a label whose work the amend changed', color: '#d81b60', ring: 'solid' },
  { char: 'a', name: 'added', meaning: 'added by an amend', color: '#00acc1', ring: 'solid' },
  { char: 'd', name: 'dependent', meaning: 'a new task because something it requires changed (it runs unless early cutoff keeps the old run)', color: '#d81b60', ring: 'dashed' },
  { char: 'm', name: 'metadata', meaning: 'patched in place (deadline, expires, priority, routes, tags or metadata): not run again', color: '#3949ab', ring: 'thin' },
  { char: 'k', name: 'kept', meaning: 'kept by early cutoff: what it reads came out byte-identical, so it was resolved from the run it replaces without running', color: '#202124', ring: 'dashed' },
  { char: 's', name: 'replaced', meaning: 'an old task an amend replaced or removed: no longer part of the graph', color: '#9e9e9e', ring: 'faded' },
];

/** The code of SUPERSEDED: a node that is no member any more, drawn faded. */
export const SUPERSEDED = AMEND_MARKS.findIndex((m) => m.char === 's');

/** The code of a character of the `amend` string; 0 (none) for anything else, and for an answer without the field. */
export function amendCode(ch: string | undefined): number {
  const code = ch === undefined ? 0 : AMEND_MARKS.findIndex((m) => m.char === ch);
  return code < 0 ? 0 : code;
}

/** [r, g, b] in 0..1 of each mark's colour, for the shaders. */
export function markRgb(mark: AmendMark): [number, number, number] {
  return [1, 3, 5].map((i) => parseInt(mark.color.slice(i, i + 2), 16) / 255) as [number, number, number];
}
