//! Delayer 1.x's flag spellings, rewritten into the ones clap parses.
//!
//! 1.x parsed its flags with Go's `flag` package, which takes one or two
//! dashes for any flag, short or long (`-daemon`, `--c FILE`), and a value
//! after `=` or as the next argument (`-configuration=FILE`), a boolean one
//! too (`-d=true`). Scripts and init files written for 1.x use those
//! spellings; clap reads `-d`, `--daemon`, `-c FILE`, `--configuration=FILE`
//! only. So before clap sees the arguments, every spelling of one of our
//! flags becomes its `--long` form. The flags are read from clap's own
//! definition of the command line, so a flag added there is covered here.
//!
//! Only arguments naming one of our flags are rewritten; a flag's value, and
//! everything after `--`, are passed on as they are.

use clap::CommandFactory;
use std::ffi::OsString;

/// One flag of the command line, by its long name.
struct Flag {
    long: String,
    short: Option<char>,
    takes_value: bool,
}

/// Every flag of `C`, its subcommands' included.
fn flags<C: CommandFactory>() -> Vec<Flag> {
    let mut command = C::command();
    command.build();
    let mut found = Vec::new();
    collect(&command, &mut found);
    found
}

fn collect(command: &clap::Command, found: &mut Vec<Flag>) {
    for arg in command.get_arguments() {
        if let Some(long) = arg.get_long() {
            found.push(Flag {
                long: long.to_string(),
                short: arg.get_short(),
                takes_value: arg.get_action().takes_values(),
            });
        }
    }
    for sub in command.get_subcommands() {
        collect(sub, found);
    }
}

/// Go's `strconv.ParseBool`, which the `flag` package uses for `-d=VALUE`.
fn go_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// `args` (the program name first) with every Go-style spelling of a flag
/// of `C` rewritten as `--long`, `--long=VALUE`, or dropped for a boolean
/// flag set to false (`-d=false`).
pub fn normalize<C: CommandFactory>(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let flags = flags::<C>();
    let mut args = args.into_iter();
    let mut out: Vec<OsString> = args.next().into_iter().collect();
    while let Some(arg) = args.next() {
        // Not UTF-8: none of our flags; clap judges it.
        let Some(text) = arg.to_str() else {
            out.push(arg);
            continue;
        };
        if text == "--" {
            out.push(arg);
            out.extend(args.by_ref());
            break;
        }
        let (dashes, rest) = match text.strip_prefix("--") {
            Some(rest) => (2, rest),
            None => match text.strip_prefix('-') {
                Some(rest) => (1, rest),
                None => {
                    out.push(arg);
                    continue;
                }
            },
        };
        let (name, value) = match rest.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (rest, None),
        };
        let mut chars = name.chars();
        let short = match (chars.next(), chars.next()) {
            (Some(c), None) => Some(c),
            _ => None,
        };
        let flag = flags.iter().find(|f| match short {
            Some(c) => f.short == Some(c),
            None => f.long == name,
        });
        let Some(flag) = flag else {
            out.push(arg);
            continue;
        };
        // Spellings clap reads already are left alone (so are its errors).
        let clap_reads = match short {
            Some(_) => dashes == 1 && value.is_none(),
            None => dashes == 2 && (flag.takes_value || value.is_none()),
        };
        if clap_reads {
            out.push(arg.clone());
            if flag.takes_value && value.is_none() {
                out.extend(args.next());
            }
            continue;
        }
        match value {
            None => {
                out.push(format!("--{}", flag.long).into());
                if flag.takes_value {
                    out.extend(args.next());
                }
            }
            Some(value) if flag.takes_value => out.push(format!("--{}={value}", flag.long).into()),
            Some(value) => match go_bool(value) {
                Some(true) => out.push(format!("--{}", flag.long).into()),
                Some(false) => {}
                // Not a boolean: clap refuses it, as Go's flag package did.
                None => out.push(format!("--{}={value}", flag.long).into()),
            },
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;

    fn rewrite(args: &[&str]) -> Vec<String> {
        let argv = std::iter::once("delayer").chain(args.iter().copied()).map(OsString::from);
        normalize::<Cli>(argv).into_iter().skip(1).map(|a| a.into_string().expect("utf-8")).collect()
    }

    #[test]
    fn go_spellings_become_clap_ones() {
        for (go, clap) in [
            (&["-daemon"][..], &["--daemon"][..]),
            (&["--d"], &["--daemon"]),
            (&["-d=true"], &["--daemon"]),
            (&["-daemon=false"], &[]),
            (&["-configuration", "f"], &["--configuration", "f"]),
            (&["-configuration=f"], &["--configuration=f"]),
            (&["--c", "f"], &["--configuration", "f"]),
            (&["--c=f"], &["--configuration=f"]),
            (&["-c=f"], &["--configuration=f"]),
            (&["-help"], &["--help"]),
            (&["--h"], &["--help"]),
            (&["-version"], &["--version"]),
            (&["--v"], &["--version"]),
            (&["-c", "f", "stats", "-json"], &["-c", "f", "stats", "--json"]),
            (&["dead", "purge", "t", "-all"], &["dead", "purge", "t", "--all"]),
        ] {
            assert_eq!(rewrite(go), clap, "{go:?}");
        }
    }

    #[test]
    fn values_and_what_clap_reads_are_left_alone() {
        for args in [
            &["-d", "-c", "f"][..],
            &["--daemon", "--configuration", "-help"],
            &["--configuration=-daemon"],
            &["-c", "-version"],
            &["-cfile"],
            &["stats", "--url", "-c", "--prefix", "-d"],
            &["dead", "list", "t", "--", "-help"],
            &["peek", "topic", "5", "--json"],
            &["-x", "--unknown=1"],
        ] {
            assert_eq!(rewrite(args), args, "{args:?}");
        }
        // A flag that takes no value, given one: clap's error, as Go's.
        assert_eq!(rewrite(&["-d=maybe"]), ["--daemon=maybe"]);
    }

    #[test]
    fn the_rewritten_arguments_parse() {
        use clap::Parser;
        let argv = ["delayer", "-daemon", "-configuration=/etc/d.conf"].map(OsString::from);
        let cli = Cli::try_parse_from(normalize::<Cli>(argv)).expect("parses");
        assert!(cli.daemon);
        assert_eq!(cli.configuration.as_deref(), Some(std::path::Path::new("/etc/d.conf")));
        let argv = ["delayer", "-d=maybe"].map(OsString::from);
        let refused = Cli::try_parse_from(normalize::<Cli>(argv)).map(|_| ()).map_err(|e| e.exit_code());
        assert_eq!(refused, Err(2));
    }
}
