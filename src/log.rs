//! Opt-in debug logging, as in the original library: `DAT_DBG_TYPE` selects what is logged
//! (a bit mask, read with strtol base 0) and `DAT_DBG_DEST` where (1 stdout, 2 syslog, 3 both).
//! Unlike the original, nothing at all is printed unless `DAT_DBG_TYPE` is set, and in a
//! set-user-ID, set-group-ID or file-capability process both are ignored (`util::env`), so such
//! a program logs nothing. No destination is a file: a caller can name none to be written.

use std::fmt::Arguments;
use std::io::Write;
use std::sync::OnceLock;

bitflags::bitflags! {
    /// The `DAT_DBG_TYPE` bits.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct DbgType: u32 {
        const ERROR = 0x1;
        const GENERIC = 0x2;
        const SR = 0x4;
        const DR = 0x8;
        const PROVIDER_API = 0x10;
        const CONSUMER_API = 0x20;
    }
}

const DEST_STDOUT: u32 = 0x1;
const DEST_SYSLOG: u32 = 0x2;

struct Config {
    mask: u32,
    dest: u32,
}

fn config() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(|| Config { mask: env_number("DAT_DBG_TYPE").unwrap_or(0), dest: env_number("DAT_DBG_DEST").unwrap_or(DEST_STDOUT) })
}

/// Parses an environment variable the way `strtol(s, NULL, 0)` does (decimal, 0x hex, 0 octal).
fn env_number(name: &str) -> Option<u32> {
    let value = crate::util::env::var(name)?;
    parse_c_number(value.trim())
}

pub fn parse_c_number(s: &str) -> Option<u32> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let (radix, digits) = if let Some(h) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        (16, h)
    } else if body.len() > 1 && body.starts_with('0') {
        (8, &body[1..])
    } else {
        (10, body)
    };
    let end = digits.find(|c: char| !c.is_digit(radix)).unwrap_or(digits.len());
    let n = if end == 0 { 0 } else { i64::from_str_radix(&digits[..end], radix).ok()? };
    let n = if neg { -n } else { n };
    Some(n as u32)
}

/// True when messages of `kind` are wanted; use it to skip formatting costs.
pub fn enabled(kind: DbgType) -> bool {
    config().mask & kind.bits() != 0
}

/// Logs one message with the `DAT Registry: ` prefix if `kind` is enabled.
pub fn log(kind: DbgType, args: Arguments<'_>) {
    let cfg = config();
    if cfg.mask & kind.bits() == 0 {
        return;
    }
    let line = format!("DAT Registry: {args}\n");
    if cfg.dest & DEST_STDOUT != 0 {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(line.as_bytes());
        let _ = out.flush();
    }
    if cfg.dest & DEST_SYSLOG != 0 {
        if let Ok(c) = std::ffi::CString::new(line.trim_end().replace('\0', " ")) {
            // SAFETY: a constant "%s" format with one NUL-terminated string argument.
            unsafe { libc::syslog(libc::LOG_USER | libc::LOG_DEBUG, c"%s".as_ptr(), c.as_ptr()) };
        }
    }
}

/// `dbg_log!(DbgType::SR, "...", args)`: formats only when the kind is enabled.
#[macro_export]
macro_rules! dbg_log {
    ($kind:expr, $($arg:tt)+) => {
        if $crate::log::enabled($kind) {
            $crate::log::log($kind, format_args!($($arg)+));
        }
    };
}

#[cfg(test)]
mod tests {
    use super::parse_c_number;

    #[test]
    fn strtol_like() {
        assert_eq!(parse_c_number("0xff"), Some(0xff));
        assert_eq!(parse_c_number("17"), Some(17));
        assert_eq!(parse_c_number("010"), Some(8));
        assert_eq!(parse_c_number("0"), Some(0));
        assert_eq!(parse_c_number("3abc"), Some(3));
        assert_eq!(parse_c_number(""), Some(0));
    }
}
