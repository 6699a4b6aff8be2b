//! The rules on small repositories written for each case: what each file contributes to the
//! recipe, in what order, and the refusals.

use super::*;

fn files(entries: &[(&str, &str)]) -> Files {
    entries
        .iter()
        .map(|(p, t)| ((*p).to_owned(), (*t).to_owned()))
        .collect()
}

#[test]
fn pyproject_extra_and_pytest_config() {
    let f = files(&[(
        "pyproject.toml",
        r#"
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"
[project]
name = "demo"
requires-python = ">=3.9"
[project.optional-dependencies]
test = ["pytest>=7", "attrs"]
docs = ["sphinx"]
[tool.pytest.ini_options]
addopts = "-q"
"#,
    )]);
    let r = derive(&f).unwrap();
    // The newest offered Python that meets `>=3.9`.
    assert_eq!(r.env.python.as_deref(), Some("3.13"));
    // Without build isolation hatchling's editable build needs `editables`.
    assert_eq!(r.env.pip_packages, ["hatchling", "editables"]);
    assert_eq!(
        r.env.install.to_vec(),
        ["python -m pip install --no-build-isolation -e '.[test]'"]
    );
    assert_eq!(r.env.test_cmd, TestCmd::One("pytest -rA --color=no".into()));
    assert_eq!(r.env.log_parser.as_deref(), Some("parse_log_pytest"));
}

#[test]
fn python_from_the_specifier_else_the_classifiers() {
    let python = |file: &str, text: &str| {
        derive(&files(&[(file, text)]))
            .map(|r| r.env.python.unwrap_or_default())
            .map_err(|e| e.to_string())
    };
    let pyproject = |spec: &str| format!("[project]\nname = \"d\"\nrequires-python = \"{spec}\"\n");
    assert_eq!(
        python("pyproject.toml", &pyproject(">=3.8")),
        Ok("3.13".into())
    );
    assert_eq!(
        python("pyproject.toml", &pyproject(">=3.8,<3.12")),
        Ok("3.11".into())
    );
    assert_eq!(
        python("pyproject.toml", &pyproject(">=3.12")),
        Ok("3.13".into())
    );
    assert!(
        python("pyproject.toml", &pyproject(">=3.14"))
            .unwrap_err()
            .contains("none of the offered versions (3.13, 3.11)")
    );
    let classifiers = |versions: &[&str]| {
        let lines: Vec<String> = versions
            .iter()
            .map(|v| format!("    Programming Language :: Python :: {v}"))
            .collect();
        format!(
            "[metadata]\nname = d\nclassifiers =\n{}\n",
            lines.join("\n")
        )
    };
    assert_eq!(
        python("setup.cfg", &classifiers(&["3.10", "3.11"])),
        Ok("3.11".into())
    );
    // Listed versions none of the images has: the oldest offered one past them.
    assert_eq!(
        python("setup.cfg", &classifiers(&["3.8", "3.9"])),
        Ok("3.11".into())
    );
    assert_eq!(
        python("setup.cfg", &classifiers(&["3.12"])),
        Ok("3.13".into())
    );
    assert_eq!(
        python("setup.cfg", "[metadata]\nname = d\n"),
        Ok("3.13".into())
    );
}

#[test]
fn requirements_folder_includes_and_constraints() {
    let f = files(&[
        (
            "setup.cfg",
            "[metadata]\nname = demo\n[options]\npython_requires = >=3.7\n",
        ),
        (
            "requirements/tests.txt",
            "-r base.txt\npytest==8.3.4  # pinned\n-e .\n",
        ),
        ("requirements/base.txt", "iniconfig\n"),
        ("requirements/docs.txt", "sphinx\n"),
        ("constraints.txt", "iniconfig==2.0.0\n"),
    ]);
    let r = derive(&f).unwrap();
    assert_eq!(
        r.env.pip_packages,
        ["setuptools", "wheel", "iniconfig==2.0.0", "pytest==8.3.4"]
    );
    assert_eq!(r.env.test_cmd, TestCmd::One("pytest -rA --color=no".into()));
}

#[test]
fn dependency_groups_with_includes() {
    let f = files(&[(
        "pyproject.toml",
        r#"
[project]
name = "demo"
[dependency-groups]
lint = ["ruff"]
test = ["pytest", {include-group = "base"}]
base = ["six"]
"#,
    )]);
    let r = derive(&f).unwrap();
    assert!(r.env.pip_packages.contains(&"pytest".to_owned()));
    assert!(r.env.pip_packages.contains(&"six".to_owned()));
    assert!(!r.env.pip_packages.contains(&"ruff".to_owned()));
}

