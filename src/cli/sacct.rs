//! `sacct`: accounting records of jobs and their steps, kept for good by the
//! controller. Options are parsed in `sacct_args`, laid out in `format::sacct`.

use super::client::{CliError, Client};
use super::format::sacct::{help_format, render};
use super::sacct_args::parse;
use crate::wire::messages::Body;

pub fn run(args: &[String]) -> i32 {
    let env: Vec<(String, String)> = std::env::vars().collect();
    let now = chrono::Utc::now().timestamp();
    let a = match parse(args, &env, now) {
        Ok(a) => a,
        // -h, --usage and -V arrive as "errors" that exit 0 on stdout.
        Err(e) if e.exit_code() == 0 => {
            println!("{e}");
            return 0;
        }
        Err(e) => {
            eprintln!("{e}");
            return e.exit_code();
        }
    };
    if a.help_format {
        print!("{}", help_format());
        return 0;
    }
    let mut q = a.query.clone();
    // Like Slurm: users see their own jobs unless they ask for all (-a);
    // root sees everyone's. The controller enforces this too.
    let me = nix::unistd::getuid().as_raw();
    if q.uids.is_empty() && !a.all_users && me != 0 {
        q.uids = vec![me];
    }
    super::block_on(async move {
        let r = async {
            let mut c = Client::connect(None).await?;
            c.call(Body::QueryAcct(q)).await
        }
        .await;
        match r {
            Ok(Body::Acct(jobs)) => {
                print!("{}", render(&jobs, &a, now));
                0
            }
            Ok(other) => {
                eprintln!("sacct: error: unexpected reply {}", other.kind());
                1
            }
            Err(CliError::Refused(e)) => {
                eprintln!("sacct: error: {}", e.message);
                1
            }
            Err(e) => super::report("sacct", &e),
        }
    })
}
