//! Counting passed and failed tests in the output of each test runner a
//! test run drives: cargo's `test result:` lines, pytest's closing line
//! and node's test runner's `# pass` / `# fail` lines.

/// Passed and failed tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Tests that passed.
    pub passed: u64,
    /// Tests that failed (for pytest, errors too).
    pub failed: u64,
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, other: Counts) {
        self.passed += other.passed;
        self.failed += other.failed;
    }
}

/// Which runner's output a line comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reporter {
    /// `cargo test`: one `test result: ok. 5 passed; 0 failed; …` line per
    /// test binary.
    Cargo,
    /// `pytest -q`: one closing line, `3 passed, 1 failed in 0.52s`
    /// (possibly between `=` signs).
    Pytest,
    /// `node --test` (TAP or spec reporter): `# pass 12` and `# fail 0`
    /// (`ℹ pass 12` under the spec reporter).
    Node,
    /// A step whose output counts nothing (only its exit status).
    Nothing,
}

impl Reporter {
    /// What `line` adds to the counts, if anything.
    pub fn scan(self, line: &str) -> Counts {
        match self {
            Reporter::Cargo => cargo(line),
            Reporter::Pytest => pytest(line),
            Reporter::Node => node(line),
            Reporter::Nothing => Counts::default(),
        }
    }
}

/// The number before `word` in `text` (`"5 passed"` → 5).
fn count_before(text: &str, words: &[&str]) -> u64 {
    let tokens: Vec<&str> =
        text.split(|c: char| c.is_whitespace() || c == ',' || c == ';').collect();
    tokens
        .windows(2)
        .filter(|pair| words.contains(&pair[1]))
        .filter_map(|pair| pair[0].parse::<u64>().ok())
        .sum()
}

fn cargo(line: &str) -> Counts {
    match line.trim_start().strip_prefix("test result:") {
        Some(rest) => Counts {
            passed: count_before(rest, &["passed"]),
            failed: count_before(rest, &["failed"]),
        },
        None => Counts::default(),
    }
}

fn pytest(line: &str) -> Counts {
    let line = line.trim().trim_matches('=').trim();
    // Only the closing line: "... in 0.52s" or "... in 65.10s (0:01:05)".
    let Some((counts, duration)) = line.rsplit_once(" in ") else {
        return Counts::default();
    };
    let seconds = duration.split_whitespace().next().unwrap_or("");
    if seconds.strip_suffix('s').and_then(|s| s.parse::<f64>().ok()).is_none() {
        return Counts::default();
    }
    Counts {
        passed: count_before(counts, &["passed"]),
        failed: count_before(counts, &["failed", "error", "errors"]),
    }
}

fn node(line: &str) -> Counts {
    let line = line.trim_start();
    let rest = line.strip_prefix("# ").or_else(|| line.strip_prefix("ℹ "));
    let mut words = rest.unwrap_or("").split_whitespace();
    let (Some(kind), Some(number), None) = (words.next(), words.next(), words.next()) else {
        return Counts::default();
    };
    let Ok(number) = number.parse() else {
        return Counts::default();
    };
    match kind {
        "pass" => Counts { passed: number, failed: 0 },
        "fail" => Counts { passed: 0, failed: number },
        _ => Counts::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_all(reporter: Reporter, output: &str) -> Counts {
        let mut total = Counts::default();
        for line in output.lines() {
            total += reporter.scan(line);
        }
        total
    }

    #[test]
    fn cargo_result_lines_are_summed_over_test_binaries() {
        let output = "running 3 tests\ntest a ... ok\n\
            test result: ok. 3 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s\n\
            test result: FAILED. 10 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out\n\
            the words 5 passed in a log line count nothing\n";
        assert_eq!(scan_all(Reporter::Cargo, output), Counts { passed: 13, failed: 2 });
    }

    #[test]
    fn pytest_counts_only_its_closing_line_and_errors_as_failures() {
        let output = "..F.                                  [100%]\n\
            E   assert 'we passed 3 passed' == 'x'\n\
            ====== 3 passed, 1 failed, 2 errors in 65.10s (0:01:05) ======\n";
        assert_eq!(scan_all(Reporter::Pytest, output), Counts { passed: 3, failed: 3 });
        assert_eq!(
            scan_all(Reporter::Pytest, "41 passed in 0.52s\n"),
            Counts { passed: 41, failed: 0 }
        );
    }

    #[test]
    fn node_counts_tap_and_spec_summaries() {
        let tap = "ok 1 - a\n# tests 7\n# suites 1\n# pass 6\n# fail 1\n# cancelled 0\n";
        assert_eq!(scan_all(Reporter::Node, tap), Counts { passed: 6, failed: 1 });
        let spec = "✔ a (1ms)\nℹ tests 4\nℹ pass 4\nℹ fail 0\n";
        assert_eq!(scan_all(Reporter::Node, spec), Counts { passed: 4, failed: 0 });
        assert_eq!(scan_all(Reporter::Node, "# pass the salt\n"), Counts::default());
    }
}
