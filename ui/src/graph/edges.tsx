// Edges whose label sits just above the node they lead to, so the labels of a choice's branches
// (which share a source) never pile up at one midpoint.
import { BaseEdge, EdgeLabelRenderer, getSmoothStepPath, type EdgeProps } from "@xyflow/react";

export function LabelledEdge(props: EdgeProps) {
  const [path] = getSmoothStepPath({
    sourceX: props.sourceX,
    sourceY: props.sourceY,
    sourcePosition: props.sourcePosition,
    targetX: props.targetX,
    targetY: props.targetY,
    targetPosition: props.targetPosition,
    borderRadius: 6,
  });
  const label = typeof props.label === "string" ? props.label : undefined;
  return (
    <>
      <BaseEdge id={props.id} path={path} markerEnd={props.markerEnd} style={props.style} />
      {label && (
        <EdgeLabelRenderer>
          <div
            className="edge-label"
            title={typeof props.data?.fullLabel === "string" ? props.data.fullLabel : label}
            style={{ transform: `translate(-50%, -100%) translate(${props.targetX}px, ${props.targetY - 3}px)` }}
          >
            {label}
          </div>
        </EdgeLabelRenderer>
      )}
    </>
  );
}

export const edgeTypes = { labelled: LabelledEdge };
