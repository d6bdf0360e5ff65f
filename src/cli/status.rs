//! `canopy status`: the live actor tree (kind, state, mailbox depth, messages
//! handled) and the relay tree (which node hangs under which relay now).

use std::collections::BTreeMap;

use super::client::Client;
use crate::wire::messages::{Body, StatusReport};

pub fn run(args: &[String]) -> i32 {
    let json = args.iter().any(|a| a == "--json");
    super::block_on(async move {
        let r = async {
            let mut c = Client::connect(None).await?;
            c.call(Body::QueryStatus).await
        }
        .await;
        match r {
            Ok(Body::Status(s)) => {
                if json {
                    match serde_json::to_string_pretty(&StatusJson::from(&*s)) {
                        Ok(t) => println!("{t}"),
                        Err(e) => {
                            eprintln!("canopy: error: {e}");
                            return 1;
                        }
                    }
                } else {
                    print!("{}", render(&s));
                }
                0
            }
            Ok(other) => {
                eprintln!("canopy: error: unexpected reply {}", other.kind());
                1
            }
            Err(e) => super::report("canopy status", &e),
        }
    })
}

#[derive(serde::Serialize)]
struct StatusJson<'a> {
    controller: &'a str,
    tree_width: u32,
    actors: Vec<BTreeMap<&'static str, String>>,
    tree: Vec<BTreeMap<&'static str, String>>,
}

impl<'a> From<&'a StatusReport> for StatusJson<'a> {
    fn from(s: &'a StatusReport) -> Self {
        StatusJson {
            controller: &s.controller,
            tree_width: s.tree_width,
            actors: s
                .actors
                .iter()
                .map(|a| {
                    BTreeMap::from([
                        ("kind", a.kind.clone()),
                        ("name", a.name.clone()),
                        ("state", a.state.clone()),
                        ("mailbox_depth", a.mailbox_depth.to_string()),
                        ("handled", a.handled.to_string()),
                    ])
                })
                .collect(),
            tree: s
                .tree
                .iter()
                .map(|t| {
                    BTreeMap::from([
                        ("node", t.node.clone()),
                        ("rank", t.rank.to_string()),
                        (
                            "parent",
                            t.parent.clone().unwrap_or_else(|| "controller".into()),
                        ),
                        (
                            "attached_to",
                            t.attached_to.clone().unwrap_or_else(|| "controller".into()),
                        ),
                        ("live", t.live.to_string()),
                    ])
                })
                .collect(),
        }
    }
}

/// Text view: an actor table, then the relay tree drawn by live attachment.
pub fn render(s: &StatusReport) -> String {
    let mut out = format!(
        "controller {} (TreeWidth={})\n\nACTORS\n{:<10} {:<16} {:>7} {:>10}  STATE\n",
        s.controller, s.tree_width, "KIND", "NAME", "MAILBOX", "HANDLED"
    );
    for a in &s.actors {
        out.push_str(&format!(
            "{:<10} {:<16} {:>7} {:>10}  {}\n",
            a.kind, a.name, a.mailbox_depth, a.handled, a.state
        ));
    }
    out.push_str(
        "\nRELAY TREE (live attachment; * = not on its natural parent, ! = not responding)\n",
    );
    let mut children: BTreeMap<Option<&str>, Vec<&crate::wire::messages::TreePlace>> =
        BTreeMap::new();
    for t in &s.tree {
        let parent = if t.live {
            t.attached_to.as_deref()
        } else {
            t.parent.as_deref()
        };
        children.entry(parent).or_default().push(t);
    }
    out.push_str("controller\n");
    draw(&children, None, 1, &mut out);
    out
}

fn draw(
    children: &BTreeMap<Option<&str>, Vec<&crate::wire::messages::TreePlace>>,
    parent: Option<&str>,
    depth: usize,
    out: &mut String,
) {
    let Some(kids) = children.get(&parent) else {
        return;
    };
    let mut kids = kids.clone();
    kids.sort_by_key(|t| t.rank);
    for t in kids {
        let moved = t.live && t.attached_to != t.parent;
        out.push_str(&format!(
            "{}{}{}{}\n",
            "  ".repeat(depth),
            t.node,
            if moved { " *" } else { "" },
            if t.live { "" } else { " !" }
        ));
        draw(children, Some(t.node.as_str()), depth + 1, out);
    }
}
