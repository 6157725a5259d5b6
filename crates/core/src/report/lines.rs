//! The console's line formats, as vLLM's `print` calls write them (`{:<40} {:<10}` columns,
//! headers centred in 50 characters).

use std::fmt::Write as _;

/// `"{:<40} {:<10}".format(label, value)` for integers and strings.
pub(super) fn line(out: &mut String, label: &str, value: impl std::fmt::Display) {
    let _ = writeln!(out, "{label:<40} {value:<10}");
}

/// `"{:<40} {:<10.2f}".format(label, value)`.
pub(super) fn line_f(out: &mut String, label: &str, value: f64) {
    let _ = writeln!(out, "{label:<40} {value:<10.2}");
}

/// `"{s:{c}^{n}}".format(s=title, n=50, c=fill)`; like Python, odd padding goes right.
pub(super) fn header(out: &mut String, title: &str, fill: char) {
    let _ = writeln!(out, "{}", centered(title, fill));
}

pub(super) fn centered(title: &str, fill: char) -> String {
    let pad = 50usize.saturating_sub(title.chars().count());
    let left = pad / 2;
    let fill_str = |n: usize| fill.to_string().repeat(n);
    format!("{}{title}{}", fill_str(left), fill_str(pad - left))
}
