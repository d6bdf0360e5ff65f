//! Tests of dependency parsing, evaluation and display.

use super::*;

fn target(job_id: u32, task: Option<u32>) -> Target {
    Target { job_id, task }
}

fn term(kind: DepKind, job_id: u32, task: Option<u32>, delay_min: u32) -> Term {
    Term {
        kind,
        target: Some(target(job_id, task)),
        delay_min,
        status: TermStatus::Unfulfilled,
    }
}

fn singleton() -> Term {
    Term {
        kind: DepKind::Singleton,
        target: None,
        delay_min: 0,
        status: TermStatus::Unfulfilled,
    }
}

fn job(state: JobState) -> TargetJob {
    let started = !matches!(state, JobState::Pending | JobState::Cancelled);
    TargetJob {
        state,
        start_time: started.then_some(1_000),
        end_time: state.is_finished().then_some(2_000),
        array_task: None,
    }
}

fn task(state: JobState, index: u32) -> TargetJob {
    TargetJob {
        array_task: Some(index),
        ..job(state)
    }
}

/// Evaluate with a fixed table: job id → jobs (missing = unknown).
fn eval(dep: &mut Dependency, table: &[(u32, Vec<TargetJob>)]) -> Outcome {
    eval_full(dep, table, None, false, 10_000)
}

fn eval_full(
    dep: &mut Dependency,
    table: &[(u32, Vec<TargetJob>)],
    self_task: Option<u32>,
    singleton_clear: bool,
    now: UnixTime,
) -> Outcome {
    dep.evaluate(|t| lookup_in(table, t), self_task, singleton_clear, now)
}

fn lookup_in(table: &[(u32, Vec<TargetJob>)], t: &Target) -> Vec<TargetJob> {
    let jobs = table
        .iter()
        .find(|(id, _)| *id == t.job_id)
        .map(|(_, jobs)| jobs.clone())
        .unwrap_or_default();
    match t.task {
        Some(index) => jobs
            .into_iter()
            .filter(|j| j.array_task == Some(index))
            .collect(),
        None => jobs,
    }
}

fn parse(spec: &str) -> Dependency {
    Dependency::parse(spec).unwrap()
}

fn statuses(dep: &Dependency) -> Vec<TermStatus> {
    dep.terms.iter().map(|t| t.status).collect()
}

// ---- parsing: accepted forms ----

#[test]
fn parses_every_type() {
    let cases = [
        ("after:5", DepKind::After),
        ("afterany:5", DepKind::AfterAny),
        ("afterok:5", DepKind::AfterOk),
        ("afternotok:5", DepKind::AfterNotOk),
        ("aftercorr:5", DepKind::AfterCorr),
    ];
    for (spec, kind) in cases {
        let dep = parse(spec);
        assert_eq!(dep.terms, vec![term(kind, 5, None, 0)], "{spec}");
        assert!(!dep.any);
    }
}

#[test]
fn type_names_are_case_insensitive() {
    assert_eq!(
        parse("AfterOK:7").terms,
        vec![term(DepKind::AfterOk, 7, None, 0)]
    );
    assert_eq!(parse("SINGLETON").terms, vec![singleton()]);
}

#[test]
fn id_list_expands_to_one_term_per_id() {
    let dep = parse("afterok:1:2:3");
    assert_eq!(
        dep.terms,
        vec![
            term(DepKind::AfterOk, 1, None, 0),
            term(DepKind::AfterOk, 2, None, 0),
            term(DepKind::AfterOk, 3, None, 0),
        ]
    );
    assert!(!dep.any);
}

#[test]
fn comma_joins_terms_with_all_semantics() {
    let dep = parse("after:1,afterok:2:3,singleton");
    assert!(!dep.any);
    assert_eq!(
        dep.terms,
        vec![
            term(DepKind::After, 1, None, 0),
            term(DepKind::AfterOk, 2, None, 0),
            term(DepKind::AfterOk, 3, None, 0),
            singleton(),
        ]
    );
}

#[test]
fn question_mark_joins_terms_with_any_semantics() {
    let dep = parse("afterok:1?afternotok:2");
    assert!(dep.any);
    assert_eq!(
        dep.terms,
        vec![
            term(DepKind::AfterOk, 1, None, 0),
            term(DepKind::AfterNotOk, 2, None, 0),
        ]
    );
}

