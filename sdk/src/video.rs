//! Synthetic videos for multimodal requests: Motion JPEG in an AVI file, sent as a base64
//! `data:` URL in OpenAI's `video_url` content parts (feature `media`).
//!
//! vLLM's `generate_synthetic_video` draws every frame's pixels in one numpy call and
//! writes them with OpenCV as MPEG-4 Part 2 (`mp4v`) in MP4. No MPEG-4 encoder in pure
//! Rust builds for wasm32-wasip2, so each frame here is a JPEG from [`crate::media::jpeg`]
//! and the frames go in the simplest container every server-side video loader reads
//! (OpenCV, PyAV/ffmpeg and decord all read MJPEG in AVI): a RIFF `AVI ` file with one
//! `MJPG` video stream at vLLM's 30 frames per second and an `idx1` index. The pixel draws
//! are vLLM's, so the same seed gives the same frames and the rest of the request set
//! stays vLLM's; only the bytes of the encoding differ (and the size on the wire: intra-only
//! JPEG of noise is about as large as MPEG-4 of noise, which has nothing to predict).

use crate::PluginError;
use crate::media::{JPEG_QUALITY, data_url};
use crate::rng::Generator;

/// vLLM's synthetic videos play at 30 frames per second.
pub const FPS: u32 = 30;

/// The media type of an AVI file.
pub const AVI_MIME: &str = "video/x-msvideo";

/// vLLM's `generate_synthetic_video(width, height, num_frames)`: one
/// `rng.integers(0, 256, (num_frames, height, width, 3), dtype=np.uint8)` draw, the frames
/// one after another (`height * width * 3` bytes each) in one buffer. One draw, not one
/// per frame: numpy takes the bytes four to a 32-bit word, so per-frame draws would differ
/// when a frame's byte count is not a multiple of four.
pub fn random_frames(rng: &mut Generator, width: u32, height: u32, frames: u32) -> Vec<u8> {
    let mut all = vec![0u8; width as usize * height as usize * 3 * frames as usize];
    rng.fill_bytes(&mut all);
    all
}

/// One frame as a JPEG, its bytes read as OpenCV reads a numpy frame: blue, green, red.
/// vLLM hands its RGB-drawn array to `cv2.VideoWriter`, which takes it as BGR, so a
/// server decoding vLLM's file sees these colours; encoding the same bytes as BGR gives
/// the server the same picture (up to the codec's loss).
pub fn jpeg_bgr(width: u32, height: u32, bgr: &[u8]) -> Result<Vec<u8>, PluginError> {
    let too_big = || {
        PluginError::InvalidConfig(format!(
            "a {width}x{height} video frame is larger than JPEG allows (65535 per side)"
        ))
    };
    let w = u16::try_from(width).map_err(|_| too_big())?;
    let h = u16::try_from(height).map_err(|_| too_big())?;
    let mut out = Vec::with_capacity(bgr.len() / 2);
    jpeg_encoder::Encoder::new(&mut out, JPEG_QUALITY)
        .encode(bgr, w, h, jpeg_encoder::ColorType::Bgr)
        .map_err(|e| {
            PluginError::Internal(format!(
                "encoding a {width}x{height} video frame as JPEG: {e}"
            ))
        })?;
    Ok(out)
}

fn chunk(out: &mut Vec<u8>, id: &[u8; 4], body: &[u8]) {
    out.extend_from_slice(id);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(body);
    if body.len() % 2 == 1 {
        out.push(0);
    }
}

fn list(out: &mut Vec<u8>, kind: &[u8; 4], body: &[u8]) {
    let mut inner = Vec::with_capacity(body.len() + 4);
    inner.extend_from_slice(kind);
    inner.extend_from_slice(body);
    chunk(out, b"LIST", &inner);
}

