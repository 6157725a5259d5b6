//! Graded questions: the key's lines and labels, the matching of few-shot prompts, and the
//! server's answers, right and wrong, streamed and whole, against a real HTTP client.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::*;
use crate::faults::Fault;
use crate::{MockConfig, MockServer, spawn};

const NATALIA: &str = "Natalia sold clips to 48 of her friends in April, and then she sold \
                       half as many clips in May. How many clips did Natalia sell altogether \
                       in April and May?";
const WENG: &str = "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes \
                    of babysitting. How much did she earn?";
const BETTY: &str = "Betty is saving money for a new wallet which costs $1,100. How much more \
                     money does she need?";

/// Three GSM8K questions, the last with a label written with a comma.
fn gsm8k() -> Vec<Value> {
    vec![
        json!({"question": NATALIA, "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n\
            Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72"}),
        json!({"question": WENG, "answer": "Weng earns 12/60 = $<<12/60=0.2>>0.2 per minute.\n\
            Working 50 minutes, she earned 0.2 x 50 = $<<0.2*50=10>>10.\n#### 10"}),
        json!({"question": BETTY, "answer": "She needs 1,100 - 100 = 1,000 more.\n#### 1,000"}),
    ]
}

/// Multiple-choice questions: answers as a letter, a lower-case letter and an index.
fn mcq() -> Vec<Value> {
    vec![
        json!({"question": "Which planet is known as the Red Planet?",
               "choices": ["Venus", "Mars", "Jupiter", "Saturn"], "answer": "B"}),
        json!({"question": "What is 2 + 2?", "choices": ["3", "5", "4"], "answer": 2}),
        json!({"question": "Which gas do plants take in?",
               "choices": ["Oxygen", "Nitrogen", "Carbon dioxide", "Helium"], "answer": "c",
               "subject": "biology"}),
    ]
}

/// A key file with these lines, unique to `name` (tests run side by side).
fn key_file(name: &str, text: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!(
        "bench-mock-answers-{}-{name}.jsonl",
        std::process::id()
    ));
    std::fs::write(&path, text).expect("write the key file");
    path
}

fn jsonl(lines: &[Value]) -> String {
    lines.iter().map(|line| format!("{line}\n")).collect()
}

fn key(lines: &[Value]) -> AnswerKey {
    AnswerKey::parse(&jsonl(lines)).expect("a valid key")
}

#[test]
fn labels_are_vllms_get_answer_value() {
    let cases = [
        ("... 72 clips.\n#### 72", Some("72")),
        ("#### 1,234,567", Some("1234567")),
        ("2 + 3 = 5\n#### 007", Some("007")),
        ("#### -3", Some("3")),
        ("#### 12.5", Some("5")),
        ("#### 4 apples", Some("4")),
        ("é 9é", Some("9")),
        ("no number here", None),
        ("", None),
    ];
    for (answer, want) in cases {
        assert_eq!(label(answer).as_deref(), want, "{answer:?}");
    }
}

#[test]
fn a_gsm8k_key_gives_its_labels_and_wrong_labels_one_more() {
    let key = key(&gsm8k());
    let expected: Vec<&Expected> = key.questions.iter().map(|q| &q.expected).collect();
    assert_eq!(
        expected,
        [
            &Expected::Number("72".into()),
            &Expected::Number("10".into()),
            &Expected::Number("1000".into()),
        ]
    );
    assert_eq!(key.questions[1].text, WENG);
    assert_eq!(
        key.questions[0].expected.text(true),
        "The answer is 72.\n#### 72"
    );
    assert_eq!(
        key.questions[0].expected.text(false),
        "The answer is 73.\n#### 73"
    );
    assert_eq!(plus_one("007"), "8");
    assert_eq!(plus_one("18446744073709551614"), "18446744073709551615");
    assert_eq!(plus_one("18446744073709551615"), "184467440737095516151");
    assert_eq!(
        plus_one("99999999999999999999999"),
        "999999999999999999999991"
    );
}

