//! `scontrol create NodeName=...` and `scontrol delete nodename=<hostlist>`, as Slurm 22.05's
//! dynamic nodes have them: the arguments joined into one node line; refusals on stderr in
//! Slurm's words (`Error creating the node(s): ...`, `delete_node NodeName=...: ...`), exit 1.

use super::client::{CliError, Client};
use crate::wire::messages::{Body, ErrorCode, ErrorReply};

fn call(body: Body) -> Result<Body, CliError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut c = Client::connect(None).await?;
        c.call(body).await
    })
}

/// Slurm's error text for a refusal's code (what `slurm_perror` prints), and the
/// controller's own detail when it says more.
fn texts(e: &ErrorReply) -> (&str, Option<&str>) {
    let code = match e.code {
        ErrorCode::InvalidNodeState => "Invalid node state specified",
        ErrorCode::InvalidNodeName => "Invalid node name specified",
        ErrorCode::NodesBusy => "Requested nodes are busy",
        ErrorCode::PermissionDenied => "Access/permission denied",
        _ => return (&e.message, None),
    };
    (code, (e.message != code).then_some(e.message.as_str()))
}

/// Print a failed request as scontrol does: the controller's detail as an error line, then
/// `what: <Slurm's text>`.
fn report(what: &str, r: Result<Body, CliError>) -> i32 {
    match r {
        Ok(Body::Ok) => 0,
        Ok(Body::Error(e)) | Err(CliError::Refused(e)) => {
            let (text, detail) = texts(&e);
            if let Some(d) = detail {
                eprintln!("scontrol: error: {d}");
            }
            eprintln!("{what}: {text}");
            1
        }
        Ok(other) => {
            eprintln!("{what}: unexpected reply {}", other.kind());
            1
        }
        Err(e) => {
            eprintln!("{what}: {e}");
            1
        }
    }
}

/// Whether `word` starts `NodeName=` (Slurm takes three letters or more of the key).
pub fn is_node_key(word: &str) -> bool {
    let key = word.split_once('=').map_or(word, |(k, _)| k);
    key.len() >= 3 && key.len() <= 8 && "nodename"[..key.len()].eq_ignore_ascii_case(key)
}

/// `scontrol create NodeName=<hostlist> CPUs=... State=FUTURE|CLOUD ...`.
pub fn create(args: &[&str]) -> i32 {
    let line = args.join(" ");
    if !line.to_ascii_lowercase().contains("nodename") {
        eprintln!("Input line must include \"NodeName\"");
        return 1;
    }
    // The key as scontrol forwards it: the controller reads the line as slurm.conf's.
    let line = match args.first().and_then(|a| a.split_once('=')) {
        Some((_, v)) => {
            let mut rest = vec![format!("NodeName={v}")];
            rest.extend(args[1..].iter().map(|s| s.to_string()));
            rest.join(" ")
        }
        None => line,
    };
    report("Error creating the node(s)", call(Body::CreateNode(line)))
}

/// `scontrol delete nodename=<hostlist>` (or `delete nodename <hostlist>`).
pub fn delete(args: &[&str]) -> i32 {
    let (arg, names) = match args {
        [word, names] if !word.contains('=') => (format!("{word}={names}"), names.to_string()),
        [one] => match one.split_once('=') {
            Some((_, v)) => (one.to_string(), v.to_string()),
            None => {
                eprintln!("scontrol: error: Invalid deletion entity: {one}");
                return 1;
            }
        },
        _ => {
            eprintln!("scontrol: error: too few arguments for keyword:delete");
            return 1;
        }
    };
    report(&format!("delete_node {arg}"), call(Body::DeleteNode(names)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_key_takes_slurms_abbreviations() {
        for w in ["NodeName=x", "nodename=x", "nod=x", "NODE=x", "NodeName"] {
            assert!(is_node_key(w), "{w}");
        }
        for w in ["no=x", "Nodes=x", "NodeNames=x", "reservation=x"] {
            assert!(!is_node_key(w), "{w}");
        }
    }

    #[test]
    fn refusals_print_slurms_text_and_the_detail() {
        let e = ErrorReply {
            code: ErrorCode::NodesBusy,
            message: "Requested nodes are busy".into(),
        };
        assert_eq!(texts(&e), ("Requested nodes are busy", None));
        let e = ErrorReply {
            code: ErrorCode::InvalidNodeState,
            message: "Only State=FUTURE and State=CLOUD allowed for nodes created by scontrol"
                .into(),
        };
        assert_eq!(
            texts(&e),
            (
                "Invalid node state specified",
                Some("Only State=FUTURE and State=CLOUD allowed for nodes created by scontrol")
            )
        );
    }
}
