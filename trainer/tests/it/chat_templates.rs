//! Real chat templates, rendered as `transformers` renders them. The fixtures under
//! `tests/data/chat_templates/` are `tokenizer_config.json` files holding the `chat_template`,
//! `bos_token` and `eos_token` of Qwen2.5-Instruct and Llama-3.1-Instruct; every expected string
//! was checked against Jinja2 set up as `transformers`' `apply_chat_template` sets it up
//! (`ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)`, loop controls,
//! `tools=None`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use dfdx::prelude::Cpu;
use swerve_swebench::Instance;
use swerve_trainer::data::{PromptStyle, Prompter};
use swerve_trainer::error::Error;
use swerve_trainer::model::CausalLm;
use swerve_trainer::prompt::chat_template::{ChatMessage, ChatTemplate};
use swerve_trainer::prompt::{self, PromptFormat};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/chat_templates")
        .join(name)
}

fn template(name: &str) -> ChatTemplate {
    ChatTemplate::from_checkpoint(&fixture(name))
        .unwrap()
        .expect("the fixture has a chat template")
}

fn system_and_user() -> Vec<ChatMessage> {
    vec![
        ChatMessage::new("system", "You are a careful engineer."),
        ChatMessage::new("user", "Fix the bug in `parse()`."),
    ]
}

/// A longer conversation: whitespace around turns, an assistant turn, non-ASCII text.
fn multi_turn() -> Vec<ChatMessage> {
    vec![
        ChatMessage::new("system", "You are a careful engineer.\n"),
        ChatMessage::new("user", "  Fix the bug in `parse()`.\n"),
        ChatMessage::new("assistant", "<think>\nok\n</think>"),
        ChatMessage::new("user", "Again, é."),
    ]
}

#[test]
fn qwen2_5_system_and_user_with_generation_prompt() {
    assert_eq!(
        template("qwen2.5-instruct")
            .render(&system_and_user(), true)
            .unwrap(),
        "<|im_start|>system\nYou are a careful engineer.<|im_end|>\n\
         <|im_start|>user\nFix the bug in `parse()`.<|im_end|>\n\
         <|im_start|>assistant\n"
    );
}

#[test]
fn llama_3_1_system_and_user_with_generation_prompt() {
    // Llama 3.1 dates its system turn with `date_string`, which transformers does not pass: the
    // template's own default shows up.
    assert_eq!(
        template("llama-3.1-instruct")
            .render(&system_and_user(), true)
            .unwrap(),
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n\
         Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n\
         You are a careful engineer.<|eot_id|>\
         <|start_header_id|>user<|end_header_id|>\n\nFix the bug in `parse()`.<|eot_id|>\
         <|start_header_id|>assistant<|end_header_id|>\n\n"
    );
}

#[test]
fn qwen2_5_multi_turn_keeps_content_whitespace() {
    assert_eq!(
        template("qwen2.5-instruct")
            .render(&multi_turn(), true)
            .unwrap(),
        "<|im_start|>system\nYou are a careful engineer.\n<|im_end|>\n\
         <|im_start|>user\n  Fix the bug in `parse()`.\n<|im_end|>\n\
         <|im_start|>assistant\n<think>\nok\n</think><|im_end|>\n\
         <|im_start|>user\nAgain, é.<|im_end|>\n\
         <|im_start|>assistant\n"
    );
}

#[test]
fn llama_3_1_multi_turn_trims_content() {
    assert_eq!(
        template("llama-3.1-instruct")
            .render(&multi_turn(), true)
            .unwrap(),
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n\
         Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n\
         You are a careful engineer.<|eot_id|>\
         <|start_header_id|>user<|end_header_id|>\n\nFix the bug in `parse()`.<|eot_id|>\
         <|start_header_id|>assistant<|end_header_id|>\n\n<think>\nok\n</think><|eot_id|>\
         <|start_header_id|>user<|end_header_id|>\n\nAgain, é.<|eot_id|>\
         <|start_header_id|>assistant<|end_header_id|>\n\n"
    );
}

#[test]
fn without_a_system_turn_templates_write_their_default() {
    let user = [ChatMessage::new("user", "Hi")];
    assert_eq!(
        template("qwen2.5-instruct").render(&user, true).unwrap(),
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful \
         assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    );
    assert_eq!(
        template("llama-3.1-instruct").render(&user, true).unwrap(),
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n\
         Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>\
         <|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>\
         <|start_header_id|>assistant<|end_header_id|>\n\n"
    );
}

