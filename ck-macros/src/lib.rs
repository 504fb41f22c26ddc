//! Proc-macro entry points of ck-rs. Each is a thin wrapper over the `ck-dsl` front end, which
//! parses, checks, lowers and emits; keeping the logic there makes it unit-testable and shared
//! with the `ck` command.
