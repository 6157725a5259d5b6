//! vLLM's `process_image` / `process_video` for the values Hugging Face datasets hold:
//! URLs and paths pass through (a path becomes a `file://` URL), and an image stored in
//! the file (`{"bytes": ..., "path": ...}`, the `Image` feature in Parquet) is sent as a
//! base64 data URL.
//!
//! vLLM decodes stored images with PIL and re-encodes them as JPEG; this plugin sends the
//! stored bytes as they are, with their own media type (JPEG, PNG, GIF, WebP, BMP or TIFF), which a
//! server decodes the same way, without a lossy re-encoding in between.

use bench_sdk::ContentPart;
use bench_sdk::media::{data_url, image_mime};
use bench_sdk::table::Value;

/// An image cell as vLLM's `process_image` reads it.
pub fn image(value: &Value) -> Result<ContentPart, String> {
    if let Some(bytes) = value.get("bytes").filter(|v| !v.is_null()) {
        let bytes = bytes
            .as_bytes()
            .ok_or_else(|| format!("image \"bytes\" is {}, not binary data", bytes.kind()))?;
        let mime =
            image_mime(bytes).ok_or("image bytes are not JPEG, PNG, GIF, WebP, BMP or TIFF")?;
        return Ok(ContentPart::ImageUrl(data_url(mime, bytes)));
    }
    if let Some(path) = value.get("path").and_then(Value::as_str) {
        return Ok(ContentPart::ImageUrl(url(path, true)));
    }
    match value.as_str() {
        Some(s) => Ok(ContentPart::ImageUrl(url(s, true))),
        None => Err(format!(
            "an image must be a URL, a path or {{\"bytes\": ...}}, not {}",
            value.kind()
        )),
    }
}

/// A video URL or path as vLLM's `process_video` reads it.
pub fn video(path: String) -> ContentPart {
    ContentPart::VideoUrl(url(&path, false))
}

/// URLs pass through (`data:image/` too, for images); anything else is a local path.
fn url(path: &str, image: bool) -> String {
    let schemes: &[&str] = if image {
        &["http://", "https://", "file://", "data:image/"]
    } else {
        &["http://", "https://", "file://"]
    };
    if schemes.iter().any(|s| path.starts_with(s)) {
        path.to_string()
    } else {
        format!("file://{path}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dbg(p: ContentPart) -> String {
        format!("{p:?}")
    }

    #[test]
    fn images_become_urls() {
        let png = b"\x89PNG\r\n\x1a\nrest".to_vec();
        let cell = Value::Map(vec![
            ("bytes".into(), Value::Bytes(png)),
            ("path".into(), Value::Null),
        ]);
        assert_eq!(
            dbg(image(&cell).unwrap()),
            dbg(ContentPart::ImageUrl(
                "data:image/png;base64,iVBORw0KGgpyZXN0".into()
            ))
        );
        assert_eq!(
            dbg(image(&Value::Str("pics/a.jpg".into())).unwrap()),
            dbg(ContentPart::ImageUrl("file://pics/a.jpg".into()))
        );
        assert_eq!(
            dbg(image(&Value::Str("https://x/a.jpg".into())).unwrap()),
            dbg(ContentPart::ImageUrl("https://x/a.jpg".into()))
        );
        let bad = Value::Map(vec![("bytes".into(), Value::Bytes(b"nope".to_vec()))]);
        assert!(image(&bad).unwrap_err().contains("not JPEG"));
        assert_eq!(
            dbg(video("/d/v.mp4".into())),
            dbg(ContentPart::VideoUrl("file:///d/v.mp4".into()))
        );
    }
}
