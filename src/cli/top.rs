//! `canopy top`: the busiest actors of every daemon, folded up the relay
//! tree. `--once` (or `--json`, or output that is not a terminal) prints one
//! sample; otherwise a terminal UI (ratatui) asks once a second while it is
//! open and drills down cluster → subtree → node → actor.
//!
//! Each refresh is one request: the controller gathers nothing unless
//! someone is watching, and rates cover the time since the previous sample.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use super::client::Client;
use crate::console::top::{self, ActorSample, TopQuery, TopReport, TopSort, MAX_K};
use crate::wire::messages::Body;

const USAGE: &str = "usage: canopy top [--once] [--json] [--sort depth|age|rate|time] [-k N]
                  [--stuck MS] [--node NODE | --subtree NODE] [--interval MS]";

/// Parsed command line.
#[derive(Debug, Clone, PartialEq)]
struct Opts {
    once: bool,
    json: bool,
    query: TopQuery,
    interval: Duration,
}

fn parse(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts {
        once: false,
        json: false,
        query: TopQuery::default(),
        interval: Duration::from_secs(1),
    };
    let mut it = args.iter();
    let number = |flag: &str, v: Option<&String>| -> Result<u64, String> {
        let v = v.ok_or_else(|| format!("{flag} needs a value"))?;
        v.parse::<u64>()
            .map_err(|_| format!("{flag}: '{v}' is not a whole number"))
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--once" => o.once = true,
            "--json" => o.json = true,
            "--sort" | "-s" => {
                let v = it.next().ok_or("--sort needs a value")?;
                o.query.sort = TopSort::parse(v)?;
            }
            "-k" | "--count" => {
                let k = number(a, it.next())?;
                if k == 0 || k > u64::from(MAX_K) {
                    return Err(format!("{a}: {k} is out of range 1-{MAX_K}"));
                }
                o.query.k = k as u32;
            }
            "--stuck" => o.query.stuck_ms = number(a, it.next())?,
            "--interval" => o.interval = Duration::from_millis(number(a, it.next())?.max(100)),
            "--node" | "-w" => {
                o.query.node = Some(it.next().ok_or("--node needs a node name")?.clone())
            }
            "--subtree" => {
                o.query.subtree = Some(it.next().ok_or("--subtree needs a node name")?.clone())
            }
            other => return Err(format!("unrecognized option '{other}'")),
        }
    }
    if o.query.node.is_some() && o.query.subtree.is_some() {
        return Err("--node and --subtree cannot be given together".into());
    }
    Ok(o)
}

async fn fetch(c: &mut Client, q: &TopQuery) -> Result<TopReport, String> {
    match c.call(Body::QueryTop(q.clone())).await {
        Ok(Body::Top(r)) => Ok(*r),
        Ok(Body::Error(e)) => Err(e.message),
        Ok(other) => Err(format!("unexpected reply {}", other.kind())),
        Err(e) => Err(e.to_string()),
    }
}

pub fn run(args: &[String]) -> i32 {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return 0;
    }
    let opts = match parse(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("canopy top: error: {e}\n{USAGE}");
            return 2;
        }
    };
    let interactive = !opts.once
        && !opts.json
        && std::io::stdout().is_terminal()
        && std::io::stdin().is_terminal();
    super::block_on(async move {
        let mut c = match Client::connect(None).await {
            Ok(c) => c,
            Err(e) => return super::report("canopy top", &e),
        };
        if interactive {
            return match tui::run(&mut c, opts.query, opts.interval).await {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("canopy top: error: {e}");
                    1
                }
            };
        }
        match fetch(&mut c, &opts.query).await {
            Ok(r) if opts.json => match serde_json::to_string_pretty(&r) {
                Ok(t) => {
                    println!("{t}");
                    0
                }
                Err(e) => {
                    eprintln!("canopy top: error: {e}");
                    1
                }
            },
            Ok(r) => {
                print!("{}", top::render(&r));
                0
            }
            Err(e) => {
                eprintln!("canopy top: error: {e}");
                1
            }
        }
    })
}

/// One level of the drill-down.
#[derive(Debug, Clone, PartialEq)]
enum Scope {
    Cluster,
    Subtree(String),
    Node(String),
}

