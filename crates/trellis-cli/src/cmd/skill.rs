//! `trellis skill install | show`: the product skill (how to write and run Trellis graphs) as
//! an Agent Skills `SKILL.md`, installed where Claude Code, Codex and the Copilot CLI look
//! for personal skills.

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use clap::{Args, Subcommand, ValueEnum};

/// The skill, built into the binary.
const SKILL: &str = include_str!("../../skill/SKILL.md");

/// The skill's directory name under a skills directory.
const SKILL_NAME: &str = "trellis";

#[derive(Debug, Subcommand)]
pub enum SkillCommand {
    /// Write the skill for the agent CLIs: ~/.claude/skills/trellis/SKILL.md (Claude Code),
    /// ~/.agents/skills/trellis/SKILL.md (Codex), ~/.copilot/skills/trellis/SKILL.md (Copilot).
    Install(InstallArgs),
    /// Print the skill.
    Show,
}

/// The agent CLIs whose personal skills directory the skill goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AgentCli {
    Claude,
    Codex,
    Copilot,
}

impl AgentCli {
    /// The personal skills directory the CLI reads, under the home directory.
    fn skills_directory(self, home: &Path) -> PathBuf {
        match self {
            Self::Claude => home.join(".claude/skills"),
            Self::Codex => home.join(".agents/skills"),
            Self::Copilot => home.join(".copilot/skills"),
        }
    }
}

#[derive(Debug, Args)]
pub struct InstallArgs {
    /// Only for these CLIs (repeatable; default: all three).
    #[arg(long = "for", value_name = "CLI", value_enum)]
    pub agents: Vec<AgentCli>,
    /// Install into this skills directory instead (DIR/trellis/SKILL.md), e.g. a project's
    /// .claude/skills or .github/skills.
    #[arg(long, value_name = "DIR", conflicts_with = "agents")]
    pub dir: Option<PathBuf>,
}

pub fn run(command: &SkillCommand) -> anyhow::Result<u8> {
    match command {
        SkillCommand::Show => {
            out!("{SKILL}");
            Ok(0)
        }
        SkillCommand::Install(args) => {
            for directory in destinations(args)? {
                let path = install_into(&directory)?;
                outln!("installed {}", path.display());
            }
            Ok(0)
        }
    }
}

/// The skills directories to write to.
fn destinations(args: &InstallArgs) -> anyhow::Result<Vec<PathBuf>> {
    if let Some(dir) = &args.dir {
        return Ok(vec![dir.clone()]);
    }
    let home = std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| anyhow!("HOME is not set: pass --dir DIR"))?;
    let agents = if args.agents.is_empty() {
        vec![AgentCli::Claude, AgentCli::Codex, AgentCli::Copilot]
    } else {
        args.agents.clone()
    };
    Ok(agents
        .into_iter()
        .map(|agent| agent.skills_directory(&home))
        .collect())
}

/// Writes `DIRECTORY/trellis/SKILL.md` (replacing an older copy) and returns its path.
fn install_into(directory: &Path) -> anyhow::Result<PathBuf> {
    let skill_dir = directory.join(SKILL_NAME);
    std::fs::create_dir_all(&skill_dir)
        .with_context(|| format!("cannot create {}", skill_dir.display()))?;
    let path = skill_dir.join("SKILL.md");
    std::fs::write(&path, SKILL).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}
