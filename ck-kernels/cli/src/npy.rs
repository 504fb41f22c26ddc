//! Minimal `.npy` (NumPy format 1.0/2.0) reading and writing of little-endian f32 arrays.

use std::io::Write;

/// An f32 array and its shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    /// Dimensions (row-major).
    pub shape: Vec<usize>,
    /// Elements.
    pub data: Vec<f32>,
}

fn field<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let i = header.find(&format!("'{key}'"))?;
    let rest = header[i + key.len() + 2..]
        .trim_start()
        .strip_prefix(':')?
        .trim_start();
    Some(rest)
}

/// Reads an f32 `.npy` file; errors say what is wrong with it.
pub fn read(path: &str) -> Result<Array, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    parse(&bytes).map_err(|e| format!("{path}: {e}"))
}

/// Parses `.npy` bytes.
pub fn parse(bytes: &[u8]) -> Result<Array, String> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err("not a .npy file (bad magic)".into());
    }
    let (hlen, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(format!("unsupported .npy version {v}")),
    };
    let header = std::str::from_utf8(bytes.get(start..start + hlen).ok_or("truncated header")?)
        .map_err(|_| "header is not text")?;
    let descr = field(header, "descr").ok_or("header has no 'descr'")?;
    if !descr.starts_with("'<f4'") {
        let d = descr.split(',').next().unwrap_or(descr);
        return Err(format!(
            "dtype {d} is not supported; save the array as float32 ('<f4')"
        ));
    }
    if field(header, "fortran_order").is_some_and(|f| f.starts_with("True")) {
        return Err("Fortran-ordered arrays are not supported; save a C-contiguous array".into());
    }
    let shape_text = field(header, "shape").ok_or("header has no 'shape'")?;
    let inner = shape_text
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .ok_or("malformed shape")?;
    let shape: Vec<usize> = inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().map_err(|_| format!("malformed shape ({inner})")))
        .collect::<Result<_, _>>()?;
    let count: usize = shape.iter().product();
    let body = &bytes[start + hlen..];
    if body.len() != count * 4 {
        return Err(format!(
            "shape {shape:?} needs {} bytes of data, the file has {}",
            count * 4,
            body.len()
        ));
    }
    let data = body
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Ok(Array { shape, data })
}

/// Writes an f32 `.npy` file (version 1.0).
pub fn write(path: &str, a: &Array) -> Result<(), String> {
    let dims: Vec<String> = a.shape.iter().map(|d| d.to_string()).collect();
    let shape = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + a.data.len() * 4);
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in &a.data {
        out.extend_from_slice(&v.to_le_bytes());
    }
    std::fs::File::create(path)
        .and_then(|mut f| f.write_all(&out))
        .map_err(|e| format!("cannot write {path}: {e}"))
}
