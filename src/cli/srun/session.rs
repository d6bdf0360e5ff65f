//! A running step, from launch to its last task's exit: the listener's events, task
//! output with `--label`, Ctrl-C and forwarded signals, `-K`, `-W`, aborts, and the
//! task-exit lines and exit code srun reports, as Slurm words them.
//!
//! Does not: parse options, get the allocation or launch the step (the parent module and
//! `alloc` do), or read input (`io` does).

use super::*;
use tokio::net::TcpListener;

pub(super) enum Event {
    Hello {
        node: String,
        tasks: Vec<u32>,
        writer: Box<ConnWriter>,
    },
    Output(TaskOutput),
    Exit {
        task: u32,
        status: ExitStatus,
    },
    /// A node is killing the step (the job or the step was cancelled).
    Aborted,
    Closed,
}

pub(super) struct StepExit {
    /// srun's own exit code: the highest task exit code (128+signal if killed).
    pub(super) code: i32,
    /// The task status recorded for accounting.
    pub(super) worst: ExitStatus,
}

/// How long srun gathers task exits before reporting them.
pub(super) const EXIT_REPORT_DELAY: Duration = Duration::from_millis(20);

/// Task ranks as Slurm writes them: `task 3` or `tasks 0-2,5`.
pub(super) fn tasks_phrase(ranks: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i;
        while j + 1 < ranks.len() && ranks[j + 1] == ranks[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            ranks[i].to_string()
        } else {
            format!("{}-{}", ranks[i], ranks[j])
        });
        i = j + 1;
    }
    let noun = if ranks.len() == 1 { "task" } else { "tasks" };
    format!("{noun} {}", parts.join(","))
}

/// The error line for tasks that ended badly, or None for a clean exit.
pub(super) fn exit_message(s: &ExitStatus) -> Option<String> {
    if s.signal != 0 {
        Some(crate::model::signal::signal_name(s.signal).to_string())
    } else if s.code != 0 {
        Some(format!("Exited with exit code {}", s.code))
    } else {
        None
    }
}

/// A step's I/O, signals and exits, from launch to the last task's exit.
pub(super) struct Session<'a> {
    pub(super) launched: &'a StepLaunched,
    pub(super) token: u64,
    pub(super) label: bool,
    pub(super) target: StdinTarget,
    pub(super) interrupts: Interrupts,
    pub(super) kill_wait_s: u32,
    /// `-K`: the first task to exit badly ends the step.
    pub(super) kill_on_bad_exit: bool,
    /// `-W`: the step ends this long after its first task exits.
    pub(super) wait_s: Option<u32>,
    /// `--pty`: SIGWINCH resizes task 0's terminal.
    pub(super) pty: bool,
}

/// Where Ctrl-C handling stands.
#[derive(Default)]
pub(super) struct Abort {
    last_interrupt: Option<Instant>,
    /// Set once the step is being killed: srun waits until then at most.
    deadline: Option<tokio::time::Instant>,
    /// "Job step aborted" has been printed.
    said: bool,
}

