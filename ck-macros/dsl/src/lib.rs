//! The front end of ck-rs's macros (parse → check → lower → emit), used by `ck-macros` and by
//! the `ck` command so both give the same verdict on the same input.
