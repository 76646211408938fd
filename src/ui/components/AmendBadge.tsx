// An amend mark (src/ui/graph/amendMarks.ts) outside the drawing: the legend's ring, drawn as the node's, and the
// table's and the side panel's badge. Both say what the mark means on hover.
import type { AmendMark } from '../graph/amendMarks';

export function AmendRing({ mark }: { mark: AmendMark }) {
  const style = mark.ring === 'dashed' || mark.ring === 'faded' ? 'dashed' : 'solid';
  const width = mark.ring === 'thin' || mark.ring === 'faded' ? 2 : 3;
  return <i class={`ring ring-${mark.ring}`} style={{ border: `${width}px ${style} ${mark.color}` }} />;
}

export function AmendBadge({ mark }: { mark: AmendMark }) {
  return (
    <span class="amend-badge" data-mark={mark.name} title={mark.meaning} style={{ color: mark.color, borderColor: mark.color }}>
      {mark.name}
    </span>
  );
}