impl Session<'_> {
    fn step_name(&self) -> String {
        format!("StepId={}.{}", self.launched.job_id, self.launched.step_id)
    }

    fn ntasks(&self) -> u32 {
        self.launched.tasks_per_node.iter().sum()
    }

    /// Kill every task now and wait a little for them to report.
    fn force_termination(&self, links: &mut Links, abort: &mut Abort) {
        if abort.deadline.is_some() {
            return;
        }
        crate::cli::terminal::restore();
        eprintln!("srun: forcing job termination");
        links.forward(libc_sig::SIGKILL);
        self.say_aborted(abort);
        let wait = self.kill_wait_s + 2;
        abort.deadline = Some(tokio::time::Instant::now() + Duration::from_secs(u64::from(wait)));
    }

    /// End the step through the controller, as srun's `-K` and `-W` do: the
    /// nodes note it and kill the tasks, whose exits then come in as usual.
    async fn terminate(&self, ctl: &mut Client) {
        let (job_id, step_id) = (self.launched.job_id, self.launched.step_id);
        crate::cli::terminal::restore();
        eprintln!("srun: launch/slurm: _step_signal: Terminating StepId={job_id}.{step_id}");
        let req = crate::wire::messages::StepCancel {
            job_id,
            step_id,
            signal: None,
            terminate: true,
        };
        match ctl.call(Body::CancelStep(req)).await {
            Ok(Body::CancelReply(r)) => {
                for msg in r.results.into_iter().filter_map(|(_, e)| e) {
                    eprintln!("srun: error: cannot end StepId={job_id}.{step_id}: {msg}");
                }
            }
            Ok(other) => eprintln!("srun: error: unexpected reply {}", other.kind()),
            Err(e) => eprintln!("srun: error: cannot end StepId={job_id}.{step_id}: {e}"),
        }
    }

    /// Slurm's line for a step being killed, once.
    fn say_aborted(&self, abort: &mut Abort) {
        if !abort.said {
            abort.said = true;
            crate::cli::terminal::restore();
            let wait = self.kill_wait_s + 2;
            eprintln!(
                "srun: Job step aborted: Waiting up to {wait} seconds for job step to finish."
            );
        }
    }

    /// Ctrl-C once: where every task stands.
    fn print_status(&self, exits: &HashMap<u32, ExitStatus>) {
        let mut groups: BTreeMap<u8, Vec<u32>> = BTreeMap::new();
        for t in 0..self.ntasks() {
            let state = match exits.get(&t) {
                None => 0,
                Some(s) if s.code == 0 && s.signal == 0 => 1,
                Some(_) => 2,
            };
            groups.entry(state).or_default().push(t);
        }
        for (state, ranks) in groups {
            let what = ["running", "exited", "exited abnormally"][usize::from(state)];
            eprintln!(
                "srun: {} {}: {what}",
                self.step_name(),
                tasks_phrase(&ranks)
            );
        }
    }

    /// React to a signal srun received. True: leave at once (third Ctrl-C).
    fn on_signal(
        &self,
        sig: i32,
        links: &mut Links,
        exits: &HashMap<u32, ExitStatus>,
        abort: &mut Abort,
    ) -> bool {
        match sig {
            libc_sig::SIGINT => {
                if abort.deadline.is_some() {
                    return true;
                }
                let again = abort
                    .last_interrupt
                    .is_some_and(|t| t.elapsed() < Duration::from_secs(1));
                match self.interrupts {
                    Interrupts::Forward => links.forward(sig),
                    Interrupts::Status if !again => {
                        eprintln!("srun: interrupt (one more within 1 sec to abort)");
                        self.print_status(exits);
                        abort.last_interrupt = Some(Instant::now());
                    }
                    Interrupts::Status | Interrupts::Quit => {
                        eprintln!("srun: sending Ctrl-C to {}", self.step_name());
                        links.forward(sig);
                        self.force_termination(links, abort);
                    }
                }
            }
            libc_sig::SIGQUIT | libc_sig::SIGTERM | libc_sig::SIGHUP => {
                if sig == libc_sig::SIGQUIT {
                    eprintln!("srun: Quit");
                }
                self.force_termination(links, abort);
            }
            // Job control stays with srun: Ctrl-Z is ignored, as in Slurm.
            libc_sig::SIGTSTP | libc_sig::SIGCONT => {}
            libc_sig::SIGWINCH => {
                if self.pty {
                    let size = crate::exec::pty::size_of(&std::io::stdin()).unwrap_or_default();
                    links.send(Down::Resize(size));
                }
            }
            _ => links.forward(sig),
        }
        false
    }

    /// Print task output as it arrives, forward input and signals, and
    /// gather every task's exit.
    pub(super) async fn run(
        &self,
        listener: TcpListener,
        auth: crate::wire::signer::Signer,
        input: Option<mpsc::Receiver<Vec<u8>>>,
        mut signals: mpsc::UnboundedReceiver<i32>,
        ctl: &mut Client,
    ) -> StepExit {
        let ntasks = self.ntasks();
        let width = ntasks.saturating_sub(1).to_string().len();
        let (tx, mut rx) = mpsc::channel::<Event>(1024);
        let (job_id, step_id, token) = (self.launched.job_id, self.launched.step_id, self.token);
        // Task I/O links come from node daemons: only their identity counts
        // (any user can get a credential from the signer).
        let trusted = ctl.trusted().to_vec();
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let mut conn = Connection::new(stream, auth.clone(), 0);
                let tx = tx.clone();
                let trusted = trusted.clone();
                tokio::spawn(async move {
                    // The first frame must come from a daemon, name this
                    // step and carry its token.
                    let hello = match conn.recv().await {
                        Ok(Some(env)) if trusted.contains(&env.uid) => match env.body {
                            Body::StepIoHello(h)
                                if h.token == token
                                    && h.job_id == job_id
                                    && h.step_id == step_id =>
                            {
                                h
                            }
                            _ => return,
                        },
                        _ => return,
                    };
                    let (mut reader, writer) = conn.into_split();
                    let hello = Event::Hello {
                        node: hello.node,
                        tasks: hello.tasks,
                        writer: Box::new(writer),
                    };
                    if tx.send(hello).await.is_err() {
                        return;
                    }
                    while let Ok(Some(env)) = reader.recv().await {
                        let ev = match env.body {
                            Body::TaskOutput(o) => Event::Output(o),
                            Body::TaskExit { task, status } => Event::Exit { task, status },
                            Body::StepAborted => Event::Aborted,
                            _ => continue,
                        };
                        if tx.send(ev).await.is_err() {
                            return;
                        }
                    }
                    let _ = tx.send(Event::Closed).await;
                });
            }
        });
        let nodes = self.launched.tasks_per_node.len();
        // Input starts flowing once every node has linked up.
        let (links_tx, links_rx) = oneshot::channel();
        let mut links_tx = Some(links_tx);
        let mut input_links: Vec<mpsc::Sender<Vec<u8>>> = Vec::new();
        let forwarder = input.map(|source| tokio::spawn(forward_input(source, links_rx)));
        let mut writers = Vec::new();
        let mut links = Links {
            queues: Vec::new(),
            expected: nodes,
            early: Vec::new(),
        };
        let mut node_of: HashMap<u32, String> = HashMap::new();
        let mut partial: HashMap<(u32, bool), Vec<u8>> = HashMap::new();
        let mut exits: HashMap<u32, ExitStatus> = HashMap::new();
        // Exits not yet reported: printed a moment after the first of them,
        // so tasks that end together share one line.
        let mut unreported: Vec<(u32, ExitStatus)> = Vec::new();
        let mut report_at: Option<tokio::time::Instant> = None;
        let mut closed = 0usize;
        let mut abort = Abort::default();
        let mut left_early = false;
        // -W: when to end the step; -K: whether srun ended it.
        let mut wait_until: Option<tokio::time::Instant> = None;
        let mut killed_bad_exit = false;
        let write = |stderr: bool, bytes: &[u8]| {
            if stderr {
                let _ = std::io::stderr().write_all(bytes);
            } else {
                let mut o = std::io::stdout();
                let _ = o.write_all(bytes);
                let _ = o.flush();
            }
        };
        // A node that cannot reach us (or dies) would leave us waiting forever:
        // check now and then that the job itself is still running.
        let mut check = tokio::time::interval(Duration::from_secs(5));
        check.tick().await;
        while exits.len() < ntasks as usize {
            // Every node reported and all links are gone: nothing more can come.
            if links.all_linked() && closed == nodes {
                break;
            }
            let deadline = abort.deadline;
            let ev = tokio::select! {
                ev = rx.recv() => ev,
                _ = async {
                    match report_at {
                        Some(d) => tokio::time::sleep_until(d).await,
                        None => std::future::pending().await,
                    }
                } => {
                    report_exits(&mut unreported, &node_of);
                    report_at = None;
                    continue;
                }
                Some(sig) = signals.recv() => {
                    if self.on_signal(sig, &mut links, &exits, &mut abort) {
                        left_early = true;
                        break;
                    }
                    continue;
                }
                _ = async {
                    match deadline {
                        Some(d) => tokio::time::sleep_until(d).await,
                        None => std::future::pending().await,
                    }
                } => break,
                _ = async {
                    match wait_until {
                        Some(d) => tokio::time::sleep_until(d).await,
                        None => std::future::pending().await,
                    }
                } => {
                    wait_until = None;
                    if let Some(w) = self.wait_s {
                        eprintln!("srun: First task exited {w}s ago");
                    }
                    self.print_status(&exits);
                    self.terminate(ctl).await;
                    continue;
                }
                _ = check.tick() => {
                    if job_ended(ctl, job_id).await {
                        eprintln!("srun: error: job {job_id} ended before every task reported");
                        break;
                    }
                    continue;
                }
            };
            let Some(ev) = ev else { break };
            match ev {
                Event::Hello {
                    node,
                    tasks,
                    writer,
                } => {
                    let (sig_tx, sig_rx) = mpsc::unbounded_channel();
                    let reads_input = tasks.iter().any(|&t| self.target.includes(t));
                    let input_rx = reads_input.then(|| {
                        let (in_tx, in_rx) = mpsc::channel(16);
                        input_links.push(in_tx);
                        in_rx
                    });
                    writers.push(tokio::spawn(link_writer(*writer, sig_rx, input_rx)));
                    for t in tasks {
                        node_of.insert(t, node.clone());
                    }
                    links.add(sig_tx);
                    if links.all_linked() {
                        if let Some(l) = links_tx.take() {
                            let _ = l.send(std::mem::take(&mut input_links));
                        }
                    }
                }
                Event::Closed => closed += 1,
                Event::Aborted => self.say_aborted(&mut abort),
                Event::Output(o) if self.label => {
                    // -l: prefix every complete line with the task rank.
                    let buf = partial.entry((o.task, o.stderr)).or_default();
                    buf.extend_from_slice(&o.data);
                    while let Some(nl) = buf.iter().position(|&b| b == b'\n') {
                        let line: Vec<u8> = buf.drain(..=nl).collect();
                        let mut out = format!("{:>width$}: ", o.task).into_bytes();
                        out.extend_from_slice(&line);
                        write(o.stderr, &out);
                    }
                }
                Event::Output(o) => write(o.stderr, &o.data),
                Event::Exit { task, status } => {
                    if self.pty && task == 0 {
                        // The terminal's session is over: srun's own lines
                        // that follow need it cooked again.
                        crate::cli::terminal::restore();
                    }
                    exits.insert(task, status);
                    unreported.push((task, status));
                    let bad = status.code != 0 || status.signal != 0;
                    if self.kill_on_bad_exit && bad && !killed_bad_exit && abort.deadline.is_none()
                    {
                        // The bad exit is reported first, then the step ended.
                        killed_bad_exit = true;
                        abort.said = true;
                        report_exits(&mut unreported, &node_of);
                        report_at = None;
                        self.terminate(ctl).await;
                        continue;
                    }
                    if exits.len() == 1 {
                        wait_until = self.wait_s.map(|w| {
                            tokio::time::Instant::now() + Duration::from_secs(u64::from(w))
                        });
                    }
                    report_at
                        .get_or_insert_with(|| tokio::time::Instant::now() + EXIT_REPORT_DELAY);
                }
            }
        }
        accept.abort();
        if let Some(f) = forwarder {
            f.abort();
        }
        for w in writers {
            w.abort();
        }
        report_exits(&mut unreported, &node_of);
        if killed_bad_exit {
            eprintln!("srun: Force Terminated {}", self.step_name());
        }
        for ((task, stderr), rest) in partial {
            if !rest.is_empty() {
                let mut out = format!("{task:>width$}: ").into_bytes();
                out.extend_from_slice(&rest);
                write(stderr, &out);
            }
        }
        let mut code = 0;
        let mut worst = ExitStatus::default();
        for s in exits.values() {
            let c = if s.signal != 0 {
                128 + s.signal
            } else {
                s.code
            };
            if c > code {
                code = c;
                worst = *s;
            }
        }
        if exits.len() < ntasks as usize {
            if !left_early {
                eprintln!(
                    "srun: error: {} of {ntasks} tasks did not report an exit status",
                    ntasks as usize - exits.len()
                );
            }
            code = code.max(1);
            worst = ExitStatus { code: 1, signal: 0 };
        }
        StepExit { code, worst }
    }
}

