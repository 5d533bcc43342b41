//! The runner against real children: stdin, group kills, deadlines, classification,
//! redaction, bounded output and lines that are never lost.

use std::path::Path;
use std::time::{Duration, Instant};

use trellis_process::{
    BoxFuture, CancellationToken, ProcessEnd, ProcessLimits, ProcessObserver, ProcessSpec,
    Redactor, Session, Stream, run_blocking, run_process,
};

fn sh(script: &str, dir: &Path) -> ProcessSpec {
    ProcessSpec {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into()],
        cwd: dir.to_path_buf(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        ..ProcessSpec::default()
    }
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

fn wait_gone(pid: u32) -> bool {
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn read_pid(path: &Path) -> u32 {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        assert!(Instant::now() < until, "no pid in {}", path.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Keeps every line it is told.
#[derive(Default)]
struct Lines {
    pgid: Option<u32>,
    seen: Vec<(Stream, String)>,
}

impl ProcessObserver for Lines {
    fn started(&mut self, pgid: u32) {
        self.pgid = Some(pgid);
    }
    fn line(&mut self, stream: Stream, line: &str) {
        self.seen.push((stream, line.to_owned()));
    }
}

impl Lines {
    fn of(&self, stream: Stream) -> Vec<&str> {
        self.seen
            .iter()
            .filter(|(s, _)| *s == stream)
            .map(|(_, l)| l.as_str())
            .collect()
    }
}

#[tokio::test]
async fn stdin_gets_the_payload_then_eof() {
    let dir = tempfile::tempdir().unwrap();
    let spec = ProcessSpec {
        stdin: b"hello\nworld\n".to_vec(),
        ..sh("cat; echo done >&2", dir.path())
    };
    let mut lines = Lines::default();
    let report = run_process(
        &spec,
        &ProcessLimits::default(),
        &CancellationToken::new(),
        &mut lines,
    )
    .await;
    assert_eq!(report.end, ProcessEnd::Exited { code: 0 });
    assert_eq!(report.stdout, b"hello\nworld\n");
    assert_eq!(lines.of(Stream::Stderr), ["done"]);
}

/// A payload larger than a pipe holds is written partly at the spawn and the rest as the
/// child reads; the child gets every byte, in order, then EOF. A child that never reads its
/// stdin still ends normally.
#[tokio::test]
async fn a_payload_larger_than_the_pipe_arrives_whole_then_eof() {
    let dir = tempfile::tempdir().unwrap();
    let payload: Vec<u8> = (0..1_000_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let spec = ProcessSpec {
        stdin: payload.clone(),
        ..sh("sleep 0.1; cat", dir.path())
    };
    let report = run_process(
        &spec,
        &ProcessLimits::default(),
        &CancellationToken::new(),
        &mut Lines::default(),
    )
    .await;
    assert_eq!(report.end, ProcessEnd::Exited { code: 0 });
    assert_eq!(report.stdout.len(), payload.len());
    assert!(report.stdout == payload, "the payload arrived altered");

    let ignored = ProcessSpec {
        stdin: payload,
        ..sh("echo ignored", dir.path())
    };
    let report = run_process(
        &ignored,
        &ProcessLimits::default(),
        &CancellationToken::new(),
        &mut Lines::default(),
    )
    .await;
    assert_eq!(report.end, ProcessEnd::Exited { code: 0 });
    assert_eq!(report.stdout, b"ignored\n");
}

#[tokio::test]
async fn the_environment_is_exactly_the_declared_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = sh("env", dir.path());
    spec.env.push(("ONLY_THIS".into(), "yes".into()));
    let report = run_process(
        &spec,
        &ProcessLimits::default(),
        &CancellationToken::new(),
        &mut Lines::default(),
    )
    .await;
    let env = String::from_utf8(report.stdout).unwrap();
    let mut names: Vec<&str> = env.lines().filter_map(|l| l.split('=').next()).collect();
    names.sort_unstable();
    // The shell adds PWD (and dash SHLVL/OLDPWD-like names) itself; nothing comes from us.
    assert!(
        names.contains(&"ONLY_THIS") && names.contains(&"PATH"),
        "{names:?}"
    );
    assert!(!names.contains(&"HOME"), "{names:?}");
    assert!(!names.contains(&"CARGO"), "{names:?}");
}

#[tokio::test]
async fn a_deadline_kills_the_whole_group_grandchildren_included() {
    let dir = tempfile::tempdir().unwrap();
    let spec = sh("sleep 300 & echo $! > grandchild; sleep 300", dir.path());
    let limits = ProcessLimits {
        deadline: Some(Duration::from_millis(500)),
        kill_grace: Duration::from_millis(200),
        ..ProcessLimits::default()
    };
    let started = Instant::now();
    let report = run_process(
        &spec,
        &limits,
        &CancellationToken::new(),
        &mut Lines::default(),
    )
    .await;
    assert_eq!(report.end, ProcessEnd::DeadlineExceeded);
    assert!(started.elapsed() < Duration::from_secs(10));
    let grandchild = read_pid(&dir.path().join("grandchild"));
    assert!(
        wait_gone(grandchild),
        "the grandchild {grandchild} survived"
    );
}

#[tokio::test]
async fn a_signal_from_outside_is_told_apart_from_a_crash_and_from_our_own_stops() {
    let dir = tempfile::tempdir().unwrap();
    let killed = sh("echo $$ > me; sleep 300", dir.path());
    let run = tokio::spawn(async move {
        run_process(
            &killed,
            &ProcessLimits::default(),
            &CancellationToken::new(),
            &mut Lines::default(),
        )
        .await
    });
    let me = tokio::task::spawn_blocking({
        let path = dir.path().join("me");
        move || read_pid(&path)
    })
    .await
    .unwrap();
    trellis_process::signal_group(me, trellis_process::Signal::SIGKILL);
    let report = run.await.unwrap();
    assert_eq!(report.end, ProcessEnd::KilledFromOutside { signal: 9 });

    let crashed = sh("kill -SEGV $$", dir.path());
    let report = run_process(
        &crashed,
        &ProcessLimits::default(),
        &CancellationToken::new(),
        &mut Lines::default(),
    )
    .await;
    assert_eq!(report.end, ProcessEnd::Crashed { signal: 11 });

    let cancel = CancellationToken::new();
    cancel.cancel();
    let report = run_process(
        &sh("sleep 300", dir.path()),
        &ProcessLimits::default(),
        &cancel,
        &mut Lines::default(),
    )
    .await;
    assert_eq!(report.end, ProcessEnd::Cancelled);
}

#[tokio::test]
async fn idle_children_are_stopped_after_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    #[derive(Default)]
    struct Silence(u32);
    impl ProcessObserver for Silence {
        fn line(&mut self, _: Stream, _: &str) {}
        fn silent(&mut self, _: Duration) {
            self.0 += 1;
        }
    }
    let limits = ProcessLimits {
        idle: Some(Duration::from_millis(300)),
        kill_grace: Duration::from_millis(100),
        ..ProcessLimits::default()
    };
    let mut silence = Silence::default();
    let report = run_process(
        &sh("echo hi; sleep 300", dir.path()),
        &limits,
        &CancellationToken::new(),
        &mut silence,
    )
    .await;
    assert_eq!(report.end, ProcessEnd::IdleExceeded);
    assert_eq!(
        silence.0, 2,
        "one warning at half the limit, one at the limit"
    );
}

/// Issue 19 #8: a runner that could not run while its child finished (a SIGSTOPped or
/// overloaded controller) judges the deadline by the child's completion. Each trial stalls the
/// runtime's only thread past the deadline while the child exits early; before the fix about
/// half of the trials reported a timeout.
#[test]
fn a_child_that_finished_while_the_runner_was_stalled_is_not_a_timeout() {
    let trials: Vec<_> = (0..6)
        .map(|_| {
            std::thread::spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                runtime.block_on(async {
                    let dir = tempfile::tempdir().unwrap();
                    let spec = sh("sleep 0.05; echo finished", dir.path());
                    let limits = ProcessLimits {
                        deadline: Some(Duration::from_millis(300)),
                        ..ProcessLimits::default()
                    };
                    let cancel = CancellationToken::new();
                    let mut lines = Lines::default();
                    let run = run_process(&spec, &limits, &cancel, &mut lines);
                    let stall = async {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        // The whole runtime stops, as a SIGSTOPped controller does.
                        std::thread::sleep(Duration::from_millis(900));
                    };
                    let (report, ()) = tokio::join!(run, stall);
                    (report.end, lines.of(Stream::Stdout).join("|"))
                })
            })
        })
        .collect();
    for trial in trials {
        let (end, stdout) = trial.join().unwrap();
        assert_eq!(end, ProcessEnd::Exited { code: 0 }, "stdout: {stdout}");
    }
}

#[tokio::test]
async fn secrets_are_masked_on_the_raw_stream_whatever_their_shape() {
    let dir = tempfile::tempdir().unwrap();
    let secrets = [
        "multi\nline-canary-1".to_owned(),
        "ünïcødé-canary-2 ✓".to_owned(),
        r#"json"{canary}\3"#.to_owned(),
        "edge-canary-4-0123456789abcdefghijklmnop".to_owned(),
    ];
    // Secret 4 starts 30 bytes before the 4 KiB mark of a long line, as in issue 19 #2.
    let script = "printf '%s\\n' \"$S1\" \"x $S2 y\" \"$S3\" >&2; head -c 4066 /dev/zero | tr '\\0' p >&2; printf '%s\\n' \"$S4\" >&2";
    let mut spec = sh(script, dir.path());
    for (i, secret) in secrets.iter().enumerate() {
        spec.env.push((format!("S{}", i + 1), secret.clone()));
    }
    spec.redactor = Redactor::new(&secrets);
    let mut lines = Lines::default();
    let limits = ProcessLimits {
        max_line_bytes: 4096,
        ..ProcessLimits::default()
    };
    run_process(&spec, &limits, &CancellationToken::new(), &mut lines).await;
    let stderr = lines.of(Stream::Stderr);
    assert_eq!(stderr[0], "[REDACTED]");
    assert_eq!(stderr[1], "x [REDACTED] y");
    assert_eq!(stderr[2], "[REDACTED]");
    let all = stderr.join("\n");
    for fragment in ["canary", "line-c", "ünïc", "edge-ca", "{can"] {
        assert!(!all.contains(fragment), "{fragment:?} leaked: {all}");
    }
    // Unmasked, that line would be cut at 4,096 bytes in the middle of the value.
    assert_eq!(stderr[3], format!("{}[REDACTED]", "p".repeat(4066)));
}

/// A slow observer gets every line: the child waits for it instead of lines being dropped.
#[tokio::test]
async fn a_slow_observer_loses_no_line() {
    struct Slow {
        seen: usize,
        queued: usize,
    }
    impl ProcessObserver for Slow {
        fn line(&mut self, _: Stream, _: &str) {
            self.queued += 1;
        }
        fn delivered(&mut self) -> BoxFuture<'_, ()> {
            Box::pin(async move {
                if self.queued.is_multiple_of(500) {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                self.seen = self.queued;
            })
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let spec = sh("seq 1 10000 >&2", dir.path());
    let mut slow = Slow { seen: 0, queued: 0 };
    let report = run_process(
        &spec,
        &ProcessLimits::default(),
        &CancellationToken::new(),
        &mut slow,
    )
    .await;
    assert_eq!(report.end, ProcessEnd::Exited { code: 0 });
    assert_eq!(slow.seen, 10_000);
}

#[tokio::test]
async fn endless_output_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    // 64 MiB without a newline on stdout, and 8 MiB of 32 KiB lines on stderr.
    let spec = sh(
        "head -c 67108864 /dev/zero | tr '\\0' a; yes \"$(head -c 32767 /dev/zero | tr '\\0' b)\" | head -n 256 >&2",
        dir.path(),
    );
    let limits = ProcessLimits {
        max_stdout_bytes: 1024 * 1024,
        ..ProcessLimits::default()
    };
    #[derive(Default)]
    struct Count(usize, usize);
    impl ProcessObserver for Count {
        fn line(&mut self, _: Stream, line: &str) {
            self.0 += 1;
            self.1 = self.1.max(line.len());
        }
    }
    let mut count = Count::default();
    let report = run_process(&spec, &limits, &CancellationToken::new(), &mut count).await;
    assert_eq!(report.end, ProcessEnd::Exited { code: 0 });
    assert!(report.stdout_truncated);
    assert!(report.stdout.is_empty(), "a cut reply is not kept");
    assert!(count.1 <= 16 * 1024 + 64, "longest line {}", count.1);
}

#[test]
fn blocking_runs_deliver_lines_on_the_caller_thread_and_honour_cancellation() {
    let dir = tempfile::tempdir().unwrap();
    let mut seen = Vec::new();
    let report = run_blocking(
        &sh("echo out; echo err >&2", dir.path()),
        &ProcessLimits::default(),
        &|| false,
        &mut |stream, line| seen.push((stream, line.to_owned())),
    );
    assert_eq!(report.end, ProcessEnd::Exited { code: 0 });
    assert_eq!(report.stdout, b"out\n");
    assert!(seen.contains(&(Stream::Stderr, "err".to_owned())));

    let asked = Instant::now();
    let report = run_blocking(
        &sh("sleep 300 & echo $! > grandchild; sleep 300", dir.path()),
        &ProcessLimits::default(),
        &|| asked.elapsed() > Duration::from_millis(300),
        &mut |_, _| {},
    );
    assert_eq!(report.end, ProcessEnd::Cancelled);
    let grandchild = read_pid(&dir.path().join("grandchild"));
    assert!(wait_gone(grandchild));
}

#[test]
fn a_session_speaks_over_its_pipes_and_stops_with_its_group() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let spec = sh(
        "sleep 300 & echo $! > grandchild; while read line; do echo \"got $line\"; done",
        dir.path(),
    );
    let (session, mut pipes) = Session::start(&spec, 64).unwrap();
    writeln!(pipes.stdin, "ping").unwrap();
    let reply = pipes.stdout.next().unwrap();
    assert_eq!(reply.bytes, b"got ping\n");
    writeln!(pipes.stdin, "{}", "x".repeat(200)).unwrap();
    let long = pipes.stdout.next().unwrap();
    assert!(long.cut && long.bytes.len() == 65);
    assert!(session.end().is_none());
    let grandchild = read_pid(&dir.path().join("grandchild"));
    assert_eq!(
        session.stop(Duration::from_millis(500)),
        ProcessEnd::Cancelled
    );
    assert!(wait_gone(grandchild));
    assert!(pipes.stdout.next().is_none());
}

/// An environment's startup hook leaves a service running: with `keep_group_after_exit` the
/// group outlives its leader until the caller stops it; without it (every other child) the
/// group goes with its leader, and a leader stopped at its deadline takes it along either way.
#[tokio::test]
async fn a_kept_group_outlives_its_leader_until_the_caller_kills_it() {
    let dir = tempfile::tempdir().unwrap();
    let script = "sleep 300 >/dev/null 2>&1 & echo $! > service.pid";
    let mut lines = Lines::default();
    let kept = ProcessLimits {
        keep_group_after_exit: true,
        ..ProcessLimits::default()
    };
    let report = run_process(
        &sh(script, dir.path()),
        &kept,
        &CancellationToken::new(),
        &mut lines,
    )
    .await;
    assert_eq!(report.end, ProcessEnd::Exited { code: 0 });
    let service = read_pid(&dir.path().join("service.pid"));
    std::thread::sleep(Duration::from_millis(200));
    assert!(alive(service), "the service lives on after its starter");
    let group = lines.pgid.expect("the leader's group");
    trellis_process::kill_group(group);
    assert!(
        wait_gone(service),
        "killing the kept group stops the service"
    );

    std::fs::remove_file(dir.path().join("service.pid")).unwrap();
    let report = run_process(
        &sh(script, dir.path()),
        &ProcessLimits::default(),
        &CancellationToken::new(),
        &mut Lines::default(),
    )
    .await;
    assert_eq!(report.end, ProcessEnd::Exited { code: 0 });
    let service = read_pid(&dir.path().join("service.pid"));
    assert!(wait_gone(service), "an ordinary child's group goes with it");

    let stopped = ProcessLimits {
        deadline: Some(Duration::from_millis(300)),
        kill_grace: Duration::from_millis(100),
        ..kept
    };
    std::fs::remove_file(dir.path().join("service.pid")).unwrap();
    let report = run_process(
        &sh(&format!("{script}; sleep 300"), dir.path()),
        &stopped,
        &CancellationToken::new(),
        &mut Lines::default(),
    )
    .await;
    assert_eq!(report.end, ProcessEnd::DeadlineExceeded);
    let service = read_pid(&dir.path().join("service.pid"));
    assert!(wait_gone(service), "a stopped leader's group is killed");
}
