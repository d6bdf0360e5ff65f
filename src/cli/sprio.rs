//! `sprio`: the factors behind pending jobs' priorities. Slurm's sprio
//! works only under `PriorityType=priority/multifactor`; under
//! `priority/basic` (the default, and what canopy's FIFO scheduler is) it
//! refuses with a three-line message and exit 1, which is what this
//! command does too. canopy computes no multifactor priorities yet (the
//! scheduling issue adds them), so a config that asks for them gets a
//! clear error instead of made-up factors.

use super::client::Client;
use super::getopt::{self, spec, Ambiguity, ArgKind::Flag, ArgKind::Required, OptSpec};

static OPTIONS: &[OptSpec<&str>] = &[
    spec("noheader", Some('h'), Flag, "noheader"),
    spec("jobs", Some('j'), Required, "jobs"),
    spec("long", Some('l'), Flag, "long"),
    spec("clusters", Some('M'), Required, "clusters"),
    spec("norm", Some('n'), Flag, "norm"),
    spec("format", Some('o'), Required, "format"),
    spec("sort", Some('S'), Required, "sort"),
    spec("partition", Some('p'), Required, "partition"),
    spec("user", Some('u'), Required, "user"),
    spec("verbose", Some('v'), Flag, "verbose"),
    spec("version", Some('V'), Flag, "version"),
    spec("weights", Some('w'), Flag, "weights"),
    spec("help", None, Flag, "help"),
    spec("usage", None, Flag, "usage"),
];

const USAGE: &str = "Usage: sprio [-j jid[s]] [-u user_name[s]] [-o format] [-p partitions]\n     [--usage] [-h] [-l] [-n] [-v] [-w] [-M clusters]";

pub fn run(args: &[String]) -> i32 {
    let options = match getopt::read_all(OPTIONS, args, Ambiguity::SameAction) {
        Ok((options, _)) => options,
        Err(e) => {
            eprintln!("{}", e.message("sprio"));
            eprintln!("Try \"sprio --help\" for more information");
            return 1;
        }
    };
    for g in &options {
        match g.spec.action {
            "help" | "usage" => {
                println!("{USAGE}");
                return 0;
            }
            "version" => {
                println!("canopy {}", env!("CARGO_PKG_VERSION"));
                return 0;
            }
            _ => {}
        }
    }
    let conf = match Client::connect_config(None) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sprio: error: {e}");
            return 1;
        }
    };
    refusal(&conf.priority_type).map_or(0, |text| {
        eprint!("{text}");
        1
    })
}

/// What sprio prints (on stderr, exit 1) under `priority_type`.
fn refusal(priority_type: &str) -> Option<String> {
    if priority_type == "priority/multifactor" {
        return Some(
            "sprio: error: canopy does not compute multifactor priorities yet \
             (PriorityType=priority/multifactor); jobs are scheduled first in, first out\n"
                .to_string(),
        );
    }
    Some(format!(
        "You are not running a supported priority plugin\n({priority_type}).\n\
         Only 'priority/multifactor' is supported.\n"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_priorities_get_slurms_refusal() {
        assert_eq!(
            refusal("priority/basic").unwrap(),
            "You are not running a supported priority plugin\n(priority/basic).\n\
             Only 'priority/multifactor' is supported.\n"
        );
        assert!(refusal("priority/multifactor")
            .unwrap()
            .contains("not compute multifactor"));
    }
}
