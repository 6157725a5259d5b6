//! Images for multimodal requests, as vLLM's datasets send them: base64 `data:` URLs in
//! OpenAI's `image_url` content parts (feature `media`).
//!
//! vLLM's `process_image` saves a PIL image as JPEG (PIL's default quality, 75) and sends
//! it as `data:image/jpeg;base64,...`; [`jpeg`] does the same with the `jpeg-encoder`
//! crate (pure Rust, so it builds for wasm32-wasip2; 4:2:0 chroma subsampling like PIL's
//! default, and four times as fast as the `image` crate's encoder on noise, which matters
//! at 1280x720 per item). The pixels are the same as vLLM's
//! for the same seed ([`random_rgb`]); the JPEG bytes are not byte-identical to PIL's
//! (another encoder), but the same for the same pixels on any machine.

use base64::Engine as _;

use crate::PluginError;
use crate::rng::Generator;

/// PIL's default JPEG quality, which vLLM's `image.save(..., format="JPEG")` uses.
pub const JPEG_QUALITY: u8 = 75;

/// Standard base64 with padding (Python's `base64.b64encode`).
pub fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// `data:<mime>;base64,<bytes>`.
pub fn data_url(mime: &str, bytes: &[u8]) -> String {
    let encoded = base64(bytes);
    let mut url = String::with_capacity(mime.len() + 13 + encoded.len());
    url.push_str("data:");
    url.push_str(mime);
    url.push_str(";base64,");
    url.push_str(&encoded);
    url
}

/// The bytes of a `data:...;base64,` URL, for checking what a dataset made.
pub fn data_url_bytes(url: &str) -> Result<(String, Vec<u8>), PluginError> {
    let bad = |why: &str| PluginError::InvalidInput(format!("not a base64 data URL: {why}"));
    let rest = url
        .strip_prefix("data:")
        .ok_or_else(|| bad("no data: scheme"))?;
    let (mime, payload) = rest
        .split_once(";base64,")
        .ok_or_else(|| bad("no ;base64, marker"))?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(payload)
        .map_err(|e| bad(&e.to_string()))?;
    Ok((mime.to_string(), bytes))
}

/// vLLM's `generate_synthetic_image(width, height)`: `height * width * 3` bytes of RGB
/// drawn with `rng.integers(0, 256, (height, width, 3), dtype=np.uint8)`, row by row.
pub fn random_rgb(rng: &mut Generator, width: u32, height: u32) -> Vec<u8> {
    let mut pixels = vec![0u8; width as usize * height as usize * 3];
    rng.fill_bytes(&mut pixels);
    pixels
}

/// RGB pixels (`width * height * 3` bytes, row by row) as a baseline JPEG of PIL's
/// default quality.
pub fn jpeg(width: u32, height: u32, rgb: &[u8]) -> Result<Vec<u8>, PluginError> {
    let too_big = || {
        PluginError::InvalidConfig(format!(
            "a {width}x{height} image is larger than JPEG allows (65535 per side)"
        ))
    };
    let w = u16::try_from(width).map_err(|_| too_big())?;
    let h = u16::try_from(height).map_err(|_| too_big())?;
    let mut out = Vec::with_capacity(rgb.len() / 2);
    jpeg_encoder::Encoder::new(&mut out, JPEG_QUALITY)
        .encode(rgb, w, h, jpeg_encoder::ColorType::Rgb)
        .map_err(|e| {
            PluginError::Internal(format!("encoding a {width}x{height} image as JPEG: {e}"))
        })?;
    Ok(out)
}

/// RGB pixels as vLLM's `process_image` sends them: a JPEG `data:` URL.
pub fn jpeg_data_url(width: u32, height: u32, rgb: &[u8]) -> Result<String, PluginError> {
    Ok(data_url("image/jpeg", &jpeg(width, height, rgb)?))
}

/// The media type of an image file from its first bytes (JPEG, PNG, GIF, WebP, BMP,
/// TIFF), for sending a local file as a data URL as it is.
pub fn image_mime(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else if bytes.starts_with(b"BM") {
        Some("image/bmp")
    } else if bytes.starts_with(b"II*\0") || bytes.starts_with(b"MM\0*") {
        Some("image/tiff")
    } else {
        None
    }
}

/// The width and height of an encoded image (JPEG), decoding it whole so that a corrupt
/// file is an error here rather than on the server.
pub fn decoded_size(bytes: &[u8]) -> Result<(u32, u32), PluginError> {
    let img = image::load_from_memory(bytes)
        .map_err(|e| PluginError::InvalidInput(format!("not a decodable image: {e}")))?;
    Ok((img.width(), img.height()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_images_are_numpy_draws_and_decode_at_their_size() {
        let mut rng = Generator::new(3);
        let pixels = random_rgb(&mut rng, 5, 2);
        // np.random.default_rng(3).integers(0, 256, (2, 5, 3), dtype=np.uint8).ravel()[:6]
        assert_eq!(pixels.len(), 30);
        let mut again = Generator::new(3);
        let mut want = [0u8; 30];
        again.fill_bytes(&mut want);
        assert_eq!(pixels, want);

        let url = jpeg_data_url(5, 2, &pixels).unwrap();
        assert!(url.starts_with("data:image/jpeg;base64,/9j/"), "{url}");
        let (mime, bytes) = data_url_bytes(&url).unwrap();
        assert_eq!(mime, "image/jpeg");
        assert_eq!(decoded_size(&bytes).unwrap(), (5, 2));
        // The same pixels, the same bytes.
        assert_eq!(jpeg_data_url(5, 2, &pixels).unwrap(), url);
    }

    #[test]
    fn base64_is_pythons() {
        // base64.b64encode(b"bench!?") == b"YmVuY2ghPw=="
        assert_eq!(base64(b"bench!?"), "YmVuY2ghPw==");
        assert_eq!(data_url("text/plain", b""), "data:text/plain;base64,");
        assert!(data_url_bytes("data:image/png,xyz").is_err());
        assert!(decoded_size(b"not an image").is_err());
        assert_eq!(image_mime(b"\x89PNG\r\n\x1a\n...."), Some("image/png"));
        assert_eq!(
            image_mime(&jpeg(1, 1, &[0, 0, 0]).unwrap()),
            Some("image/jpeg")
        );
        assert_eq!(image_mime(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(image_mime(b"hello"), None);
    }
}
