//! A fixed-capacity string buffer usable in `const fn`, so rule messages can be composed in const
//! evaluation (where a failed check panics with the message) as well as on the host.

/// A UTF-8 buffer of at most `N` bytes; longer text is cut with `…`.
#[derive(Clone, Copy)]
pub struct MsgBuf<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> Default for MsgBuf<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> MsgBuf<N> {
    /// An empty buffer.
    pub const fn new() -> Self {
        MsgBuf {
            bytes: [0; N],
            len: 0,
        }
    }

    /// Appends `s` (cut at a character boundary if the buffer is full).
    pub const fn push_str(mut self, s: &str) -> Self {
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            // Stop at a char boundary with room for "…" (3 bytes).
            if self.len + 4 > N && (b[i] & 0xC0) != 0x80 {
                let ell = "…".as_bytes();
                let mut j = 0;
                while j < ell.len() && self.len < N {
                    self.bytes[self.len] = ell[j];
                    self.len += 1;
                    j += 1;
                }
                return self;
            }
            if self.len < N {
                self.bytes[self.len] = b[i];
                self.len += 1;
            }
            i += 1;
        }
        self
    }

    /// Appends a decimal integer.
    pub const fn push_int(mut self, v: i64) -> Self {
        let mut digits = [0u8; 20];
        let mut n = if v < 0 { -(v as i128) } else { v as i128 };
        let mut k = 0;
        loop {
            digits[k] = b'0' + (n % 10) as u8;
            n /= 10;
            k += 1;
            if n == 0 {
                break;
            }
        }
        if v < 0 {
            self = self.push_str("-");
        }
        while k > 0 {
            k -= 1;
            let one = [digits[k]];
            self = match core::str::from_utf8(&one) {
                Ok(s) => self.push_str(s),
                Err(_) => self,
            };
        }
        self
    }

    /// Appends `[a, b, c]`.
    pub const fn push_list(mut self, v: &[i32]) -> Self {
        self = self.push_str("[");
        let mut i = 0;
        while i < v.len() {
            if i > 0 {
                self = self.push_str(", ");
            }
            self = self.push_int(v[i] as i64);
            i += 1;
        }
        self.push_str("]")
    }

    /// The text.
    pub const fn as_str(&self) -> &str {
        match core::str::from_utf8(self.bytes.split_at(self.len).0) {
            Ok(s) => s,
            Err(_) => "",
        }
    }
}
