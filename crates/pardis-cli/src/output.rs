//! Shared presentation helpers: tables, byte units, progress bars.
#![cfg_attr(not(feature = "full"), allow(dead_code))]

use std::io::Read;
use std::path::Path;

use anyhow::Context;
use comfy_table::{presets::UTF8_FULL_CONDENSED, ContentArrangement, Table};

/// Largest JSON document the CLI reads (a computation graph, a device mesh), bytes.
pub(crate) const MAX_JSON_BYTES: u64 = 64 << 20;

/// Reads `path` as text of at most `max` bytes; a longer input (e.g. `/dev/zero`) is an error
/// naming the limit, read no further.
pub(crate) fn read_text_capped(path: &Path, max: u64) -> anyhow::Result<String> {
    let file = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut text = String::new();
    file.take(max + 1)
        .read_to_string(&mut text)
        .with_context(|| format!("reading {}", path.display()))?;
    if text.len() as u64 > max {
        anyhow::bail!(
            "reading {}: longer than {} (the limit for this input)",
            path.display(),
            bytes(max)
        );
    }
    Ok(text)
}

/// The width tables wrap to when standard output is not a terminal (a pipe, a file, a log).
pub(crate) const TABLE_WIDTH_WITHOUT_TERMINAL: u16 = 120;

/// A table with the house style: condensed UTF-8 borders, wrapped to the terminal, or to
/// [`TABLE_WIDTH_WITHOUT_TERMINAL`] columns when there is none.
pub(crate) fn table<I, S>(header: I) -> Table
where
    I: IntoIterator<Item = S>,
    S: Into<comfy_table::Cell>,
{
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header);
    if t.width().is_none() {
        t.set_width(TABLE_WIDTH_WITHOUT_TERMINAL);
    }
    t
}

/// The width prose lines wrap to: the terminal's, but at most [`TABLE_WIDTH_WITHOUT_TERMINAL`]
/// columns (also when there is no terminal).
pub(crate) fn prose_width() -> usize {
    // comfy-table reports the terminal's width when standard output is one, else nothing.
    let terminal = Table::new().width();
    usize::from(terminal.map_or(TABLE_WIDTH_WITHOUT_TERMINAL, |w| {
        w.min(TABLE_WIDTH_WITHOUT_TERMINAL)
    }))
}

/// `text` for printing as a paragraph: wrapped at [`prose_width`] (see [`wrap`]).
pub(crate) fn paragraph(text: &str) -> String {
    wrap(text, prose_width())
}

/// `text` wrapped at spaces to lines of at most `width` characters, the lines after the first
/// of each paragraph (line of `text`) indented by two spaces; a command in backticks is kept
/// on one line, and a word (or command) longer than a line keeps a line of its own.
pub(crate) fn wrap(text: &str, width: usize) -> String {
    const INDENT: &str = "  ";
    let mut out = String::with_capacity(text.len() + 16);
    for (i, source) in text.lines().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let mut used = 0;
        for word in unbreakable_words(source) {
            let len = word.chars().count();
            if used > 0 && used + 1 + len > width {
                out.push('\n');
                out.push_str(INDENT);
                used = INDENT.len();
            } else if used > 0 {
                out.push(' ');
                used += 1;
            }
            out.push_str(&word);
            used += len;
        }
    }
    out
}

/// The words of `line`, those between a pair of backticks joined into one.
fn unbreakable_words(line: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let mut open = false;
    for word in line.split_whitespace() {
        match words.last_mut() {
            Some(last) if open => {
                last.push(' ');
                last.push_str(word);
            }
            _ => words.push(word.to_string()),
        }
        if word.matches('`').count() % 2 == 1 {
            open = !open;
        }
    }
    words
}

/// Formats a byte count with binary units (KiB, MiB, GiB, TiB), two decimals.
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

/// Parses a byte size such as `80GiB`, `80G`, `512MiB`, `1024` (binary units).
pub(crate) fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size (e.g. 80GiB, 512MiB)"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" | "kb" => 1 << 10,
        "m" | "mib" | "mb" => 1 << 20,
        "g" | "gib" | "gb" => 1 << 30,
        "t" | "tib" | "tb" => 1 << 40,
        other => return Err(format!("unknown size unit `{other}` in `{s}`")),
    };
    Ok((value * mult as f64).round() as u64)
}

