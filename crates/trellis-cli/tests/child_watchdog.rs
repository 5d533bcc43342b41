//! The watchdog that ends a worker host's (or a resume's) children with it, driven as the host
//! drives it: `trellis __guard TOKEN` reads process group ids from its stdin; once that pipe
//! closes it kills every registered group still alive (grandchildren included) and every
//! process carrying its token, registered or not, and leaves a reused group id alone.

mod support;

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::{STATE_TIMEOUT, TRELLIS, process_alive, wait_until};

/// A shell in a process group of its own that starts a grandchild and waits.
fn group_with_grandchild(env: &[(&str, &str)]) -> (Child, u32) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let pid_file = dir.path().join("grandchild");
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!(
            "sleep 300 & echo $! > {}; wait",
            pid_file.display()
        ))
        .stdin(Stdio::null())
        .envs(env.iter().copied());
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let leader = command.spawn().expect("start a shell");
    let grandchild = wait_until("the grandchild's pid", STATE_TIMEOUT, || {
        std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|text| text.trim().parse::<u32>().ok())
    });
    (leader, grandchild)
}

fn reap(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_closed_pipe_kills_registered_groups_and_marked_processes_only() {
    let token = format!("watchdog-test-{}", std::process::id());
    let mut watchdog = Command::new(TRELLIS)
        .args(["__guard", &token])
        .stdin(Stdio::piped())
        .spawn()
        .expect("start the watchdog");
    let mut pipe = watchdog.stdin.take().expect("its stdin");

    // Registered: the group, its grandchild included, dies with the pipe.
    let (registered, registered_grandchild) = group_with_grandchild(&[]);
    writeln!(pipe, "{}", registered.id()).expect("register");
    // Never registered (a host killed between a start and its registration), but marked.
    let (marked, marked_grandchild) =
        group_with_grandchild(&[("TRELLIS_GUARD_TOKEN", token.as_str())]);
    // Neither registered nor marked: not the watchdog's to kill.
    let (bystander, bystander_grandchild) = group_with_grandchild(&[]);
    // Registered, then its leader killed: the rest of the group is still killed.
    let (leaderless, leaderless_grandchild) = group_with_grandchild(&[]);
    writeln!(pipe, "{}", leaderless.id()).expect("register");
    support::send_signal(leaderless.id(), support::Signal::SIGKILL);
    writeln!(pipe, "not a group id").expect("a line it ignores");
    pipe.flush().expect("flush");
    std::thread::sleep(Duration::from_millis(200));
    for pid in [
        registered.id(),
        registered_grandchild,
        marked.id(),
        marked_grandchild,
    ] {
        assert!(process_alive(pid), "{pid} died before the pipe closed");
    }
    assert!(process_alive(leaderless_grandchild));

    drop(pipe);
    let status = watchdog.wait().expect("the watchdog ends");
    assert!(status.success(), "the watchdog ended {status:?}");
    let guarded = [
        registered.id(),
        registered_grandchild,
        marked.id(),
        marked_grandchild,
        leaderless_grandchild,
    ];
    for pid in guarded {
        wait_until("a guarded process to die", STATE_TIMEOUT, || {
            (!process_alive(pid)).then_some(())
        });
    }
    assert!(process_alive(bystander.id()) && process_alive(bystander_grandchild));
    for child in [registered, marked, bystander, leaderless] {
        reap(child);
    }
    support::send_signal(bystander_grandchild, support::Signal::SIGKILL);
}

#[test]
fn the_watchdog_refuses_to_start_without_a_token() {
    let output = Command::new(TRELLIS)
        .arg("__guard")
        .stdin(Stdio::null())
        .output()
        .expect("run the watchdog");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("usage: __guard TOKEN"));
}
