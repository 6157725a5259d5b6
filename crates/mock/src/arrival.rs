//! When a request really arrived: the kernel's receive timestamp of its bytes.
//!
//! The mock measures TTFT from a request's arrival. Stamping that in the handler would
//! leave out the time the request waited in the socket while the server's one core served
//! others: when hundreds of requests land at once, the last of them is handled milliseconds
//! after it arrived, and a client that measured that wait correctly would look wrong. So
//! every connection asks the kernel for software receive timestamps (`SO_TIMESTAMPING`),
//! reads with `recvmsg`, and keeps the time of the latest read's data; a handler takes that
//! as its request's arrival (hyper reads the whole request head before calling it, and a
//! client sends its next request on a connection only after the previous response).
//! Deadlines run from it as well, so `--ttft-ms 50` means 50 ms from arrival even for a
//! request that waited.

use std::io;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The latest receive time of a connection (a lock per read of the mock server, never
/// contended: one connection is read by one task at a time).
#[derive(Debug, Default)]
pub(super) struct LastArrival(Mutex<Option<Instant>>);

impl LastArrival {
    /// Records the latest read; `None` when the kernel did not stamp it, so that a later
    /// request never inherits an earlier one's arrival.
    pub(super) fn set(&self, at: Option<Instant>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = at;
    }

    /// The latest receive time, when the kernel gave one.
    pub(super) fn get(&self) -> Option<Instant> {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Asks the kernel to timestamp the data this socket receives. Without it (another OS, an
/// old kernel), reads carry no timestamp and handlers fall back to their own clock.
#[cfg(target_os = "linux")]
pub(super) fn enable(fd: std::os::fd::RawFd) -> io::Result<()> {
    let flags =
        (libc::SOF_TIMESTAMPING_RX_SOFTWARE | libc::SOF_TIMESTAMPING_SOFTWARE) as libc::c_int;
    // SAFETY: setsockopt reads `size_of::<c_int>()` bytes from `flags`, which we own.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPING,
            (&flags as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Reads into `buf` like `read(2)`, and returns when the kernel received the data read (the
/// timestamp of the last segment read, which for a request is its last bytes).
#[cfg(target_os = "linux")]
pub(super) fn recv(fd: std::os::fd::RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<Instant>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // Room for one SCM_TIMESTAMPING message (three timespecs), 8-byte aligned.
    let mut control = [0u64; 16];
    // SAFETY: an all-zero msghdr is a valid empty one; the pointers set below point at
    // `iov` and `control`, which outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: `msg` describes buffers we own for the duration of the call.
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut received = None;
    // SAFETY: the CMSG macros walk the control buffer the kernel filled in, within
    // `msg_controllen`; the timestamp payload is three timespecs, read unaligned.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPING
            {
                let software: libc::timespec =
                    std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                received = to_instant(software);
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok((n as usize, received))
}

/// The kernel stamps with the wall clock; turns that into an `Instant` by its age now.
/// `None` for an empty stamp, or one in the future or over a minute old (the wall clock
/// was set in between).
#[cfg(target_os = "linux")]
fn to_instant(stamp: libc::timespec) -> Option<Instant> {
    if stamp.tv_sec == 0 && stamp.tv_nsec == 0 {
        return None;
    }
    let now = Instant::now();
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    let stamp = Duration::new(
        u64::try_from(stamp.tv_sec).ok()?,
        u32::try_from(stamp.tv_nsec).ok()?,
    );
    let age = wall.checked_sub(stamp)?;
    (age < Duration::from_secs(60))
        .then(|| now.checked_sub(age))
        .flatten()
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::io::Write;
    use std::os::fd::AsRawFd;

    use super::*;

    #[test]
    fn the_stamp_is_when_the_data_arrived_not_when_it_was_read() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        enable(server.as_raw_fd()).unwrap();
        // The kernel turns receive timestamps on for the whole system from a work queue,
        // a moment after the first socket asks: until then, data arrives unstamped.
        let mut buf = [0u8; 64];
        for attempt in 0.. {
            let sent = Instant::now();
            client.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
            std::thread::sleep(Duration::from_millis(50));
            let (n, at) = recv(server.as_raw_fd(), &mut buf).unwrap();
            let read = Instant::now();
            assert_eq!(&buf[..n], b"GET / HTTP/1.1\r\n\r\n");
            let Some(at) = at else {
                assert!(attempt < 20, "the kernel never stamped received data");
                continue;
            };
            // Received right after the write, read 50 ms later.
            assert!(at >= sent - Duration::from_millis(1), "{:?}", sent - at);
            assert!(read - at >= Duration::from_millis(45), "{:?}", read - at);
            break;
        }
    }

    #[test]
    fn the_latest_arrival_is_kept_per_connection() {
        let last = LastArrival::default();
        assert_eq!(last.get(), None);
        let at = Instant::now();
        last.set(Some(at));
        assert_eq!(last.get(), Some(at));
        let later = at + Duration::from_millis(3);
        last.set(Some(later));
        assert_eq!(last.get(), Some(later));
        // An unstamped read forgets the earlier stamp.
        last.set(None);
        assert_eq!(last.get(), None);
    }
}
