//! The SWE-RL answer parser and edit application, and the reward over them: any completion
//! gives a reward in [-1, 1] or a format error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use swerve_swe_rl::{FileMap, parse_and_apply, search_replace_reward};

fuzz_target!(|data: &[u8]| {
    let completion = String::from_utf8_lossy(data);
    let code: FileMap = [
        (
            "src/a.py".to_owned(),
            "def f(x):\n    return x + 1\n\n\nclass C:\n    pass\n".to_owned(),
        ),
        ("b.py".to_owned(), "import os\nVALUE = 1\n".to_owned()),
    ]
    .into();
    let oracle: FileMap = [(
        "src/a.py".to_owned(),
        "def f(x):\n    return x + 2\n\n\nclass C:\n    pass\n".to_owned(),
    )]
    .into();
    let _ = parse_and_apply(&code, &completion);
    let outcome = search_replace_reward(&code, &oracle, &completion);
    assert!((-1.0..=1.0).contains(&outcome.reward), "{}", outcome.reward);
});