#[test]
fn bare_ids_mean_afterany() {
    assert_eq!(
        parse("123").terms,
        vec![term(DepKind::AfterAny, 123, None, 0)]
    );
    assert_eq!(
        parse("123:124").terms,
        vec![
            term(DepKind::AfterAny, 123, None, 0),
            term(DepKind::AfterAny, 124, None, 0),
        ]
    );
    assert_eq!(
        parse("afterok:1,2").terms,
        vec![
            term(DepKind::AfterOk, 1, None, 0),
            term(DepKind::AfterAny, 2, None, 0),
        ]
    );
}

#[test]
fn array_task_forms() {
    assert_eq!(
        parse("afterok:9_4").terms,
        vec![term(DepKind::AfterOk, 9, Some(4), 0)]
    );
    assert_eq!(
        parse("afterok:9_0").terms,
        vec![term(DepKind::AfterOk, 9, Some(0), 0)]
    );
    assert_eq!(parse("afterok:9_*"), parse("afterok:9"));
    assert_eq!(
        parse("9_2").terms,
        vec![term(DepKind::AfterAny, 9, Some(2), 0)]
    );
}

#[test]
fn after_takes_a_delay_per_id() {
    assert_eq!(
        parse("after:5+10:6:7_1+0").terms,
        vec![
            term(DepKind::After, 5, None, 10),
            term(DepKind::After, 6, None, 0),
            term(DepKind::After, 7, Some(1), 0),
        ]
    );
}

#[test]
fn surrounding_whitespace_is_ignored() {
    assert_eq!(parse("  afterok:3 \n"), parse("afterok:3"));
}

// ---- parsing: errors ----

fn err(spec: &str) -> DependError {
    Dependency::parse(spec).unwrap_err()
}

#[test]
fn empty_spec_is_refused() {
    assert_eq!(err(""), DependError::Empty);
    assert_eq!(err("   "), DependError::Empty);
}

#[test]
fn mixing_separators_is_refused() {
    assert_eq!(
        err("afterok:1,afterok:2?afterok:3"),
        DependError::MixedSeparators {
            spec: "afterok:1,afterok:2?afterok:3".into()
        }
    );
}

#[test]
fn empty_terms_are_refused() {
    for spec in [
        "afterok:1,",
        ",afterok:1",
        "afterok:1,,afterok:2",
        "afterok:1?",
        "?",
    ] {
        assert_eq!(
            err(spec),
            DependError::EmptyTerm { spec: spec.into() },
            "{spec}"
        );
    }
}

#[test]
fn unknown_types_are_refused_by_name() {
    assert_eq!(
        err("afterfoo:1"),
        DependError::UnknownType {
            kind: "afterfoo".into()
        }
    );
    // Slurm matches a prefix; canopy wants the whole name.
    assert_eq!(
        err("afterokay:1"),
        DependError::UnknownType {
            kind: "afterokay".into()
        }
    );
    assert_eq!(
        err("bogus"),
        DependError::UnknownType {
            kind: "bogus".into()
        }
    );
    assert_eq!(err(":5"), DependError::UnknownType { kind: "".into() });
}

#[test]
fn slurm_types_canopy_lacks_are_named_unsupported() {
    assert_eq!(
        err("afterburstbuffer:1"),
        DependError::UnsupportedType {
            kind: "afterburstbuffer".into()
        }
    );
    assert_eq!(
        err("Expand:1"),
        DependError::UnsupportedType {
            kind: "Expand".into()
        }
    );
    assert_eq!(
        err("expand").to_string(),
        "dependency type \"expand\" is not supported by canopy"
    );
}

#[test]
fn typed_term_without_ids_is_refused() {
    assert_eq!(
        err("afterok"),
        DependError::MissingIds {
            term: "afterok".into()
        }
    );
}

