//! The core's side of dynamic nodes: a joining daemon gets a rank and a stored line, the node
//! becomes IDLE+DYNAMIC_NORM when it registers, scontrol creates FUTURE nodes that a joining
//! daemon turns normal, deletion is refused while the node is in use, and what is stored brings
//! the nodes back at their ranks.

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::Config;
use crate::ctld::fixtures::{hello, reach, running};
use crate::ctld::{Command, Core, NodePlace, Output, Reply};
use crate::model::node::NodeBaseState;
use crate::policy::authz::Caller;
use crate::state::store::Op;
use crate::wire::messages::ErrorCode;

const T0: i64 = 1000;
const USER: Caller = Caller {
    uid: 1000,
    operator: false,
};

fn conf(nodes: &str) -> Config {
    let text = format!(
        "ClusterName=t\nSlurmctldHost=c(127.0.0.1)\nSlurmdTimeout=60\nMaxNodeCount=6\n\
         {nodes}PartitionName=p Nodes=ALL Default=YES\n"
    );
    Config::parse_str_with_gres(&text, std::path::Path::new("/x/slurm.conf"), None).unwrap()
}

fn core(nodes: &str) -> Core {
    Core::recover(Arc::new(conf(nodes)), vec![], None, &HashMap::new(), T0).0
}

fn join(
    core: &mut Core,
    line: &str,
) -> (
    Result<Vec<NodePlace>, crate::wire::messages::ErrorReply>,
    Output,
) {
    let mut out = core.apply(
        T0,
        Command::JoinNode {
            line: line.into(),
            peer: Some("127.0.0.9".into()),
        },
    );
    match out.reply.take() {
        Some(Reply::Nodes(r)) => (r, out),
        other => panic!("{other:?}"),
    }
}

fn done(out: &mut Output) -> Result<(), crate::wire::messages::ErrorReply> {
    match out.reply.take() {
        Some(Reply::Done(r)) => r,
        other => panic!("{other:?}"),
    }
}

fn stored(out: &Output) -> Vec<(u32, String)> {
    out.persist
        .iter()
        .filter_map(|op| match op {
            Op::PutDynNode { offset, line } => Some((*offset, line.clone())),
            _ => None,
        })
        .collect()
}

/// Node `rank` (named `name`) registers and the tree reaches it.
fn come_up(core: &mut Core, rank: u32, name: &str) {
    let mut h = hello(rank, &[]);
    h.node = name.into();
    core.apply(
        T0 + 1,
        Command::NodeRegistered {
            hello: Box::new(h),
            via: None,
        },
    );
    reach(core, rank, true, T0 + 1);
}

#[test]
fn a_joining_daemon_gets_the_next_rank_and_registers_as_idle_dynamic_norm() {
    let mut c = core("NodeName=n[1-2] CPUs=2\n");
    let (r, out) = join(&mut c, "NodeName=d1 CPUs=4 RealMemory=100 Feature=f");
    let placed = r.unwrap();
    assert_eq!(placed.len(), 1);
    assert_eq!(placed[0].rank, 2);
    // Its address is where it asked from, and that is what is stored.
    assert!(
        placed[0].line.contains("NodeAddr=127.0.0.9"),
        "{}",
        placed[0].line
    );
    assert_eq!(stored(&out), [(0, placed[0].line.clone())]);
    let info = c.node_info(2).unwrap();
    assert_eq!((info.name.as_str(), info.cpus), ("d1", 4));
    assert_eq!(info.partitions, ["p"]);
    assert_eq!(info.scontrol_state(), "UNKNOWN+DYNAMIC_NORM+NOT_RESPONDING");
    come_up(&mut c, 2, "d1");
    let info = c.node_info(2).unwrap();
    assert_eq!(info.base, NodeBaseState::Idle);
    assert_eq!(info.scontrol_state(), "IDLE+DYNAMIC_NORM");
    // A restarted daemon asking again keeps its rank; nothing new is stored.
    let (r, out) = join(&mut c, "NodeName=d1 CPUs=4 RealMemory=100 Feature=f");
    assert_eq!(r.unwrap()[0].rank, 2);
    assert!(stored(&out).is_empty());
    // From elsewhere: the address follows the registration.
    let (r, out) = join(&mut c, "NodeName=d1 CPUs=4 NodeAddr=10.1.1.1 Port=7000");
    assert_eq!(r.unwrap()[0].rank, 2);
    assert_eq!(stored(&out).len(), 1);
    let info = c.node_info(2).unwrap();
    assert_eq!((info.addr.as_str(), info.port), ("10.1.1.1", 7000));
    // A node slurm.conf lists registers at its own rank, unchanged.
    let (r, out) = join(&mut c, "NodeName=n2 CPUs=2");
    assert_eq!(r.unwrap()[0].rank, 1);
    assert!(stored(&out).is_empty());
}

