//! [`FakeCommands`]: answers each program from a script and records every call.

use std::sync::Mutex;

use async_trait::async_trait;

use super::{CommandError, HostCommands, Output};

/// One scripted answer: any call whose argv starts with `prefix` gets `answer` (the first
/// matching rule wins; a rule with `once` is used up by its first match).
#[derive(Debug, Clone)]
struct Rule {
    prefix: Vec<String>,
    answer: Result<Output, CommandError>,
    once: bool,
}

/// Scripted programs. A call no rule matches is refused as a program that is not installed.
#[derive(Debug, Default)]
pub struct FakeCommands {
    rules: Mutex<Vec<Rule>>,
    calls: Mutex<Vec<Vec<String>>>,
}

impl FakeCommands {
    pub fn new() -> Self {
        Self::default()
    }

    /// Calls starting with `prefix` exit 0 printing `stdout`.
    pub fn ok(self, prefix: &[&str], stdout: &str) -> Self {
        self.rule(prefix, Ok(exit(0, stdout, "")), false)
    }

    /// Calls starting with `prefix` exit `code` with `stderr`.
    pub fn fails(self, prefix: &[&str], code: i32, stderr: &str) -> Self {
        self.rule(prefix, Ok(exit(code, "", stderr)), false)
    }

    /// The next call starting with `prefix` exits `code` with `stderr`; later ones go on to
    /// the next rule.
    pub fn fails_once(self, prefix: &[&str], code: i32, stderr: &str) -> Self {
        self.rule(prefix, Ok(exit(code, "", stderr)), true)
    }

    fn rule(self, prefix: &[&str], answer: Result<Output, CommandError>, once: bool) -> Self {
        self.rules.lock().unwrap().push(Rule {
            prefix: prefix.iter().map(|s| s.to_string()).collect(),
            answer,
            once,
        });
        self
    }

    /// Every call so far, each as its argv joined by spaces.
    pub fn calls(&self) -> Vec<String> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .map(|a| a.join(" "))
            .collect()
    }
}

fn exit(code: i32, stdout: &str, stderr: &str) -> Output {
    Output {
        code: Some(code),
        stdout: stdout.into(),
        stderr: stderr.into(),
    }
}

#[async_trait]
impl HostCommands for FakeCommands {
    async fn run(&self, argv: &[&str]) -> Result<Output, CommandError> {
        self.calls
            .lock()
            .unwrap()
            .push(argv.iter().map(|s| s.to_string()).collect());
        let mut rules = self.rules.lock().unwrap();
        let found = rules.iter().position(|r| {
            r.prefix.len() <= argv.len() && r.prefix.iter().zip(argv).all(|(p, a)| p == a)
        });
        match found {
            Some(i) if rules[i].once => rules.remove(i).answer,
            Some(i) => rules[i].answer.clone(),
            None => Err(CommandError::Spawn {
                program: argv.first().unwrap_or(&"").to_string(),
                message: "No such file or directory (os error 2)".into(),
            }),
        }
    }
}