#[test]
fn empty_ids_are_refused() {
    for (spec, term) in [
        ("afterok:", "afterok:"),
        ("afterok:1::2", "afterok:1::2"),
        ("after:1:", "after:1:"),
        ("1:", "1:"),
        ("afterany:2,afterok:", "afterok:"),
        ("after:+3", "after:+3"),
    ] {
        assert_eq!(
            err(spec),
            DependError::EmptyId { term: term.into() },
            "{spec}"
        );
    }
}

#[test]
fn malformed_ids_are_refused_by_text() {
    for (spec, text) in [
        ("afterok:abc", "abc"),
        ("afterok:12a", "12a"),
        ("12a", "12a"),
        ("afterok:-3", "-3"),
        ("afterok:3_", "3_"),
        ("afterok:3_x", "3_x"),
        ("afterok:3_1_2", "3_1_2"),
        ("afterok:_3", "_3"),
        ("afterok:*", "*"),
        ("afterok:99999999999", "99999999999"),
        ("afterok: 3", " 3"),
    ] {
        assert_eq!(
            err(spec),
            DependError::InvalidId { text: text.into() },
            "{spec}"
        );
    }
}

#[test]
fn job_id_zero_is_refused() {
    assert_eq!(err("afterok:0"), DependError::ZeroId { text: "0".into() });
    assert_eq!(err("after:0_3"), DependError::ZeroId { text: "0_3".into() });
    assert_eq!(err("0"), DependError::ZeroId { text: "0".into() });
}

#[test]
fn delay_only_with_after() {
    for spec in [
        "afterok:5+10",
        "afterany:5+1",
        "5+10",
        "aftercorr:1:5+2",
        "afterok:+3",
    ] {
        assert_eq!(
            err(spec),
            DependError::DelayNotAllowed { term: spec.into() },
            "{spec}"
        );
    }
}

#[test]
fn malformed_delays_are_refused() {
    for (spec, text) in [
        ("after:5+", "5+"),
        ("after:5+x", "5+x"),
        ("after:5+-1", "5+-1"),
        ("after:5+1+2", "5+1+2"),
    ] {
        assert_eq!(
            err(spec),
            DependError::InvalidDelay { text: text.into() },
            "{spec}"
        );
    }
    // The id part of a delayed id is still checked.
    assert_eq!(
        err("after:x+5"),
        DependError::InvalidId { text: "x".into() }
    );
}

#[test]
fn singleton_takes_no_ids() {
    assert_eq!(
        err("singleton:5"),
        DependError::SingletonWithIds {
            term: "singleton:5".into()
        }
    );
}

#[test]
fn every_error_maps_to_slurms_message_and_names_its_text() {
    let cases = [
        (err(""), "empty dependency specification"),
        (err("1,2?3"), "\"1,2?3\""),
        (err("1,"), "\"1,\""),
        (err("nope:1"), "\"nope\""),
        (err("expand:1"), "\"expand\""),
        (err("afterok"), "\"afterok\""),
        (err("afterok:"), "\"afterok:\""),
        (err("afterok:x"), "\"x\""),
        (err("afterok:0"), "\"0\""),
        (err("afterok:1+2"), "\"afterok:1+2\""),
        (err("after:1+x"), "\"1+x\""),
        (err("singleton:1"), "\"singleton:1\""),
        (
            DependError::UnknownTarget {
                target: target(44, Some(2)),
            },
            "job 44_2",
        ),
    ];
    for (e, needle) in cases {
        assert_eq!(e.slurm_message(), "Job dependency problem");
        assert!(e.to_string().contains(needle), "{e} lacks {needle}");
    }
}

// ---- evaluation: one kind at a time ----

#[test]
fn after_waits_for_start_then_delay() {
    let mut dep = parse("after:5");
    assert_eq!(
        eval(&mut dep, &[(5, vec![job(JobState::Pending)])]),
        Outcome::Waiting
    );
    assert_eq!(
        eval(&mut dep, &[(5, vec![job(JobState::Running)])]),
        Outcome::Satisfied
    );

    let mut delayed = parse("after:5+10");
    let running = vec![(5, vec![job(JobState::Running)])];
    // Started at 1000; ten minutes later is 1600.
    assert_eq!(
        eval_full(&mut delayed, &running, None, false, 1_599),
        Outcome::Waiting
    );
    assert_eq!(
        eval_full(&mut delayed, &running, None, false, 1_600),
        Outcome::Satisfied
    );
}

