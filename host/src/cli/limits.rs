//! Operating-system limits a large run can hit: open files (one socket per concurrent
//! request) and ephemeral ports (one per connection to the same server address).
//!
//! Both are checked before anything slow is loaded, so that a run that cannot work fails
//! in milliseconds with the command that fixes it, instead of recording thousands of
//! "Too many open files" errors halfway through.

use anyhow::{Result, bail};

/// File descriptors `bench` holds besides one socket per connection: standard streams,
/// the async runtime's epoll and wake-up descriptors, the tokenizer and plugin files, the
/// terminal of the progress bar. Measured at 12 during a run; the rest is headroom.
pub const FD_MARGIN: u64 = 64;

/// The soft and hard `RLIMIT_NOFILE` after raising the soft limit as far as allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFileLimit {
    pub soft: u64,
    pub hard: u64,
}

/// Raises the soft open-file limit to the hard limit (an unprivileged process may do
/// that; only the hard limit needs root). Many systems start processes with a soft limit
/// of 1024 and a much higher hard limit, so this alone makes most large runs possible.
/// On failure the current limit is kept and returned. (`rlim_t` is `u64` on the 64-bit
/// Unix systems bench runs on.)
pub fn raise_open_file_limit() -> std::io::Result<OpenFileLimit> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own and reads nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // Linux refuses a soft limit above fs.nr_open even when the hard limit is "unlimited".
    let ceiling = if lim.rlim_max == libc::RLIM_INFINITY {
        nr_open().unwrap_or(1 << 20)
    } else {
        lim.rlim_max
    };
    if lim.rlim_cur < ceiling {
        let raised = libc::rlimit {
            rlim_cur: ceiling,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit only reads the struct.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim.rlim_cur = raised.rlim_cur;
        } else {
            tracing::debug!(
                "cannot raise the open-file limit to {ceiling}: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    Ok(OpenFileLimit {
        soft: lim.rlim_cur,
        hard: lim.rlim_max,
    })
}

fn nr_open() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The ephemeral port range (`net.ipv4.ip_local_port_range`), where the system has one.
pub fn ephemeral_port_range() -> Option<(u32, u32)> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    parse_port_range(&text)
}

fn parse_port_range(text: &str) -> Option<(u32, u32)> {
    let mut it = text.split_whitespace().map(str::parse::<u32>);
    match (it.next(), it.next()) {
        (Some(Ok(lo)), Some(Ok(hi))) if lo <= hi => Some((lo, hi)),
        _ => None,
    }
}

/// How many connections a run may hold open at once, and which flag decides it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionNeed {
    pub connections: u64,
    /// The flag to name in messages (`--max-concurrency` or `--num-prompts`).
    pub flag: &'static str,
    /// Whether the run certainly reaches that many (a cap or an infinite rate); with a
    /// finite rate and no cap, it is only an upper bound, so a shortfall is a warning.
    pub certain: bool,
}

/// Checks that `need` fits the open-file limit `limit`: an error naming the flag and the
/// `ulimit -n` that fixes it when it certainly does not, a warning when it might not.
/// Returns the warnings to show.
pub fn check_open_files(need: &ConnectionNeed, limit: OpenFileLimit) -> Result<Vec<String>> {
    let wanted = need.connections.saturating_add(FD_MARGIN);
    if wanted <= limit.soft {
        return Ok(Vec::new());
    }
    let fix = if wanted <= limit.hard {
        format!("raise it in the shell that runs bench (ulimit -n {wanted})")
    } else {
        format!(
            "the hard limit ({}) is lower still, so raise both as root (ulimit -Hn {wanted} \
             and ulimit -n {wanted}, or nofile in /etc/security/limits.conf)",
            limit.hard
        )
    };
    let message = format!(
        "{} {} needs up to {wanted} open files ({} connections + {FD_MARGIN} for bench \
         itself) but the open-file limit is {}: {fix}, or lower {}",
        need.flag, need.connections, need.connections, limit.soft, need.flag
    );
    if need.certain {
        bail!(message);
    }
    Ok(vec![format!(
        "{message}. Without --max-concurrency the number in flight depends on the server's \
         speed; requests beyond the limit would fail with 'Too many open files'."
    )])
}

/// A warning when more connections may be open at once than there are ephemeral ports:
/// every connection to one server address needs its own local port.
pub fn check_ephemeral_ports(need: &ConnectionNeed, range: Option<(u32, u32)>) -> Option<String> {
    let (lo, hi) = range?;
    let ports = u64::from(hi - lo) + 1;
    (need.connections > ports).then(|| {
        format!(
            "{} {} exceeds the {ports} ephemeral ports (net.ipv4.ip_local_port_range = {lo} {hi}); \
             connections beyond that fail with 'Cannot assign requested address'. Widen the \
             range (sysctl -w net.ipv4.ip_local_port_range=\"1024 65535\") or lower {}",
            need.flag, need.connections, need.flag
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn need(connections: u64, certain: bool) -> ConnectionNeed {
        ConnectionNeed {
            connections,
            flag: "--max-concurrency",
            certain,
        }
    }

    #[test]
    fn enough_files_is_silent() {
        let limit = OpenFileLimit {
            soft: 1000 + FD_MARGIN,
            hard: 1 << 20,
        };
        assert!(
            check_open_files(&need(1000, true), limit)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn too_few_files_fails_with_the_ulimit_that_fixes_it() {
        let limit = OpenFileLimit {
            soft: 1024,
            hard: 4096,
        };
        let err = check_open_files(&need(2000, true), limit)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--max-concurrency 2000"), "{err}");
        assert!(
            err.contains(&format!("ulimit -n {}", 2000 + FD_MARGIN)),
            "{err}"
        );
        // Beyond the hard limit the message says root is needed.
        let err = check_open_files(&need(10_000, true), limit)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("the hard limit (4096) is lower still"),
            "{err}"
        );
        assert!(err.contains("ulimit -Hn 10064"), "{err}");
        // Only an upper bound: a warning, not an error.
        let warnings = check_open_files(&need(2000, false), limit).unwrap();
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("Too many open files"));
    }

    #[test]
    fn port_range_is_parsed_and_compared() {
        assert_eq!(parse_port_range("32768\t60999\n"), Some((32768, 60999)));
        assert_eq!(parse_port_range("garbage"), None);
        let range = Some((32768, 60999));
        assert_eq!(check_ephemeral_ports(&need(28_232, true), range), None);
        let w = check_ephemeral_ports(&need(28_233, true), range).unwrap();
        assert!(w.contains("28232 ephemeral ports"), "{w}");
        assert_eq!(check_ephemeral_ports(&need(1 << 30, true), None), None);
    }

    #[test]
    fn raising_keeps_the_soft_limit_at_most_the_hard_one() {
        let lim = raise_open_file_limit().unwrap();
        assert!(lim.soft <= lim.hard);
        // A second call finds the limit already raised and changes nothing.
        assert_eq!(raise_open_file_limit().unwrap(), lim);
    }
}
