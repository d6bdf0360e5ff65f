//! `sacctmgr`: view and change the association database the controller
//! keeps (clusters, accounts, users, QOS). Changes go to the controller,
//! which allows them to operators and users with AdminLevel Operator or
//! Administrator; without `-i` sacctmgr first shows what would change
//! and asks, as Slurm's does (reading the answer from standard input,
//! terminal or not). `grammar.rs` reads the words, `show.rs` prints.

mod grammar;
mod show;

use std::io::{Read, Write};
use std::sync::mpsc;
use std::time::Duration;

use super::client::Client;
use super::getopt::{self, spec, Ambiguity, ArgKind, OptSpec};
use crate::model::assoc::request::AcctRequest;
use crate::wire::messages::{AcctMgrReply, AcctMgrRequest, Body};
use grammar::{Command, Show};
use show::{Host, Style};

static OPTIONS: &[OptSpec<&str>] = &[
    spec("help", Some('h'), ArgKind::Flag, "help"),
    spec("usage", None, ArgKind::Flag, "help"),
    spec("immediate", Some('i'), ArgKind::Flag, "immediate"),
    spec("noheader", Some('n'), ArgKind::Flag, "noheader"),
    spec("oneliner", Some('o'), ArgKind::Flag, "oneliner"),
    spec("parsable", Some('p'), ArgKind::Flag, "parsable"),
    spec("parsable2", Some('P'), ArgKind::Flag, "parsable2"),
    spec("quiet", Some('Q'), ArgKind::Flag, "quiet"),
    spec("readonly", Some('r'), ArgKind::Flag, "readonly"),
    spec("associations", Some('s'), ArgKind::Flag, "associations"),
    spec("verbose", Some('v'), ArgKind::Flag, "verbose"),
    spec("version", Some('V'), ArgKind::Flag, "version"),
    spec("cluster", Some('M'), ArgKind::Required, "cluster"),
];

const USAGE: &str = "\
sacctmgr [<OPTION>] [<COMMAND>]
    Valid <OPTION> values are:
     -h or --help: equivalent to \"help\" command
     -i or --immediate: commit changes immediately without asking
     -n or --noheader: no header will be added to the beginning of output
     -p or --parsable: output will be '|' delimited with a '|' at the end
     -P or --parsable2: output will be '|' delimited without a '|' at the end
     -Q or --quiet: equivalent to \"quiet\" command
     -r or --readonly: equivalent to \"readonly\" command
     -s or --associations: equivalent to \"associations\" command
     -v or --verbose: equivalent to \"verbose\" command
     -V or --version: equivalent to \"version\" command

  <keyword> may be omitted from the execute line and sacctmgr will execute
  in interactive mode. It will process commands as entered until explicitly
  terminated.

    Valid <COMMAND> values are:
     add <ENTITY> <SPECS>     add entity
     create <ENTITY> <SPECS>  same as add
     delete <ENTITY> where <SPECS>  delete the specified entity(s)
     remove <ENTITY> where <SPECS>  same as delete
     list <ENTITY> [<SPECS>]  display info of identified entity, default
                              is display all.
     show                     same as list
     modify <ENTITY> where <SPECS> set <SPECS>  modify entity
     update                   same as modify
     help                     print this description of use.
     quit                     terminate this command.
     version                  display tool version number.

  <ENTITY> may be \"account\", \"association\", \"cluster\", \"qos\" or \"user\".

  <SPECS> are options for each entity: Names=, Cluster=, Account=, User=,
  Parent=, Description=, Organization=, DefaultAccount=, AdminLevel=,
  Fairshare=, GrpJobs=, GrpSubmitJobs=, GrpTRES=, GrpTRESMins=, GrpWall=,
  MaxJobs=, MaxSubmitJobs=, MaxTRES=, MaxTRESPerNode=, MaxWall=, QOS=,
  DefaultQOS=; for a QOS: Priority=, UsageFactor=, GraceTime=, Preempt=,
  PreemptMode=, Flags=, MaxJobsPerUser=, MaxSubmitJobsPerUser=,
  MaxTRESPerUser=, MaxTRESPerJob=; show takes Format= and WithAssoc, Tree.";

#[derive(Debug, Clone, Copy, Default)]
struct Flags {
    immediate: bool,
    quiet: bool,
    readonly: bool,
    with_assoc: bool,
    style: Style,
}

pub fn run(args: &[String]) -> i32 {
    let (given, words) = match getopt::read_all(OPTIONS, args, Ambiguity::Error) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("{}", e.message("sacctmgr"));
            eprintln!("Try \"sacctmgr --help\" for more information");
            return 1;
        }
    };
    let mut flags = Flags::default();
    for g in given {
        match g.spec.action {
            "help" => {
                println!("{USAGE}");
                return 0;
            }
            "version" => {
                println!("slurm 22.05.9 (canopy {})", env!("CARGO_PKG_VERSION"));
                return 0;
            }
            "immediate" => flags.immediate = true,
            "noheader" => flags.style.noheader = true,
            "parsable" => flags.style.parsable = Some(true),
            "parsable2" => flags.style.parsable = Some(false),
            "quiet" => flags.quiet = true,
            "readonly" => flags.readonly = true,
            "associations" => flags.with_assoc = true,
            _ => {}
        }
    }
    if !words.is_empty() {
        return super::block_on(execute(words, flags));
    }
    // No command: read them from standard input, one a line.
    let mut code = 0;
    let stdin = std::io::stdin();
    let tty = std::io::IsTerminal::is_terminal(&stdin);
    loop {
        if tty {
            print!("sacctmgr: ");
            let _ = std::io::stdout().flush();
        }
        let mut line = String::new();
        match stdin.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        match words.first().map(|w| w.to_ascii_lowercase()) {
            None => continue,
            Some(w) if w == "quit" || w == "exit" => break,
            Some(w) if w == "help" => println!("{USAGE}"),
            Some(_) => code = super::block_on(execute(words, flags)),
        }
    }
    code
}

