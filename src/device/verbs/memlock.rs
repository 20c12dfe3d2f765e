//! The locked-memory limit (`RLIMIT_MEMLOCK`): every verbs registration pins its pages, and
//! the kernel refuses a registration that would take a process without `CAP_IPC_LOCK` past
//! the limit. The most common failure of RDMA programs in the wild, and one whose error
//! (`ENOMEM`) says nothing of the limit: here it is raised where it can be, shown where it
//! cannot, and named when it refuses a registration. A leaf module.

use crate::dbg_log;
use crate::log::DbgType;

/// The limit now: (soft, hard) in bytes, `None` for unlimited.
fn limit() -> (Option<u64>, Option<u64>) {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: a writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) } != 0 {
        return (None, None);
    }
    let bytes = |v: libc::rlim_t| (v != libc::RLIM_INFINITY).then_some(v);
    (bytes(r.rlim_cur), bytes(r.rlim_max))
}

/// Whether the process may lock memory past the limit (`CAP_IPC_LOCK` in its effective set).
fn exempt() -> bool {
    const CAP_IPC_LOCK: u32 = 14;
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return false };
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_IPC_LOCK) != 0)
}

/// What the process has pinned now (`VmPin`, in bytes), where the kernel says.
fn pinned() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb = status.lines().find_map(|l| l.strip_prefix("VmPin:"))?.trim().trim_end_matches("kB").trim().parse::<u64>().ok()?;
    Some(kb * 1024)
}

fn kib(v: Option<u64>) -> String {
    v.map_or("unlimited".to_string(), |b| format!("{} KiB", b / 1024))
}

/// At a verbs IA's open: a soft limit below the hard one is raised to it (any process may do
/// so), as a user who set the hard limit for RDMA expects. Logged when it happens.
pub(super) fn raise_to_hard(device: &str) {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: a writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) } != 0 || r.rlim_cur == r.rlim_max {
        return;
    }
    let old = r.rlim_cur;
    r.rlim_cur = r.rlim_max;
    // SAFETY: a valid rlimit, soft equal to hard.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &r) } == 0 {
        let (soft, _) = limit();
        dbg_log!(
            DbgType::PROVIDER_API,
            "verbs {device}: RLIMIT_MEMLOCK soft limit raised from {} to the hard limit, {} (registrations pin memory)",
            kib(Some(old)),
            kib(soft)
        );
    }
}

/// The limit as the IA's `DAT2_MEMLOCK` attribute shows it: soft and hard, and what they mean
/// for registrations.
pub(super) fn describe() -> String {
    let (soft, hard) = limit();
    if exempt() {
        return format!("soft {}, hard {}: not enforced (CAP_IPC_LOCK)", kib(soft), kib(hard));
    }
    match soft {
        None => format!("soft unlimited, hard {}: enough for any registration", kib(hard)),
        Some(_) => format!(
            "soft {}, hard {}: registrations pin at most this much memory in all; raise it with ulimit -l, \
             /etc/security/limits.d or systemd's LimitMEMLOCK",
            kib(soft),
            kib(hard)
        ),
    }
}

/// Whether a registration of `len` bytes that failed with `ENOMEM` was refused for the limit
/// (and says so, with the fix, under `DAT_DBG_TYPE`).
pub(super) fn refused(device: &str, len: u64) -> bool {
    let (soft, hard) = limit();
    let Some(soft) = soft else { return false };
    if exempt() {
        return false;
    }
    let pinned = pinned();
    // The kernel counts whole pages, and other registrations of the process too.
    if pinned.is_some_and(|p| p.saturating_add(len) <= soft) {
        return false;
    }
    dbg_log!(
        DbgType::ERROR,
        "verbs {device}: a registration of {len} bytes would pin more than RLIMIT_MEMLOCK allows (soft {}, hard {}; {} pinned now): \
         raise the limit with 'ulimit -l unlimited', in /etc/security/limits.d ('* - memlock unlimited'), or with \
         LimitMEMLOCK=infinity for a systemd service",
        kib(Some(soft)),
        kib(hard),
        pinned.map_or("? KiB".to_string(), |p| kib(Some(p)))
    );
    true
}
