// A modal confirmation dialog as WAI-ARIA describes one: focus moves into it (to Cancel, so
// Enter never confirms by accident), Tab stays inside it, Escape or a click outside cancels,
// and focus returns to what opened it.
import { useEffect, useRef, type ReactNode } from "react";

export interface DialogProps {
  titleId: string;
  title: ReactNode;
  onCancel: () => void;
  children: ReactNode;
  /** The buttons after Cancel (the confirming one). */
  actions: ReactNode;
}

const FOCUSABLE = 'button:not([disabled]), input:not([disabled]), select:not([disabled]), textarea:not([disabled]), a[href], [tabindex]:not([tabindex="-1"])';

export function Dialog({ titleId, title, onCancel, children, actions }: DialogProps) {
  const box = useRef<HTMLDivElement>(null);
  const cancel = useRef<HTMLButtonElement>(null);

  useEffect(() => {
    const opener = document.activeElement instanceof HTMLElement ? document.activeElement : undefined;
    cancel.current?.focus();
    return () => opener?.focus();
  }, []);

  const onKeyDown = (event: React.KeyboardEvent<HTMLDivElement>) => {
    if (event.key === "Escape") {
      event.preventDefault();
      event.stopPropagation();
      onCancel();
      return;
    }
    if (event.key !== "Tab" || !box.current) return;
    const focusable = [...box.current.querySelectorAll<HTMLElement>(FOCUSABLE)];
    const first = focusable[0];
    const last = focusable[focusable.length - 1];
    if (!first || !last) return;
    if (event.shiftKey && document.activeElement === first) {
      event.preventDefault();
      last.focus();
    } else if (!event.shiftKey && document.activeElement === last) {
      event.preventDefault();
      first.focus();
    }
  };

  return (
    <div className="modal-backdrop" role="presentation" onClick={onCancel}>
      <div
        className="modal"
        role="dialog"
        aria-modal="true"
        aria-labelledby={titleId}
        ref={box}
        onKeyDown={onKeyDown}
        onClick={(event) => event.stopPropagation()}
      >
        <h2 id={titleId}>{title}</h2>
        {children}
        <div className="modal-actions">
          <button type="button" onClick={onCancel} ref={cancel} data-testid="cancel">
            Cancel
          </button>
          {actions}
        </div>
      </div>
    </div>
  );
}