fn le32(out: &mut Vec<u8>, values: &[u32]) {
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// JPEG frames of `width` x `height` as a Motion JPEG AVI file at `fps` frames per second,
/// every frame a key frame in the `idx1` index.
pub fn mjpeg_avi(
    width: u32,
    height: u32,
    fps: u32,
    frames: &[Vec<u8>],
) -> Result<Vec<u8>, PluginError> {
    let n = u32::try_from(frames.len())
        .map_err(|_| PluginError::InvalidConfig("too many video frames".into()))?;
    let largest = frames.iter().map(Vec::len).max().unwrap_or(0) as u32 + 8;
    let fps = fps.max(1);

    let mut avih = Vec::with_capacity(56);
    le32(
        &mut avih,
        &[
            1_000_000 / fps,             // microseconds per frame
            largest.saturating_mul(fps), // max bytes per second
            0,                           // padding granularity
            0x10,                        // AVIF_HASINDEX
            n,                           // total frames
            0,                           // initial frames
            1,                           // streams
            largest,                     // suggested buffer size
            width,
            height,
            0,
            0,
            0,
            0,
        ],
    );
    let mut strh = Vec::with_capacity(56);
    strh.extend_from_slice(b"vids");
    strh.extend_from_slice(b"MJPG");
    le32(&mut strh, &[0, 0, 0, 1, fps, 0, n, largest, u32::MAX, 0]);
    // rcFrame: left, top, right, bottom as 16-bit values.
    for v in [0, 0, width as u16, height as u16] {
        strh.extend_from_slice(&v.to_le_bytes());
    }
    let mut strf = Vec::with_capacity(40);
    le32(&mut strf, &[40, width, height]);
    strf.extend_from_slice(&1u16.to_le_bytes()); // planes
    strf.extend_from_slice(&24u16.to_le_bytes()); // bits per pixel
    strf.extend_from_slice(b"MJPG");
    le32(
        &mut strf,
        &[width.saturating_mul(height).saturating_mul(3), 0, 0, 0, 0],
    );

    let mut strl = Vec::new();
    chunk(&mut strl, b"strh", &strh);
    chunk(&mut strl, b"strf", &strf);
    let mut hdrl = Vec::new();
    chunk(&mut hdrl, b"avih", &avih);
    list(&mut hdrl, b"strl", &strl);

    // One pass into one buffer (a 720p 16-frame video is ~10 MB): the sizes first.
    let movi_len: usize = 4 + frames
        .iter()
        .map(|f| 8 + f.len() + f.len() % 2)
        .sum::<usize>();
    let idx1_len = 16 * frames.len();
    let body_len = 4 + (8 + 4 + hdrl.len()) + (8 + movi_len) + (8 + idx1_len);
    let size = |len: usize| {
        u32::try_from(len).map_err(|_| PluginError::InvalidConfig("a video over 4 GiB".into()))
    };
    let mut out = Vec::with_capacity(8 + body_len);
    out.extend_from_slice(b"RIFF");
    le32(&mut out, &[size(body_len)?]);
    out.extend_from_slice(b"AVI ");
    list(&mut out, b"hdrl", &hdrl);
    out.extend_from_slice(b"LIST");
    le32(&mut out, &[size(movi_len)?]);
    let movi_at = out.len();
    out.extend_from_slice(b"movi");
    for frame in frames {
        chunk(&mut out, b"00dc", frame);
    }
    out.extend_from_slice(b"idx1");
    le32(&mut out, &[size(idx1_len)?]);
    // Offsets count from the `movi` list type, which comes 4 bytes before the first chunk.
    let mut offset = 4;
    for frame in frames {
        out.extend_from_slice(b"00dc");
        le32(&mut out, &[0x10, size(offset)?, size(frame.len())?]); // AVIIF_KEYFRAME
        offset += 8 + frame.len() + frame.len() % 2;
    }
    debug_assert_eq!(out.len(), 8 + body_len);
    debug_assert_eq!(&out[movi_at..movi_at + 4], b"movi");
    Ok(out)
}

/// vLLM's synthetic video item: the frames drawn as vLLM draws them ([`random_frames`]),
/// each a JPEG ([`jpeg_bgr`]), in a Motion JPEG AVI at 30 frames per second, as a
/// `data:video/x-msvideo;base64,` URL for a `video_url` content part.
pub fn random_video_data_url(
    rng: &mut Generator,
    width: u32,
    height: u32,
    frames: u32,
) -> Result<String, PluginError> {
    let pixels = random_frames(rng, width, height, frames);
    let frame_len = (width as usize * height as usize * 3).max(1);
    let jpegs = pixels
        .chunks_exact(frame_len)
        .map(|f| jpeg_bgr(width, height, f))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(data_url(AVI_MIME, &mjpeg_avi(width, height, FPS, &jpegs)?))
}

/// What [`avi_frames`] reads back from an AVI file.
#[derive(Debug)]
pub struct AviInfo<'a> {
    pub width: u32,
    pub height: u32,
    /// The frame count the main header declares.
    pub declared_frames: u32,
    /// The stream's compression fourcc (`MJPG`).
    pub handler: [u8; 4],
    /// The `00dc` chunks of the `movi` list, in order.
    pub frames: Vec<&'a [u8]>,
}

