//! The book's "Every command and option" page (docs/src/lookup/cli-options.md), rendered from the
//! CLI's own clap definitions so it cannot drift from them: each command (subcommands of
//! subcommands too) with its usage, its about text and a table of its arguments. No terminal
//! width is involved, so the page is the same on every machine. The committed page is the
//! all-features CLI's; the test below fails when it differs, and with `TAGWARDEN_BLESS=1` writes
//! it again.

use std::fmt::Write as _;

use clap::{ArgAction, CommandFactory};

/// The page, from the top-level command's definition.
pub fn render() -> String {
    let mut cmd = crate::Cli::command().bin_name("tagwarden");
    cmd.build();
    let mut out = String::from(
        "# Every command and option\n\n\
         <!-- Generated from the CLI's clap definitions (src/bin/tagwarden/reference.rs): do not edit.\n     \
         `TAGWARDEN_BLESS=1 cargo test --all-features --bin tagwarden cli_reference` writes it again. -->\n\n\
         Every command and every option of the CLI built with all its features (`aws`, `azure`,\n\
         `gcp`, `kube`), rendered from the binary's own argument definitions; [CLI](cli.md) explains each\n\
         command with examples. Every command also takes `-h`/`--help`, `tagwarden` takes\n\
         `-V`/`--version`, and the global options of `tagwarden` may follow any command.\n",
    );
    command(&mut cmd, true, &mut out);
    out
}

fn command(cmd: &mut clap::Command, root: bool, out: &mut String) {
    let name = cmd.get_bin_name().unwrap_or(cmd.get_name()).to_string();
    let usage = cmd.render_usage().to_string();
    let usage = usage.trim().trim_start_matches("Usage:").trim();
    let _ = write!(out, "\n## `{name}`\n\n```text\n{usage}\n```\n");
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        let _ = write!(out, "\n{}\n", paragraphs(&about.to_string(), "\n\n"));
    }
    if let Some(after) = cmd.get_after_long_help().or(cmd.get_after_help()) {
        let _ = write!(out, "\n```text\n{}\n```\n", after.to_string().trim_end());
    }
    for group in cmd.get_groups().filter(|g| g.is_required_set()) {
        let members: Vec<String> = group
            .get_args()
            .filter_map(|id| cmd.get_arguments().find(|a| a.get_id() == id))
            .map(|a| format!("`{}`", flag(a)))
            .collect();
        let _ = write!(out, "\nOne of {} is required.\n", members.join(", "));
    }
    let shown = |a: &&clap::Arg| !a.is_hide_set() && !matches!(a.get_id().as_str(), "help" | "version");
    let mut args: Vec<&clap::Arg> = cmd.get_arguments().filter(shown).filter(|a| root || !a.is_global_set()).collect();
    // As --help lists them: the positionals, then the options, each in the order of their definition.
    args.sort_by_key(|a| (!a.is_positional(), a.get_display_order()));
    if !args.is_empty() {
        out.push_str(
            "\n| Argument | Value | Default | Possible values | Required | Description |\n\
             | --- | --- | --- | --- | --- | --- |\n",
        );
        for arg in args {
            let _ = writeln!(out, "| {} |", row(arg).join(" | "));
        }
    }
    let subs: Vec<&mut clap::Command> =
        cmd.get_subcommands_mut().filter(|s| !s.is_hide_set() && s.get_name() != "help").collect();
    if !subs.is_empty() {
        let names: Vec<String> = subs.iter().map(|s| format!("`{}`", s.get_name())).collect();
        let _ = write!(out, "\nCommands: {}.\n", names.join(", "));
    }
    for sub in subs {
        command(sub, false, out);
    }
}

/// The table's cells for one argument, escaped.
fn row(arg: &clap::Arg) -> Vec<String> {
    let takes_values = arg.get_action().takes_values();
    let code = |s: &str| if s.is_empty() { String::new() } else { format!("`{}`", s.replace('|', "\\|")) };
    let mut value =
        arg.get_value_names().unwrap_or_default().iter().map(|n| format!("<{n}>")).collect::<Vec<_>>().join(" ");
    if arg.get_num_args().is_some_and(|n| n.max_values() > 1) {
        value.push_str("...");
    }
    let mut value = if takes_values { code(&value) } else { String::new() };
    if takes_values && matches!(arg.get_action(), ArgAction::Append) && !arg.is_positional() {
        value.push_str(" (repeatable)");
    }
    let defaults: Vec<String> = arg.get_default_values().iter().map(|d| d.to_string_lossy().into_owned()).collect();
    let default = if takes_values { code(&defaults.join(" ")) } else { String::new() };
    let possible: Vec<String> =
        arg.get_possible_values().iter().filter(|p| !p.is_hide_set()).map(|p| code(p.get_name())).collect();
    let help =
        arg.get_long_help().or(arg.get_help()).map(|h| paragraphs(&h.to_string(), "<br><br>")).unwrap_or_default();
    let argument = if arg.is_positional() { "(positional)".to_string() } else { code(&flag(arg)) };
    let required = if arg.is_required_set() { "yes" } else { "" };
    vec![argument, value, default, possible.join(", "), required.to_string(), help]
}

/// `-v, --verbose`, `--json`; a positional's value name.
fn flag(arg: &clap::Arg) -> String {
    let short = arg.get_short().map(|s| format!("-{s}"));
    let long = arg.get_long().map(|l| format!("--{l}"));
    let names: Vec<String> = short.into_iter().chain(long).collect();
    if names.is_empty() {
        arg.get_value_names().and_then(|n| n.first()).map_or_else(|| arg.get_id().to_string(), |n| n.to_string())
    } else {
        names.join(", ")
    }
}

/// Help text as Markdown: each paragraph on one line (a table cell holds no line break), every
/// Markdown character escaped so the text reads as `--help` prints it, paragraphs joined by `sep`.
fn paragraphs(text: &str, sep: &str) -> String {
    let escape = |word: &str| {
        let mut s = String::with_capacity(word.len());
        for c in word.chars() {
            if "\\`*_[]<>|#&~".contains(c) {
                s.push('\\');
            }
            s.push(c);
        }
        s
    };
    text.split("\n\n")
        .map(|p| p.split_whitespace().map(escape).collect::<Vec<_>>().join(" "))
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(sep)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// The committed page is what the CLI renders (with every feature: the module is built only then).
    #[test]
    fn cli_reference_is_generated() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/lookup/cli-options.md");
        let rendered = super::render();
        if std::env::var("TAGWARDEN_BLESS").is_ok_and(|v| v == "1") {
            if let Err(e) = std::fs::write(&path, &rendered) {
                panic!("writing {}: {e}", path.display());
            }
            return;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        if committed != rendered {
            let line = committed.lines().zip(rendered.lines()).position(|(a, b)| a != b);
            let line = line.unwrap_or_else(|| committed.lines().count().min(rendered.lines().count())) + 1;
            panic!(
                "{} differs from the CLI's definitions (from line {line}); \
                 `TAGWARDEN_BLESS=1 cargo test --all-features --bin tagwarden cli_reference` writes it again",
                path.display()
            );
        }
    }
}
