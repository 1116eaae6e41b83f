//! The documents a user reads stay true to the program: the README short enough to
//! read (≤ 400 lines), `docs/cli.md` exactly the CLI's own help (every command and
//! flag), every relative link in README.md and docs/ pointing at a file (and heading)
//! that exists, and every command in the README's code blocks one that podhost or the
//! repository has: `podhost SUB --flag` with SUB and each flag podhost's, and each
//! `scripts/…` a file that is there and executable.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn documents() -> Vec<PathBuf> {
    let mut docs = vec![repo().join("README.md"), repo().join("CHANGELOG.md")];
    let mut dir: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    dir.sort();
    docs.extend(dir);
    docs
}

#[test]
fn the_readme_is_at_most_400_lines() {
    let lines = std::fs::read_to_string(repo().join("README.md"))
        .unwrap()
        .lines()
        .count();
    assert!(
        lines <= 400,
        "README.md has {lines} lines; move reference text to docs/"
    );
}

#[test]
fn docs_cli_md_is_the_clis_own_help() {
    let generated = podhost::cli::reference::markdown();
    let path = repo().join("docs/cli.md");
    if std::env::var_os("PODHOST_WRITE_CLI_REFERENCE").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        written == generated,
        "docs/cli.md differs from the CLI's help; regenerate it with \
         PODHOST_WRITE_CLI_REFERENCE=1 cargo test --test integration docs::"
    );
    // Every command and flag is in it (the generator's own completeness).
    for (command, flags) in podhost::cli::reference::flags_by_command() {
        assert!(
            written.contains(&format!("## podhost {command}\n")),
            "{command}"
        );
        for flag in flags.iter().filter(|f| f.starts_with("--")) {
            assert!(written.contains(flag.as_str()), "podhost {command} {flag}");
        }
    }
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors_of(file: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let mut in_code = false;
    let mut anchors = BTreeSet::new();
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        }
        if !in_code && line.starts_with('#') {
            anchors.insert(anchor(line.trim_start_matches('#')));
        }
    }
    anchors
}

/// The `](target)` links of a Markdown text, outside code blocks and code spans.
fn links(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        // Code spans are not links.
        let outside: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = outside.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            found.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    found
}

#[test]
fn every_relative_link_resolves() {
    let mut broken = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (file, heading) = link.split_once('#').unwrap_or((link.as_str(), ""));
            let target = if file.is_empty() {
                doc.clone()
            } else {
                doc.parent().unwrap().join(file)
            };
            if !target.exists() {
                broken.push(format!("{}: {link} (no such file)", doc.display()));
            } else if !heading.is_empty()
                && target.extension().is_some_and(|e| e == "md")
                && !anchors_of(&target).contains(heading)
            {
                broken.push(format!("{}: {link} (no such heading)", doc.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The commands of the README's code blocks, one per line, without comments, prompts
/// or `sudo`.
fn readme_commands() -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let mut in_code = false;
    let mut commands = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if !in_code {
            continue;
        }
        let command = line.split(" #").next().unwrap_or_default().trim();
        let command = command.strip_prefix("$ ").unwrap_or(command);
        let command = command.strip_prefix("sudo ").unwrap_or(command);
        if !command.is_empty() && !command.starts_with('#') {
            commands.push(command.to_string());
        }
    }
    commands
}

#[test]
fn every_readme_command_is_podhosts_or_an_executable_script() {
    let flags = podhost::cli::reference::flags_by_command();
    let mut problems = Vec::new();
    let mut checked = 0;
    for command in readme_commands() {
        let words: Vec<&str> = command.split_whitespace().collect();
        match words.first().copied() {
            Some("podhost") => {
                checked += 1;
                let sub = words.get(1).copied().unwrap_or_default();
                let Some((_, known)) = flags.iter().find(|(name, _)| name == sub) else {
                    problems.push(format!("{command}: no command {sub:?}"));
                    continue;
                };
                for word in &words[2..] {
                    // `[--flag X]`, `--flag=X`, `-o wide|json`: the flag itself.
                    let word = word.trim_start_matches('[').trim_end_matches([']', '\\']);
                    let flag = word.split(['=', '|']).next().unwrap_or_default();
                    // `-it` is `-i -t`.
                    let flags: Vec<String> = match flag.strip_prefix('-') {
                        Some(shorts) if !shorts.starts_with('-') && shorts.len() > 1 => {
                            shorts.chars().map(|c| format!("-{c}")).collect()
                        }
                        _ => vec![flag.to_string()],
                    };
                    for flag in flags {
                        let is_flag = flag.starts_with('-') && flag != "--" && flag.len() > 1;
                        if is_flag && !known.contains(&flag) {
                            problems.push(format!("{command}: podhost {sub} has no {flag}"));
                        }
                    }
                }
            }
            Some(script) if script.contains("scripts/") => {
                checked += 1;
                let path = repo().join(script.trim_start_matches("./"));
                match std::fs::metadata(&path) {
                    Ok(m) if m.permissions().mode() & 0o111 != 0 => {}
                    Ok(_) => problems.push(format!("{command}: {script} is not executable")),
                    Err(_) => problems.push(format!("{command}: no {script}")),
                }
            }
            _ => {}
        }
    }
    assert!(
        checked >= 10,
        "only {checked} commands found in the README's code blocks"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
