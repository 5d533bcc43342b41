//! `trellis skill install | show`: the product skill lands where each agent CLI reads personal
//! skills (under `$HOME`) or in a directory given with `--dir`, and what it teaches is real —
//! every `trellis` subcommand it names exists and every template it names is built in.

mod support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use support::TRELLIS;
use tempfile::TempDir;

fn trellis(home: &Path, args: &[&str]) -> Output {
    let output = Command::new(TRELLIS)
        .args(args)
        .env("HOME", home)
        .env("TRELLIS_HOME", home.join("state"))
        .stdin(Stdio::null())
        .output()
        .expect("run trellis");
    assert!(output.status.success(), "trellis {args:?}: {output:?}");
    output
}

fn skill_text(home: &Path) -> String {
    String::from_utf8(trellis(home, &["skill", "show"]).stdout).unwrap()
}

#[test]
fn install_writes_the_skill_for_each_agent_cli() {
    let home = TempDir::new().unwrap();
    let text = skill_text(home.path());
    assert!(
        text.starts_with("---\nname: trellis\ndescription: "),
        "{text}"
    );

    let output = trellis(home.path(), &["skill", "install"]);
    let places = [".claude/skills", ".agents/skills", ".copilot/skills"];
    for place in places {
        let path = home.path().join(place).join("trellis/SKILL.md");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "{place}");
        assert!(String::from_utf8_lossy(&output.stdout).contains(&path.display().to_string()));
    }

    let only = TempDir::new().unwrap();
    trellis(only.path(), &["skill", "install", "--for", "copilot"]);
    assert!(
        only.path()
            .join(".copilot/skills/trellis/SKILL.md")
            .is_file()
    );
    assert!(!only.path().join(".claude").exists() && !only.path().join(".agents").exists());
}

#[test]
fn install_into_a_given_directory_replaces_an_older_copy() {
    let home = TempDir::new().unwrap();
    let dir = home.path().join("project/.github/skills");
    std::fs::create_dir_all(dir.join("trellis")).unwrap();
    std::fs::write(dir.join("trellis/SKILL.md"), "old").unwrap();
    trellis(
        home.path(),
        &["skill", "install", "--dir", dir.to_str().unwrap()],
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("trellis/SKILL.md")).unwrap(),
        skill_text(home.path())
    );
    assert!(!home.path().join(".claude").exists());
}

#[test]
fn every_command_and_template_the_skill_names_exists() {
    let home = TempDir::new().unwrap();
    let text = skill_text(home.path());
    let subcommands: BTreeSet<&str> = text
        .split("trellis ")
        .skip(1)
        .filter_map(|rest| rest.split_whitespace().next())
        .filter(|word| word.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
        .filter(|word| !word.is_empty())
        .collect();
    assert!(subcommands.len() >= 10, "{subcommands:?}");
    for subcommand in &subcommands {
        trellis(home.path(), &[subcommand, "--help"]);
    }
    let templates = String::from_utf8(trellis(home.path(), &["template", "list"]).stdout).unwrap();
    for name in ["single-worker", "software-change", "issue-review"] {
        assert!(text.contains(name) && templates.contains(name), "{name}");
    }
}