#[test]
fn unittest_when_nothing_says_pytest_and_refusals() {
    let r = derive(&files(&[(
        "setup.py",
        "from setuptools import setup\nsetup(name='x')\n",
    )]))
    .unwrap();
    assert_eq!(r.env.test_cmd, TestCmd::One("python -m unittest -v".into()));
    assert_eq!(r.env.log_parser.as_deref(), Some("parse_log_django"));
    assert_eq!(
        derive(&files(&[("README.md", "hi")])),
        Err(NoRecipe::NotPython)
    );
    let e = derive(&files(&[(
        "pyproject.toml",
        "[project]\nname='x'\nrequires-python='>=3.14'\n",
    )]))
    .unwrap_err();
    assert!(matches!(e, NoRecipe::Python { .. }), "{e}");
    let e = derive(&files(&[("pyproject.toml", "[project\n")])).unwrap_err();
    assert!(e.to_string().starts_with("pyproject.toml: "), "{e}");
}

#[test]
fn setup_cfg_extras_and_tox_deps() {
    let f = files(&[
        (
            "setup.cfg",
            "[options.extras_require]\ntesting =\n    pytest\n    attrs\n[tool:pytest]\naddopts = -q\n",
        ),
        (
            "tox.ini",
            "[testenv]\ndeps =\n    coverage\ncommands = pytest\n",
        ),
    ]);
    let r = derive(&f).unwrap();
    assert_eq!(
        r.env.install.to_vec(),
        ["python -m pip install --no-build-isolation -e '.[testing]'"]
    );
    assert!(r.env.pip_packages.contains(&"coverage".to_owned()));
    assert!(
        !r.env.pip_packages.contains(&"pytest".to_owned()),
        "pytest comes with the extra"
    );
    assert_eq!(r.version(), r.clone().version());
}

#[test]
fn lock_files_pin_the_requirements() {
    let uv_lock = r#"version = 1
requires-python = ">=3.9"

[[package]]
name = "demo"
version = "0.1.0"
source = { editable = "." }

[[package]]
name = "pytest"
version = "8.3.4"
source = { registry = "https://pypi.org/simple" }

[[package]]
name = "numpy"
version = "1.26.4"
source = { registry = "https://pypi.org/simple" }

[[package]]
name = "numpy"
version = "2.2.1"
source = { registry = "https://pypi.org/simple" }

[[package]]
name = "Attrs"
version = "24.2.0"
"#;
    let f = files(&[
        (
            "pyproject.toml",
            "[project]\nname = \"demo\"\n[dependency-groups]\ntest = [\"pytest[testing]>=8\", \"attrs\", \"numpy\"]\n",
        ),
        ("uv.lock", uv_lock),
        ("constraints.txt", "attrs==23.1.0\n"),
    ]);
    let r = derive(&f).unwrap();
    // A constraints line wins over the lock; a package locked twice stays as it was.
    for wanted in ["'pytest[testing]==8.3.4'", "attrs==23.1.0", "numpy"] {
        assert!(
            r.env.pip_packages.iter().any(|p| p == wanted),
            "{wanted}: {:?}",
            r.env.pip_packages
        );
    }
    assert!(r.sources.contains(&"uv.lock".to_owned()));
    let broken = files(&[
        ("pyproject.toml", "[project]\nname = \"d\"\n"),
        ("poetry.lock", "[[package]\n"),
    ]);
    assert!(
        matches!(derive(&broken), Err(NoRecipe::Unreadable { file, .. }) if file == "poetry.lock")
    );
}

#[test]
fn recipe_files() {
    for p in [
        "pyproject.toml",
        "requirements-dev.txt",
        "requirements/tests.txt",
        "tox.ini",
        "test-requirements.txt",
        "tests/requirements.txt",
    ] {
        assert!(is_recipe_file(p), "{p}");
    }
    for p in [
        "src/setup.py",
        "docs/requirements.txt",
        "README.md",
        "tests/data.txt",
        "tests/fixtures/requirements.txt",
    ] {
        assert!(!is_recipe_file(p), "{p}");
    }
}
