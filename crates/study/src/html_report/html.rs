//! Text into HTML: everything a result file says (labels, model names, paths, keys) is
//! untrusted input, so it reaches the page only through [`escape`].

use std::fmt::Write;

/// `text` as HTML text or a quoted attribute value: `&`, `<`, `>`, `"` and `'` as
/// entities, so no result file can open a tag, close an attribute or start a script.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Appends `<tag attrs>escaped text</tag>`; `attrs` is markup the caller wrote (never
/// result text).
pub fn element(out: &mut String, tag: &str, attrs: &str, text: &str) {
    let space = if attrs.is_empty() { "" } else { " " };
    let _ = write!(out, "<{tag}{space}{attrs}>{}</{tag}>", escape(text));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_text_stays_text() {
        assert_eq!(
            escape(r#"<script>alert("x" + 'y')</script> & co"#),
            "&lt;script&gt;alert(&quot;x&quot; + &#39;y&#39;)&lt;/script&gt; &amp; co"
        );
        let mut out = String::new();
        element(&mut out, "td", r#"class="n""#, "a<b");
        assert_eq!(out, r#"<td class="n">a&lt;b</td>"#);
    }
}