#[test]
fn a_multiple_choice_key_takes_letters_and_indices_and_wraps_wrong_letters() {
    let key = key(&mcq());
    let texts: Vec<(String, String)> = key
        .questions
        .iter()
        .map(|q| (q.expected.text(true), q.expected.text(false)))
        .collect();
    assert_eq!(
        texts,
        [
            ("Answer: B".into(), "Answer: C".into()),
            // Index 2 of 3: the wrong letter wraps to the first.
            ("Answer: C".into(), "Answer: A".into()),
            ("Answer: C".into(), "Answer: D".into()),
        ]
    );
    assert_eq!(
        key.questions[1].expected,
        Expected::Choice { index: 2, count: 3 }
    );
}

#[test]
fn blank_lines_are_skipped_and_questions_numbered_by_their_line() {
    let text = format!("\n{}\n   \n{}\n\n", gsm8k()[0], mcq()[0]);
    let key = AnswerKey::parse(&text).unwrap();
    let lines: Vec<usize> = key.questions.iter().map(|q| q.line).collect();
    assert_eq!(lines, [1, 3]);
}

#[test]
fn a_bad_line_is_an_error_naming_the_file_and_the_line() {
    let good = gsm8k()[0].to_string();
    let cases = [
        ("not json".to_owned(), "expected"),
        (
            json!({"question": "q"}).to_string(),
            "missing field `answer`",
        ),
        (
            json!({"answer": "#### 1"}).to_string(),
            "missing field `question`",
        ),
        (
            json!({"question": "q", "answer": "none"}).to_string(),
            "no number",
        ),
        (
            json!({"question": "q", "answer": 3}).to_string(),
            "must be a string",
        ),
        (
            json!({"question": "  ", "answer": "#### 1"}).to_string(),
            "empty",
        ),
        (
            json!({"question": "q", "choices": ["a", "b"], "answer": "C"}).to_string(),
            "not among the 2 choices",
        ),
        (
            json!({"question": "q", "choices": ["a", "b"], "answer": 2}).to_string(),
            "not among the 2 choices",
        ),
        (
            json!({"question": "q", "choices": ["a", "b"], "answer": "AB"}).to_string(),
            "a letter or a 0-based index",
        ),
        (
            json!({"question": "q", "choices": ["a", "b"], "answer": -1}).to_string(),
            "a letter or a 0-based index",
        ),
        (
            json!({"question": "q", "choices": ["a"], "answer": "A"}).to_string(),
            "2 to 26 choices",
        ),
        (
            json!({"question": "q", "choices": ["a", 1], "answer": "A"}).to_string(),
            "invalid type",
        ),
    ];
    for (i, (bad, says)) in cases.iter().enumerate() {
        // The bad line is the fourth: a good line, a blank one (counted), another good one.
        let path = key_file(&format!("bad-{i}"), &format!("{good}\n\n{good}\n{bad}\n"));
        let err = AnswerKey::read(&path).unwrap_err().to_string();
        let _ = std::fs::remove_file(&path);
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains("--answer-key"), "{err}");
        assert!(err.contains("line 4: "), "{bad}: {err}");
        assert!(err.contains(says), "{bad}: {err}");
    }
    let path = key_file("empty", "\n\n");
    let err = AnswerKey::read(&path).unwrap_err().to_string();
    let _ = std::fs::remove_file(&path);
    assert!(err.contains("no questions"), "{err}");
    let missing = std::env::temp_dir().join("bench-mock-answers-no-such-file.jsonl");
    let err = AnswerKey::read(&missing).unwrap_err().to_string();
    assert!(err.contains(&missing.display().to_string()), "{err}");
}

/// vLLM's GSM8K prompt: solved questions, then the one asked.
fn few_shot(solved: &[(&str, &str)], asked: &str) -> String {
    let mut prompt = String::new();
    for (question, answer) in solved {
        prompt.push_str(&format!("Question: {question}\nAnswer: {answer}\n\n"));
    }
    prompt.push_str(&format!("Question: {asked}\nAnswer:"));
    prompt
}

