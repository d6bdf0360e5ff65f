//! The multi-call client (`canopy`, or any Slurm command name linked to it).

fn main() {
    std::process::exit(canopy::cli::main())
}