impl Scope {
    fn apply(&self, q: &mut TopQuery) {
        q.node = None;
        q.subtree = None;
        match self {
            Scope::Cluster => {}
            Scope::Subtree(n) => q.subtree = Some(n.clone()),
            Scope::Node(n) => q.node = Some(n.clone()),
        }
    }
}

/// Where Enter goes from the selected row: a branch opens its subtree (a
/// branch that is the daemon itself opens that node), an actor opens its
/// daemon, and in a node's view an actor opens its details.
fn drill(scope: &Scope, branch: Option<&str>, actor: Option<&ActorSample>) -> Option<Scope> {
    if let Some(b) = branch {
        let here = match scope {
            Scope::Subtree(n) | Scope::Node(n) => Some(n.as_str()),
            Scope::Cluster => None,
        };
        return Some(if Some(b) == here || b == "controller" {
            Scope::Node(b.to_string())
        } else {
            Scope::Subtree(b.to_string())
        });
    }
    let a = actor?;
    match scope {
        Scope::Node(_) => None,
        _ => Some(Scope::Node(a.daemon.clone())),
    }
}

mod tui {
    //! The terminal UI: a header, the actor table, the branch table, and a
    //! detail pane. Keys: arrows/j/k move, Tab switches table, Enter drills
    //! down, Esc/Backspace goes back up, s changes the sort, q quits.

