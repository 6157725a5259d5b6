//! The audio clips of ASR datasets: their length in seconds (what vLLM's
//! `--asr-min/max-audio-len-sec` filter on) and the file each request uploads, as vLLM
//! 0.32's `ASRDataset` makes them.
//!
//! Hugging Face stores a clip as `{"bytes": ..., "path": ...}` (the `Audio` feature), as
//! decoded samples `{"array": [...], "sampling_rate": n}`, or as a path. Like vLLM:
//! - decoded samples are measured (frames over the rate) and uploaded as a 16-bit PCM WAV;
//! - bytes are decoded (soundfile's `read`: WAV, FLAC, MP3 or Ogg/Vorbis, the SDK's
//!   [`audio`] module), measured, and uploaded re-encoded as a 16-bit PCM WAV;
//! - a path is measured (soundfile's `info`: the header of a WAV or FLAC file, the decoded
//!   frames of MP3 and Ogg) and the file uploaded as it is, under its own name.

use bench_sdk::audio::{self, Format};
use bench_sdk::table::Value;
use bench_sdk::{BinaryData, ContentPart};

/// A clip ready to send: its upload and its length in seconds.
pub struct Clip {
    pub part: ContentPart,
    pub seconds: f64,
}

/// A 16-bit PCM WAV upload, named as vLLM's audio client names it.
fn wav_upload(data: Vec<u8>) -> ContentPart {
    ContentPart::Binary(BinaryData {
        mime_type: "audio/wav".into(),
        file_name: "audio.wav".into(),
        data,
    })
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
        return Ok(Clip {
            part: wav_upload(audio::pcm16_wav(&samples, 1, rate)),
            seconds,
        });
    }
    if let Some(bytes) = value.get("bytes").filter(|v| !v.is_null()) {
        let bytes = bytes
            .as_bytes()
            .ok_or_else(|| format!("audio \"bytes\" is {}, not binary data", bytes.kind()))?;
        let wav = audio::to_pcm16_wav(bytes)?;
        return Ok(Clip {
            seconds: wav.seconds(),
            part: wav_upload(wav.bytes),
        });
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
    let bytes = read(path)?;
    let seconds = audio::seconds(&bytes).map_err(|e| format!("{path}: {e}"))?;
    let mime = Format::sniff(&bytes).map_or("application/octet-stream", Format::mime);
    let name = path.rsplit('/').next().unwrap_or(path);
    Ok(Clip {
        part: ContentPart::Binary(BinaryData {
            mime_type: mime.into(),
            file_name: name.into(),
            data: bytes,
        }),
        seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_files(path: &str) -> Result<Vec<u8>, String> {
        Err(format!("no file {path}"))
    }

    /// The test clips of `tests/data/datasets/audio`.
    fn test_clip(name: &str) -> Result<Vec<u8>, String> {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../tests/data/datasets/audio"
        );
        std::fs::read(format!("{dir}/{name}")).map_err(|e| format!("{name}: {e}"))
    }

    fn upload(c: &Clip) -> &BinaryData {
        match &c.part {
            ContentPart::Binary(b) => b,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bytes_of_every_encoding_are_measured_and_sent_as_wav() {
        // Lengths as soundfile gives them (tests/data/datasets/audio/README.md).
        for (name, seconds) in [
            ("tone.wav", 1.0),
            ("glide.flac", 1.5),
            ("glide.ogg", 1.25),
            ("glide.mp3", 2.0),
        ] {
            let bytes = test_clip(name).unwrap();
            let cell = Value::Map(vec![
                ("bytes".into(), Value::Bytes(bytes)),
                ("path".into(), Value::Str(name.into())),
            ]);
            let c = clip(&cell, &no_files).unwrap();
            assert_eq!(c.seconds, seconds, "{name}");
            let b = upload(&c);
            assert_eq!(
                (b.mime_type.as_str(), b.file_name.as_str()),
                ("audio/wav", "audio.wav")
            );
            assert_eq!(audio::wav_seconds(&b.data).unwrap(), seconds, "{name}");
        }
    }

    #[test]
    fn paths_are_measured_and_sent_as_they_are() {
        for (name, seconds, mime) in [
            ("glide.mp3", 2.0, "audio/mpeg"),
            ("glide.flac", 1.5, "audio/flac"),
        ] {
            let cell = Value::Map(vec![
                ("bytes".into(), Value::Null),
                ("path".into(), Value::Str(format!("clips/{name}"))),
            ]);
            let read = |p: &str| test_clip(p.strip_prefix("clips/").unwrap());
            let c = clip(&cell, &read).unwrap();
            assert_eq!(c.seconds, seconds);
            let b = upload(&c);
            assert_eq!((b.mime_type.as_str(), b.file_name.as_str()), (mime, name));
            assert_eq!(b.data, test_clip(name).unwrap());
        }
    }

    #[test]
    fn decoded_samples_are_written_as_wav() {
        let samples = Value::Map(vec![
            ("array".into(), Value::List(vec![Value::Float(0.25); 4000])),
            ("sampling_rate".into(), Value::Int(8000)),
        ]);
        let c = clip(&samples, &no_files).unwrap();
        assert_eq!(c.seconds, 0.5);
        let back = audio::decode(&upload(&c).data).unwrap();
        assert_eq!(
            (back.rate, back.frames(), back.samples[0]),
            (8000, 4000, 0.25)
        );
    }

    #[test]
    fn other_bytes_and_missing_files_are_errors() {
        let cell = Value::Map(vec![("bytes".into(), Value::Bytes(b"<html>".to_vec()))]);
        let err = clip(&cell, &no_files).err().unwrap();
        assert!(err.contains("not an audio encoding"), "{err}");
        let cell = Value::Str("clips/a.wav".into());
        assert_eq!(clip(&cell, &no_files).err().unwrap(), "no file clips/a.wav");
        let cell = Value::Str("a.txt".into());
        let err = clip(&cell, &|_: &str| Ok(b"text".to_vec())).err().unwrap();
        assert!(err.starts_with("a.txt: not an audio encoding"), "{err}");
    }
}
