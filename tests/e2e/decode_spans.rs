//! The span rule, checked by the host: a decoder's text span must lie inside its chunk's
//! own frame. A span built from a frame's own offsets as if they were the buffer's (the
//! mistake the SDK's `Frame::span` prevents; the `hostile-decoder` fixture makes it on
//! purpose with `frame-relative-every=N`) would show other text with no failure; the host
//! fails that response with a `decode` error naming the plugin, the chunk, the span and
//! the frame, and every other response of the run is kept.

use bench::runtime::{ResponseHead, Runtime, RuntimeConfig};

use crate::common::fixtures::fixture;
use crate::common::plugins::{chat_frame, hostile_decoder, path_of};
use crate::common::{Bench, gate, mock};

/// Two SSE-framed chat chunks, laid end to end as the framer hands them to the decoder.
fn two_chunks() -> (Vec<u8>, Vec<u32>) {
    let (first, second) = (chat_frame("Hello"), chat_frame(" world"));
    let ends = vec![first.len() as u32, (first.len() + second.len()) as u32];
    ([first, second].concat(), ends)
}

#[test]
fn a_span_outside_its_frame_fails_that_response_and_the_instance_goes_on() {
    let cache = tempfile::tempdir().unwrap();
    gate::enter();
    let runtime = Runtime::new(RuntimeConfig {
        cache_dir: Some(cache.path().to_path_buf()),
        ..RuntimeConfig::default()
    })
    .unwrap();
    let plugin = fixture("hostile-decoder");
    let mut backend = hostile_decoder(&runtime, "frame-relative-every", "2");
    let head = ResponseHead {
        status: 200,
        headers: Vec::new(),
    };
    let (buffer, ends) = two_chunks();
    let text = |decoded: &bench::runtime::Decoded| -> Vec<String> {
        decoded
            .chunks
            .spans
            .chunks_exact(4)
            .map(|s| String::from_utf8_lossy(&buffer[s[0] as usize..][..s[1] as usize]).into())
            .collect()
    };
    // The first response is decoded as it should be.
    let decoded = backend.decode(&head, &buffer, &ends).unwrap();
    assert_eq!(text(&decoded), ["Hello", " world"]);

    // The second gives its spans relative to their frames: the second chunk's points into
    // the first frame.
    let err = backend.decode(&head, &buffer, &ends).unwrap_err();
    assert!(!err.is_fault(), "{err:?}");
    let start = buffer.windows(6).position(|w| w == b" world").unwrap() - ends[0] as usize;
    assert_eq!(
        err.to_string(),
        format!(
            "plugin '{}': decode: chunk 1 has a text span outside its frame: its content span \
             (start {start}, len 6), in frame 1 (bytes {}..{} of the buffer); span offsets \
             count from the buffer's start, not the frame's",
            path_of(&plugin),
            ends[0],
            ends[1]
        )
    );

    // The instance is not faulted: the third response decodes as the first did.
    assert!(!backend.faulted());
    let decoded = backend.decode(&head, &buffer, &ends).unwrap();
    assert_eq!(text(&decoded), ["Hello", " world"]);
}

#[test]
fn cli_a_span_outside_its_frame_fails_that_request_only() {
    let mock = mock(Default::default());
    let plugin = path_of(&fixture("hostile-decoder"));
    let out = Bench::against(&mock.url)
        .arg("--backend")
        .arg(&plugin)
        .args(["--backend-option", "frame-relative-every=3"])
        .args(["--random-input-len", "8", "--random-output-len", "4"])
        .prompts(10)
        .save_detailed()
        .run()
        .assert_success();
    let log = out.to_string();
    let result = out.json();
    // Responses 3, 6 and 9 fail; the seven others are measured in full.
    assert_eq!(result["completed"], 7, "{log}");
    assert_eq!(result["failed"], 3, "{log}");
    assert_eq!(result["total_output_tokens"], 7 * 4, "{log}");
    let errors: Vec<&str> = result["errors"]
        .as_array()
        .expect("a detailed result has errors")
        .iter()
        .map(|e| e.as_str().unwrap())
        .filter(|e| !e.is_empty())
        .collect();
    assert_eq!(errors.len(), 3, "{errors:?}");
    for error in errors {
        assert!(
            error.starts_with(&format!("decode: plugin '{plugin}': decode: chunk ")),
            "{error}"
        );
        assert!(
            error.contains("has a text span outside its frame"),
            "{error}"
        );
    }
}
