// A small static picture of a graph (frames and nodes as boxes, edges as lines), for the
// template gallery: the same ELK layout as the canvas, drawn as one SVG.
import { useEffect, useState } from "react";
import { layoutGraph, type Layout } from "./layout";
import type { GraphModel } from "./model";

interface Box {
  id: string;
  x: number;
  y: number;
  width: number;
  height: number;
  kind: string;
  group: boolean;
}

function absoluteBoxes(model: GraphModel, layout: Layout): Map<string, Box> {
  const boxes = new Map<string, Box>();
  for (const placed of layout.nodes) {
    const parent = placed.parent ? boxes.get(placed.parent) : undefined;
    const node = model.nodes.get(placed.id);
    boxes.set(placed.id, {
      id: placed.id,
      x: placed.x + (parent?.x ?? 0),
      y: placed.y + (parent?.y ?? 0),
      width: placed.width,
      height: placed.height,
      kind: node?.kind ?? "?",
      group: node?.group ?? false,
    });
  }
  return boxes;
}

export function Thumbnail({ model, label }: { model: GraphModel; label: string }) {
  const [layout, setLayout] = useState<Layout | undefined>();
  useEffect(() => {
    let cancelled = false;
    void layoutGraph(model, new Set()).then((result) => {
      if (!cancelled) setLayout(result);
    });
    return () => {
      cancelled = true;
    };
  }, [model]);
  if (!layout) return <div className="thumbnail loading" />;
  const boxes = absoluteBoxes(model, layout);
  return (
    <svg
      className="thumbnail"
      viewBox={`-8 -8 ${layout.width + 16} ${layout.height + 16}`}
      role="img"
      aria-label={`Graph of ${label}`}
      preserveAspectRatio="xMidYMin meet"
    >
      {[...boxes.values()].map((box) => (
        <rect
          key={box.id}
          x={box.x}
          y={box.y}
          width={box.width}
          height={box.height}
          rx={box.group ? 8 : box.height / 2 > 20 ? 6 : box.height / 2}
          className={`thumb-${box.group ? "frame" : box.kind}`}
        />
      ))}
      {layout.edges.map((edge) => {
        const from = boxes.get(edge.source);
        const to = boxes.get(edge.target);
        if (!from || !to) return null;
        return (
          <line
            key={edge.id}
            x1={from.x + from.width / 2}
            y1={from.y + from.height}
            x2={to.x + to.width / 2}
            y2={to.y}
            className="thumb-edge"
          />
        );
      })}
    </svg>
  );
}
