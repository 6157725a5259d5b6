//! Anthropic's Messages API (`anthropic-messages`) against the mock speaking it in vLLM's
//! shapes: the same prompts through the chat backend give the same counts and texts, and
//! the server's own record of each request (`/mock/requests`) is the truth for the times.

use crate::backends_openai_api::{
    ITL, OUTPUT_LEN, PROMPTS, TTFT, check_timing, half_faulted, numbers, reference, run,
    with_attempts, words,
};
use crate::common::*;

/// With the first 3 tokens of every answer thinking, the Messages API and chat completions
/// give the same prompt and output lengths, the same texts and the same time to first
/// content, each time as the server sent it.
#[test]
fn anthropic_messages_counts_equal_the_chat_backends_on_the_same_prompts() {
    const REASONING: usize = 3;
    let _alone = gate::exclusive();
    let m = mock(bench::mock::MockConfig {
        ttft: TTFT,
        itl: ITL,
        reasoning: bench::mock::Reasoning {
            tokens: REASONING as u32,
            ..Default::default()
        },
        ..Default::default()
    });
    let texts = reference(&m);
    let chat = run(&m, "openai-chat", "chat-", &[]);
    // The chat answer's text is its content: the reference less the reasoning.
    for (got, full) in chat["generated_texts"]
        .as_array()
        .unwrap()
        .iter()
        .zip(&texts)
    {
        assert_eq!(got.as_str().unwrap(), words(full)[REASONING..].concat());
    }
    with_attempts("anthropic-messages", |n| {
        let prefix = format!("msg{n}-");
        let r = run(&m, "anthropic-messages", &prefix, &[]);
        assert_eq!(r["backend"], "anthropic-messages");
        for key in [
            "completed",
            "total_input_tokens",
            "total_output_tokens",
            "input_lens",
            "output_lens",
            "generated_texts",
        ] {
            assert_eq!(r[key], chat[key], "{key}");
        }
        assert_eq!(r["total_output_tokens"], PROMPTS * OUTPUT_LEN, "{r:#}");
        // Thinking deltas are timed as tokens; content starts REASONING tokens later, at
        // the server's first content token.
        let records = m.server.as_ref().unwrap().requests();
        let ttfcs = numbers(&r["ttfcs"]);
        for (i, ttfc) in ttfcs.iter().enumerate() {
            let id = format!("{prefix}{i}");
            let record = records.iter().rfind(|rec| rec.id == id).unwrap();
            let first_content = record.first_content_ms.unwrap();
            assert!(ttfc * 1e3 >= first_content - 0.5, "{id}: {ttfc} {record:?}");
        }
        check_timing(&m, &r, &prefix)
    });
}

/// Without streaming the answer is one message: its text blocks are the text, its usage
/// the counts; no gaps between tokens are measured.
#[test]
fn anthropic_messages_reads_whole_messages_without_streaming() {
    let m = mock(Default::default());
    let texts = reference(&m);
    let r = run(
        &m,
        "anthropic-messages",
        "whole-",
        &["--backend-option", "stream=false"],
    );
    assert_eq!(r["generated_texts"].as_array().unwrap(), &texts);
    assert_eq!(r["total_output_tokens"], PROMPTS * OUTPUT_LEN);
    for gaps in r["itls"].as_array().unwrap() {
        assert!(gaps.as_array().unwrap().is_empty(), "{gaps}");
    }
}

#[test]
fn anthropic_messages_fails_on_error_events_and_streams_without_message_stop() {
    // Every other request to arrive is faulted: 2 of 4.
    for (faults, needle) in [
        (
            bench::mock::Faults {
                error_event_rate: 0.5,
                ..Default::default()
            },
            "the server reported an error: mock server: request",
        ),
        (
            bench::mock::Faults {
                no_done_rate: 0.5,
                ..Default::default()
            },
            "the stream ended without message_stop",
        ),
    ] {
        half_faulted("anthropic-messages", faults, needle);
    }
}

/// `--ignore-eos` would be dropped by the server without a word: refused before anything
/// is sent, saying why.
#[test]
fn anthropic_messages_refuses_ignore_eos() {
    let m = mock(Default::default());
    let out = Bench::against(&m.url)
        .backend("anthropic-messages")
        .random(16, OUTPUT_LEN as u32)
        .prompts(2)
        .args(["--ignore-eos"])
        .run()
        .assert_failure();
    assert!(
        out.stderr.contains(
            "anthropic-messages: --ignore-eos cannot be honoured: the Messages API has no \
             ignore_eos parameter"
        ),
        "{out}"
    );
    let answered = m.server.as_ref().unwrap().requests();
    assert!(answered.is_empty(), "{answered:?}");
}
