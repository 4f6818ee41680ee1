//! The INI text of a `delayer.conf`, parsed, with the line of every key and
//! section kept, so that every error ([`ConfError`]) can point at the line to
//! fix. What the keys mean is for the other parts of [`crate::conf`].
//! A value may also come from the environment ([`super::env`] sets it
//! here, with its [`Source`]); errors about it then name the variable.

use ini::{Ini, ParseOption};
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// A problem with a configuration file, located as precisely as known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfError {
    /// The file, or the environment variable the value came from
    /// (`DELAYER_TIMER_INTERVAL`).
    pub file: PathBuf,
    /// The section, when the problem is in one.
    pub section: Option<String>,
    /// The key, when the problem is with one.
    pub key: Option<String>,
    /// The line (from 1), when known.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        write!(f, ":")?;
        match (&self.section, &self.key) {
            (Some(s), Some(k)) => write!(f, " [{s}] {k}:")?,
            (Some(s), None) => write!(f, " [{s}]:")?,
            (None, Some(k)) => write!(f, " {k}:")?,
            (None, None) => {}
        }
        write!(f, " {}", self.message)
    }
}

impl std::error::Error for ConfError {}

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The configuration file.
    File,
    /// The environment variable named.
    Env(String),
    /// The file named by the environment variable (`DELAYER_..._FILE`, the
    /// name held here).
    EnvFile(String, PathBuf),
}

/// A parsed INI file that remembers where each key was written, with the
/// environment's values laid over it.
#[derive(Debug)]
pub struct ConfFile {
    path: PathBuf,
    ini: Ini,
    lines: KeyLines,
    section_lines: HashMap<String, usize>,
    /// The keys set from the environment, by (section, key).
    from_env: HashMap<(String, String), Source>,
    /// False for the empty stand-in used when there is no file.
    exists: bool,
}

impl ConfFile {
    /// Reads and parses `path`.
    pub fn load(path: impl AsRef<Path>) -> Result<ConfFile, ConfError> {
        let path = path.as_ref().to_path_buf();
        let text = std::fs::read_to_string(&path).map_err(|e| ConfError {
            file: path.clone(),
            section: None,
            key: None,
            line: None,
            message: format!("cannot read the file: {e}"),
        })?;
        Self::parse(path, &text)
    }

    /// Parses `text` as if read from `path`.
    pub fn parse(path: PathBuf, text: &str) -> Result<ConfFile, ConfError> {
        // No escapes: Windows-style paths in log settings must stay as written.
        let opt = ParseOption { enabled_escape: false, ..ParseOption::default() };
        let ini = Ini::load_from_str_opt(&blank_comment_values(text), opt).map_err(|e| ConfError {
            file: path.clone(),
            section: None,
            key: None,
            line: Some(e.line), // rust-ini counts from 1
            message: format!("not valid INI: {}", e.msg),
        })?;
        let (lines, section_lines) = locate(text);
        Ok(ConfFile { path, ini, lines, section_lines, from_env: HashMap::new(), exists: true })
    }

    /// No file at all: every value is a default until the environment
    /// sets it. `name` stands for the file in messages.
    pub fn none(name: PathBuf) -> ConfFile {
        let mut file = Self::parse(name, "").unwrap_or_else(|_| unreachable!("empty text is valid INI"));
        file.exists = false;
        file
    }

    /// Whether there is a file behind this (see [`ConfFile::none`]).
    pub fn exists(&self) -> bool {
        self.exists
    }

    /// Sets `key` in `[section]` to `value`, taken from `source` (the
    /// environment), over what the file says.
    pub fn set(&mut self, section: &str, key: &str, value: String, source: Source) {
        self.ini.with_section(Some(section)).set(key, value);
        self.from_env.insert((section.to_string(), key.to_string()), source);
    }

    /// Forgets what the file says for `key` in `[section]` (the environment
    /// replaced it by another key: see [`super::env`]).
    pub fn unset(&mut self, section: &str, key: &str) {
        self.ini.delete_from(Some(section), key);
    }

    /// Where the value of `key` in `[section]` came from (`None`: unset,
    /// the default applies).
    pub fn source(&self, section: &str, key: &str) -> Option<Source> {
        match self.from_env.get(&(section.to_string(), key.to_string())) {
            Some(source) => Some(source.clone()),
            None => self.get(section, key).map(|_| Source::File),
        }
    }

    /// A path-valued key as a path: a relative one is relative to the
    /// file's directory when written in the file (so a daemon, which runs
    /// in `/`, finds it where the operator meant), to the working directory
    /// when set in the environment; `None` when absent or empty.
    pub fn path_value(&self, section: &str, key: &str) -> Option<PathBuf> {
        let value = self.string(section, key)?;
        match self.source(section, key) {
            Some(Source::File) => {
                let base = self.path.parent().map(Path::to_path_buf).unwrap_or_default();
                Some(base.join(value))
            }
            _ => Some(std::path::absolute(&value).unwrap_or_else(|_| PathBuf::from(value))),
        }
    }

