//! `ptxas -v` output: registers, spills and stack per function, and wgmma serialisation.

/// What ptxas reported about one function of the module.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FunctionStats {
    /// The function's name.
    pub name: String,
    /// Whether it is a kernel entry (else a device function that was not inlined).
    pub entry: bool,
    /// Registers per thread.
    pub registers: u32,
    /// Local-memory stack frame, bytes.
    pub stack_frame: u32,
    /// Register spill stores, bytes.
    pub spill_stores: u32,
    /// Register spill loads, bytes.
    pub spill_loads: u32,
    /// ptxas serialised its wgmma instructions (advisories C7510/C7517): correct but slow.
    pub wgmma_serialized: bool,
}

fn number_before(line: &str, unit: &str) -> Option<u32> {
    let at = line.find(unit)?;
    line[..at].split_whitespace().last()?.parse().ok()
}

/// Parses the log of `ptxas -v`.
pub fn parse(log: &str) -> Vec<FunctionStats> {
    let mut fns: Vec<FunctionStats> = Vec::new();
    let index = |fns: &mut Vec<FunctionStats>, name: &str| -> usize {
        match fns.iter().position(|f| f.name == name) {
            Some(i) => i,
            None => {
                fns.push(FunctionStats {
                    name: name.to_string(),
                    ..FunctionStats::default()
                });
                fns.len() - 1
            }
        }
    };
    let quoted = |line: &str| line.split('\'').nth(1).map(str::to_string);
    let mut current: Option<usize> = None;
    for line in log.lines() {
        if line.contains("Compiling entry function") {
            if let Some(n) = quoted(line) {
                let i = index(&mut fns, &n);
                fns[i].entry = true;
                current = Some(i);
            }
        } else if let Some(n) = line.split("Function properties for ").nth(1) {
            current = Some(index(&mut fns, n.trim()));
        } else if line.contains("bytes stack frame") {
            if let Some(i) = current {
                fns[i].stack_frame = number_before(line, "bytes stack frame").unwrap_or(0);
                fns[i].spill_stores = number_before(line, "bytes spill stores").unwrap_or(0);
                fns[i].spill_loads = number_before(line, "bytes spill loads").unwrap_or(0);
            }
        } else if line.contains("Used") && line.contains("registers") {
            if let Some(i) = current {
                fns[i].registers = number_before(line, "registers").unwrap_or(0);
            }
        } else if line.contains("wgmma.mma_async instructions are serialized")
            || line.contains("warpgroup.wait is injected")
        {
            // The advisory names the function: "... in the function 'name'".
            let named = line
                .rsplit_once("function '")
                .and_then(|(_, r)| r.split('\'').next())
                .map(str::to_string);
            match named.map(|n| index(&mut fns, &n)).or(current) {
                Some(i) => fns[i].wgmma_serialized = true,
                None => fns.push(FunctionStats {
                    name: "(unknown)".into(),
                    wgmma_serialized: true,
                    ..FunctionStats::default()
                }),
            }
        }
    }
    fns
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_helpers_spills_and_serialisation() {
        let log = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'gemm_bf16' for 'sm_90a'
ptxas info    : Function properties for gemm_bf16
    32 bytes stack frame, 36 bytes spill stores, 32 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers, 32 bytes cumulative stack size
ptxas info    : Function properties for helper
    16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'wg' for 'sm_90a'
ptxas info    : (C7517) Potential Performance Loss: wgmma.mma_async instructions are serialized due to the presence of Extern calls in the function 'wg'
ptxas info    : Function properties for wg
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers
";
        let f = parse(log);
        assert_eq!(
            f[0],
            FunctionStats {
                name: "gemm_bf16".into(),
                entry: true,
                registers: 128,
                stack_frame: 32,
                spill_stores: 36,
                spill_loads: 32,
                wgmma_serialized: false
            }
        );
        assert_eq!(
            (f[1].name.as_str(), f[1].entry, f[1].stack_frame),
            ("helper", false, 16)
        );
        assert_eq!(
            (f[2].name.as_str(), f[2].registers, f[2].wgmma_serialized),
            ("wg", 168, true)
        );
    }
}
