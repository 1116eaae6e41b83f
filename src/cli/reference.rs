//! The command-line reference, generated from clap's own definition of the CLI (so it
//! cannot drift from it): `docs/cli.md` is this text, and a test fails when the two
//! differ. Each user-facing command's `--help`, in the order `podhost --help` lists
//! them; the hidden helpers the daemon runs are left out.

use clap::CommandFactory;

use super::args::Cli;

/// The Markdown of `docs/cli.md`.
pub fn markdown() -> String {
    let mut cli = Cli::command().term_width(100);
    cli.build();
    let mut out = String::from(
        "# Command-line reference\n\n\
         Generated from podhost's own argument definitions (`src/cli/args.rs`) by\n\
         `cli::reference`; a test keeps it equal to them. Regenerate it with\n\
         `PODHOST_WRITE_CLI_REFERENCE=1 cargo test --test integration docs::`.\n\n",
    );
    out.push_str("## podhost\n\n```text\n");
    out.push_str(&plain(cli.render_long_help()));
    out.push_str("```\n");
    for sub in cli.get_subcommands_mut().filter(|s| !s.is_hide_set()) {
        let name = sub.get_name().to_string();
        out.push_str(&format!("\n## podhost {name}\n\n```text\n"));
        out.push_str(&plain(sub.render_long_help()));
        out.push_str("```\n");
    }
    out
}

/// The help without styling, each line without trailing spaces, ending in a newline.
fn plain(help: clap::builder::StyledStr) -> String {
    let text = help.to_string();
    let mut lines: String = text
        .lines()
        .map(|l| format!("{}\n", l.trim_end()))
        .collect();
    while lines.ends_with("\n\n") {
        lines.pop();
    }
    lines
}

/// Every visible subcommand with the flags it shows (its own and the global ones; not
/// the hidden ones tests use), for checking commands written in documents.
pub fn flags_by_command() -> Vec<(String, Vec<String>)> {
    let cli = Cli::command();
    let global: Vec<String> = cli
        .get_arguments()
        .filter(|a| a.is_global_set())
        .filter_map(|a| a.get_long().map(str::to_string))
        .collect();
    cli.get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| {
            let mut flags: Vec<String> = s
                .get_arguments()
                .filter(|a| !a.is_hide_set())
                .flat_map(|a| {
                    let long = a.get_long().map(|l| format!("--{l}"));
                    let short = a.get_short().map(|c| format!("-{c}"));
                    long.into_iter().chain(short)
                })
                .collect();
            flags.extend(global.iter().map(|g| format!("--{g}")));
            flags.extend(["--help".to_string(), "-h".to_string()]);
            (s.get_name().to_string(), flags)
        })
        .collect()
}
