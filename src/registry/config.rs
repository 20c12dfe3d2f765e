//! The `dat.conf` parser.
//!
//! One entry per line, eight blank-separated fields:
//! `ia_name api_version threadsafety default lib_path provider_version ia_params platform_params`.
//! `#` at the start of a field begins a comment that runs to the end of the line; a field that
//! starts with `"` runs to the next unescaped `"` and may hold blanks; a backslash takes the next
//! character literally inside quotes (outside them it is an ordinary character). A malformed line is reported (file and line) and skipped.

use crate::dbg_log;
use crate::log::DbgType;

/// The user/kernel letter of `api_version` (`u2.0`, `k1.2`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiType {
    User,
    Kernel,
}

/// One well-formed line of `dat.conf`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfEntry {
    /// 1-based line number, for messages.
    pub line: usize,
    pub ia_name: Vec<u8>,
    pub api_type: ApiType,
    pub api_major: u32,
    pub api_minor: u32,
    pub thread_safe: bool,
    pub is_default: bool,
    pub lib_path: Vec<u8>,
    pub provider_id: Vec<u8>,
    pub provider_major: u32,
    pub provider_minor: u32,
    pub ia_params: Vec<u8>,
    pub platform_params: Vec<u8>,
}

impl ConfEntry {
    /// Only user-DAT `default` entries are loaded into the registry.
    pub fn is_loadable(&self) -> bool {
        self.api_type == ApiType::User && self.is_default
    }
}

/// Why a line was rejected: the name of the first field that is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfError {
    pub line: usize,
    pub field: &'static str,
    pub detail: String,
}

const FIELDS: [&str; 8] =
    ["ia_name", "api_version", "threadsafety", "default", "lib_path", "provider_version", "ia_params", "platform_params"];

/// The longest IA name DAT allows, NUL excluded (`DAT_NAME_MAX_LENGTH` - 1).
const NAME_MAX: usize = 255;

/// Parses a whole file; returns the entries in file order and the rejected lines.
pub fn parse(text: &[u8]) -> (Vec<ConfEntry>, Vec<ConfError>) {
    let mut entries = Vec::new();
    let mut errors = Vec::new();
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        let lineno = i + 1;
        match parse_line(line, lineno) {
            Ok(Some(e)) => entries.push(e),
            Ok(None) => {}
            Err(e) => errors.push(e),
        }
    }
    (entries, errors)
}

/// Splits one line into fields. An unterminated quote is an error on that line.
fn tokenize(line: &[u8], lineno: usize) -> Result<Vec<Vec<u8>>, ConfError> {
    let mut tokens = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && matches!(line[i], b' ' | b'\t' | b'\r') {
            i += 1;
        }
        if i >= n || line[i] == b'#' {
            return Ok(tokens);
        }
        let mut tok = Vec::new();
        if line[i] == b'"' {
            i += 1;
            let mut closed = false;
            while i < n {
                match line[i] {
                    b'\\' if i + 1 < n => {
                        tok.push(line[i + 1]);
                        i += 2;
                    }
                    b'"' => {
                        i += 1;
                        closed = true;
                        break;
                    }
                    c => {
                        tok.push(c);
                        i += 1;
                    }
                }
            }
            if !closed {
                let field = FIELDS.get(tokens.len()).copied().unwrap_or("end of entry");
                return Err(ConfError { line: lineno, field, detail: "missing closing quote".into() });
            }
        } else {
            // Outside quotes a backslash is an ordinary character.
            while i < n && !matches!(line[i], b' ' | b'\t' | b'\r') {
                tok.push(line[i]);
                i += 1;
            }
        }
        tokens.push(tok);
    }
}

fn parse_line(line: &[u8], lineno: usize) -> Result<Option<ConfEntry>, ConfError> {
    let tokens = tokenize(line, lineno)?;
    if tokens.is_empty() {
        return Ok(None);
    }
    let err = |field: &'static str, detail: String| ConfError { line: lineno, field, detail };
    if tokens.len() < FIELDS.len() {
        let field = FIELDS[tokens.len()];
        return Err(err(field, format!("only {} of 8 fields", tokens.len())));
    }
    if tokens.len() > FIELDS.len() {
        return Err(err("end of entry", format!("{} fields, 8 expected", tokens.len())));
    }
    let show = |t: &[u8]| String::from_utf8_lossy(t).into_owned();

    let ia_name = tokens[0].clone();
    if ia_name.is_empty() || ia_name.len() > NAME_MAX || ia_name.contains(&0) {
        return Err(err("ia_name", format!("'{}'", show(&ia_name))));
    }
    let (api_type, api_major, api_minor) =
        parse_api_version(&tokens[1]).ok_or_else(|| err("api_version", format!("'{}'", show(&tokens[1]))))?;
    let thread_safe = if tokens[2].starts_with(b"threadsafe") {
        true
    } else if tokens[2].starts_with(b"nonthreadsafe") {
        false
    } else {
        return Err(err("threadsafety", format!("'{}'", show(&tokens[2]))));
    };
    let is_default = if tokens[3].starts_with(b"default") {
        true
    } else if tokens[3].starts_with(b"nondefault") {
        false
    } else {
        return Err(err("default", format!("'{}'", show(&tokens[3]))));
    };
    let lib_path = tokens[4].clone();
    if lib_path.is_empty() || lib_path.contains(&0) {
        return Err(err("lib_path", format!("'{}'", show(&lib_path))));
    }
    let (provider_id, provider_major, provider_minor) =
        parse_provider_version(&tokens[5]).ok_or_else(|| err("provider_version", format!("'{}'", show(&tokens[5]))))?;
    if tokens[6].contains(&0) {
        return Err(err("ia_params", "embedded NUL".into()));
    }
    Ok(Some(ConfEntry {
        line: lineno,
        ia_name,
        api_type,
        api_major,
        api_minor,
        thread_safe,
        is_default,
        lib_path,
        provider_id,
        provider_major,
        provider_minor,
        ia_params: tokens[6].clone(),
        platform_params: tokens[7].clone(),
    }))
}

