// Where the boxes of a pipeline's graph go: operators in columns by their
// distance from the sources (left to right, the way records flow), one
// box per subtask stacked inside its operator, edges as curves from an
// operator's right side to the next one's left. Pure: it returns the
// geometry and the view draws it as SVG.

export const SIZES = {
  margin: 12,
  subtaskWidth: 156,
  subtaskHeight: 38,
  subtaskGap: 6,
  padding: 8,
  title: 22,
  columnGap: 56,
  rowGap: 22,
};

const KIND_ORDER = { source: 0, key: 1, keyed: 2, sink: 3, side_output: 3 };

/**
 * The column of each node: the longest path to it from a node without
 * inputs; sinks and side outputs all in the column of the furthest one. A
 * graph without edges (or nodes no edge names) falls back to the kind's
 * usual place: source, key, keyed, then sinks and side outputs.
 */
export function columns(graph) {
  const ids = graph.nodes.map((n) => n.id);
  const inputs = new Map(ids.map((id) => [id, []]));
  for (const [from, to] of graph.edges) inputs.get(to)?.push(from);
  const column = new Map();
  const connected = new Set(graph.edges.flat());
  for (const node of graph.nodes) {
    if (!connected.has(node.id)) column.set(node.id, KIND_ORDER[node.kind] ?? 2);
  }
  const visiting = new Set();
  const depth = (id) => {
    if (column.has(id)) return column.get(id);
    if (visiting.has(id)) return 0; // a cycle: never from the server, but do not loop
    visiting.add(id);
    const from = inputs.get(id) ?? [];
    const d = from.length === 0 ? 0 : 1 + Math.max(...from.map(depth));
    visiting.delete(id);
    column.set(id, d);
    return d;
  };
  ids.forEach(depth);
  // Outputs line up in the last column of outputs.
  const outputs = graph.nodes.filter((n) => n.kind === 'sink' || n.kind === 'side_output');
  const last = Math.max(...outputs.map((n) => column.get(n.id)));
  for (const node of outputs) column.set(node.id, last);
  return column;
}

/** The geometry of `graph` (see `graphOf`): `{ width, height, nodes, edges }`. */
export function layoutGraph(graph, sizes = SIZES) {
  const s = sizes;
  const column = columns(graph);
  const count = Math.max(0, ...column.values()) + 1;
  const byColumn = Array.from({ length: count }, () => []);
  // Side outputs go below the main sink of their column.
  const ordered = [...graph.nodes].sort(
    (a, b) => (a.kind === 'side_output') - (b.kind === 'side_output'),
  );
  for (const node of ordered) byColumn[column.get(node.id)].push(node);
  const nodeWidth = s.subtaskWidth + 2 * s.padding;
  const heightOf = (node) => {
    const n = Math.max(1, node.subtasks.length);
    return s.title + n * s.subtaskHeight + (n - 1) * s.subtaskGap + s.padding;
  };
  const columnHeight = (nodes) =>
    nodes.reduce((sum, node) => sum + heightOf(node), 0) + Math.max(0, nodes.length - 1) * s.rowGap;
  const tallest = Math.max(0, ...byColumn.map(columnHeight));
  const placed = new Map();
  byColumn.forEach((nodes, c) => {
    const x = s.margin + c * (nodeWidth + s.columnGap);
    let y = s.margin + (tallest - columnHeight(nodes)) / 2;
    for (const node of nodes) {
      const h = heightOf(node);
      const subtasks = node.subtasks.map((subtask, i) => ({
        ...subtask,
        x: x + s.padding,
        y: y + s.title + i * (s.subtaskHeight + s.subtaskGap),
        w: s.subtaskWidth,
        h: s.subtaskHeight,
      }));
      placed.set(node.id, { ...node, x, y, w: nodeWidth, h, subtasks });
      y += h + s.rowGap;
    }
  });
  const edges = graph.edges
    .filter(([from, to]) => placed.has(from) && placed.has(to))
    .map(([from, to]) => {
      const a = placed.get(from);
      const b = placed.get(to);
      const x1 = a.x + a.w;
      const y1 = a.y + a.h / 2;
      const x2 = b.x;
      const y2 = b.y + b.h / 2;
      const bend = Math.max(20, Math.abs(x2 - x1) / 2);
      const d = `M${r(x1)} ${r(y1)} C${r(x1 + bend)} ${r(y1)} ${r(x2 - bend)} ${r(y2)} ${r(x2)} ${r(y2)}`;
      return { from, to, d };
    });
  return {
    width: r(2 * s.margin + count * nodeWidth + (count - 1) * s.columnGap),
    height: r(2 * s.margin + tallest),
    nodes: graph.nodes.map((n) => placed.get(n.id)),
    edges,
  };
}

const r = (v) => Math.round(v * 10) / 10;
