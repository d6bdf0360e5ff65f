//! The relay tree's pure core: rank sets, the tree layout, splitting targets among attached
//! children, collecting exactly one outcome per target, and subtree health by change. Nothing here
//! does I/O or reads a clock (`now` is always passed in); the relay and controller actors are thin
//! shells that move these values between sockets and mailboxes.
//!
//! Dynamic nodes (`canopy-noded -Z`) get appended ranks in blocks under the controller, laid
//! out so that adding one never re-ranks or re-parents a node already there (`topology`'s
//! header says how; its oracle tests check it).

pub mod collect;
pub mod health;
pub mod plan;
pub mod rankset;
pub mod topology;

/// A tiny seeded generator so the randomized oracle tests need no dev-dependency and replay
/// exactly.
#[cfg(test)]
pub(crate) mod test_rng {
    pub struct Lcg(u64);

    impl Lcg {
        pub fn new(seed: u64) -> Self {
            Lcg(seed ^ 0x9E37_79B9_7F4A_7C15)
        }

        pub fn next_u32(&mut self) -> u32 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 33) as u32
        }

        /// Uniform-enough value in `0..bound` (`bound > 0`).
        pub fn below(&mut self, bound: u32) -> u32 {
            self.next_u32() % bound
        }

        pub fn chance(&mut self, percent: u32) -> bool {
            self.below(100) < percent
        }
    }
}