#[test]
fn after_counts_a_cancelled_pending_job_as_started() {
    let cancelled = TargetJob {
        state: JobState::Cancelled,
        start_time: None,
        end_time: Some(3_000),
        array_task: None,
    };
    let mut dep = parse("after:5");
    assert_eq!(eval(&mut dep, &[(5, vec![cancelled])]), Outcome::Satisfied);
    // The delay counts from the cancellation.
    let mut delayed = parse("after:5+1");
    let table = [(5, vec![cancelled])];
    assert_eq!(
        eval_full(&mut delayed, &table, None, false, 3_059),
        Outcome::Waiting
    );
    assert_eq!(
        eval_full(&mut delayed, &table, None, false, 3_060),
        Outcome::Satisfied
    );
}

#[test]
fn after_without_any_recorded_time_does_not_wait_for_a_delay() {
    let odd = TargetJob {
        state: JobState::Running,
        start_time: None,
        end_time: None,
        array_task: None,
    };
    let mut dep = parse("after:5+60");
    assert_eq!(
        eval_full(&mut dep, &[(5, vec![odd])], None, false, 0),
        Outcome::Satisfied
    );
}

#[test]
fn after_on_array_needs_every_task_started_and_delays_from_the_latest() {
    let mut late = task(JobState::Running, 1);
    late.start_time = Some(5_000);
    let mut dep = parse("after:9+1");
    let some_pending = [(
        9,
        vec![task(JobState::Running, 0), task(JobState::Pending, 1)],
    )];
    assert_eq!(eval(&mut dep, &some_pending), Outcome::Waiting);
    let all_started = [(9, vec![task(JobState::Running, 0), late])];
    assert_eq!(
        eval_full(&mut dep, &all_started, None, false, 5_059),
        Outcome::Waiting
    );
    assert_eq!(
        eval_full(&mut dep, &all_started, None, false, 5_060),
        Outcome::Satisfied
    );
}

#[test]
fn afterany_waits_for_every_end_of_any_kind() {
    let mut dep = parse("afterany:5");
    assert_eq!(
        eval(&mut dep, &[(5, vec![job(JobState::Completing)])]),
        Outcome::Waiting
    );
    assert_eq!(
        eval(&mut dep, &[(5, vec![job(JobState::Failed)])]),
        Outcome::Satisfied
    );

    let mut array = parse("afterany:9");
    let table = [(
        9,
        vec![task(JobState::Timeout, 0), task(JobState::Running, 1)],
    )];
    assert_eq!(eval(&mut array, &table), Outcome::Waiting);
    let table = [(
        9,
        vec![task(JobState::Timeout, 0), task(JobState::Completed, 1)],
    )];
    assert_eq!(eval(&mut array, &table), Outcome::Satisfied);
}

#[test]
fn afterok_needs_completed() {
    let mut dep = parse("afterok:5");
    assert_eq!(
        eval(&mut dep, &[(5, vec![job(JobState::Running)])]),
        Outcome::Waiting
    );
    assert_eq!(
        eval(&mut dep, &[(5, vec![job(JobState::Completed)])]),
        Outcome::Satisfied
    );
}

#[test]
fn afterok_fails_on_every_bad_end() {
    for state in [
        JobState::Failed,
        JobState::Cancelled,
        JobState::Timeout,
        JobState::NodeFail,
        JobState::OutOfMemory,
        JobState::BootFail,
        JobState::Deadline,
        JobState::Preempted,
    ] {
        let mut dep = parse("afterok:5");
        assert_eq!(
            eval(&mut dep, &[(5, vec![job(state)])]),
            Outcome::Never,
            "{state:?}"
        );
        assert_eq!(statuses(&dep), vec![TermStatus::Failed]);
    }
}