/// Print the exits gathered so far (see [`exit_lines`]).
pub(super) fn report_exits(
    unreported: &mut Vec<(u32, ExitStatus)>,
    node_of: &HashMap<u32, String>,
) {
    for l in exit_lines(unreported, node_of) {
        eprintln!("{l}");
    }
}

/// `srun: error: <node>: tasks 0-1: Exited with exit code 3`: one line per
/// node and status among `unreported`, which is emptied.
pub(super) fn exit_lines(
    unreported: &mut Vec<(u32, ExitStatus)>,
    node_of: &HashMap<u32, String>,
) -> Vec<String> {
    // (node, what happened) → the tasks it happened to, in rank order.
    let mut groups: BTreeMap<(&str, String), Vec<u32>> = BTreeMap::new();
    unreported.sort_by_key(|(t, _)| *t);
    for (task, s) in unreported.drain(..) {
        if let Some(what) = exit_message(&s) {
            let node = node_of.get(&task).map(String::as_str).unwrap_or("?");
            groups.entry((node, what)).or_default().push(task);
        }
    }
    let mut lines: Vec<(u32, String)> = groups
        .into_iter()
        .map(|((node, what), ranks)| {
            let line = format!("srun: error: {node}: {}: {what}", tasks_phrase(&ranks));
            (ranks[0], line)
        })
        .collect();
    lines.sort();
    lines.into_iter().map(|(_, l)| l).collect()
}
