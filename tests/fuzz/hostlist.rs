//! Hostlist expressions (`hostlist::expand`, `compress`, `compress_sorted`).

use canopy::config::hostlist::{compress, compress_sorted, expand, MAX_HOSTS_PER_EXPR};
use proptest::collection::vec;
use proptest::prelude::*;

use crate::support;

const TOKENS: &[&str] = &[
    "n",
    "tux",
    "gpu-",
    "r1n",
    "io",
    "x",
    "[",
    "]",
    "-",
    ",",
    " ",
    "\t",
    "\n",
    "1",
    "01",
    "007",
    "9",
    "10",
    "99",
    "100",
    "0",
    "[1-4]",
    "[01-10]",
    "[1-3,5,7-9]",
    "[0]",
    "[1-65537]",
    "[1-999999999999]",
    "[999999999999999999]",
    "[1-9999999999999999999]",
    "[5-1]",
    "[-1]",
    "[1-]",
    "[]",
    "[[1]]",
    "]",
    "é",
    "\u{0}",
];

/// Ranges that expand to many names: rare, since a case that reaches the caps costs
/// milliseconds where the others cost microseconds.
const BIG: &[&str] = &["[1-65536]", "[0-999]", "[1-1000]", "[00001-32768]"];

/// A token, sometimes repeated many times: long literals and long runs of groups are
/// where size and depth limits matter.
fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        30 => proptest::sample::select(TOKENS).prop_map(str::to_owned),
        1 => proptest::sample::select(BIG).prop_map(str::to_owned),
        6 => any::<u64>().prop_map(|n| n.to_string()),
        3 => "[ -~]{0,4}",
        1 => (proptest::sample::select(TOKENS), 1usize..20_000)
            .prop_map(|(t, n)| t.repeat(n)),
    ]
}

#[test]
fn fuzz_hostlist_arbitrary_expressions() {
    let expr = vec(token(), 0..30).prop_map(support::joined);
    support::run("hostlist_arbitrary_expressions", 400, expr, |expr| {
        let Ok(names) = expand(&expr) else {
            return Ok(());
        };
        prop_assert!(names.len() <= MAX_HOSTS_PER_EXPR);
        // Whatever expanded, compressed, expands back to the same names in order,
        // as long as no name holds the characters hostlists use as syntax.
        let plain = names
            .iter()
            .all(|n| !n.contains(['[', ']', ',', ' ', '\t', '\n', '\r']));
        if plain && names.len() <= 5_000 {
            let nonempty: Vec<&String> = names.iter().filter(|n| !n.is_empty()).collect();
            let back = expand(&compress(&names));
            prop_assert_eq!(
                back.as_ref().map(|b| b.iter().collect::<Vec<_>>()),
                Ok(nonempty)
            );
        }
        Ok(())
    });
}

#[test]
fn fuzz_hostlist_round_trip() {
    // Generated hostnames: a prefix and a number with some zero padding. Duplicates and
    // any order are allowed.
    let name = (
        proptest::sample::select(&["n", "tux", "gpu-", "r1n", "io", "a.b", ""][..]),
        prop_oneof![
            0u64..40,
            0u64..100_000,
            any::<u64>().prop_map(|n| n % 1_000_000_000)
        ],
        0usize..6,
        any::<bool>(),
    )
        .prop_map(|(prefix, n, width, numbered)| {
            if numbered {
                format!("{prefix}{n:0width$}")
            } else {
                format!("{prefix}x")
            }
        });
    let input = vec(name, 0..60);
    support::run("hostlist_round_trip", 1000, input, |names| {
        let names: Vec<String> = names.into_iter().filter(|n| !n.is_empty()).collect();
        let compressed = compress(&names);
        prop_assert_eq!(expand(&compressed), Ok(names.clone()), "via {}", compressed);

        let mut sorted_back = expand(&compress_sorted(&names))?;
        let mut want = names.clone();
        sorted_back.sort();
        want.sort();
        prop_assert_eq!(sorted_back, want);

        // And expand(compress(expand(x))) == expand(x) for x the compressed form.
        let again = compress(&expand(&compressed)?);
        prop_assert_eq!(expand(&again), Ok(names.clone()));
        Ok(())
    });
}

#[test]
fn huge_ranges_are_refused_not_expanded() {
    for expr in [
        "n[1-999999999999]",
        "n[0-18446744073709551615]",
        "n[1-65536][1-65536]",
        "n[1-1000][1-1000][1-2]",
    ] {
        assert!(expand(expr).is_err(), "{expr}");
    }
}
