// Draws a graph model with React Flow after laying it out with ELK; frames collapse and expand
// on demand, and run states, the path taken and diagnostics are painted on without a new layout.
// The first view of each layout is fitted once; opening the inspector or selecting a node never
// moves it. Keyboard and screen readers use the graph's accessible tree (`GraphTree`): one tab
// stop, arrow keys to move, expand and collapse, Enter or Space to open; the canvas wears its
// focus ring and pans to keep it in view.
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
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import type { Diagnostic } from "../api/types";
import { edgeTaken } from "../run/outcome";
import type { NodeRunState } from "../run/state";
import { edgeTypes, type RoutedData } from "./edges";
import { defaultCollapsed } from "./collapse";
import { GraphTree } from "./GraphTree";
import { layoutGraph, shortLabel, visibleOwner, type Layout } from "./layout";
import type { GraphModel } from "./model";
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
      // From the layout's own size, not React Flow's store: right after a relayout the store may
      // still hold the previous layout's nodes, and fitting those leaves part of the graph out.
      fitWhole.current = false;
      const zoom = Math.min(MAX_START_ZOOM, (canvasWidth * 0.96) / layout.width, (canvasHeight * 0.96) / layout.height);
      void flow.setViewport({ x: (canvasWidth - layout.width * zoom) / 2, y: (canvasHeight - layout.height * zoom) / 2, zoom });
      return;
    }
    if (!firstFit) return;
    const fit = Math.min(MAX_START_ZOOM, (canvasWidth * 0.94) / layout.width, (canvasHeight * 0.94) / layout.height);
    const zoom = Math.max(fit, MIN_START_ZOOM);
    const x = fit >= zoom ? (canvasWidth - layout.width * zoom) / 2 : 16;
    const y = fit >= zoom ? (canvasHeight - layout.height * zoom) / 2 : Math.max(12, (canvasHeight - layout.height * zoom) / 2);
    void flow.setViewport({ x, y, zoom });
  }, [layout, flow, canvasWidth, canvasHeight]);

  // The tree's tab stop: the item last moved to or clicked, else the node open in the
  // inspector, shown as its nearest visible frame while a frame above it is collapsed.
  const [activeWish, setActive] = useState<string | undefined>();
  const [treeFocused, setTreeFocused] = useState(false);
  useEffect(() => setActive(undefined), [model]);
  // A node opened from elsewhere (the timeline, a pinned diagnostic) takes the tab stop.
  useEffect(() => {
    if (selected) setActive(selected);
  }, [selected]);
  const active = useMemo(() => {
    const wanted = activeWish ?? selected;
    const shown = wanted && model.nodes.has(wanted) ? visibleOwner(model, wanted, collapsed) : undefined;
    return shown ?? model.roots[0] ?? "";
  }, [activeWish, selected, model, collapsed]);
  const expand = useCallback((ids: string[]) => {
    setCollapsed((current) => {
      const next = new Set(current);
      for (const id of ids) next.delete(id);
      return next;
    });
  }, []);
  const collapse = useCallback((id: string) => setCollapsed((current) => new Set(current).add(id)), []);

  // Keep the node the keyboard is on in view, at the zoom the reader chose.
  useEffect(() => {
    if (!treeFocused || !layout || canvasWidth === 0) return;
    const internal = flow.getInternalNode(active);
    if (!internal) return;
    const { x, y, zoom } = flow.getViewport();
    const at = internal.internals.positionAbsolute;
    const width = internal.measured.width ?? internal.width ?? 0;
    const height = internal.measured.height ?? internal.height ?? 0;
    const left = at.x * zoom + x;
    const top = at.y * zoom + y;
    // In view when whole, or for a frame larger than half the view, when its head is.
    const needWidth = Math.min(width * zoom, canvasWidth / 2);
    const needHeight = Math.min(height * zoom, canvasHeight / 2);
    const inView = left >= 0 && top >= 0 && left + needWidth <= canvasWidth && top + needHeight <= canvasHeight;
    if (inView) return;
    // A frame larger than the view is brought in by its head.
    const centerX = at.x + Math.min(width, (canvasWidth * 0.8) / zoom) / 2;
    const centerY = at.y + Math.min(height, (canvasHeight * 0.8) / zoom) / 2;
    void flow.setCenter(centerX, centerY, { zoom });
  }, [active, treeFocused, layout, flow, canvasWidth, canvasHeight]);

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
          className: treeFocused && placed.id === active ? "tree-focus" : undefined,
          // Screen readers read the accessible tree instead (the same nodes, in words).
          domAttributes: { "aria-hidden": true, "aria-roledescription": undefined },
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
  }, [layout, model, states, pins, selected, toggle, treeFocused, active]);

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

  const open = useCallback((id: string) => onSelect?.(id), [onSelect]);

  if (layoutError) return <div className="error-box">Layout failed: {layoutError}</div>;
  return (
    <div className="graph-flow">
      <GraphTree
        model={model}
        states={states}
        pins={pins}
        collapsed={collapsed}
        selected={selected}
        active={active}
        onActive={setActive}
        onExpand={expand}
        onCollapse={collapse}
        onOpen={open}
        onFocusedChange={setTreeFocused}
      />
      <ReactFlow
        nodes={nodes}
        edges={edges}
        nodeTypes={nodeTypes}
        edgeTypes={edgeTypes}
        nodesDraggable={false}
        nodesConnectable={false}
        edgesFocusable={false}
        nodesFocusable={false}
        elementsSelectable
        minZoom={0.05}
        maxZoom={2.5}
        onlyRenderVisibleElements
        proOptions={{ hideAttribution: true }}
        onNodeClick={(_, node) => {
          setActive(node.id);
          onSelect?.(node.id);
        }}
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