#[test]
fn afterok_on_array_fails_as_soon_as_one_task_fails() {
    let mut dep = parse("afterok:9");
    let table = [(
        9,
        vec![task(JobState::Completed, 0), task(JobState::Running, 1)],
    )];
    assert_eq!(eval(&mut dep, &table), Outcome::Waiting);
    let table = [(
        9,
        vec![task(JobState::Failed, 0), task(JobState::Running, 1)],
    )];
    assert_eq!(eval(&mut dep, &table), Outcome::Never);

    let mut ok = parse("afterok:9");
    let table = [(
        9,
        vec![task(JobState::Completed, 0), task(JobState::Completed, 1)],
    )];
    assert_eq!(eval(&mut ok, &table), Outcome::Satisfied);
}

#[test]
fn afterok_on_one_array_task_ignores_the_others() {
    let table = [(
        9,
        vec![task(JobState::Failed, 0), task(JobState::Completed, 1)],
    )];
    let mut dep = parse("afterok:9_1");
    assert_eq!(eval(&mut dep, &table), Outcome::Satisfied);
    let mut dep = parse("afterok:9_0");
    assert_eq!(eval(&mut dep, &table), Outcome::Never);
}

#[test]
fn afternotok_needs_all_ended_and_one_bad() {
    let mut dep = parse("afternotok:5");
    assert_eq!(
        eval(&mut dep, &[(5, vec![job(JobState::Running)])]),
        Outcome::Waiting
    );
    assert_eq!(
        eval(&mut dep, &[(5, vec![job(JobState::Timeout)])]),
        Outcome::Satisfied
    );

    let mut good_end = parse("afternotok:5");
    assert_eq!(
        eval(&mut good_end, &[(5, vec![job(JobState::Completed)])]),
        Outcome::Never
    );
    assert_eq!(statuses(&good_end), vec![TermStatus::Failed]);
}

#[test]
fn afternotok_on_array_waits_for_every_task() {
    let mut dep = parse("afternotok:9");
    let table = [(
        9,
        vec![task(JobState::Failed, 0), task(JobState::Running, 1)],
    )];
    assert_eq!(eval(&mut dep, &table), Outcome::Waiting);
    let table = [(
        9,
        vec![task(JobState::Failed, 0), task(JobState::Completed, 1)],
    )];
    assert_eq!(eval(&mut dep, &table), Outcome::Satisfied);

    let mut all_ok = parse("afternotok:9");
    let table = [(
        9,
        vec![task(JobState::Completed, 0), task(JobState::Completed, 1)],
    )];
    assert_eq!(eval(&mut all_ok, &table), Outcome::Never);
}

#[test]
fn aftercorr_follows_the_task_with_the_same_index() {
    let table = [(
        9,
        vec![
            task(JobState::Failed, 0),
            task(JobState::Completed, 1),
            task(JobState::Running, 2),
        ],
    )];
    let mut one = parse("aftercorr:9");
    assert_eq!(
        eval_full(&mut one, &table, Some(1), false, 0),
        Outcome::Satisfied
    );
    let mut zero = parse("aftercorr:9");
    assert_eq!(
        eval_full(&mut zero, &table, Some(0), false, 0),
        Outcome::Never
    );
    let mut two = parse("aftercorr:9");
    assert_eq!(
        eval_full(&mut two, &table, Some(2), false, 0),
        Outcome::Waiting
    );
}

#[test]
fn aftercorr_falls_back_to_afterok_over_all() {
    let mixed = [(
        9,
        vec![task(JobState::Failed, 0), task(JobState::Completed, 1)],
    )];
    // The dependent is no array task.
    let mut dep = parse("aftercorr:9");
    assert_eq!(eval_full(&mut dep, &mixed, None, false, 0), Outcome::Never);
    // No task with the dependent's index.
    let mut dep = parse("aftercorr:9");
    assert_eq!(
        eval_full(&mut dep, &mixed, Some(7), false, 0),
        Outcome::Never
    );
    let good = [(
        9,
        vec![task(JobState::Completed, 0), task(JobState::Completed, 1)],
    )];
    let mut dep = parse("aftercorr:9");
    assert_eq!(
        eval_full(&mut dep, &good, Some(7), false, 0),
        Outcome::Satisfied
    );
    // The target is a plain job.
    let plain = [(5, vec![job(JobState::Completed)])];
    let mut dep = parse("aftercorr:5");
    assert_eq!(
        eval_full(&mut dep, &plain, Some(3), false, 0),
        Outcome::Satisfied
    );
}

