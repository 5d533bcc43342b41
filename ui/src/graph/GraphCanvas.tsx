// Draws a graph model with React Flow after laying it out with ELK; frames collapse and expand
// on demand, and run states, the path taken and diagnostics are painted on without a new layout.
// The first view of each layout is fitted once; opening the inspector or selecting a node never
// moves it. Nodes are reached with Tab and opened with Enter or Space.
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
import { useCallback, useEffect, useMemo, useRef, useState, type KeyboardEvent } from "react";
import type { Diagnostic } from "../api/types";
import { edgeTaken } from "../run/outcome";
import type { NodeRunState } from "../run/state";
import { edgeTypes, type RoutedData } from "./edges";
import { defaultCollapsed } from "./collapse";
import { layoutGraph, shortLabel, type Layout } from "./layout";
import type { GraphModel } from "./model";
import { drawnType, nodeTypes, stateWords, type DrawnNode } from "./nodes";

export interface GraphCanvasProps {
  model: GraphModel;
  states?: Map<string, NodeRunState>;
  /** Diagnostics by node id. */
  pins?: Map<string, Diagnostic[]>;
  selected?: string;
  onSelect?: (id: string | undefined) => void;
  /** Ids to expand on request (e.g. a pinned node deep in a collapsed frame). */
  reveal?: string[];
  /** A new model of the same document (an edit) keeps the frames opened or closed as they were. */
  keepCollapsed?: boolean;
}

/** Text is 12 px or more: the first view never zooms below this, so it reads at 12 px or more. */
const MIN_START_ZOOM = 1;
const MAX_START_ZOOM = 1.15;

function backEdgeLabel(label: string | undefined, run: NodeRunState | undefined, max: number | undefined): string | undefined {
  if (!run || run.rounds === 0) return label;
  return `round ${run.rounds} of max ${max ?? "?"}`;
}

function Canvas({ model, states, pins, selected, onSelect, reveal, keepCollapsed }: GraphCanvasProps) {
  const [collapsed, setCollapsed] = useState<Set<string>>(() => defaultCollapsed(model));
  const [layout, setLayout] = useState<Layout | undefined>();
  const [layoutError, setLayoutError] = useState<string | undefined>();
  const flow = useReactFlow();

  const seeded = useRef(false);
  useEffect(() => {
    const keep = keepCollapsed && seeded.current;
    seeded.current = true;
    setCollapsed((current) => (keep ? new Set([...current].filter((id) => model.nodes.get(id)?.group)) : defaultCollapsed(model)));
  }, [model, keepCollapsed]);

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
        if (!cancelled) setLayoutError(error instanceof Error ? error.message : String(error));
      });
    return () => {
      cancelled = true;
    };
  }, [model, collapsed]);

  // Fit each new layout once, readable first: when the whole graph does not fit at a readable
  // zoom, start at that zoom at its left edge. Later resizes (the inspector opening) keep the view.
  const canvasWidth = useStore((store) => store.width);
  const canvasHeight = useStore((store) => store.height);
  const fitted = useRef<Layout | undefined>(undefined);
  /** Set by "Expand all" / "Collapse groups": the next layout is fitted whole. */
  const fitWhole = useRef(false);
  useEffect(() => {
    if (!layout || canvasWidth === 0 || canvasHeight === 0 || fitted.current === layout) return;
    const firstFit = fitted.current === undefined;
    fitted.current = layout;
    if (fitWhole.current) {
      fitWhole.current = false;
      void flow.fitView({ padding: 0.04, maxZoom: MAX_START_ZOOM });
      return;
    }
    if (!firstFit) return;
    const fit = Math.min(MAX_START_ZOOM, (canvasWidth * 0.94) / layout.width, (canvasHeight * 0.94) / layout.height);
    const zoom = Math.max(fit, MIN_START_ZOOM);
    const x = fit >= zoom ? (canvasWidth - layout.width * zoom) / 2 : 16;
    const y = fit >= zoom ? (canvasHeight - layout.height * zoom) / 2 : Math.max(12, (canvasHeight - layout.height * zoom) / 2);
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
  const allOpen = collapsed.size === 0;
  // A graph small enough to show whole has nothing to collapse: no button then.
  const collapsible = useMemo(() => defaultCollapsed(model).size > 0, [model]);
  const toggleAll = useCallback(() => {
    fitWhole.current = true;
    setCollapsed((current) => (current.size === 0 ? defaultCollapsed(model) : new Set()));
  }, [model]);

  const nodes = useMemo<DrawnNode[]>(() => {
    if (!layout) return [];
    return layout.nodes.flatMap((placed) => {
      const node = model.nodes.get(placed.id);
      if (!node) return [];
      const run = states?.get(placed.id);
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
          // A card or pill is named by its own text; a frame by what it is and how it stands.
          ariaLabel: node.group ? `${node.kind} ${node.name}${run ? `, ${stateWords(run)}` : ""}` : undefined,
          ariaRole: node.group ? "group" : "button",
          data: {
            node,
            run,
            pins: pins?.get(placed.id),
            collapsed: placed.collapsed,
            selected: selected === placed.id,
            onToggle: toggle,
          },
        },
      ];
    });
  }, [layout, model, states, pins, selected, toggle]);

  const edges = useMemo<Edge<RoutedData>[]>(() => {
    if (!layout) return [];
    return layout.edges.map((edge) => {
      const taken = edgeTaken(model, edge, states);
      const label =
        edge.kind === "back"
          ? backEdgeLabel(edge.label, edge.loop ? states?.get(edge.loop) : undefined, edge.loop ? model.nodes.get(edge.loop)?.maxIterations : undefined)
          : shortLabel(edge.label);
      return {
        id: edge.id,
        source: edge.source,
        target: edge.target,
        type: "routed",
        label,
        data: { fullLabel: edge.label, points: edge.points, labelAt: edge.labelAt },
        className: `edge-${edge.kind}${taken ? " edge-taken" : ""}`,
        focusable: false,
        markerEnd: { type: MarkerType.ArrowClosed, width: 14, height: 14 },
        zIndex: 2,
      };
    });
  }, [layout, states, model]);

  // Enter or Space on a focused node opens it (React Flow only selects it).
  const onKeyDown = useCallback(
    (event: KeyboardEvent<HTMLDivElement>) => {
      if (event.key !== "Enter" && event.key !== " ") return;
      const target = event.target as HTMLElement;
      if (!target.classList.contains("react-flow__node")) return;
      const id = target.getAttribute("data-id");
      if (!id) return;
      event.preventDefault();
      onSelect?.(id);
    },
    [onSelect],
  );

  if (layoutError) return <div className="error-box">Layout failed: {layoutError}</div>;
  return (
    <div className="graph-flow" onKeyDown={onKeyDown}>
      <ReactFlow
        nodes={nodes}
        edges={edges}
        nodeTypes={nodeTypes}
        edgeTypes={edgeTypes}
        nodesDraggable={false}
        nodesConnectable={false}
        edgesFocusable={false}
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
      {(collapsible || !allOpen) && (
        <button type="button" className="expand-all" onClick={toggleAll} data-testid="expand-all">
          {allOpen ? "Collapse groups" : "Expand all"}
        </button>
      )}
    </div>
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