/// Reads an AVI file's header and video frames back, for checking what a dataset made.
pub fn avi_frames(bytes: &[u8]) -> Result<AviInfo<'_>, PluginError> {
    let bad = |why: &str| PluginError::InvalidInput(format!("not an AVI file: {why}"));
    if bytes.len() < 12 || &bytes[..4] != b"RIFF" || &bytes[8..12] != b"AVI " {
        return Err(bad("no RIFF AVI header"));
    }
    let u32_at = |b: &[u8], at: usize| -> Result<u32, PluginError> {
        b.get(at..at + 4)
            .map(|s| u32::from_le_bytes(s.try_into().unwrap()))
            .ok_or_else(|| bad("truncated"))
    };
    let riff_end = (8 + u32_at(bytes, 4)? as usize).min(bytes.len());
    let mut info = AviInfo {
        width: 0,
        height: 0,
        declared_frames: 0,
        handler: [0; 4],
        frames: Vec::new(),
    };
    // A stack of (position, end) over nested lists.
    let mut stack = vec![(12usize, riff_end)];
    while let Some((pos, end)) = stack.pop() {
        if pos + 8 > end {
            continue;
        }
        let id = &bytes[pos..pos + 4];
        let size = u32_at(bytes, pos + 4)? as usize;
        let body_end = pos + 8 + size;
        if body_end > end {
            return Err(bad("a chunk runs past its list"));
        }
        let next = body_end + size % 2;
        stack.push((next, end));
        let body = &bytes[pos + 8..body_end];
        match id {
            b"LIST" => {
                if body.len() < 4 {
                    return Err(bad("an empty LIST"));
                }
                stack.push((pos + 12, body_end));
            }
            b"avih" => {
                info.declared_frames = u32_at(body, 16)?;
                info.width = u32_at(body, 32)?;
                info.height = u32_at(body, 36)?;
            }
            b"strh" => {
                info.handler = body
                    .get(4..8)
                    .ok_or_else(|| bad("short strh"))?
                    .try_into()
                    .unwrap();
            }
            b"00dc" => info.frames.push(body),
            _ => {}
        }
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::{data_url_bytes, decoded_size, random_rgb};

    #[test]
    fn frames_are_one_numpy_draw() {
        // A 3x1 frame is 9 bytes, not a multiple of 4: per-frame draws would differ.
        let frames = random_frames(&mut Generator::new(7), 3, 1, 3);
        assert_eq!(frames.len(), 27);
        assert_eq!(frames, random_rgb(&mut Generator::new(7), 9, 1));
        let mut g = Generator::new(7);
        let first = random_rgb(&mut g, 3, 1);
        let second = random_rgb(&mut g, 3, 1);
        assert_eq!(frames[..9], first);
        assert_ne!(frames[9..18], second);
    }

    #[test]
    fn video_data_url_parses_back_to_frames_of_the_bucket_size() {
        let (width, height, n) = (24, 16, 5);
        let url = random_video_data_url(&mut Generator::new(0), width, height, n).unwrap();
        assert!(
            url.starts_with("data:video/x-msvideo;base64,UklGR"),
            "{}",
            &url[..40]
        );
        let (mime, bytes) = data_url_bytes(&url).unwrap();
        assert_eq!(mime, AVI_MIME);
        let info = avi_frames(&bytes).unwrap();
        assert_eq!((info.width, info.height), (width, height));
        assert_eq!(info.declared_frames, n);
        assert_eq!(&info.handler, b"MJPG");
        assert_eq!(info.frames.len(), n as usize);
        let drawn = random_frames(&mut Generator::new(0), width, height, n);
        for (frame, pixels) in info.frames.iter().zip(drawn.chunks_exact(24 * 16 * 3)) {
            assert_eq!(decoded_size(frame).unwrap(), (width, height));
            // Each frame is that draw's JPEG, so the seed fixes the file.
            assert_eq!(*frame, &jpeg_bgr(width, height, pixels).unwrap()[..]);
        }
        // The same seed, the same bytes; another seed, other frames.
        assert_eq!(
            random_video_data_url(&mut Generator::new(0), width, height, n).unwrap(),
            url
        );
        assert_ne!(
            random_video_data_url(&mut Generator::new(1), width, height, n).unwrap(),
            url
        );
    }

    #[test]
    fn bgr_frames_decode_to_swapped_colours() {
        // One flat blue-in-BGR frame (B=200, G=20, R=10) decodes as RGB (10, 20, 200).
        let bgr: Vec<u8> = [200u8, 20, 10].repeat(16 * 16);
        let jpeg = jpeg_bgr(16, 16, &bgr).unwrap();
        let img = image::load_from_memory(&jpeg).unwrap().to_rgb8();
        let p = img.get_pixel(8, 8).0;
        assert!(
            p[0].abs_diff(10) < 6 && p[1].abs_diff(20) < 6 && p[2].abs_diff(200) < 6,
            "{p:?}"
        );
    }

    #[test]
    fn odd_sized_frames_are_padded_and_bad_files_are_errors() {
        let frames = vec![vec![1u8, 2, 3], vec![4u8, 5]];
        let avi = mjpeg_avi(2, 2, FPS, &frames).unwrap();
        assert_eq!(avi.len() % 2, 0);
        let info = avi_frames(&avi).unwrap();
        assert_eq!(info.frames, [&[1u8, 2, 3][..], &[4u8, 5][..]]);
        assert!(avi_frames(b"RIFF\0\0\0\0WAVE").is_err());
        assert!(avi_frames(&avi[..avi.len() - 20]).is_err());
    }
}
