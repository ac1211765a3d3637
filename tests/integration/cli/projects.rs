//! `weir init` and `weir build` as a new user runs them, outside this
//! repository: make a project in each language, run its own tests, build
//! it into a component and run its pipeline, which prints the revenue
//! example's totals.

use std::path::Path;
use std::process::Command;

use crate::support::*;

/// Run `program args` in `dir`, expecting success; its stdout.
fn run_in(dir: &Path, program: &str, args: &[&str]) -> String {
    let output = Command::new(program)
        .args(args)
        .current_dir(dir)
        .env_remove("WEIR_DATA_DIR")
        .output()
        .unwrap_or_else(|e| panic!("{program} does not start: {e}"));
    assert!(
        output.status.success(),
        "{program} {args:?} in {} failed:\n{}\n{}",
        dir.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `weir init NAME --lang LANG`, its set-up and tests (`commands`), `weir
/// build` and `weir run`: the pipeline's output is the revenue example's.
fn init_test_build_run(lang: &str, commands: &[&[&str]]) {
    let dir = tempfile::tempdir().unwrap();
    let weir = env!("CARGO_BIN_EXE_weir");
    let name = format!("my-{lang}-fn");
    let created = run_in(dir.path(), weir, &["init", &name, "--lang", lang]);
    assert!(created.contains("weir build"), "{created}");
    let project = dir.path().join(&name);
    let wit = match lang {
        "python" => ".weir/guest-sdk/python/weir/wit/weir.wit",
        "typescript" => ".weir/guest-sdk/js/wit/weir.wit",
        _ => ".weir/wit/weir.wit",
    };
    assert!(project.join(wit).is_file(), "the SDK's WIT is in the project: {wit}");
    for command in commands {
        run_in(&project, command[0], &command[1..]);
    }
    let built = run_in(&project, weir, &["build"]);
    assert!(built.contains(&format!("build/{name}.wasm")), "{built}");
    let data = project.join("data");
    share_component_cache(&data);
    let output = run_in(&project, weir, &["run", "pipeline.yaml", "--fresh", "--data-dir", "data"]);
    let expected = [
        r#"{"order_id":110,"customer_id":1,"amount":20.00,"total":20.00}"#,
        r#"{"order_id":114,"customer_id":1,"amount":30.00,"total":50.00}"#,
        r#"{"order_id":151,"customer_id":2,"amount":20.00,"total":48.00}"#,
        r#"{"order_id":150,"customer_id":3,"amount":9.75,"total":17.00}"#,
    ];
    for line in expected {
        assert!(output.lines().any(|l| l == line), "{lang}: no {line} in\n{output}");
    }
    assert_eq!(output.lines().count(), 7, "{lang}: {output}");
}

#[test]
fn a_new_python_project_tests_builds_and_runs() {
    init_test_build_run("python", &[&["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider"]]);
}

#[test]
fn a_new_typescript_project_installs_tests_builds_and_runs() {
    init_test_build_run(
        "typescript",
        &[&["npm", "install", "--no-audit", "--no-fund"], &["npm", "test"]],
    );
}

#[test]
fn a_new_rust_project_tests_builds_and_runs() {
    let wasip2 = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).lines().any(|l| l == "wasm32-wasip2"));
    if !wasip2 {
        // `weir build` of a Rust project needs rustup's wasm32-wasip2
        // target (this checkout's own functions may be built with
        // Debian's toolchain instead, which only scripts/dev knows).
        eprintln!("SKIPPED: rustup has no wasm32-wasip2 target here");
        return;
    }
    init_test_build_run("rust", &[&["cargo", "test", "-q"]]);
}
