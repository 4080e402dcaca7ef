//! `mco-agent`: the node agent's command line (see `mco_agent::cli`).

fn main() -> std::process::ExitCode {
    mco_agent::cli::main()
}
