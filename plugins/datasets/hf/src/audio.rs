//! The audio clips of ASR datasets: their length in seconds (what vLLM's
//! `--asr-min/max-audio-len-sec` filter on) and the bytes sent as a file upload.
//!
//! Hugging Face stores a clip as `{"bytes": ..., "path": ...}` (the `Audio` feature), as
//! decoded samples `{"array": [...], "sampling_rate": n}`, or as a path. vLLM decodes
//! every clip with soundfile to measure it; here the length is read from the WAV or FLAC
//! header (no decoding), decoded samples are written as 16-bit PCM WAV (what vLLM's
//! audio backend uploads), and other encodings are a clear error.

use bench_sdk::table::Value;
use bench_sdk::{BinaryData, ContentPart};

/// A clip ready to send: its upload and its length in seconds.
pub struct Clip {
    pub part: ContentPart,
    pub seconds: f64,
}

fn u32_le(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The length of a RIFF/WAVE file: its data chunk's size over the byte rate.
pub fn wav_seconds(b: &[u8]) -> Result<f64, String> {
    if b.len() < 12 || &b[..4] != b"RIFF" || &b[8..12] != b"WAVE" {
        return Err("not a WAV file".into());
    }
    let (mut at, mut byte_rate) = (12usize, None);
    while at + 8 <= b.len() {
        let id = &b[at..at + 4];
        let size = u32_le(b, at + 4).ok_or("truncated WAV chunk")? as usize;
        if id == b"fmt " {
            byte_rate = u32_le(b, at + 16).filter(|&r| r > 0);
        } else if id == b"data" {
            let rate = byte_rate.ok_or("WAV data before its fmt chunk")?;
            let size = size.min(b.len() - at - 8);
            return Ok(size as f64 / f64::from(rate));
        }
        at += 8 + size + (size & 1);
    }
    Err("WAV file without a data chunk".into())
}

/// The length of a FLAC stream, from its STREAMINFO block (total samples over the rate).
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

/// An encoded clip's media type, file name and length.
fn encoded(bytes: Vec<u8>) -> Result<Clip, String> {
    let (mime, name, seconds) = if bytes.starts_with(b"RIFF") {
        ("audio/wav", "audio.wav", wav_seconds(&bytes)?)
    } else if bytes.starts_with(b"fLaC") {
        ("audio/flac", "audio.flac", flac_seconds(&bytes)?)
    } else {
        return Err(
            "audio is neither WAV nor FLAC (the encodings whose length bench reads \
                    without decoding); convert the clips to WAV or FLAC"
                .into(),
        );
    };
    Ok(Clip {
        part: ContentPart::Binary(BinaryData {
            mime_type: mime.into(),
            file_name: name.into(),
            data: bytes,
        }),
        seconds,
    })
}

/// Decoded samples in [-1, 1] as a mono 16-bit PCM WAV file (soundfile's default).
pub fn pcm16_wav(samples: &[f64], rate: u32) -> Vec<u8> {
    let data_len = samples.len() * 2;
    let mut out = Vec::with_capacity(44 + data_len);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&((36 + data_len) as u32).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&1u16.to_le_bytes()); // mono
    out.extend_from_slice(&rate.to_le_bytes());
    out.extend_from_slice(&(rate * 2).to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&(data_len as u32).to_le_bytes());
    for s in samples {
        let v = (s.clamp(-1.0, 1.0) * 32767.0).round() as i16;
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// A clip from an `audio` cell; `read` reads a file a clip names by path.
pub fn clip(value: &Value, read: &dyn Fn(&str) -> Result<Vec<u8>, String>) -> Result<Clip, String> {
    if let (Some(array), Some(rate)) = (value.get("array"), value.get("sampling_rate")) {
        let rate = rate
            .as_i64()
            .and_then(|r| u32::try_from(r).ok())
            .filter(|&r| r > 0)
            .ok_or("audio \"sampling_rate\" is not a positive whole number")?;
        let samples = array
            .as_list()
            .ok_or("audio \"array\" is not a list")?
            .iter()
            .map(|v| v.as_f64().ok_or("audio \"array\" holds a non-number"))
            .collect::<Result<Vec<f64>, _>>()?;
        let seconds = samples.len() as f64 / f64::from(rate);
        let mut c = encoded(pcm16_wav(&samples, rate))?;
        c.seconds = seconds;
        return Ok(c);
    }
    if let Some(bytes) = value.get("bytes").filter(|v| !v.is_null()) {
        let bytes = bytes
            .as_bytes()
            .ok_or_else(|| format!("audio \"bytes\" is {}, not binary data", bytes.kind()))?;
        return encoded(bytes.to_vec());
    }
    let path = value
        .get("path")
        .and_then(Value::as_str)
        .or_else(|| value.as_str())
        .ok_or_else(|| {
            format!(
                "ASR rows must hold audio bytes, decoded samples or a path, not {}",
                value.kind()
            )
        })?;
    encoded(read(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_files(path: &str) -> Result<Vec<u8>, String> {
        Err(format!("no file {path}"))
    }

    #[test]
    fn wav_lengths_come_from_the_header() {
        let wav = pcm16_wav(&vec![0.5; 8000], 16000);
        assert_eq!(wav_seconds(&wav).unwrap(), 0.5);
        let cell = Value::Map(vec![("bytes".into(), Value::Bytes(wav.clone()))]);
        let c = clip(&cell, &no_files).unwrap();
        assert_eq!(c.seconds, 0.5);
        match c.part {
            ContentPart::Binary(b) => {
                assert_eq!(
                    (b.mime_type.as_str(), b.data.len()),
                    ("audio/wav", wav.len())
                )
            }
            other => panic!("{other:?}"),
        }
        let samples = Value::Map(vec![
            ("array".into(), Value::List(vec![Value::Float(0.0); 4000])),
            ("sampling_rate".into(), Value::Int(8000)),
        ]);
        assert_eq!(clip(&samples, &no_files).unwrap().seconds, 0.5);
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
        // Rate's low bits, one channel (0), the top bit of 16 - 1 bits per sample (0).
        info[12] = ((rate & 0x0F) << 4) as u8;
        info[13] = 0xF0;
        info[14..18].copy_from_slice(&24000u32.to_be_bytes());
        b.extend_from_slice(&info);
        assert_eq!(flac_seconds(&b).unwrap(), 1.5);
    }

    #[test]
    fn other_encodings_and_missing_files_are_errors() {
        let cell = Value::Map(vec![("bytes".into(), Value::Bytes(b"ID3mp3".to_vec()))]);
        assert!(
            clip(&cell, &no_files)
                .err()
                .unwrap()
                .contains("neither WAV nor FLAC")
        );
        let cell = Value::Str("clips/a.wav".into());
        assert_eq!(clip(&cell, &no_files).err().unwrap(), "no file clips/a.wav");
    }
}
