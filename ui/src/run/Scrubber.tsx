// The replay scrubber: step through the run's recorded events and see the graph, timeline and
// status as they were after each one.
import { useEffect, useState } from "react";
import { Icon } from "./icons";

export interface ScrubberProps {
  /** Events loaded so far. */
  total: number;
  /** Events applied (0 = before the first). */
  position: number;
  onMove: (position: number) => void;
  latest?: string;
  onExit: () => void;
  loading: boolean;
}

const PLAY_STEP_MS = 300;

export function Scrubber({ total, position, onMove, latest, onExit, loading }: ScrubberProps) {
  const [playing, setPlaying] = useState(false);
  useEffect(() => {
    if (!playing) return;
    if (position >= total) {
      setPlaying(false);
      return;
    }
    const timer = setTimeout(() => onMove(position + 1), PLAY_STEP_MS);
    return () => clearTimeout(timer);
  }, [playing, position, total, onMove]);

  return (
    <div className="scrubber" data-testid="scrubber">
      <button type="button" aria-label="First event" onClick={() => onMove(0)} disabled={position === 0}>
        <Icon name="first" />
      </button>
      <button type="button" aria-label="Step back" onClick={() => onMove(Math.max(0, position - 1))} disabled={position === 0}>
        <Icon name="back" />
      </button>
      <button type="button" aria-label={playing ? "Pause" : "Play"} onClick={() => setPlaying(!playing)}>
        <Icon name={playing ? "pause" : "play"} />
      </button>
      <button
        type="button"
        aria-label="Step forward"
        onClick={() => onMove(Math.min(total, position + 1))}
        disabled={position >= total}
      >
        <Icon name="forward" />
      </button>
      <button type="button" aria-label="Last event" onClick={() => onMove(total)} disabled={position >= total}>
        <Icon name="last" />
      </button>
      <input
        type="range"
        min={0}
        max={total}
        value={position}
        aria-label="Replay position"
        onChange={(event) => onMove(Number(event.target.value))}
      />
      <span className="scrub-count" data-testid="scrub-count">
        {position} / {total}
        {loading && " …"}
      </span>
      <span className="scrub-event">{latest ?? "before the first event"}</span>
      <button type="button" onClick={onExit}>
        Back to live
      </button>
    </div>
  );
}