fn parse_u32(digits: &[u8]) -> Option<u32> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// `u<major>.<minor>` or `k<major>.<minor>`.
fn parse_api_version(t: &[u8]) -> Option<(ApiType, u32, u32)> {
    let (&first, rest) = t.split_first()?;
    let kind = match first {
        b'u' => ApiType::User,
        b'k' => ApiType::Kernel,
        _ => return None,
    };
    let dot = rest.iter().position(|&b| b == b'.')?;
    Some((kind, parse_u32(&rest[..dot])?, parse_u32(&rest[dot + 1..])?))
}

/// `<id>.<major>.<minor>`, e.g. `dapl.2.0`.
fn parse_provider_version(t: &[u8]) -> Option<(Vec<u8>, u32, u32)> {
    let first = t.iter().position(|&b| b == b'.')?;
    let rest = &t[first + 1..];
    let second = rest.iter().position(|&b| b == b'.')?;
    if first == 0 {
        return None;
    }
    Some((t[..first].to_vec(), parse_u32(&rest[..second])?, parse_u32(&rest[second + 1..])?))
}

/// Where the configuration comes from.
pub enum Source {
    /// `DAT_OVERRIDE`: used alone; when it cannot be read nothing is loaded. Never in a
    /// set-user-ID, set-group-ID or file-capability process (`util::env`).
    Override(String),
    /// The system file, `/etc/dat.conf`.
    System(&'static str),
}

pub const SYSTEM_CONF: &str = "/etc/dat.conf";

pub fn source() -> Source {
    match crate::util::env::var_os("DAT_OVERRIDE") {
        Some(p) => Source::Override(p.to_string_lossy().into_owned()),
        None => Source::System(SYSTEM_CONF),
    }
}

/// Reads and parses the configuration, logging what it skips. Returns the path read (for
/// messages) and the entries. A missing system file is normal (no dat.conf entries).
pub fn load() -> (String, Vec<ConfEntry>) {
    let (path, is_override) = match source() {
        Source::Override(p) => (p, true),
        Source::System(p) => (p.to_string(), false),
    };
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) => {
            if is_override {
                dbg_log!(DbgType::ERROR, "DAT_OVERRIDE, bad filename - {path}: {e}; no dat.conf entries loaded");
            } else {
                dbg_log!(DbgType::SR, "{path}: {e}; no dat.conf entries loaded");
            }
            return (path, Vec::new());
        }
    };
    let (entries, errors) = parse(&text);
    for e in &errors {
        dbg_log!(DbgType::ERROR, "{path}:{}: corrupt dat.conf entry field: {} ({}); line skipped", e.line, e.field, e.detail);
    }
    for e in entries.iter().filter(|e| !e.is_loadable()) {
        dbg_log!(DbgType::SR, "{path}:{}: entry '{}' ignored (not a user-DAT default entry)", e.line, String::from_utf8_lossy(&e.ia_name));
    }
    (path, entries)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn ordinary_line() {
        let (e, err) = parse(b"ofa-v2-ib0 u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 \"ib0 0\" \"\"\n");
        assert!(err.is_empty());
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].ia_name, b"ofa-v2-ib0");
        assert_eq!((e[0].api_major, e[0].api_minor), (2, 0));
        assert!(!e[0].thread_safe && e[0].is_default && e[0].is_loadable());
        assert_eq!(e[0].ia_params, b"ib0 0");
        assert_eq!(e[0].platform_params, b"");
        assert_eq!(e[0].provider_id, b"dapl");
    }

    #[test]
    fn comments_quotes_escapes() {
        let text = b"# a comment\n\n  x u2.0 threadsafe default \"/a b/\\\"q\\\".so\" p.1.2 \"\" \"\" # tail\n";
        let (e, err) = parse(text);
        assert!(err.is_empty(), "{err:?}");
        assert_eq!(e[0].lib_path, b"/a b/\"q\".so");
        assert!(e[0].thread_safe);
        assert_eq!(e[0].line, 3);
        let (e, _) = parse(b"x u2.0 threadsafe default a\\\"b p.1.2 \"\" \"\"\n");
        assert_eq!(e[0].lib_path, b"a\\\"b");
    }

    #[test]
    fn bad_lines_are_skipped_with_their_field() {
        let text = b"a x2.0 nonthreadsafe default l p.1.0 \"\" \"\"\n\
                     b u2.0 sometimes default l p.1.0 \"\" \"\"\n\
                     c u2.0 nonthreadsafe default l p.1.0 \"\"\n\
                     d u2.0 nonthreadsafe default l p.1.0 \"unterminated \"\"\n\
                     e u2.0 nonthreadsafe default l p.1.0 \"\" \"\"\n";
        let (e, err) = parse(text);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].ia_name, b"e");
        let fields: Vec<_> = err.iter().map(|e| (e.line, e.field)).collect();
        assert_eq!(fields[0], (1, "api_version"));
        assert_eq!(fields[1], (2, "threadsafety"));
        assert_eq!(fields[2], (3, "platform_params"));
        assert_eq!(fields[3].0, 4);
    }

    #[test]
    fn filters() {
        let (e, _) = parse(b"a k2.0 nonthreadsafe default l p.1.0 \"\" \"\"\nb u2.0 nonthreadsafe nondefault l p.1.0 \"\" \"\"\n");
        assert_eq!(e.len(), 2);
        assert!(e.iter().all(|e| !e.is_loadable()));
    }
}