    use super::*;
    use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind};
    use ratatui::layout::{Constraint, Layout};
    use ratatui::style::{Modifier, Style};
    use ratatui::text::Line;
    use ratatui::widgets::{Block, Borders, Paragraph, Row, Table, TableState};

    struct App {
        query: TopQuery,
        stack: Vec<Scope>,
        report: Option<TopReport>,
        error: Option<String>,
        on_branches: bool,
        actors: TableState,
        branches: TableState,
        detail: Option<ActorSample>,
    }

    pub(super) async fn run(
        c: &mut Client,
        query: TopQuery,
        interval: Duration,
    ) -> std::io::Result<()> {
        let first = if let Some(n) = &query.node {
            Scope::Node(n.clone())
        } else if let Some(n) = &query.subtree {
            Scope::Subtree(n.clone())
        } else {
            Scope::Cluster
        };
        let mut app = App {
            query,
            stack: vec![first],
            report: None,
            error: None,
            on_branches: false,
            actors: TableState::default().with_selected(Some(0)),
            branches: TableState::default().with_selected(Some(0)),
            detail: None,
        };
        let mut term = ratatui::init();
        let r = app.main_loop(c, &mut term, interval).await;
        ratatui::restore();
        r
    }

    impl App {
        async fn refresh(&mut self, c: &mut Client) {
            let mut q = self.query.clone();
            if let Some(s) = self.stack.last() {
                s.apply(&mut q);
            }
            match fetch(c, &q).await {
                Ok(r) => {
                    self.report = Some(r);
                    self.error = None;
                }
                Err(e) => self.error = Some(e),
            }
        }

        async fn main_loop(
            &mut self,
            c: &mut Client,
            term: &mut ratatui::DefaultTerminal,
            interval: Duration,
        ) -> std::io::Result<()> {
            let mut due = Instant::now();
            loop {
                if Instant::now() >= due {
                    self.refresh(c).await;
                    due = Instant::now() + interval;
                }
                term.draw(|f| self.draw(f))?;
                let wait = due.saturating_duration_since(Instant::now());
                // Reading the keyboard blocks this thread for at most `wait`;
                // this is the CLI's own thread, not a daemon's loop.
                if !event::poll(wait)? {
                    continue;
                }
                let Event::Key(k) = event::read()? else {
                    continue;
                };
                if k.kind != KeyEventKind::Press {
                    continue;
                }
                match k.code {
                    KeyCode::Char('q') => return Ok(()),
                    KeyCode::Char('s') => {
                        self.query.sort = self.query.sort.next();
                        due = Instant::now();
                    }
                    KeyCode::Tab => self.on_branches = !self.on_branches,
                    KeyCode::Down | KeyCode::Char('j') => self.table().select_next(),
                    KeyCode::Up | KeyCode::Char('k') => self.table().select_previous(),
                    KeyCode::Enter => {
                        let moved = self.enter();
                        if moved {
                            due = Instant::now();
                        }
                    }
                    KeyCode::Esc | KeyCode::Backspace | KeyCode::Left => {
                        // Close the detail pane first; else go back up a level.
                        let closed = self.detail.take().is_some();
                        if !closed && self.stack.len() > 1 {
                            self.stack.pop();
                            due = Instant::now();
                        }
                    }
                    _ => {}
                }
            }
        }

        fn table(&mut self) -> &mut TableState {
            if self.on_branches {
                &mut self.branches
            } else {
                &mut self.actors
            }
        }

        /// Drill into the selected row; true when the scope changed.
        fn enter(&mut self) -> bool {
            let Some(r) = &self.report else {
                return false;
            };
            let scope = self.stack.last().cloned().unwrap_or(Scope::Cluster);
            let (branch, actor) = if self.on_branches {
                let i = self.branches.selected().unwrap_or(0);
                (r.summary.branches.get(i).map(|b| b.head.clone()), None)
            } else {
                let i = self.actors.selected().unwrap_or(0);
                (None, r.summary.top.get(i).cloned())
            };
            match drill(&scope, branch.as_deref(), actor.as_ref()) {
                Some(next) if next != scope => {
                    self.stack.push(next);
                    self.detail = None;
                    self.on_branches = false;
                    true
                }
                _ => {
                    self.detail = actor;
                    false
                }
            }
        }

        fn draw(&mut self, f: &mut ratatui::Frame) {
            let [head, actors, branches, foot] = Layout::vertical([
                Constraint::Length(3),
                Constraint::Fill(2),
                Constraint::Fill(1),
                Constraint::Length(3),
            ])
            .areas(f.area());
            let path: Vec<String> = self
                .stack
                .iter()
                .map(|s| match s {
                    Scope::Cluster => "cluster".to_string(),
                    Scope::Subtree(n) => format!("subtree {n}"),
                    Scope::Node(n) => format!("node {n}"),
                })
                .collect();
            let summary = match &self.report {
                Some(r) => {
                    let t = &r.summary.totals;
                    format!(
                        "{} of {} daemons, {} actors, {} queued, {:.0} msg/s, {} stuck; sort {} ({} ms)",
                        t.daemons, r.asked, t.actors, t.depth, t.rate, t.stuck,
                        r.query.sort.name(), r.elapsed_ms
                    )
                }
                None => "waiting for the first sample".into(),
            };
            let mut lines = vec![Line::from(path.join(" > ")), Line::from(summary)];
            if let Some(e) = &self.error {
                lines.push(Line::from(format!("error: {e}")));
            }
            f.render_widget(
                Paragraph::new(lines).block(Block::default().borders(Borders::BOTTOM)),
                head,
            );
            let hl = Style::default().add_modifier(Modifier::REVERSED);
            let (listed, br) = match &self.report {
                Some(r) => (r.summary.top.clone(), r.summary.branches.clone()),
                None => (Vec::new(), Vec::new()),
            };
            let rows = listed.iter().map(|s| {
                Row::new(vec![
                    s.daemon.clone(),
                    s.kind.clone(),
                    s.name.clone(),
                    s.depth.to_string(),
                    top::fmt_ms(s.age_ms()),
                    format!("{:.1}", s.rate),
                    format!("{}us", s.handle_us),
                    format!("{:.1}%", s.load * 100.0),
                    if s.stuck {
                        "STUCK".into()
                    } else {
                        String::new()
                    },
                ])
            });
            let w = [
                Constraint::Length(16),
                Constraint::Length(10),
                Constraint::Length(18),
                Constraint::Length(7),
                Constraint::Length(8),
                Constraint::Length(9),
                Constraint::Length(9),
                Constraint::Length(7),
                Constraint::Length(6),
            ];
            let t = Table::new(rows, w)
                .header(Row::new(vec![
                    "DAEMON", "KIND", "NAME", "DEPTH", "AGE", "MSG/S", "HANDLE", "LOAD", "",
                ]))
                .block(Block::default().title("actors").borders(Borders::ALL))
                .row_highlight_style(if self.on_branches {
                    Style::default()
                } else {
                    hl
                });
            f.render_stateful_widget(t, actors, &mut self.actors);
            let rows = br.iter().map(|b| {
                let t = &b.totals;
                Row::new(vec![
                    b.head.clone(),
                    t.daemons.to_string(),
                    t.actors.to_string(),
                    t.depth.to_string(),
                    top::fmt_ms(t.max_age_ms),
                    format!("{:.1}", t.rate),
                    t.stuck.to_string(),
                ])
            });
            let w = [
                Constraint::Length(16),
                Constraint::Length(8),
                Constraint::Length(8),
                Constraint::Length(8),
                Constraint::Length(8),
                Constraint::Length(9),
                Constraint::Length(6),
            ];
            let t = Table::new(rows, w)
                .header(Row::new(vec![
                    "BRANCH", "DAEMONS", "ACTORS", "QUEUED", "MAXAGE", "MSG/S", "STUCK",
                ]))
                .block(Block::default().title("branches").borders(Borders::ALL))
                .row_highlight_style(if self.on_branches {
                    hl
                } else {
                    Style::default()
                });
            f.render_stateful_widget(t, branches, &mut self.branches);
            let foot_text =
                match (&self.detail, &self.report) {
                    (Some(d), _) => format!(
                    "{}/{} on {}: {} | depth {} oldest {} handler running {} handled {} window {} ms",
                    d.kind,
                    d.name,
                    d.daemon,
                    d.state, d.depth, top::fmt_ms(d.oldest_ms),
                    top::fmt_ms(d.busy_ms), d.handled, d.window_ms
                ),
                    (None, Some(r)) => {
                        let mut s = String::new();
                        if r.left_out > 0 {
                            s.push_str(&format!("{} actors not shown. ", r.left_out));
                        }
                        if !r.missing.is_empty() {
                            let m: Vec<String> =
                                r.missing.iter().map(|(n, w)| format!("{n}: {w}")).collect();
                            s.push_str(&format!("did not answer: {}. ", m.join("; ")));
                        }
                        s.push_str("q quit, s sort, Tab table, Enter drill down, Esc back");
                        s
                    }
                    (None, None) => "q quit".into(),
                };
            f.render_widget(
                Paragraph::new(foot_text).block(Block::default().borders(Borders::TOP)),
                foot,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_options_and_names_bad_ones() {
        let o = parse(&args(&[
            "--once",
            "--sort",
            "age",
            "-k",
            "5",
            "--subtree",
            "n3",
        ]))
        .unwrap();
        assert!(o.once);
        assert_eq!(o.query.sort, TopSort::Age);
        assert_eq!(o.query.k, 5);
        assert_eq!(o.query.subtree.as_deref(), Some("n3"));
        assert!(parse(&args(&["--sort", "cpu"]))
            .unwrap_err()
            .contains("'cpu'"));
        assert!(parse(&args(&["-k", "0"]))
            .unwrap_err()
            .contains("out of range"));
        assert!(parse(&args(&["-k", "x"])).unwrap_err().contains("'x'"));
        assert!(parse(&args(&["--node", "a", "--subtree", "b"]))
            .unwrap_err()
            .contains("together"));
        assert!(parse(&args(&["--bogus"]))
            .unwrap_err()
            .contains("'--bogus'"));
    }

    #[test]
    fn drill_down_goes_cluster_subtree_node() {
        assert_eq!(
            drill(&Scope::Cluster, Some("n1"), None),
            Some(Scope::Subtree("n1".into()))
        );
        assert_eq!(
            drill(&Scope::Cluster, Some("controller"), None),
            Some(Scope::Node("controller".into()))
        );
        // A subtree's own daemon is a branch of its view: that opens the node.
        assert_eq!(
            drill(&Scope::Subtree("n1".into()), Some("n1"), None),
            Some(Scope::Node("n1".into()))
        );
        let a = ActorSample {
            daemon: "n7".into(),
            kind: "agent".into(),
            name: "n7".into(),
            depth: 0,
            oldest_ms: 0,
            busy_ms: 0,
            handled: 0,
            rate: 0.0,
            handle_us: 0,
            load: 0.0,
            window_ms: 0,
            stuck: false,
            state: String::new(),
        };
        assert_eq!(
            drill(&Scope::Cluster, None, Some(&a)),
            Some(Scope::Node("n7".into()))
        );
        assert_eq!(drill(&Scope::Node("n7".into()), None, Some(&a)), None);
    }
}
