// The app shell: navigation and the hash routes (`#/`, `#/runs/ID`, `#/profiles/NAME`, `#/validate`).
import { ProfilesPage } from "../pages/ProfilesPage";
import { RunPage } from "../pages/RunPage";
import { RunsPage } from "../pages/RunsPage";
import { ValidatePage } from "../pages/ValidatePage";
import { useHashRoute } from "./hooks";
import { SessionBar } from "./SessionBar";

export function App() {
  const route = useHashRoute();
  const runMatch = /^\/runs\/([^/]+)$/.exec(route);
  const profileMatch = /^\/profiles(?:\/(.+))?$/.exec(route);
  const section = runMatch || route === "/" || route.startsWith("/runs") ? "runs" : profileMatch ? "profiles" : route.slice(1);
  return (
    <div className="app">
      <nav className="topnav">
        <a className="brand" href="#/">
          <span className="brand-mark">⋔</span> Trellis
        </a>
        <a href="#/" className={section === "runs" ? "active" : ""}>
          Runs
        </a>
        <a href="#/profiles" className={section === "profiles" ? "active" : ""}>
          Profiles
        </a>
        <a href="#/validate" className={section === "validate" ? "active" : ""}>
          Validate
        </a>
        <SessionBar />
      </nav>
      <main>
        {runMatch?.[1] ? (
          <RunPage key={runMatch[1]} runId={runMatch[1]} />
        ) : profileMatch ? (
          <ProfilesPage open={profileMatch[1]} />
        ) : section === "validate" ? (
          <ValidatePage />
        ) : (
          <RunsPage />
        )}
      </main>
    </div>
  );
}
