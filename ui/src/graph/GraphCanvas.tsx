// Draws a graph model with React Flow after laying it out with ELK; frames collapse and expand
// on demand, and run states and diagnostics are painted on without a new layout.
import {
  Background,
  Controls,
  MarkerType,
  ReactFlow,
  ReactFlowProvider,
  useReactFlow,
  useStore,
  type Edge,
} from "@xyflow/react";
import { useCallback, useEffect, useMemo, useState } from "react";
import type { Diagnostic } from "../api/types";
import type { NodeRunState } from "../run/state";
import { defaultCollapsed, layoutGraph, type Layout } from "./layout";
import type { GraphModel } from "./model";
import { edgeTypes } from "./edges";
import { drawnType, nodeTypes, type DrawnNode } from "./nodes";

export interface GraphCanvasProps {
  model: GraphModel;
  states?: Map<string, NodeRunState>;
  /** Diagnostics by node id. */
  pins?: Map<string, Diagnostic[]>;
  selected?: string;
  onSelect?: (id: string | undefined) => void;
  /** Ids to expand on request (e.g. a pinned node deep in a collapsed frame). */
  reveal?: string[];
}

const EDGE_LABEL_MAX = 34;
/** The smallest zoom the first view uses when the page is wide enough for it. */
const MIN_START_ZOOM = 0.75;

function shortLabel(label: string | undefined): string | undefined {
  if (!label) return undefined;
  return label.length > EDGE_LABEL_MAX ? `${label.slice(0, EDGE_LABEL_MAX - 1)}…` : label;
}

function Canvas({ model, states, pins, selected, onSelect, reveal }: GraphCanvasProps) {
  const [collapsed, setCollapsed] = useState<Set<string>>(() => defaultCollapsed(model));
  const [layout, setLayout] = useState<Layout | undefined>();
  const [layoutError, setLayoutError] = useState<string | undefined>();
  const flow = useReactFlow();

  useEffect(() => setCollapsed(defaultCollapsed(model)), [model]);

  useEffect(() => {
    if (!reveal || reveal.length === 0) return;
    setCollapsed((current) => {
      const next = new Set(current);
      for (const id of reveal) {
        let parent = model.nodes.get(id)?.parent;
        while (parent) {
          next.delete(parent);
          parent = model.nodes.get(parent)?.parent;
        }
      }
      return next.size === current.size ? current : next;
    });
  }, [reveal, model]);

  useEffect(() => {
    let cancelled = false;
    layoutGraph(model, collapsed)
      .then((result) => {
        if (!cancelled) {
          setLayout(result);
          setLayoutError(undefined);
        }
      })
      .catch((error: unknown) => {
        if (!cancelled) setLayoutError(String(error));
      });
    return () => {
      cancelled = true;
    };
  }, [model, collapsed]);

  // Fit the whole graph, unless that makes it unreadable: then start readable, at the top.
  const canvasWidth = useStore((store) => store.width);
  const canvasHeight = useStore((store) => store.height);
  useEffect(() => {
    if (!layout || canvasWidth === 0 || canvasHeight === 0) return;
    const fit = Math.min(1.1, (canvasWidth * 0.94) / layout.width, (canvasHeight * 0.94) / layout.height);
    const zoom = Math.max(fit, Math.min(MIN_START_ZOOM, (canvasWidth * 0.94) / layout.width));
    const x = Math.max(8, (canvasWidth - layout.width * zoom) / 2);
    const y = fit >= zoom ? (canvasHeight - layout.height * zoom) / 2 : 12;
    void flow.setViewport({ x, y, zoom });
  }, [layout, flow, canvasWidth, canvasHeight]);

  const toggle = useCallback((id: string) => {
    setCollapsed((current) => {
      const next = new Set(current);
      if (next.has(id)) next.delete(id);
      else next.add(id);
      return next;
    });
  }, []);

  const nodes = useMemo<DrawnNode[]>(() => {
    if (!layout) return [];
    return layout.nodes.flatMap((placed) => {
      const node = model.nodes.get(placed.id);
      if (!node) return [];
      return [
        {
          id: placed.id,
          type: drawnType(node),
          position: { x: placed.x, y: placed.y },
          width: placed.width,
          height: placed.height,
          parentId: placed.parent,
          draggable: false,
          connectable: false,
          selectable: true,
          zIndex: node.group ? 0 : 1,
          data: {
            node,
            run: states?.get(placed.id),
            pins: pins?.get(placed.id),
            collapsed: placed.collapsed,
            selected: selected === placed.id,
            onToggle: toggle,
          },
        },
      ];
    });
  }, [layout, model, states, pins, selected, toggle]);

  const edges = useMemo<Edge[]>(() => {
    if (!layout) return [];
    return layout.edges.map((edge) => ({
      id: edge.id,
      source: edge.source,
      target: edge.target,
      type: edge.label ? "labelled" : "smoothstep",
      label: shortLabel(edge.label),
      data: { fullLabel: edge.label },
      className: `edge-${edge.kind}`,
      markerEnd: { type: MarkerType.ArrowClosed, width: 14, height: 14 },
      zIndex: 2,
    }));
  }, [layout]);

  if (layoutError) return <div className="error-box">Layout failed: {layoutError}</div>;
  return (
    <ReactFlow
      nodes={nodes}
      edges={edges}
      nodeTypes={nodeTypes}
      edgeTypes={edgeTypes}
      nodesDraggable={false}
      nodesConnectable={false}
      elementsSelectable
      minZoom={0.05}
      maxZoom={2.5}
      onlyRenderVisibleElements
      proOptions={{ hideAttribution: true }}
      onNodeClick={(_, node) => onSelect?.(node.id)}
      onPaneClick={() => onSelect?.(undefined)}
    >
      <Background gap={24} size={1} />
      <Controls showInteractive={false} />
    </ReactFlow>
  );
}

export function GraphCanvas(props: GraphCanvasProps) {
  return (
    <div className="graph-canvas" data-testid="graph-canvas">
      <ReactFlowProvider>
        <Canvas {...props} />
      </ReactFlowProvider>
    </div>
  );
}
