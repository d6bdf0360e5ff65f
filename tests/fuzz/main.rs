//! Property-based fuzz targets for every parser that reads untrusted or hand-written
//! input (issue 14, item 8): the frame decoder and stream codec, the credential
//! verifier, the local signer's request parser, slurm.conf, hostlists, `#SBATCH`
//! directives and the sbatch/srun option parsers.
//!
//! Why proptest rather than cargo-fuzz/libFuzzer: it runs on stable Rust inside the
//! ordinary `cargo test`, its strategies build structured inputs (tokens, valid
//! frames, valid configs to mutate) that random bytes would rarely reach, and it
//! shrinks a failure to a small case and persists its seed.
//!
//! Every target runs `CANOPY_FUZZ_CASES` cases (a small default keeps `cargo test`
//! fast), prints its seed, and replays a run with `CANOPY_FUZZ_SEED=<seed>`. Failing
//! seeds are also saved in `tests/fuzz.proptest-regressions` and re-run first.
//! A counting allocator bounds memory: one case may not grow the heap by more than
//! [`support::CASE_HEAP_CAP`], and no single allocation may exceed
//! [`support::HARD_ALLOC_CAP`], nor any once [`support::LIVE_HEAP_CAP`] are live (the
//! process aborts, naming the size, instead of the OOM killer ending it).

mod support;

mod auth;
mod cli;
mod config;
mod frame;
mod hostlist;
mod signer;

#[global_allocator]
static ALLOC: support::CountingAlloc = support::CountingAlloc;