/// A spinner/bar on stderr with the house style; hidden when stderr is not a terminal.
#[allow(dead_code)]
pub(crate) fn progress(len: u64, msg: &str) -> indicatif::ProgressBar {
    let pb = indicatif::ProgressBar::new(len);
    pb.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} {msg} [{bar:30}] {pos}/{len} ({elapsed})",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    pb.set_message(msg.to_string());
    pb
}

/// Refuses to go on when `path` (a file the command is about to write) exists, unless
/// `force`: a command never replaces a file the user did not ask it to replace. Called before
/// any long work, so nothing is computed for nothing.
pub(crate) fn refuse_existing(path: &Path, force: bool) -> anyhow::Result<()> {
    if !force && (path.exists() || path.is_symlink()) {
        anyhow::bail!(
            "{} exists; pass --force to replace it, or choose another path",
            path.display()
        );
    }
    Ok(())
}

/// An error and its causes on one line, `outer: cause: root`, leaving out a cause whose text
/// the line already ends with (many error types print their source at the end of their own
/// message, and `{:#}` would repeat it).
pub(crate) fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.ends_with(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prose wraps at spaces to the width, continuation lines indented, words kept whole.
    #[test]
    fn wrap_keeps_words_and_the_width() {
        let text = "note: torchtitan tp1 pp1 dp8 fsdp b16 needs less memory (67.73 GiB) at 0.1 % \
                    more time than the budget; `--time-slack 0.0011` searches pardis's plans";
        for width in [30, 40, 80, 120] {
            let out = super::wrap(text, width);
            assert!(
                out.lines().all(|l| l.chars().count() <= width),
                "{width}:\n{out}"
            );
            assert!(out.lines().skip(1).all(|l| l.starts_with("  ")), "{out}");
            let words: Vec<&str> = out.split_whitespace().collect();
            assert_eq!(words, text.split_whitespace().collect::<Vec<_>>());
        }
        assert_eq!(super::wrap(text, 500), text, "a short line stays as it is");
        let long = "a-word-longer-than-the-line and more";
        assert_eq!(
            super::wrap(long, 9),
            "a-word-longer-than-the-line\n  and\n  more"
        );
        assert_eq!(super::wrap("one\ntwo three", 7), "one\ntwo\n  three");
        assert_eq!(
            super::wrap("try `--time-slack 0.01` here", 12),
            "try\n  `--time-slack 0.01`\n  here",
            "a command in backticks stays whole"
        );
    }

    /// Without a terminal (as under `cargo test`, or piped) a table with long cells wraps
    /// them to fit [`TABLE_WIDTH_WITHOUT_TERMINAL`] columns.
    #[test]
    fn tables_fit_the_width_without_a_terminal() {
        let mut t = table(["plan", "configuration", "memory"]);
        let long =
            "pp8 (10×8) gpu0:4×gpu1:2 m64 1F1B-interleaved×2 rc-pointwise(7/8 stages) ".repeat(3);
        t.add_row(vec![
            "pardis: leanest in budget".to_string(),
            long,
            "38.70 GiB".into(),
        ]);
        let text = t.to_string();
        assert!(text.lines().count() > 5, "the long cell wraps:\n{text}");
        for line in text.lines() {
            let width = line.chars().count();
            assert!(
                width <= usize::from(TABLE_WIDTH_WITHOUT_TERMINAL),
                "{width}: {line}"
            );
        }
    }

    #[test]
    fn bytes_roundtrip() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(80 << 30), "80.00 GiB");
        assert_eq!(parse_bytes("80GiB"), Ok(80 << 30));
        assert_eq!(parse_bytes("1.5 KiB"), Ok(1536));
        assert!(parse_bytes("eighty").is_err());
        assert!(parse_bytes("3 parsecs").is_err());
    }

    #[test]
    fn error_line_keeps_each_cause_once() {
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, "bad utf-8");
        let e = anyhow::Error::new(io).context("i/o error on f.txt: bad utf-8");
        assert_eq!(super::error_line(&e), "i/o error on f.txt: bad utf-8");
        let e = anyhow::anyhow!("root cause")
            .context("middle")
            .context("outer");
        assert_eq!(super::error_line(&e), "outer: middle: root cause");
    }

    #[test]
    fn refuse_existing_needs_force() {
        let dir = std::env::temp_dir().join(format!("pardis-refuse-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("x.png");
        assert!(super::refuse_existing(&f, false).is_ok());
        std::fs::write(&f, b"mine").unwrap();
        let e = super::refuse_existing(&f, false).unwrap_err().to_string();
        assert!(e.contains("x.png") && e.contains("--force"), "{e}");
        assert!(super::refuse_existing(&f, true).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
