//! Audio clips for speech requests (feature `audio`), as vLLM's audio datasets handle them:
//! decoded the way soundfile (libsndfile) decodes them, measured in seconds (what
//! `--asr-min/max-audio-len-sec` filter on) and re-encoded as 16-bit PCM WAV (what
//! `soundfile.write(buf, y, sr, format="WAV")` writes: vLLM uploads every decoded clip so,
//! and sends it so in `input_audio` chat parts).
//!
//! Decoding is [`symphonia`] (pure Rust, so it builds for wasm32-wasip2) with only the
//! encodings libsndfile reads that datasets use: WAV (integer PCM of 8 to 32 bits, 32/64-bit
//! float), FLAC, MP3 and Ogg/Vorbis. Samples are normalised as libsndfile normalises them
//! (an n-bit integer over 2^(n-1)), and written back as libsndfile writes doubles
//! (times 0x7FFF, rounded half to even), so a 16-bit clip comes out as vLLM's upload,
//! byte for byte. MP3 is decoded gapless (the encoder's delay and padding from the
//! LAME/Xing header trimmed), as libsndfile's mpg123 decoder does, so the frame count and
//! thus the length in seconds are soundfile's.
//!
//! [`seconds`] reads a WAV or FLAC clip's length from its header without decoding it
//! (the same number: soundfile also takes it from there).

use std::io::Cursor;

use base64::Engine as _;
use symphonia::core::audio::SampleBuffer;
use symphonia::core::codecs::{CODEC_TYPE_NULL, DecoderOptions};
use symphonia::core::errors::Error;
use symphonia::core::formats::FormatOptions;
use symphonia::core::io::{MediaSourceStream, MediaSourceStreamOptions};
use symphonia::core::meta::MetadataOptions;
use symphonia::core::probe::Hint;

/// A decoded clip: interleaved samples in [-1, 1], as `soundfile.read` returns them.
#[derive(Clone, Debug, PartialEq)]
pub struct Audio {
    /// Samples per second of each channel.
    pub rate: u32,
    /// Channels (interleaved in `samples`).
    pub channels: usize,
    pub samples: Vec<f64>,
}

impl Audio {
    /// Frames (samples per channel): soundfile's `len(y)`.
    pub fn frames(&self) -> usize {
        self.samples.len() / self.channels.max(1)
    }

    /// The length in seconds: frames over the rate (librosa's `get_duration(y, sr)` for a
    /// mono clip; soundfile's `info(...).duration`).
    pub fn seconds(&self) -> f64 {
        self.frames() as f64 / f64::from(self.rate)
    }

    /// The clip as a 16-bit PCM WAV file (soundfile's default subtype for WAV).
    pub fn to_wav(&self) -> Vec<u8> {
        pcm16_wav(&self.samples, self.channels as u16, self.rate)
    }

    /// The channels averaged into one (what Hugging Face's `Audio(mono=True)` does).
    pub fn to_mono(&self) -> Audio {
        if self.channels <= 1 {
            return self.clone();
        }
        let n = self.channels as f64;
        Audio {
            rate: self.rate,
            channels: 1,
            samples: self
                .samples
                .chunks_exact(self.channels)
                .map(|frame| frame.iter().sum::<f64>() / n)
                .collect(),
        }
    }
}

/// An encoding bench can decode, told by the file's first bytes (not by its name, which a
/// dataset may get wrong).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Wav,
    Flac,
    Mp3,
    Ogg,
}

impl Format {
    /// The format of `bytes`, or `None` for anything else.
    pub fn sniff(bytes: &[u8]) -> Option<Format> {
        if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WAVE" {
            Some(Format::Wav)
        } else if bytes.starts_with(b"fLaC") {
            Some(Format::Flac)
        } else if bytes.starts_with(b"OggS") {
            Some(Format::Ogg)
        } else if bytes.starts_with(b"ID3")
            || (bytes.len() >= 2 && bytes[0] == 0xFF && bytes[1] & 0xE0 == 0xE0)
        {
            Some(Format::Mp3)
        } else {
            None
        }
    }

    /// The media type a file of this format is sent with.
    pub fn mime(self) -> &'static str {
        match self {
            Format::Wav => "audio/wav",
            Format::Flac => "audio/flac",
            Format::Mp3 => "audio/mpeg",
            Format::Ogg => "audio/ogg",
        }
    }

    fn extension(self) -> &'static str {
        match self {
            Format::Wav => "wav",
            Format::Flac => "flac",
            Format::Mp3 => "mp3",
            Format::Ogg => "ogg",
        }
    }
}