    /// The file this was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every section's name, in file order (an empty one included).
    pub fn sections(&self) -> impl Iterator<Item = &str> {
        self.ini.sections().flatten()
    }

    /// Every section (None for keys before the first header) and its keys.
    pub fn entries(&self) -> impl Iterator<Item = (Option<&str>, &str)> {
        self.ini.iter().flat_map(|(section, props)| props.iter().map(move |(key, _)| (section, key)))
    }

    /// The raw value of `key` in `[section]`, if written.
    pub fn get(&self, section: &str, key: &str) -> Option<&str> {
        self.ini.get_from(Some(section), key)
    }

    /// The line `key` was written on in `[section]` (1-based).
    pub fn line_of(&self, section: Option<&str>, key: &str) -> Option<usize> {
        self.lines.get(&(section.map(str::to_string), key.to_string())).copied()
    }

    /// The line the `[section]` header is on.
    pub fn section_line(&self, section: &str) -> Option<usize> {
        self.section_lines.get(section).copied()
    }

    /// An error about `key` in `[section]`, located in the file.
    pub fn error(&self, section: Option<&str>, key: Option<&str>, message: impl Into<String>) -> ConfError {
        let env = section.zip(key).and_then(|(s, k)| self.from_env.get(&(s.to_string(), k.to_string())));
        if let Some(Source::Env(var) | Source::EnvFile(var, _)) = env {
            return ConfError {
                file: PathBuf::from(var),
                section: section.map(str::to_string),
                key: key.map(str::to_string),
                line: None,
                message: message.into(),
            };
        }
        let line = match key {
            Some(k) => self.line_of(section, k),
            None => section.and_then(|s| self.section_line(s)),
        };
        ConfError {
            file: self.path.clone(),
            section: section.map(str::to_string),
            key: key.map(str::to_string),
            line,
            message: message.into(),
        }
    }

    /// `key` parsed as a `T`, `None` when absent or empty; `expected` says
    /// what a good value looks like, for the error.
    pub fn parse_value<T: FromStr>(&self, section: &str, key: &str, expected: &str) -> Result<Option<T>, ConfError> {
        match self.get(section, key) {
            None | Some("") => Ok(None),
            Some(raw) => raw
                .parse()
                .map(Some)
                .map_err(|_| self.error(Some(section), Some(key), format!("{raw:?} is not {expected}"))),
        }
    }

    /// `key` as a string, `None` when absent or empty.
    pub fn string(&self, section: &str, key: &str) -> Option<String> {
        self.get(section, key).filter(|v| !v.is_empty()).map(str::to_string)
    }

    /// A yes/no key (`yes`, `true`, `1`; `no`, `false`, `0`), no when absent.
    pub fn yes_no(&self, section: &str, key: &str) -> Result<bool, ConfError> {
        match self.get(section, key).unwrap_or("") {
            "" | "no" | "false" | "0" => Ok(false),
            "yes" | "true" | "1" => Ok(true),
            other => Err(self.error(Some(section), Some(key), format!("{other:?} is not yes or no"))),
        }
    }

    /// An integer key within `min..=max` (`unit` names what it counts, for
    /// the message), `None` when absent or empty.
    pub fn ranged(&self, section: &str, key: &str, min: u64, max: u64, unit: &str) -> Result<Option<u64>, ConfError> {
        let expected = format!("a whole number of {unit} from {min} to {max}");
        match self.parse_value::<u64>(section, key, &expected)? {
            Some(v) if !(min..=max).contains(&v) => {
                Err(self.error(Some(section), Some(key), format!("{v} is out of range: expected {expected}")))
            }
            other => Ok(other),
        }
    }
}

/// Empties values that are only a comment (`password =   ; none`): Delayer
/// 1.x's sample file writes empty values that way, and rust-ini would read the
/// comment as the value. Quote a value that really starts with `;` or `#`.
fn blank_comment_values(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let t = line.trim_start();
        let is_entry = !(t.starts_with(';') || t.starts_with('#') || t.starts_with('['));
        match line.find('=').filter(|_| is_entry) {
            Some(eq) if line[eq + 1..].trim_start().starts_with([';', '#']) => {
                out.push_str(&line[..=eq]);
                if line.ends_with('\n') {
                    out.push('\n');
                }
            }
            _ => out.push_str(line),
        }
    }
    out
}

/// The line of each key, by (section, key).
type KeyLines = HashMap<(Option<String>, String), usize>;

/// Finds the line of every `key =` and `[section]` in the text.
fn locate(text: &str) -> (KeyLines, HashMap<String, usize>) {
    let mut keys = HashMap::new();
    let mut sections = HashMap::new();
    let mut section: Option<String> = None;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.starts_with(';') || line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let name = rest.split(']').next().unwrap_or("").trim().to_string();
            sections.entry(name.clone()).or_insert(n + 1);
            section = Some(name);
        } else if let Some(pos) = line.find(['=', ':']) {
            let key = line[..pos].trim().to_string();
            keys.entry((section.clone(), key)).or_insert(n + 1);
        }
    }
    (keys, sections)
}
