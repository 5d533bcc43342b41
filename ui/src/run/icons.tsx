// Small inline SVG icons for controls whose usual glyphs (⏮ ⏭ ⏸) are missing from common
// system fonts (they rendered as empty boxes on Debian).
const PATHS = {
  first: "M3 2h2v12H3zM14 2v12L6 8z",
  back: "M12 2v12L4 8z",
  play: "M4 2v12l9-6z",
  pause: "M3 2h4v12H3zM9 2h4v12H9z",
  forward: "M4 2v12l8-6z",
  last: "M11 2h2v12h-2zM2 2v12l8-6z",
};

export type IconName = keyof typeof PATHS;

export function Icon({ name }: { name: IconName }) {
  return (
    <svg className="icon" width="14" height="14" viewBox="0 0 16 16" aria-hidden="true" focusable="false">
      <path d={PATHS[name]} fill="currentColor" />
    </svg>
  );
}
