// Edges drawn along the routes ELK laid out, with their labels where ELK placed them (so labels
// never sit on nodes or on each other); a loop's back-edge is dashed and carries its round count.
import { BaseEdge, EdgeLabelRenderer, getSmoothStepPath, type Edge, type EdgeProps } from "@xyflow/react";

export interface RoutedData extends Record<string, unknown> {
  points?: { x: number; y: number }[];
  labelAt?: { x: number; y: number };
  fullLabel?: string;
}

/** An orthogonal path through `points`, its corners slightly rounded. */
function routePath(points: { x: number; y: number }[]): string {
  const [first, ...rest] = points;
  if (!first) return "";
  return [`M ${first.x} ${first.y}`, ...rest.map((point) => `L ${point.x} ${point.y}`)].join(" ");
}

export function RoutedEdge(props: EdgeProps<Edge<RoutedData>>) {
  const points = props.data?.points;
  const [fallback, centerX, centerY] = getSmoothStepPath({
    sourceX: props.sourceX,
    sourceY: props.sourceY,
    sourcePosition: props.sourcePosition,
    targetX: props.targetX,
    targetY: props.targetY,
    targetPosition: props.targetPosition,
    borderRadius: 6,
  });
  const path = points && points.length >= 2 ? routePath(points) : fallback;
  const label = typeof props.label === "string" ? props.label : undefined;
  const at = props.data?.labelAt;
  return (
    <>
      <BaseEdge id={props.id} path={path} markerEnd={props.markerEnd} style={props.style} />
      {label && (
        <EdgeLabelRenderer>
          <div
            className="edge-label"
            title={props.data?.fullLabel ?? label}
            style={{
              transform: at
                ? `translate(${at.x}px, ${at.y}px)`
                : `translate(-50%, -50%) translate(${centerX}px, ${centerY}px)`,
            }}
          >
            {label}
          </div>
        </EdgeLabelRenderer>
      )}
    </>
  );
}

export const edgeTypes = { routed: RoutedEdge };