#[test]
fn singleton_follows_the_callers_verdict() {
    let mut dep = parse("singleton");
    assert_eq!(eval_full(&mut dep, &[], None, false, 0), Outcome::Waiting);
    assert_eq!(statuses(&dep), vec![TermStatus::Unfulfilled]);
    assert_eq!(eval_full(&mut dep, &[], None, true, 0), Outcome::Satisfied);
    assert_eq!(statuses(&dep), vec![TermStatus::Fulfilled]);
}

#[test]
fn unknown_targets_pass_for_after_and_afterany_but_fail_otherwise() {
    for (spec, outcome) in [
        ("after:77", Outcome::Satisfied),
        ("after:77+30", Outcome::Satisfied),
        ("afterany:77", Outcome::Satisfied),
        ("afterok:77", Outcome::Never),
        ("afternotok:77", Outcome::Never),
        ("aftercorr:77", Outcome::Never),
    ] {
        let mut dep = parse(spec);
        assert_eq!(
            eval_full(&mut dep, &[], Some(1), false, 0),
            outcome,
            "{spec}"
        );
    }
}

// ---- evaluation: combination and finality ----

#[test]
fn comma_needs_every_term_and_fails_on_any_failure() {
    let mut dep = parse("afterok:1,afterany:2");
    let table = [
        (1, vec![job(JobState::Completed)]),
        (2, vec![job(JobState::Running)]),
    ];
    assert_eq!(eval(&mut dep, &table), Outcome::Waiting);
    assert_eq!(
        statuses(&dep),
        vec![TermStatus::Fulfilled, TermStatus::Unfulfilled]
    );
    let table = [(1, vec![]), (2, vec![job(JobState::Completed)])];
    assert_eq!(eval(&mut dep, &table), Outcome::Satisfied);

    let mut failing = parse("afterok:1,afterany:2");
    let table = [
        (1, vec![job(JobState::Failed)]),
        (2, vec![job(JobState::Running)]),
    ];
    assert_eq!(eval(&mut failing, &table), Outcome::Never);
}

#[test]
fn question_mark_needs_one_term_and_fails_only_when_all_fail() {
    let mut dep = parse("afterok:1?afterok:2");
    let table = [
        (1, vec![job(JobState::Failed)]),
        (2, vec![job(JobState::Running)]),
    ];
    assert_eq!(eval(&mut dep, &table), Outcome::Waiting);
    let table = [
        (1, vec![job(JobState::Failed)]),
        (2, vec![job(JobState::Completed)]),
    ];
    assert_eq!(eval(&mut dep, &table), Outcome::Satisfied);

    let mut all_fail = parse("afterok:1?afterok:2");
    let table = [
        (1, vec![job(JobState::Failed)]),
        (2, vec![job(JobState::Cancelled)]),
    ];
    assert_eq!(eval(&mut all_fail, &table), Outcome::Never);
}

#[test]
fn question_mark_applies_to_ids_within_one_group() {
    let mut dep = parse("afterok:1:2?singleton");
    let table = [
        (1, vec![job(JobState::Running)]),
        (2, vec![job(JobState::Completed)]),
    ];
    assert_eq!(eval(&mut dep, &table), Outcome::Satisfied);
}

#[test]
fn failed_term_stays_failed_after_requeue() {
    let mut dep = parse("afterok:5");
    assert_eq!(
        eval(&mut dep, &[(5, vec![job(JobState::Failed)])]),
        Outcome::Never
    );
    // Requeued and then completed: the term is not looked at again.
    assert_eq!(
        eval(&mut dep, &[(5, vec![job(JobState::Pending)])]),
        Outcome::Never
    );
    assert_eq!(
        eval(&mut dep, &[(5, vec![job(JobState::Completed)])]),
        Outcome::Never
    );
    assert_eq!(statuses(&dep), vec![TermStatus::Failed]);
}

#[test]
fn fulfilled_term_stays_fulfilled() {
    let mut dep = parse("after:5,singleton");
    let table = [(5, vec![job(JobState::Running)])];
    assert_eq!(
        eval_full(&mut dep, &table, None, false, 0),
        Outcome::Waiting
    );
    // The target was requeued and pends again; `after` already held.
    let table = [(5, vec![job(JobState::Pending)])];
    assert_eq!(
        eval_full(&mut dep, &table, None, true, 0),
        Outcome::Satisfied
    );
}