#[test]
fn max_node_count_refuses_the_join_past_it() {
    let mut c = core("NodeName=n[1-2] CPUs=2\n");
    for (i, name) in ["d1", "d2", "d3", "d4"].iter().enumerate() {
        let (r, _) = join(&mut c, &format!("NodeName={name} CPUs=1"));
        assert_eq!(r.unwrap()[0].rank, 2 + i as u32);
    }
    let (r, out) = join(&mut c, "NodeName=d5 CPUs=1");
    let e = r.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidNodeName);
    assert_eq!(
        e.message,
        "Attempting to create node record past MaxNodeCount:6"
    );
    assert!(out.persist.is_empty());
    let (r, _) = join(&mut c, "NodeName=d6 CPUs=x");
    assert_eq!(r.unwrap_err().code, ErrorCode::InvalidRequest);
}

#[test]
fn scontrol_create_needs_an_operator_and_a_future_node_turns_normal_when_it_joins() {
    let mut c = core("NodeName=n1 CPUs=2\n");
    let create = |c: &mut Core, line: &str, caller| {
        let mut out = c.apply(
            T0,
            Command::CreateNodes {
                line: line.into(),
                caller,
            },
        );
        match out.reply.take() {
            Some(Reply::Nodes(r)) => (r, out),
            other => panic!("{other:?}"),
        }
    };
    let (r, _) = create(&mut c, "NodeName=f1 CPUs=2 State=FUTURE", USER);
    assert_eq!(r.unwrap_err().code, ErrorCode::PermissionDenied);
    let (r, _) = create(&mut c, "NodeName=f1 CPUs=2", Caller::ROOT);
    let e = r.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidNodeState);
    assert_eq!(
        e.message,
        "Only State=FUTURE and State=CLOUD allowed for nodes created by scontrol"
    );
    let (r, out) = create(&mut c, "NodeName=f[1-2] CPUs=2 State=FUTURE", Caller::ROOT);
    assert_eq!(
        r.unwrap().iter().map(|p| p.rank).collect::<Vec<_>>(),
        [1, 2]
    );
    assert_eq!(stored(&out).len(), 2);
    let info = c.node_info(1).unwrap();
    // As Slurm 22.05 shows it.
    assert_eq!(info.scontrol_state(), "FUTURE+DYNAMIC_NORM");
    let (r, _) = create(&mut c, "NodeName=f1 State=FUTURE", Caller::ROOT);
    assert_eq!(
        r.unwrap_err().message,
        "Node 'f1' already exists in the node table"
    );
    // Its daemon starts with -Z: the FUTURE node is the one it becomes.
    let (r, out) = join(&mut c, "NodeName=f1 CPUs=2");
    assert_eq!(r.unwrap()[0].rank, 1);
    assert!(!stored(&out)[0].1.contains("FUTURE"), "{:?}", stored(&out));
    come_up(&mut c, 1, "f1");
    assert_eq!(
        c.node_info(1).unwrap().scontrol_state(),
        "IDLE+DYNAMIC_NORM"
    );
}

#[test]
fn delete_is_refused_while_jobs_use_the_node_and_leaves_a_vacant_rank() {
    // d1 and d2 were created before a restart; job 7 runs on d1.
    let base = conf("NodeName=n1 CPUs=2\n");
    let lines = [
        (
            0,
            "NodeName=d1 CPUs=2 NodeAddr=127.0.0.1 Port=7001".to_string(),
        ),
        (
            1,
            "NodeName=d2 CPUs=2 NodeAddr=127.0.0.1 Port=7002".to_string(),
        ),
    ];
    let recovered = Arc::new(base.with_stored_nodes(&lines));
    let (mut c, _) = Core::recover(recovered, vec![running(7, 1)], None, &HashMap::new(), T0);
    assert_eq!(c.node_info(1).unwrap().name, "d1");
    assert_eq!(c.node_info(2).unwrap().name, "d2");
    let delete = |c: &mut Core, names: &str, caller| {
        let mut out = c.apply(
            T0,
            Command::DeleteNodes {
                names: names.into(),
                caller,
            },
        );
        (done(&mut out), out)
    };
    let (r, _) = delete(&mut c, "d2", USER);
    assert_eq!(r.unwrap_err().code, ErrorCode::PermissionDenied);
    // As slurmctld: the busy one stays and is named, the other goes.
    let (r, out) = delete(&mut c, "d[1-2]", Caller::ROOT);
    let e = r.unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (ErrorCode::NodesBusy, "failed to delete nodes d1")
    );
    assert!(out
        .persist
        .iter()
        .any(|op| matches!(op, Op::DeleteDynNode(1))));
    assert!(c.node_info(1).is_some());
    assert!(c.node_info(2).is_none());
    let (r, _) = delete(&mut c, "n1", Caller::ROOT);
    let e = r.unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (ErrorCode::InvalidNodeState, "failed to delete nodes n1")
    );
    let (r, out) = delete(&mut c, "nope", Caller::ROOT);
    let e = r.unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (ErrorCode::InvalidNodeName, "failed to delete nodes nope")
    );
    assert!(out.persist.is_empty());
    let names: Vec<String> = c
        .node_infos(&[], Caller::ROOT)
        .into_iter()
        .map(|n| n.name)
        .collect();
    assert_eq!(names, ["n1", "d1"]);
    // The next node takes the vacant rank; d1 keeps its own.
    let (r, _) = join(&mut c, "NodeName=d3 CPUs=2");
    assert_eq!(r.unwrap()[0].rank, 2);
    assert_eq!(c.node_info(1).unwrap().name, "d1");
}

