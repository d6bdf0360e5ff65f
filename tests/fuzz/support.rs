//! The driver shared by the fuzz targets: case counts, seeds, replay and the heap bound.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use proptest::strategy::Strategy;
use proptest::test_runner::{
    Config, FileFailurePersistence, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner,
};

/// Most bytes one case may add to the heap at its peak. Generous (the hostlist cap alone
/// allows a million names), but far below what an unbounded expansion would reach.
pub const CASE_HEAP_CAP: usize = 256 << 20;
/// Any single allocation above this fails, which aborts with Rust's "memory allocation
/// of N bytes failed": a length taken from hostile input shows up as a crash here
/// rather than as a machine driven into swap.
pub const HARD_ALLOC_CAP: usize = 1 << 30;
/// Live heap above which every allocation fails (and the process aborts with the size):
/// a case that leaks or expands without bound ends here instead of in the OOM killer.
pub const LIVE_HEAP_CAP: usize = 4 << 30;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting live bytes and their peak.
pub struct CountingAlloc;

impl CountingAlloc {
    fn refuse(size: usize) -> bool {
        size > HARD_ALLOC_CAP || LIVE.load(Ordering::Relaxed) + size > LIVE_HEAP_CAP
    }

    fn grew(size: usize) {
        let now = LIVE.fetch_add(size, Ordering::Relaxed) + size;
        PEAK.fetch_max(now, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded to `System` with the caller's layout; the counters
// are plain atomics and never allocate.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if Self::refuse(layout.size()) {
            return std::ptr::null_mut();
        }
        let ptr = System.alloc(layout);
        if !ptr.is_null() {
            Self::grew(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if Self::refuse(layout.size()) {
            return std::ptr::null_mut();
        }
        let ptr = System.alloc_zeroed(layout);
        if !ptr.is_null() {
            Self::grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > HARD_ALLOC_CAP || Self::refuse(new_size.saturating_sub(layout.size())) {
            return std::ptr::null_mut();
        }
        let new = System.realloc(ptr, layout, new_size);
        if !new.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            Self::grew(new_size);
        }
        new
    }
}

/// Cases per target: `CANOPY_FUZZ_CASES` if set, else the target's default.
pub fn cases(default: u32) -> u32 {
    match std::env::var("CANOPY_FUZZ_CASES") {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("CANOPY_FUZZ_CASES={v}: expected a whole number")),
        Err(_) => default,
    }
}

/// The run's seed: `CANOPY_FUZZ_SEED` to replay, else a fresh one.
fn seed() -> u64 {
    match std::env::var("CANOPY_FUZZ_SEED") {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("CANOPY_FUZZ_SEED={v}: expected a u64")),
        Err(_) => rand::random(),
    }
}

/// Each target derives its own stream from the run seed and its name, so one printed
/// seed replays any target and targets do not see the same inputs.
fn rng_for(seed: u64, target: &str) -> TestRng {
    let mut bytes = [0u8; 32];
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in target.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..16].copy_from_slice(&h.to_le_bytes());
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

/// Runs `test` on `cases(default_cases)` values of `strategy`, each under the heap bound.
/// Panics with the shrunk failing input and the replay command.
pub fn run<S, F>(target: &str, default_cases: u32, strategy: S, test: F)
where
    S: Strategy,
    S::Value: std::fmt::Debug,
    F: Fn(S::Value) -> Result<(), TestCaseError>,
{
    let cases = cases(default_cases);
    let seed = seed();
    let config = Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "tests/fuzz.proptest-regressions",
        ))),
        // Shrinking a large byte string can take long; a good-enough minimum will do.
        max_shrink_iters: 2048,
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(config, rng_for(seed, target));
    let started = Instant::now();
    let result = runner.run(&strategy, |value| {
        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        test(value)?;
        let grew = PEAK.load(Ordering::Relaxed).saturating_sub(base);
        // Another test thread's allocations count too, so this bound is loose, never
        // a false alarm below the cap.
        if grew > CASE_HEAP_CAP {
            return Err(TestCaseError::fail(format!(
                "one case grew the heap by {grew} bytes (cap {CASE_HEAP_CAP})"
            )));
        }
        Ok(())
    });
    let secs = started.elapsed().as_secs_f64();
    match result {
        Ok(()) => eprintln!(
            "fuzz {target}: {cases} cases in {secs:.2} s ({:.1} us/case), seed {seed}",
            secs * 1e6 / f64::from(cases.max(1))
        ),
        Err(TestError::Fail(why, value)) => panic!(
            "fuzz {target} failed: {why}\nminimal input: {value:#?}\n\
             replay: CANOPY_FUZZ_SEED={seed} CANOPY_FUZZ_CASES={cases} \
             cargo test --test fuzz {target}"
        ),
        Err(TestError::Abort(why)) => panic!("fuzz {target} aborted: {why} (seed {seed})"),
    }
}

/// Applies `edits` to `bytes`: each flips, overwrites, inserts, removes or truncates.
pub fn mutate(bytes: &mut Vec<u8>, edits: &[Edit]) {
    for edit in edits {
        let len = bytes.len();
        match *edit {
            Edit::Xor(at, mask) if len > 0 => bytes[at % len] ^= mask.max(1),
            Edit::Set(at, value) if len > 0 => bytes[at % len] = value,
            Edit::Insert(at, value) => bytes.insert(at % (len + 1), value),
            Edit::Remove(at) if len > 0 => {
                bytes.remove(at % len);
            }
            Edit::Truncate(at) => bytes.truncate(at % (len + 1)),
            _ => {}
        }
    }
}

/// One byte-level edit; positions wrap around the current length.
#[derive(Debug, Clone, Copy)]
pub enum Edit {
    Xor(usize, u8),
    Set(usize, u8),
    Insert(usize, u8),
    Remove(usize),
    Truncate(usize),
}

pub fn edit() -> impl Strategy<Value = Edit> {
    use proptest::prelude::*;
    prop_oneof![
        4 => (any::<usize>(), any::<u8>()).prop_map(|(a, m)| Edit::Xor(a, m)),
        2 => (any::<usize>(), any::<u8>()).prop_map(|(a, v)| Edit::Set(a, v)),
        1 => (any::<usize>(), any::<u8>()).prop_map(|(a, v)| Edit::Insert(a, v)),
        1 => any::<usize>().prop_map(Edit::Remove),
        1 => any::<usize>().prop_map(Edit::Truncate),
    ]
}

/// Tokens joined without separators: most structured text inputs are built this way,
/// from a vocabulary of meaningful pieces mixed with random short strings.
pub fn joined(tokens: Vec<String>) -> String {
    tokens.concat()
}
