//! `mco-sysroot-status SYSROOT`: the deployments of the ostree sysroot at SYSROOT (`/` on a
//! node), read with libostree, as one JSON object (`OsStatus`) on stdout. Run by
//! `mco-agent status`, which keeps libostree out of its own process. On failure: the reason,
//! naming the sysroot, on stderr, and exit status 1; 2 for a bad command line.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

const USAGE: &str = "usage: mco-sysroot-status SYSROOT\n\
    Prints the deployments of the ostree sysroot SYSROOT (/ on a node) as JSON; run by `mco-agent status`.";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let sysroot = match args.as_slice() {
        [flag] if flag == "--help" || flag == "-h" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        [flag] if flag == "--version" || flag == "-V" => {
            println!("mco-sysroot-status {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        [path] if !path.starts_with('-') => Path::new(path),
        _ => {
            eprintln!("mco-sysroot-status: expected one argument, the sysroot\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let status = match mco_sysroot_status::read_sysroot(sysroot) {
        Ok(status) => status,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let json = serde_json::to_string(&status).expect("an OsStatus is plain data");
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = writeln!(stdout, "{json}").and_then(|()| stdout.flush()) {
        eprintln!(
            "ostree sysroot {}: writing the status: {e}",
            sysroot.display()
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