#[test]
fn finished_terms_are_not_looked_up_again() {
    let mut dep = parse("afterok:5,afterany:6");
    let table = [
        (5, vec![job(JobState::Completed)]),
        (6, vec![job(JobState::Running)]),
    ];
    eval(&mut dep, &table);
    let asked = std::cell::RefCell::new(Vec::new());
    dep.evaluate(
        |t| {
            asked.borrow_mut().push(t.job_id);
            lookup_in(&table, t)
        },
        None,
        false,
        0,
    );
    assert_eq!(asked.into_inner(), vec![6]);
}

#[test]
fn typed_term_without_target_is_refused_not_run() {
    let mut dep = Dependency {
        terms: vec![Term {
            kind: DepKind::AfterOk,
            target: None,
            delay_min: 0,
            status: TermStatus::Unfulfilled,
        }],
        any: false,
    };
    assert_eq!(eval(&mut dep, &[]), Outcome::Never);
}

#[test]
fn empty_term_list_is_satisfied() {
    for any in [false, true] {
        let dep = Dependency {
            terms: Vec::new(),
            any,
        };
        assert_eq!(dep.outcome(), Outcome::Satisfied);
    }
}

// ---- helpers for the controller ----

#[test]
fn validate_targets_names_the_first_unknown_job() {
    let dep = parse("afterok:1,after:2_3,singleton,afterany:4");
    assert_eq!(dep.validate_targets(|_| true), Ok(()));
    assert_eq!(
        dep.validate_targets(|t| t.job_id != 2),
        Err(DependError::UnknownTarget {
            target: target(2, Some(3))
        })
    );
    assert_eq!(
        dep.validate_targets(|t| t.job_id != 4)
            .unwrap_err()
            .to_string(),
        "dependency on job 4, which does not exist"
    );
    // Singleton names no job, so nothing to check.
    assert_eq!(parse("singleton").validate_targets(|_| false), Ok(()));
}

#[test]
fn target_ids_are_deduplicated_in_order() {
    let dep = parse("afterok:7:3_1,singleton,afterany:7_2,after:3,9");
    assert_eq!(dep.target_ids(), vec![7, 3, 9]);
    assert!(parse("singleton").target_ids().is_empty());
}

#[test]
fn has_singleton() {
    assert!(parse("afterok:1,singleton").has_singleton());
    assert!(!parse("afterok:1").has_singleton());
}

// ---- display ----

#[test]
fn display_shows_unfulfilled_terms_as_slurm_does() {
    assert_eq!(
        parse("afterok:123,afterany:124_2").to_string(),
        "afterok:123(unfulfilled),afterany:124_2(unfulfilled)"
    );
    assert_eq!(parse("after:5+10").to_string(), "after:5+10(unfulfilled)");
    assert_eq!(parse("singleton").to_string(), "singleton(unfulfilled)");
    assert_eq!(
        parse("12:13").to_string(),
        "afterany:12(unfulfilled),afterany:13(unfulfilled)"
    );
    assert_eq!(
        parse("AFTEROK:1?aftercorr:2").to_string(),
        "afterok:1(unfulfilled)?aftercorr:2(unfulfilled)"
    );
}

#[test]
fn display_drops_fulfilled_terms_and_marks_failed_ones() {
    let mut dep = parse("afterok:1,afterany:124_2,afterok:3");
    let table = [
        (1, vec![job(JobState::Completed)]),
        (124, vec![task(JobState::Running, 2)]),
        (3, vec![job(JobState::Failed)]),
    ];
    eval(&mut dep, &table);
    assert_eq!(
        dep.to_string(),
        "afterany:124_2(unfulfilled),afterok:3(failed)"
    );
}

#[test]
fn display_is_null_when_nothing_is_left() {
    let mut dep = parse("afterany:1,singleton");
    assert_eq!(eval_full(&mut dep, &[], None, true, 0), Outcome::Satisfied);
    assert_eq!(dep.to_string(), "(null)");
}
