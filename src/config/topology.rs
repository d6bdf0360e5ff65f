//! A node line's CPUs, boards, sockets, cores and threads, derived as Slurm 22.05's reader
//! derives them (`_parse_nodename` in read_config.c): `CPUs` before `Procs`, zeros reset to
//! one, `SocketsPerBoard` before `Sockets`, Sockets inferred from CPUs by whole division,
//! Boards reset when it exceeds the sockets, and a CPUs value that fits no level of the
//! topology replaced. Each correction is a warning naming the node line, as slurmctld logs
//! an error and goes on; none refuses the file. Other attributes are `build`'s.

use super::build::{Builder, NodeSpec, Topology};
use super::parse::{Item, Loc};
use super::types::ConfigError;

impl Builder {
    /// The topology of the node line headed `head`, from `spec` (DEFAULT already applied).
    pub(super) fn topology(
        &mut self,
        loc: &Loc,
        head: &Item,
        spec: &NodeSpec,
    ) -> Result<Topology, ConfigError> {
        let nodes = head.value.trim();
        // Zeros are invalid and reset to 1, each with Slurm's message.
        let mut nonzero = |what: &str, v: Option<u32>| -> Option<u64> {
            let v = v?;
            if v == 0 {
                self.warn(
                    loc,
                    format_args!("NodeNames={nodes} {what}=0 is invalid, reset to 1"),
                );
                return Some(1);
            }
            Some(v.into())
        };
        let cores = nonzero("CoresPerSocket", spec.cores);
        let threads = nonzero("ThreadsPerCore", spec.threads);
        // CPUs of the line or DEFAULT first; Procs (its old name) only without one.
        let cpus = nonzero("CPUs", spec.cpus.or(spec.procs));
        let per_board = nonzero("SocketsPerBoard", spec.sockets_per_board);
        let sockets_given = nonzero("Sockets", spec.sockets);
        let boards_given = nonzero("Boards", spec.boards);
        let (cores, threads) = (cores.unwrap_or(1), threads.unwrap_or(1));
        let mut boards = boards_given.unwrap_or(1);
        let sockets = match (per_board, sockets_given, cpus) {
            (Some(per_board), given, _) => {
                if given.is_some() {
                    self.warn(
                        loc,
                        format_args!(
                            "NodeNames={nodes} Sockets=# and SocketsPerBoard=# is invalid , \
                             using SocketsPerBoard"
                        ),
                    );
                }
                boards * per_board
            }
            (None, Some(sockets), _) => sockets,
            // Whole division, as Slurm's: CPUs=10 CoresPerSocket=4 gives 2 sockets (and
            // then 8 CPUs, below); never fewer than one socket.
            (None, None, Some(cpus)) => (cpus / (cores * threads)).max(1),
            (None, None, None) => boards,
        };
        if sockets < boards {
            self.warn(
                loc,
                format_args!(
                    "NodeNames={nodes} Sockets({sockets}) < Boards({boards}) resetting Boards=1"
                ),
            );
            boards = 1;
        }
        let full = sockets * cores * threads;
        let cpus = match cpus {
            None => full,
            Some(cpus) if [sockets, sockets * cores, full].contains(&cpus) => cpus,
            Some(cpus) => {
                self.warn(
                    loc,
                    format_args!(
                        "NodeNames={nodes} CPUs={cpus} match no Sockets, Sockets*CoresPerSocket \
                         or Sockets*CoresPerSocket*ThreadsPerCore. Resetting CPUs to {full}."
                    ),
                );
                full
            }
        };
        let fit = |what: &str, n: u64| {
            u32::try_from(n).map_err(|_| {
                loc.error(
                    "CPUs",
                    format!(
                        "the node topology gives {n} {what}; at most {} fit",
                        u32::MAX
                    ),
                )
            })
        };
        Ok(Topology {
            cpus: fit("CPUs", cpus)?,
            boards: fit("boards", boards)?,
            sockets: fit("sockets", sockets)?,
            cores: fit("cores per socket", cores)?,
            threads: fit("threads per core", threads)?,
        })
    }
}
