// Small form controls of the editor: text that becomes one edit when the person leaves the
// field (or presses Enter), so undo steps back over whole changes, not keystrokes.
import { useEffect, useId, useState } from "react";

interface CommitProps {
  label: string;
  value: string;
  onCommit: (value: string) => void;
  multiline?: boolean;
  type?: "text" | "number";
  testId?: string;
  placeholder?: string;
}

export function CommitField({ label, value, onCommit, multiline, type = "text", testId, placeholder }: CommitProps) {
  const [text, setText] = useState(value);
  const id = useId();
  useEffect(() => setText(value), [value]);
  const commitNow = () => {
    if (text !== value) onCommit(text);
  };
  return (
    <div className="form-row">
      <label htmlFor={id}>{label}</label>
      {multiline ? (
        <textarea id={id} value={text} rows={6} data-testid={testId} placeholder={placeholder} onChange={(event) => setText(event.target.value)} onBlur={commitNow} />
      ) : (
        <input
          id={id}
          type={type}
          value={text}
          data-testid={testId}
          placeholder={placeholder}
          onChange={(event) => setText(event.target.value)}
          onBlur={commitNow}
          onKeyDown={(event) => {
            if (event.key === "Enter") commitNow();
          }}
        />
      )}
    </div>
  );
}

interface SelectProps {
  label: string;
  value: string;
  options: { value: string; label: string }[];
  onChange: (value: string) => void;
  testId?: string;
}

export function SelectField({ label, value, options, onChange, testId }: SelectProps) {
  const id = useId();
  return (
    <div className="form-row">
      <label htmlFor={id}>{label}</label>
      <select id={id} value={value} data-testid={testId} onChange={(event) => onChange(event.target.value)}>
        {options.map((option) => (
          <option key={option.value} value={option.value}>
            {option.label}
          </option>
        ))}
      </select>
    </div>
  );
}
