// The Validate page: open or paste a GraphSpec or GaP document, see its diagnostics listed and
// pinned on the nodes they name, or its identity, bounds and compiled shape; and the template
// gallery, each built-in graph as a picture.
import { useCallback, useEffect, useMemo, useState } from "react";
import { describeFailure } from "../run/errors";
import { api, ApiError } from "../api/client";
import type { Diagnostic, DocumentKind, TemplateInfo, ValidationReport } from "../api/types";
import { gapModel, looksLikeGap } from "../graph/gap";
import { GraphCanvas } from "../graph/GraphCanvas";
import { graphSpecModel } from "../graph/graphspec";
import { pinsFor } from "../graph/pins";
import { emptyModel, type GraphModel } from "../graph/model";
import { Thumbnail } from "../graph/Thumbnail";
import { prettyJson } from "../run/format";

type KindChoice = "auto" | DocumentKind;

function parseDocument(text: string): { document?: unknown; error?: string } {
  try {
    return { document: JSON.parse(text) as unknown };
  } catch (error) {
    return { error: error instanceof Error ? error.message : String(error) };
  }
}

function modelFor(document: unknown, kind: KindChoice): GraphModel {
  const gap = kind === "gap" || (kind === "auto" && looksLikeGap(document));
  return gap ? gapModel(document) : graphSpecModel(document);
}

function breadcrumb(path: Diagnostic["path"]): string {
  if (!path) return "";
  return Array.isArray(path) ? path.join(" › ") : path;
}

export function ValidatePage() {
  const [text, setText] = useState("");
  const [kind, setKind] = useState<KindChoice>("auto");
  const [report, setReport] = useState<ValidationReport | undefined>();
  const [model, setModel] = useState<GraphModel>(emptyModel);
  const [busy, setBusy] = useState(false);
  const [failure, setFailure] = useState<string | undefined>();
  const [reveal, setReveal] = useState<string[] | undefined>();
  const [selected, setSelected] = useState<string | undefined>();

  const validate = useCallback(async (source: string, choice: KindChoice) => {
    setFailure(undefined);
    const parsed = parseDocument(source);
    if (parsed.error !== undefined) {
      setReport({ status: "unparseable", error: `not JSON: ${parsed.error}` });
      setModel(emptyModel());
      return;
    }
    setModel(modelFor(parsed.document, choice));
    setBusy(true);
    try {
      setReport(await api.validate(parsed.document, choice === "auto" ? undefined : choice));
    } catch (error) {
      setReport(undefined);
      setFailure(error instanceof ApiError ? `${error.code}: ${describeFailure(error)}` : describeFailure(error));
    } finally {
      setBusy(false);
    }
  }, []);

  const openFile = async (file: File | undefined) => {
    if (!file) return;
    const content = await file.text();
    setText(content);
    await validate(content, kind);
  };

  const diagnostics = useMemo(
    () => (report && report.status !== "unparseable" ? (report.diagnostics ?? []) : []),
    [report],
  );
  const pins = useMemo(() => pinsFor(model, diagnostics), [model, diagnostics]);

  return (
    <div className="page validate-page">
      <div className="validate-grid">
        <section className="validate-input">
          <div className="toolbar">
            <h1>Validate</h1>
            <label className="file-button">
              Open file…
              <input
                type="file"
                accept=".json,application/json"
                data-testid="open-file"
                onChange={(event) => void openFile(event.target.files?.[0])}
              />
            </label>
            <select aria-label="Document kind" value={kind} onChange={(event) => setKind(event.target.value as KindChoice)}>
              <option value="auto">detect kind</option>
              <option value="graphspec">GraphSpec</option>
              <option value="gap">GaP workflow</option>
            </select>
            <button
              type="button"
              className="primary"
              disabled={busy || !text.trim()}
              onClick={() => void validate(text, kind)}
              data-testid="validate"
            >
              {busy ? "Validating…" : "Validate"}
            </button>
          </div>
          <textarea
            spellCheck={false}
            placeholder="Paste a GraphSpec (openengine.graph.full/v1) or GaP workflow.json v3 document"
            value={text}
            onChange={(event) => setText(event.target.value)}
            data-testid="document"
            aria-label="Graph document"
          />
          <ReportView
            report={report}
            failure={failure}
            model={model}
            onPick={(diagnostic) => {
              const ids = (diagnostic.nodes ?? []).flatMap((name) => model.byName.get(name) ?? []);
              setReveal(ids);
              setSelected(ids[0]);
            }}
          />
        </section>
        <section className="validate-graph">
          {model.nodes.size > 0 ? (
            <GraphCanvas model={model} pins={pins} reveal={reveal} selected={selected} onSelect={setSelected} />
          ) : (
            <Gallery
              onOpen={(name, graph) => {
                const content = JSON.stringify(graph, null, 2);
                setText(content);
                void validate(content, "graphspec");
                return name;
              }}
            />
          )}
        </section>
      </div>
      {model.nodes.size > 0 && (
        <details className="gallery-again">
          <summary>Templates</summary>
          <Gallery
            onOpen={(name, graph) => {
              const content = JSON.stringify(graph, null, 2);
              setText(content);
              void validate(content, "graphspec");
              return name;
            }}
          />
        </details>
      )}
    </div>
  );
}