#[test]
fn a_few_shot_prompt_matches_the_question_it_asks_last() {
    let lines = gsm8k();
    let key = key(&lines);
    let solved = |i: usize| {
        (
            lines[i]["question"].as_str().unwrap(),
            lines[i]["answer"].as_str().unwrap(),
        )
    };
    let line = |prompt: &str| key.find(prompt).map(|q| q.line);
    assert_eq!(line(&few_shot(&[solved(0)], BETTY)), Some(2));
    // The position decides, not the order of the key.
    assert_eq!(line(&few_shot(&[solved(2), solved(1)], NATALIA)), Some(0));
    assert_eq!(line(NATALIA), Some(0));
    assert_eq!(line("Question: how many clips?"), None);
    // A question that is part of another, found at the same place: the longer wins.
    let key = AnswerKey::parse(&jsonl(&[
        json!({"question": "How many?", "answer": "#### 1"}),
        json!({"question": "How many? Say it.", "answer": "#### 2"}),
    ]))
    .unwrap();
    assert_eq!(key.find("Q: How many? Say it.").map(|q| q.line), Some(1));
    assert_eq!(key.find("Q: How many?").map(|q| q.line), Some(0));
}

#[test]
fn prompt_texts_are_read_from_completions_and_chat() {
    let text = |api, body: Value| prompt_text(api, body.to_string().as_bytes());
    assert_eq!(
        text(Api::Completions, json!({"prompt": "a b"})).as_deref(),
        Some("a b")
    );
    assert_eq!(
        text(Api::Completions, json!({"prompt": ["a b"]})).as_deref(),
        Some("a b")
    );
    assert_eq!(text(Api::Completions, json!({"prompt": [1, 2]})), None);
    let chat = json!({"messages": [
        {"role": "system", "content": "sys "},
        {"role": "user", "content": [{"type": "text", "text": "one "},
                                      {"type": "image_url", "image_url": {"url": "x"}},
                                      {"type": "text", "text": "two"}]},
        {"role": "assistant", "content": null, "tool_calls": []},
        {"role": "user", "content": " three"},
    ]});
    assert_eq!(
        text(Api::Chat, chat.clone()).as_deref(),
        Some("sys one two three")
    );
    assert_eq!(text(Api::Tgi, chat), None);
}

#[test]
fn half_wrong_is_every_second_matched_request() {
    let plan = FaultPlan::new(&[(Fault::WrongAnswer, 0.5)]);
    let wrong: Vec<u64> = (0..4)
        .filter_map(|_| match plan.next() {
            (k, Some(Fault::WrongAnswer)) => Some(k),
            _ => None,
        })
        .collect();
    assert_eq!(wrong, [1, 3]);
}

// The server.

async fn server(name: &str, lines: &[Value], config: MockConfig) -> MockServer {
    let path = key_file(name, &jsonl(lines));
    let server = spawn(MockConfig {
        answer_key: Some(path.clone()),
        ..config
    })
    .await
    .expect("start the mock server");
    // Read at start: the file is no longer needed.
    let _ = std::fs::remove_file(path);
    server
}

/// What a client saw of one answer.
#[derive(Debug)]
struct Seen {
    status: u16,
    /// The content text (a chat answer's reasoning left out).
    text: String,
    finish_reason: Option<String>,
    completion_tokens: Option<u64>,
    /// The streamed chunks with content, each one's text.
    chunks: Vec<String>,
    body: Value,
}

