//! A deterministic fake `claude` for manual experiments with the runtime differential's agent
//! (see `trellis_testkit::fake_agent::claude`).

fn main() -> std::process::ExitCode {
    trellis_testkit::fake_agent::claude::main()
}
