//! A process's cost as the kernel counts it: CPU time (user + system, from `/proc/PID/stat`)
//! and resident memory, now and at its peak (`VmRSS`, `VmHWM` from `/proc/PID/status`).

use std::sync::OnceLock;
use std::time::Duration;

use anyhow::{Context, Result};

/// What a process has cost so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub cpu: Duration,
    pub rss_kib: u64,
    pub peak_rss_kib: u64,
}

/// The usage of process `pid`.
pub fn usage(pid: u32) -> Result<Usage> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    Ok(Usage {
        cpu: cpu_time(&stat).with_context(|| format!("/proc/{pid}/stat: {stat:?}"))?,
        rss_kib: status_kib(&status, "VmRSS").unwrap_or(0),
        peak_rss_kib: status_kib(&status, "VmHWM").unwrap_or(0),
    })
}

/// The sum of the CPU time of `pids` (processes that are gone count nothing).
pub fn total_cpu(pids: &[u32]) -> Duration {
    pids.iter()
        .filter_map(|pid| usage(*pid).ok())
        .map(|u| u.cpu)
        .sum()
}

/// utime + stime of a `/proc/PID/stat` line (fields 14 and 15; the command name, field 2, may
/// hold spaces and parentheses, so counting starts after its last `)`).
fn cpu_time(stat: &str) -> Option<Duration> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // after the name: field 3 (state) is index 0, so utime (14) is index 11, stime (15) 12
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_secs_f64(ticks as f64 / clock_ticks() as f64))
}

/// `KEY:   N kB` of `/proc/PID/status`.
fn status_kib(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// The kernel's count of connections dropped because a listen queue was full
/// (`TcpExt: ListenOverflows` of `/proc/net/netstat`, for the whole network namespace).
pub fn listen_overflows() -> Result<u64> {
    let netstat =
        std::fs::read_to_string("/proc/net/netstat").context("reading /proc/net/netstat")?;
    netstat_counter(&netstat, "TcpExt", "ListenOverflows")
        .context("/proc/net/netstat has no TcpExt ListenOverflows")
}

/// A counter of `/proc/net/netstat`: a line of names then a line of values, both led by
/// `PREFIX:`.
fn netstat_counter(netstat: &str, prefix: &str, name: &str) -> Option<u64> {
    let lead = format!("{prefix}:");
    let mut rows = netstat.lines().filter(|l| l.starts_with(&lead));
    let names = rows.next()?.split_whitespace();
    let values = rows.next()?.split_whitespace();
    names
        .zip(values)
        .find(|(n, _)| *n == name)
        .and_then(|(_, v)| v.parse().ok())
}

/// The kernel's clock ticks per second for `/proc` times (`getconf CLK_TCK`; 100 on Linux).
fn clock_ticks() -> u64 {
    static TICKS: OnceLock<u64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .filter(|t| *t > 0)
            .unwrap_or(100)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cpu_time_past_a_name_with_spaces_and_parentheses() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 1 0 5 1000 10";
        let ticks = clock_ticks() as f64;
        assert_eq!(cpu_time(stat), Some(Duration::from_secs_f64(300.0 / ticks)));
        assert_eq!(cpu_time("42 (x) S 1"), None);
    }

    #[test]
    fn reads_kib_fields_of_status() {
        let status = "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n";
        assert_eq!(status_kib(status, "VmRSS"), Some(1024));
        assert_eq!(status_kib(status, "VmHWM"), Some(2048));
        assert_eq!(status_kib(status, "VmSwap"), None);
    }

    #[test]
    fn reads_a_netstat_counter_by_name() {
        let netstat = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\nTcpExt: 0 17 19\nIpExt: InNoRoutes\nIpExt: 3\n";
        assert_eq!(
            netstat_counter(netstat, "TcpExt", "ListenOverflows"),
            Some(17)
        );
        assert_eq!(netstat_counter(netstat, "IpExt", "InNoRoutes"), Some(3));
        assert_eq!(netstat_counter(netstat, "TcpExt", "Missing"), None);
        assert!(
            listen_overflows().is_ok(),
            "this kernel counts ListenOverflows"
        );
    }

    #[test]
    fn measures_this_process() -> Result<()> {
        let me = usage(std::process::id())?;
        assert!(me.rss_kib > 0 && me.peak_rss_kib >= me.rss_kib, "{me:?}");
        Ok(())
    }
}
