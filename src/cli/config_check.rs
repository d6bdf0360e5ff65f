//! `canopy config check [-f FILE] [-v]`: the operator console's way to validate a site's
//! configuration before pointing the daemons at it (the same report as
//! `canopy-ctld --check`, see `daemon::check`). Without `-f` the file is found as every
//! command finds it (`$CANOPY_CONF`, `$SLURM_CONF`, /etc/canopy/slurm.conf).

use std::path::PathBuf;

const USAGE: &str = "usage: canopy config check [-f FILE] [-v]";

/// Runs `canopy config ARGS`; returns the exit status (0: would start, 1: would not,
/// 2: usage).
pub fn run(args: &[String]) -> i32 {
    let mut it = args.iter();
    match it.next().map(String::as_str) {
        Some("check") => {}
        Some("-h" | "--help") => {
            println!("{USAGE}");
            return 0;
        }
        _ => {
            eprintln!("{USAGE}");
            return 2;
        }
    }
    let mut file: Option<PathBuf> = None;
    let mut verbose = false;
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-v" | "--verbose" => verbose = true,
            "-f" | "--config" => match it.next() {
                Some(f) => file = Some(PathBuf::from(f)),
                None => {
                    eprintln!("canopy config check: option {arg} needs a file\n{USAGE}");
                    return 2;
                }
            },
            other => match other.strip_prefix("--config=") {
                Some(f) => file = Some(PathBuf::from(f)),
                None => {
                    eprintln!("canopy config check: unknown argument '{other}'\n{USAGE}");
                    return 2;
                }
            },
        }
    }
    let path = crate::config::Config::locate(file.as_deref());
    let report = crate::daemon::check::check(&path);
    print!("{}", report.render(verbose));
    report.exit_code()
}
