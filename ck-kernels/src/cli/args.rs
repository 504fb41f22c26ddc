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
    /// Further complete `error[..]: ..` lines (a front end reports every violation at once).
    pub more: Vec<String>,
}

impl CliError {
    /// An error under rule `rule`.
    pub fn new(rule: impl Into<String>, message: impl Into<String>) -> CliError {
        CliError {
            rule: rule.into(),
            message: message.into(),
            more: Vec::new(),
        }
    }

    /// A malformed command line.
    pub fn usage(message: impl Into<String>) -> CliError {
        CliError::new("usage", message)
    }
}

impl From<ck_core::Error> for CliError {
    fn from(e: ck_core::Error) -> CliError {
        CliError::new(e.rule.name(), e.to_string())
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
    /// Parses `argv` for a subcommand whose options are `valued` (`--key VALUE` or
    /// `--key=VALUE`) and `switches` (`--flag`); anything else starting with `--` is an error
    /// naming the known options, everything else is positional.
    pub fn parse(argv: &[String], valued: &[&str], switches: &[&str]) -> Result<Args, CliError> {
        let known = || {
            valued
                .iter()
                .map(|v| format!("--{v} VALUE"))
                .chain(switches.iter().map(|s| format!("--{s}")))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut a = Args::default();
        let mut i = 0;
        while i < argv.len() {
            let arg = &argv[i];
            match arg.strip_prefix("--") {
                Some(flag) if !flag.is_empty() => {
                    let (key, inline) = match flag.split_once('=') {
                        Some((k, v)) => (k, Some(v.to_string())),
                        None => (flag, None),
                    };
                    if switches.contains(&key) {
                        if inline.is_some() {
                            return Err(CliError::usage(format!("--{key} takes no value")));
                        }
                        a.switches.push(key.to_string());
                    } else if valued.contains(&key) {
                        let value = match inline {
                            Some(v) => v,
                            None => {
                                i += 1;
                                argv.get(i).cloned().ok_or_else(|| {
                                    CliError::usage(format!("--{key} needs a value"))
                                })?
                            }
                        };
                        a.values.insert(key.to_string(), value);
                    } else {
                        return Err(CliError::usage(format!(
                            "unknown option --{key}; known: {}",
                            known()
                        )));
                    }
                }
                _ => a.positional.push(arg.clone()),
            }
            i += 1;
        }
        Ok(a)
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