#[test]
fn without_generation_prompt_the_last_turn_is_closed() {
    for name in ["qwen2.5-instruct", "llama-3.1-instruct"] {
        let t = template(name);
        let open = t.render(&system_and_user(), true).unwrap();
        let closed = t.render(&system_and_user(), false).unwrap();
        assert!(
            open.starts_with(&closed) && open.len() > closed.len(),
            "{name}"
        );
        // The eos token is the end-of-turn marker of both (Qwen puts a newline after it).
        let eos = t.eos_token().unwrap();
        assert!(
            closed.trim_end_matches('\n').ends_with(eos),
            "{name}: {closed}"
        );
    }
}

#[test]
fn special_tokens_come_from_the_config() {
    let qwen = template("qwen2.5-instruct");
    assert_eq!(qwen.bos_token(), None);
    assert_eq!(qwen.eos_token(), Some("<|im_end|>"));
    let llama = template("llama-3.1-instruct");
    assert_eq!(llama.bos_token(), Some("<|begin_of_text|>"));
    assert_eq!(llama.eos_token(), Some("<|eot_id|>"));
    assert!(
        llama
            .path()
            .ends_with("llama-3.1-instruct/tokenizer_config.json")
    );
}

fn task() -> Instance {
    Instance {
        instance_id: "o__r-1".into(),
        problem_statement: Some("It breaks.".into()),
        code_context: BTreeMap::from([("m.py".to_owned(), "x = 1\n".to_owned())]),
        ..Instance::default()
    }
}

#[test]
fn prompter_renders_tasks_through_the_models_template() {
    let style = PromptStyle {
        format: PromptFormat::Template,
        focus: None,
    };
    let prompter = Prompter::for_model(style, &fixture("llama-3.1-instruct")).unwrap();
    assert!(
        !prompter.add_special_tokens(),
        "the template writes the BOS"
    );
    let prompt = prompter.render(&task()).unwrap();
    let files = task().code_context;
    let text = prompt::task_text(&prompt::PromptTask {
        problem_statement: "It breaks.",
        files: &files,
    });
    assert!(
        prompt.starts_with(&format!(
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n\
             Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n{}",
            prompt::INSTRUCTIONS
        )),
        "{prompt}"
    );
    assert!(
        prompt.ends_with(&format!(
            "<|start_header_id|>user<|end_header_id|>\n\n{text}<|eot_id|>\
             <|start_header_id|>assistant<|end_header_id|>\n\n"
        )),
        "{prompt}"
    );
}

#[test]
fn template_format_for_a_model_without_a_template_names_its_config() {
    let style = PromptStyle {
        format: PromptFormat::Template,
        focus: None,
    };
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tiny-qwen2");
    let err = Prompter::for_model(style, &model).unwrap_err();
    assert!(matches!(err, Error::ChatTemplate { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("tiny-qwen2/tokenizer_config.json") && text.contains("chatml"),
        "{text}"
    );
    // Other formats read nothing from the model and need no template.
    let chatml = PromptStyle {
        format: PromptFormat::ChatMl,
        focus: None,
    };
    let prompter = Prompter::for_model(chatml, &model).unwrap();
    assert!(prompter.add_special_tokens());
    assert!(
        prompter
            .render(&task())
            .unwrap()
            .starts_with("<|im_start|>system\n")
    );
}

#[test]
fn checkpoints_carry_the_chat_template() {
    let dir = tempfile::tempdir().unwrap();
    let model_dir = dir.path().join("model");
    fs_err::create_dir_all(&model_dir).unwrap();
    let tiny = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tiny-qwen2");
    fs_err::copy(
        tiny.join("tokenizer.json"),
        model_dir.join("tokenizer.json"),
    )
    .unwrap();
    fs_err::copy(
        fixture("qwen2.5-instruct").join("tokenizer_config.json"),
        model_dir.join("tokenizer_config.json"),
    )
    .unwrap();
    fs_err::write(model_dir.join("chat_template.jinja"), "{{ eos_token }}").unwrap();
    let model = CausalLm::<f32, Cpu>::load(&tiny, &Cpu::default()).unwrap();
    let checkpoint = dir.path().join("checkpoint-1");
    swerve_trainer::checkpoint::save(
        &checkpoint,
        &model,
        Some(&model_dir.join("tokenizer.json")),
        None,
        None,
    )
    .unwrap();
    let t = ChatTemplate::from_checkpoint(&checkpoint).unwrap().unwrap();
    assert_eq!(t.path(), checkpoint.join("chat_template.jinja"));
    assert_eq!(t.render(&[], false).unwrap(), "<|im_end|>");
}