/// Run one command; returns the exit code.
async fn execute(words: Vec<String>, flags: Flags) -> i32 {
    if words.len() == 1 && words[0].eq_ignore_ascii_case("help") {
        println!("{USAGE}");
        return 0;
    }
    if words.len() == 1 && words[0].eq_ignore_ascii_case("version") {
        println!("slurm 22.05.9 (canopy {})", env!("CARGO_PKG_VERSION"));
        return 0;
    }
    let cmd = match grammar::parse(&words) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{}", e.0);
            return 1;
        }
    };
    let mut client = match Client::connect(None).await {
        Ok(c) => c,
        Err(e) => return super::report("sacctmgr", &e),
    };
    match cmd {
        Command::Show(mut s) => {
            s.with_assoc |= flags.with_assoc;
            show(&mut client, &s, flags.style).await
        }
        Command::Change(req) => {
            if flags.readonly {
                eprintln!("Can't run this command in readonly mode.");
                return 1;
            }
            change(&mut client, *req, flags).await
        }
    }
}

async fn show(client: &mut Client, s: &Show, style: Style) -> i32 {
    let db = match client.call(Body::QueryAccounts).await {
        Ok(Body::Accounts(db)) => db,
        Ok(other) => {
            eprintln!("sacctmgr: error: unexpected reply {}", other.kind());
            return 1;
        }
        Err(e) => return super::report("sacctmgr", &e),
    };
    let host = Host {
        addr: client.conf.control_addr.clone(),
        port: client.conf.slurmctld_port,
    };
    match show::render(&db, &host, s, style) {
        Ok(text) => {
            print!("{text}");
            0
        }
        Err(e) => {
            eprintln!("{}", e.0);
            1
        }
    }
}

async fn send(client: &mut Client, req: &AcctRequest, commit: bool) -> Result<AcctMgrReply, i32> {
    let body = Body::AcctMgr(Box::new(AcctMgrRequest {
        req: req.clone(),
        commit,
    }));
    match client.call(body).await {
        Ok(Body::AcctMgrReply(r)) => Ok(r),
        Ok(other) => {
            eprintln!("sacctmgr: error: unexpected reply {}", other.kind());
            Err(1)
        }
        Err(e) => Err(super::report("sacctmgr", &e)),
    }
}

/// Print a reply; `Err(code)` for a refusal.
fn print(r: &AcctMgrReply, quiet: bool) -> Result<(), i32> {
    if !r.ok {
        for l in &r.lines {
            eprintln!("{l}");
        }
        return Err(1);
    }
    if !quiet {
        for l in &r.lines {
            println!("{l}");
        }
    }
    Ok(())
}

async fn change(client: &mut Client, req: AcctRequest, flags: Flags) -> i32 {
    if flags.immediate {
        let r = match send(client, &req, true).await {
            Ok(r) => r,
            Err(c) => return c,
        };
        return print(&r, flags.quiet).err().unwrap_or(0);
    }
    // Ask the controller what would change, show it, and ask the user.
    let preview = match send(client, &req, false).await {
        Ok(r) => r,
        Err(c) => return c,
    };
    if let Err(c) = print(&preview, flags.quiet) {
        return c;
    }
    if !preview.changed {
        return 0;
    }
    if !confirm("Would you like to commit changes?") {
        println!(" Changes Discarded");
        return 0;
    }
    match send(client, &req, true).await {
        // Printed already; a refusal now (the database changed in
        // between) is printed as one.
        Ok(r) if r.ok => 0,
        Ok(r) => print(&r, false).err().unwrap_or(1),
        Err(c) => c,
    }
}

/// Slurm's commit prompt: one character from standard input within 30
/// seconds; `y` commits, `n` or a bare Enter does not, anything else asks
/// again. Standard input that ends answers no.
fn confirm(question: &str) -> bool {
    println!("{question} (You have 30 seconds to decide)");
    let (tx, rx) = mpsc::channel::<Option<u8>>();
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin();
        let mut b = [0u8; 1];
        loop {
            let got = match stdin.read(&mut b) {
                Ok(1) => Some(b[0]),
                _ => None,
            };
            let end = got.is_none();
            if tx.send(got).is_err() || end {
                return;
            }
        }
    });
    let mut asked = false;
    loop {
        if asked {
            println!("Y or N please");
        }
        asked = true;
        print!("(N/y): ");
        let _ = std::io::stdout().flush();
        match rx.recv_timeout(Duration::from_secs(30)) {
            Err(_) => {
                println!("timeout");
                return false;
            }
            Ok(None) => {
                println!();
                return false;
            }
            Ok(Some(c)) => {
                println!();
                match c {
                    b'y' | b'Y' => return true,
                    b'n' | b'N' | b'\n' => return false,
                    _ => {}
                }
            }
        }
    }
}
