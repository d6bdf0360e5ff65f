fn main() {
    std::process::exit(canopy::cli::main())
}
