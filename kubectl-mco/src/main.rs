//! `kubectl-mco`: kubectl finds it on PATH and runs it for `kubectl mco ...`.

fn main() -> std::process::ExitCode {
    kubectl_mco::main()
}