function ReportView({
  report,
  failure,
  model,
  onPick,
}: {
  report?: ValidationReport;
  failure?: string;
  model: GraphModel;
  onPick: (diagnostic: Diagnostic) => void;
}) {
  if (failure) return <div className="error-box">{failure}</div>;
  if (!report) return null;
  if (report.status === "unparseable") {
    return (
      <div className="report report-bad" data-testid="report" data-status="unparseable">
        <h2>✗ unparseable</h2>
        <pre className="json">{report.error}</pre>
      </div>
    );
  }
  if (report.status === "rejected") {
    return (
      <div className="report report-bad" data-testid="report" data-status="rejected">
        <h2>✗ rejected: {report.diagnostics.length} diagnostic(s)</h2>
        <ol className="diagnostics">
          {report.diagnostics.map((diagnostic, index) => (
            <li key={index} data-testid="diagnostic">
              <button type="button" className="link" onClick={() => onPick(diagnostic)}>
                <strong>{diagnostic.code}</strong>: {diagnostic.message}
              </button>
              {diagnostic.path && <div className="muted small">at {breadcrumb(diagnostic.path)}</div>}
              {diagnostic.nodes && diagnostic.nodes.length > 0 && (
                <div className="muted small">nodes {diagnostic.nodes.join(", ")}</div>
              )}
            </li>
          ))}
        </ol>
      </div>
    );
  }
  // A GaP workflow has no identity or bounds: say what it holds instead.
  if (report.kind === "gap" || (report.identity === undefined && model.nodes.get("workflow")?.kind === "workflow")) {
    const leaves = [...model.nodes.values()].filter((node) => !node.group && node.kind !== "start" && node.kind !== "finish");
    const subgraphs = [...model.nodes.values()].filter((node) => node.kind === "subgraph");
    const warnings = report.diagnostics ?? [];
    return (
      <div className="report report-ok" data-testid="report" data-status="verified" data-kind="gap">
        <h2>✓ verified GaP workflow</h2>
        <dl className="facts">
          <dt>nodes</dt>
          <dd data-testid="gap-node-count">{leaves.length}</dd>
          <dt>subgraph calls</dt>
          <dd>{subgraphs.length}</dd>
          <dt>warnings</dt>
          <dd>{warnings.length}</dd>
        </dl>
        {warnings.length > 0 && (
          <ol className="diagnostics">
            {warnings.map((warning, index) => (
              <li key={index} data-testid="diagnostic">
                <strong>{warning.code}</strong>: {warning.message}
              </li>
            ))}
          </ol>
        )}
      </div>
    );
  }
  return (
    <div className="report report-ok" data-testid="report" data-status="verified">
      <h2>✓ verified</h2>
      <dl className="facts">
        <dt>identity</dt>
        <dd>
          <code data-testid="identity">{report.identity ?? "–"}</code>
        </dd>
        <dt>executions</dt>
        <dd>at most {report.bounds?.maxExecutions ?? "?"}</dd>
        <dt>concurrency</dt>
        <dd>peak {report.bounds?.peakConcurrency ?? "?"}</dd>
      </dl>
      {report.compiledIr !== undefined && (
        <details>
          <summary>Compiled shape</summary>
          <pre className="json">{prettyJson(report.compiledIr, 60_000)}</pre>
        </details>
      )}
    </div>
  );
}

function Gallery({ onOpen }: { onOpen: (name: string, graph: unknown) => string }) {
  const [templates, setTemplates] = useState<TemplateInfo[] | undefined>();
  const [graphs, setGraphs] = useState<Map<string, { graph: unknown; model: GraphModel }>>(new Map());
  const [error, setError] = useState<string | undefined>();

  useEffect(() => {
    let cancelled = false;
    api
      .templates()
      .then(async (list) => {
        if (cancelled) return;
        setTemplates(list);
        const details = await Promise.all(list.map((template) => api.template(template.name)));
        if (cancelled) return;
        setGraphs(
          new Map(details.map((detail) => [detail.name, { graph: detail.graph, model: graphSpecModel(detail.graph) }])),
        );
      })
      .catch((failure: unknown) => {
        if (!cancelled) setError(describeFailure(failure));
      });
    return () => {
      cancelled = true;
    };
  }, []);

  if (error) return <div className="error-box">{error}</div>;
  if (!templates) return <div className="loading">Loading templates…</div>;
  return (
    <div className="gallery" data-testid="gallery">
      {templates.map((template) => {
        const loaded = graphs.get(template.name);
        return (
          <article className="template-card" key={template.name} data-testid="template-card">
            <h3>{template.name}</h3>
            <p className="muted small">{template.description}</p>
            {loaded ? <Thumbnail model={loaded.model} label={template.name} /> : <div className="thumbnail loading" />}
            <button type="button" disabled={!loaded} onClick={() => loaded && onOpen(template.name, loaded.graph)}>
              Open and validate
            </button>
          </article>
        );
      })}
    </div>
  );
}