#[test]
fn reconfigure_keeps_dynamic_nodes_and_max_node_count_needs_a_restart() {
    let mut c = core("NodeName=n1 CPUs=2\n");
    let (r, _) = join(&mut c, "NodeName=d1 CPUs=2 Feature=f");
    assert_eq!(r.unwrap()[0].rank, 1);
    let reconf = |c: &mut Core, conf: Config| {
        let mut out = c.apply(
            T0,
            Command::Reconfigure {
                conf: Arc::new(conf),
            },
        );
        match out.reply.take() {
            Some(Reply::Reconfigure(r)) => r,
            other => panic!("{other:?}"),
        }
    };
    // The same file re-read: d1 is not in it, and stays, at its rank, in its partition.
    reconf(&mut c, conf("NodeName=n1 CPUs=2\n")).unwrap();
    let d1 = c.node_info(1).unwrap();
    assert_eq!(
        (d1.name.as_str(), d1.partitions.as_slice()),
        ("d1", &["p".to_string()][..])
    );
    // The tree's room for dynamic nodes is laid out at start.
    let mut grown = conf("NodeName=n1 CPUs=2\n");
    grown.max_node_count = Some(9);
    let e = reconf(&mut c, grown).unwrap_err();
    assert!(e.starts_with("MaxNodeCount changed"), "{e}");
    assert_eq!(c.node_info(1).unwrap().name, "d1");
}

/// The targets and node of each `Retire` sent.
fn retired(out: &Output) -> Vec<(Vec<u32>, String)> {
    out.effects
        .iter()
        .filter_map(|e| match e {
            crate::ctld::Effect::Fanout {
                targets,
                cmd: crate::wire::messages::NodeCommand::Retire { node },
                ..
            } => Some((targets.iter().collect(), node.clone())),
            _ => None,
        })
        .collect()
}

/// A deleted node's daemon is told to stop at the delete, and again if it registers later
/// (its rank vacant, or given to another node); the rank's reachability carries over to the
/// node made there, as the tree reports only changes.
#[test]
fn a_deleted_nodes_daemon_is_retired_and_its_rank_keeps_the_trees_word() {
    let mut c = core("NodeName=n1 CPUs=2\n");
    let (r, _) = join(&mut c, "NodeName=d1 CPUs=2");
    assert_eq!(r.unwrap()[0].rank, 1);
    come_up(&mut c, 1, "d1");
    let mut out = c.apply(
        T0 + 2,
        Command::DeleteNodes {
            names: "d1".into(),
            caller: Caller::ROOT,
        },
    );
    done(&mut out).unwrap();
    assert_eq!(retired(&out), [(vec![1], "d1".to_string())]);
    // Back from a freeze, it registers at its vacant rank: told again.
    let register = |c: &mut Core, name: &str| {
        let mut h = hello(1, &[]);
        h.node = name.into();
        c.apply(
            T0 + 3,
            Command::NodeRegistered {
                hello: Box::new(h),
                via: None,
            },
        )
    };
    assert_eq!(
        retired(&register(&mut c, "d1")),
        [(vec![1], "d1".to_string())]
    );
    // d2 takes the rank. The tree never said the link went down (d1's daemon leaving and
    // d2's attaching folded to no change): d2 counts as reached, and is IDLE once registered.
    let (r, _) = join(&mut c, "NodeName=d2 CPUs=2");
    assert_eq!(r.unwrap()[0].rank, 1);
    assert_eq!(
        retired(&register(&mut c, "d1")),
        [(vec![1], "d1".to_string())]
    );
    assert!(retired(&register(&mut c, "d2")).is_empty());
    let d2 = c.node_info(1).unwrap();
    assert_eq!(
        (d2.name.as_str(), d2.base, d2.not_responding),
        ("d2", NodeBaseState::Idle, false)
    );
    // A node that exists at another rank (moved by a restart with a changed node list) is
    // not deleted: its registration at the old rank is ignored, and nothing tells it to stop.
    let (r, _) = join(&mut c, "NodeName=d3 CPUs=2");
    assert_eq!(r.unwrap()[0].rank, 2);
    assert!(retired(&register(&mut c, "d3")).is_empty());
    assert_eq!(c.node_info(1).unwrap().name, "d2");
}