async fn ask(server: &MockServer, path: &str, id: Option<&str>, body: &Value) -> Seen {
    let mut request = reqwest::Client::new()
        .post(format!("{}{path}", server.base_url()))
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(id) = id {
        request = request.header("x-request-id", id);
    }
    let response = request.send().await.expect("send the request");
    let status = response.status().as_u16();
    let text = response.text().await.expect("read the body");
    let mut seen = Seen {
        status,
        text: String::new(),
        finish_reason: None,
        completion_tokens: None,
        chunks: Vec::new(),
        body: Value::Null,
    };
    let content = |choice: &Value| {
        choice
            .get("text")
            .or_else(|| choice.get("delta").and_then(|d| d.get("content")))
            .or_else(|| choice.get("message").and_then(|m| m.get("content")))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    if body["stream"] == json!(true) && status == 200 {
        for data in text.split("\n\n").filter_map(|e| e.strip_prefix("data: ")) {
            if data == "[DONE]" {
                continue;
            }
            let chunk: Value = serde_json::from_str(data).expect("a JSON chunk");
            if let Some(choice) = chunk["choices"].get(0) {
                if let Some(piece) = content(choice) {
                    seen.text.push_str(&piece);
                    seen.chunks.push(piece);
                }
                if let Some(reason) = choice["finish_reason"].as_str() {
                    seen.finish_reason = Some(reason.to_owned());
                }
            }
            if let Some(tokens) = chunk["usage"]["completion_tokens"].as_u64() {
                seen.completion_tokens = Some(tokens);
            }
        }
    } else {
        seen.body = serde_json::from_str(&text).expect("a JSON body");
        if let Some(choice) = seen.body["choices"].get(0) {
            seen.text = content(choice).unwrap_or_default();
            seen.finish_reason = choice["finish_reason"].as_str().map(str::to_owned);
        }
        seen.completion_tokens = seen.body["usage"]["completion_tokens"].as_u64();
    }
    seen
}

const PATHS: [&str; 2] = ["/v1/completions", "/v1/chat/completions"];

/// A request for `path` whose prompt is `prompt` (chat: one user message), with `extra`
/// members.
fn request(path: &str, prompt: &str, stream: bool, extra: Value) -> Value {
    let mut body = if path.ends_with("chat/completions") {
        json!({"model": "m", "messages": [{"role": "user", "content": prompt}]})
    } else {
        json!({"model": "m", "prompt": prompt})
    };
    body["stream"] = json!(stream);
    body["stream_options"] = json!({"include_usage": true});
    for (key, value) in extra.as_object().unwrap() {
        body[key] = value.clone();
    }
    body
}

fn tokens(text: &str) -> u64 {
    text.chars().count().div_ceil(4) as u64
}

async fn recorded_over_http(server: &MockServer) -> Value {
    let text = reqwest::get(format!("{}/mock/answers", server.base_url()))
        .await
        .expect("GET /mock/answers")
        .text()
        .await
        .expect("read the body");
    serde_json::from_str(&text).expect("a JSON body")
}

#[tokio::test]
async fn questions_are_answered_right_on_both_endpoints_streamed_and_whole() {
    let server = server("right", &gsm8k(), MockConfig::default()).await;
    let lines = gsm8k();
    let solved = (NATALIA, lines[0]["answer"].as_str().unwrap());
    let asked = [(NATALIA, "72"), (WENG, "10"), (BETTY, "1000")];
    let mut n = 0;
    let mut want = Vec::new();
    for path in PATHS {
        for stream in [true, false] {
            for (question, (text, label)) in asked.iter().enumerate() {
                let id = format!("g-{n}");
                n += 1;
                let prompt = few_shot(&[solved], text);
                let seen = ask(
                    &server,
                    path,
                    Some(&id),
                    &request(path, &prompt, stream, json!({})),
                )
                .await;
                let answer = format!("The answer is {label}.\n#### {label}");
                assert_eq!(seen.status, 200, "{seen:?}");
                assert_eq!(seen.text, answer, "{path} stream {stream}");
                assert_eq!(seen.finish_reason.as_deref(), Some("stop"), "{seen:?}");
                assert_eq!(seen.completion_tokens, Some(tokens(&answer)), "{seen:?}");
                if stream {
                    assert_eq!(seen.chunks.len() as u64, tokens(&answer));
                }
                want.push(GradedAnswer {
                    id: Some(id),
                    question,
                    correct: true,
                });
            }
        }
    }
    // Not a question of the key: the ordinary words, and no record.
    let seen = ask(
        &server,
        PATHS[0],
        Some("plain"),
        &request(
            PATHS[0],
            "Tell me a story.",
            false,
            json!({"max_tokens": 3}),
        ),
    )
    .await;
    assert_eq!(seen.text, " the of and");
    assert_eq!(seen.finish_reason.as_deref(), Some("length"));
    // Without an id, a matched request is recorded all the same.
    ask(
        &server,
        PATHS[1],
        None,
        &request(PATHS[1], WENG, false, json!({})),
    )
    .await;
    want.push(GradedAnswer {
        id: None,
        question: 1,
        correct: true,
    });
    assert_eq!(server.answers(), want);
    assert_eq!(
        recorded_over_http(&server).await,
        serde_json::to_value(&want).unwrap()
    );
    assert_eq!(
        recorded_over_http(&server).await[12],
        json!({"id": null, "question": 1, "correct": true})
    );
}

#[tokio::test]
async fn half_the_matched_requests_are_wrong_in_the_plans_pattern() {
    let server = server(
        "half",
        &gsm8k(),
        MockConfig {
            wrong_answer_rate: 0.5,
            ..MockConfig::default()
        },
    )
    .await;
    let asked = [(NATALIA, 72), (WENG, 10), (BETTY, 1000), (NATALIA, 72u64)];
    let mut right = Vec::new();
    for (i, &(question, want)) in asked.iter().enumerate() {
        let path = PATHS[i % 2];
        let stream = i < 2;
        let seen = ask(
            &server,
            path,
            Some(&format!("q-{i}")),
            &request(path, question, stream, json!({})),
        )
        .await;
        let got = label(&seen.text).unwrap();
        assert!(
            seen.text
                .starts_with(&format!("The answer is {got}.\n#### {got}")),
            "{seen:?}"
        );
        right.push(got == want.to_string());
        if got != want.to_string() {
            assert_eq!(got, (want + 1).to_string());
        }
        // Requests that ask no question are not counted by the rate.
        ask(
            &server,
            path,
            Some(&format!("p-{i}")),
            &request(path, "no question", stream, json!({"max_tokens": 2})),
        )
        .await;
    }
    // --fail-rate's pattern at 0.5: matched requests 1 and 3.
    assert_eq!(right, [true, false, true, false]);
    let records = server.answers();
    let correct: Vec<bool> = records.iter().map(|r| r.correct).collect();
    assert_eq!(correct, right);
    let questions: Vec<usize> = records.iter().map(|r| r.question).collect();
    assert_eq!(questions, [0, 1, 2, 0]);
    assert_eq!(records.iter().filter(|r| !r.correct).count(), 2);
}

#[tokio::test]
async fn multiple_choice_is_answered_with_letters_and_broken_with_the_next() {
    let right = server("mcq-right", &mcq(), MockConfig::default()).await;
    let wrong = server(
        "mcq-wrong",
        &mcq(),
        MockConfig {
            wrong_answer_rate: 1.0,
            ..MockConfig::default()
        },
    )
    .await;
    let lines = mcq();
    let expect = [("B", "C"), ("C", "A"), ("C", "D")];
    for path in PATHS {
        for stream in [true, false] {
            for (line, (good, bad)) in lines.iter().zip(expect) {
                let prompt = format!(
                    "{}\nA. ...\nB. ...\nAnswer with the letter.",
                    line["question"].as_str().unwrap()
                );
                let body = request(path, &prompt, stream, json!({}));
                let seen = ask(&right, path, Some("c"), &body).await;
                assert_eq!(seen.text, format!("Answer: {good}"), "{seen:?}");
                assert_eq!(seen.finish_reason.as_deref(), Some("stop"));
                assert_eq!(seen.completion_tokens, Some(3));
                let seen = ask(&wrong, path, Some("c"), &body).await;
                assert_eq!(seen.text, format!("Answer: {bad}"), "{seen:?}");
            }
        }
    }
    let marks = |server: &MockServer| -> Vec<(usize, bool)> {
        server
            .answers()
            .iter()
            .map(|r| (r.question, r.correct))
            .collect()
    };
    let questions = [0, 1, 2].repeat(4);
    assert_eq!(
        marks(&right),
        questions.iter().map(|q| (*q, true)).collect::<Vec<_>>()
    );
    assert_eq!(
        marks(&wrong),
        questions.iter().map(|q| (*q, false)).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_chat_few_shot_conversation_matches_its_last_question() {
    let server = server("chat", &gsm8k(), MockConfig::default()).await;
    let lines = gsm8k();
    let path = PATHS[1];
    for stream in [true, false] {
        let body = json!({"model": "m", "stream": stream, "messages": [
            {"role": "system", "content": "Solve the problem."},
            {"role": "user", "content": NATALIA},
            {"role": "assistant", "content": lines[0]["answer"]},
            {"role": "user", "content": [{"type": "text", "text": BETTY}]},
        ]});
        let seen = ask(&server, path, Some("few"), &body).await;
        assert_eq!(seen.text, "The answer is 1000.\n#### 1000", "{seen:?}");
    }
    let questions: Vec<usize> = server.answers().iter().map(|r| r.question).collect();
    assert_eq!(questions, [2, 2]);
}

#[tokio::test]
async fn max_tokens_cuts_the_answer_and_it_is_not_counted_correct() {
    let server = server("cut", &gsm8k(), MockConfig::default()).await;
    for (path, limit) in [
        ("/v1/completions", "max_tokens"),
        ("/v1/chat/completions", "max_completion_tokens"),
    ] {
        for stream in [true, false] {
            let body = request(path, NATALIA, stream, json!({limit: 3}));
            let seen = ask(&server, path, Some("cut"), &body).await;
            assert_eq!(
                seen.text, "The answer i",
                "{path} stream {stream}: {seen:?}"
            );
            assert_eq!(seen.finish_reason.as_deref(), Some("length"));
            assert_eq!(seen.completion_tokens, Some(3));
        }
    }
    // A limit the answer fits in leaves it whole.
    let body = request(PATHS[0], NATALIA, true, json!({"max_tokens": 1000}));
    let seen = ask(&server, PATHS[0], Some("fits"), &body).await;
    assert_eq!(seen.text, "The answer is 72.\n#### 72");
    let correct: Vec<bool> = server.answers().iter().map(|r| r.correct).collect();
    assert_eq!(correct, [false, false, false, false, true]);
}

#[tokio::test]
async fn a_chat_answer_reasons_first_then_answers() {
    let server = server(
        "reasoning",
        &mcq(),
        MockConfig {
            reasoning: crate::Reasoning {
                tokens: 2,
                ..crate::Reasoning::default()
            },
            ..MockConfig::default()
        },
    )
    .await;
    let path = PATHS[1];
    let body = request(path, "What is 2 + 2?", false, json!({}));
    let seen = ask(&server, path, Some("r"), &body).await;
    assert_eq!(seen.text, "Answer: C");
    // 2 reasoning tokens and 3 pieces.
    assert_eq!(seen.completion_tokens, Some(5));
    assert_eq!(
        seen.body["choices"][0]["message"]["reasoning_content"],
        json!(" the of")
    );
}

#[tokio::test]
async fn a_structured_answer_comes_first_and_faults_do_not_use_the_plan() {
    // Every other request fails with 500; of the answered matched ones, every other is
    // wrong, counted over those alone.
    let server = server(
        "faults",
        &mcq(),
        MockConfig {
            fail_rate: 0.5,
            wrong_answer_rate: 0.5,
            ..MockConfig::default()
        },
    )
    .await;
    let path = PATHS[0];
    let mut texts = Vec::new();
    for i in 0..4 {
        let seen = ask(
            &server,
            path,
            Some(&format!("f-{i}")),
            &request(path, "What is 2 + 2?", false, json!({})),
        )
        .await;
        assert_eq!(seen.status, if i % 2 == 1 { 500 } else { 200 }, "{seen:?}");
        if seen.status == 200 {
            texts.push(seen.text);
        }
    }
    assert_eq!(texts, ["Answer: C", "Answer: A"]);
    // A choice constraint is answered with its first choice, and not graded.
    let body = request(
        path,
        "What is 2 + 2?",
        false,
        json!({"structured_outputs": {"choice": ["4", "5"]}}),
    );
    let seen = ask(&server, path, Some("s"), &body).await;
    assert_eq!(seen.text, "4");
    let ids: Vec<Option<String>> = server.answers().into_iter().map(|r| r.id).collect();
    assert_eq!(ids, [Some("f-0".to_owned()), Some("f-2".to_owned())]);
}

#[tokio::test]
async fn bad_keys_and_rates_are_refused_at_start() {
    let path = key_file(
        "spawn-bad",
        &format!("{}\n{{\"question\": 1}}\n", gsm8k()[0]),
    );
    let err = spawn(MockConfig {
        answer_key: Some(path.clone()),
        ..MockConfig::default()
    })
    .await
    .unwrap_err()
    .to_string();
    let _ = std::fs::remove_file(&path);
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert!(err.contains("line 2: "), "{err}");
    for rate in [1.5, -0.1, f64::NAN] {
        let err = spawn(MockConfig {
            wrong_answer_rate: rate,
            ..MockConfig::default()
        })
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains("--wrong-answer-rate"), "{err}");
    }
    let err = spawn(MockConfig {
        wrong_answer_rate: 0.5,
        ..MockConfig::default()
    })
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("needs an --answer-key"), "{err}");
    // It is not added to the other faults' rates.
    server(
        "spawn-ok",
        &mcq(),
        MockConfig {
            fail_rate: 0.75,
            wrong_answer_rate: 0.75,
            ..MockConfig::default()
        },
    )
    .await;
}
