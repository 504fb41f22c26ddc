//! A small, strict command-line parser: `--flag value`, `--flag=value` and `--switch`; every
//! flag must be known to the subcommand and every value well-formed, otherwise a `usage` error.

use std::collections::BTreeMap;

/// An error for the user: the rule name printed as `error[rule]` and a message saying what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    /// Stable rule name (`usage`, or a ck-core rule such as `sfc-not-divisible`).
    pub rule: String,
    /// What went wrong and how to fix it.
    pub message: String,
}

impl CliError {
    /// A malformed command line.
    pub fn usage(message: impl Into<String>) -> CliError {
        CliError {
            rule: "usage".into(),
            message: message.into(),
        }
    }
}

impl From<ck_core::Error> for CliError {
    fn from(e: ck_core::Error) -> CliError {
        CliError {
            rule: e.rule.name().into(),
            message: e.to_string(),
        }
    }
}

/// Parsed options of one subcommand.
#[derive(Debug, Default)]
pub struct Args {
    values: BTreeMap<String, String>,
    switches: Vec<String>,
    positional: Vec<String>,
}

impl Args {
    /// Splits `argv` into `--key value` pairs, `--switch`es (a flag followed by another flag or
    /// nothing) and positional arguments.
    pub fn parse(argv: &[String]) -> Result<Args, CliError> {
        let mut a = Args::default();
        let mut i = 0;
        while i < argv.len() {
            let arg = &argv[i];
            if let Some(flag) = arg.strip_prefix("--") {
                if let Some((k, v)) = flag.split_once('=') {
                    a.values.insert(k.to_string(), v.to_string());
                } else if i + 1 < argv.len() && !argv[i + 1].starts_with("--") {
                    a.values.insert(flag.to_string(), argv[i + 1].clone());
                    i += 1;
                } else {
                    a.switches.push(flag.to_string());
                }
            } else {
                a.positional.push(arg.clone());
            }
            i += 1;
        }
        Ok(a)
    }

    /// Fails on any flag outside `valued` / `switches` (with the list of known ones).
    pub fn allow(&self, valued: &[&str], switches: &[&str]) -> Result<(), CliError> {
        let known = || {
            valued
                .iter()
                .map(|v| format!("--{v} VALUE"))
                .chain(switches.iter().map(|s| format!("--{s}")))
                .collect::<Vec<_>>()
                .join(", ")
        };
        for k in self.values.keys() {
            if switches.contains(&k.as_str()) {
                return Err(CliError::usage(format!("--{k} takes no value")));
            }
            if !valued.contains(&k.as_str()) {
                return Err(CliError::usage(format!(
                    "unknown option --{k}; known: {}",
                    known()
                )));
            }
        }
        for s in &self.switches {
            if valued.contains(&s.as_str()) {
                return Err(CliError::usage(format!("--{s} needs a value")));
            }
            if !switches.contains(&s.as_str()) {
                return Err(CliError::usage(format!(
                    "unknown option --{s}; known: {}",
                    known()
                )));
            }
        }
        Ok(())
    }

    /// Positional arguments.
    pub fn positional(&self) -> &[String] {
        &self.positional
    }

    /// Whether `--name` was given.
    pub fn switch(&self, name: &str) -> bool {
        self.switches.iter().any(|s| s == name)
    }

    /// The raw value of `--name`, if given.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// `--name a,b,c` as integers, if given.
    pub fn int_list(&self, name: &str) -> Result<Option<Vec<i32>>, CliError> {
        let Some(v) = self.value(name) else {
            return Ok(None);
        };
        v.split(',')
            .map(|s| {
                s.trim().parse::<i32>().map_err(|_| {
                    CliError::usage(format!(
                        "--{name}: `{s}` is not an integer; give a comma-separated list like 4,6"
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}