const UNKNOWN: &str = "not an audio encoding bench decodes (WAV, FLAC, MP3 or Ogg/Vorbis)";

/// Decodes a whole clip (soundfile's `read`).
pub fn decode(bytes: &[u8]) -> Result<Audio, String> {
    let format = Format::sniff(bytes).ok_or(UNKNOWN)?;
    let mut hint = Hint::new();
    hint.with_extension(format.extension());
    let source = MediaSourceStream::new(
        Box::new(Cursor::new(bytes.to_vec())),
        MediaSourceStreamOptions::default(),
    );
    let options = FormatOptions {
        enable_gapless: true,
        ..FormatOptions::default()
    };
    let probed = symphonia::default::get_probe()
        .format(&hint, source, &options, &MetadataOptions::default())
        .map_err(|e| format!("cannot read the {} clip: {e}", format.extension()))?;
    let mut reader = probed.format;
    let track = reader
        .tracks()
        .iter()
        .find(|t| t.codec_params.codec != CODEC_TYPE_NULL)
        .ok_or("the clip has no audio track")?;
    let track_id = track.id;
    let mut rate = track.codec_params.sample_rate;
    let mut channels = track.codec_params.channels.map(|c| c.count());
    let mut decoder = symphonia::default::get_codecs()
        .make(&track.codec_params, &DecoderOptions::default())
        .map_err(|e| format!("cannot decode the {} clip: {e}", format.extension()))?;
    let mut samples = Vec::new();
    let mut buffer: Option<SampleBuffer<f64>> = None;
    loop {
        let packet = match reader.next_packet() {
            Ok(p) => p,
            Err(Error::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(format!("cannot read the {} clip: {e}", format.extension())),
        };
        if packet.track_id() != track_id {
            continue;
        }
        let decoded = match decoder.decode(&packet) {
            Ok(d) => d,
            Err(e) => {
                return Err(format!(
                    "cannot decode the {} clip: {e}",
                    format.extension()
                ));
            }
        };
        let spec = *decoded.spec();
        rate.get_or_insert(spec.rate);
        channels.get_or_insert(spec.channels.count());
        let capacity = decoded.capacity() as u64;
        let buf = match &mut buffer {
            Some(b) if b.capacity() >= decoded.capacity() * spec.channels.count() => b,
            _ => buffer.insert(SampleBuffer::new(capacity, spec)),
        };
        buf.copy_interleaved_ref(decoded);
        samples.extend_from_slice(buf.samples());
    }
    let rate = rate
        .filter(|&r| r > 0)
        .ok_or("the clip gives no sample rate")?;
    let channels = channels.filter(|&c| c > 0).unwrap_or(1);
    if format == Format::Ogg
        && let Some(end) = ogg_last_granule(bytes)
    {
        // symphonia does not always trim a short stream's last packet to its end: the
        // stream ends at the last page's granule position, as libvorbis (and so
        // soundfile) ends it.
        let frames = usize::try_from(end).unwrap_or(usize::MAX);
        samples.truncate(frames.saturating_mul(channels));
    }
    Ok(Audio {
        rate,
        channels,
        samples,
    })
}

/// The granule position (for Vorbis, the frames decoded up to there) of the last Ogg page
/// that has one, walking the pages from the start.
fn ogg_last_granule(b: &[u8]) -> Option<u64> {
    let (mut at, mut last) = (0usize, None);
    while at + 27 <= b.len() && &b[at..at + 4] == b"OggS" {
        let granule = u64::from_le_bytes(b[at + 6..at + 14].try_into().ok()?);
        let segments = usize::from(b[at + 26]);
        let table = b.get(at + 27..at + 27 + segments)?;
        let body: usize = table.iter().map(|&s| usize::from(s)).sum();
        if granule != u64::MAX {
            last = Some(granule);
        }
        at += 27 + segments + body;
    }
    last
}

fn u16_le(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_le(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The length of a RIFF/WAVE file from its header: the data chunk's whole frames over
/// the rate (libsndfile's frame count).
pub fn wav_seconds(b: &[u8]) -> Result<f64, String> {
    if Format::sniff(b) != Some(Format::Wav) {
        return Err("not a WAV file".into());
    }
    let (mut at, mut fmt) = (12usize, None);
    while at + 8 <= b.len() {
        let id = &b[at..at + 4];
        let size = u32_le(b, at + 4).ok_or("truncated WAV chunk")? as usize;
        if id == b"fmt " {
            let rate = u32_le(b, at + 12).filter(|&r| r > 0);
            let align = u16_le(b, at + 20).filter(|&a| a > 0);
            fmt = rate.zip(align);
        } else if id == b"data" {
            let (rate, align) = fmt.ok_or("WAV data before a valid fmt chunk")?;
            let size = size.min(b.len() - at - 8);
            let frames = size / usize::from(align);
            return Ok(frames as f64 / f64::from(rate));
        }
        at = at.saturating_add(8 + size + (size & 1));
    }
    Err("WAV file without a data chunk".into())
}

/// The length of a FLAC stream from its STREAMINFO block (total samples over the rate).
pub fn flac_seconds(b: &[u8]) -> Result<f64, String> {
    if b.len() < 42 || &b[..4] != b"fLaC" || b[4] & 0x7F != 0 {
        return Err("not a FLAC file with STREAMINFO".into());
    }
    let info = &b[8..42];
    let rate =
        (u32::from(info[10]) << 12) | (u32::from(info[11]) << 4) | (u32::from(info[12]) >> 4);
    let total = (u64::from(info[13] & 0x0F) << 32)
        | u64::from(u32::from_be_bytes([info[14], info[15], info[16], info[17]]));
    if rate == 0 || total == 0 {
        return Err("FLAC STREAMINFO gives no sample rate or length".into());
    }
    Ok(total as f64 / f64::from(rate))
}

/// A clip's length in seconds as soundfile gives it: from the header for WAV and FLAC,
/// by decoding for MP3 and Ogg/Vorbis (whose headers may not say).
pub fn seconds(bytes: &[u8]) -> Result<f64, String> {
    match Format::sniff(bytes).ok_or(UNKNOWN)? {
        Format::Wav => wav_seconds(bytes),
        Format::Flac => flac_seconds(bytes),
        Format::Mp3 | Format::Ogg => Ok(decode(bytes)?.seconds()),
    }
}

/// The 44-byte header of a 16-bit PCM WAV file of `data_len` bytes of samples.
fn pcm16_header(channels: u16, rate: u32, data_len: usize) -> Vec<u8> {
    let block = u32::from(channels) * 2;
    let mut out = Vec::with_capacity(44 + data_len);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&((36 + data_len) as u32).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes()); // integer PCM
    out.extend_from_slice(&channels.to_le_bytes());
    out.extend_from_slice(&rate.to_le_bytes());
    out.extend_from_slice(&(rate * block).to_le_bytes());
    out.extend_from_slice(&(block as u16).to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&(data_len as u32).to_le_bytes());
    out
}

/// Interleaved samples in [-1, 1] as a 16-bit PCM WAV file, as libsndfile 1.2 writes
/// doubles (scaled to 32 bits, rounded half to even, clipped, the top 16 bits kept), so
/// that a 16-bit clip read and written again is unchanged, as with soundfile.
pub fn pcm16_wav(samples: &[f64], channels: u16, rate: u32) -> Vec<u8> {
    let mut out = pcm16_header(channels.max(1), rate, samples.len() * 2);
    for s in samples {
        // libsndfile goes through a 32-bit integer and keeps its top half (a floor).
        let wide = (s * 2_147_483_648.0)
            .round_ties_even()
            .clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32;
        out.extend_from_slice(&((wide >> 16) as i16).to_le_bytes());
    }
    out
}

/// A clip as the 16-bit PCM WAV file vLLM sends (`soundfile.write(buf, *soundfile.read(f),
/// format="WAV")`), with its shape.
#[derive(Clone, Debug, PartialEq)]
pub struct Wav {
    pub bytes: Vec<u8>,
    pub rate: u32,
    pub channels: u16,
    pub frames: usize,
}

impl Wav {
    /// The length in seconds (frames over the rate).
    pub fn seconds(&self) -> f64 {
        self.frames as f64 / f64::from(self.rate)
    }
}

/// Any clip [`decode`] reads, as a 16-bit PCM WAV file. A 16-bit PCM WAV clip needs no
/// decoding: read and written again, its samples are unchanged, so only its header is
/// rewritten (and chunks other than `fmt ` and `data` dropped, as soundfile drops them).
pub fn to_pcm16_wav(bytes: &[u8]) -> Result<Wav, String> {
    if let Some(wav) = pcm16_copy(bytes) {
        return Ok(wav);
    }
    let a = decode(bytes)?;
    let channels = u16::try_from(a.channels).map_err(|_| "too many channels")?;
    Ok(Wav {
        bytes: a.to_wav(),
        rate: a.rate,
        channels,
        frames: a.frames(),
    })
}

/// [`to_pcm16_wav`] for a 16-bit integer PCM WAV file; `None` for anything else.
fn pcm16_copy(b: &[u8]) -> Option<Wav> {
    if Format::sniff(b) != Some(Format::Wav) {
        return None;
    }
    let (mut at, mut shape) = (12usize, None);
    while at + 8 <= b.len() {
        let id = &b[at..at + 4];
        let size = u32_le(b, at + 4)? as usize;
        if id == b"fmt " {
            let tag = u16_le(b, at + 8)?;
            // WAVE_FORMAT_EXTENSIBLE names its format in the sub-format GUID's first bytes.
            let pcm = tag == 1 || (tag == 0xFFFE && u16_le(b, at + 32)? == 1);
            let (channels, rate) = (u16_le(b, at + 10)?, u32_le(b, at + 12)?);
            let (block, bits) = (u16_le(b, at + 20)?, u16_le(b, at + 22)?);
            if !pcm || bits != 16 || channels == 0 || rate == 0 || block != channels * 2 {
                return None;
            }
            shape = Some((channels, rate));
        } else if id == b"data" {
            let (channels, rate) = shape?;
            let block = usize::from(channels) * 2;
            let size = size.min(b.len() - at - 8);
            let frames = size / block;
            let data = &b[at + 8..at + 8 + frames * block];
            let mut bytes = pcm16_header(channels, rate, data.len());
            bytes.extend_from_slice(data);
            return Some(Wav {
                bytes,
                rate,
                channels,
                frames,
            });
        }
        at = at.checked_add(8 + size + (size & 1))?;
    }
    None
}

/// `data:audio/wav;base64,...` for a WAV file (a chat request's audio part).
pub fn wav_data_url(wav: &[u8]) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(wav);
    format!("data:audio/wav;base64,{encoded}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 16-bit WAV of `n` frames of a ramp, `channels` interleaved.
    fn ramp(n: usize, channels: u16, rate: u32) -> Vec<u8> {
        let samples: Vec<f64> = (0..n * usize::from(channels))
            .map(|i| ((i % 200) as f64 - 100.0) / 128.0)
            .collect();
        pcm16_wav(&samples, channels, rate)
    }

    #[test]
    fn pcm16_round_trips_as_libsndfile_does() {
        let wav = ramp(8000, 1, 16000);
        assert_eq!(wav_seconds(&wav).unwrap(), 0.5);
        assert_eq!(seconds(&wav).unwrap(), 0.5);
        let a = decode(&wav).unwrap();
        assert_eq!((a.rate, a.channels, a.frames()), (16000, 1, 8000));
        // Read as s / 32768 and written again: the same file, as with soundfile.
        assert_eq!(a.to_wav(), wav);
        // What soundfile 0.14 (libsndfile 1.2.2) writes for these doubles: clipped, and
        // rounded down below the last step.
        let edge = pcm16_wav(
            &[
                -1.0,
                1.0,
                2.0,
                0.5,
                -0.5,
                -2.0,
                1.0 / 65536.0,
                -1.0 / 65536.0,
                0.99999,
            ],
            1,
            8000,
        );
        let got: Vec<i16> = edge[44..]
            .chunks(2)
            .map(|c| i16::from_le_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(
            got,
            [-32768, 32767, 32767, 16384, -16384, -32768, 0, -1, 32767]
        );
    }

    #[test]
    fn sixteen_bit_wav_is_copied_as_decoding_would_write_it() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/datasets/audio");
        for name in ["tone.wav", "float.wav", "stereo24.wav", "glide.flac"] {
            let bytes = std::fs::read(format!("{dir}/{name}")).unwrap();
            let a = decode(&bytes).unwrap();
            let w = to_pcm16_wav(&bytes).unwrap();
            assert_eq!(w.bytes, a.to_wav(), "{name}");
            assert_eq!(
                (w.rate, usize::from(w.channels), w.frames),
                (a.rate, a.channels, a.frames())
            );
            assert_eq!(pcm16_copy(&bytes).is_some(), name == "tone.wav");
        }
        // Another chunk before the data, an odd byte at its end: dropped, as soundfile
        // drops them.
        let wav = ramp(100, 2, 8000);
        let mut extra = wav[..36].to_vec();
        extra.extend_from_slice(b"LIST\x03\0\0\0abc\0");
        extra.extend_from_slice(&wav[36..]);
        extra.push(7);
        let w = to_pcm16_wav(&extra).unwrap();
        assert_eq!((w.bytes, w.frames), (wav, 100));
    }

    #[test]
    fn stereo_keeps_its_channels_and_averages_to_mono() {
        let wav = ramp(441, 2, 44100);
        let a = decode(&wav).unwrap();
        assert_eq!((a.channels, a.frames()), (2, 441));
        assert_eq!(wav_seconds(&wav).unwrap(), 0.01);
        let m = a.to_mono();
        assert_eq!((m.channels, m.frames()), (1, 441));
        assert_eq!(m.samples[0], (a.samples[0] + a.samples[1]) / 2.0);
        assert_eq!(u16_le(&a.to_wav(), 22), Some(2));
    }

    #[test]
    fn flac_lengths_come_from_streaminfo() {
        // STREAMINFO: 16 kHz, mono, 16 bits, 24 000 samples.
        let mut b = b"fLaC".to_vec();
        b.extend_from_slice(&[0x80, 0, 0, 34]);
        let mut info = [0u8; 34];
        let rate: u32 = 16000;
        info[10] = (rate >> 12) as u8;
        info[11] = (rate >> 4) as u8;
        info[12] = ((rate & 0x0F) << 4) as u8;
        info[13] = 0xF0;
        info[14..18].copy_from_slice(&24000u32.to_be_bytes());
        b.extend_from_slice(&info);
        assert_eq!(flac_seconds(&b).unwrap(), 1.5);
        assert_eq!(seconds(&b).unwrap(), 1.5);
    }

    /// The clips of `tests/data/datasets/audio`, with the rate, channels and frames
    /// soundfile 0.14 (libsndfile 1.2.2) reads from them (see that folder's README).
    const CLIPS: &[(&str, u32, usize, usize)] = &[
        ("tone.wav", 16000, 1, 16000),
        ("float.wav", 16000, 1, 8000),
        ("stereo24.wav", 22050, 2, 5512),
        ("glide.flac", 16000, 1, 24000),
        ("glide.ogg", 16000, 1, 20000),
        ("glide.mp3", 16000, 1, 32000),
    ];

    #[test]
    fn every_encoding_decodes_to_soundfiles_frames() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/datasets/audio");
        for &(name, rate, channels, frames) in CLIPS {
            let bytes = std::fs::read(format!("{dir}/{name}")).unwrap();
            let a = decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(
                (a.rate, a.channels, a.frames()),
                (rate, channels, frames),
                "{name}"
            );
            let want = frames as f64 / f64::from(rate);
            assert_eq!(seconds(&bytes).unwrap(), want, "{name}");
            // A real signal, not silence: the glide's 0.4 amplitude.
            let peak = a.samples.iter().fold(0f64, |m, s| m.max(s.abs()));
            assert!((0.3..0.6).contains(&peak), "{name}: peak {peak}");
            let wav = a.to_wav();
            assert_eq!(wav_seconds(&wav).unwrap(), want, "{name}");
        }
    }

    /// The short 8 kHz MP3, Ogg/Vorbis and FLAC clips of the ASR test set (one or two Ogg
    /// pages each): soundfile's frames, row by row (see the clips' README).
    #[test]
    fn short_clips_end_where_soundfile_ends_them() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/datasets/audio/asr/clean/train-00000-of-00001.parquet"
        );
        let table = crate::table::read(path, &Default::default()).unwrap();
        let frames: Vec<usize> = table
            .rows
            .iter()
            .map(|row| {
                let bytes = row.get("audio").unwrap().get("bytes").unwrap();
                let a = decode(bytes.as_bytes().unwrap()).unwrap();
                assert_eq!((a.rate, a.channels), (8000, 1));
                a.frames()
            })
            .collect();
        assert_eq!(frames, [3200, 7200, 10400, 13600, 18400, 8800, 5600, 12000]);
    }

    #[test]
    fn other_bytes_are_clear_errors() {
        for bytes in [&b"hello world!"[..], b"", b"RIFF\0\0\0\0WAVE"] {
            let err = decode(bytes).unwrap_err();
            assert!(
                err.contains("not an audio encoding") || err.contains("cannot read"),
                "{err}"
            );
        }
        assert!(
            seconds(b"RIFF\0\0\0\0WAVE")
                .unwrap_err()
                .contains("without a data chunk")
        );
        assert_eq!(Format::sniff(b"ID3\x04"), Some(Format::Mp3));
        assert_eq!(Format::sniff(b"OggS"), Some(Format::Ogg));
        assert!(wav_data_url(b"RIFF").starts_with("data:audio/wav;base64,UklGRg"));
    }
}
