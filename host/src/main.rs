fn main() -> std::process::ExitCode {
    bench::cli::main()
}
